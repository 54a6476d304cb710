"""What profkit.capture adds to FlashInfer's AutoTuner calls, measured side by side in one run.

Each case is timed uncaptured and captured in alternating rounds (median of rounds):
- serving: ``choose_one`` outside tuning mode (a cache lookup, what every forward pays);
- tuning: one full tuning call (6 buckets x 5 candidates, CPU stand-in timer), with and
  without profkit's default-tactic timing;
- with ``--gpu``: eager calls of the real ops (``fp8_gemm``, ``bf16_gemm``, Llama-3.1-8B ``o``)
  after tuning, beside the op's GPU time in a CUDA graph (a call slower than that is host-bound,
  so the hook's cost shows in full).
Target: at most ~2 us added per serving call.
Run: ``python benchmarks/bench_capture_overhead.py [--gpu]``.
"""

from __future__ import annotations

import statistics
import time

from flashinfer.autotuner import AutoTuner, autotune

import profkit
from profkit import testing as T


def per_call_us(fn, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls * 1e6


def alternate(plain, captured, *, rounds: int, calls: int, capture_kwargs=None) -> tuple[float, float]:
    """Median per-call microseconds of ``plain`` and ``captured`` over alternating rounds."""
    plain_us, captured_us = [], []
    for _ in range(rounds):
        plain_us.append(per_call_us(plain, calls))
        with profkit.capture(**(capture_kwargs or {})):
            captured_us.append(per_call_us(captured, calls))
    return statistics.median(plain_us), statistics.median(captured_us)


def cpu_stand_in() -> None:
    with T.cpu_autotuner() as tuner:
        runners = [T.ToyCublasRunner(), T.ToyCudnnRunner()]
        config, inputs = T.gemm_config(), T.gemm_inputs(24)
        T.tune("bench_gemm", runners, 32)  # fill the cache: serving calls are cache hits

        def serve():
            tuner.choose_one("bench_gemm", runners, config, inputs)

        base, captured = alternate(serve, serve, rounds=15, calls=20000)
        print(f"serving choose_one (not tuning): {base:7.2f} us uncaptured, {captured:7.2f} us captured, "
              f"+{captured - base:5.2f} us per call, ratio {captured / base:.3f}")

        def tune_once():
            tuner.clear_cache()
            with autotune(True):
                tuner.choose_one("bench_gemm", runners, config, T.gemm_inputs(32))

        for time_default in (False, True):
            base, captured = alternate(tune_once, tune_once, rounds=7, calls=20,
                                       capture_kwargs={"time_default": time_default})
            print(f"tuning call, time_default={time_default!s:5}: {base / 1e3:7.2f} ms uncaptured, "
                  f"{captured / 1e3:7.2f} ms captured, ratio {captured / base:.3f}")


def gpu_ops(m: int = 1, n: int = 4096, k: int = 4096) -> None:
    import torch

    from profkit.bench import gemm as G

    G.enable_bf16_auto_on_sm90()
    for op in G.OPS:
        gemm = G.make_gemm(op, n, k, copies=1)
        x, w, out = gemm.inputs(m, 1)[0], gemm.weights[0], gemm.out(m)
        with torch.inference_mode():
            with autotune(True):
                gemm(x, w, out)  # tunes bucket m; the calls below are cache hits

            def call():
                gemm(x, w, out)

            def synced():  # a round ends when the GPU has run every call it queued
                call()
                torch.cuda.synchronize()

            base, captured = alternate(call, call, rounds=15, calls=5000)
            synced_base, synced_captured = alternate(synced, synced, rounds=15, calls=500)
            gpu_us = G.time_graph(gemm, m, rotate=1)["time_ms"] * 1e3
        print(f"{op} M={m} N={n} K={k} eager call: {base:7.2f} us uncaptured, {captured:7.2f} us captured, "
              f"+{captured - base:5.2f} us per call, ratio {captured / base:.3f}; "
              f"synchronized each call: {synced_base:7.2f} -> {synced_captured:7.2f} us; GPU time {gpu_us:6.2f} us")


if __name__ == "__main__":
    import sys

    from flashinfer.jit.core import logger  # FlashInfer builds it directly: logging.getLogger does not find it

    logger.setLevel("ERROR")  # per-candidate log lines would be timed too
    cpu_stand_in()
    if "--gpu" in sys.argv[1:]:
        gpu_ops()
