"""A catalogue of runs: one walk over whatever the user points at, each file read once, runs keyed by GPU.

:func:`open` takes one or many paths: folders laid out as the shipped ``data/`` (captures,
``cache.json``, ``op_timings.parquet``, ``step.jsonl``, ``verify.parquet``, ``provenance.json``, MoE run
folders), ``profkit capture --out`` trees of hosts and ranks, FlashInfer debug logs, cache files, v2
stores. It walks them once (:mod:`profkit.catalog.walk`), decides every file's kind with one sniffer
(:mod:`profkit.catalog.sniff`) and returns a :class:`Catalog`: the runs table with the keys every other
table joins on through ``run_id`` (GPU, SM count, compute capability, FlashInfer and CUDA versions, host,
rank, process; :mod:`profkit.catalog.keys`), the tables, and the frames the report and the notebooks
read. The analyses and the report never open a file, split a path or read a command line: what they
need from paths and commands are columns here. A file that cannot be read is named in ``problems`` (and
warned about), and the rest is read.
"""

from __future__ import annotations

import dataclasses
import os
import warnings
from pathlib import Path
from typing import Sequence

import pandas as pd

from profkit import schema
from profkit.catalog import _read, partition, ports
from profkit.catalog.keys import KEY_COLUMNS, keyed_runs
from profkit.catalog.reduced import MAX_DETAILED_RUNS, Reductions
from profkit.catalog.walk import Inventory, walk
from profkit.errors import ProfkitError

__all__ = ["Catalog", "KEY_COLUMNS", "MAX_DETAILED_RUNS", "Reductions", "open", "shipped_bench", "shipped_root"]


def shipped_root() -> Path:
    """The repository's ``data/`` folder (the shipped captures and public engine results)."""
    return Path(__file__).resolve().parents[2] / "data"


def shipped_bench() -> list[Path]:
    """The public autotune off/on serving pair shipped with the data (SGLang PR #12306), baseline first."""
    pair = shipped_root() / "engines" / "sglang_pr12306"
    return [pair / "seed_sglang_pr12306_autotune_main.txt", pair / "seed_sglang_pr12306_autotune_pr.txt"]


