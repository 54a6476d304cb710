"""vLLM: ``vllm bench serve`` (and the older ``benchmark_serving.py``) result blocks and ``--save-result`` JSON.

Version ranges are where vLLM wrote a label or key, bracketed by the inspected wheels (0.9.2,
0.11.0, 0.12.0, 0.33.0) and dated samples; they only decide which absent fields a row lists as
``missing``. Percentile lines follow ``--percentile-metrics``/``--metric-percentiles``; only the
defaults (TTFT, TPOT, ITL at P99) are expected, and not at all once a block shows other choices.
"""

from __future__ import annotations

import json
import re

from profkit.sources.engines import _serving
from profkit.sources.engines._common import Printed, Record, Source, fields, json_records, rows_of, text_value

ENGINE = "vllm"
_METRICS = (("TTFT", "ttft"), ("TPOT", "tpot"), ("ITL", "itl"), ("E2EL", "e2e"))
_DEFAULT_LATENCY = frozenset(f"{stat}_{m}_ms" for stat in ("mean", "median", "p99") for m in ("ttft", "tpot", "itl"))
_DEFAULT_JSON = _DEFAULT_LATENCY | {f"std_{m}_ms" for m in ("ttft", "tpot", "itl")}


def _latency_spec(stat: str, metric: str) -> str:
    return "0.4-" if f"{stat}_{metric}_ms" in _DEFAULT_LATENCY else "?0.4-"


TEXT_FIELDS = fields({
    "Successful requests": ("successful_requests", "count", "0.4-"),
    "Failed requests": ("failed_requests", "count", "0.12-"),
    # In-block only with a cap (from 0.10.1); earlier only the pre-run line says it.
    "Maximum request concurrency": ("max_concurrency", "cap", "?0.10.1-"),
    "Request rate configured (RPS)": ("request_rate", "float2", "?0.11-"),
    "Benchmark duration (s)": ("duration_s", "float2", "0.4-"),
    "Total input tokens": ("total_input_tokens", "count", "0.4-"),
    "Total generated tokens": ("total_output_tokens", "count", "0.4-"),
    "Request throughput (req/s)": ("request_throughput", "float2", "0.4-"),
    "Request goodput (req/s)": ("request_goodput", "float2", "?0.6-"),
    "Input token throughput (tok/s)": ("input_tok_s", "float2", "0.4-0.6"),
    "Output token throughput (tok/s)": ("output_tok_s", "float2", "0.4-"),
    "Peak output token throughput (tok/s)": ("peak_output_tok_s", "float2", "0.11-"),
    "Peak concurrent requests": ("peak_concurrent_requests", "count_or_float2", "0.11-"),
    "Total Token throughput (tok/s)": ("total_tok_s", "float2", "0.6-0.33"),
    "Total token throughput (tok/s)": ("total_tok_s", "float2", "0.33-"),
    "Acceptance length": ("accept_length", "float2", "?0.4-"),
    **{f"{label} {name} (ms)": (f"{stat}_{metric}_ms", "float2", _latency_spec(stat, metric))
       for name, metric in _METRICS
       for label, stat in (("Mean", "mean"), ("Median", "median"), ("P90", "p90"), ("P95", "p95"), ("P99", "p99"))},
})
SECTIONS = {title: Printed.parse("?0.4-") for title in (
    "Time to First Token", "Time per Output Token (excl. 1st token)", "Inter-token Latency",
    "End-to-end Latency", "Speculative Decoding", "Probe Requests")}
# Printed before the block by every version: the rate and cap the run was started with.
_PRERUN = {"Traffic request rate": ("request_rate", "rate"), "Maximum request concurrency": ("max_concurrency", "cap")}
_PRERUN_LABELS = frozenset({"Burstiness factor"} | set(_PRERUN))
_PRERUN_TEXTS = ("Starting initial single prompt test run", "Initial test run completed")
_CUSTOM_LABEL = re.compile(r"P(?!99 )[\d.]+ \w+ \(ms\)|.* E2EL \(ms\)")

