"""``profkit parse`` on engine benchmark outputs (read_bench), alone and beside FlashInfer logs and caches."""

from __future__ import annotations

import pandas as pd
import pytest

import profkit
from conftest import DATA, TEST_DATA
from profkit.cli import main as cli_main

ENGINES = TEST_DATA / "engines"
SGLANG_OFF, SGLANG_ON = (ENGINES / "sglang_autotune_pair" / f"seed_sglang_pr12306_autotune_{arm}.txt"
                         for arm in ("main", "pr"))
VLLM_JSON = ENGINES / "vllm_save_result_json" / "vllm_bench_serve_nerdalert_10qps.json"
LMEVAL = ENGINES / "lmeval_autotune_pair" / "lm_eval_table_pr12306_autotune_main.txt"
SERVER_LOG = TEST_DATA / "log_interleaved_ranks" / "server.log"
CACHE = DATA / "h200" / "fp8" / "fp8_gemm-llama3-8b-o" / "cache.json"


def parse(capsys, *args) -> tuple[int, str, str]:
    code = cli_main(["parse", *map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err


def assert_printed(out: str, path, numbers: list[str]) -> None:
    """Each number is in the file's own text and in the summary."""
    text = path.read_text()
    for number in numbers:
        assert number in text, number
        assert number in out, number


def test_sglang_pair_summary(capsys):
    code, out, _ = parse(capsys, SGLANG_OFF, SGLANG_ON)
    assert code == 0
    assert out.startswith("bench: 2 row(s)")
    assert "sglang-text" in out and "openai/gpt-oss-120b" in out
    assert_printed(out, SGLANG_OFF, ["16225.25", "2632.67", "28.98", "512"])  # output tok/s, mean TTFT, mean ITL
    assert_printed(out, SGLANG_ON, ["18950.11", "2658.05", "24.43"])
    assert out.index(str(SGLANG_OFF)) < out.index("16225.25") < out.index(str(SGLANG_ON)) < out.index("18950.11")


def test_vllm_save_result_json_is_bench_not_a_cache(capsys):
    code, out, _ = parse(capsys, VLLM_JSON)
    assert code == 0
    assert "vllm-json" in out and "meta-llama/Llama-3.2-3B-Instruct" in out
    assert_printed(out, VLLM_JSON, ["2249.247363", "13.505887", "10.0"])  # output tok/s, mean ITL, request rate


def test_lmeval_rows_show_task_metric_value(capsys):
    code, out, _ = parse(capsys, LMEVAL)
    assert code == 0
    assert "task" in out and "metric" in out and "output_tok_s" not in out
    assert "exact_match,flexible-extract" in out and "exact_match,strict-match" in out
    assert_printed(out, LMEVAL, ["gsm8k", "0.8394", "0.6318"])


def test_bench_beside_log_and_cache(capsys):
    code, out, _ = parse(capsys, SERVER_LOG, CACHE, SGLANG_OFF)
    assert code == 0
    assert "log: 2 run(s)" in out and "cache: 1 run(s)" in out and "bench: 1 row(s)" in out
    assert_printed(out, SGLANG_OFF, ["16225.25"])


def test_out_writes_bench_parquet(tmp_path, capsys):
    code, out, _ = parse(capsys, SGLANG_OFF, SGLANG_ON, VLLM_JSON, "--out", tmp_path / "b")
    assert code == 0
    assert out.strip() == str(tmp_path / "b" / "bench.parquet")
    written = pd.read_parquet(tmp_path / "b" / "bench.parquet")
    expected = profkit.read_bench([SGLANG_OFF, SGLANG_ON, VLLM_JSON])
    assert list(written.columns) == list(expected.columns)
    assert written["output_tok_s"].tolist() == [16225.25, 18950.11, 2249.247363167692]
    assert written["mean_ttft_ms"].tolist() == expected["mean_ttft_ms"].tolist()
    assert written["source"].tolist() == [str(SGLANG_OFF), str(SGLANG_ON), str(VLLM_JSON)]


def test_out_with_logs_and_caches_puts_bench_in_its_own_folder(tmp_path, capsys):
    code, out, _ = parse(capsys, SERVER_LOG, CACHE, LMEVAL, "--out", tmp_path / "t")
    assert code == 0
    assert out.split() == [str(tmp_path / "t" / kind) for kind in ("log", "cache")] + \
        [str(tmp_path / "t" / "bench" / "bench.parquet")]
    assert (tmp_path / "t" / "log" / "events.parquet").is_file()
    assert (tmp_path / "t" / "cache" / "winners.parquet").is_file()
    assert pd.read_parquet(tmp_path / "t" / "bench" / "bench.parquet")["value"].tolist() == [0.8394, 0.6318]


def test_kind_bench_on_a_flashinfer_log_fails_with_read_bench_message(capsys):
    code, out, err = parse(capsys, SERVER_LOG, "--kind", "bench")
    assert code == 1 and out == ""
    assert f"{SERVER_LOG}:1: expected an SGLang or vLLM 'Serving Benchmark Result' block" in err


@pytest.mark.parametrize("path", sorted((ENGINES / "not_engine_output").glob("*.txt")), ids=lambda p: p.name)
def test_not_engine_output_is_not_bench(path, capsys):
    """read_bench finds nothing there, so auto falls back to a log, which says what it expected."""
    code, _, err = parse(capsys, path)
    assert code == 1
    assert "no readable FlashInfer autotuner record" in err


def test_help_lists_bench_examples(capsys):
    with pytest.raises(SystemExit):
        cli_main(["parse", "--help"])
    out = capsys.readouterr().out
    assert "--kind {auto,log,cache,bench}" in out and "bench.parquet" in out
