"""Read each input of an inventory once, into the frames of a :class:`~profkit.catalog.Catalog`.

Every reader here takes the file lists the walk found (:class:`~profkit.catalog.walk.Inventory`), never
searches the tree again, and opens each file once: the MoE runs are put together from the captures,
step rows and verify tables already read, and ``provenance.json`` files are parsed once and shared.
A file that cannot be read is named in ``problems`` and the rest is read.
"""

from __future__ import annotations

import dataclasses
import re
import shlex
import warnings
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from profkit import schema
from profkit.catalog.keys import renames_of
from profkit.catalog.partition import UNKNOWN_GPU
from profkit.catalog.reduced import Reduced, Reductions, reduce_captures
from profkit.catalog.walk import Inventory
from profkit.errors import ProfkitError
from profkit.sources.inputs import Input, as_int, load_json, open_regular


def tables(inv: Inventory, problems: list) -> tuple[schema.Tables, dict[str, schema.Tables], tuple[str, ...],
                                                  Reductions | None]:
    """The inventory's tables, each capture folder read whole, what they came from, and the runs' reductions.

    Captures when there are any (the debug logs and cache files beside them are the same processes'),
    else debug logs, else cache files and v2 stores. Where many runs tuned one bucket, only the capture
    folders holding a first run are read whole and every run is reduced (:mod:`profkit.catalog.reduced`): the
    tables' runs are then every run, their other tables the detailed runs'; else the reductions are None.
    """
    from profkit.sources.cache import read_cache
    from profkit.sources.logs import read_log

    captures = inv.paths("capture")
    if captures:
        reduced = reduce_captures(captures, problems)
        whole = captures if reduced is None else reduced.detailed
        parts = {str(p): _with_path(schema.load_folder(p), p) for p in whole}
        parts = _unique_run_ids(parts, None if reduced is None else reduced.renames)
        stacked = schema.concat(t for t in parts.values())
        if reduced is None:
            return stacked, parts, ("captures",), None
        detailed = {str(r) for t in (stacked.runs, stacked.candidates) for r in t["run_id"].dropna().unique()}
        runs = schema.concat([stacked, _reduced_runs(reduced, detailed, problems)]).runs
        return dataclasses.replace(stacked, runs=runs), parts, ("captures",), reduced.reductions(detailed)
    logs = inv.paths("log")
    if logs:
        return read_log([str(p) for p in logs]), {}, ("debug logs",), None
    found = []
    for p in inv.paths("cache", "v2_store"):
        try:
            read = read_cache(str(p))
        except ProfkitError as exc:
            if inv.root == p:
                raise
            problems.append(f"{p}: no FlashInfer cache: {exc}")
            continue
        if len(read.winners) or inv.root == p:
            found.append(read)
    if found:
        return schema.concat(found), {}, ("cache files",), None
    others = [kind for kind, what in _RESULTS.items() if inv.paths(kind)]
    if others:  # results without the tuning they came from: no tuning tables, the rest answers
        return schema.Tables.empty(), {}, tuple(_RESULTS[k] for k in others), None
    raise ProfkitError(f"{inv.root}: no profkit capture, FlashInfer debug log (*.log), cache file (*.json) or "
                       "step or verify result here; pass a directory of captures (profkit capture --out, Tables.save), a debug log "
                       "(FLASHINFER_LOGGING_LEVEL=debug), a cache file (autotune(cache=...)) or a v2 store")


