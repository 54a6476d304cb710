"""Shared by the GPU programs: the no-GPU exit, and CUDA-graph timing (warm eagerly, capture once, time replays)."""

from __future__ import annotations

import sys
from typing import Callable

import torch


def no_cuda(program: str) -> bool:
    """True (after one line on stderr naming ``program``) when this machine has no CUDA GPU."""
    if torch.cuda.is_available():
        return False
    print(f"{program}: a CUDA GPU is needed (torch.cuda.is_available() is False on this machine)", file=sys.stderr)
    return True


def graph_replay_ms(fn: Callable[[], object], *, replays: int, warmups: int = 1) -> list[float]:
    """Milliseconds of each of ``replays`` replays of a CUDA graph of ``fn()`` (see :func:`captured_graph`)."""
    return replay_ms(captured_graph(fn, warmups=warmups), replays=replays)


def captured_graph(fn: Callable[[], object], *, warmups: int = 1) -> "torch.cuda.CUDAGraph":
    """A CUDA graph of ``fn()``, replayed once.

    ``fn`` runs ``warmups`` times eagerly on a side stream first: cuDNN builds its execution
    plans then (building one during capture raises ``CudnnPlanBuildInCaptureError``), and
    CuTe-DSL compiles its kernels.
    """
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(warmups):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    graph.replay()
    torch.cuda.synchronize()
    return graph


def replay_ms(graph: "torch.cuda.CUDAGraph", *, replays: int) -> list[float]:
    """Milliseconds of each of ``replays`` replays of ``graph``, each timed by its own CUDA events."""
    times = []
    for _ in range(replays):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return times
