"""A data directory in, tables out: everything ``profkit report`` reads, read in one place.

:func:`read_datadir` walks a directory laid out as the shipped ``data/`` (see ``data/README.md``):
saved captures (``profkit.load``), the ``cache.json`` FlashInfer wrote beside a capture, op
timings (``op_timings.parquet``), ``profkit step`` results (``step.jsonl``), ``profkit verify``
tables (``verify.parquet``), provenance files and,
when given, engine result files. It returns a :class:`DataDir` of frames and plain mappings; the
analyses and the report never open a file. A file that cannot be read is named in
``DataDir.problems`` (and warned about), and the rest is read.
"""

from __future__ import annotations

import dataclasses
import warnings
from pathlib import Path
from typing import Mapping, Sequence

import pandas as pd

from profkit import schema
from profkit.errors import ProfkitError
from profkit.sources.inputs import Input, as_int, regular_file


def shipped_root() -> Path:
    """The repository's ``data/`` folder (the shipped H200 captures and public engine results)."""
    return Path(__file__).resolve().parents[2] / "data"


def shipped_bench() -> list[Path]:
    """The public autotune off/on serving pair shipped with the data (SGLang PR #12306), baseline first."""
    pair = shipped_root() / "engines" / "sglang_pr12306"
    return [pair / "seed_sglang_pr12306_autotune_main.txt", pair / "seed_sglang_pr12306_autotune_pr.txt"]


@dataclasses.dataclass(frozen=True, eq=False)
class DataDir:
    """Everything read from one data directory.

    Attributes:
        root: the directory read.
        tables: every capture under the root, stacked (``profkit.load``).
        op_timings: the ops timed outside tuning (empty when none).
        step: ``profkit step`` rows of the step sets that hold a tuning-pass capture, with
            ``source`` (the run's folder, relative to the root); empty when none.
        step_other: ``profkit step`` rows of other sets (e.g. reruns with sweep caches).
        step_captures: run_id of the tuning-pass capture per (model, dtype) of ``step``.
        linears: the (n, k) GEMM shapes of each step model's linear layers.
        model_layers: decoder layers of each step model's full config.
        cache_winners: winners of each ``cache.json`` written beside a capture, with the
            capture's ``run_id``.
        bench: engine results given with ``bench=`` (``label`` = file name; empty when none).
        bench_notes: the leading ``#`` comment line of each bench file, by label (where the
            shipped files say what GPU and model they ran on).
        provenance: provenance.json contents by folder (relative to the root).
        labels: display names per shape label (``"N=6144 K=4096" -> "llama3-8b qkv"``).
        verify: every ``verify.parquet`` under the root, stacked (``read_verify``; ``source`` =
            the file, relative to the root); empty when none.
        problems: files that could not be read, as ``"<file>: <reason>"``.
    """

    root: Path
    tables: schema.Tables
    op_timings: pd.DataFrame
    step: pd.DataFrame
    step_other: pd.DataFrame
    step_captures: Mapping[tuple[str, str], str]
    linears: Mapping[str, tuple[tuple[int, int], ...]]
    model_layers: Mapping[str, int]
    cache_winners: pd.DataFrame
    bench: pd.DataFrame
    bench_notes: Mapping[str, str]
    provenance: Mapping[str, dict]
    labels: Mapping[str, str]
    verify: pd.DataFrame
    problems: tuple[str, ...] = ()

    def __repr__(self) -> str:
        lines = [f"DataDir {self.root}",
                 f"  {len(self.tables.runs)} runs, {len(self.tables.candidates)} candidates, "
                 f"{len(self.op_timings)} op timings, {len(self.step)} step rows "
                 f"(+{len(self.step_other)} in other step sets), {len(self.verify)} verify rows, "
                 f"{len(self.bench)} bench rows"]
        if self.problems:
            lines.append(f"  WARNING: {len(self.problems)} file(s) could not be read; see .problems")
        return "\n".join(lines)