def _reduced_runs(reduced: Reduced, detailed: set, problems: list) -> schema.Tables:
    """The runs rows of the runs read only as reductions (every runs.parquet of their folders, read once)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from profkit.catalog.captures import folder_rows, table_files

    runs = reduced.runs[~reduced.runs["run_id"].isin(detailed).to_numpy(dtype=bool)]
    files = table_files(folder_rows(sorted(set(runs["folder"].dropna()))), "runs")
    read = []
    for file, folder in files[["file", "folder"]].itertuples(index=False):
        try:
            table = pq.read_table(file)
        except (OSError, pa.ArrowException) as exc:
            problems.append(f"{file}: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
            continue
        read.append(table.append_column("path", pa.array([folder] * table.num_rows, pa.string())))
    frame = pa.concat_tables(read, promote_options="permissive").to_pandas() if read else schema.empty("runs")
    frame = _renamed_in(frame, reduced.renames)
    mine = frame["run_id"].astype("string").isin(set(runs["run_id"].dropna())).fillna(False)
    frame = frame[mine.to_numpy(dtype=bool)]
    return dataclasses.replace(schema.Tables.empty(), runs=schema.conform(frame.reset_index(drop=True), "runs"))


def _renamed_in(frame: pd.DataFrame, renames: dict) -> pd.DataFrame:
    """``frame`` (with ``path``: its folder) with its run ids renamed as its folder's (``renames``)."""
    if not renames or not len(frame):
        return frame
    named = [renames.get(str(p), {}).get(str(r), r) for p, r in zip(frame["path"], frame["run_id"])]
    return frame.assign(run_id=pd.array(named, dtype="string"))


_RESULTS = {"step": "step results", "verify": "verify tables", "op_timings": "op timings", "bench": "engine results"}


def _unique_run_ids(parts: dict[str, schema.Tables], renamed: dict | None = None) -> dict[str, schema.Tables]:
    """The captures with run ids unique among them (:func:`profkit.catalog.keys.renames_of`, or ``renamed``: those
    renames already decided over more folders). Each renamed part's runs keep the old id in ``run_id_as_written``."""
    if renamed is None:
        def gpu_of(tables: schema.Tables) -> str:
            gpus = tables.runs["gpu"].dropna().astype(str) if "gpu" in tables.runs.columns else pd.Series(dtype=str)
            return gpus.iloc[0] if len(gpus) else "?"

        renamed = renames_of([(path, gpu_of(t), set(t.runs["run_id"].dropna().astype(str)))
                              for path, t in parts.items()])
    return {path: _with_renames(tables, renamed.get(path, {})) for path, tables in parts.items()}


def _with_renames(tables: schema.Tables, renamed: dict) -> schema.Tables:
    if not renamed:
        return tables
    tables = dataclasses.replace(tables, **{t: _renamed(getattr(tables, t), renamed) for t in schema.TABLES})
    return dataclasses.replace(tables, runs=tables.runs.assign(
        run_id_as_written=tables.runs["run_id"].map({v: k for k, v in renamed.items()})))


def renames(parts: Mapping[str, schema.Tables]) -> dict[str, dict[str, str]]:
    """Per capture folder: {run id as written: run id in the catalogue} of its renamed runs."""
    out = {}
    for path, tables in parts.items():
        if "run_id_as_written" in tables.runs.columns:
            pairs = tables.runs.dropna(subset=["run_id_as_written"])
            out[path] = dict(zip(pairs["run_id_as_written"].astype(str), pairs["run_id"].astype(str)))
    return out


def _renamed(frame: pd.DataFrame, renamed: dict) -> pd.DataFrame:
    if "run_id" not in frame.columns or not len(frame):
        return frame
    return frame.assign(run_id=frame["run_id"].astype("string").replace(renamed))


def _with_path(tables: schema.Tables, folder: Path) -> schema.Tables:
    """``tables`` whose runs name the capture folder they were read from (``path``)."""
    runs = tables.runs
    if "path" in runs.columns and runs["path"].notna().all():
        return tables
    path = runs["path"].fillna(str(folder)) if "path" in runs.columns else str(folder)
    return dataclasses.replace(tables, runs=runs.assign(path=path))


CACHE_EVENT_COLUMNS = {"file": "string", "line": "Int64", "kind": "string", "path": "string", "detail": "string"}
_CACHE_KINDS = ("cache_env_mismatch", "cache_not_saved", "cache_loaded")
# What the catalogue keeps of a log beside captures: FlashInfer on cache files, and its one-time JIT module builds
# (``detail``: the module), which a port's or tuning's wall time includes on a fresh machine.
_SAID_KINDS = (*_CACHE_KINDS, "jit_build")


