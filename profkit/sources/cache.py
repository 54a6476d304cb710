"""FlashInfer's persisted winners as profkit tables: v1 cache JSON and the 0.7 v2 managed store.

FlashInfer stores only winners, so :func:`read_cache` fills ``winners`` (``source="cache_file"``)
and ``runs`` (one row per cache file or v2 environment directory); ``candidates`` and ``tuning``
stay empty. Layouts read (flashinfer_autotuner.md section 3):

- v1 JSON written by ``save_configs`` / ``autotune(cache=...)``: ``"_metadata"`` first, optional
  ``"_records"``, entries ``str((op, runner, nearest_profile, extras)) -> [runner, tactic(,
  policy)]``, ``"_generation"`` last. 0.6.x values have no policy; keys before 0.6.13 have no
  extras.
- v2 managed store (``autotune_v2``, 0.7): ``<root>/v2/<env16>/manifest.json`` plus
  ``entries/<sha256(key)[:24]>.json``, each ``{"key", "key_fields", "runner", "tactic",
  "profiling_policy"}``.
- SGLang's per-rank files ``rank_tp{t}_pp{p}_dp{d}.json`` (rank, pp_rank, dp_rank columns), vLLM's
  ``autotune_configs.json``, or any directory holding such files (searched recursively).

Keys are parsed by walking Python's AST of the key text, never by evaluating it: ``extras`` hold
dtype tokens such as ``torch.bfloat16`` that are no literals, and they are kept as the exact text
FlashInfer wrote. Every ``_metadata`` / manifest key is carried into ``runs`` (known ones under
profkit's names, the rest as ``meta_<key>``), including values FlashInfer would reject.

This module also holds the key, profile and bucket helpers the log reader shares.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import hashlib
import json
import math
import os
import re
import warnings
from pathlib import Path
import numpy as np
import pandas as pd

from profkit import schema
from profkit.errors import ParseError
from profkit.sources.inputs import Input, as_int, boundary, load_json, unique_names, unreadable

# FlashInfer's _metadata keys -> profkit runs columns; other keys become meta_<key>.
_META_COLUMNS = {
    "flashinfer_version": "flashinfer", "cuda_version": "cuda", "cublas_version": "cublas",
    "cudnn_version": "cudnn", "cudnn_frontend_version": "cudnn_frontend",
    "cutlass_dsl_version": "cutlass_dsl", "gpu": "gpu",
}
# Values FlashInfer treats as indeterminate (a "soft" mismatch on load, AT:365).
_INDETERMINATE = (None, "unknown", "")
_SPECIAL_KEYS = ("_metadata", "_records", "_generation")
_NOT_A_CACHE = ('not a FlashInfer cache file (expected a JSON object with "_metadata" and '
                '"(op, runner, profile, extras)" keys, or a v2 store directory)')
_RANK_FILE = re.compile(r"rank_tp(?P<tp>\d+)_pp(?P<pp>\d+)_dp(?P<dp>\d+)\.json$")

# Ops whose DynamicTensorSpec is (input 0, dim -2) in 0.7.2 (GB:1933, GB:2132, ...): M of the GEMM.
_GEMM_OPS = frozenset({"fp8_gemm", "bf16_gemm", "fp4_gemm", "mxfp8_gemm", "trtllm_low_latency_gemm"})


# -- safe literal parsing ----------------------------------------------------------------------
class Name(str):
    """A bare or dotted name in key text (e.g. ``torch.bfloat16``), kept as its text."""


def literal(text: str):
    """Parse Python literal text (tuples, lists, numbers, strings, bare names) without running it.

    Names and attribute chains (``torch.float8_e4m3fn``) become :class:`Name` strings.

    Raises:
        ValueError: when the text is not such a literal (or is nested too deep to read).
    """
    try:
        return _value(_expression(text, "a literal"))
    except RecursionError:
        raise ValueError("not a literal: nested too deep") from None


def _expression(text: str, what: str) -> ast.expr:
    """The parsed (never evaluated) expression in ``text``; ValueError naming ``what`` was expected. Python's
    SyntaxWarning on odd text (``1if``: "invalid decimal literal") is the input's, not a fault: silenced."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SyntaxWarning)
            return ast.parse(text.strip(), mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise ValueError(f"not {what}: {exc}") from None


def _value(node):
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, str, bool, type(None))):
        return node.value
    if isinstance(node, ast.Tuple):
        return tuple(_value(e) for e in node.elts)
    if isinstance(node, ast.List):
        return [_value(e) for e in node.elts]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)) \
            and isinstance(node.operand, ast.Constant) and isinstance(node.operand.value, (int, float)):
        return -node.operand.value if isinstance(node.op, ast.USub) else node.operand.value
    if isinstance(node, (ast.Name, ast.Attribute)):
        return Name(ast.unparse(node))
    raise ValueError(f"not a literal: {type(node).__name__}")


