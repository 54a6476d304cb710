"""SGLang: ``bench_serving`` result blocks and ``--output-file`` JSONL, ``bench_one_batch`` output.

Version ranges below are where SGLang wrote a label or key (from the released wheels, see
``docs/engines.md``); they only decide which absent fields a row lists as ``missing``.
"""

from __future__ import annotations

import dataclasses
import json
import re

from profkit.sources.engines import _serving
from profkit.sources.engines._common import Printed, Record, Source, fields, json_records, rows_of

ENGINE = "sglang"


def _latency_labels(name: str, column: str, eras: dict[str, str]) -> dict:
    stat_column = {"Mean": "mean", "Median": "median", "P90": "p90", "P95": "p95", "P99": "p99", "Max": "max"}
    return {f"{stat} {name} (ms)": (f"{stat_column[stat]}_{column}_ms", "float2", spec) for stat, spec in eras.items()}


# Text labels -> (column, value kind, versions printing them).
TEXT_FIELDS = fields({
    "Backend": ("backend", "word", "0.2.9-"),
    "Traffic request rate": ("request_rate", "rate", "0.2.9-"),
    "Max reqeuest concurrency": ("max_concurrency", "cap", "0.4.0-0.4.7"),  # sic, fixed in 0.4.7
    "Max request concurrency": ("max_concurrency", "cap", "0.4.7-"),
    "Successful requests": ("successful_requests", "count", "0.2.9-"),
    "Benchmark duration (s)": ("duration_s", "float2", "0.2.9-"),
    "Total input tokens": ("total_input_tokens", "count", "0.2.9-"),
    "Total input text tokens": ("total_input_text_tokens", "count", "0.5.4-"),
    "Total input vision tokens": ("total_input_vision_tokens", "count", "0.5.4-0.5.8, ?0.5.8-"),
    "Total generated tokens": ("total_output_tokens", "count", "0.2.9-"),
    "Total generated tokens (retokenized)": ("total_output_tokens_retokenized", "count", "0.2.9-"),
    "Request throughput (req/s)": ("request_throughput", "float2", "0.2.9-"),
    "Input token throughput (tok/s)": ("input_tok_s", "float2", "0.2.9-"),
    "Output token throughput (tok/s)": ("output_tok_s", "float2", "0.2.9-"),
    "Peak output token throughput (tok/s)": ("peak_output_tok_s", "float2", "0.5.6-"),
    "Peak concurrent requests": ("peak_concurrent_requests", "count", "0.5.6-"),
    "Total token throughput (tok/s)": ("total_tok_s", "float2", "0.3.6-"),
    "Concurrency": ("concurrency", "float2", "0.4.3-"),
    "Accept length": ("accept_length", "float2", "?0.4.4-"),
    "Request goodput (req/s)": ("request_goodput", "float2", "?0.5.23-"),
    "Cache hit rate": ("cache_hit_rate_pct", "percent", "?0.5.14-"),
    **_latency_labels("E2E Latency", "e2e", {"Mean": "0.2.9-", "Median": "0.2.9-", "P90": "0.5.8-",
                                             "P95": "0.5.14-", "P99": "0.5.8-"}),
    **_latency_labels("TTFT", "ttft", {"Mean": "0.2.9-", "Median": "0.2.9-", "P90": "0.5.14-",
                                       "P95": "0.5.14-", "P99": "0.2.9-"}),
    # The TPOT section was dropped in 0.4.4 and came back in 0.5.6.
    **_latency_labels("TPOT", "tpot", {"Mean": "0.2.9-0.4.4, 0.5.6-", "Median": "0.2.9-0.4.4, 0.5.6-",
                                       "P90": "0.5.14-", "P95": "0.5.14-", "P99": "0.2.9-0.4.4, 0.5.6-"}),
    **_latency_labels("ITL", "itl", {"Mean": "0.2.9-", "Median": "0.2.9-", "P90": "0.5.14-",
                                     "P95": "0.4.4-", "P99": "0.2.9-", "Max": "0.4.4-"}),
})
SECTIONS = {title: Printed.parse(spec) for title, spec in {
    "End-to-End Latency": "0.2.9-",
    "Time to First Token": "0.2.9-",
    "Time per Output Token (excl. 1st token)": "0.2.9-0.4.4, 0.5.6-",
    "Inter-token Latency": "0.2.9-0.4.4",
    "Inter-Token Latency": "0.4.4-",
    "Cache Hit Details": "?0.5.14-",
}.items()}

