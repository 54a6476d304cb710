"""Regenerate the parser test inputs under tests/data/ (run by hand, never by the tests).

    .venv/bin/python tests/data/generate.py

CPU situations run FlashInfer's real AutoTuner (profkit.testing's CPU recipe) in subprocesses
with FLASHINFER_LOGGING_LEVEL=debug, keeping stderr, the logger's own flashinfer_jit.log, the cache
files FlashInfer wrote and profkit's capture of the same run (the CPU timer stand-in prints
FlashInfer's per-candidate debug line as the real method does). H200 situations are excerpts of
data/h200 logs.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
H200 = ROOT / "data" / "h200"

CPU_SCRIPT = r'''
import json, sys
from pathlib import Path
import flashinfer
from flashinfer.autotuner import AutoTuner, autotune
import profkit
from profkit import testing as T

out, scenario = Path(sys.argv[1]), sys.argv[2]

with T.cpu_autotuner():  # its timer stand-in logs FlashInfer's per-candidate debug line
    tuner = AutoTuner.get()
    gemm = lambda: [T.ToyCublasRunner(), T.ToyCudnnRunner()]
    if scenario == "failures":
        with profkit.capture(time_default=False) as cap:
            with autotune(True, cache=str(out / "cache.json")):
                tuner.choose_one("toy_gemm", gemm(), T.gemm_config(), T.gemm_inputs(32))
                tuner.choose_one("toy_oom", [T.ToyOomRunner()], T.gemm_config(), T.gemm_inputs(128))
        cap.save(out / "capture")
        tuner.choose_one("toy_gemm", gemm(), T.gemm_config(), T.gemm_inputs(100))  # out of range: cache miss
    elif scenario == "hits":
        with autotune(False, cache=sys.argv[3]):
            tuner.choose_one("toy_gemm", gemm(), T.gemm_config(), T.gemm_inputs(16))
        with autotune(True, cache=sys.argv[3]):  # every profile answered by the file: no candidates
            tuner.choose_one("toy_gemm", gemm(), T.gemm_config(), T.gemm_inputs(32))
    elif scenario == "mismatch":
        with autotune(False, cache=sys.argv[3]):
            tuner.choose_one("toy_gemm", gemm(), T.gemm_config(), T.gemm_inputs(16))
    elif scenario == "v2":
        with flashinfer.autotune_v2(mode="tune", cache_root=str(out / "store")):
            tuner.choose_one("toy_gemm", gemm(), T.gemm_config(), T.gemm_inputs(8))
'''


def run_cpu(out: Path, scenario: str, *args: str) -> None:
    """Run one CPU scenario; keep its stderr and the logger's file as <scenario>.stderr.log / jit.log."""
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as workspace:
        env = {**os.environ, "FLASHINFER_LOGGING_LEVEL": "debug", "FLASHINFER_WORKSPACE_BASE": workspace,
               "PYTHONPATH": str(ROOT)}
        result = subprocess.run([sys.executable, "-c", CPU_SCRIPT, str(out), scenario, *args], env=env,
                                capture_output=True, check=True)
        (out / f"{scenario}.stderr.log").write_bytes(result.stderr)
        jit_log = next(Path(workspace).rglob("flashinfer_jit.log"))
        shutil.copyfile(jit_log, out / f"{scenario}.flashinfer_jit.log")


def h200_lines(path: Path) -> list[str]:
    """Physical lines (``\\n``-terminated, ``\\r`` kept inside) of a shipped H200 debug log."""
    text = gzip.decompress(path.read_bytes()).decode("utf-8")
    return [line + "\n" for line in text.split("\n")[:-1]]


def first_profiles(lines: list[str], n_winners: int) -> list[str]:
    """A log's lines from its first "Autotuning process starts" through its n-th winner line."""
    start = next((i for i, line in enumerate(lines) if "Autotuning process starts" in line), 0)
    out, seen = [], 0
    for line in lines[start:]:
        out.append(line)
        seen += "profiling chosen runner" in line
        if seen == n_winners:
            return out
    return out


