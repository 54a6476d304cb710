"""Engine readers: every shipped SGLang / vLLM / lm-eval output, its exact numbers, and hostile input.

Expected values are copied by hand from the files under tests/data/engines/<situation>/ (copies of
/work/shared/fixtures/engines/), never from the readers' own output.
"""

from __future__ import annotations

import functools
import json
import math
import re
import warnings
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from profkit import schema
from profkit.errors import ParseError, ProfkitError
from profkit.sources.engines import (FORMATS, read_bench, read_step, read_lmeval_json, read_lmeval_table,
                                     read_sglang_jsonl, read_sglang_one_batch, read_sglang_text, read_vllm_json,
                                     read_vllm_text)

DATA = Path(__file__).resolve().parent / "data" / "engines"
INF = math.inf


def path(name: str) -> Path:
    """The one file called ``name`` under tests/data/engines/."""
    (found,) = DATA.glob(f"*/{name}")
    return found


def text(name: str) -> str:
    return path(name).read_text(encoding="utf-8")


def one(name: str, **kwargs) -> pd.Series:
    frame = read_bench(path(name), **kwargs)
    assert len(frame) == 1
    return frame.iloc[0]


# -- every sample parses -----------------------------------------------------------------------
# file -> (format, rows); every SGLang, vLLM and lm-eval sample shipped.
SAMPLES = {
    "seed_sglang_pr12306_autotune_pr.txt": ("sglang-text", 1),
    "seed_sglang_pr12306_autotune_main.txt": ("sglang-text", 1),
    "sglang_bench_serving_cookbook_ministral3_c1.txt": ("sglang-text", 1),
    "sglang_bench_serving_cookbook_ministral3_c16.txt": ("sglang-text", 1),
    "sglang_bench_serving_cookbook_qwen3vl_image_baseline.txt": ("sglang-text", 1),
    "sglang_bench_serving_cookbook_qwen3vl_image_cudaipc.txt": ("sglang-text", 1),
    "sglang_bench_serving_cookbook_dsv32_mtp.txt": ("sglang-text", 1),
    "sglang_bench_serving_cookbook_kimik26_c1.txt": ("sglang-text", 1),
    "sglang_bench_serving_cookbook_qwen25vl_image_p90.txt": ("sglang-text", 1),
    "sglang_bench_serving_cookbook_gemma4_abridged_text.txt": ("sglang-text", 1),
    "sglang_bench_serving_cookbook_gemma4_abridged_image.txt": ("sglang-text", 1),
    "sglang_bench_serving_cookbook_minimaxm27_abridged.txt": ("sglang-text", 1),
    "sglang_bench_serving_pr1262_main.txt": ("sglang-text", 1),
    "sglang_bench_serving_issue6681_rate128.txt": ("sglang-text", 1),
    "sglang_bench_serving_issue8285_rate330.txt": ("sglang-text", 1),
    "sglang_bench_serving_pr9428_fa4.txt": ("sglang-text", 1),
    "sglang_bench_serving_pr15464_baseline.txt": ("sglang-text", 1),
    "sglang_bench_serving_pr16817_main.txt": ("sglang-text", 1),
    "sglang_bench_serving_pr17707_before.txt": ("sglang-text", 1),
    "sglang_bench_serving_pr17918_quoted_mtp.txt": ("sglang-text", 1),
    "sglang_bench_serving_deepgemm183_rate4p8.txt": ("sglang-text", 1),
    "sglang_bench_serving_datacrunch_llama70b_online.jsonl": ("sglang-jsonl", 7),
    "sglang_bench_serving_datacrunch_llama70b_offline.jsonl": ("sglang-jsonl", 7),
    "sglang_bench_serving_issue12389_mc16_ttft0.jsonl": ("sglang-jsonl", 1),
    "sglang_bench_one_batch_pr30147.txt": ("sglang-one-batch", 1),
    "vllm_bench_serve_issue4305_preheader.txt": ("vllm-text", 1),
    "vllm_bench_serve_nerdalert_10qps.txt": ("vllm-text", 1),
    "vllm_bench_serve_pr22346_old.txt": ("vllm-text", 1),
    "vllm_bench_serve_pr23119_randommm.txt": ("vllm-text", 1),
    "vllm_bench_serve_recipes_nemotron_nopad.txt": ("vllm-text", 1),
    "vllm_bench_serve_recipes_stepfun_tipline.txt": ("vllm-text", 1),
    "vllm_bench_serve_nerdalert_10qps.json": ("vllm-json", 1),
    "vllm_bench_serve_nerdalert_results.jsonl": ("vllm-json", 9),
    "lm_eval_table_pr12306_autotune_pr.txt": ("lm-eval-table", 2),
    "lm_eval_table_pr12306_autotune_main.txt": ("lm-eval-table", 2),
    "lm_eval_table_cookbook_nemotron3nano.txt": ("lm-eval-table", 2),
    "lm_eval_table_recipes_dsv32exp_5shot.txt": ("lm-eval-table", 2),
    "lm_eval_table_alpacalora_mmlu_groups.txt": ("lm-eval-table", 72 + 5),
    "lm_eval_results_harness_mmlu_abstract_algebra.json": ("lm-eval-json", 1),
}
EXPLICIT = {"sglang-text": read_sglang_text, "sglang-jsonl": read_sglang_jsonl,
            "sglang-one-batch": read_sglang_one_batch, "vllm-text": read_vllm_text, "vllm-json": read_vllm_json,
            "lm-eval-table": read_lmeval_table, "lm-eval-json": read_lmeval_json, "profkit-step": read_step}


