"""Capture where engines really run it: warm autotune_v2 stores, odd static inputs, threads.

FlashInfer's real AutoTuner tunes on the CPU (``profkit.testing``); what FlashInfer decided is read
from its own winner caches and compared with the capture and with a run without profkit.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import sys
import threading
import warnings

import flashinfer
import numpy as np
import pytest
from flashinfer.autotuner import AutoTuner, autotune

import profkit
from profkit import testing as T
from profkit.sources.hooks import HookSet

M = 16  # hybrid buckets 1, 2, 4, 8, 16


def runners():
    return [T.ToyCublasRunner(), T.ToyCudnnRunner()]


def decided(cache: dict, op: str) -> dict:
    """{nearest profile text: (runner, tactic text)} of ``op`` in one of FlashInfer's winner caches."""
    return {str(k.nearest_profile): (k.runner_class_name, profkit.schema.tactic_text(v[0]))
            for k, v in cache.items() if k.custom_op == op}


def captured(winners) -> dict:
    return {p: (r, t) for p, r, t in zip(winners["profile"], winners["runner"], winners["tactic"])}


# -- issue 13, case 3: autotune_v2 with a store that already holds some buckets ---------------------

def v2_second_start(tuner, store, *, capture: bool):
    """The job's second start: the store holds buckets 1..8 (first start tuned M=8), now M=32."""
    tuner.clear_cache()  # a new process: nothing in memory, only the store on disk
    with profkit.capture() if capture else contextlib.nullcontext() as cap:
        with flashinfer.autotune_v2(mode="tune", cache_root=str(store)):
            tuner.choose_one("toy_gemm", runners(), T.gemm_config(), T.gemm_inputs(32))
    return cap, decided(tuner._winner_cache(), "toy_gemm")


@pytest.fixture
def v2_tuner(tuner):
    """The tuner, its ambient v2 store detached again afterwards (autotune_v2 leaves it attached)."""
    saved = tuner._managed_cache, tuner._managed_stores
    tuner._managed_stores = {}
    try:
        yield tuner
    finally:
        tuner._managed_cache, tuner._managed_stores = saved
        tuner.clear_cache()


@pytest.mark.skipif(not hasattr(flashinfer, "autotune_v2"), reason="autotune_v2 is 0.7-only")
def test_a_warm_v2_store_keeps_store_hits_and_the_profiled_buckets(v2_tuner, tmp_path):
    tuner = v2_tuner
    with flashinfer.autotune_v2(mode="tune", cache_root=str(tmp_path / "first")):
        tuner.choose_one("toy_gemm", runners(), T.gemm_config(), T.gemm_inputs(8))
    first = decided(tuner._winner_cache(), "toy_gemm")
    assert len(first) == 4  # buckets 1, 2, 4, 8 are in the store
    shutil.copytree(tmp_path / "first", tmp_path / "plain")
    _, plain = v2_second_start(tuner, tmp_path / "plain", capture=False)
    cap, seen = v2_second_start(tuner, tmp_path / "first", capture=True)

    assert cap.problems == [] and seen == plain  # the call is kept, FlashInfer decided as without profkit
    winners = cap.winners.set_index("bucket")
    assert captured(cap.winners) == seen
    assert list(winners["source"]) == ["store"] * 4 + ["profiled"] * 2  # 1..8 from the store; 16, 32 tuned
    assert captured(cap.winners[cap.winners["source"] == "store"]) == first  # what the first start decided
    assert winners.loc[[1, 2, 4, 8], "time_ms"].isna().all()  # the store keeps no times
    candidates = cap.candidates
    assert sorted(candidates["bucket"].unique()) == [16, 32]  # the profiled buckets keep their candidates
    # v2 races runners[0] with tactic -1 as one of its own (errata point 3): FlashInfer's candidate,
    # which gives the default time; profkit times no extra default of its own.
    raced = candidates[candidates["tactic"] == "-1"]
    assert list(raced["source"]) == ["flashinfer"] * 2 and (candidates["source"] != "default").all()
    assert list(winners.loc[[16, 32], "default_time_ms"]) == list(raced["time_ms"])
    assert (winners.loc[[16, 32], "time_ms"] > 0).all()


# -- issue 18, case 1: a static input that has a .size but is no tensor ------------------------------

class Odd:
    """A static input whose ``size`` and ``shape`` raise when read (a tensor-like that is not one)."""

    @property
    def size(self):
        raise RuntimeError("not a tensor")

    shape = size


class StaticInputRunner(T.ToyCublasRunner):
    """Takes (x, w, numpy array, odd object), as ops take scales or routing tables beside tensors."""

    def __init__(self):
        super().__init__(tactics=(0, 1, 2), failing=())

    def forward(self, inputs, tactic=-1, do_preparation=False, **kwargs):
        assert isinstance(inputs[2], np.ndarray) and isinstance(inputs[3], Odd)
        return super().forward(inputs[:2], tactic=tactic)