def key_fields(text: str) -> dict:
    """op, runner, profile and extras (as FlashInfer's text) of a file key ``str((op, runner, ...))``; the dict is
    shared between calls: read it, never change it.

    Raises:
        ValueError: when the text is not such a key.
    """
    try:
        return _key_fields(text)
    except RecursionError:
        raise ValueError("not a cache key: nested too deep") from None


@functools.lru_cache(maxsize=4096)  # a key repeats in every cache file of its op and shapes (repeats, ranks, GPUs)
def _key_fields(text: str) -> dict:
    node = _expression(text, "a cache key")
    if not isinstance(node, ast.Tuple) or len(node.elts) not in (3, 4):
        raise ValueError("not a cache key: expected (op, runner, profile[, extras])")
    op, runner = (_value(e) for e in node.elts[:2])
    if not isinstance(op, str) or not isinstance(runner, str):
        raise ValueError("not a cache key: op and runner must be strings")
    profile = _value(node.elts[2])
    if not _is_profile(profile):
        raise ValueError("not a cache key: the profile must be a tuple of int tuples")
    extras = ast.get_source_segment(text.strip(), node.elts[3]) if len(node.elts) == 4 else ""
    if extras:
        _value(node.elts[3])  # must be a literal too
    return {"op": str(op), "runner": str(runner), "profile": str(profile), "extras": extras}


def _is_profile(value) -> bool:
    return isinstance(value, tuple) and all(
        isinstance(s, tuple) and all(isinstance(d, int) and not isinstance(d, bool) for d in s) for s in value)


# -- buckets -----------------------------------------------------------------------------------
def add_buckets(frame: pd.DataFrame, shapes_column: str = "profile") -> pd.DataFrame:
    """Fill ``bucket``, ``bucket_key`` and ``bucket_rule`` from each row's op and shapes text.

    Logs and cache files do not carry FlashInfer's DynamicTensorSpec, so the bucketed dimension
    is found, per op, by the first rule that applies (``bucket_rule`` says which):

    1. ``"spec: input 0 dim -2"`` for FlashInfer's GEMM ops (fp8_gemm, bf16_gemm, fp4_gemm,
       mxfp8_gemm, trtllm_low_latency_gemm), whose spec is M = dim -2 of input 0.
    2. ``"varies: input i dim j[, ...]"``: the dimensions whose value changes across the op's
       profiles in this frame (dimensions always equal to an earlier one, i.e. linked or
       constrained ones, and ``-1`` entries are left out); ``bucket`` is the first of them.
    3. ``"assumed: input 0 dim -2"`` when the op has a single profile: the GEMM convention.
    4. ``"unknown"`` (bucket missing) when input 0 has no dimension to read.
    """
    out = frame.copy()
    ops = out["op"].astype("object").where(out["op"].notna(), None)
    texts = out[shapes_column].astype("object").where(out[shapes_column].notna(), None)
    pairs: dict[tuple, int] = {}
    codes = np.fromiter((pairs.setdefault(p, len(pairs)) for p in zip(ops, texts)), dtype=np.int64, count=len(out))
    by_op: dict = {}
    for op, text in pairs:
        by_op.setdefault(op, []).append((text, _shapes(text) if text is not None else None))
    found = {}
    for op, rows in by_op.items():
        positions, rule = _bucket_positions(op, [shapes for _, shapes in rows if shapes is not None])
        for text, shapes in rows:
            values = [_dim(shapes, p) for p in positions] if shapes is not None else []
            found[(op, text)] = (values[0], str(tuple(values)), rule) if values and values[0] is not None \
                else (None, None, "unknown")
    per_pair = [found[p] for p in pairs]
    for k, (column, dtype) in enumerate((("bucket", "Int64"), ("bucket_key", "string"), ("bucket_rule", "string"))):
        out[column] = pd.array([v[k] for v in per_pair], dtype=dtype).take(codes)
    return out


