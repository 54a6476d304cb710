"""profkit's tidy tables: their columns, dtypes and meaning, and the parquet round trip.

Every source (live capture, debug logs, cache files) produces a :class:`Tables`; every analysis
function reads one of its frames. This module is the only place that knows the on-disk layout:
a capture is a directory holding one parquet file per table (``candidates.parquet``,
``winners.parquet``, ``tuning.parquet``, ``runs.parquet``).

Units end column names (``time_ms``, ``wall_s``). Tactics are canonical JSON text
(``json.dumps`` of FlashInfer's ``_tactic_to_json``), so they compare as strings and load without
executing anything.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import re
import warnings
from pathlib import Path
from typing import Iterable, Mapping

import numpy as np
import pandas as pd

from profkit.errors import ProfkitError, SchemaError


@dataclasses.dataclass(frozen=True)
class Column:
    """One column a profkit frame can hold (see :func:`describe`).

    Attributes:
        name: the column's name; one frame never holds two columns of one name.
        dtype: its pandas dtype.
        meaning: what its values are, units included.
        group: the table's name for a table's own (required) columns; ``<table>.<source>`` for the
            columns a source adds after them, e.g. ``winners.cache`` (what ``read_cache`` adds).
    """

    name: str
    dtype: str
    meaning: str
    group: str


# The column registry: (column, pandas dtype, meaning) per group (see Column.group), in frame order.
# A new column goes here, in its group.
_GROUPS: dict[str, tuple[tuple[str, str, str], ...]] = {
    "candidates": (
        ("run_id", "string", "run that recorded the row (see the runs table)"),
        ("rank", "Int64", "tensor-parallel rank of the process, when known"),
        ("call", "Int64", "tuning call (choose_one / rank_tactics) within the run"),
        ("thread", "Int64", "Python thread id that ran the call"),
        ("seq", "Int64", "order of measurement within the run"),
        ("api", "string", "AutoTuner entry point: choose_one or rank_tactics"),
        ("op", "string", "FlashInfer custom_op; missing when no tuning call was open"),
        ("profile", "string", "FlashInfer's nearest profile (the winner key's shapes), as text"),
        ("bucket", "Int64", "bucketed value of the first dynamic dimension (e.g. M)"),
        ("bucket_key", "string", "all dynamic dimensions' bucket values, as a tuple text"),
        ("shapes", "string", "input shapes the candidate was timed on, as text"),
        ("runner", "string", "runner class name"),
        ("tactic", "string", "tactic as canonical JSON text; -1 is the runner's default"),
        ("time_ms", "float64", "time FlashInfer measured; NaN when the candidate failed"),
        ("status", "string", "ok, failed, oom, or fallback (runner silently ran tactic -1)"),
        ("error", "string", "exception text or fallback warning; empty when none"),
        ("host_s", "float64", "wall seconds of the measurement on the host"),
        ("jit_s", "float64", "wall seconds of JIT builds inside the measurement"),
        ("timing", "string", "how FlashInfer timed it, e.g. 'cuda_graph, cold L2, median of 10'"),
        ("source", "string", "flashinfer (FlashInfer's own candidate) or default (profkit's)"),
    ),
    # What a reader looks at first (which pick, how fast, against the default) leads; ids come last.
    "winners": (
        ("op", "string", "FlashInfer custom_op"),
        ("profile", "string", "nearest profile: the shapes FlashInfer stores the winner under"),
        ("bucket", "Int64", "bucketed value of the first dynamic dimension"),
        ("runner", "string", "chosen runner class"),
        ("tactic", "string", "chosen tactic, canonical JSON text"),
        ("time_ms", "float64", "the chosen candidate's measured time; NaN if not profiled here"),
        ("default_time_ms", "float64", "runners[0] tactic -1 timed by the tuner's own timer"),
        ("speedup", "float64", "default_time_ms / time_ms, above 1 when the pick timed faster than the default; "
                               "derived from the two (never stored apart from them), NaN when either is missing"),
        ("status", "string", "status of the chosen candidate (fallback = it ran tactic -1)"),
        ("source", "string", "profiled, cache_file, cached (earlier call), store (an autotune_v2 store hit) or fallback"),
        ("reason", "string", "why a fallback winner: oom_abort, no_valid_tactic; else empty"),
        ("default_runner", "string", "runners[0]: what runs untuned (with tactic -1)"),
        ("bucket_key", "string", "all dynamic dimensions' bucket values"),
        ("extras", "string", "runner's cache-key extras, part of FlashInfer's key"),
        ("timing", "string", "how the times were measured"),
        ("run_id", "string", "run that recorded the row"),
        ("rank", "Int64", "tensor-parallel rank, when known"),
        ("call", "Int64", "tuning call within the run"),
    ),
    "tuning": (
        ("run_id", "string", "run that recorded the row"),
        ("rank", "Int64", "tensor-parallel rank, when known"),
        ("call", "Int64", "tuning call within the run"),
        ("parent_call", "Int64", "enclosing tuning call (rank_tactics inside get_valid_tactics)"),
        ("thread", "Int64", "Python thread id"),
        ("api", "string", "choose_one or rank_tactics"),
        ("kind", "string", "call (one tuning call) or profile (one profiled bucket)"),
        ("op", "string", "FlashInfer custom_op"),
        ("profile", "string", "nearest profile (kind=profile); empty for calls"),
        ("bucket", "Int64", "bucket (kind=profile)"),
        ("wall_s", "float64", "wall seconds, profkit's default timing excluded"),
        ("measure_s", "float64", "candidates' host seconds minus JIT inside them"),
        ("jit_s", "float64", "seconds of JIT builds (FlashInfer compiling modules)"),
        ("prep_s", "float64", "seconds before each runner's first candidate (cuDNN plan builds)"),
        ("overhead_s", "float64", "wall_s - measure_s: plan builds, JIT, input synthesis"),
        ("default_s", "float64", "seconds profkit spent timing the default (not in wall_s)"),
        ("n_candidates", "Int64", "FlashInfer candidates timed"),
        ("n_failed", "Int64", "of those, failed, oom or fallback"),
        ("status", "string", "ok, oom_abort, error (exception re-raised), skipped (skip_ops)"),
        ("error", "string", "exception text when status is error"),
    ),
    "runs": (
        ("run_id", "string", "identifier of the run"),
        ("source_kind", "string", "capture, log or cache: how the facts were obtained"),
        ("gpu", "string", "GPU name"),
        ("driver", "string", "NVIDIA driver version"),
        ("cuda", "string", "CUDA version torch was built with"),
        ("torch", "string", "torch version"),
        ("flashinfer", "string", "flashinfer-python version"),
        ("cudnn", "string", "cuDNN backend version"),
        ("cublas", "string", "cuBLAS version"),
        ("host", "string", "host name"),
        ("started_at", "string", "ISO-8601 UTC time the run started"),
        ("command", "string", "command line of the process"),
    ),
    # profkit verify: the tuner's candidates re-timed the way engines run the op (CUDA graph replays).
    "verify": (
        ("run_id", "string", "capture run whose candidates were re-timed"),
        ("op", "string", "FlashInfer custom_op"),
        ("shape", "string", "GEMM shape label 'N=.. K=..'"),
        ("n", "Int64", "GEMM N (output features)"),
        ("k", "Int64", "GEMM K (input features)"),
        ("m", "Int64", "GEMM M the op was run at"),
        ("bucket", "Int64", "bucket FlashInfer's GEMMs round M up to; its candidates were timed"),
        ("profile", "string", "the bucket's nearest profile (FlashInfer's key shapes)"),
        ("runner", "string", "runner class name"),
        ("tactic", "string", "tactic, canonical JSON text; -1 is the runner's default"),
        ("tuner_ms", "float64", "the tuner's own time of this candidate at the bucket"),
        ("tuner_rank", "Int64", "1 = the tuner's fastest in the bucket; NA for an untimed default"),
        ("winner", "boolean", "the tuner's pick for the bucket"),
        ("default", "boolean", "runners[0] with tactic -1: what runs untuned"),
        ("cache_choice", "boolean", "what FlashInfer's own lookup ran at this M with the capture's cache file"),
        ("serving_ms", "float64", "median per-call time over CUDA graph replays, rotating inputs"),
        ("serving_p10_ms", "float64", "10th percentile per-call time over the replays"),
        ("serving_p90_ms", "float64", "90th percentile per-call time over the replays"),
        ("status", "string", "ok, or failed (the candidate could not run at this M)"),
        ("error", "string", "exception text when failed"),
        ("file_key", "string", "FlashInfer's cache-file key of this runner at this M (what repair writes)"),
        ("timing", "string", "how serving_ms was timed"),
    ),
    # Outside tuning: the real op timed at chosen M values, with and without tuned configs.
    "op_timings": (
        ("run_id", "string", "capture run whose tuned configs the 'tuned' rows used"),
        ("op", "string", "FlashInfer custom_op"),
        ("n", "Int64", "GEMM N (output features)"),
        ("k", "Int64", "GEMM K (input features)"),
        ("m", "Int64", "GEMM M (tokens) the op was called with"),
        ("bucket", "Int64", "bucket FlashInfer maps M to"),
        ("state", "string", "untuned (no tuned config) or tuned"),
        ("runner", "string", "runner choose_one returned at this M"),
        ("tactic", "string", "tactic choose_one returned at this M"),
        ("time_ms", "float64", "median per-call time over graph replays"),
        ("time_ms_p10", "float64", "10th percentile per-call time"),
        ("time_ms_p90", "float64", "90th percentile per-call time"),
        ("timing", "string", "how it was timed"),
    ),
    # End-to-end results: SGLang / vLLM serving benchmarks, lm-eval accuracy, profkit step timings.
    "bench": (
        ("engine", "string", "sglang, vllm, lm-eval or profkit-step"),
        ("format", "string", "the reader that produced the row, e.g. sglang-text, vllm-json"),
        ("source", "string", "file the row came from (or <text>)"),
        ("line", "Int64", "line in source where the row's block starts"),
        ("label", "string", "caller-given label of the run, e.g. autotune-on; else empty"),
        ("model", "string", "model name or path, when the output names it"),
        ("backend", "string", "benchmark backend, when given"),
        ("autotune", "boolean", "FlashInfer autotune on (True) / off (False), when the output says"),
        ("request_rate", "float64", "requests per second asked for; inf = all at once"),
        ("max_concurrency", "Int64", "maximum concurrent requests"),
        ("successful_requests", "Int64", "completed requests"),
        ("duration_s", "float64", "benchmark duration"),
        ("total_input_tokens", "Int64", "input tokens over the run"),
        ("total_output_tokens", "Int64", "generated tokens over the run"),
        ("request_throughput", "float64", "requests per second achieved"),
        ("input_tok_s", "float64", "input token throughput"),
        ("output_tok_s", "float64", "output token throughput"),
        ("total_tok_s", "float64", "input + output token throughput"),
        *((f"{stat}_{metric}_ms", "float64", f"{stat} {what}")
          for metric, what in (("ttft", "time to first token"), ("tpot", "time per output token"),
                               ("itl", "inter-token latency"), ("e2e", "end-to-end request latency"))
          for stat in ("mean", "median", "p90", "p95", "p99")),
        ("task", "string", "lm-eval task; empty for serving rows"),
        ("metric", "string", "lm-eval metric (e.g. exact_match,strict-match)"),
        ("value", "float64", "lm-eval metric value"),
        ("value_stderr", "float64", "lm-eval metric standard error"),
        ("missing", "string", "fields the block should have had but did not, comma-separated"),
        ("raw", "string", "the text (or JSON) the row was read from"),
    ),
    # read_log adds these after each table's own columns.
    "candidates.log": (
        ("runner_id", "string", "the runner object's address in its repr: one per runner per process"),
        ("file", "string", "the log's name (unique among the logs read together)"),
        ("line", "Int64", "line of the candidate's record in the log"),
        ("bucket_rule", "string", "how bucket was read from the profile (profkit.sources.cache.add_buckets)"),
    ),
    "winners.log": (
        ("file", "string", "the log's name"),
        ("line", "Int64", "line of the 'profiling chosen runner' record; empty for OOM fallbacks"),
        ("shapes", "string", "opt shapes of a profile an OOM-aborted call never reached"),
        ("bucket_rule", "string", "how bucket was read from the profile or shapes"),
    ),
    "tuning.log": (
        ("shapes", "string", "a profile's opt shapes as its candidate lines print them"),
        ("n_skipped", "Int64", "tactics FlashInfer skipped as unsupported ('Skipped N unsupported tactic(s)')"),
        ("bar_elapsed_s", "float64", "the call's tqdm bar's elapsed time"),
        ("n_profiles", "Int64", "profiles the call generated (or the tqdm bar's total)"),
        ("n_profiled", "Int64", "profiles with candidates or a winner line"),
    ),
    "runs.log": (
        ("file", "string", "the log's name"),
        ("path", "string", "the log's path as given (empty for text)"),
        ("stream", "string", "the line prefix naming the process ('' for none)"),
        ("pid", "Int64", "process id from the line prefix"),
        ("rank", "Int64", "rank from the line prefix"),
        ("ended_at", "string", "local time of the last record read one by one (candidate and repeated lines aside)"),
        ("first_line", "Int64", "the run's first line in the file"),
        ("last_line", "Int64", "the run's last line in the file"),
    ),
    # read_cache adds these after the winners table's own.
    "winners.cache": (
        ("pp_rank", "Int64", "pipeline-parallel rank, from rank_tp{t}_pp{p}_dp{d}.json (rank is the TP rank)"),
        ("dp_rank", "Int64", "data-parallel rank, from the same file name"),
        ("key", "string", "FlashInfer's file key text"),
        ("cache_format", "string", "v1 or v2"),
        ("problem", "string", "empty, or why FlashInfer would not use the entry as stored"),
        ("policy", "string", "the stored profiling policy as JSON text"),
        ("cuda_graph_profile_replays", "Int64", "CUDA graph replays per timing, from the policy"),
        ("l2_cache_policy", "string", "hot or cold, from the policy"),
        ("file", "string", "where the entry is: the v1 file or the v2 entry"),
        ("bucket_rule", "string", "how bucket was read from the profile (add_buckets)"),
    ),
    # read_bench adds these after the bench table's own: first what SGLang, vLLM and lm-eval outputs hold,
    "bench.engines": (
        ("complete", "boolean", "the block's closing line (or the whole JSON record) was seen"),
        ("unread_lines", "string", "lines inside the block that matched no known label, comma-separated"),
        ("failed_requests", "Int64", "failed requests (vLLM >= 0.12)"),
        ("num_prompts", "Int64", "prompts asked for (vLLM JSON)"),
        ("total_input_text_tokens", "Int64", "text part of the input tokens (SGLang >= 0.5.4)"),
        ("total_input_vision_tokens", "Int64", "vision part of the input tokens (SGLang >= 0.5.4)"),
        ("total_output_tokens_retokenized", "Int64", "generated text re-encoded by the client tokenizer (SGLang)"),
        ("peak_output_tok_s", "float64", "most output tokens (streamed chunks) in any 1 s bucket"),
        ("peak_concurrent_requests", "Int64", "most requests in flight in any 1 s bucket"),
        ("concurrency", "float64", "average requests in flight: sum of E2E latency / duration (SGLang)"),
        ("accept_length", "float64", "speculative decoding: average accepted tokens per step"),
        ("request_goodput", "float64", "requests per second meeting the --goodput SLOs"),
        ("max_itl_ms", "float64", "largest inter-token latency (SGLang text only)"),
        ("cache_hit_rate_pct", "float64", "prefix cache hit rate, --cache-report (SGLang >= 0.5.14 text)"),
        *((f"std_{m}_ms", "float64", f"standard deviation of {m} (JSON only)") for m in ("ttft", "tpot", "itl", "e2e")),
        ("dataset_name", "string", "benchmark dataset (SGLang JSONL)"),
        ("random_input_len", "Int64", "--random-input-len (SGLang JSONL)"),
        ("random_output_len", "Int64", "--random-output-len (SGLang JSONL)"),
        ("attention_backend", "string", "server's attention backend (SGLang server_info)"),
        ("engine_version", "string", "engine version (SGLang server_info)"),
        ("metadata", "string", "user-given run metadata as JSON text (vLLM --metadata, SGLang --tag)"),
        ("batch_size", "Int64", "static batch size (SGLang bench_one_batch)"),
        ("prefill_latency_s", "float64", "prefill latency of the batch (bench_one_batch)"),
        ("prefill_tok_s", "float64", "prefill throughput (bench_one_batch)"),
        ("decode_latency_s", "float64", "median decode step latency (bench_one_batch)"),
        ("decode_tok_s", "float64", "median decode throughput (bench_one_batch)"),
        ("total_latency_s", "float64", "prefill + decode latency of the batch (bench_one_batch)"),
        ("lm_eval_section", "string", "tasks or groups: the lm-eval table (or JSON key) the row is in"),
        ("task_alias", "string", "lm-eval task alias (JSON)"),
        ("task_depth", "Int64", "lm-eval subtask indentation depth (table)"),
        ("task_version", "string", "lm-eval task version"),
        ("n_shot", "Int64", "lm-eval few-shot count"),
        ("higher_is_better", "boolean", "lm-eval: whether a larger metric value is better"),
        ("base_url", "string", "lm-eval model_args base_url: the serving endpoint evaluated"),
    ),
    # then what profkit step records (profkit/bench/step.py) hold.
    "bench.step": (
        ("dtype", "string", "profkit step: GEMM dtype, bf16 or fp8"),
        ("phase", "string", "profkit step: decode or prefill"),
        ("tokens", "Int64", "profkit step: tokens in the step (decode batch, prefill chunk): the GEMMs' M"),
        ("state", "string", "profkit step: untuned, tuned, planned, v2-graph, v2-eager, cache, advised, repaired "
                            "or torch"),
        ("step_ms", "float64", "profkit step: time of one step (median of graph replays)"),
        ("repetition", "Int64", "profkit step: repetition index"),
        ("series", "string", "profkit step: the timed series, the record's own label (= state; MoE models: a state "
                             "given twice is timed again as untuned-2, an A/A pair)"),
        ("pass", "Int64", "profkit step (MoE models): interleaved pass; every series' graph is replayed once per pass"),
        ("imbalance", "float64", "profkit step (MoE models): the router's max / mean tokens per expert, first layer"),
        ("layers", "Int64", "profkit step: decoder layers built"),
        ("kv_len", "Int64", "profkit step: KV cache length per sequence in decode"),
        ("attention", "string", "profkit step: attention implementation"),
        ("tuning_s", "float64", "profkit step: wall seconds of the tuning pass (tuned, planned, v2 states)"),
        ("tuning_jit_build_s", "float64", "profkit step: of tuning_s, the seconds FlashInfer built JIT modules from "
                                          "scratch (a fresh machine's one-time cost; null in rows written before "
                                          "2026-12-08)"),
        ("picks", "string", "profkit step: FlashInfer's (runner, tactic) for each linear of the timed graph, "
                            "e.g. 'qkv=CublasFp8GemmRunner:-1 o=...'; empty for torch"),
        ("flags", "string", "profkit step: FlashInfer private switches set for the run"),
        ("error", "string", "profkit step: why a size was not timed; empty when it was"),
        ("run_id", "string", "profkit step: profkit run id of the process"),
        *((name, "string", f"profkit step provenance: {name}") for name in (
            "gpu", "driver", "cuda", "torch", "flashinfer", "cudnn", "cublas", "host", "command")),
    ),
}
_REGISTRY = {group: tuple(Column(*spec, group) for spec in specs) for group, specs in _GROUPS.items()}
# Every column group: the tables (candidates, ..., bench), then the sources' extras (candidates.log, ...).
GROUPS = tuple(_REGISTRY)


def _ratio(frame: pd.DataFrame, numerator: str, denominator: str) -> pd.Series:
    """``numerator / denominator`` where both are finite and positive, else NaN."""
    top, bottom = (column.to_numpy() if column.dtype == np.float64 else  # every conform of a winners frame
                   pd.to_numeric(column, errors="coerce").astype("float64").to_numpy()
                   for column in (frame[numerator], frame[denominator]))
    with np.errstate(divide="ignore", invalid="ignore"):
        usable = (top > 0) & (bottom > 0) & np.isfinite(top) & np.isfinite(bottom)
        return pd.Series(np.where(usable, top / bottom, np.nan), index=frame.index)


# Columns computed from others each time a frame is conformed, so they always agree with them (a saved
# value is recomputed on load, and files written before the column existed gain it): table -> column ->
# (the columns it is computed from, how).
_DERIVED = {"winners": {"speedup": (("default_time_ms", "time_ms"),
                                    lambda f: _ratio(f, "default_time_ms", "time_ms"))}}

# The tables a Tables holds (op_timings and engine results travel beside them).
TABLES = ("candidates", "winners", "tuning", "runs")


def columns(table: str) -> tuple[str, ...]:
    """Names of the required columns of ``table``."""
    return tuple(c.name for c in _spec(table))


def columns_of(group: str) -> tuple[Column, ...]:
    """The registered columns of ``group`` (one of :data:`GROUPS`), in frame order."""
    try:
        return _REGISTRY[group]
    except KeyError:
        raise ProfkitError(f"unknown column group {group!r}; profkit's groups are {', '.join(GROUPS)}") from None


def dtypes_of(*groups: str) -> dict[str, str]:
    """``{column: dtype}`` of ``groups``' columns in order, e.g. for :func:`conform_columns`."""
    return {c.name: c.dtype for group in groups for c in columns_of(group)}