JSON_FIELDS = fields({
    "backend": ("backend", "str", "?0.4-"),
    "endpoint_type": ("backend", "str", "?0.9-"),
    "model_id": ("model", "str", "?0.4-"),
    "num_prompts": ("num_prompts", "int", "?0.4-"),
    "request_rate": ("request_rate", "rate", "0.4-"),
    "max_concurrency": ("max_concurrency", "int", "?0.4-"),
    "duration": ("duration_s", "float", "0.4-"),
    "completed": ("successful_requests", "int", "0.4-"),
    "failed": ("failed_requests", "int", "0.12-"),
    "total_input_tokens": ("total_input_tokens", "int", "0.4-"),
    "total_output_tokens": ("total_output_tokens", "int", "0.4-"),
    "request_throughput": ("request_throughput", "float", "0.4-"),
    "request_goodput": ("request_goodput", "float", "?0.6-"),
    "request_goodput:": ("request_goodput", "float", "?0.4-"),  # sic: benchmark_serving.py's key
    "output_throughput": ("output_tok_s", "float", "0.4-"),
    "total_token_throughput": ("total_tok_s", "float", "0.6-"),
    "max_output_tokens_per_s": ("peak_output_tok_s", "float", "0.11-"),
    "max_concurrent_requests": ("peak_concurrent_requests", "int", "0.11-"),
    "spec_decode_acceptance_length": ("accept_length", "float", "?0.4-"),
    **{f"{stat}_{key}_ms": (f"{stat}_{metric}_ms", "float", "0.4-" if f"{stat}_{metric}_ms" in _DEFAULT_JSON else "?0.4-")
       for key, metric in (("ttft", "ttft"), ("tpot", "tpot"), ("itl", "itl"), ("e2el", "e2e"))
       for stat in ("mean", "median", "std", "p90", "p95", "p99")},
})
# Keys that are vLLM's own, not --metadata a user merged in.
_OWN_KEYS = frozenset(JSON_FIELDS) | {"date", "label", "tokenizer_id", "burstiness", "ramp_up_strategy",
                                      "ramp_up_start_rps", "ramp_up_end_rps"}
JSON_SIGNATURE = frozenset({"date", "model_id", "tokenizer_id", "burstiness", "endpoint_type", "num_prompts"})
_CUSTOM_KEY = re.compile(r"p(?!99_)[\d.]+_\w+_ms|\w+_e2el_ms")


# -- bench serve text --------------------------------------------------------------------------
def text_rows(source: Source, skipped: list) -> list[dict]:
    """Rows of every ``Serving Benchmark Result`` block, all read as vLLM's."""
    return rows_of(_serving.find_blocks(source), lambda block: block_row(block, cut_line=source.cut_line), skipped,
                   "result block without a readable vLLM line")


def block_row(block: _serving.Block, *, cut_line: int | None) -> dict | None:
    """The row of one vLLM result block, or None when none of its lines can be read."""
    reading = _serving.read_block(block, TEXT_FIELDS, SECTIONS, cut_line=cut_line)
    custom = any(_CUSTOM_LABEL.fullmatch(label) for label in block.labels())
    row = _serving.row(reading, TEXT_FIELDS, engine=ENGINE, format="vllm-text", line=block.line, raw=block.raw,
                       complete=block.complete, expected_drop=_DEFAULT_LATENCY if custom else frozenset())
    if row is None:
        return None
    row["model"] = _serving.context_model(block.context)
    for column, value in _prerun(block.context, cut_line).items():
        row.setdefault(column, value)  # the in-block value wins (0.10.1+ prints both)
    return row


def _prerun(context, cut_line: int | None) -> dict:
    """Request rate and concurrency cap from the pre-run lines; a cap of None means no cap."""
    labels = _serving.context_labels(context)
    out = {}
    for label, (column, kind) in _PRERUN.items():
        if label in labels:
            line, text = labels[label]
            readable, value = text_value(kind, text, maybe_cut=line == cut_line)
            if readable and value is not None:
                out[column] = value
    return out


def prerun_evidence(context) -> bool:
    """Whether the lines before a block are vLLM's pre-run lines (SGLang prints none of them)."""
    return bool(_PRERUN_LABELS & set(_serving.context_labels(context))) or any(
        text.strip().startswith(_PRERUN_TEXTS) for _, text in context)


# -- --save-result JSON ------------------------------------------------------------------------
def json_rows(source: Source, skipped: list) -> list[dict]:
    """Rows of every JSON record of a source (one file, or one object per line with --append-result)."""
    return rows_of(json_records(source, skipped, only_json=True), record_row, skipped,
                   "JSON record without a vLLM bench serve key")


def record_row(record: Record) -> dict | None:
    """The row of one ``--save-result`` record, or None when it has no known key."""
    custom = any(_CUSTOM_KEY.fullmatch(key) for key in record.obj)
    row = _serving.row(_serving.read_record(record, JSON_FIELDS), JSON_FIELDS, engine=ENGINE, format="vllm-json",
                       line=record.line, raw=record.raw, complete=True,
                       expected_drop=_DEFAULT_JSON if custom else frozenset())
    if row is not None:
        metadata = {k: v for k, v in record.obj.items() if k not in _OWN_KEYS and isinstance(v, str)}
        if metadata:
            row["metadata"] = json.dumps(metadata)
    return row