def test_every_engine_sample_is_shipped_and_listed():
    shipped = {p.name for p in DATA.glob("*/*") if p.suffix in (".txt", ".json", ".jsonl")}
    assert shipped - set(SAMPLES) == {"trtllm_bench_throughput_perfoverview.txt", "genai_perf_llm_goodput.txt"}


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_sample_is_detected_and_matches_its_explicit_reader(name):
    fmt, rows = SAMPLES[name]
    found = read_bench(path(name), label="run-a")
    assert len(found) == rows
    assert set(found["format"]) == {fmt}
    assert set(found["engine"]) == {fmt.split("-")[0] if not fmt.startswith("lm-eval") else "lm-eval"}
    assert set(found["source"]) == {str(path(name))}
    assert set(found["label"]) == {"run-a"}
    assert found["raw"].str.len().gt(0).all()
    schema.validate(found, "bench")
    assert list(found.columns) == list(schema.dtypes_of("bench", "bench.engines", "bench.step"))
    pd.testing.assert_frame_equal(EXPLICIT[fmt](path(name), label="run-a"), found)


@pytest.mark.parametrize("name", ["trtllm_bench_throughput_perfoverview.txt", "genai_perf_llm_goodput.txt"])
def test_other_tools_outputs_are_refused_at_their_first_line(name):
    with pytest.raises(ParseError) as err:
        read_bench(path(name))
    assert err.value.path == str(path(name))
    assert err.value.line == 3  # after the two "# source/# note" fixture lines
    assert "Serving Benchmark Result" in str(err.value)


