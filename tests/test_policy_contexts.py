"""Where FlashInfer serves what each study policy tuned (real AutoTuner on the CPU, profkit.testing).

``profkit step``'s v2 states time their steps inside ``contexts.serving_context``: winners tuned
under ``autotune_v2(persistent_cache=False, measurement_policy=...)`` are not served by bare calls.
"""

from __future__ import annotations

import flashinfer
import pytest

from profkit import testing as T
from profkit.bench.contexts import POLICIES, serving_context, tuning_context

pytestmark = pytest.mark.skipif(not hasattr(flashinfer, "autotune_v2"), reason="autotune_v2 is 0.7-only")

FAST = ("ToyCudnnRunner", (4, ()))  # the one candidate the fake timer makes fastest


def runners():
    return [T.ToyCublasRunner(failing=()), T.ToyCudnnRunner(fallback=())]


def pick(tuner):
    runner, tactic = tuner.choose_one("toy_gemm", runners(), T.gemm_config(), T.gemm_inputs(8))
    return type(runner).__name__, tactic


@pytest.mark.parametrize("policy", POLICIES)
def test_each_policy_serves_its_winner_in_its_serving_context(policy):
    with T.cpu_autotuner(lambda runner, tactic, shapes: 0.5 if (runner, tactic) == FAST else 1.0) as tuner:
        with tuning_context(policy):
            assert pick(tuner) == FAST
        bare = pick(tuner)
        with serving_context(policy):
            served = pick(tuner)
    assert served == FAST
    # autotune's winners serve bare; a policy's in-memory winners do not: bare calls run the default.
    assert bare == (FAST if policy == "autotune" else ("ToyCublasRunner", -1))


def test_a_serving_context_does_not_serve_another_policys_winners():
    with T.cpu_autotuner(lambda runner, tactic, shapes: 0.5 if (runner, tactic) == FAST else 1.0) as tuner:
        with tuning_context("v2-graph"):
            pick(tuner)
        with serving_context("v2-eager"):
            assert pick(tuner) == ("ToyCublasRunner", -1)
        with serving_context("v2-graph"):
            assert pick(tuner) == FAST


def test_an_unknown_policy_is_refused():
    with pytest.raises(ValueError, match="policy must be one of"):
        serving_context("v3")
