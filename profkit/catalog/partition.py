"""A catalogue split by GPU: each kind of GPU is analysed on its own, so noise never pools across GPUs,
the first run of a shape is the first on that GPU, and flips and repeats are counted within one GPU.

A run's GPU is its ``gpu`` key (``UNKNOWN_GPU`` where no input states it). A verify row belongs to the
GPU it was timed on (``verify_gpu``; the catalogue reads it from an older table's verify.json) and to its own
GPU's part only when the capture was tuned there too (a capture the catalogue does not hold: where it was timed): a pick carried from another GPU is :func:`cross_gpu_verify`'s. A
step row belongs to the GPU its process ran on (its ``gpu`` column).
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import pandas as pd

from profkit import schema

UNKNOWN_GPU = "unknown GPU"


def run_gpus(runs: pd.DataFrame) -> pd.Series:
    """Each run's GPU, by run_id (``UNKNOWN_GPU`` where none is stated)."""
    if not len(runs):
        return pd.Series(dtype="string")
    gpu = runs["gpu"].astype("string").fillna(UNKNOWN_GPU) if "gpu" in runs else pd.Series(UNKNOWN_GPU, index=runs.index)
    return pd.Series(gpu.to_numpy(), index=runs["run_id"].astype("string").to_numpy(), dtype="string")


def candidates_with_gpus(catalog) -> pd.DataFrame:
    """The catalogue's candidate rows, each with its run's GPU (``gpu``)."""
    candidates = catalog.tables.candidates
    return candidates.assign(gpu=candidates["run_id"].astype("string").map(run_gpus(catalog.runs)).to_numpy())


def gpus(catalog) -> list[str]:
    """The kinds of GPU a catalogue's runs were tuned on, the one with the most runs first."""
    return gpus_of(catalog.runs)


def gpus_of(runs: pd.DataFrame) -> list[str]:
    """The kinds of GPU of ``runs``, the one with the most runs first."""
    counts = run_gpus(runs).value_counts()
    return sorted(counts.index, key=lambda g: (-counts[g], g == UNKNOWN_GPU, g)) or [UNKNOWN_GPU]


def step_captures_of(captures: dict, caches: dict, order: Sequence[str] = (), gpu: str | None = None
                     ) -> tuple[dict, dict]:
    """The tuning-pass captures and their cache files per (model, dtype), from the per (model, dtype, GPU) maps:
    ``gpu``'s only, or for each (model, dtype) the first GPU in ``order`` that ran it (others after, by name)."""
    rank = {g: i for i, g in enumerate(order)}
    chosen: dict = {}
    for model, dtype, where in sorted(captures, key=lambda k: (rank.get(k[2], len(rank)), k[2])):
        if (gpu is None or where == gpu) and (model, dtype) not in chosen:
            chosen[(model, dtype)] = (model, dtype, where)
    return ({k: captures[full] for k, full in chosen.items()},
            {k: caches[full] for k, full in chosen.items() if full in caches})


def verify_gpus(verify: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """``capture_gpu`` (where the capture was tuned) and ``timed_gpu`` (where the row was timed) per verify row."""
    if not len(verify):
        return pd.DataFrame({"capture_gpu": pd.Series(dtype="string"), "timed_gpu": pd.Series(dtype="string")})
    capture = verify["run_id"].astype("string").map(run_gpus(runs))
    if "capture_gpu" in verify.columns:  # what the verify process read from the capture itself comes first
        capture = verify["capture_gpu"].astype("string").fillna(capture)
    timed = verify["verify_gpu"].astype("string") if "verify_gpu" in verify.columns else capture
    # A capture not in the catalogue was tuned where it was timed, as far as anything here says.
    capture = capture.fillna(timed).fillna(UNKNOWN_GPU)
    return pd.DataFrame({"capture_gpu": capture, "timed_gpu": timed.fillna(capture)}, index=verify.index)


def with_gpus(verify: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """``verify`` with :func:`verify_gpus`' ``capture_gpu`` and ``timed_gpu`` columns (replacing any it had)."""
    return verify.assign(**verify_gpus(verify, runs)) if len(verify) else verify


def cross_gpu_verify(verify: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """Verify rows of a capture timed on another GPU than it was tuned on, with ``capture_gpu`` and ``timed_gpu``."""
    placed = with_gpus(verify, runs)
    return placed[(placed["capture_gpu"] != placed["timed_gpu"]).to_numpy(dtype=bool)] if len(verify) else verify


def for_gpu(catalog, gpu: str):
    """The part of ``catalog`` tuned and timed on ``gpu`` (the whole catalogue when nothing in it ran elsewhere)."""
    if gpus(catalog) == [gpu] and not len(cross_gpu_verify(catalog.verify, catalog.runs)):
        return catalog
    gpu_of = run_gpus(catalog.runs)
    mine = set(gpu_of[gpu_of == gpu].index)
    tables = _tables_of(catalog.tables, mine)
    moe = catalog.moe
    if moe is not None:
        moe = dataclasses.replace(moe, tables=_tables_of(moe.tables, mine), verify=_own_verify(moe.verify, catalog.runs, gpu),
                                  step=_steps_on(moe.step, gpu), runs=_rows_of(moe.runs, mine))
    captures, caches = step_captures_of(catalog.step_captures_by_gpu, catalog.step_caches_by_gpu, gpu=gpu)
    return dataclasses.replace(
        catalog, runs=tables.runs, tables=tables, op_timings=_rows_of(catalog.op_timings, mine),
        step=_steps_on(catalog.step, gpu), step_other=_steps_on(catalog.step_other, gpu), step_captures=captures,
        step_caches=caches,
        cache_winners=_rows_of(catalog.cache_winners, mine, column="capture_run_id"),
        verify=_own_verify(catalog.verify, catalog.runs, gpu), moe=moe,
        **({} if getattr(catalog, "reductions", None) is None else {"reductions": catalog.reductions.of_runs(mine)}))


def _tables_of(tables: schema.Tables, runs: set) -> schema.Tables:
    return dataclasses.replace(tables, **{t: _rows_of(getattr(tables, t), runs) for t in schema.TABLES})


def _rows_of(frame: pd.DataFrame, runs: set, *, column: str = "run_id") -> pd.DataFrame:
    if not len(frame) or column not in frame.columns:
        return frame
    return frame[frame[column].astype("string").isin(runs).fillna(False).to_numpy(dtype=bool)]


def _steps_on(rows: pd.DataFrame, gpu: str) -> pd.DataFrame:
    if not len(rows) or "gpu" not in rows.columns:
        return rows
    return rows[(rows["gpu"].astype("string").fillna(UNKNOWN_GPU) == gpu).to_numpy(dtype=bool)]


def _own_verify(verify: pd.DataFrame, runs: pd.DataFrame, gpu: str) -> pd.DataFrame:
    if not len(verify):
        return verify
    where = verify_gpus(verify, runs)
    return verify[((where["capture_gpu"] == gpu) & (where["timed_gpu"] == gpu)).to_numpy(dtype=bool)]