def describe(table: str) -> pd.DataFrame:
    """The columns a ``table`` frame can hold, for docs and notebooks.

    Returns:
        One row per registered column: ``column``, ``dtype``, ``meaning`` and ``group`` (the
        table's name for its own, required columns, first; then ``<table>.<source>`` for those a
        source adds after them, e.g. ``winners.cache`` from ``read_cache``).
    """
    _spec(table)  # an unknown table raises
    rows = [dataclasses.astuple(c) for group in GROUPS if group.partition(".")[0] == table
            for c in columns_of(group)]
    return pd.DataFrame(rows, columns=["column", "dtype", "meaning", "group"])


# The tables docs/schema.md lists, and the reader that adds each source's extras (``<table>.<source>`` groups).
_REFERENCE_TABLES = ("candidates", "winners", "tuning", "runs", "op_timings", "bench", "verify")
_READER_OF_SOURCE = {"log": "read_log", "cache": "read_cache", "engines": "read_bench", "step": "read_bench"}


def markdown_reference() -> str:
    """docs/schema.md: every table's registered columns, then the columns each reader adds."""
    lines = ["# profkit tables", "",
             "Generated by `python scripts/schema_doc.py` from the column registry in `profkit/schema.py` "
             "(its tables and the readers' extras); `meta_<key>` and other per-file columns are not listed.", ""]
    for table in _REFERENCE_TABLES:
        described = describe(table)
        reader = described["group"].map(lambda group: _READER_OF_SOURCE.get(group.partition(".")[2], ""))
        for name in dict.fromkeys(reader):
            lines += [f"## {table}" if not name else f"Columns `{name}` adds after these:", "",
                      "| column | dtype | meaning |", "|---|---|---|"]
            lines += [f"| `{r.column}` | {r.dtype} | {r.meaning} |" for r in described[reader == name].itertuples()]
            lines.append("")
    return "\n".join(lines)