# -- exact numbers, read off the files ----------------------------------------------------------
CELLS = [
    # The seed pair: PR #12306, gpt-oss-120b on B200, FlashInfer autotune on (pr) / off (main).
    ("seed_sglang_pr12306_autotune_pr.txt", {
        "model": "openai/gpt-oss-120b", "backend": "sglang-oai", "request_rate": INF, "max_concurrency": 512,
        "successful_requests": 2560, "duration_s": 138.33, "total_output_tokens": 2621440,
        "total_output_tokens_retokenized": 2539762, "output_tok_s": 18950.11, "total_tok_s": 37900.23,
        "concurrency": 510.27, "mean_e2e_ms": 27573.10, "p99_ttft_ms": 4843.49, "mean_itl_ms": 24.43,
        "p95_itl_ms": 24.23, "p99_itl_ms": 179.70, "max_itl_ms": 4049.93, "line": 3, "complete": True,
        "missing": "", "unread_lines": ""}),
    ("seed_sglang_pr12306_autotune_main.txt", {
        "model": "openai/gpt-oss-120b", "duration_s": 161.57, "output_tok_s": 16225.25, "mean_itl_ms": 28.98,
        "median_itl_ms": 26.49, "max_itl_ms": 4009.70, "total_input_vision_tokens": 0, "missing": ""}),
    # Complete cookbook blocks (0.5.6+ layouts).
    ("sglang_bench_serving_cookbook_ministral3_c16.txt", {
        "max_concurrency": 16, "successful_requests": 80, "peak_output_tok_s": 1760.00,
        "peak_concurrent_requests": 22, "p99_ttft_ms": 1194.79, "p99_tpot_ms": 20.00, "max_itl_ms": 888.63,
        "missing": ""}),
    ("sglang_bench_serving_cookbook_dsv32_mtp.txt", {
        "request_rate": 64.0, "max_concurrency": 1, "accept_length": 3.27, "p90_e2e_ms": 8877.37,
        "p99_e2e_ms": 10769.85, "total_input_text_tokens": 6101, "missing": ""}),
    ("sglang_bench_serving_cookbook_qwen3vl_image_baseline.txt", {
        "backend": "sglang-oai-chat", "total_input_vision_tokens": 17640, "total_output_tokens_retokenized": 3423}),
    ("sglang_bench_serving_cookbook_qwen3vl_image_cudaipc.txt", {
        "successful_requests": 100, "total_input_vision_tokens": 176400, "total_output_tokens_retokenized": 28702,
        "peak_concurrent_requests": 3}),
    # From 0.5.8 the vision line is printed only for image datasets: its absence is not "missing".
    ("sglang_bench_serving_cookbook_kimik26_c1.txt", {
        "total_input_vision_tokens": pd.NA, "p90_e2e_ms": 7046.30, "mean_tpot_ms": 9.22, "missing": ""}),
    ("sglang_bench_serving_cookbook_qwen25vl_image_p90.txt", {
        "total_input_text_tokens": 821, "total_input_vision_tokens": 23960, "p99_e2e_ms": 7939.56}),
    # Hand-abridged blocks: what the layout always prints but the doc dropped is listed.
    ("sglang_bench_serving_cookbook_gemma4_abridged_image.txt", {
        "total_input_vision_tokens": 5340, "total_input_text_tokens": pd.NA, "mean_tpot_ms": 4.01,
        "median_itl_ms": 4.04, "mean_itl_ms": pd.NA,
        "missing": "total_input_text_tokens,total_output_tokens_retokenized,input_tok_s,peak_output_tok_s,"
                   "peak_concurrent_requests,concurrency,mean_e2e_ms,median_e2e_ms,p99_ttft_ms,median_tpot_ms,"
                   "p99_tpot_ms,mean_itl_ms,p95_itl_ms,p99_itl_ms,max_itl_ms"}),
    ("sglang_bench_serving_cookbook_minimaxm27_abridged.txt", {
        "max_concurrency": 100, "concurrency": 90.19, "median_ttft_ms": 92.05,
        "missing": "total_input_text_tokens,total_output_tokens_retokenized,peak_output_tok_s,"
                   "peak_concurrent_requests,p99_ttft_ms,p99_tpot_ms,p95_itl_ms,p99_itl_ms,max_itl_ms"}),
    # Truncated pastes: what is there is kept, the rest of the layout is listed.
    ("sglang_bench_serving_pr1262_main.txt", {
        "max_concurrency": pd.NA, "successful_requests": 5000, "p99_tpot_ms": 182.63, "complete": False,
        "missing": "mean_itl_ms,median_itl_ms,p99_itl_ms", "unread_lines": "25"}),
    ("sglang_bench_serving_issue6681_rate128.txt", {  # the "Max reqeuest concurrency" typo (0.4.0-0.4.6)
        "request_rate": 128.0, "max_concurrency": 512, "concurrency": 507.99, "mean_e2e_ms": pd.NA,
        "missing": "mean_e2e_ms,median_e2e_ms,mean_ttft_ms,median_ttft_ms,p99_ttft_ms,mean_itl_ms,"
                   "median_itl_ms,p99_itl_ms"}),
    ("sglang_bench_serving_issue8285_rate330.txt", {
        "request_rate": 330.0, "max_concurrency": 330, "median_itl_ms": 22.82, "p95_itl_ms": pd.NA,
        "missing": "p95_itl_ms,p99_itl_ms,max_itl_ms"}),
    ("sglang_bench_serving_pr9428_fa4.txt", {  # three context lines before the header
        "line": 6, "input_tok_s": 137022.74, "total_output_tokens": 101, "mean_itl_ms": 8132.74,
        "max_itl_ms": pd.NA, "missing": "max_itl_ms", "unread_lines": "32"}),
    ("sglang_bench_serving_pr15464_baseline.txt", {
        "max_concurrency": 32, "total_input_vision_tokens": 0, "peak_output_tok_s": 640.00, "median_e2e_ms": 1113.95,
        "mean_ttft_ms": pd.NA}),
    ("sglang_bench_serving_pr16817_main.txt", {
        "max_concurrency": pd.NA, "p99_e2e_ms": 51177.57, "unread_lines": "25"}),
    ("sglang_bench_serving_pr17707_before.txt", {
        "successful_requests": 1, "mean_e2e_ms": 21062.73, "p90_e2e_ms": 21062.73, "p99_e2e_ms": 21062.73,
        "mean_ttft_ms": 183.53, "median_ttft_ms": pd.NA}),
    ("sglang_bench_serving_pr17918_quoted_mtp.txt", {  # "> " on every line
        "backend": "sglang", "accept_length": 2.95, "peak_output_tok_s": 3443.00, "mean_ttft_ms": 1993.05,
        "median_ttft_ms": pd.NA}),
    ("sglang_bench_serving_deepgemm183_rate4p8.txt", {  # cut inside the value "1022."
        "request_rate": 4.8, "p99_itl_ms": 150.60, "max_itl_ms": pd.NA, "missing": "max_itl_ms"}),
    ("sglang_bench_serving_issue12389_mc16_ttft0.jsonl", {
        "request_rate": INF, "max_concurrency": 16, "total_input_tokens": 75000000,
        "total_output_tokens_retokenized": 0, "mean_ttft_ms": 0.0, "p95_itl_ms": 0.0,
        "mean_tpot_ms": 4.76496783658543, "std_e2e_ms": 698.243004441158, "accept_length": pd.NA,
        "autotune": pd.NA, "missing": ""}),
    ("sglang_bench_one_batch_pr30147.txt", {  # the Benchmark pass (line 12), not the warmup (line 3)
        "line": 12, "batch_size": 1, "prefill_latency_s": 0.01014, "prefill_tok_s": 5916.43,
        "decode_latency_s": 0.00572, "decode_tok_s": 174.85, "total_latency_s": 0.062, "total_tok_s": 1122.76,
        "complete": True, "missing": ""}),
    ("vllm_bench_serve_issue4305_preheader.txt", {  # cap from the pre-run line
        "line": 4, "max_concurrency": 16, "total_tok_s": 368.69, "p99_itl_ms": 64.42, "backend": pd.NA}),
    ("vllm_bench_serve_pr22346_old.txt", {"max_concurrency": 128, "total_tok_s": 6551.99, "p99_ttft_ms": 6404.63}),
    ("vllm_bench_serve_pr23119_randommm.txt", {"max_concurrency": 10, "mean_itl_ms": 69.52, "median_itl_ms": 5.17}),
    ("vllm_bench_serve_recipes_nemotron_nopad.txt", {
        "failed_requests": 0, "max_concurrency": 1024, "peak_output_tok_s": 21157.00,
        "peak_concurrent_requests": 1088, "total_tok_s": 31656.63, "missing": ""}),
    ("vllm_bench_serve_recipes_stepfun_tipline.txt", {
        "line": 4, "total_tok_s": 2435.02, "peak_concurrent_requests": 20, "p99_tpot_ms": 12.61, "missing": ""}),
    ("vllm_bench_serve_nerdalert_10qps.json", {
        "model": "meta-llama/Llama-3.2-3B-Instruct", "backend": "vllm", "request_rate": 10.0, "num_prompts": 300,
        "request_goodput": pd.NA, "std_ttft_ms": 9.27197373989555}),
    ("lm_eval_results_harness_mmlu_abstract_algebra.json", {
        "task": "mmlu_abstract_algebra", "task_alias": "abstract_algebra", "metric": "acc,none", "value": 0.34,
        "value_stderr": 0.047609522856952344, "n_shot": 0, "task_version": "1", "higher_is_better": True,
        "backend": "sae_steered_beta", "lm_eval_section": "tasks"}),
]


