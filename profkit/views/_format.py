"""Numbers, tactics and versions as people write them, for the report's tables and text."""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd

from profkit.analysis import decode_tactic

# Units shown in a table header, from the column name's suffix (the frames keep their names).
_UNITS = (("_ms", "ms"), ("_us", "us"), ("_s", "s"), ("_pct", "%"), ("_tok_s", "tok/s"))
# Kernel times: a few microseconds each, so tables show them in us (0.008013 ms reads as 8.013 us).
KERNEL_TIME_COLUMNS = ("time_ms", "default_ms", "default_time_ms", "pick_ms", "best_ms", "tuner_ms", "serving_ms",
                       "serving_p10_ms", "serving_p90_ms", "tuned_op_ms", "untuned_op_ms")


def number(value, *, digits: int = 4) -> str:
    """A number for people: ints as written (M=2560); floats to ``digits`` significant digits,
    thousands grouped, millions as ``3.71 M``.

    ``inf`` reads "never" (a break-even that never comes); NaN and NA read "".
    """
    if value is None or value is pd.NA:
        return ""
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, (int, np.integer)):
        return str(int(value))  # buckets, tokens and counts read as written (M=2560)
    if not isinstance(value, (float, np.floating)):
        return str(value)
    if math.isnan(value):
        return ""
    if math.isinf(value):
        return "never" if value > 0 else "-inf"
    size = abs(value)
    if size >= 1e6:
        return f"{value / 1e6:.3g} M"
    if size >= 1000 or (size >= 100 and float(value).is_integer()):
        return f"{value:,.0f}"
    if float(value).is_integer():
        return f"{int(value)}"
    return f"{value:.{digits}g}"


def seconds(value: float) -> str:
    """``41.6 s``, ``2.3 min``, ``1.3 h``."""
    if not np.isfinite(value):
        return "never"
    if value >= 3600:
        return f"{value / 3600:.2g} h"
    if value >= 120:
        return f"{value / 60:.2g} min"
    return f"{value:.1f} s"


def header(column: str) -> str:
    """``tuning_s`` -> ``tuning (s)``; other names unchanged."""
    for suffix, unit in sorted(_UNITS, key=lambda su: -len(su[0])):
        if column.endswith(suffix) and len(column) > len(suffix):
            return f"{column[: -len(suffix)].replace('_', ' ')} ({unit})"
    return column.replace("_", " ")


def tactic(runner, value) -> str:
    """A tactic decoded: 'cuDNN engine 0, KERNEL_CFG=12', 'cuBLAS heuristic #3', 'default (-1)'."""
    if value is None or value is pd.NA:
        return ""
    fields = decode_tactic(str(runner), str(value))
    kind = fields.get("tactic_kind")
    if kind == "default":
        return "default (-1)"
    if kind == "engine_knobs":
        knobs = fields.get("tactic_knobs") or ""
        return f"engine {fields['tactic_engine']}" + (f", {knobs}" if knobs else "")
    if kind == "index" and fields.get("tactic_index") is not None:
        return f"heuristic #{fields['tactic_index']}"
    return fields.get("tactic_desc") or str(value)


# "<Runner>:<tactic>" inside the text columns of comparisons (winners of several runs or ranks).
_PICK = re.compile(r"(\w+Runner):(\[(?:[^\[\]]|\[(?:[^\[\]]|\[[^\[\]]*\])*\])*\]|-?\d+)")


def picks(text) -> str:
    """Every 'Runner:tactic' in ``text`` with its tactic decoded ('CudnnBf16GemmRunner engine 0, KERNEL_CFG=12')."""
    if text is None or text is pd.NA:
        return ""
    return _PICK.sub(lambda m: f"{m.group(1)} {tactic(m.group(1), m.group(2))}", str(text))


def display_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` as strings: numbers via :func:`number`, tactics decoded, units in the headers, kernel times in us."""
    out = {}
    for col in frame.columns:
        series = frame[col]
        if col in KERNEL_TIME_COLUMNS:
            us = pd.to_numeric(series, errors="coerce") * 1e3
            out[header(col[:-3] + "_us")] = [number(v) for v in us.astype(object)]
            continue
        if col == "tactic" and "runner" in frame.columns:
            values = [tactic(r, t) for r, t in zip(frame["runner"], series)]
        elif col.startswith("tactic_") and f"runner_{col[7:]}" in frame.columns:
            values = [tactic(r, t) for r, t in zip(frame[f"runner_{col[7:]}"], series)]
        elif col == "winners":
            values = [picks(v) for v in series]
        else:
            values = [number(v) for v in series.astype(object)]
        out[header(col)] = values
    return pd.DataFrame(out)
