"""Drive FlashInfer's real AutoTuner on a CPU: stand-ins for its GPU-only primitives, toy runners.

Only what cannot run without a GPU is replaced (autotuner_errata.md, CPU recipe):
``AutoTuner._profile_single_kernel`` (GPU timing; the stand-in still calls
``runner(inputs, tactic=tactic)`` so failures and fallbacks really happen, and logs the real
method's per-candidate debug line),
``torch.cuda.is_current_stream_capturing`` and ``AutoTuner._get_l2_cache_size_in_bytes``.
FlashInfer's profile generation, caching and winner selection run for real.

Used by profkit's tests, its benchmarks, and by anyone who wants to try profkit without a GPU.
MoE-shaped runners and TuningConfigs are in :mod:`profkit.testing.moe`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import warnings
import zlib
from typing import Callable

import torch
from flashinfer.autotuner import AutoTuner, DynamicTensorSpec, TunableRunner, TuningConfig
from flashinfer.fused_moe.utils import get_hybrid_num_tokens_buckets, map_to_hybrid_bucket_uncapped
from flashinfer.jit.core import logger

from profkit.schema import tactic_text

TimeFn = Callable[[str, object, tuple], float]


def default_time(runner: str, tactic, shapes: tuple) -> float:
    """Deterministic fake time in ms: grows with M, depends on runner and tactic."""
    m = shapes[0][0] if shapes and shapes[0] else 1
    base = {"ToyCublasRunner": 1.0, "ToyCudnnRunner": 1.1, "ToyOomRunner": 0.9}.get(runner, 1.0)
    wobble = (zlib.crc32(tactic_text(tactic).encode()) % 7) / 100.0 if tactic != -1 else 0.12
    return round(base * (0.01 + m / 1000.0) * (1.0 + wobble), 9)


@contextlib.contextmanager
def cpu_autotuner(time_fn: TimeFn = default_time):
    """Make FlashInfer's AutoTuner tune on a CPU; restores exactly what it replaced.

    Yields the AutoTuner singleton with a cleared cache.
    """

    def fake_profile_single_kernel(self, runner, inputs, tactic, tuning_config, input_tensor_batches=None, **kwargs):
        runner(inputs, tactic=tactic, **kwargs)  # failures and fallbacks happen for real; op kwargs such as gemm_idx pass on
        shapes = tuple(tuple(t.shape) if isinstance(t, torch.Tensor) else (0,) for t in inputs)
        avg_time = time_fn(type(runner).__name__, tactic, shapes)
        # The real method's debug line after each successful candidate (AT:3114), so debug logs
        # of CPU runs read like GPU ones.
        logger.debug(f"[Autotuner]: profiling {runner} {tactic}, shapes={self._get_input_sizes(inputs)}, "
                     f"avg_time {avg_time}")
        return avg_time

    saved = {name: vars(AutoTuner)[name] for name in ("_profile_single_kernel", "_get_l2_cache_size_in_bytes")}
    # FlashInfer logs every tuning call at INFO; on a CPU try-out that is noise. Quiet only its default
    # level: FLASHINFER_LOGGING_LEVEL, or a level the caller set (a debug log), is left as it is.
    quiet = os.environ.get("FLASHINFER_LOGGING_LEVEL") is None and logger.level == logging.INFO
    if quiet:
        logger.setLevel(logging.WARNING)
    saved_capturing = torch.cuda.is_current_stream_capturing
    AutoTuner._profile_single_kernel = fake_profile_single_kernel
    AutoTuner._get_l2_cache_size_in_bytes = lambda self, device_id=None: 1 << 20
    torch.cuda.is_current_stream_capturing = lambda: False
    tuner = AutoTuner.get()
    tuner.clear_cache()
    try:
        yield tuner
    finally:
        for name, value in saved.items():
            setattr(AutoTuner, name, value)
        torch.cuda.is_current_stream_capturing = saved_capturing
        tuner.clear_cache()
        if quiet:
            logger.setLevel(logging.INFO)


class ToyCublasRunner(TunableRunner):
    """Integer tactics like cuBLAS; ``failing`` tactics raise like an unsupported kernel."""

    def __init__(self, tactics=(0, 1, 2), failing=(2,)):
        self.tactics = tuple(tactics)
        self.failing = tuple(failing)

    def get_valid_tactics(self, inputs, profile):
        return list(self.tactics)

    def forward(self, inputs, tactic=-1, do_preparation=False, **kwargs):
        if tactic in self.failing:
            raise RuntimeError(f"tactic {tactic} is not supported for shape {tuple(inputs[0].shape)}")
        return inputs[0] @ inputs[1]


class ToyCudnnRunner(TunableRunner):
    """cuDNN-like tuple tactics; a ``fallback`` tactic warns and runs tactic -1, as cuDNN runners do."""

    def __init__(self, tactics=((1, ((2, 3),)), (4, ())), fallback=((4, ()),)):
        self.tactics = tuple(tactics)
        self.fallback = tuple(fallback)

    def get_valid_tactics(self, inputs, profile):
        return list(self.tactics)

    def forward(self, inputs, tactic=-1, do_preparation=False, **kwargs):
        if tactic in self.fallback:
            warnings.warn("cuDNN toy GEMM tactic failed; falling back to default tactic=-1. (no plan)", stacklevel=2)
        return inputs[0] @ inputs[1]


class ToyOomRunner(TunableRunner):
    """Runs out of memory once M reaches ``oom_at``, as a large GEMM does on a full GPU."""

    def __init__(self, oom_at=64):
        self.oom_at = oom_at

    def get_valid_tactics(self, inputs, profile):
        return [0, 1]

    def forward(self, inputs, tactic=-1, do_preparation=False, **kwargs):
        if inputs[0].shape[0] >= self.oom_at and tactic != -1:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 1.00 GiB (toy)")
        return inputs[0] @ inputs[1]


def gemm_config(**kwargs) -> TuningConfig:
    """A TuningConfig like FlashInfer's GEMMs: M (dim 0 of input 0) on the hybrid buckets."""
    spec = DynamicTensorSpec((0,), (0,), get_hybrid_num_tokens_buckets, map_to_hybrid_bucket_uncapped)
    return TuningConfig(dynamic_tensor_specs=(spec,), **kwargs)


def gemm_inputs(m: int, k: int = 8, n: int = 4) -> list[torch.Tensor]:
    return [torch.randn(m, k), torch.randn(k, n)]


def tune(op: str, runners, m: int, **config_kwargs):
    """One tuning call of ``op`` at M=m through the real ``choose_one``; returns (runner, tactic)."""
    from flashinfer.autotuner import autotune

    with autotune(True):
        return AutoTuner.get().choose_one(op, list(runners), gemm_config(**config_kwargs), gemm_inputs(m))