def said_events(inv: Inventory, tables: schema.Tables, problems: list) -> pd.DataFrame:
    """What FlashInfer said in the debug logs about cache files (loaded, ignored: another environment, not saved)
    and the JIT modules it built (``kind`` ``jit_build``).

    From the parsed logs' events when the tables came from the logs; else each log is scanned once for
    those lines alone (the captures beside them hold the rest)."""
    events = getattr(tables, "events", None)
    if events is not None and len(events):
        hit = events[events["kind"].astype("string").isin(_SAID_KINDS).fillna(False).to_numpy(dtype=bool)]
        return schema.conform_columns(hit[[c for c in CACHE_EVENT_COLUMNS if c in hit.columns]].reset_index(drop=True),
                                      CACHE_EVENT_COLUMNS)
    rows = []
    if events is None:
        for path in inv.paths("log"):
            rows += _scan_said_lines(path, problems)
    return schema.conform_columns(pd.DataFrame(rows, columns=list(CACHE_EVENT_COLUMNS)), CACHE_EVENT_COLUMNS)


def _scan_said_lines(path: Path, problems: list) -> list[dict]:
    from profkit.sources.logs.grammar import EVENT_PATTERNS, JIT_BUILD

    marks = {**{kind: EVENT_PATTERNS[kind] for kind in _CACHE_KINDS}, "jit_build": JIT_BUILD}
    rows = []
    item = Input(name=str(path), path=str(path))
    try:
        for number, raw in enumerate(item.lines(), start=1):
            if b"configs" not in raw and b"Cache file" not in raw and b"Building JIT module" not in raw:
                continue
            line = raw.decode("utf-8", errors="replace")
            for kind, (prefix, pattern) in marks.items():
                at = line.find(prefix)
                found = pattern.match(line, at) if at >= 0 else None
                if found:
                    groups = found.groupdict()
                    rows.append({"file": str(path), "line": number, "kind": kind, "path": groups.get("path"),
                                 "detail": groups.get("detail")})
                    break
    except ProfkitError as exc:
        problems.append(str(exc))
    return rows


def _documents(inv: Inventory, kind: str, problems: list):
    """(path, JSON document) of each file of ``kind`` that parses; each one that does not is named in ``problems``."""
    for p in inv.paths(kind):
        try:
            doc, _ = load_json(Input(name=str(p), path=str(p)))
        except ProfkitError as exc:
            problems.append(str(exc))
            continue
        yield p, doc


def provenance(inv: Inventory, problems: list) -> dict[str, dict]:
    """Each provenance.json, by folder (relative to the root); one that is no JSON object with an ``env`` object
    is named. Commands have their secrets masked."""
    from profkit.sources.env import mask_secrets

    out = {}
    for p, doc in _documents(inv, "provenance", problems):
        if not isinstance(doc, dict) or not isinstance(doc.get("env", {}), dict):
            what = type(doc).__name__ if not isinstance(doc, dict) else f"an 'env' that is a {type(doc['env']).__name__}"
            problems.append(f"{p}: expected a JSON object with an 'env' object, found {what}; skipped")
            continue
        env = doc.get("env")
        if isinstance(env, dict) and isinstance(env.get("command"), str):
            doc = {**doc, "env": {**env, "command": mask_secrets(env["command"])}}
        out[inv.rel(p.parent)] = doc
    return out


def op_timings(inv: Inventory, problems: list, renamed: Mapping[str, dict] | None = None) -> pd.DataFrame:
    """Every op_timings.parquet; run ids follow their capture's (``renamed``: :func:`renames`)."""
    frames = []
    for p in inv.paths("op_timings"):
        try:
            with open_regular(p) as stream:  # one open; pyarrow would block on a FIFO
                frames.append(_renamed(pd.read_parquet(stream), (renamed or {}).get(str(p.parent / "capture"), {})))
        except ProfkitError as exc:
            problems.append(str(exc))
        except (OSError, ValueError) as exc:
            problems.append(f"{p}: {type(exc).__name__}: {exc}")
    return schema.conform(pd.concat(frames, ignore_index=True), "op_timings") if frames else schema.empty("op_timings")


