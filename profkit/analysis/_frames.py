"""Small helpers shared by the analysis functions: argument checks, row filters, shape labels."""

from __future__ import annotations

import ast
import math
import re
from typing import Sequence

import numpy as np
import pandas as pd

from profkit.schema import conform_columns, require  # noqa: F401 - re-exported for the analysis modules

# One tuning decision: what FlashInfer argmins over.
DECISION = ["run_id", "rank", "call", "op", "profile"]
# Default relative threshold (percent) when no repeated runs give a noise estimate. On the H200,
# up to 5 fp8 candidates sit within 2% of the winner (autotuner_errata.md, capture item 9).
DEFAULT_NOISE_PCT = 2.0


def empty(columns: dict[str, str]) -> pd.DataFrame:
    """An empty frame with ``columns`` ({name: dtype})."""
    return pd.DataFrame({name: pd.Series(dtype=dtype) for name, dtype in columns.items()})


def flashinfer_rows(candidates: pd.DataFrame) -> pd.DataFrame:
    """FlashInfer's own candidates (source 'flashinfer' or unknown), not profkit's default timing."""
    if "source" not in candidates.columns:
        return candidates
    source = candidates["source"].astype("string")
    return candidates[(source != "default").fillna(True).to_numpy(dtype=bool)]


def default_rows(candidates: pd.DataFrame) -> pd.DataFrame:
    """The timing of runners[0] with tactic -1 per decision: profkit's (source 'default'), or FlashInfer's own.

    Runners that offer -1 among their tactics (FlashInfer's SM90 fused MoE) have it timed by FlashInfer,
    and profkit's capture then does not time it again: for a decision without a 'default' row, the
    first FlashInfer candidate with tactic -1 is the default (FlashInfer times runners[0] first).
    """
    if "source" not in candidates.columns:
        return candidates.iloc[:0]
    source = candidates["source"].astype("string")
    own = candidates[(source == "default").fillna(False).to_numpy(dtype=bool)]
    keys = [k for k in DECISION if k in candidates.columns]
    minus_one = candidates[((source != "default").fillna(True) & (candidates["tactic"].astype("string") == "-1")
                            .fillna(False)).to_numpy(dtype=bool)]
    if minus_one.empty or not keys:
        return own
    minus_one = minus_one.drop_duplicates(keys, keep="first")
    covered = own[keys].drop_duplicates().assign(_own=True)
    lacking = minus_one.merge(covered, on=keys, how="left")["_own"].isna().to_numpy(dtype=bool)
    return pd.concat([own, minus_one[lacking]]) if lacking.any() else own


def group_ids(frame: pd.DataFrame, keys: Sequence[str]) -> np.ndarray:
    """One integer per distinct ``keys`` tuple (missing values are a value of their own)."""
    if frame.empty:
        return np.zeros(0, dtype=np.int64)
    codes = [pd.factorize(frame[k], use_na_sentinel=False)[0] for k in keys]
    combined = pd.factorize(codes[0].astype(np.int64))[0]
    for c in codes[1:]:
        # Dense codes again after each key, so the product stays far below 2**63 however many keys.
        combined = pd.factorize(combined * (int(c.max()) + 1) + c)[0]
    return combined


def max_by(values: np.ndarray, gid: np.ndarray, n_groups: int) -> np.ndarray:
    """Largest non-NaN value per group id (``np.nanmax`` of each group); NaN where a group has none."""
    values = np.asarray(values, dtype=float)
    keep = ~np.isnan(values)
    top = np.full(n_groups, -np.inf)
    np.maximum.at(top, gid[keep], values[keep])
    return np.where(np.bincount(gid[keep], minlength=n_groups) > 0, top, np.nan)


def any_by(flags: np.ndarray, gid: np.ndarray, n_groups: int) -> np.ndarray:
    """True per group id where any of its rows' ``flags`` is True."""
    return np.bincount(gid[np.asarray(flags, dtype=bool)], minlength=n_groups) > 0


def join_by(texts: Sequence[str], gid: np.ndarray, n_groups: int, sep: str) -> list[str]:
    """``sep.join`` of each group's texts, in row order; one string per group id ("" for a group without rows)."""
    order = np.argsort(gid, kind="stable")
    bounds = np.searchsorted(gid[order], np.arange(n_groups + 1))
    ordered = [texts[i] for i in order]
    return [sep.join(ordered[a:b]) for a, b in zip(bounds[:-1], bounds[1:])]


# -- shapes ------------------------------------------------------------------------------------
_SHAPE_CACHE: dict[str, str | None] = {}