# --output-file JSONL keys -> (column, kind, versions writing them). 0.2.9 wrote unsuffixed keys.
JSONL_FIELDS = fields({
    "backend": ("backend", "str", "0.2.9-"),
    "dataset_name": ("dataset_name", "str", "0.2.9-"),
    "request_rate": ("request_rate", "rate", "0.2.9-"),
    "max_concurrency": ("max_concurrency", "int", "0.4.0-"),
    "random_input_len": ("random_input_len", "int", "0.2.9-"),
    "random_output_len": ("random_output_len", "int", "0.2.9-"),
    "benchmark_duration": ("duration_s", "float", "0.2.9-0.3.0"),
    "duration": ("duration_s", "float", "0.3.0-"),
    "completed": ("successful_requests", "int", "0.3.0-"),
    "total_input": ("total_input_tokens", "int", "0.2.9-0.3.0"),
    "total_input_tokens": ("total_input_tokens", "int", "0.3.0-"),
    "total_input_text_tokens": ("total_input_text_tokens", "int", "0.5.4-"),
    "total_input_vision_tokens": ("total_input_vision_tokens", "int", "0.5.4-"),
    "total_output": ("total_output_tokens", "int", "0.2.9-0.3.0"),
    "total_output_tokens": ("total_output_tokens", "int", "0.3.0-"),
    "total_output_retokenized": ("total_output_tokens_retokenized", "int", "0.2.9-0.3.0"),
    "total_output_tokens_retokenized": ("total_output_tokens_retokenized", "int", "0.3.0-"),
    "request_throughput": ("request_throughput", "float", "0.4.3-"),
    "input_throughput": ("input_tok_s", "float", "0.4.3-"),
    "output_token_throughput": ("output_tok_s", "float", "0.2.9-0.3.0"),
    "output_throughput": ("output_tok_s", "float", "0.3.0-"),
    "total_throughput": ("total_tok_s", "float", "0.5.6-"),
    "max_output_tokens_per_s": ("peak_output_tok_s", "float", "0.5.6-"),
    "max_concurrent_requests": ("peak_concurrent_requests", "int", "0.5.6-"),
    "concurrency": ("concurrency", "float", "0.4.3-"),
    "accept_length": ("accept_length", "float", "0.4.4-"),
    "request_goodput": ("request_goodput", "float", "?0.5.23-"),
    "mean_e2e_latency": ("mean_e2e_ms", "float", "0.2.9-0.3.0"),
    "median_e2e_latency": ("median_e2e_ms", "float", "0.2.9-0.3.0"),
    "median_ttft": ("median_ttft_ms", "float", "0.2.9-0.3.0"),
    "median_itl": ("median_itl_ms", "float", "0.2.9-0.3.0"),
    **{f"{stat}_{key}_ms": (f"{stat}_{column}_ms", "float", spec)
       for key, column in (("e2e_latency", "e2e"), ("ttft", "ttft"), ("tpot", "tpot"), ("itl", "itl"))
       for stat, spec in (("mean", "0.4.3-"), ("median", "0.4.3-"), ("std", "0.4.3-"), ("p90", "0.5.14-"),
                          ("p95", "0.5.14-"), ("p99", "0.4.3-"))},
    # Overrides of the pattern above: written earlier than the rest of their family.
    "mean_e2e_latency_ms": ("mean_e2e_ms", "float", "0.3.0-"),
    "median_e2e_latency_ms": ("median_e2e_ms", "float", "0.3.0-"),
    "median_ttft_ms": ("median_ttft_ms", "float", "0.3.0-"),
    "median_itl_ms": ("median_itl_ms", "float", "0.3.0-"),
    "p95_itl_ms": ("p95_itl_ms", "float", "0.4.4-"),
    "p90_e2e_latency_ms": ("p90_e2e_ms", "float", "0.5.8-"),
})
# Keys no vLLM record has: with the fields above they tell an SGLang record apart.
JSONL_SIGNATURE = frozenset({"server_info", "tag", "sharegpt_output_len", "random_range_ratio"})


# -- bench_serving text ------------------------------------------------------------------------
def text_rows(source: Source, skipped: list) -> list[dict]:
    """Rows of every ``Serving Benchmark Result`` block, all read as SGLang's."""
    return rows_of(_serving.find_blocks(source), lambda block: block_row(block, cut_line=source.cut_line), skipped,
                   "result block without a readable SGLang line")


def block_row(block: _serving.Block, *, cut_line: int | None) -> dict | None:
    """The row of one SGLang result block, or None when none of its lines can be read."""
    reading = _serving.read_block(block, TEXT_FIELDS, SECTIONS, cut_line=cut_line)
    row = _serving.row(reading, TEXT_FIELDS, engine=ENGINE, format="sglang-text", line=block.line,
                       raw=block.raw, complete=block.complete)
    if row is not None:
        row["model"] = _serving.context_model(block.context)
    return row


# -- --output-file JSONL -----------------------------------------------------------------------
def jsonl_rows(source: Source, skipped: list) -> list[dict]:
    """Rows of every JSON record of a source, all read as SGLang ``--output-file`` records."""
    return rows_of(json_records(source, skipped, only_json=True), record_row, skipped,
                   "JSON record without an SGLang bench_serving key")