def step_rows(inv: Inventory, problems: list) -> dict[Path, pd.DataFrame]:
    """Every step.jsonl's rows, by file, with ``source`` (its folder), ``step_set`` (the folder above) and
    ``loaded_cache``."""
    from profkit.sources.engines import read_bench

    paths = inv.paths("step")
    try:  # every file in one frame (a frame's fixed cost was most of a file's); a file it cannot read: one by one
        every = _per_file(read_bench(paths, format="profkit-step", strict=True), paths) if paths else {}
    except ProfkitError:
        every = {}
    out = {}
    for p in paths:
        try:
            rows = every[p] if p in every else read_bench(p, format="profkit-step")
        except ProfkitError as exc:
            problems.append(f"{p}: {exc}")
            continue
        step_set = p.parent.parent if p.parent != inv.root else inv.root
        out[p] = rows.assign(source=inv.rel(p.parent), step_set=inv.rel(step_set),
                             loaded_cache=_loaded_caches(rows, inv.root))
    return out


def _per_file(rows: pd.DataFrame, paths: Sequence[Path]) -> dict[Path, pd.DataFrame]:
    """The rows of each of ``paths`` that :func:`read_bench` read together (in their order, each file's rows in a run
    of its ``source``), as reading each alone gives them."""
    source = rows["source"].to_numpy(dtype=object)
    edges = np.flatnonzero(np.r_[True, source[1:] != source[:-1], True])
    return {p: rows.iloc[i:j].reset_index(drop=True) for p, i, j in zip(paths, edges[:-1], edges[1:])}


def split_steps(inv: Inventory, rows: Mapping[Path, pd.DataFrame], parts: Mapping[str, schema.Tables], caches: set[str]
                ) -> tuple[pd.DataFrame, pd.DataFrame, dict, dict]:
    """Step rows of the sets holding a tuning-pass capture, the other sets' rows, the tuning-pass captures' run ids
    and their cache files, per (model, dtype, GPU): each GPU's step set has its own tuning pass."""
    by_set: dict[Path, list[pd.DataFrame]] = {}
    captures: dict[tuple[str, str, str], str] = {}
    cache_files: dict[tuple[str, str, str], str] = {}
    tuned_sets: set[Path] = set()
    for p, frame in rows.items():
        step_set = p.parent.parent if p.parent != inv.root else inv.root
        by_set.setdefault(step_set, []).append(frame)
        capture = parts.get(str(p.parent / "capture"))
        if capture is not None and len(capture.runs) and {"model", "dtype"} <= set(frame.columns) and len(frame):
            gpu = frame["gpu"].iloc[0] if "gpu" in frame.columns else None
            key = (str(frame["model"].iloc[0]), str(frame["dtype"].iloc[0]), UNKNOWN_GPU if pd.isna(gpu) else str(gpu))
            captures[key] = str(capture.runs["run_id"].iloc[0])
            if str(p.parent / "cache.json") in caches:
                cache_files[key] = inv.rel(p.parent / "cache.json")
            tuned_sets.add(step_set)
    pick = lambda sets: pd.concat([f for s in sets for f in by_set[s]], ignore_index=True) if sets else pd.DataFrame()  # noqa: E731
    return pick(sorted(tuned_sets)), pick(sorted(set(by_set) - tuned_sets)), captures, cache_files


