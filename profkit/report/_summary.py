"""``summary.json``: the verdicts as a JSON document, one entry per (op, GPU), beside the pages."""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd

from profkit.analysis import verdict
from profkit.analysis.overview import CHANCE_FASTER, CHANCE_LEVEL, RECOMMENDATIONS

SCHEMA_VERSION = 2
UNITS = ("times in ms (*_ms), durations in s (*_s), effects (step_*, serving_best/worst and their _lo/_hi) as a "
         "fraction of the untuned time (tuned / untuned - 1: negative is faster), *_pct in percent, speedups as "
         "default / pick (bigger is faster)")


def summary_document(results, *, root: str = "", verdicts: pd.DataFrame | None = None) -> dict:
    """The verdicts as a JSON-ready document.

    Each entry holds ``op``, ``gpu``, ``flashinfer``, ``recommendation`` (keep, skip, plan, failed or unknown),
    ``reason`` (the report's one line for it), ``basis`` and every column of
    :func:`~profkit.analysis.overview.op_verdicts` (NaN as null); the document adds ``schema_version``, the
    ``units`` convention, the rule's constants and its A/A rate on this data.

    Args:
        results: the analyses of the GPU the report details (its ``aa``; its ``op_verdicts`` when ``verdicts`` is None).
        root: the data read.
        verdicts: one row per (op, GPU) (:class:`profkit.report._model.ReportModel`'s ``verdicts``).
    """
    from profkit.report._main import verdict_line

    rows = results.op_verdicts if verdicts is None else verdicts
    entries = []
    for row in rows.itertuples(index=False):
        entry = {k: _plain(v) for k, v in row._asdict().items()}
        entry.setdefault("gpu", None)
        entry.setdefault("flashinfer", None)
        entry["reason"] = _plain_text(verdict_line(row))
        entries.append(entry)
    return {"schema_version": SCHEMA_VERSION, "data": root, "units": UNITS, "recommendations": list(RECOMMENDATIONS),
            "rule": {"confidence": verdict.CONFIDENCE, "drift_floor": verdict.DRIFT_FLOOR,
                     "min_units": verdict.MIN_UNITS, "chance_faster": CHANCE_FASTER, "chance_level": CHANCE_LEVEL,
                     "doc": "docs/comparison_rule.md"},
            "aa": [{k: _plain(v) for k, v in row.items()} for row in results.aa.to_dict("records")],
            "ops": entries}


def _plain_text(markdown: str) -> str:
    """A Markdown verdict line as plain text on one line (no emphasis or code marks)."""
    return " ".join(re.sub(r"[*`]", "", markdown).split())


def _plain(value):
    if value is None or value is pd.NA:
        return None
    if isinstance(value, (np.bool_, bool)):
        return bool(value)
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return None if not math.isfinite(float(value)) else float(value)
    return value
