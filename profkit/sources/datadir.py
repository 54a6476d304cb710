"""A data directory in, tables out: everything ``profkit report`` reads, read in one place.

:func:`read_datadir` walks a directory laid out as the shipped ``data/`` (see ``data/README.md``):
saved captures (``profkit.load``), the ``cache.json`` FlashInfer wrote beside a capture, op
timings (``op_timings.parquet``), ``profkit step`` results (``step.jsonl``), ``profkit verify``
tables (``verify.parquet``), provenance files, folders of MoE runs (``profkit.bench.moe_sweep``)
and, when given, engine result files. A directory without captures is read from the FlashInfer
debug logs (``*.log``) or cache files (``*.json``) in it, and a single log, cache file or capture
folder is read as such. It returns a :class:`DataDir` of frames and plain mappings; the analyses
and the report never open a file, split a path or read a command line: what they need from paths
and commands (a step row's set, the cache file a step state loaded) are columns here. A file that
cannot be read is named in ``DataDir.problems`` (and warned about), and the rest is read.
"""

from __future__ import annotations

import dataclasses
import re
import shlex
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
            ``source`` (the run's folder, relative to the root), ``step_set`` (the folder holding
            the run's folder: the set) and ``loaded_cache`` (the cache file the row's state loaded,
            from its ``--cache`` arguments: relative to the root when that file is under it, else
            as written; empty when the state loaded none); empty when none.
        step_other: ``profkit step`` rows of other sets (e.g. reruns with sweep caches), same columns.
        step_captures: run_id of the tuning-pass capture per (model, dtype) of ``step``.
        step_caches: the cache.json written beside each tuning-pass capture, relative to the root,
            per (model, dtype) (what a ``loaded_cache`` equal to it loaded: that pass's picks).
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
            the file, relative to the root; ``folder`` = its folder: one tuning per table); empty
            when none.
        policy_tuning: (policy, op, tuning_s) per tuning call of a policy study (provenance.json
            ``runs`` with ``policy`` and ``tune_call_s``); empty when none.
        moe: the MoE runs under the root (:func:`profkit.sources.moe_runs.read_moe_runs` of each
            folder holding ``moe_sweep`` runs, stacked); None when there are none.
        inputs: what the tables were read from: ``"captures"``, ``"debug logs"`` or ``"cache files"``.
        problems: files that could not be read, as ``"<file>: <reason>"``.
    """

    root: Path
    tables: schema.Tables
    op_timings: pd.DataFrame
    step: pd.DataFrame
    step_other: pd.DataFrame
    step_captures: Mapping[tuple[str, str], str]
    step_caches: Mapping[tuple[str, str], str]
    linears: Mapping[str, tuple[tuple[int, int], ...]]
    model_layers: Mapping[str, int]
    cache_winners: pd.DataFrame
    bench: pd.DataFrame
    bench_notes: Mapping[str, str]
    provenance: Mapping[str, dict]
    labels: Mapping[str, str]
    verify: pd.DataFrame
    policy_tuning: pd.DataFrame = dataclasses.field(default_factory=lambda: pd.DataFrame(
        columns=["policy", "op", "tuning_s"]))
    moe: object = None
    inputs: tuple[str, ...] = ("captures",)
    problems: tuple[str, ...] = ()

    def __repr__(self) -> str:
        lines = [f"DataDir {self.root}  (from {', '.join(self.inputs)})",
                 f"  {len(self.tables.runs)} runs, {len(self.tables.candidates)} candidates, "
                 f"{len(self.op_timings)} op timings, {len(self.step)} step rows "
                 f"(+{len(self.step_other)} in other step sets), {len(self.verify)} verify rows, "
                 f"{len(self.bench)} bench rows"]
        if self.problems:
            lines.append(f"  WARNING: {len(self.problems)} file(s) could not be read; see .problems")
        return "\n".join(lines)


def read_datadir(path: str | Path, *, bench: Sequence[str | Path] = ()) -> DataDir:
    """Read a data directory, or one input file, for the report (and for notebooks that want the same frames).

    Args:
        path: a directory: every saved capture below it is loaded, with ``cache.json``,
            ``op_timings.parquet``, ``step.jsonl``, ``verify.parquet``, ``provenance.json`` files and
            MoE run folders where present; a directory without captures is read from its FlashInfer
            debug logs (``*.log``, ``*.log.gz``), else its FlashInfer cache files (``*.json``). A file:
            one FlashInfer debug log, or one cache file (JSON).
        bench: engine result files to add (``profkit.read_bench``, labelled by file name), e.g.
            an autotune off/on pair of SGLang ``bench_serving`` outputs, baseline first.

    Returns:
        A :class:`DataDir`.

    Raises:
        ProfkitError: when the path does not exist, or is a directory with no capture, log or cache file.
    """
    root = Path(path)
    if not root.exists():
        raise ProfkitError(f"{root}: no such file or directory; pass a directory of profkit captures, a FlashInfer "
                           "debug log or a FlashInfer cache file")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the problems are kept and named below
        tables, inputs = _tables(root)
    problems = list(tables.problems)
    tables = _masked_commands(tables)
    bench_frame, bench_notes = _bench(bench, problems)
    if not root.is_dir():  # one log or cache file: nothing else to read beside it
        data = DataDir(root=root, tables=tables, op_timings=schema.empty("op_timings"), step=pd.DataFrame(),
                       step_other=pd.DataFrame(), step_captures={}, step_caches={}, linears={}, model_layers={},
                       cache_winners=pd.DataFrame(), bench=bench_frame, bench_notes=bench_notes, provenance={},
                       labels=_shape_labels(schema.empty("op_timings"), {}), verify=schema.empty("verify"),
                       inputs=inputs, problems=tuple(problems))
        return _warned(data)
    op_timings = _op_timings(root, problems)
    steps, others, captures, caches = _steps(root, problems)
    models = sorted({model for model, _ in captures})
    linears, layers = _models(models)
    provenance = _provenance(root, problems)
    data = DataDir(root=root, tables=tables, op_timings=op_timings, step=steps, step_other=others,
                   step_captures=captures, step_caches=caches, linears=linears, model_layers=layers,
                   cache_winners=_cache_winners(root, problems), bench=bench_frame, bench_notes=bench_notes,
                   provenance=provenance, labels=_shape_labels(op_timings, provenance),
                   verify=_verify(root, problems), policy_tuning=_policy_tuning(provenance),
                   moe=_moe(root, problems), inputs=inputs, problems=tuple(problems))
    return _warned(data)


def _warned(data: DataDir) -> DataDir:
    if data.problems:
        warnings.warn(f"{data.root}: {len(data.problems)} file(s) could not be read and were skipped: "
                      f"{'; '.join(data.problems)}", stacklevel=3)
    return data


# Files a directory's debug logs and cache files are found by, when it holds no capture.
_LOG_NAMES = ("*.log", "*.log.gz")
_NOT_CACHES = {"provenance.json", "verify.json", "summary.json", "plan.json", "blocklist.json"}


def _tables(root: Path) -> tuple[schema.Tables, tuple[str, ...]]:
    """The root's tables and what they came from: captures, else debug logs, else cache files."""
    import profkit

    if not root.is_dir():
        if _input_kind(root) == "cache":
            return profkit.read_cache(str(root)), ("cache files",)
        return profkit.read_log(str(root)), ("debug logs",)
    try:
        return profkit.load(root), ("captures",)
    except ProfkitError as exc:
        if "no profkit capture" not in str(exc):
            raise
    logs = sorted({p for pattern in _LOG_NAMES for p in root.rglob(pattern) if p.is_file()})
    if logs:
        return profkit.read_log([str(p) for p in logs]), ("debug logs",)
    caches = [p for p in sorted(root.rglob("*.json")) if p.is_file() and p.name not in _NOT_CACHES]
    found = []
    for p in caches:
        try:
            tables = profkit.read_cache(str(p))
        except ProfkitError:
            continue  # a JSON file that is no FlashInfer cache: not an input of the report
        if len(tables.winners):
            found.append(tables)
    if found:
        return schema.concat(found), ("cache files",)
    raise ProfkitError(f"{root}: no profkit capture, FlashInfer debug log (*.log) or cache file (*.json) here; "
                       "pass a directory of captures (profkit capture --out, Tables.save), a debug log "
                       "(FLASHINFER_LOGGING_LEVEL=debug) or a cache file (autotune(cache=...))")


