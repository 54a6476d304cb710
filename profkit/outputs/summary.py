"""``summary.json``: the verdicts as a JSON document, one entry per (op, GPU), beside the report's pages.

Read by scripts and CI; the report passes the verdict rows and its one-line reason for each."""

from __future__ import annotations

import math
import re

from pathlib import Path

import numpy as np
import pandas as pd

from profkit.analysis import verdict
from profkit.analysis.recommend import CHANCE_FASTER, CHANCE_LEVEL, RECOMMENDATIONS
from profkit.outputs import atomic

SCHEMA_VERSION = 2
UNITS = ("times in ms (*_ms), durations in s (*_s), effects (step_*, serving_best/worst and their _lo/_hi) as a "
         "fraction of the untuned time (tuned / untuned - 1: negative is faster), *_pct in percent, speedups as "
         "default / pick (bigger is faster)")


def summary_document(verdicts: pd.DataFrame, *, reasons, aa: pd.DataFrame, root: str = "") -> dict:
    """The verdicts as a JSON-ready document.

    Each entry holds ``op``, ``gpu``, ``flashinfer``, ``recommendation`` (keep, skip, plan, failed or unknown),
    ``reason`` (plain text on one line) and every column of :func:`~profkit.analysis.recommend.op_verdicts`
    (NaN as null); the document adds ``schema_version``, the ``units`` convention, the rule's constants and its
    A/A rate on this data.

    Args:
        verdicts: one row per (op, GPU) (:class:`profkit.report._model.ReportModel`'s ``verdicts``).
        reasons: one line per verdict row, in its order (Markdown marks are dropped).
        aa: the A/A rows of the GPU the report details.
        root: the data read.
    """
    entries = []
    for row, reason in zip(verdicts.itertuples(index=False), reasons, strict=True):
        entry = {k: _plain(v) for k, v in row._asdict().items()}
        entry.setdefault("gpu", None)
        entry.setdefault("flashinfer", None)
        entry["reason"] = _plain_text(reason)
        entries.append(entry)
    return {"schema_version": SCHEMA_VERSION, "data": root, "units": UNITS, "recommendations": list(RECOMMENDATIONS),
            "rule": {"confidence": verdict.CONFIDENCE, "drift_floor": verdict.DRIFT_FLOOR,
                     "min_units": verdict.MIN_UNITS, "chance_faster": CHANCE_FASTER, "chance_level": CHANCE_LEVEL,
                     "doc": "docs/comparison_rule.md"},
            "aa": [{k: _plain(v) for k, v in row.items()} for row in aa.to_dict("records")],
            "ops": entries}


def write_summary(path, document: dict) -> Path:
    """Write ``document`` to ``path`` (summary.json), atomically."""
    return atomic.write_json(path, document)


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