@functools.lru_cache(maxsize=4096)
def _shapes(text: str):
    try:
        value = literal(text)
    except ValueError:
        return None
    return value if _is_profile(value) else None


def _dim(shapes: tuple, position: tuple[int, int]):
    """The dimension at ``position``; None when absent, -1, or beyond what an Int64 bucket holds."""
    i, j = position
    try:
        value = shapes[i][j]
    except IndexError:
        return None
    return as_int(value, low=0)


def _bucket_positions(op, profiles: list[tuple]) -> tuple[list[tuple[int, int]], str]:
    if op in _GEMM_OPS:
        return [(0, -2)], "spec: input 0 dim -2"
    distinct = list(dict.fromkeys(profiles))
    varying = []
    if len(distinct) > 1 and len({tuple(map(len, p)) for p in distinct}) == 1:
        columns: dict[tuple[int, int], tuple] = {}
        for i, tensor in enumerate(distinct[0]):
            for j in range(len(tensor)):
                column = tuple(p[i][j] for p in distinct)
                if -1 not in column and len(set(column)) > 1 and column not in columns.values():
                    columns[(i, j)] = column
        varying = list(columns)
    if varying:
        return varying, "varies: " + ", ".join(f"input {i} dim {j}" for i, j in varying)
    return [(0, -2)], "assumed: input 0 dim -2"


# -- reading -----------------------------------------------------------------------------------
def read_cache(path, *, strict: bool = False) -> schema.Tables:
    """Read FlashInfer cache files (v1 JSON, v2 managed store, per-rank files) as profkit Tables.

    Args:
        path: a v1 cache JSON, a v2 store (its root, ``<root>/v2`` or one ``<env16>`` directory),
            a directory holding cache files (searched recursively, e.g. SGLang's per-rank files),
            or a list of those.
        strict: raise on the first malformed entry instead of keeping it as a row whose
            ``problem`` says what is wrong.

    Returns:
        Tables whose ``winners`` hold one row per stored entry, sorted by run_id, op, bucket,
        runner: the schema's winner columns (``source="cache_file"``, ``call``/``time_ms``
        missing: a cache keeps no timings) plus ``file`` (where the entry is), ``cache_format``
        (v1 or v2), ``key`` (FlashInfer's file key text), ``policy`` (the stored profiling policy
        as JSON text), ``l2_cache_policy`` (hot / cold), ``cuda_graph_profile_replays``,
        ``bucket_rule`` (see :func:`add_buckets`), ``pp_rank`` / ``dp_rank`` (from
        ``rank_tp{t}_pp{p}_dp{d}.json``; ``rank`` is the TP rank) and ``problem`` (empty, or why
        FlashInfer would not use the entry as stored). ``runs`` has one row per file or v2
        environment: the schema's columns from ``_metadata`` (gpu, cuda, cublas, cudnn,
        flashinfer), ``cudnn_frontend``, ``cutlass_dsl``, ``meta_<key>`` for any other key,
        ``metadata_indeterminate`` (keys saved as "unknown"/null/missing: FlashInfer ignores
        such a file on load), ``metadata_differs`` (keys whose value differs between the files
        read together, e.g. two ranks), ``n_entries``, ``generation``, ``records`` (product
        namespaces under ``_records``), ``env_hash`` (v2) and ``problem``.

    Raises:
        ParseError: when nothing readable is found (naming the file, and the line for invalid
            JSON), or, with ``strict``, at the first malformed entry.
    """
    sources = _sources(path)
    runs, winners = [], []
    for source in sources:
        try:
            with boundary(source.where):
                run, rows = (_read_v1 if source.kind == "v1" else _read_v2)(source, strict=strict)
        except _NotACache:
            if source.explicit:
                raise ParseError(_NOT_A_CACHE, path=source.where, line=1) from None
            continue  # another JSON file beside the caches (e.g. provenance.json)
        except ParseError as exc:
            if strict or len(sources) == 1:
                raise
            run, rows = _failed_run(source, str(exc)), []
        runs.append(run)
        winners.extend(rows)
    if not runs:
        raise ParseError("no FlashInfer cache file among the JSON files here", path=str(_first(path)))
    if not winners and all(r["problem"] for r in runs):
        raise ParseError("no readable FlashInfer cache entries: " + "; ".join(r["problem"] for r in runs),
                         path=str(_first(path)))
    _mark_differences(runs)
    frame = schema.frame("winners", winners)
    if len(frame):
        frame = add_buckets(frame).sort_values(["run_id", "op", "bucket", "runner"], kind="stable")
    extras = schema.dtypes_of("winners.cache")
    frame = frame.reindex(columns=list(dict.fromkeys([*frame.columns, *extras])))
    for column, dtype in extras.items():
        frame[column] = frame[column].astype(dtype)
    return schema.Tables(candidates=schema.empty("candidates"), winners=frame.reset_index(drop=True),
                         tuning=schema.empty("tuning"), runs=schema.frame("runs", runs))