def _input_kind(path: Path) -> str:
    """``cache`` for a JSON file (by name or its first byte), else ``log``."""
    if path.suffix == ".json":
        return "cache"
    try:
        with Input(name=str(path), path=str(path)).open(limit=64) as f:
            head = f.read(64)
    except (OSError, ProfkitError):
        return "log"  # the log reader names what is wrong with it
    return "cache" if head.lstrip()[:1] == b"{" else "log"


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


def _steps(root: Path, problems: list) -> tuple[pd.DataFrame, pd.DataFrame, dict, dict]:
    """Step rows split by set (a set = the folder holding step runs), the tuning-pass captures and their cache files."""
    import profkit

    by_set: dict[Path, list[pd.DataFrame]] = {}
    captures: dict[tuple[str, str], str] = {}
    caches: dict[tuple[str, str], str] = {}
    tuned_sets: set[Path] = set()
    for p in sorted(root.rglob("step.jsonl")):
        try:
            rows = profkit.read_bench(p, format="profkit-step")
        except ProfkitError as exc:
            problems.append(f"{p}: {exc}")
            continue
        step_set = p.parent.parent if p.parent != root else root
        rows = rows.assign(source=_rel(p.parent, root), step_set=_rel(step_set, root),
                           loaded_cache=_loaded_caches(rows, root))
        by_set.setdefault(step_set, []).append(rows)
        runs = p.parent / "capture" / "runs.parquet"
        if runs.is_file() and {"model", "dtype"} <= set(rows.columns) and len(rows):
            try:
                run = str(pd.read_parquet(runs)["run_id"].iloc[0])
            except (OSError, ValueError, KeyError, IndexError) as exc:
                problems.append(f"{runs}: {type(exc).__name__}: {exc}")
                continue
            key = (str(rows["model"].iloc[0]), str(rows["dtype"].iloc[0]))
            captures[key] = run
            if (p.parent / "cache.json").is_file():
                caches[key] = _rel(p.parent / "cache.json", root)
            tuned_sets.add(step_set)
    pick = lambda sets: pd.concat([f for s in sets for f in by_set[s]], ignore_index=True) if sets else pd.DataFrame()  # noqa: E731
    return (pick(sorted(tuned_sets)), pick(sorted(set(by_set) - tuned_sets)), captures, caches)