def gemm_shape(profile) -> str | None:
    """'N=<n> K=<k>' for a GEMM profile text ``((.., M, K), (.., K, N), ...)``; None otherwise."""
    label = _shape_label(profile)
    return label if label is not None and label.startswith("N=") else None


def moe_shape(profile) -> str | None:
    """'E=<experts> top_k=<k> H=<hidden> I=<inter>' for a fused-MoE profile text; None otherwise.

    A fused-MoE profile holds ``(x (M, H), expert ids (M, k), scales (M, k), w1 (E, 2I or I, H),
    w2 (E, H, I), out (M, H))``: FlashInfer's SM90 CuTe-DSL MoE inputs in their call order.
    """
    label = _shape_label(profile)
    return label if label is not None and label.startswith("E=") else None


def op_shape(profile) -> str | None:
    """The problem-shape label of a GEMM or fused-MoE profile text (see gemm_shape, moe_shape)."""
    return _shape_label(profile)


def _shape_label(profile) -> str | None:
    if profile is None or (isinstance(profile, float) and math.isnan(profile)) or profile is pd.NA:
        return None
    text = str(profile)
    if text in _SHAPE_CACHE:
        return _SHAPE_CACHE[text]
    try:
        label = _moe_label(ast.literal_eval(text)) or _gemm_label(ast.literal_eval(text))
    except (ValueError, SyntaxError, TypeError, IndexError, MemoryError, RecursionError):
        label = None
    _SHAPE_CACHE[text] = label
    return label


def _gemm_label(parsed) -> str | None:
    a, b = parsed[0], parsed[1]
    if len(a) >= 2 and len(b) >= 2 and a[-1] == b[-2]:
        return f"N={int(b[-1])} K={int(a[-1])}"
    return None


def _moe_label(parsed) -> str | None:
    if len(parsed) != 6 or any(not isinstance(p, tuple) for p in parsed):
        return None
    x, ids, scales, w1, w2, out = parsed
    if (len(x) == 2 and len(ids) == 2 and ids == scales and len(w1) == 3 and len(w2) == 3 and out == x
            and w1[0] == w2[0] and x[1] == w1[2] == w2[1]):
        return f"E={int(w1[0])} top_k={int(ids[1])} H={int(x[1])} I={int(w2[2])}"
    return None


_NUMBER = re.compile(r"-?\d+")


def shapes_of(frame: pd.DataFrame) -> pd.Series:
    """Problem-shape label per row: 'N=.. K=..' for GEMMs, 'E=.. top_k=.. H=.. I=..' for fused MoE,
    else the profile with varying dims as '*'.

    Profiles of one (op, run, call) that differ only in the bucketed dimension share a label, so
    rows of one layer line up across buckets and across runs.
    """
    if frame.empty:
        return pd.Series([], dtype="string", index=frame.index)
    profiles = frame["profile"].astype("string")
    uniques = pd.unique(profiles.dropna())
    labels = {p: op_shape(p) for p in uniques}
    unlabelled = [p for p, v in labels.items() if v is None]
    if unlabelled:
        labels.update(_wildcard_labels(frame, profiles, set(unlabelled)))
    return profiles.map(labels).astype("string")


def _wildcard_labels(frame: pd.DataFrame, profiles: pd.Series, wanted: set) -> dict:
    keys = [k for k in ("op", "run_id", "call") if k in frame.columns]
    sub = frame.assign(_profile=profiles)[keys + ["_profile"]].drop_duplicates()
    sub = sub[sub["_profile"].isin(wanted)]
    out = {}
    for _, group in sub.groupby(keys, dropna=False, sort=False):
        texts = list(group["_profile"])
        numbers = [_NUMBER.findall(t) for t in texts]
        same_layout = len({len(n) for n in numbers}) == 1 and len({_NUMBER.sub("#", t) for t in texts}) == 1
        for text, nums in zip(texts, numbers):
            if not same_layout or len(texts) == 1:
                out[text] = text
                continue
            varying = {i for i in range(len(nums)) if len({n[i] for n in numbers}) > 1}
            parts = iter(range(len(nums)))
            out[text] = _NUMBER.sub(lambda m: "*" if next(parts) in varying else m.group(0), text)
    return out


def noise_band(gap_pct, noise_pct) -> np.ndarray:
    """True where a relative gap (percent) lies within the noise band (percent)."""
    gap = np.asarray(gap_pct, dtype=float)
    band = np.asarray(noise_pct, dtype=float)
    with np.errstate(invalid="ignore"):
        return np.abs(gap) <= band