def read_datadir(path: str | Path, *, bench: Sequence[str | Path] = ()) -> DataDir:
    """Read a data directory for the report (and for notebooks that want the same frames).

    Args:
        path: the directory; every saved capture below it is loaded, with ``cache.json``,
            ``op_timings.parquet``, ``step.jsonl``, ``verify.parquet`` and ``provenance.json`` files
            where present.
        bench: engine result files to add (``profkit.read_bench``, labelled by file name), e.g.
            an autotune off/on pair of SGLang ``bench_serving`` outputs, baseline first.

    Returns:
        A :class:`DataDir`.

    Raises:
        ProfkitError: when the directory does not exist or holds no capture.
    """
    import profkit

    root = Path(path)
    if not root.is_dir():
        raise ProfkitError(f"{root}: no such directory; pass a directory of profkit captures")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the problems are kept and named below
        tables = profkit.load(root)
    problems = list(tables.problems)
    op_timings = _op_timings(root, problems)
    steps, others, captures = _steps(root, problems)
    models = sorted({model for model, _ in captures})
    linears, layers = _models(models)
    tables = _masked_commands(tables)
    provenance = _provenance(root, problems)
    bench_frame, bench_notes = _bench(bench, problems)
    data = DataDir(root=root, tables=tables, op_timings=op_timings, step=steps, step_other=others,
                   step_captures=captures, linears=linears, model_layers=layers,
                   cache_winners=_cache_winners(root, problems), bench=bench_frame, bench_notes=bench_notes,
                   provenance=provenance,
                   labels=_shape_labels(op_timings, provenance), verify=_verify(root, problems),
                   problems=tuple(problems))
    if problems:
        warnings.warn(f"{root}: {len(problems)} file(s) could not be read and were skipped: {'; '.join(problems)}",
                      stacklevel=2)
    return data


def _provenance(root: Path, problems: list) -> dict[str, dict]:
    """Each provenance.json under the root, by folder; one that is no JSON object (with an ``env`` object) is named.

    Read within profkit's JSON bound and never from a FIFO or device; commands have their secrets masked.
    """
    from profkit.sources.env import mask_secrets
    from profkit.sources.inputs import Input, load_json

    out = {}
    for p in sorted(root.rglob("provenance.json")):
        try:
            doc, _ = load_json(Input(name=str(p), path=str(p)))
        except ProfkitError as exc:
            problems.append(str(exc))
            continue
        if not isinstance(doc, dict) or not isinstance(doc.get("env", {}), dict):
            what = type(doc).__name__ if not isinstance(doc, dict) else f"an 'env' that is a {type(doc['env']).__name__}"
            problems.append(f"{p}: expected a JSON object with an 'env' object, found {what}; skipped")
            continue
        env = doc.get("env")
        if isinstance(env, dict) and isinstance(env.get("command"), str):
            doc = {**doc, "env": {**env, "command": mask_secrets(env["command"])}}
        out[_rel(p.parent, root)] = doc
    return out


def _masked_commands(tables: schema.Tables) -> schema.Tables:
    """``tables`` with secrets in the runs' command lines masked (captures written before masking hold them)."""
    from profkit.sources.env import mask_secrets

    runs = tables.runs
    if "command" not in runs.columns or not len(runs):
        return tables
    masked = runs["command"].map(lambda c: mask_secrets(c) if isinstance(c, str) else c)
    return dataclasses.replace(tables, runs=runs.assign(command=masked.astype(runs["command"].dtype)))


def _rel(path: Path, root: Path) -> str:
    return str(path.relative_to(root)) if path != root else "."


def _op_timings(root: Path, problems: list) -> pd.DataFrame:
    frames = []
    for p in sorted(root.rglob("op_timings.parquet")):
        try:
            regular_file(p)  # pyarrow would block on a FIFO
            frames.append(pd.read_parquet(p))
        except ProfkitError as exc:
            problems.append(str(exc))
        except (OSError, ValueError) as exc:
            problems.append(f"{p}: {type(exc).__name__}: {exc}")
    return schema.conform(pd.concat(frames, ignore_index=True), "op_timings") if frames else schema.empty("op_timings")


def _steps(root: Path, problems: list) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    """Step rows split by set (a set = the folder holding step runs), and the tuning-pass captures."""
    import profkit

    by_set: dict[Path, list[pd.DataFrame]] = {}
    captures: dict[tuple[str, str], str] = {}
    tuned_sets: set[Path] = set()
    for p in sorted(root.rglob("step.jsonl")):
        try:
            rows = profkit.read_bench(p, format="profkit-step")
        except ProfkitError as exc:
            problems.append(f"{p}: {exc}")
            continue
        by_set.setdefault(p.parent.parent, []).append(rows.assign(source=_rel(p.parent, root)))
        runs = p.parent / "capture" / "runs.parquet"
        if runs.is_file() and {"model", "dtype"} <= set(rows.columns) and len(rows):
            try:
                run = str(pd.read_parquet(runs)["run_id"].iloc[0])
            except (OSError, ValueError, KeyError, IndexError) as exc:
                problems.append(f"{runs}: {type(exc).__name__}: {exc}")
                continue
            captures[(str(rows["model"].iloc[0]), str(rows["dtype"].iloc[0]))] = run
            tuned_sets.add(p.parent.parent)
    pick = lambda sets: pd.concat([f for s in sets for f in by_set[s]], ignore_index=True) if sets else pd.DataFrame()  # noqa: E731
    return (pick(sorted(tuned_sets)), pick(sorted(set(by_set) - tuned_sets)), captures)