def empty(table: str) -> pd.DataFrame:
    """An empty frame with the columns and dtypes of ``table``."""
    return _empty(table).copy(deep=False)  # copy-on-write: the shared empty frame never changes


@functools.lru_cache(maxsize=None)
def _empty(table: str) -> pd.DataFrame:
    return pd.DataFrame({c.name: pd.Series(dtype=c.dtype) for c in _spec(table)})


def frame(table: str, rows: Iterable[Mapping]) -> pd.DataFrame:
    """Build a ``table`` frame from row dicts; absent required columns become missing values."""
    rows = list(rows)
    if not rows:
        return empty(table)
    df = pd.DataFrame.from_records(rows)
    missing = [c for c in _spec(table) if c.name not in df.columns]
    if missing:  # all missing values, made in their dtype at once (as conform would make them, column by column)
        df = pd.concat([df, pd.DataFrame({c.name: pd.Series(None, index=df.index, dtype=c.dtype) for c in missing},
                                         index=df.index)], axis=1)
    return conform(df, table)


def conform(df: pd.DataFrame, table: str) -> pd.DataFrame:
    """Return ``df`` with required columns first, in the table's dtypes (extra columns kept).

    Columns already in their dtype are shared with ``df``, not copied.
    """
    validate(df, table)
    derived = {name: how(df) for name, (_, how) in _DERIVED.get(table, {}).items()}
    if any(not _holds(df, name, values) for name, values in derived.items()):
        df = df.assign(**derived)
    required = columns(table)
    names = df.columns.tolist()  # plain lists: a frame's str Index and dtypes Series are slow to index one by one
    dtypes = dict(zip(names, df.dtypes.tolist()))
    stale = [c for c in _spec(table) if str(dtypes[c.name]) != c.dtype]
    if not stale and names[:len(required)] == list(required) and df.index.equals(pd.RangeIndex(len(df))):
        return df.copy(deep=False)  # already conformed (copy-on-write: nothing is copied)
    out = df[list(required) + [c for c in df.columns if c not in required]]
    converted = {c.name: as_dtype(out[c.name], c.dtype, table) for c in stale}
    return (out.assign(**converted) if converted else out).reset_index(drop=True)


