"""Many runs of one bucket: a bounded set read whole, every run reduced where its files lie.

A fleet of ranks, or many boots, tunes the same buckets again and again. Holding every candidate of every
run in pandas costs about 1.6 KB per candidate row: 100 ranks of the shipped captures (3e6 rows) took
6 GB and minutes. So when more than :data:`MAX_DETAILED_RUNS` runs tuned one bucket, an (op, profile),
on one GPU, the catalogue reads whole (candidates, winners, tuning) only the capture folders that hold a
*first run*: the earliest run, by ``started_at`` then run id, to tune some (op, profile) on its GPU. That
is every run :func:`profkit.analysis.first_runs` can name (the first run of an op and shape is the first
run of each profile it tuned), so every figure, table and plan the report draws from candidates has
them. Every run, read whole or not, is reduced by DuckDB where its files lie
(:func:`profkit.catalog.reduce.reduce_frames`, :data:`BATCH` folders at a time): each decision's winner
with its time and the default's, and each run's fastest and mean time per candidate. The repeat and rank
questions are answered from these (:func:`profkit.analysis.results.analyse`). With at most
:data:`MAX_DETAILED_RUNS` runs per bucket (the shipped data: at most 11) every run is read whole, as before.
"""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from profkit.catalog.keys import id_rows, renames_of
from profkit.catalog.partition import UNKNOWN_GPU

# More runs than this of one (op, profile) on one GPU: only the folders holding a first run are read whole.
MAX_DETAILED_RUNS = 16
# Capture folders per DuckDB reduction (a shipped rank is 31,082 candidate rows: 32 stay well inside its cap).
BATCH = 32

DECISION_COLUMNS = {"run_id": "string", "rank": "Int64", "call": "Int64", "op": "string", "profile": "string",
                    "bucket": "Int64", "runner": "string", "tactic": "string", "time_ms": "float64",
                    "n_candidates": "Int64", "default_runner": "string", "default_ms": "float64"}


@dataclasses.dataclass(frozen=True, eq=False)
class Reductions:
    """Every run of a catalogue reduced where its files lie, and which runs were read whole.

    Attributes:
        decisions: one row per tuning decision of every run, as :func:`profkit.analysis.winners` finds it
            (:data:`DECISION_COLUMNS`: its winner, the winner's time, the default's runner and time).
        timings: per run and candidate (FlashInfer's own, finite times): ``run_id``, ``rank``, ``op``,
            ``profile``, ``runner``, ``tactic`` (categoricals), ``min_ms`` (the run's fastest) and ``mean_ms``.
        detailed: the run ids read whole (their candidates, winners and tuning rows are in the catalogue's
            tables).
        reduced: the run ids read only as these reductions.
    """

    decisions: pd.DataFrame
    timings: pd.DataFrame
    detailed: tuple[str, ...]
    reduced: tuple[str, ...]

    def of_runs(self, runs: set) -> Reductions:
        """The reductions of ``runs`` (run ids) only."""
        keep = lambda f: f[f["run_id"].isin(runs).to_numpy(dtype=bool)].reset_index(drop=True)  # noqa: E731
        return Reductions(decisions=keep(self.decisions), timings=keep(self.timings),
                          detailed=tuple(r for r in self.detailed if r in runs),
                          reduced=tuple(r for r in self.reduced if r in runs))

    def __repr__(self) -> str:
        return (f"Reductions: {len(self.detailed) + len(self.reduced)} runs, {len(self.detailed)} read whole, "
                f"{len(self.reduced)} reduced; {len(self.decisions)} decisions, {len(self.timings)} timings")


