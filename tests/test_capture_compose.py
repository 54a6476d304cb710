"""Capture beside other code that wraps the same AutoTuner methods, the ordinary way, in any order.

A :class:`Foreign` wrapper does what engines and tools do: ``current = AutoTuner.name``, put a
function that calls ``current`` in its place, and later put ``current`` back. FlashInfer's real
AutoTuner tunes on the CPU (``profkit.testing``); decisions are read from FlashInfer's own cache.
"""

from __future__ import annotations

from flashinfer.autotuner import AutoTuner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import profkit
from profkit import testing as T
from profkit.sources.hooks import layer_of

METHODS = ("choose_one", "_profile_single_kernel")
M = 16  # buckets 1, 2, 4, 8, 16


class Foreign:
    """Another library's wrapper of ``AutoTuner.<name>``: counts calls, calls what it found."""

    def __init__(self, name: str, label: str = ""):
        self.name = name
        self.label = label or name
        self.calls = 0
        self.saved = None

    def install(self) -> None:
        current = getattr(AutoTuner, self.name)
        self.saved = vars(AutoTuner)[self.name]
        foreign = self

        def wrapper(self, *args, **kwargs):
            foreign.calls += 1
            return current(self, *args, **kwargs)

        wrapper.foreign_label = self.label
        setattr(AutoTuner, self.name, wrapper)

    def uninstall(self) -> None:
        setattr(AutoTuner, self.name, self.saved)


def runners():
    return [T.ToyCublasRunner(), T.ToyCudnnRunner()]


def decisions(tuner, op):
    return {str(k.nearest_profile): (k.runner_class_name, str(v[0])) for k, v in tuner.profiling_cache.items()
            if k.custom_op == op}


def plain_decisions(tuner, op):
    """What FlashInfer decides for ``op`` with no profkit and no foreign code."""
    T.tune(op, runners(), M)
    found = decisions(tuner, op)
    tuner.clear_cache()
    return found


def methods():
    return {name: vars(AutoTuner)[name] for name in METHODS}


def test_foreign_choose_one_wrapper_installed_during_a_capture(tuner):
    expected = plain_decisions(tuner, "op_a")
    before = methods()
    foreign = Foreign("choose_one")
    with profkit.capture() as cap:
        T.tune("op_a", runners(), M)
        foreign.install()
        tuner.clear_cache()
        T.tune("op_a", runners(), M)  # RecursionError before the fix
        assert decisions(tuner, "op_a") == expected
    assert cap.winners.groupby("call").size().tolist() == [5, 5]  # each call recorded once
    AutoTuner.get().choose_one("op_a", runners(), T.gemm_config(), T.gemm_inputs(3))  # inference path
    assert foreign.calls == 2  # the second tuning call and the untuned one
    foreign.uninstall()
    AutoTuner.get().choose_one("op_a", runners(), T.gemm_config(), T.gemm_inputs(3))
    assert methods() == before


def test_foreign_profile_single_kernel_counter_keeps_flashinfers_winners(tuner):
    expected = plain_decisions(tuner, "op_a")
    foreign = Foreign("_profile_single_kernel")
    with profkit.capture(time_default=False) as cap:
        foreign.install()
        T.tune("op_a", runners(), M)
        assert decisions(tuner, "op_a") == expected
    foreign.uninstall()
    candidates = cap.candidates
    assert len(candidates) == foreign.calls == 25  # 5 buckets x 5 tactics, each recorded once
    assert candidates["error"].str.contains("RecursionError").sum() == 0
    assert candidates["status"].value_counts().to_dict() == {"ok": 15, "failed": 5, "fallback": 5}


def test_capture_closed_under_a_foreign_wrapper_leaves_a_pass_through(tuner):
    expected = plain_decisions(tuner, "op_a")
    before = methods()
    foreign = Foreign("choose_one")
    with profkit.capture():
        foreign.install()
    with profkit.capture() as second:  # opens over the foreign wrapper, which holds the first layer
        T.tune("op_a", runners(), M)
    assert decisions(tuner, "op_a") == expected and len(second.winners) == 5
    assert layer_of(vars(AutoTuner)["choose_one"]) is None  # the foreign wrapper is on top, as it put itself
    foreign.uninstall()  # restores profkit's first layer, which stands down on its next call
    AutoTuner.get().choose_one("op_a", runners(), T.gemm_config(), T.gemm_inputs(3))
    assert methods() == before


# -- random sequences ------------------------------------------------------------------------

STEPS = st.lists(st.one_of(
    st.tuples(st.just("foreign"), st.sampled_from(METHODS)),
    st.tuples(st.just("remove"), st.integers(0, 5)),  # which installed foreign wrapper (any order)
    st.tuples(st.just("open"), st.booleans()),  # capture, timing the default or not
    st.tuples(st.just("close"), st.integers(0, 5)),  # which open capture (any order)
    st.tuples(st.just("tune"), st.integers(1, 3)),
), max_size=12)


def run_steps(tuner, steps, *, with_profkit: bool):
    """Play ``steps``; return the decisions of every tuning step and what the methods end as."""
    foreign, captures, seen = [], [], []
    for number, (kind, arg) in enumerate(steps):
        if kind == "foreign":
            foreign.append(Foreign(arg, label=f"{arg}#{number}"))
            foreign[-1].install()
        elif kind == "remove" and foreign:
            foreign.pop(arg % len(foreign)).uninstall()
        elif kind == "open" and with_profkit:
            captures.append(profkit.capture(time_default=arg).__enter__())
        elif kind == "close" and captures:
            captures.pop(arg % len(captures)).__exit__(None, None, None)
        elif kind == "tune":
            tuner.clear_cache()
            T.tune(f"op_{arg}", runners(), 2 ** (arg + 1))
            seen.append(decisions(tuner, f"op_{arg}"))
    for cap in reversed(captures):
        cap.__exit__(None, None, None)
    tuner.clear_cache()
    T.tune("op_1", runners(), 2)  # FlashInfer still tunes; a layer put back by foreign code stands down
    seen.append(decisions(tuner, "op_1"))
    return seen, {name: label(vars(AutoTuner)[name]) for name in METHODS}


def label(method) -> str:
    if layer_of(method) is not None:
        return "profkit"
    return getattr(method, "foreign_label", "flashinfer")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=STEPS)
def test_random_wrapping_and_captures_change_nothing(tuner, steps):
    before = methods()
    without = run_steps(tuner, steps, with_profkit=False)
    for name, method in before.items():  # foreign wrappers removed out of order stay, as they would
        setattr(AutoTuner, name, method)
    with_profkit = run_steps(tuner, steps, with_profkit=True)
    for name, method in before.items():
        setattr(AutoTuner, name, method)
    assert with_profkit == without