def _holds(df: pd.DataFrame, name: str, values: pd.Series) -> bool:
    """Whether ``df`` already has ``name`` as ``values`` (float64, the same numbers and NaNs)."""
    return name in df.columns and df[name].dtype == np.float64 and np.array_equal(
        df[name].to_numpy(), values.to_numpy(dtype=float), equal_nan=True)


def conform_columns(frame: pd.DataFrame, dtypes: dict[str, str], table: str = "") -> pd.DataFrame:
    """``frame`` with exactly the columns of ``dtypes``, in order and dtype (missing ones empty).

    Columns already in their dtype are shared with ``frame``, not copied.
    """
    out = {name: as_dtype(frame[name], dtype, table) if name in frame.columns
           else pd.Series(None, index=frame.index, dtype=dtype) for name, dtype in dtypes.items()}
    return pd.DataFrame(out, index=frame.index, copy=False).reset_index(drop=True)


def require(frame: pd.DataFrame, columns: Iterable[str], table: str) -> None:
    """Raise SchemaError naming the columns of ``table`` that ``frame`` lacks."""
    if not isinstance(frame, pd.DataFrame):
        raise ProfkitError(f"expected a {table} DataFrame, got {type(frame).__name__}")
    missing = tuple(c for c in columns if c not in frame.columns)
    if missing:
        raise SchemaError(f"missing columns {', '.join(missing)}", table=table, columns=missing)