@dataclasses.dataclass(frozen=True, eq=False)
class Catalog:
    """Everything read from the paths given, once.

    Attributes:
        root: the path read (with several paths: the folder holding them all).
        runs: one row per run, keyed (:data:`~profkit.catalog.keys.KEY_COLUMNS`: ``gpu``, ``sm_count``,
            ``compute_capability``, ``flashinfer``, ``cuda``, ``host``, ``rank`` and ``tp_rank`` / ``pp_rank`` /
            ``dp_rank`` / ``ep_rank`` where a name or the run states them, ``process``, ``source_kind``, ``path``,
            ``env_from``), plus every column the readers gave.
        files: the inventory: one row per file or folder found (``path``, ``rel``, ``kind``, ``bytes``).
        tables: the runs' tables (captures, else debug logs, else cache files), stacked; ``tables.runs`` is
            ``runs``.
        op_timings: the ops timed outside tuning (empty when none).
        step: ``profkit step`` rows of the step sets that hold a tuning-pass capture, with ``source`` (the
            run's folder), ``step_set`` (the folder above: the set) and ``loaded_cache`` (the cache file the
            row's state loaded, from its ``--cache`` arguments; empty when none).
        step_other: ``profkit step`` rows of other sets, same columns.
        step_captures: run_id of the tuning-pass capture per (model, dtype) of ``step``: the GPU with the most runs
            first where several GPUs ran one (``step_captures_by_gpu`` holds each; a part of one GPU,
            :func:`~profkit.catalog.partition.for_gpu`, holds that GPU's).
        step_caches: the cache.json beside each tuning-pass capture, relative to the root, per (model, dtype).
        step_captures_by_gpu, step_caches_by_gpu: the same per (model, dtype, GPU).
        linears: the (n, k) GEMM shapes of each step model's linear layers.
        model_layers: decoder layers of each step model's full config.
        cache_winners: winners of each ``cache.json`` written beside a capture, with the capture's ``run_id``.
        bench: engine results given with ``bench=`` (``label`` = file name; empty when none).
        bench_notes: the leading ``#`` comment line of each bench file, by label.
        provenance: provenance.json contents by folder (relative to the root).
        labels: display names per shape label (``"N=6144 K=4096" -> "llama3-8b qkv"``).
        verify: every ``verify.parquet``, stacked (``source`` = the file, ``folder`` = its folder).
        policy_tuning: (policy, op, tuning_s) per tuning call of a policy study.
        moe: the MoE runs (:class:`~profkit.sources.moe_runs.MoeRuns`); None when there are none.
        port_prices: one row per port (``price.json`` of ``profkit.bench.port_price``, or a ``port.json`` of ``profkit
            port`` alone): what carrying another GPU's tuning here cost against a full tuning here
            (:data:`profkit.catalog.ports.PORT_PRICE_COLUMNS`).
        cache_events: what FlashInfer's debug logs say of cache files (``file``, ``line``, ``kind``:
            cache_loaded, cache_env_mismatch (ignored: created in a different environment) or cache_not_saved,
            ``path``, ``detail``: the mismatched fields, ``during``: ``profkit verify`` or ``profkit port`` where
            such a process of another GPU's capture wrote the log, so FlashInfer ignored that GPU's file on purpose).
        inputs: what the tables were read from: ``"captures"``, ``"debug logs"`` or ``"cache files"``.
        reductions: where more than :data:`~profkit.catalog.reduced.MAX_DETAILED_RUNS` runs tuned one bucket on one
            GPU, every run reduced where its files lie (:class:`~profkit.catalog.reduced.Reductions`: each
            decision's winner with its time and the default's, each run's fastest and mean time per candidate);
            ``tables`` then holds every run in ``runs`` and the other tables of the runs read whole (the folders
            holding a first run) only. None when every run is read whole.
        problems: files that could not be read, as ``"<file>: <reason>"``.
    """

    root: Path
    runs: pd.DataFrame
    files: pd.DataFrame
    tables: schema.Tables
    op_timings: pd.DataFrame
    step: pd.DataFrame
    step_other: pd.DataFrame
    step_captures: dict
    step_caches: dict
    linears: dict
    model_layers: dict
    cache_winners: pd.DataFrame
    bench: pd.DataFrame
    bench_notes: dict
    provenance: dict
    labels: dict
    verify: pd.DataFrame
    policy_tuning: pd.DataFrame = dataclasses.field(default_factory=pd.DataFrame)
    moe: object = None
    cache_events: pd.DataFrame = dataclasses.field(default_factory=pd.DataFrame)
    port_prices: pd.DataFrame = dataclasses.field(default_factory=pd.DataFrame)
    inputs: tuple = ("captures",)
    reductions: Reductions | None = None
    step_captures_by_gpu: dict = dataclasses.field(default_factory=dict)
    step_caches_by_gpu: dict = dataclasses.field(default_factory=dict)
    problems: tuple = ()

    def __repr__(self) -> str:
        gpus = ", ".join(sorted(self.runs["gpu"].dropna().astype(str).unique())) or "GPU unknown"
        lines = [f"Catalog {self.root}  (from {', '.join(self.inputs)}; {gpus})",
                 f"  {len(self.runs)} runs, {len(self.files)} files, {len(self.tables.candidates)} candidates, "
                 f"{len(self.op_timings)} op timings, {len(self.step)} step rows "
                 f"(+{len(self.step_other)} in other step sets), {len(self.verify)} verify rows, "
                 f"{len(self.bench)} bench rows"]
        if self.reductions is not None:
            r = self.reductions
            lines.append(f"  more than {MAX_DETAILED_RUNS} runs tuned one bucket: read whole {len(r.detailed)}, read as "
                         f"reductions (decisions and timings) {len(r.reduced)}")
        if self.problems:
            lines.append(f"  WARNING: {len(self.problems)} file(s) could not be read; see .problems")
        return "\n".join(lines)