@pytest.mark.parametrize("name, cells", CELLS, ids=[c[0] for c in CELLS])
def test_values_match_the_text(name, cells):
    row = read_bench(path(name)).iloc[0]
    for column, expected in cells.items():
        got = row[column]
        if expected is pd.NA:
            assert pd.isna(got), column
        else:
            assert got == expected, column


def test_autotune_pair_output_throughput_rises_and_itl_falls():
    on, off = one("seed_sglang_pr12306_autotune_pr.txt"), one("seed_sglang_pr12306_autotune_main.txt")
    assert round(on.output_tok_s / off.output_tok_s - 1, 3) == 0.168
    assert (off.mean_itl_ms, on.mean_itl_ms) == (28.98, 24.43)
    # The block cannot say whether autotune was on (server_info.disable_flashinfer_autotune is 0.5.7+).
    assert pd.isna(on.autotune) and pd.isna(off.autotune)


def test_a_list_of_paths_reads_into_one_frame_with_its_label():
    names = ["seed_sglang_pr12306_autotune_pr.txt", "seed_sglang_pr12306_autotune_main.txt"]
    frame = read_bench([path(n) for n in names], label="pr12306")
    assert frame["source"].tolist() == [str(path(n)) for n in names]
    assert frame["duration_s"].tolist() == [138.33, 161.57]
    assert set(frame["label"]) == {"pr12306"}


def test_appended_jsonl_keeps_every_run_including_repeats():
    frame = read_sglang_jsonl(path("sglang_bench_serving_datacrunch_llama70b_online.jsonl"))
    assert frame["request_rate"].tolist() == [1.0, 2.0, 4.0, 8.0, 16.0, 4.0, 8.0]
    assert frame["dataset_name"].tolist() == ["random"] * 5 + ["sharegpt"] * 2
    assert frame["line"].tolist() == list(range(1, 8))
    assert frame["output_tok_s"].iloc[0] == 537.4142851849319
    assert frame["max_concurrency"].isna().all()
    # The 0.4.0-0.4.1 short record never had percentiles: absent, and not "missing".
    assert frame["p99_ttft_ms"].isna().all() and (frame["missing"] == "").all()


def test_bare_infinity_and_varying_lengths():
    frame = read_bench(path("sglang_bench_serving_datacrunch_llama70b_offline.jsonl"))
    assert (frame["request_rate"] == INF).all()
    assert frame["random_output_len"].tolist() == [1024, 512, 2048, 1024, 1024, 512, 1024]
    assert frame["successful_requests"].tolist() == [3000, 4000, 800, 1500, 1500, 6000, 2000]


def test_vllm_console_and_save_result_json_of_one_run_agree():
    console = one("vllm_bench_serve_nerdalert_10qps.txt")
    saved = one("vllm_bench_serve_nerdalert_10qps.json")
    assert console.request_rate == saved.request_rate == 10.0  # console: the pre-run line
    assert pd.isna(console.max_concurrency) and pd.isna(saved.max_concurrency)  # "None": no cap
    for column in ("duration_s", "request_throughput", "output_tok_s", "total_tok_s", "mean_ttft_ms",
                   "median_ttft_ms", "p99_ttft_ms", "mean_tpot_ms", "p99_tpot_ms", "median_itl_ms", "p99_itl_ms"):
        assert round(saved[column], 2) == console[column], column
    for column in ("successful_requests", "total_input_tokens", "total_output_tokens"):
        assert saved[column] == console[column], column


def test_vllm_json_per_line_series_keeps_metadata_and_inf_strings():
    frame = read_vllm_json(path("vllm_bench_serve_nerdalert_results.jsonl"))
    assert frame["request_rate"].tolist() == [10.0, 30.0, INF] * 3
    deployments = [json.loads(m)["deployment"] for m in frame["metadata"]]
    assert deployments == ["no-features"] * 3 + ["base"] * 3 + ["kvcache"] * 3
    assert frame["request_goodput"].isna().all()  # "request_goodput:": null
    assert frame["output_tok_s"].iloc[-1] == 11011.349280220396