def validate(df: pd.DataFrame, table: str) -> None:
    """Raise SchemaError naming the missing columns when ``df`` is not a ``table`` frame."""
    derived = _DERIVED.get(table, {})
    require(df, [c for c in columns(table) if c not in derived], table)


def _spec(table: str) -> tuple[Column, ...]:
    """The required columns of ``table``."""
    if "." in table or table not in _REGISTRY:
        tables = ", ".join(g for g in GROUPS if "." not in g)
        raise ProfkitError(f"unknown table {table!r}; profkit's tables are {tables}")
    return _REGISTRY[table]


def as_dtype(series: pd.Series, dtype: str, table: str = "") -> pd.Series:
    """``series`` in ``dtype``: the one conversion every profkit frame goes through.

    Returned as is when it already has the dtype. Missing values stay missing (a float NaN
    becomes ``<NA>`` in a string column, never the text "nan").

    Raises:
        SchemaError: naming the column, when its values do not fit ``dtype``.
    """
    if str(series.dtype) == dtype:
        return series
    try:
        if dtype == "string":
            if series.dtype == object or isinstance(series.dtype, pd.StringDtype):
                return series.astype("string")  # one pass: None and NaN become <NA>
            return series.astype("object").where(series.notna(), None).astype("string")
        if dtype == "float64":
            return pd.to_numeric(series, errors="raise").astype("float64")
        return series.astype(dtype)
    except (TypeError, ValueError) as exc:
        raise SchemaError(f"column {series.name!r} is not {dtype}: {exc}", table=table,
                          columns=(str(series.name),)) from None