def open(paths: str | os.PathLike | Sequence[str | os.PathLike], *,  # noqa: A001 - profkit.open, like io.open
         bench: Sequence[str | os.PathLike] = ()) -> Catalog:
    """Walk ``paths`` once and read every input in them once, as a :class:`Catalog`.

    Args:
        paths: a folder (e.g. ``data/``), a capture, a FlashInfer debug log, a cache file, a v2 store, or
            several of these.
        bench: engine result files to add (``profkit.read_bench``, labelled by file name), e.g. an autotune
            off/on pair of SGLang ``bench_serving`` outputs, baseline first.

    Raises:
        ProfkitError: when a path does not exist, or nothing under the paths holds a capture, log or cache file.
    """
    paths = [Path(p) for p in ([paths] if isinstance(paths, (str, os.PathLike)) else paths)]
    if not paths:
        raise ProfkitError("no path given; pass a folder of captures, a FlashInfer debug log or a cache file")
    for path in paths:
        if not os.path.lexists(path):
            raise ProfkitError(f"{path}: no such file or directory; pass a directory of profkit captures, a "
                               "FlashInfer debug log, a FlashInfer cache file or a v2 store")
    inv = _inventory(paths)
    problems: list[str] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the problems are kept and named below
        tables, parts, inputs, reductions = _read.tables(inv, problems)
        prov = _read.provenance(inv, problems)
        steps = _read.step_rows(inv, problems)
        verified = _read.verify(inv, problems, parts, prov)
        moe = _read.moe(inv, prov, parts, steps, _absolute_sources(inv, verified))
        said = _read.said_events(inv, tables, problems)
        built = (said["kind"] == "jit_build").fillna(False).to_numpy(dtype=bool)
        jit_builds, said = said[built], said[~built].reset_index(drop=True)
        port_docs = ports.ports(inv, problems)
        prices = ports.port_prices(inv, prov, steps, port_docs, problems, jit_builds)
    problems = list(tables.problems) + problems
    envs = {str(inv.root / rel) if rel != "." else str(inv.root): doc.get("env") or {} for rel, doc in prov.items()}
    runs = keyed_runs(tables.runs, envs)
    tables = _read._masked_commands(dataclasses.replace(tables, runs=runs))
    said = ports.tag_cache_events(said, inv, verified, runs, port_docs)
    caches = {str(p) for p in inv.paths("cache")}
    step, other, gpu_captures, gpu_caches = _read.split_steps(inv, steps, parts, caches)
    captures, cache_files = partition.step_captures_of(gpu_captures, gpu_caches, partition.gpus_of(tables.runs))
    op_timings = _read.op_timings(inv, problems, _read.renames(parts))
    linears, layers = _read._models(sorted({model for model, _ in captures}))
    if "engine results" in inputs:  # nothing but engine outputs: they are what there is to read
        bench = [*bench, *inv.paths("bench")]
    bench_frame, notes = _read.bench(bench, problems)
    catalog = Catalog(root=inv.root, runs=tables.runs, files=inv.files, tables=tables, op_timings=op_timings,
                      step=step, step_other=other, step_captures=captures, step_caches=cache_files, linears=linears,
                      model_layers=layers, cache_winners=_read.cache_winners(inv, parts, problems), bench=bench_frame,
                      bench_notes=notes, provenance=prov, labels=_read._shape_labels(op_timings, prov),
                      verify=verified, policy_tuning=_read._policy_tuning(prov), moe=moe, cache_events=said,
                      port_prices=prices, inputs=inputs, reductions=reductions, problems=tuple(problems),
                      step_captures_by_gpu=gpu_captures, step_caches_by_gpu=gpu_caches)
    if catalog.problems:
        warnings.warn(f"{catalog.root}: {len(catalog.problems)} file(s) could not be read and were skipped: "
                      f"{'; '.join(catalog.problems)}", stacklevel=2)
    return catalog


def _inventory(paths: list[Path]) -> Inventory:
    """One inventory of every path, relative to the folder holding them all (the path itself when one)."""
    if len(paths) == 1:
        return walk(paths[0])
    root = Path(os.path.commonpath([p.resolve() for p in paths]))
    parts = [walk(p) for p in paths]
    files = pd.concat([inv.files.assign(path=[str(Path(p).resolve()) for p in inv.files["path"]]) for inv in parts],
                      ignore_index=True).drop_duplicates("path")
    files["rel"] = [os.path.relpath(p, root) for p in files["path"]]
    return Inventory(root=root, files=files.astype({"rel": "string"}))


def _absolute_sources(inv: Inventory, verified: pd.DataFrame) -> pd.DataFrame:
    """Verify rows with ``source`` as the file's path (the MoE runs name their verify tables so)."""
    if not len(verified):
        return verified
    sources = verified["source"].astype(str)
    path_of = {s: str(inv.root / s) for s in sources.unique()}  # a path made per file, not per row
    return verified.assign(source=[path_of[s] for s in sources])