def read_cache_document(path: str | os.PathLike) -> dict:
    """A v1 cache file's JSON object (``_metadata`` and entries), read within profkit's JSON size bound.

    For commands that take a cache file's ``_metadata`` or entries as given (``repair --like``,
    ``advise --cache``); :func:`read_cache` is the reader that turns one into tables.

    Raises:
        ParseError: naming the file, when it is missing, no regular file (a FIFO is refused, not
            waited on), too large, not JSON, not a JSON object, or its ``_metadata`` is not an
            object of strings.
    """
    doc, _ = load_json(Input(name=str(path), path=os.fspath(path)))
    if not isinstance(doc, dict):
        raise ParseError(f"{_NOT_A_CACHE}; found a JSON {type(doc).__name__}", path=str(path))
    meta = doc.get("_metadata")
    if meta is not None and not (isinstance(meta, dict) and all(isinstance(v, str) for v in meta.values())):
        raise ParseError('"_metadata" is not a JSON object of strings, as FlashInfer writes it', path=str(path))
    return doc


class _NotACache(ParseError):
    """A JSON file that is no FlashInfer cache (skipped when found by a directory scan)."""


@dataclasses.dataclass(frozen=True)
class _Found:
    """One cache to read: a v1 file or a v2 environment directory, and its run id.

    ``explicit`` is true for a file named by the caller (not found by a directory scan); a scan
    that could not list a directory leaves ``problem`` set instead.
    """

    kind: str
    path: Path
    run_id: str = ""
    explicit: bool = False
    problem: str = ""

    @property
    def where(self) -> str:
        return str(self.path)


def _first(path):
    return path[0] if isinstance(path, (list, tuple)) and path else path


def _sources(path) -> list[_Found]:
    """Each v1 file and v2 environment of ``path``, with run ids unique among them (shortest path suffix)."""
    paths = list(path) if isinstance(path, (list, tuple)) else [path]
    if not paths:
        raise ParseError("no cache given (an empty list)")
    found = []
    for p in map(Path, paths):
        found.extend(_scan_dir(p) if p.is_dir() else [_Found("v1", p, explicit=True)])
    if not found:
        raise ParseError("no FlashInfer cache here (expected *.json cache files or a v2 store "
                         "<root>/v2/<env16>/manifest.json)", path=str(_first(path)))
    names = unique_names([f.path for f in found])
    return [dataclasses.replace(f, run_id=name) for f, name in zip(found, names)]