def test_a_numpy_static_input_changes_nothing(tuner):
    def tune():
        inputs = T.gemm_inputs(M) + [np.arange(6, dtype=np.float32), Odd()]
        with autotune(True):
            tuner.choose_one("static_inputs", [StaticInputRunner()], T.gemm_config(), inputs)
        found = decided(tuner.profiling_cache, "static_inputs")
        tuner.clear_cache()
        return found

    plain = tune()
    with profkit.capture(time_default=False) as cap:
        seen = tune()
    assert seen == plain and len(seen) == 5
    assert cap.problems == []
    assert len(cap.candidates) == 5 * 3 and (cap.candidates["status"] == "ok").all()  # tactics 0, 1, 2
    assert set(cap.candidates["shapes"].str.count(r"\(0,\)")) == {2}  # the two non-tensors, as FlashInfer writes them
    assert captured(cap.winners) == seen and (cap.winners["tactic"] != "-1").all()


# -- issue 18, case 2: a capture closing while another thread is inside a tuning call ---------------

def class_methods() -> dict:
    names = ("choose_one", "rank_tactics", "_generate_optimization_profiles", "_prepare_input_tensors",
             "_profile_single_kernel", "search_cache")
    return {**{n: vars(AutoTuner).get(n) for n in names}, "warnings.warn": warnings.warn}


def test_a_capture_closed_during_a_tuning_call_on_another_thread_stays_closed(tuner, monkeypatch):
    before = class_methods()
    paused, resume = threading.Event(), threading.Event()
    refresh = HookSet.refresh

    def refresh_after_a_pause(hooks):
        if threading.current_thread() is worker:
            paused.set()
            assert resume.wait(30)
        refresh(hooks)

    monkeypatch.setattr(HookSet, "refresh", refresh_after_a_pause)
    worker = threading.Thread(target=T.tune, args=("toy_gemm", runners(), M))
    cap = profkit.capture(time_default=False).__enter__()
    try:
        worker.start()
        assert paused.wait(30)  # the worker is in choose_one, before the refresh
    finally:
        cap.__exit__(None, None, None)  # the last capture closes
        resume.set()
    worker.join(60)
    assert not worker.is_alive()
    assert class_methods() == before  # nothing re-installed after the last capture closed

    tuner.clear_cache()
    with profkit.capture(time_default=False) as again:  # and the next capture wraps FlashInfer once
        T.tune("toy_gemm", runners(), M)
    assert len(again.candidates) == 5 * 5 and again.problems == []
    assert class_methods() == before


# -- issue 18, case 3: two threads tuning the same op at once ----------------------------------------

def test_two_threads_tuning_one_op_at_once_report_one_profiled_and_one_cached_call(monkeypatch):
    both_in = threading.Event()
    entered = []
    choose_one = AutoTuner.choose_one

    def counting(self, *args, **kwargs):  # inside profkit's layer: both threads have begun their call
        entered.append(threading.get_ident())
        if len(entered) == 2:
            both_in.set()
        return choose_one(self, *args, **kwargs)

    def slow_first_candidate(runner, tactic, shapes):  # the first call times only once the second is in
        assert both_in.wait(30)
        return T.default_time(runner, tactic, shapes)

    monkeypatch.setattr(AutoTuner, "choose_one", counting)
    with T.cpu_autotuner(slow_first_candidate) as tuner:
        def tune():  # autotune(True) is opened once, outside: entering it takes FlashInfer's lock too
            tuner.choose_one("toy_gemm", runners(), T.gemm_config(), T.gemm_inputs(M))

        with profkit.capture(time_default=False) as cap, autotune(True):
            threads = [threading.Thread(target=tune) for _ in range(2)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(60)
        seen = decided(tuner.profiling_cache, "toy_gemm")
    assert len(entered) == 2 and cap.problems == []
    calls = {call: set(g["source"]) for call, g in cap.winners.groupby("call")}
    assert sorted(map(sorted, calls.values())) == [["cached"], ["profiled"]]
    profiled_call = next(c for c, s in calls.items() if s == {"profiled"})
    profiled = cap.winners[cap.winners["call"] == profiled_call]
    assert profiled["time_ms"].notna().all() and len(profiled) == 5
    assert set(cap.candidates["call"]) == {profiled_call}  # the cached call timed nothing
    for _, winners in cap.winners.groupby("call"):
        assert captured(winners) == seen


# -- a fork while another thread holds profkit's locks -----------------------------------------------

FORK_WHILE_LOCKED = r"""
import os, signal, threading, torch
import profkit
from profkit import testing as T
from profkit.sources import capture, hooks

with T.cpu_autotuner(), profkit.capture(time_default=False) as cap:
    held, forked = threading.Event(), threading.Event()

    def hold():  # another thread of the program is inside profkit's bookkeeping at the fork
        with capture._RECORDER.lock, hooks._LOCK:
            held.set()
            forked.wait(60)

    holder = threading.Thread(target=hold)
    holder.start()
    held.wait(60)
    child = os.fork()
    if child == 0:
        signal.alarm(20)  # a deadlock ends the child, not the test
        torch.set_num_threads(1)  # GNU OpenMP's pool does not survive fork (tune_in_workers.py)
        T.tune("in_child", [T.ToyCublasRunner()], 4)
        os._exit(0 if set(cap.winners["op"]) == {"in_child"} else 3)
    forked.set()
    holder.join()
    _, status = os.waitpid(child, 0)
print("child status", os.waitstatus_to_exitcode(status))
"""


def test_a_child_forked_while_another_thread_holds_profkits_locks_tunes_and_records(tmp_path):
    done = subprocess.run([sys.executable, "-c", FORK_WHILE_LOCKED], capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "child status 0"