def verify(inv: Inventory, problems: list, parts: Mapping[str, schema.Tables],
           prov: Mapping[str, dict] | None = None) -> pd.DataFrame:
    """Every readable verify table, with ``source`` (the file) and ``folder``, relative to the root.

    A table written before verify tables named their GPU gets ``verify_gpu`` from the environment its
    ``verify.json`` (or the folder's ``provenance.json``) records. Its run ids follow the capture it re-timed
    (:func:`_owner`) where the catalogue renamed that capture's runs."""
    from profkit.sources.verify import read_verify

    renamed = renames(parts)
    holders: dict[str, list[str]] = {}  # run id as written -> the capture folders holding it
    for folder, t in parts.items():
        written = t.runs.get("run_id_as_written", t.runs["run_id"]).fillna(t.runs["run_id"]).astype(str)
        for run_id in set(written):
            holders.setdefault(run_id, []).append(folder)
    frames, won = [], {}
    for p in inv.paths("verify"):
        try:
            table = read_verify(p).assign(source=inv.rel(p), folder=inv.rel(p.parent))
        except ProfkitError as exc:
            problems.append(str(exc))
            continue
        capture, gpu = _verify_meta(p, _nearest(inv, p.parent, prov or {}))
        if gpu and ("verify_gpu" not in table.columns or table["verify_gpu"].isna().all()):
            table = table.assign(verify_gpu=gpu)
        owner, held = _owner(table, p, capture, parts, holders, won)
        if owner is None and held:  # its run ids name a capture here whose picks are not the ones it timed
            ids = table["run_id"].dropna().astype(str).unique()
            table = _renamed(table, {i: f"{i}@{p.parent.parent.name}" for i in ids}).assign(
                capture_gpu=table.get("capture_gpu", UNKNOWN_GPU))
        frames.append(_renamed(table, renamed.get(owner, {}) if owner else {}))
    return pd.concat(frames, ignore_index=True) if frames else schema.empty("verify")


def _owner(table: pd.DataFrame, path: Path, written: Path | None, parts: Mapping[str, schema.Tables],
           holders: Mapping[str, list[str]], won: dict) -> tuple[str | None, list[str]]:
    """(the capture folder a verify table re-timed, the captures holding its run ids as written): the capture
    beside it (``profkit.bench.moe_sweep`` writes both in one folder), else the one whose path ends as the
    verify.json's ``capture`` does, else the one whose winners hold most of the table's picks, at least half (a
    capture verified on another machine, its run id reused by a capture tuned on a second GPU); else None.
    ``won``: each capture folder's winner keys (:func:`_winner_keys`), filled as they are needed."""
    ids = table["run_id"].dropna().astype(str).unique() if "run_id" in table.columns else ()
    held = sorted({folder for run_id in ids for folder in holders.get(run_id, ())})
    if str(path.parent / "capture") in held:
        return str(path.parent / "capture"), held
    if written is not None and written.parts:
        ends = [f for f in held if Path(f).parts[-len(written.parts):] == written.parts[-len(Path(f).parts):]]
        if len(ends) == 1:
            return ends[0], held
    for folder in held:
        if folder not in won:
            won[folder] = _winner_keys(parts[folder].winners)
    agreement = {folder: _agreement(table, won[folder]) for folder in held}
    best = max(held, key=agreement.get, default=None)
    return (best if best is not None and agreement[best] >= 0.5 else None), held


_PICK_KEY = ["op", "bucket", "runner", "tactic"]


def _winner_keys(winners: pd.DataFrame) -> set | None:
    """A capture's winners as (op, bucket, runner, tactic) texts; None without those columns."""
    if not set(_PICK_KEY) <= set(winners.columns):
        return None
    return set(map(tuple, winners[_PICK_KEY].astype("string").itertuples(index=False, name=None)))


def _agreement(table: pd.DataFrame, won: set | None) -> float:
    """The share of a verify table's picks, (op, bucket, runner, tactic), that are among a capture's winners
    (``won``: :func:`_winner_keys`)."""
    if "winner" not in table.columns or won is None:
        return 0.0
    rows = table[[*_PICK_KEY, "winner"]]  # the few columns used: a filter takes every column
    picks = rows[rows["winner"].fillna(False).to_numpy(dtype=bool)][_PICK_KEY].astype("string").drop_duplicates()
    found = [pick in won for pick in picks.itertuples(index=False, name=None)]
    return sum(found) / len(found) if found else 0.0