def _scan_dir(root: Path) -> list[_Found]:
    found = []

    def unlisted(exc: OSError) -> None:
        found.append(_Found("v1", Path(exc.filename or root), problem=str(unreadable(exc, exc.filename or str(root)))))

    for dirpath, dirnames, filenames in os.walk(root, onerror=unlisted):
        here = Path(dirpath)
        if "manifest.json" in filenames:
            found.append(_Found("v2", here))
            dirnames.clear()  # entries/ belong to this store
            continue
        dirnames.sort()
        found.extend(_Found("v1", here / f) for f in sorted(filenames) if f.endswith(".json"))
    return found


def _rank_columns(source: Path) -> dict:
    m = _RANK_FILE.search(source.name)
    if not m:
        return {}
    return {"rank": as_int(m["tp"]), "pp_rank": as_int(m["pp"]), "dp_rank": as_int(m["dp"])}


def _failed_run(source: _Found, problem: str) -> dict:
    return {"run_id": source.run_id, "source_kind": "cache", "path": source.where, "cache_format": source.kind,
            "n_entries": 0, "problem": problem, **_rank_columns(source.path)}


def _load(path: Path, name: str):
    """The JSON document at ``path`` and its text; ParseError naming the file when unreadable."""
    return load_json(Input(name=name, path=str(path)))


def _read_v1(source: _Found, *, strict: bool) -> tuple[dict, list[dict]]:
    if source.problem:
        raise ParseError(source.problem)
    data, text = _load(source.path, source.run_id)
    entries = {k: v for k, v in data.items() if k not in _SPECIAL_KEYS} if isinstance(data, dict) else {}
    if not isinstance(data, dict) or ("_metadata" not in data and not any(k.startswith("(") for k in entries)):
        raise _NotACache(_NOT_A_CACHE)
    meta = data.get("_metadata")
    run = {**_run_base(source, "v1", meta), "n_entries": len(entries),
           "generation": as_int(data.get("_generation")),
           "records": ",".join(sorted(data["_records"])) if isinstance(data.get("_records"), dict) else None}
    rows = []
    for key, value in entries.items():
        row = _entry_row(key, value, run, strict=strict, where=(source.where, _line_of(text, key)))
        rows.append({**row, "file": source.where})
    return run, rows


