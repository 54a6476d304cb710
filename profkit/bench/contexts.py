"""What FlashInfer's AutoTuner tunes under and serves from: a policy's contexts, a loaded cache file.

Policies: ``autotune`` = FlashInfer's default ``autotune(True)``, ``v2-graph`` =
``autotune_v2`` with ``MeasurementPolicy(execution_mode="cuda_graph", cold_l2=True)``, ``v2-eager``
= ``MeasurementPolicy(execution_mode="eager")`` (host cost included). Used by the policy study,
``profkit step``'s v2 states, ``profkit verify`` and the MoE benches.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

POLICIES = ("autotune", "v2-graph", "v2-eager")


def _measurement_policy(name: str):
    from flashinfer.autotune_cache import MeasurementPolicy

    policies = {"v2-graph": MeasurementPolicy(execution_mode="cuda_graph", cold_l2=True),
                "v2-eager": MeasurementPolicy(execution_mode="eager")}
    if name not in policies:
        raise ValueError(f"policy must be one of {POLICIES}, got {name!r}")
    return policies[name]


def tuning_context(name: str):
    """The tuning context of a study policy: FlashInfer's ``autotune(True)`` or ``autotune_v2``."""
    import flashinfer

    if name == "autotune":
        return flashinfer.autotune(True)
    return flashinfer.autotune_v2(mode="tune", persistent_cache=False, measurement_policy=_measurement_policy(name))


def serving_context(name: str):
    """Where a policy's in-memory winners are served: ``autotune_v2(mode="replay")`` with the same policy.

    FlashInfer keeps winners tuned under an explicit MeasurementPolicy without a store in a partition
    of that policy (``AutoTuner._winner_cache``): bare calls after the tuning context read the v1
    cache and run the default. ``autotune`` winners are served bare.
    """
    import flashinfer

    if name == "autotune":
        return contextlib.nullcontext()
    return flashinfer.autotune_v2(mode="replay", persistent_cache=False, measurement_policy=_measurement_policy(name))


def load_cache(cache: Path | None) -> bool:
    """Clear FlashInfer's tuned configs and load ``cache``; False when none or FlashInfer refuses it."""
    from flashinfer.autotuner import AutoTuner

    tuner = AutoTuner.get()
    tuner.clear_cache()
    return bool(cache) and bool(tuner.load_configs(str(cache)))


def load_cache_files(paths, state: str) -> None:
    """Clear FlashInfer's configs, then load every file of ``paths`` for ``state`` (none for untuned); raise
    where a state needs files and has none, or FlashInfer refuses one."""
    from flashinfer.autotuner import AutoTuner

    tuner = AutoTuner.get()
    tuner.clear_cache()
    if state != "untuned" and not paths:
        raise ValueError(f"state {state!r} needs cache files (--cache {state}=PATH)")
    for path in paths:
        if not tuner.load_configs(str(path)):
            raise RuntimeError(f"FlashInfer refused cache file {path} (environment mismatch)")