def _nearest(inv: Inventory, folder: Path, prov: Mapping[str, dict]) -> dict | None:
    """The provenance.json of ``folder`` or of the nearest folder above it, up to the root."""
    while True:
        doc = prov.get(inv.rel(folder))
        if doc is not None or folder == inv.root or inv.root not in folder.parents:
            return doc
        folder = folder.parent


def _verify_meta(path: Path, provenance: dict | None) -> tuple[Path | None, str | None]:
    """(the capture a verify table re-timed, the GPU it was timed on), from its verify.json, else the nearest
    provenance.json (``profkit.bench.moe_sweep`` and the policy study verify in the tuning process)."""
    meta = path.parent / "verify.json"
    doc = provenance
    if meta.is_file():
        try:
            doc, _ = load_json(Input(name=str(meta), path=str(meta)))
        except ProfkitError:
            doc = None
    if not isinstance(doc, dict):
        return None, None
    env = doc.get("env") if isinstance(doc.get("env"), dict) else {}
    capture = doc.get("capture")
    return (Path(capture) if isinstance(capture, str) else None), (env.get("gpu") or None)


def _under(verified: pd.DataFrame, home: Path) -> pd.DataFrame:
    """The verify rows read from files under ``home`` (each file's path looked at once)."""
    if not len(verified):
        return verified
    sources = verified["source"].astype(str)
    inside = {source: home in Path(source).parents for source in sources.unique()}
    return verified[sources.map(inside).to_numpy(dtype=bool)]


def moe(inv: Inventory, prov: Mapping[str, dict], parts: Mapping[str, schema.Tables],
        steps: Mapping[Path, pd.DataFrame], verified: pd.DataFrame):
    """The MoE runs: every folder holding ``moe_sweep`` runs (a provenance.json of an MoE shape), put together
    from what was already read; None when there are none."""
    from profkit.sources.moe_runs import assemble_moe_runs

    def home_of(folder: Path) -> Path:  # the folder holding a run folder (the root for a run given itself)
        return folder.parent if folder != inv.root else inv.root

    runs_at = {inv.root / rel if rel != "." else inv.root for rel, doc in prov.items()
               if str(doc.get("shape", "")).startswith("E=")}
    found = []
    for home in sorted({home_of(f) for f in runs_at}):
        folders = sorted({Path(p).parent for p in parts if home_of(Path(p).parent) == home}
                         | {f for f in runs_at if home_of(f) == home})
        found.append(assemble_moe_runs(
            home, {f: prov.get(inv.rel(f)) for f in folders},
            {f: parts[str(f / "capture")] for f in folders if str(f / "capture") in parts},
            [rows.assign(source=str(p)) for p, rows in steps.items() if home in p.parents],
            _under(verified, home)))
    if not found:
        return None
    from profkit.sources.moe_runs import MoeRuns

    return found[0] if len(found) == 1 else MoeRuns(
        tables=schema.concat([m.tables for m in found]), verify=pd.concat([m.verify for m in found], ignore_index=True),
        step=pd.concat([m.step for m in found], ignore_index=True), runs=pd.concat([m.runs for m in found], ignore_index=True))