@dataclasses.dataclass(frozen=True, eq=False)
class Reduced:
    """What :func:`reduce_captures` found: the folders to read whole, the run ids to rename (per folder, as
    :func:`profkit.catalog.keys.renames_of` decides), every run's decisions and timings, and the runs (``run``,
    ``run_id``, the keys, ``started_at``, ``folder``)."""

    detailed: tuple[Path, ...]
    renames: dict
    decisions: pd.DataFrame
    timings: pd.DataFrame
    runs: pd.DataFrame

    def reductions(self, detailed_runs: set) -> Reductions:
        """:class:`Reductions` with ``detailed_runs`` (catalogue run ids) read whole."""
        every = set(self.decisions["run_id"].dropna().astype(str)) | set(self.timings["run_id"].cat.categories)
        return Reductions(decisions=self.decisions, timings=self.timings,
                          detailed=tuple(sorted(str(r) for r in every if r in detailed_runs)),
                          reduced=tuple(sorted(str(r) for r in every if r not in detailed_runs)))


def reduce_captures(captures: Sequence[Path], problems: list) -> Reduced | None:
    """Reduce every capture folder with DuckDB when more than :data:`MAX_DETAILED_RUNS` runs tuned one bucket on one
    GPU; else None: the caller reads every folder whole (as it does when DuckDB cannot read them, named in
    ``problems``; where it reduces, the files it set aside are named there too).

    Args:
        captures: the capture folders (a walk's ``capture`` entries).
        problems: where to name what could not be read.
    """
    if len(captures) <= MAX_DETAILED_RUNS:  # a folder holds one run or a few: too few to need reducing
        return None
    from profkit.catalog.captures import folder_rows

    folders = folder_rows(captures)
    if _few_runs(folders):
        return None
    import duckdb
    import pyarrow as pa

    from profkit.catalog.reduce import reduce_frames

    parts: dict[str, list] = {"decisions": [], "timings": [], "names": [], "runs": []}
    found: list[str] = []
    try:
        with tempfile.TemporaryDirectory(prefix="profkit-reduce-") as spill:
            for i in range(0, len(folders), BATCH):
                frames, set_aside = reduce_frames(folders.iloc[i:i + BATCH].reset_index(drop=True), spill=spill,
                                                  served=False, names=True)
                found += set_aside
                for name in parts:
                    parts[name].append(frames[name])
    except duckdb.Error as exc:
        problems.append(f"{Path(captures[0]).parent}: the DuckDB reduction failed ({str(exc).splitlines()[0]}); every "
                        "capture read whole instead")
        return None
    arrow = {name: pa.concat_tables(tables, promote_options="default") for name, tables in parts.items()}
    decisions = arrow["decisions"].to_pandas()
    runs = arrow["runs"].to_pandas().drop_duplicates("run")
    tuned = decisions[(decisions["n_candidates"] > 0).to_numpy(dtype=bool)]
    gpu_of = pd.Series(runs["gpu"].astype("string").fillna(UNKNOWN_GPU).to_numpy(), index=runs["run"].to_numpy())
    per_bucket = tuned.assign(gpu=tuned["run"].map(gpu_of).fillna(UNKNOWN_GPU)).groupby(
        ["gpu", "op", "profile"], dropna=False)["run"].nunique()
    if not len(per_bucket) or int(per_bucket.max()) <= MAX_DETAILED_RUNS:
        return None
    renames = renames_of(id_rows(runs[["folder", "run_id", "gpu"]]))
    run_ids = _run_ids(decisions, runs, renames)
    decisions = decisions.assign(run_id=decisions["run"].map(run_ids))
    firsts = _first_runs(decisions[(decisions["n_candidates"] > 0).to_numpy(dtype=bool)], runs, gpu_of)
    folder_of = pd.Series(runs["folder"].to_numpy(), index=runs["run"].to_numpy())
    detailed = {str(f) for f in folder_of.reindex(firsts).dropna()}
    problems.extend(found)
    return Reduced(detailed=tuple(p for p in captures if str(p) in detailed), renames=renames,
                   decisions=_decisions(decisions), timings=_timings(arrow["timings"], arrow["names"], run_ids),
                   runs=runs.assign(run_id=runs["run"].map(run_ids)))


