"""Serving evidence: the verify verdicts of the shipped tunings, and kernel speedups beside an engine's serving pair."""

from __future__ import annotations

import numpy as np
import pandas as pd

from profkit.analysis import engine
from profkit.errors import ProfkitError

def serving_verdicts(verify: pd.DataFrame, policy_tuning: pd.DataFrame | None = None, *,
                     noise: pd.DataFrame | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The verify verdicts of the shipped tunings (the tuner's side judged with ``noise``), and the policy study's table.

    Returns:
        :func:`~profkit.analysis.verify.bucket_verdicts` of every verify row without a ``policy``
        (MoE tables under the tuner's routing: other routings are :func:`~profkit.analysis.moe.routing_sensitivity`'s),
        and :func:`~profkit.analysis.verify.policy_table` of the rows with one (each verify table's
        folder is one tuning); each empty when there are no such rows.
    """
    from profkit.analysis.verify import bucket_verdicts, policy_table

    if verify is None or verify.empty:
        return pd.DataFrame(), pd.DataFrame()
    is_policy = verify["policy"].notna().to_numpy(dtype=bool) if "policy" in verify.columns else \
        np.zeros(len(verify), dtype=bool)
    shipped = verify[~is_policy]
    if "routing" in shipped.columns:
        routing = shipped["routing"].astype("string")
        shipped = shipped[(routing.isna() | (routing == "tuner")).fillna(True).to_numpy(dtype=bool)]
    verdicts = bucket_verdicts(shipped, noise=noise) if len(shipped) else pd.DataFrame()
    policies = pd.DataFrame()
    if is_policy.any():
        study = verify[is_policy]
        if "folder" in study.columns:  # one tuning per verify table: the study names runs by policy and layer
            study = study.assign(run_id=study["folder"])
        policies = policy_table(study, policy_tuning)
    return verdicts, policies



def serving_provenance(runs: pd.DataFrame, bench: pd.DataFrame, speedups: pd.DataFrame) -> dict:
    """Where the kernels and the serving pair come from: ``kernel_gpus``, ``kernel_ops``, ``serving_gpus``,
    ``serving_models``, ``serving_engines`` (sorted, comma-joined; "" when not recorded) and ``same_gpu``."""
    def joined(frame, column):
        if frame is None or column not in frame.columns:
            return ""
        return ", ".join(sorted({str(v) for v in frame[column].dropna() if str(v)}))

    serving = bench[bench["total_output_tokens"].notna().to_numpy(dtype=bool)] \
        if len(bench) and "total_output_tokens" in bench.columns else bench
    kernel_gpus, serving_gpus = joined(runs, "gpu"), joined(serving, "gpu")
    short = lambda s: {g.replace("NVIDIA ", "") for g in s.split(", ") if g}  # noqa: E731
    return {"kernel_gpus": kernel_gpus, "kernel_ops": joined(speedups, "op"), "serving_gpus": serving_gpus,
            "serving_models": joined(serving, "model"), "serving_engines": joined(serving, "engine"),
            "same_gpu": bool(kernel_gpus and serving_gpus and short(kernel_gpus) == short(serving_gpus))}



def kernels_beside_serving(speedups: pd.DataFrame, bench: pd.DataFrame, *, labels=None) -> tuple[pd.DataFrame, str]:
    """Kernel speedups of the bench's model beside a serving pair (:func:`~profkit.analysis.kernel_vs_e2e`).

    The pair is autotune off/on where the bench says so, else the first two serving rows in
    file order (baseline first). Kernels are the captured shapes whose display label names the
    bench's model, else all of them.

    Returns:
        :func:`~profkit.analysis.kernel_vs_e2e` rows, and why there are none when serving rows were given but
        form no pair ("" otherwise).
    """
    if bench.empty or "total_output_tokens" not in bench:
        return pd.DataFrame(), ""
    serving = bench[bench["total_output_tokens"].notna().to_numpy(dtype=bool)]
    if len(serving) < 2:
        return pd.DataFrame(), ""
    flags = serving["autotune"].astype("boolean")
    known = not flags.isna().any() and flags.nunique() == 2
    pair = {} if known else {"baseline": str(serving["label"].iloc[0]), "treatment": str(serving["label"].iloc[1])}
    model = str(serving["model"].dropna().iloc[0]).rsplit("/", 1)[-1] if serving["model"].notna().any() else ""
    labels = labels or {}
    mine = speedups[speedups["shape"].map(lambda s: model in labels.get(s, "")).to_numpy(dtype=bool)] if model \
        else speedups
    try:
        return engine.kernel_vs_e2e(mine if len(mine) else speedups, serving, **pair), ""
    except ProfkitError as exc:
        return pd.DataFrame(), " ".join(str(exc).split())