@dataclasses.dataclass(frozen=True, eq=False)
class Tables:
    """One set of profkit tables: what FlashInfer's autotuner measured and decided.

    Attributes:
        candidates: one row per (run, call, profile, runner, tactic) timed.
        winners: one row per (run, call, op, profile): FlashInfer's own decision.
        tuning: one row per tuning call (kind=call) and per profiled bucket (kind=profile).
        runs: one row per run: environment provenance (GPU, driver, CUDA, versions, command).
        problems: files :func:`load` could not read and skipped, as ``"<file>: <reason>"``.
    """

    candidates: pd.DataFrame
    winners: pd.DataFrame
    tuning: pd.DataFrame
    runs: pd.DataFrame
    problems: tuple[str, ...] = ()

    def __post_init__(self):
        for table in TABLES:
            object.__setattr__(self, table, conform(getattr(self, table), table))

    @classmethod
    def empty(cls) -> "Tables":
        return cls(**{t: empty(t) for t in TABLES})

    @property
    def env(self) -> dict:
        """Provenance of the single run these tables hold (see ``runs`` for several)."""
        if len(self.runs) != 1:
            raise ProfkitError(f"these tables hold {len(self.runs)} runs; read tables.runs instead")
        row = self.runs.iloc[0]
        return {k: (None if pd.isna(v) else v) for k, v in row.items()}

    def save(self, path: str | os.PathLike) -> Path:
        """Write the tables as ``<path>/<table>.parquet``, atomically per file; return the path.

        Raises:
            ProfkitError: naming ``path``, when it is a file or cannot be created or written (``/proc``).
        """
        from profkit.outputs import atomic

        path = atomic.make_folder(path)
        for table in TABLES:
            write_parquet(getattr(self, table), path / f"{table}.parquet")
        return path

    def __repr__(self) -> str:
        gpus = sorted(self.runs["gpu"].dropna().unique())
        versions = sorted(self.runs["flashinfer"].dropna().unique())
        lines = [f"Tables  {_count(len(self.runs), 'run')}  gpu={', '.join(gpus) or '?'}  "
                 f"flashinfer={', '.join(versions) or '?'}", *summary_lines(self)]
        if self.problems:
            lines.append(f"  WARNING: {len(self.problems)} file(s) could not be read and were skipped; see .problems")
        return "\n".join(lines)


def summary_lines(tables: Tables) -> list[str]:
    """The body of a Tables repr (also a live capture's): a line per op, then the row counts."""
    return ["  " + line for line in _text_table(_per_op(tables))] + [
        f"  rows: candidates {len(tables.candidates)}, winners {len(tables.winners)}, tuning {len(tables.tuning)}"]