def record_row(record: Record) -> dict | None:
    """The row of one ``--output-file`` record, or None when it has no known key."""
    row = _serving.row(_serving.read_record(record, JSONL_FIELDS), JSONL_FIELDS, engine=ENGINE,
                       format="sglang-jsonl", line=record.line, raw=record.raw, complete=True)
    if row is not None:
        row.update(_server_info(record.obj.get("server_info")))
        if record.obj.get("tag") is not None:
            row["metadata"] = json.dumps({"tag": record.obj["tag"]})
    return row


def _server_info(info) -> dict:
    """Model, attention backend, version and autotune from the /server_info dump (>= 0.5.5)."""
    if not isinstance(info, dict):
        return {}
    out = {"model": info.get("model_path"), "attention_backend": info.get("attention_backend"),
           "engine_version": info.get("version")}
    # disable_flashinfer_autotune exists from 0.5.7; before it the record cannot say.
    if isinstance(info.get("disable_flashinfer_autotune"), bool):
        out["autotune"] = not info["disable_flashinfer_autotune"]
    return {k: v for k, v in out.items() if isinstance(v, (str, bool))}


# -- bench_one_batch ---------------------------------------------------------------------------
_NUMBER = r"(-?\d+\.\d+|nan)"
# result line -> (pattern, latency column, throughput column); anchored on "token/s", so a cut line never matches
_ONE_BATCH = {
    "prefill": (re.compile(rf"Prefill\. latency: {_NUMBER} s, throughput: +{_NUMBER} token/s"),
                "prefill_latency_s", "prefill_tok_s"),
    "median": (re.compile(rf"Decode\. +median latency: {_NUMBER} s, median throughput: +{_NUMBER} token/s"),
               "decode_latency_s", "decode_tok_s"),
    "total": (re.compile(rf"Total\. latency: +{_NUMBER} s, throughput: +{_NUMBER} token/s"),
              "total_latency_s", "total_tok_s"),
}
# "Decode {i}. Batch size: {bs}, ..." from 0.4.6; "Decode.  latency: ..." per step before.
_DECODE_STEP = re.compile(rf"Decode (?:\d+\. Batch size: (?P<bs>\d+), |\. +)latency: {_NUMBER} s, "
                          rf"throughput: +{_NUMBER} token/s")
_PASS = re.compile(r"(?P<kind>Warmup|Benchmark) \.\.\.")


@dataclasses.dataclass
class _Pass:
    """One ``Warmup ...`` or ``Benchmark ...`` pass of one (batch, input, output) case."""

    line: int
    benchmark: bool
    lines: list[str]
    values: dict = dataclasses.field(default_factory=dict)
    unread: list[int] = dataclasses.field(default_factory=list)
    decode_steps: bool = False

    def add(self, number: int, text: str) -> None:
        self.lines.append(text)
        plain = text.strip()
        step = _DECODE_STEP.fullmatch(plain)
        if step:
            self.decode_steps = True
            if step["bs"]:
                self.values.setdefault("batch_size", int(step["bs"]))
            return
        for pattern, latency, throughput in _ONE_BATCH.values():
            match = pattern.fullmatch(plain)
            if match:
                self.values.setdefault(latency, float(match[1]))
                self.values.setdefault(throughput, float(match[2]))
                return
        self.unread.append(number)

    @property
    def done(self) -> bool:
        return "total_latency_s" in self.values

    def row(self) -> dict:
        # The median decode line is absent when output_len == 1 (no decode step either).
        expected = [c for _, lat, tput in _ONE_BATCH.values() for c in (lat, tput)
                    if self.decode_steps or not c.startswith("decode")]
        return {**self.values, "engine": ENGINE, "format": "sglang-one-batch", "line": self.line,
                "raw": "\n".join(self.lines), "complete": self.done,
                "missing": ",".join(c for c in expected if c not in self.values),
                "unread_lines": ",".join(map(str, self.unread))}


def one_batch_rows(source: Source, skipped: list) -> list[dict]:
    """One row per ``Benchmark ...`` pass of ``python -m sglang.bench_one_batch`` (warmups skipped)."""
    passes, current = [], None
    for number, text in source.payload():
        kind = _PASS.fullmatch(text.strip())
        if kind:
            current = _Pass(line=number, benchmark=kind["kind"] == "Benchmark", lines=[text])
            passes.append(current)
        elif current is not None:
            current.add(number, text)
            current = None if current.done else current
    rows = []
    for one in (p for p in passes if p.benchmark):
        if one.values:
            rows.append(one.row())
        else:
            skipped.append((one.line, "bench_one_batch 'Benchmark ...' pass without a readable result line"))
    return rows