def test_lmeval_autotune_pair_reads_identical_accuracy():
    pr = read_lmeval_table(path("lm_eval_table_pr12306_autotune_pr.txt"))
    main = read_lmeval_table(path("lm_eval_table_pr12306_autotune_main.txt"))
    for frame in (pr, main):
        assert frame["task"].tolist() == ["gsm8k", "gsm8k"]  # carried to the continuation row
        assert frame["metric"].tolist() == ["exact_match,flexible-extract", "exact_match,strict-match"]
        assert frame["value"].tolist() == [0.8394, 0.6318]
        assert frame["value_stderr"].tolist() == [0.0143, 0.0188]
        assert frame["n_shot"].tolist() == [5, 5] and frame["task_version"].tolist() == ["3", "3"]
        assert frame["higher_is_better"].tolist() == [True, True]


def test_lmeval_summary_line_names_model_backend_and_endpoint():
    frame = read_bench(path("lm_eval_table_recipes_dsv32exp_5shot.txt"))
    assert set(frame["model"]) == {"deepseek-ai/DeepSeek-V3.2-Exp"}
    assert set(frame["backend"]) == {"local-completions"}
    assert set(frame["base_url"]) == {"http://127.0.0.1:8000/v1/completions"}
    assert frame["value"].tolist() == [0.9591, 0.9591]


def test_lmeval_hierarchy_and_groups_table():
    frame = read_bench(path("lm_eval_table_alpacalora_mmlu_groups.txt"))
    tasks, groups = frame[frame.lm_eval_section == "tasks"], frame[frame.lm_eval_section == "groups"]
    assert (len(tasks), len(groups)) == (72, 5)
    formal = tasks[tasks.task == "formal_logic"].iloc[0]
    assert (formal.task_depth, formal.value, formal.value_stderr, formal.n_shot) == (2, 0.4286, 0.0443, 0)
    humanities = tasks[tasks.task == "humanities"].iloc[0]
    assert (humanities.task_depth, humanities.value, humanities.task_version) == (1, 0.5488, "2")
    assert pd.isna(humanities.n_shot)
    assert groups["task"].tolist() == ["mmlu", "humanities", "other", "social sciences", "stem"]
    assert frame[frame.task == "mmlu"]["value"].tolist() == [0.6211, 0.6211]
    assert tasks["line"].iloc[0] == 6 and groups["line"].iloc[-1] == 85


@pytest.mark.parametrize("table, metric", [  # header layouts of engine_formats.md §3.1
    ("|  Task   |Version| Metric |Value |   |Stderr|\n|---------|------:|--------|-----:|---|-----:|\n"
     "|hellaswag|      0|acc     |0.5712|±  |0.0049|\n", "acc"),
    ("|  Tasks  |Version|Filter|n-shot| Metric |Value |   |Stderr|\n|---------|------:|------|-----:|--------|-----:|---|-----:|\n"
     "|hellaswag|      1|none  |     0|acc     |0.5712|±  |0.0049|\n", "acc,none"),
])
def test_older_lmeval_table_layouts(table, metric):
    row = read_lmeval_table(table).iloc[0]
    assert (row.task, row.metric, row.value, row.value_stderr) == ("hellaswag", metric, 0.5712, 0.0049)
    assert pd.isna(row.higher_is_better)


# -- SGLang server_info (no public sample carries it, so one is built from the issue #12389 record)
def _with_server_info(info) -> str:
    record = json.loads(text("sglang_bench_serving_issue12389_mc16_ttft0.jsonl").replace("Infinity", '"inf"'))
    return json.dumps({"tag": "fi-autotune", **record, "server_info": info}) + "\n"


@pytest.mark.parametrize("disabled, autotune", [(False, True), (True, False), (None, pd.NA)])
def test_server_info_gives_autotune_backend_and_version(disabled, autotune):
    info = {"model_path": "openai/gpt-oss-120b", "attention_backend": "trtllm_mha", "version": "0.5.7"}
    if disabled is not None:
        info["disable_flashinfer_autotune"] = disabled
    row = read_bench(_with_server_info(info)).iloc[0]
    assert row.autotune is autotune if autotune is pd.NA else row.autotune == autotune
    assert (row.model, row.attention_backend, row.engine_version) == ("openai/gpt-oss-120b", "trtllm_mha", "0.5.7")
    assert json.loads(row.metadata) == {"tag": "fi-autotune"}
    assert row.format == "sglang-jsonl" and row.request_rate == INF


def test_null_server_info_leaves_autotune_unknown():
    row = read_bench(_with_server_info(None)).iloc[0]
    assert pd.isna(row.autotune) and pd.isna(row.model)


