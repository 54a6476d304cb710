"""A FlashInfer cache file (v1 JSON) holding serving-verified picks: what ``profkit repair`` writes.

The file has FlashInfer's own layout, so ``flashinfer.autotune(False, cache=path)``,
``AutoTuner.load_configs(path)``, SGLang's per-rank cache file and vLLM's cache directory read it
unchanged: ``_metadata`` (FlashInfer skips a file whose metadata differs from the running
environment), then one entry per key, ``key -> [runner, tactic, policy]``. The key is FlashInfer's
own ``ProfilingCacheKey.file_key`` of the chosen runner, recorded by ``profkit verify`` at the
bucket's M, so extras (cuBLASLt's M, cuDNN's flags) are FlashInfer's, not rebuilt here.
"""

from __future__ import annotations

import json

import pandas as pd

from profkit.analysis._frames import require


def cache_file(picks: pd.DataFrame, *, metadata: dict, like: dict | None = None) -> dict:
    """The cache file's content for ``picks`` (:func:`profkit.analysis.verify.repair_picks`).

    Args:
        picks: one row per bucket: op, runner, tactic (canonical JSON text), file_key.
        metadata: FlashInfer's ``_metadata`` for the environment the picks were verified in.
        like: a cache file of the same tuning (e.g. the capture's ``cache.json``): each entry
            takes the measurement policy (the value's third element) of an entry of the same op
            and runner there, else of the same op; without it entries hold runner and tactic only.
    """
    require(picks, ("op", "runner", "tactic", "file_key"), "repair picks")
    policies = _policies(like or {})
    entries = {}
    for row in picks.dropna(subset=["file_key"]).itertuples(index=False):
        value = [row.runner, json.loads(row.tactic)]
        policy = policies.get((row.op, row.runner), policies.get(row.op))
        if policy is not None:
            value.append(policy)
        entries[row.file_key] = value
    return {"_metadata": dict(metadata), **dict(sorted(entries.items()))}


def _policies(like: dict) -> dict:
    out: dict = {}
    for key, value in like.items():
        if key.startswith("_") or not isinstance(value, list) or len(value) < 3:
            continue
        op = key.split("'")[1] if key.count("'") >= 2 else None
        out.setdefault((op, value[0]), value[2])
        out.setdefault(op, value[2])
    return out