def _loaded_caches(rows: pd.DataFrame, root: Path) -> pd.Series:
    """Per step row: the cache file its state loaded (``--cache FILE`` or ``--cache STATE=FILE`` of its command)."""
    if "command" not in rows.columns or "state" not in rows.columns:
        return pd.Series("", index=rows.index, dtype="string")
    parsed = {command: _cache_arguments(command) for command in rows["command"].dropna().astype(str).unique()}
    out = []
    for command, state in zip(rows["command"], rows["state"]):
        files = parsed.get(str(command), {}) if isinstance(command, str) else {}
        written = files.get(str(state)) or (files.get("") if str(state) == "cache" else None)
        out.append(_under_root(written, root) if written else "")
    return pd.Series(out, index=rows.index, dtype="string")


def _cache_arguments(command: str) -> dict[str, str]:
    """``{state: file}`` of a ``profkit step`` command's ``--cache`` arguments (``""`` for a bare ``--cache FILE``)."""
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    out = {}
    for i, word in enumerate(words):
        value = words[i + 1] if word == "--cache" and i + 1 < len(words) else (
            word.partition("=")[2] if word.startswith("--cache=") else None)
        if value is None:
            continue
        state, sep, file = value.partition("=")
        out[state if sep else ""] = file if sep else value
    return out


def _under_root(written: str, root: Path) -> str:
    """``written`` relative to ``root`` when it names a file under it (as given, or by its trailing parts), else as written."""
    path = Path(written)
    for candidate in (path, root / path):
        try:
            if candidate.is_file() and candidate.resolve().is_relative_to(root.resolve()):
                return str(candidate.resolve().relative_to(root.resolve()))
        except OSError:
            continue
    parts = path.parts
    for i in range(1, len(parts)):  # commands ran elsewhere: data/h200/step/x/cache.json names h200/step/x/...
        tail = Path(*parts[i:])
        if (root / tail).is_file():
            return str(tail)
    return written


