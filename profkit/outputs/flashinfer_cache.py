"""A FlashInfer cache file (v1 JSON) holding serving-verified picks: what ``profkit repair`` writes.

The file has FlashInfer's own layout, so ``flashinfer.autotune(False, cache=path)``,
``AutoTuner.load_configs(path)``, SGLang's per-rank cache file and vLLM's cache directory read it
unchanged: ``_metadata`` (FlashInfer skips a file whose metadata differs from the running
environment), then one entry per key, ``key -> [runner, tactic, policy]``. The key is FlashInfer's
own ``ProfilingCacheKey.file_key`` of the chosen runner, recorded by ``profkit verify`` at the
bucket's M, so extras (cuBLASLt's M, cuDNN's flags) are FlashInfer's, not rebuilt here.

Every server rank loads this file, so what cannot be right is refused rather than written:

- :func:`usable_timings` sets aside verify rows whose serving timings are not finite, negative,
  or inverted (p90 below p10) before any pick is made, and says how many and why;
- :func:`cache_file` refuses two picks of one key that disagree (verify tables of several runs
  given together) unless the caller names the choice (``prefer="fastest"``), and a tactic that
  is not JSON;
- :func:`write_cache_file` writes atomically and never over an input (:mod:`profkit.outputs.atomic`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterable

import numpy as np
import pandas as pd

from profkit.errors import ProfkitError
from profkit.outputs import atomic
from profkit.schema import require

PREFER = ("fastest",)
TIMING_COLUMNS = ("serving_ms", "serving_p10_ms", "serving_p90_ms")
_TACTIC_LIMIT = 4096  # characters of a tactic's JSON text; FlashInfer's are a few ints


def usable_timings(verify: pd.DataFrame) -> tuple[pd.DataFrame, tuple[str, ...]]:
    """The verify rows whose serving timings can choose a pick, and one line per reason rows were set aside.

    A row is set aside when any of serving_ms, serving_p10_ms, serving_p90_ms is infinite or
    negative, or p90 is below p10. Rows not timed (serving_ms missing) stay: the pick ignores
    them anyway. A bucket whose default row is set aside gets no entry (FlashInfer runs its
    default there).

    Returns:
        ``(rows, reasons)``: ``verify`` without the rows set aside (same columns and order), and
        ``"<n> row(s) with <reason> (e.g. <op> <shape> M=<m> <runner> tactic <t>)"`` per reason.
    """
    require(verify, TIMING_COLUMNS, "verify")
    t = {c: pd.to_numeric(verify[c], errors="coerce").to_numpy(dtype=float) for c in TIMING_COLUMNS}
    with np.errstate(invalid="ignore"):
        checks = {
            "a timing that is not finite": np.any([np.isinf(v) for v in t.values()], axis=0),
            "a negative timing": np.any([v < 0 for v in t.values()], axis=0),
            "p90 below p10": t["serving_p90_ms"] < t["serving_p10_ms"],
        }
    bad = np.zeros(len(verify), dtype=bool)
    reasons = []
    for why, hit in checks.items():
        hit = hit & ~bad
        if hit.any():
            reasons.append(f"{int(hit.sum())} row(s) with {why} (e.g. {_row_name(verify.iloc[int(np.argmax(hit))])})")
        bad |= hit
    return verify[~bad], tuple(reasons)


def _row_name(row) -> str:
    get = lambda k: row[k] if k in row.index else "?"  # noqa: E731
    return f"{get('op')} {get('shape')} M={get('m')} {get('runner')} tactic {get('tactic')} in run {get('run_id')}"


def cache_file(picks: pd.DataFrame, *, metadata: dict, like: dict | None = None, prefer: str | None = None) -> dict:
    """The cache file's content for ``picks`` (:func:`profkit.analysis.verify.repair_picks`).

    Args:
        picks: one row per bucket and run: run_id, op, runner, tactic (canonical JSON text),
            file_key, serving_ms.
        metadata: FlashInfer's ``_metadata`` for the environment the picks were verified in.
        like: a cache file of the same tuning (e.g. the capture's ``cache.json``): each entry
            takes the measurement policy (the value's third element) of an entry of the same op
            and runner there, else of the same op; without it entries hold runner and tactic only.
        prefer: what to do when picks of several runs share a key but disagree: None refuses,
            ``"fastest"`` keeps the pick with the lowest serving median.

    Raises:
        ProfkitError: picks that disagree on a key (``prefer`` None), an unknown ``prefer``, or a
            tactic that is not JSON.
    """
    require(picks, ("op", "runner", "tactic", "file_key"), "repair picks")
    if prefer is not None and prefer not in PREFER:
        raise ProfkitError(f"prefer={prefer!r}: expected None (refuse) or one of {', '.join(PREFER)}")
    if not isinstance(metadata, dict):
        raise ProfkitError(f"_metadata must be a JSON object, found {type(metadata).__name__}")
    policies = _policies(like or {})
    chosen: dict[str, tuple] = {}
    rows = picks.dropna(subset=["file_key"])
    for row in rows.itertuples(index=False):
        value = [str(row.runner), _tactic(row)]
        policy = policies.get((row.op, row.runner), policies.get(row.op))
        if policy is not None:
            value.append(policy)
        key = str(row.file_key)
        serving = float(getattr(row, "serving_ms", np.nan))
        if key in chosen and chosen[key][0] != value:
            chosen[key] = _settle(key, chosen[key], (value, serving, getattr(row, "run_id", None)), prefer)
        elif key not in chosen:
            chosen[key] = (value, serving, getattr(row, "run_id", None))
    entries = {key: value for key, (value, _, _) in chosen.items()}
    return {"_metadata": dict(metadata), **dict(sorted(entries.items()))}


def relabelled(document: dict, metadata: dict) -> dict:
    """A cache file's entries as they are, under ``metadata`` (another environment's ``_metadata``). Its
    ``_generation`` (a hash of the old content, FlashInfer's concurrent-writer check) is left out."""
    if not isinstance(metadata, dict):
        raise ProfkitError(f"_metadata must be a JSON object, found {type(metadata).__name__}")
    entries = {key: value for key, value in document.items() if key not in ("_metadata", "_generation")}
    return {"_metadata": dict(metadata), **entries}


def write_cache_file(path: str | os.PathLike, content: dict, *, inputs: Iterable[str | os.PathLike] = ()) -> Path:
    """Write :func:`cache_file`'s content as JSON, atomically, never over one of ``inputs``."""
    return atomic.write_json(path, content, inputs=inputs)


def _settle(key: str, old: tuple, new: tuple, prefer: str | None) -> tuple:
    if prefer is None:
        raise ProfkitError(
            f"picks of runs {old[2]} and {new[2]} disagree on one cache key ({old[0][:2]} vs {new[0][:2]}) for "
            f"{key[:120]}; repair one run at a time, or pass --prefer fastest to keep the faster pick")
    return new if new[1] < old[1] else old


def _tactic(row):
    text = str(row.tactic)
    try:
        if len(text) > _TACTIC_LIMIT:
            raise ValueError(f"longer than {_TACTIC_LIMIT} characters")
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ProfkitError(f"pick {row.op} {row.runner}: tactic {text[:60]!r} is not JSON ({exc}); "
                           "not written") from None


def _policies(like: dict) -> dict:
    out: dict = {}
    for key, value in like.items():
        if key.startswith("_") or not isinstance(value, list) or len(value) < 3:
            continue
        op = key.split("'")[1] if key.count("'") >= 2 else None
        out.setdefault((op, value[0]), value[2])
        out.setdefault(op, value[2])
    return out