def cache_winners(inv: Inventory, parts: Mapping[str, schema.Tables], problems: list) -> pd.DataFrame:
    """The winners of each cache.json written beside a capture, tagged with that capture's run_id.

    Read together in one call (one frame for every file: each file's own frames cost ~30 ms of fixed pandas work),
    in the inventory's order, each file's bucket dimension found from its own profiles as when read alone; should
    that call fail, file by file, each failure named."""
    from profkit.sources.cache import add_buckets, read_cache

    run_of = {}
    for path in inv.paths("cache"):
        capture = parts.get(str(path.parent / "capture"))
        if path.name == "cache.json" and capture is not None and len(capture.runs):
            run_of[str(path)] = str(capture.runs["run_id"].iloc[0])
    if not run_of:
        return pd.DataFrame()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            cached = read_cache(list(run_of))
    except (ImportError, OSError, ValueError, KeyError, ProfkitError):
        return _cache_winners_one_by_one(run_of, problems)
    problems += [f"{r.path}: {r.problem}" for r in cached.runs.itertuples(index=False) if r.problem]
    winners = cached.winners
    pooled = ~winners["bucket_rule"].astype("string").str.startswith("spec:").fillna(False).to_numpy(dtype=bool)
    if pooled.any():  # found from every file's profiles together: each file's own decide, as when read alone
        redone = [add_buckets(g) for _, g in winners[pooled].groupby("file", sort=False)]
        winners = pd.concat([winners[~pooled], *redone]).sort_index()
    order = {path: n for n, path in enumerate(run_of)}
    winners = winners.assign(capture_run_id=winners["file"].map(run_of))
    return winners.iloc[winners["file"].map(order).argsort(kind="stable")].reset_index(drop=True)


def _cache_winners_one_by_one(run_of: Mapping[str, str], problems: list) -> pd.DataFrame:
    """:func:`cache_winners` file by file (``run_of``: each file's capture run id), each unreadable file named."""
    from profkit.sources.cache import read_cache

    frames = []
    for path, run_id in run_of.items():
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                cached = read_cache(path)
        except (ImportError, OSError, ValueError, KeyError, ProfkitError) as exc:
            problems.append(f"{path}: {type(exc).__name__}: {exc}")
            continue
        frames.append(cached.winners.assign(capture_run_id=run_id))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def bench(paths: Sequence[str | Path], problems: list) -> tuple[pd.DataFrame, dict]:
    """Engine results given by name (``label`` = file name), and each file's leading ``#`` note."""
    from profkit.sources.engines import read_bench

    frames, notes = [], {}
    for b in paths:
        try:
            frames.append(read_bench(str(b), label=Path(b).stem))  # label = file: a pair stays apart
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


def _masked_commands(tables: schema.Tables) -> schema.Tables:
    """``tables`` with secrets in the runs' command lines masked (captures written before masking hold them)."""
    from profkit.sources.env import mask_secrets

    runs = tables.runs
    if "command" not in runs.columns or not len(runs):
        return tables
    masked = runs["command"].map(lambda c: mask_secrets(c) if isinstance(c, str) else c)
    return dataclasses.replace(tables, runs=runs.assign(command=masked.astype(runs["command"].dtype)))


def _loaded_caches(rows: pd.DataFrame, root: Path) -> pd.Series:
    """Per step row: the cache file its state loaded (``--cache FILE`` or ``--cache STATE=FILE`` of its command)."""
    if "command" not in rows.columns or "state" not in rows.columns:
        return pd.Series("", index=rows.index, dtype="string")
    parsed = {command: _cache_arguments(command) for command in rows["command"].dropna().astype(str).unique()}
    found: dict[str, str] = {}  # each file named once looked up on disk (a file's rows share a few commands)
    out = []
    for command, state in zip(rows["command"], rows["state"]):
        files = parsed.get(str(command), {}) if isinstance(command, str) else {}
        written = files.get(str(state)) or (files.get("") if str(state) == "cache" else None)
        if written and written not in found:
            found[written] = _under_root(written, root)
        out.append(found[written] if written else "")
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


def _policy_tuning(provenance: Mapping[str, dict]) -> pd.DataFrame:
    """(policy, op, tuning_s) per tuning call of the policy study, from its provenance.json ``runs``.

    The study names each run ``<op>-<layer>`` (``profkit.bench.policy_study``).
    """
    rows = [{"policy": run["policy"], "op": str(run.get("name", "")).partition("-")[0], "tuning_s": run["tune_call_s"]}
            for p in provenance.values() for run in (p.get("runs") or [])
            if isinstance(run, dict) and {"policy", "tune_call_s"} <= set(run)]
    return pd.DataFrame(rows, columns=["policy", "op", "tuning_s"])


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