def _verify(root: Path, problems: list) -> pd.DataFrame:
    """Every readable verify table under the root; an unreadable one is named in ``problems``."""
    from profkit.sources.verify import read_verify

    frames = []
    for p in sorted(root.rglob("verify.parquet")):
        try:
            frames.append(read_verify(p).assign(source=_rel(p, root), folder=_rel(p.parent, root)))
        except ProfkitError as exc:
            problems.append(str(exc))
    return pd.concat(frames, ignore_index=True) if frames else schema.empty("verify")


def _policy_tuning(provenance: Mapping[str, dict]) -> pd.DataFrame:
    """(policy, op, tuning_s) per tuning call of the policy study, from its provenance.json ``runs``.

    The study names each run ``<op>-<layer>`` (``profkit.bench.policy_study``).
    """
    rows = [{"policy": run["policy"], "op": str(run.get("name", "")).partition("-")[0], "tuning_s": run["tune_call_s"]}
            for p in provenance.values() for run in (p.get("runs") or [])
            if isinstance(run, dict) and {"policy", "tune_call_s"} <= set(run)]
    return pd.DataFrame(rows, columns=["policy", "op", "tuning_s"])


def _moe(root: Path, problems: list):
    """The MoE runs under the root: every folder holding ``moe_sweep`` runs (a provenance.json of an MoE shape)."""
    from profkit.sources.inputs import load_json
    from profkit.sources.moe_runs import read_moe_runs

    homes = set()
    for p in sorted(root.rglob("provenance.json")):
        try:
            doc, _ = load_json(Input(name=str(p), path=str(p)))
        except ProfkitError:
            continue  # named by _provenance
        if isinstance(doc, dict) and str(doc.get("shape", "")).startswith("E="):
            homes.add(p.parent.parent if p.parent != root else root)
    parts = []
    for home in sorted(homes):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                parts.append(read_moe_runs(home))
        except (ProfkitError, OSError, ValueError, KeyError) as exc:
            problems.append(f"{home}: MoE runs: {type(exc).__name__}: {exc}")
    if not parts:
        return None
    if len(parts) == 1:
        return parts[0]
    from profkit.sources.moe_runs import MoeRuns

    return MoeRuns(tables=schema.concat([m.tables for m in parts]),
                   verify=pd.concat([m.verify for m in parts], ignore_index=True),
                   step=pd.concat([m.step for m in parts], ignore_index=True),
                   runs=pd.concat([m.runs for m in parts], ignore_index=True))


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
            gpu = _noted_gpu(notes[Path(b).stem])
            if gpu and ("gpu" not in frames[-1].columns or frames[-1]["gpu"].isna().all()):
                frames[-1] = frames[-1].assign(gpu=gpu)
    return (pd.concat(frames, ignore_index=True) if frames else schema.empty("bench")), notes


# "# source: <url> (B200, gpt-oss-120b; 'PR: ...')": the shipped bench files name their GPU first in parentheses.
_NOTED_GPU = re.compile(r"\((?:NVIDIA )?([A-Z]{1,2}\d{2,4}[A-Za-z]*)[,;)]")


def _noted_gpu(note: str) -> str | None:
    """The GPU a bench file's leading comment names (``B200``), or None."""
    m = _NOTED_GPU.search(note)
    return m.group(1) if m else None


def _shape_labels(op_timings: pd.DataFrame, provenance: Mapping[str, dict]) -> dict[str, str]:
    """Display names per shape label from op timings, provenance and the shipped model configs."""
    labels: dict[str, str] = {}
    if {"model", "layer", "n", "k"} <= set(op_timings.columns):
        for model, layer, n, k in op_timings[["model", "layer", "n", "k"]].drop_duplicates().itertuples(index=False):
            labels.setdefault(f"N={int(n)} K={int(k)}", f"{model} {layer}")
    for prov in provenance.values():
        # An MoE run's provenance names its model and expert geometry ("E=128 top_k=8 H=2048 I=768").
        if isinstance(prov.get("shape"), str) and prov["shape"].startswith("E=") and isinstance(prov.get("model"), str):
            labels.setdefault(prov["shape"], prov["model"])
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