def _count(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _per_op(tables: Tables) -> list[dict[str, str]]:
    """What the repr shows per op: buckets, FlashInfer's candidates timed and failed, winners, top-level
    tuning seconds and the winners' median speedup over the default."""
    cand = tables.candidates[tables.candidates["source"].fillna("flashinfer") != "default"]
    winners, tuning = tables.winners, tables.tuning
    calls = tuning[(tuning["kind"] == "call") & tuning["parent_call"].isna()]
    rows = []
    for op in sorted({*cand["op"].dropna(), *winners["op"].dropna()}):
        c, w = cand[cand["op"] == op], winners[winners["op"] == op]
        buckets = sorted((w if len(w) else c)["bucket"].dropna().unique())
        spent = calls.loc[calls["op"] == op, "wall_s"].dropna()
        speedup = w["speedup"].median()
        rows.append({
            "op": op,
            "buckets": "-" if not buckets else str(buckets[0]) if len(buckets) == 1 else
            f"{len(buckets)}: {buckets[0]} to {buckets[-1]}",
            "candidates": str(len(c)),
            "failed": str(int((c["status"].fillna("ok") != "ok").sum())),
            "winners": str(len(w)),
            "tuning": _seconds(spent.sum()) if len(spent) else "-",
            "median speedup": "-" if pd.isna(speedup) else f"{speedup:.3f}x",
        })
    return rows


def _seconds(s: float) -> str:
    return f"{s:.0f} s" if s >= 100 else f"{s:.1f} s" if s >= 1 else f"{s:.3f} s"


def _text_table(rows: list[dict[str, str]]) -> list[str]:
    """Rows as aligned text lines under a header: the first two columns left-aligned, the rest right-aligned."""
    if not rows:
        return []
    names = list(rows[0])
    widths = {n: max(len(n), *(len(r[n]) for r in rows)) for n in names}

    def line(cells: dict[str, str]) -> str:
        return "  ".join(cells[n].ljust(widths[n]) if i < 2 else cells[n].rjust(widths[n])
                         for i, n in enumerate(names)).rstrip()

    return [line({n: n for n in names}), *map(line, rows)]


# -- the plan ``profkit advise`` writes (profkit.outputs.engine_plans) and reads back (profkit.sources.plan) --
PLAN_FORMAT = "profkit-plan/1"


@dataclasses.dataclass(frozen=True)
class PlanOp:
    """One op of a written plan: what the plan does with it and what that costs.

    Attributes:
        op: FlashInfer's custom_op.
        decision: ``skip``, ``some buckets``, ``block only`` or ``full``.
        tuned_buckets: the op's buckets the plan still tunes, ascending (none when skipped). The
            switch ``tuning_buckets`` is one tuple for every op; this is what it leaves of each.
        n_shapes: captured shapes of the op.
        n_buckets: captured buckets of the op.
        full_s: seconds of the op's full tuning pass.
        planned_s: seconds of its planned tuning pass.
        jit_s: JIT build seconds inside the capture.
        prep_kept_s: runner preparation seconds (cuDNN plan builds) blocking cannot save.
        pass_ms: the fully tuned op's step time per pass.
        cost_ms: expected step time the plan loses per pass.
        cost_pct: ``cost_ms`` in percent of ``pass_ms``.
        verdict: the plan's sentence for the op.
    """

    op: str
    decision: str
    tuned_buckets: tuple[int, ...]
    n_shapes: int
    n_buckets: int
    full_s: float
    planned_s: float
    jit_s: float
    prep_kept_s: float
    pass_ms: float
    cost_ms: float
    cost_pct: float
    verdict: str


@dataclasses.dataclass(frozen=True)
class PlanFile:
    """A plan as ``profkit advise`` wrote it: FlashInfer's switches and the per-op numbers.

    Attributes:
        budget: the constraint the plan was chosen under, as text.
        gain_source: ``tuner`` or ``serving`` (empty when read from ``plan.md``).
        skip_ops: ops for ``autotune(skip_ops=...)``.
        tuning_buckets: buckets for ``autotune(tuning_buckets=...)``; None keeps FlashInfer's own.
        blocklist: ``{"op::RunnerClass": [tactic, ...]}``, tactics as JSON values (lists, not tuples).
        metadata: the capture's environment in FlashInfer's ``_metadata`` keys.
        notes: the plan's caveats.
        ops: one :class:`PlanOp` per op, sorted by op (none when read from ``plan.md``).
    """

    budget: str
    gain_source: str
    skip_ops: tuple[str, ...]
    tuning_buckets: tuple[int, ...] | None
    blocklist: dict[str, list]
    metadata: dict
    notes: tuple[str, ...] = ()
    ops: tuple[PlanOp, ...] = dataclasses.field(default=())


def write_parquet(frame: pd.DataFrame, target: Path) -> Path:
    """Write ``frame`` to ``target`` atomically, through profkit's one writer (:mod:`profkit.outputs.atomic`)."""
    import io

    from profkit.outputs import atomic

    buffer = io.BytesIO()
    frame.to_parquet(buffer, index=False)
    return atomic.write_bytes(target, buffer.getvalue())


def concat(parts: Iterable[Tables]) -> Tables:
    """Stack several Tables (e.g. repeated runs) into one; run_id keeps them apart."""
    parts = list(parts)
    if not parts:
        return Tables.empty()
    return Tables(**{t: pd.concat([getattr(p, t) for p in parts], ignore_index=True) for t in TABLES},
                  problems=tuple(problem for p in parts for problem in p.problems))


# A `profkit capture --out DIR` directory holds one folder per process, named by host, pid and
# rank. Inside it the writer appends numbered segments, `seg-<n>`, each holding the rows recorded
# since the one before and renamed into place from a dot-named temporary folder, so a reader never
# sees half a segment.
_SEGMENT = r"seg-(\d+)"
_PROCESS_DIR = r"(?P<host>.+)-pid(?P<pid>\d{1,18})(?:-rank(?P<rank>\d{1,18}))?(?:\.\d+)?"


def process_dir_name(host: str, pid: int, rank: int | None) -> str:
    """Folder name of one process's capture under a ``profkit capture`` directory."""
    return f"{host}-pid{pid}" + ("" if rank is None else f"-rank{rank}")


# An empty file a process writer leaves in its folder while a full disk keeps it from writing the
# calls it recorded (removed once they are written): load names it when the process has ended.
UNWRITTEN = "calls-not-written"


def segment_name(number: int) -> str:
    """Folder name of one appended segment of a process's capture."""
    return f"seg-{number:06d}"


def load(path: str | os.PathLike) -> Tables:
    """Read tables written by :meth:`Tables.save` or by ``profkit capture``.

    ``path`` is one saved capture directory, or a directory whose subdirectories are captures
    (e.g. repeated runs), or a ``profkit capture --out`` directory, where each
    ``<host>-pid<pid>-rank<rank>/`` folder holds one process's capture: all its segments are
    read in order and its rows get ``host``, ``pid`` and ``rank`` columns (from the tables, else
    from the folder name).
    Everything found is stacked into one Tables.

    Damage stays local: a file that cannot be read (partial, corrupt, missing, not a profkit
    table) or a segment that is empty is skipped and the rest is read. A warning names each, and
    ``tables.problems`` lists them as ``"<file>: <reason>"`` (empty when all was read).

    Raises:
        ProfkitError: when ``path`` holds no capture.
    """
    path = Path(path)
    units = _find_captures(path)
    if not units:
        raise ProfkitError(f"{path}: no profkit capture here (expected runs.parquet, or the seg-<n> "
                           "folders of `profkit capture`, in it or its subdirectories)")
    tables = concat(part for part in map(_load_one, units) if part is not None)
    if tables.problems:
        warnings.warn(f"profkit.load({str(path)!r}): skipped {len(tables.problems)} unreadable file(s); "
                      f"the rest was read: {'; '.join(tables.problems)}", stacklevel=2)
    return tables


def _find_captures(path: Path) -> list[Path]:
    """Capture folders under ``path``: ones holding table files, or seg- folders (one process)."""
    if not path.is_dir():
        return []
    found = []
    for dirpath, dirnames, filenames in os.walk(path):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))  # .tmp: writes in progress
        if any(re.fullmatch(_SEGMENT, d) for d in dirnames) or any(f"{t}.parquet" in filenames for t in TABLES):
            found.append(Path(dirpath))
            dirnames[:] = []
    return sorted(found)


def _segments(path: Path) -> list[Path]:
    """The ``seg-<n>`` sub-folders of ``path``, in number order."""
    found = []
    for entry in path.iterdir():
        match = re.fullmatch(_SEGMENT, entry.name)
        if match and entry.is_dir():
            found.append((int(match.group(1)), entry))
    return [entry for _, entry in sorted(found)]


def load_folder(path: str | os.PathLike) -> Tables:
    """One capture folder (a saved Tables, or a ``profkit capture`` process folder), as :func:`load` reads each
    folder it finds: what cannot be read is in ``problems``, and empty Tables when nothing could be."""
    return _load_one(Path(path)) or Tables.empty()


def _load_one(path: Path) -> Tables | None:
    """One capture folder: a saved Tables, or a process folder (its segments)."""
    try:
        segments = _segments(path)
        if segments:
            tables = concat(map(_read_segment, segments))
            tables = dataclasses.replace(tables, problems=tables.problems + _segment_gaps(path, segments)
                                         + _unfinished_segments(path))
            return _with_process_columns(tables, path.name)
        return _read_tables(path)
    except OSError as exc:
        return dataclasses.replace(Tables.empty(), problems=(f"{path}: {type(exc).__name__}: {exc.strerror or exc}",))