def _read_v2(source: _Found, *, strict: bool) -> tuple[dict, list[dict]]:
    env_dir = source.path
    manifest, _ = _load(env_dir / "manifest.json", source.run_id)
    if not isinstance(manifest, dict):
        raise ParseError("manifest.json is not a JSON object", path=str(env_dir / "manifest.json"))
    run = {**_run_base(source, "v2", manifest), "env_hash": env_dir.name}
    expected = hashlib.sha256(json.dumps(manifest, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:16]
    if expected != env_dir.name:
        run["problem"] = (f"directory name is not the manifest's hash ({expected}); FlashInfer never "
                          "looks here for this environment")
    rows = []
    entry_files = sorted((env_dir / "entries").glob("*.json")) if (env_dir / "entries").is_dir() else []
    for file in entry_files:
        try:
            with boundary(str(file)):
                row = _v2_entry_row(file, run, strict=strict)
        except ParseError as exc:
            if strict:
                raise
            row = _problem_row(run, str(exc))
        rows.append({**row, "file": str(file)})
    run["n_entries"] = len(entry_files)
    return run, rows


def _v2_entry_row(file: Path, run: dict, *, strict: bool) -> dict:
    entry, _ = _load(file, file.name)
    if not isinstance(entry, dict) or "key" not in entry:
        problem = "entry is not an object with a 'key'"
        if strict:
            raise ParseError(problem, path=str(file))
        return _problem_row(run, problem)
    value = [entry.get("runner"), entry.get("tactic")] + (
        [entry["profiling_policy"]] if entry.get("profiling_policy") is not None else [])
    row = _entry_row(entry["key"], value, run, strict=strict, where=(str(file), None))
    if not row["problem"] and hashlib.sha256(str(entry["key"]).encode()).hexdigest()[:24] != file.stem:
        row["problem"] = "file name is not sha256(key)[:24]: FlashInfer's lookup never reads it"
    return row


def _run_base(source: _Found, kind: str, meta) -> dict:
    run = {"run_id": source.run_id, "source_kind": "cache", "path": source.where, "cache_format": kind,
           "problem": "", **_rank_columns(source.path)}
    if not isinstance(meta, dict):
        run["metadata_indeterminate"] = "all (no _metadata object)"
        return run
    for key, value in meta.items():
        column = _META_COLUMNS.get(key, f"meta_{key}")
        run[column] = None if value is None else str(value)
    indeterminate = [k for k in _META_COLUMNS if meta.get(k) in _INDETERMINATE]
    run["metadata_indeterminate"] = ",".join(indeterminate)
    run["_meta"] = dict(meta)
    return run


def _mark_differences(runs: list[dict]) -> None:
    """Set metadata_differs: keys whose value differs between the runs read together."""
    metas = [r.pop("_meta", None) for r in runs]
    keys = sorted({k for m in metas if m for k in m})
    differ = [k for k in keys if len({json.dumps(m.get(k)) for m in metas if m is not None}) > 1]
    for run, meta in zip(runs, metas):
        run["metadata_differs"] = ",".join(differ) if meta is not None else ""


def _entry_row(key, value, run: dict, *, strict: bool, where: tuple[str, int | None]) -> dict:
    row = {"run_id": run["run_id"], "rank": run.get("rank"), "pp_rank": run.get("pp_rank"),
           "dp_rank": run.get("dp_rank"), "source": "cache_file", "reason": "", "key": str(key),
           "cache_format": run["cache_format"], "time_ms": math.nan, "problem": ""}
    problems = []
    try:
        row.update(key_fields(str(key)))
    except ValueError as exc:
        problems.append(f"unreadable key: {exc}")
    if isinstance(value, list) and len(value) in (2, 3) and isinstance(value[0], str):
        tactic = _json_text(value[1])
        row["tactic"] = tactic
        if tactic is None:
            problems.append("tactic nested too deep to read")
        if row.get("runner") not in (None, value[0]):
            problems.append(f"value names runner {value[0]!r}, key names {row['runner']!r}")
        row.setdefault("runner", value[0])
        if len(value) == 3:
            columns, problem = _policy_columns(value[2])
            row.update(columns)
            problems += [problem] if problem else []
    else:
        problems.append("value is not [runner, tactic(, policy)]")
    if problems:
        if strict:
            path, line = where
            raise ParseError(f"entry {str(key)[:120]!r}: {'; '.join(problems)}; pass strict=False to keep it "
                             "as a row with a problem", path=path, line=line)
        row["problem"] = "; ".join(problems)
    return row


def _problem_row(run: dict, problem: str) -> dict:
    return {"run_id": run["run_id"], "rank": run.get("rank"), "source": "cache_file", "reason": "",
            "cache_format": run["cache_format"], "time_ms": math.nan, "problem": problem}


def _json_text(value) -> str | None:
    """A stored JSON value as text in :func:`profkit.schema.tactic_text`'s layout (dicts in full); None
    when nested too deep to write."""
    try:
        return json.dumps(value, separators=(", ", ": "))
    except RecursionError:
        return None



def _policy_columns(policy) -> tuple[dict, str]:
    """``["cuda_graph_profile_replays", n, "l2_cache_policy", "hot"|"cold"]`` as columns, and a problem or ""."""
    columns = {"policy": _json_text(policy)}
    if not isinstance(policy, list) or len(policy) % 2:
        return columns, "profiling policy is not a list of name, value pairs"
    fields = {name: value for name, value in zip(policy[::2], policy[1::2]) if isinstance(name, str)}
    replays = fields.get("cuda_graph_profile_replays")
    columns["cuda_graph_profile_replays"] = as_int(replays, low=0)
    l2 = fields.get("l2_cache_policy")
    columns["l2_cache_policy"] = l2 if isinstance(l2, str) else None
    if len(fields) * 2 != len(policy):
        return columns, "profiling policy is not a list of name, value pairs"
    if replays is not None and columns["cuda_graph_profile_replays"] is None:
        return columns, f"cuda_graph_profile_replays is not a count: {_json_text(replays) or '?'}"[:200]
    return columns, ""


def _line_of(text: str, key: str) -> int | None:
    at = text.find(json.dumps(key))
    return text.count("\n", 0, at) + 1 if at >= 0 else None