def _verify(root: Path, problems: list) -> pd.DataFrame:
    """Every readable verify table under the root; an unreadable one is named in ``problems``."""
    from profkit.sources.verify import read_verify

    frames = []
    for p in sorted(root.rglob("verify.parquet")):
        try:
            frames.append(read_verify(p).assign(source=_rel(p, root)))
        except ProfkitError as exc:
            problems.append(str(exc))
    return pd.concat(frames, ignore_index=True) if frames else schema.empty("verify")


def _models(models: Sequence[str]) -> tuple[dict, dict]:
    """Linear shapes and full layer counts of the shipped model configs named by the step rows."""
    from profkit.models import linear_layers, load_model

    linears, layers = {}, {}
    for name in models:
        try:
            config = load_model(name)
        except ProfkitError:
            continue
        linears[name] = tuple((lin.n, lin.k) for lin in linear_layers(config))
        layers[name] = int(config.num_hidden_layers)
    return linears, layers


def _cache_winners(root: Path, problems: list) -> pd.DataFrame:
    """The winners of each cache.json written beside a capture, tagged with that capture's run_id."""
    import profkit

    frames = []
    for path in sorted(root.rglob("cache.json")):
        runs = path.parent / "capture" / "runs.parquet"
        if not runs.is_file():
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                cached = profkit.read_cache(str(path))
            run = str(pd.read_parquet(runs)["run_id"].iloc[0])
        except (ImportError, OSError, ValueError, KeyError, IndexError) as exc:
            problems.append(f"{path}: {type(exc).__name__}: {exc}")
            continue
        problems.extend(cached.problems)
        frames.append(cached.winners.assign(capture_run_id=run))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _bench(paths: Sequence[str | Path], problems: list) -> tuple[pd.DataFrame, dict]:
    import profkit

    frames, notes = [], {}
    for b in paths:
        try:
            frames.append(profkit.read_bench(str(b), label=Path(b).stem))  # label = file: a pair stays apart
        except ProfkitError as exc:
            problems.append(f"{b}: {exc}")
            continue
        try:
            with Input(name=str(b), path=str(b)).open(limit=4096) as f:
                first = f.readline(4096).decode("utf-8", errors="replace").strip()
        except (OSError, ProfkitError):
            first = ""
        if first.startswith("#"):
            notes[Path(b).stem] = first.lstrip("# ").strip()
    return (pd.concat(frames, ignore_index=True) if frames else schema.empty("bench")), notes


def _shape_labels(op_timings: pd.DataFrame, provenance: Mapping[str, dict]) -> dict[str, str]:
    """Display names per shape label from op timings, provenance and the shipped model configs."""
    labels: dict[str, str] = {}
    if {"model", "layer", "n", "k"} <= set(op_timings.columns):
        for model, layer, n, k in op_timings[["model", "layer", "n", "k"]].drop_duplicates().itertuples(index=False):
            labels.setdefault(f"N={int(n)} K={int(k)}", f"{model} {layer}")
    for prov in provenance.values():
        shapes = prov.get("shapes")
        for shape in shapes if isinstance(shapes, list) else ():
            if isinstance(shape, dict) and {"name", "n", "k"} <= set(shape):
                n, k = as_int(shape["n"]), as_int(shape["k"])
                if n is None or k is None:
                    continue
                _, _, rest = str(shape["name"]).partition("-")
                model, _, layer = rest.rpartition("-")
                labels.setdefault(f"N={n} K={k}", f"{model} {layer}".strip())
    from profkit.models import available, linear_layers, load_model

    for name in available():
        try:
            for lin in linear_layers(load_model(name)):
                labels.setdefault(f"N={lin.n} K={lin.k}", f"{name} {lin.name}")
        except (ProfkitError, TypeError, ValueError):
            continue
    return labels