def interleaved_ranks() -> None:
    """Two processes' first tuning profiles, vLLM-prefixed, interleaved line by line (seeded)."""
    out = HERE / "log_interleaved_ranks"
    out.mkdir(exist_ok=True)
    ranks = []
    for rank, name in enumerate(("fp8-repeat-r1/debug.log.gz", "fp8-repeat-r2/debug.log.gz")):
        lines = first_profiles(h200_lines(H200 / name), 3)
        (out / f"rank{rank}.log").write_text("".join(lines), encoding="utf-8")
        ranks.append([f"(Worker_TP{rank} pid={4100 + rank}) {line}" for line in lines])
    rng, merged = random.Random(0), []
    while any(ranks):
        source = rng.choice([r for r in ranks if r])
        merged.append(source.pop(0))
    (out / "server.log").write_text("".join(merged), encoding="utf-8")


def truncated() -> None:
    """An fp8 excerpt cut mid-record, and a flashinfer_jit.log whose writer died mid-line."""
    out = HERE / "log_truncated"
    out.mkdir(exist_ok=True)
    lines = first_profiles(h200_lines(H200 / "fp8" / "debug.log.gz"), 2)
    whole = "".join(lines[:-1])
    (out / "whole.log").write_text(whole, encoding="utf-8")
    cut = lines[-2][: len(lines[-2]) // 2]  # the last candidate before the 2nd winner, half written
    (out / "cut.log").write_text("".join(lines[:-2]) + cut, encoding="utf-8")
    jit = first_profiles(h200_lines(H200 / "fp8" / "flashinfer_jit.log.gz"), 1)
    second = h200_lines(H200 / "bf16" / "debug.log.gz")[:1]  # the next process's first record
    (out / "appended_flashinfer_jit.log").write_text("".join(jit[:-1]) + jit[-1][:80] + "".join(second),
                                                     encoding="utf-8")


def server_prefixes() -> None:
    """SGLang's own lines around unprefixed FlashInfer lines, as one rank of `sglang serve` prints."""
    out = HERE / "log_server_prefixes"
    out.mkdir(exist_ok=True)
    lines = first_profiles(h200_lines(H200 / "fp8" / "debug.log.gz"), 1)
    sglang = ["[2026-12-02 21:08:26 TP0] Running FlashInfer autotune with cache: /root/.cache/sglang/flashinfer/"
              "autotune/0.7.2.post1/sm90/15fc7a2edb371f48/rank_tp0_pp0_dp0.json\n"]
    done = ["[2026-12-02 21:08:37 TP0] FlashInfer autotune completed.\n"]
    (out / "sglang_tp0.log").write_text("".join(sglang + lines + done), encoding="utf-8")


def cache_rank_files() -> None:
    """Two SGLang per-rank files from one shipped H200 cache; rank 1 says another cuDNN."""
    out = HERE / "cache_metadata_mismatch" / "ranks"
    out.mkdir(parents=True, exist_ok=True)
    data = json.loads((H200 / "fp8" / "fp8_gemm-llama3-8b-o" / "cache.json").read_text())
    for rank in (0, 1):
        meta = dict(data["_metadata"], **({"cudnn_version": "91700"} if rank else {}))
        (out / f"rank_tp{rank}_pp0_dp0.json").write_text(json.dumps({**data, "_metadata": meta}, indent=2))


def main() -> None:
    failures = HERE / "log_cpu_failures"
    if failures.exists():
        shutil.rmtree(failures)
    run_cpu(failures, "failures")
    hits = HERE / "log_cache_hits"
    run_cpu(hits, "hits", str(failures / "cache.json"))
    mismatch = HERE / "cache_metadata_mismatch"
    mismatch.mkdir(exist_ok=True)
    data = json.loads((failures / "cache.json").read_text())
    data["_metadata"] = {**data["_metadata"], "gpu": "NVIDIA H100 80GB HBM3", "future_field": "x"}
    (mismatch / "other_gpu.json").write_text(json.dumps(data, indent=2))
    run_cpu(mismatch, "mismatch", str(mismatch / "other_gpu.json"))
    v2 = HERE / "cache_v2_store"
    if v2.exists():
        shutil.rmtree(v2)
    run_cpu(v2, "v2")
    cache_rank_files()
    interleaved_ranks()
    truncated()
    server_prefixes()


if __name__ == "__main__":
    main()