# -- mixed inputs, explicit formats, errors ---------------------------------------------------
def test_a_console_log_with_several_tools_reads_every_result_in_line_order():
    log = "\n".join([text("sglang_bench_serving_cookbook_ministral3_c1.txt"), "$ lm_eval ...",
                     text("lm_eval_table_cookbook_nemotron3nano.txt"),
                     text("vllm_bench_serve_recipes_stepfun_tipline.txt"),
                     text("sglang_bench_serving_issue12389_mc16_ttft0.jsonl")])
    frame = read_bench(log)
    assert frame["format"].tolist() == ["sglang-text", "lm-eval-table", "lm-eval-table", "vllm-text", "sglang-jsonl"]
    assert frame["line"].is_monotonic_increasing
    assert frame["source"].eq("<text>").all()
    assert frame["output_tok_s"].iloc[3] == 811.94


def test_explicit_format_overrides_detection():
    block = text("sglang_bench_serving_cookbook_kimik26_c1.txt")
    as_vllm = read_vllm_text(block).iloc[0]
    assert as_vllm.engine == "vllm" and as_vllm.output_tok_s == 106.10
    assert pd.isna(as_vllm.backend)  # "Backend:" is no vLLM label: listed, not read
    assert as_vllm.unread_lines.split(",")[0] == "4"


def test_explicit_reader_refuses_other_formats_with_file_and_line():
    with pytest.raises(ParseError) as err:
        read_sglang_jsonl(path("seed_sglang_pr12306_autotune_pr.txt"))
    assert err.value.path == str(path("seed_sglang_pr12306_autotune_pr.txt"))
    assert err.value.line == 3 and "not JSON" in str(err.value)
    with pytest.raises(ParseError, match="lm-eval results table"):
        read_lmeval_table(path("vllm_bench_serve_pr22346_old.txt"))


def test_block_without_engine_evidence_needs_a_format():
    block = "============ Serving Benchmark Result ============\nSuccessful requests: 5\n"
    with pytest.raises(ParseError, match="pass format='sglang-text' or format='vllm-text'") as err:
        read_bench(block)
    assert (err.value.path, err.value.line) == ("<text>", 1)
    # Beside vLLM blocks it is read as the file's engine; between one of each it is skipped, and said so.
    beside_vllm = read_bench(block + "\n" + text("vllm_bench_serve_pr22346_old.txt"))
    assert beside_vllm["engine"].tolist() == ["vllm", "vllm"]
    with pytest.warns(UserWarning, match="line 1: cannot tell"):
        both = read_bench("\n".join([block, text("vllm_bench_serve_pr22346_old.txt"),
                                      text("sglang_bench_serving_cookbook_kimik26_c1.txt")]))
    assert both["engine"].tolist() == ["vllm", "sglang"]
    assert read_bench(block, format="vllm-text")["successful_requests"].tolist() == [5]


def test_unknown_format_and_bad_label_are_refused_before_reading():
    with pytest.raises(ProfkitError, match="sglang-text"):
        read_bench("no/such/file", format="sglang")
    with pytest.raises(ProfkitError, match="label must be a string"):
        read_bench("no/such/file", label=1)
    assert FORMATS == tuple(EXPLICIT)


def test_missing_path_empty_input_and_noise():
    with pytest.raises(ParseError, match="no such file") as err:
        read_bench(DATA / "no_such.txt")
    assert err.value.path == str(DATA / "no_such.txt")
    with pytest.raises(ParseError, match="empty") as err:
        read_bench(b"")
    assert err.value.line == 1
    with pytest.raises(ParseError) as err:
        read_bench("# source: https://example.invalid\n\nhello\nworld\n")
    assert (err.value.line, "'hello'" in str(err.value)) == (3, True)


def test_a_possibly_cut_last_line_keeps_only_values_proven_whole():
    head = "============ Serving Benchmark Result ============\nBackend: sglang\n"
    # No final newline: "Successful requests: 50" may be "5000" cut short; a .2f value cannot be.
    assert pd.isna(read_bench(head + "Successful requests: 50").iloc[0].successful_requests)
    assert read_bench(head + "Successful requests: 50\n").iloc[0].successful_requests == 50
    assert read_bench(head + "Mean TTFT (ms): 12.34").iloc[0].mean_ttft_ms == 12.34
    assert pd.isna(read_bench(head + "Mean TTFT (ms): 12.3\n").iloc[0].mean_ttft_ms)


def test_cut_jsonl_line_is_skipped_with_a_warning():
    lines = text("sglang_bench_serving_datacrunch_llama70b_online.jsonl").splitlines()
    cut = "\n".join(lines[:3] + [lines[3][:100]]) + "\n"
    with pytest.warns(UserWarning, match="line 4"):
        frame = read_sglang_jsonl(cut)
    assert frame["line"].tolist() == [1, 2, 3]


def test_lone_surrogates_in_text_are_replaced_not_stored():
    block = text("vllm_bench_serve_pr22346_old.txt").replace("Successful", "\udc80Successful")
    with pytest.warns(UserWarning, match="<text>:4: lone surrogate"):
        row = read_bench(block).iloc[0]
    assert row.total_tok_s == 6551.99 and "\ufffd" in row.raw