def _segment_gaps(path: Path, segments: list[Path]) -> tuple[str, ...]:
    """A problem naming the segments missing below the newest (the writer numbers them 1, 2, ...)."""
    have = {int(re.fullmatch(_SEGMENT, s.name).group(1)) for s in segments}
    missing = sorted(set(range(1, max(have))) - have)
    if not missing:
        return ()
    names = ", ".join(segment_name(n) for n in missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
    return (f"{path}: {names} missing (deleted?); the tuning calls written there are lost",)


def _unfinished_segments(path: Path) -> tuple[str, ...]:
    """A problem naming each ``.seg-<n>.tmp`` folder a killed writer left, and its :data:`UNWRITTEN` mark
    (calls a full disk kept it from writing): their rows are lost.

    A live writer has a temporary folder while it writes a segment, and the mark while it keeps rows
    for its next write, so either counts as left behind only when its process (this host's, by the
    folder's pid) is gone, or, for another host, after 10 minutes.
    """
    left = sorted(e for e in path.iterdir() if re.fullmatch(r"\." + _SEGMENT + r"\.tmp", e.name) or e.name == UNWRITTEN)
    match = re.fullmatch(_PROCESS_DIR, path.name)
    if not left or match is None:
        return ()
    import socket
    import time

    if match["host"] == socket.gethostname():
        try:
            os.kill(int(match["pid"]), 0)
            return ()  # still running: the folder is a segment being written
        except ProcessLookupError:
            pass
        except (PermissionError, OverflowError, ValueError):
            return ()
    else:
        left = [e for e in left if time.time() - e.stat().st_mtime > 600]
    return tuple(f"{path}: its process could not write its last tuning calls (its disk full) before it ended; those "
                 f"calls are lost (delete {e.name} once read)" if e.name == UNWRITTEN else
                 f"{e}: a segment its process never finished writing (killed, or its disk full); its rows are lost "
                 "(nothing reads it: delete the folder)" for e in left)


def _read_segment(path: Path) -> Tables:
    """One appended segment: the tables it holds (a table with no new rows has no file)."""
    if not any((path / f"{t}.parquet").exists() for t in TABLES):
        return dataclasses.replace(Tables.empty(), problems=(f"{path}: empty segment; skipped",))
    return _read_tables(path, missing_ok=True)


def _read_tables(path: Path, *, missing_ok: bool = False) -> Tables:
    """The four tables of one folder, an unreadable file replaced by an empty table and reported."""
    frames, problems = {}, []
    for table in TABLES:
        file = path / f"{table}.parquet"
        try:
            if not file.is_file() and (file.exists() or file.is_symlink()):  # a FIFO would block, a device never end
                raise ProfkitError("not a regular file")
            frames[table] = conform(_numbers_as_text(pd.read_parquet(file), table, file), table)
        except FileNotFoundError:
            if not path.is_dir():
                raise  # the folder deleted under us: the caller names it
            if not missing_ok:
                problems.append(f"{file}: missing")
            frames[table] = empty(table)
        except Exception as exc:  # noqa: BLE001 - any unreadable file is reported by name, never fatal
            first_line = str(exc).splitlines()[0] if str(exc) else ""
            problems.append(f"{file}: {type(exc).__name__}: {first_line}")
            frames[table] = empty(table)
    return Tables(**frames, problems=tuple(problems))


def _numbers_as_text(frame: pd.DataFrame, table: str, file: Path) -> pd.DataFrame:
    """``frame``, with a warning naming its text columns (op, runner, ...) that hold numbers: no profkit writer
    stores them so, and an op ``1`` read as the text '1' should not pass unsaid."""
    dtypes = dict(zip(frame.columns.tolist(), frame.dtypes.tolist()))
    numeric = [c.name for c in _spec(table) if c.dtype == "string" and c.name in dtypes
               and pd.api.types.is_numeric_dtype(dtypes[c.name]) and frame[c.name].notna().any()]
    if numeric:
        warnings.warn(f"{file}: column(s) {', '.join(numeric)} hold numbers where profkit writes text; read as "
                      "their text (a file profkit did not write?)", stacklevel=5)
    return frame


def _with_process_columns(tables: Tables, name: str) -> Tables:
    """Fill host, pid and rank in every table from a process folder's name where rows lack them."""
    match = re.fullmatch(_PROCESS_DIR, name)
    if match is None:
        return tables
    from_name = {"host": match["host"], "pid": int(match["pid"]), "rank": int(match["rank"]) if match["rank"] else None}
    frames, problems = {}, []
    for table in TABLES:
        df = getattr(tables, table).copy()
        for column, value in from_name.items():
            series = df[column] if column in df.columns else pd.Series([None] * len(df), index=df.index)
            series = series.astype("object").where(series.notna(), value)
            if column == "host":
                df[column] = series.astype("string")
                continue
            numbers = pd.to_numeric(series, errors="coerce")
            numbers = numbers.where((numbers % 1 == 0) & (numbers.abs() < 2**62))
            if numbers.isna().sum() > series.isna().sum():  # a pid or rank that is no number: named, the folder's used
                problems.append(f"{name}/{table}: {int(numbers.isna().sum() - series.isna().sum())} row(s) with a "
                                f"{column} that is not a number; read as the folder name's ({value})")
                numbers = numbers.where(numbers.notna(), value)
            df[column] = numbers.astype("Int64")
        frames[table] = df
    return Tables(**frames, problems=tables.problems + tuple(problems))


def tactic_text(value) -> str:
    """Canonical JSON text of a tactic value (tuples become lists)."""
    return json.dumps(_jsonable(value), separators=(", ", ": "))


def _jsonable(value):
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, bool) or value is None or isinstance(value, (str, float)):
        return value
    if isinstance(value, int):
        return int(value)
    if hasattr(value, "__iter__"):
        return [_jsonable(v) for v in value]
    return str(value)