def _few_runs(folders: pd.DataFrame) -> bool:
    """Whether no (op, profile) has candidates of more than :data:`MAX_DETAILED_RUNS` runs (a run id in a folder,
    as the reduction counts them) on all GPUs together, read from three columns: then none has so many on one GPU
    and the DuckDB reduction need not run. False where a file cannot be read so (the reduction then tells)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from profkit.catalog.captures import table_files

    runs: dict[tuple, set] = {}
    files = table_files(folders, "candidates")
    try:
        for file, folder in zip(files["file"], files["folder"]):
            keys = pq.read_table(file, columns=["run_id", "op", "profile"]).group_by(["run_id", "op", "profile"])
            found = keys.aggregate([])
            for run_id, op, profile in zip(*(found.column(c).to_pylist() for c in ("run_id", "op", "profile"))):
                runs.setdefault((op, profile), set()).add((folder, run_id))
    except (OSError, ValueError, KeyError, pa.ArrowException):
        return False
    return all(len(r) <= MAX_DETAILED_RUNS for r in runs.values())


def _run_ids(decisions: pd.DataFrame, runs: pd.DataFrame, renames: dict) -> pd.Series:
    """The catalogue's run id of each reduced run (``run``: DuckDB's hash of folder and run id)."""
    written = decisions.drop_duplicates("run").set_index("run")["run_id"].astype("string")
    named = [renames.get(str(f), {}).get(str(r), r) for f, r in zip(runs["folder"], runs["run_id"])]
    return pd.concat([written, pd.Series(named, index=runs["run"].to_numpy(), dtype="string")]).groupby(level=0).last()


def _first_runs(tuned: pd.DataFrame, runs: pd.DataFrame, gpu_of: pd.Series) -> list:
    """The first run (``run``) of each (GPU, op, profile): the earliest by ``started_at``, then catalogue run id
    (``tuned``: decisions with the catalogue's ``run_id``)."""
    started = pd.Series(runs["started_at"].astype("string").fillna("").to_numpy(), index=runs["run"].to_numpy())
    order = tuned[["run", "run_id", "op", "profile"]].drop_duplicates().assign(
        gpu=lambda f: f["run"].map(gpu_of).fillna(UNKNOWN_GPU), _t=lambda f: f["run"].map(started).fillna(""))
    first = order.sort_values(["_t", "run_id"], kind="stable").drop_duplicates(["gpu", "op", "profile"])
    return list(pd.unique(first["run"]))


def _decisions(decisions: pd.DataFrame) -> pd.DataFrame:
    out = decisions.sort_values(["op", "profile", "run_id", "rank", "call"], kind="stable")
    return pd.DataFrame({c: out[c].astype(t) for c, t in DECISION_COLUMNS.items()}).reset_index(drop=True)


def _timings(timings, names, run_ids: pd.Series) -> pd.DataFrame:
    """Per run and candidate, with the names of its (op, profile) and (runner, tactic) as categoricals."""
    names = names.to_pandas().drop_duplicates(["k", "p"])
    t = timings.select(["run", "rank", "k", "p", "min_ms", "mean_ms"]).to_pandas()
    at = pd.MultiIndex.from_arrays([names["k"], names["p"]]).get_indexer(pd.MultiIndex.from_arrays([t["k"], t["p"]]))
    out = {"run_id": _categorical(run_ids.reindex(pd.unique(t["run"])), t["run"]),
           "rank": t["rank"].astype("Int64")}
    for column in ("op", "profile", "runner", "tactic"):
        codes, categories = pd.factorize(names[column].astype("string"), use_na_sentinel=True)
        out[column] = pd.Categorical.from_codes(np.where(at >= 0, codes[np.maximum(at, 0)], -1), categories=categories)
    out.update(min_ms=t["min_ms"].to_numpy(dtype=float), mean_ms=t["mean_ms"].to_numpy(dtype=float))
    return pd.DataFrame(out)


def _categorical(values: pd.Series, keys: pd.Series) -> pd.Categorical:
    """``values`` (indexed by key) looked up for each of ``keys``, as a categorical."""
    codes, categories = pd.factorize(values.astype("string"), use_na_sentinel=True)
    where = pd.Index(values.index).get_indexer(keys)
    return pd.Categorical.from_codes(np.where(where >= 0, codes[np.maximum(where, 0)], -1), categories=categories)