def test_latin1_and_utf16_files_read(tmp_path):
    table = text("lm_eval_table_pr12306_autotune_pr.txt")
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes(table.encode("latin-1", errors="replace"))  # "±" is byte 0xB1: not UTF-8
    with pytest.warns(UserWarning, match="latin1.txt:5: not valid UTF-8"):
        frame = read_bench(latin1)
    assert frame["value"].tolist() == [0.8394, 0.6318]
    assert frame["higher_is_better"].isna().all()  # "↑" did not survive latin-1
    utf16 = tmp_path / "utf16.txt"
    utf16.write_bytes(text("vllm_bench_serve_pr22346_old.txt").encode("utf-16"))
    assert read_bench(utf16).iloc[0].total_tok_s == 6551.99


# The 0.5.15-0.5.23 layout with --cache-report, written from engine_formats.md §1.3 (no public sample).
NEWEST_SGLANG = """============ Serving Benchmark Result ============
Backend:                                 sglang
Traffic request rate:                    8.0
Max request concurrency:                 64
Successful requests:                     200
Benchmark duration (s):                  30.05
Total input tokens:                      204800
Total input text tokens:                 204800
Total generated tokens:                  51200
Total generated tokens (retokenized):    51190
Request throughput (req/s):              6.66
Input token throughput (tok/s):          6815.31
Output token throughput (tok/s):         1703.83
Peak output token throughput (tok/s):    2210.00
Peak concurrent requests:                71
Total token throughput (tok/s):          8519.13
Concurrency:                             60.12
{latency}----------------Cache Hit Details-----------------
Total prompt tokens:                     204800
Total cached tokens:                     93388
  Device:                                90000
  Host:                                  3388
Cache hit rate:                          45.6%
  Device:                                43.9%
  Host:                                  1.7%
==================================================
""".format(latency="".join(
    f"{title:-^50}\n" + "".join(f"{stat} {name} (ms):".ljust(41) + f"{value:.2f}\n"
                                for stat, value in zip(stats, (10.5, 9.75, 12.25, 13.0, 14.5, 20.0)))
    for title, name, stats in (
        ("End-to-End Latency", "E2E Latency", ("Mean", "Median", "P90", "P95", "P99")),
        ("Time to First Token", "TTFT", ("Mean", "Median", "P90", "P95", "P99")),
        ("Time per Output Token (excl. 1st token)", "TPOT", ("Mean", "Median", "P90", "P95", "P99")),
        ("Inter-Token Latency", "ITL", ("Mean", "Median", "P90", "P95", "P99", "Max")))))


def test_newest_sglang_layout_with_cache_section():
    row = read_sglang_text(NEWEST_SGLANG).iloc[0]
    assert (row.p90_ttft_ms, row.p95_tpot_ms, row.p90_itl_ms, row.max_itl_ms) == (12.25, 13.0, 12.25, 20.0)
    assert row.cache_hit_rate_pct == 45.6  # the rate line, not the per-tier "%" lines after it
    assert row.missing == ""  # every line 0.5.14+ always prints is there
    lines = NEWEST_SGLANG.splitlines()
    unread = [lines[int(n) - 1].split(":")[0].strip() for n in row.unread_lines.split(",")]
    assert unread == ["Total prompt tokens", "Total cached tokens", "Device", "Host", "Device", "Host"]
    cut = read_sglang_text(NEWEST_SGLANG.replace("P95 ITL (ms):", "P95 ITL (ms) ")).iloc[0]
    assert cut.missing == "p95_itl_ms"


def test_bench_one_batch_before_0_4_6_and_with_one_output_token():
    old = ("Benchmark ...\nPrefill. latency: 0.03000 s, throughput:   4000.00 token/s\n"
           "Decode.  latency: 0.00600 s, throughput:    166.67 token/s\n"
           "Decode.  median latency: 0.00600 s, median throughput:    166.67 token/s\n"
           "Total. latency:  0.036 s, throughput:   3333.33 token/s\n")
    row = read_sglang_one_batch(old).iloc[0]
    assert (row.decode_latency_s, row.total_tok_s, row.missing) == (0.006, 3333.33, "")
    assert pd.isna(row.batch_size)  # only the 0.4.6+ step line prints it
    single = read_sglang_one_batch("Benchmark ...\nPrefill. latency: 0.03000 s, throughput:   4000.00 token/s\n"
                                   "Total. latency:  0.030 s, throughput:   4000.00 token/s\n").iloc[0]
    assert single.missing == "" and pd.isna(single.decode_tok_s)


def test_values_no_engine_prints_are_not_read():
    block = ("============ Serving Benchmark Result ============\nBackend: sglang\n"
             "Successful requests: 99999999999999999999\nBenchmark duration (s): 1.5\n")
    row = read_bench(block).iloc[0]
    assert pd.isna(row.successful_requests) and pd.isna(row.duration_s)
    assert row.missing.split(",")[:3] == ["request_rate", "successful_requests", "duration_s"]


def test_a_json_document_followed_by_noise_still_reads():
    doc = text("lm_eval_results_harness_mmlu_abstract_algebra.json") + "\x1b[0m done\n"
    with pytest.warns(UserWarning, match="not JSON"):
        assert read_lmeval_json(doc)["value"].tolist() == [0.34]
    assert read_bench(doc)["value"].tolist() == [0.34]


# -- hostile input: properties ------------------------------------------------------------------
ALL_TEXTS = {name: text(name) for name in SAMPLES}
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
_COMPOSED = {"engine", "format", "source", "label", "missing", "raw", "unread_lines", "metric", "metadata",
             "lm_eval_section", "line", "task_depth", "complete", "autotune", "higher_is_better"}
FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _read(data, **kwargs) -> pd.DataFrame | None:
    """read_bench, with ParseError (naming where) as the only allowed failure."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return read_bench(data, **kwargs)
        except ParseError as err:
            assert err.path == "<text>" and err.line is not None and err.line >= 1
            return None


def _assert_nothing_invented(frame: pd.DataFrame | None, source_text: str) -> None:
    """Every number and name in the frame is written in the text; nothing is derived."""
    if frame is None:
        return
    numbers = {float(n) for n in _NUMBER.findall(source_text)}
    has_inf = "inf" in source_text or "Infinity" in source_text
    for column in frame.columns.difference(sorted(_COMPOSED)):
        for value in frame[column].dropna():
            if isinstance(value, str):
                assert value in source_text, (column, value)
            else:
                assert float(value) in numbers or (math.isinf(value) and has_inf), (column, value)


@functools.lru_cache(maxsize=None)
def _reference(name: str) -> pd.DataFrame:
    """The sample's own reading, once per test session."""
    return read_bench(ALL_TEXTS[name])


def _keyed(frame: pd.DataFrame | None) -> dict:
    if frame is None:
        return {}
    return {(r["format"], r["line"]): r for _, r in frame.iterrows()}


names = st.sampled_from(sorted(SAMPLES))


@FAST
@given(name=names, data=st.data())
def test_truncation_keeps_a_subset_of_the_full_rows_and_values(name, data):
    whole = ALL_TEXTS[name]
    cut = whole[: data.draw(st.integers(0, len(whole)), label="cut")]
    full, part = _keyed(_reference(name)), _keyed(_read(cut.encode()))
    assert set(part) <= set(full)
    for key, row in part.items():
        for column in row.index.difference(["raw", "missing", "unread_lines", "complete"]):
            if not pd.isna(row[column]):
                assert row[column] == full[key][column], (key, column)


@FAST
@given(first=names, second=names, data=st.data())
def test_interleaving_two_files_invents_no_rows_or_values(first, second, data):
    a, b = ALL_TEXTS[first].splitlines(), ALL_TEXTS[second].splitlines()
    picks = data.draw(st.permutations([0] * len(a) + [1] * len(b)), label="order")
    sources, merged = [iter(a), iter(b)], []
    for pick in picks:
        merged.append(next(sources[pick]))
    merged_text = "\n".join(merged) + "\n"
    frame = _read(merged_text)
    bound = len(_reference(first)) + len(_reference(second))
    assert frame is None or len(frame) <= bound
    _assert_nothing_invented(frame, merged_text)


@FAST
@given(name=names, data=st.data())
def test_shuffled_lines_invent_no_rows_or_values(name, data):
    lines = data.draw(st.permutations(ALL_TEXTS[name].splitlines()), label="lines")
    shuffled = "\n".join(lines) + "\n"
    frame = _read(shuffled)
    assert frame is None or len(frame) <= len(_reference(name))
    _assert_nothing_invented(frame, shuffled)


GARBAGE = st.one_of(
    st.text(st.characters(blacklist_characters="\n\r"), max_size=60),
    st.sampled_from(["=", "=" * 50, "", "> ", "{", "{}", '{"completed": "x"}', "|", "| - |", "---Int",
                     "Mean TTFT (ms): n/a", "Backend:", "Warmup ...", "nan", "\x00\x1b[31m", "\ufeff", "±↑"]),
)


@FAST
@given(name=names, data=st.data())
def test_garbage_lines_never_crash_or_add_rows(name, data):
    lines = ALL_TEXTS[name].splitlines()
    for _ in range(data.draw(st.integers(1, 6), label="n")):
        lines.insert(data.draw(st.integers(0, len(lines)), label="at"), data.draw(GARBAGE, label="garbage"))
    noisy = "\n".join(lines) + "\n"
    frame = _read(noisy)
    assert frame is None or len(frame) <= len(_reference(name))
    _assert_nothing_invented(frame, noisy)


@FAST
@given(name=names, data=st.data())
def test_wrong_encodings_keep_the_numbers(name, data):
    encoding = data.draw(st.sampled_from(["latin-1", "cp1252", "utf-16", "utf-8"]), label="encoding")
    raw = ALL_TEXTS[name].encode(encoding, errors="replace")
    if encoding != "utf-16":  # and a last line of bytes that are not UTF-8
        raw += data.draw(st.binary(min_size=1, max_size=8).map(lambda b: b"\xff" + b.replace(b"\n", b"")))
    frame, reference = _read(raw), _reference(name)
    assert frame is not None and len(frame) == len(reference)
    numeric = [c for c in reference.columns if c not in _COMPOSED and pd.api.types.is_numeric_dtype(reference[c])]
    pd.testing.assert_frame_equal(frame[numeric], reference[numeric])


@FAST
@given(blob=st.binary(max_size=400))
def test_random_bytes_read_or_fail_with_a_parse_error(blob):
    _assert_nothing_invented(_read(blob), blob.decode("utf-8", errors="replace"))
