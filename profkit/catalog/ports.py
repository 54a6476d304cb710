"""What profkit's own cross-GPU runs left behind: the price of each port, and which debug logs they wrote.

A port is priced against a full tuning on its target GPU: ``profkit.bench.port_price``'s ``price.json`` (an MoE:
both timed in one process, and the same model's tuning call in a fresh process from a ``provenance.json``), or a
``profkit port`` alone (``port.json``, a dense GEMM tuning) against the target GPU's own tuning pass of the same
model and dtype in the step sets. A ``profkit verify`` or ``port`` of another GPU's capture makes FlashInfer ignore
that GPU's cache file on purpose; :func:`tag_cache_events` says which logs those processes wrote.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Mapping

import pandas as pd

from profkit.catalog._read import _documents
from profkit.catalog.walk import Inventory
from profkit.sources.inputs import as_float, as_int

PORT_PRICE_COLUMNS = {
    "folder": "string", "model": "string", "dtype": "string", "source_gpu": "string", "target_gpu": "string",
    "top_k": "Int64", "port_cold_s": "float64", "port_warm_s": "float64", "tune_s": "float64",
    "tune_warm_s": "float64", "fresh_tune_s": "float64", "fresh_tune_from": "string", "jit_builds": "string",
    "jit_build_s": "float64", "fresh_tune_jit_build_s": "float64",
}
_SAVED_VS_CURRENT = re.compile(r"gpu: saved=(?P<saved>.+?) vs current=(?P<current>.+?)(?:, \w+: saved=|$)")


def ports(inv: Inventory, problems: list) -> dict[Path, dict]:
    """Each readable ``port.json`` (a JSON object naming both GPUs and ``port_s``), by path; others are named."""
    out = {}
    for p, doc in _documents(inv, "port", problems):
        if not isinstance(doc, dict) or as_float(doc.get("port_s")) is None or not doc.get("target_gpu"):
            problems.append(f"{p}: expected profkit port's JSON object with source_gpu, target_gpu and port_s; skipped")
            continue
        out[p] = doc
    return out


def port_prices(inv: Inventory, prov: Mapping[str, dict], steps: Mapping[Path, pd.DataFrame],
                port_docs: Mapping[Path, dict], problems: list, jit_builds: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per port (:data:`PORT_PRICE_COLUMNS`): each ``price.json``, and each ``port.json`` in no folder a
    ``price.json`` prices (``<folder>/<out>/port.json``; its ``folder`` is ``<folder>/<out>``).

    A ``price.json``: the port's and a full tuning's wall seconds in one process, the GPU tuned on (its
    ``cold/port.json``) and the same model's tuning call on the same GPU in a fresh process (``tune_call_s`` of the
    first ``provenance.json`` of that model and GPU, by folder). A ``port.json`` alone: ``port_cold_s`` is its
    ``port_s``; the model and dtype are those of the step set in its folder (or of a port of the same source tuning
    that has one), and ``fresh_tune_s`` the target GPU's own tuning pass of them (a step row of state ``tuned`` on
    that GPU; its folder in ``fresh_tune_from``). The columns ``jit_builds`` and ``jit_build_s``: the JIT modules
    FlashInfer compiled in the (first) port and their seconds, a fresh machine's one-time cost inside
    ``port_cold_s``, as its ``port.json`` records them (``jit_modules``, ``jit_build_s``), else the modules a debug
    log in its folder names (the argument ``jit_builds``: the catalogue's ``jit_build`` events)."""
    rows, priced = [], set()
    for p, doc in _documents(inv, "port_price", problems):
        times = {k: as_float(doc.get(k)) if isinstance(doc, dict) else None
                 for k in ("port_cold_s", "port_warm_s", "tune_s", "tune_warm_s")}
        if None in (times["port_cold_s"], times["tune_s"]):
            problems.append(f"{p}: expected profkit.bench.port_price's JSON object with port_cold_s and tune_s; "
                            "skipped")
            continue
        priced.add(p.parent)
        model, gpu = doc.get("model"), doc.get("gpu")
        fresh = sorted((folder, as_float(d.get("tune_call_s"))) for folder, d in prov.items()
                       if d.get("model") == model and (d.get("env") or {}).get("gpu") == gpu
                       and as_float(d.get("tune_call_s")) is not None)
        cold = port_docs.get(p.parent / "cold" / "port.json", {})
        rows.append({"folder": inv.rel(p.parent), "model": model, "source_gpu": cold.get("source_gpu"),
                     "target_gpu": gpu, "top_k": as_int(doc.get("top_k")), **times,
                     "fresh_tune_s": fresh[0][1] if fresh else None, "fresh_tune_from": fresh[0][0] if fresh else None,
                     **_jit(cold, None)})
    step_rows = pd.concat(steps.values(), ignore_index=True) if steps else pd.DataFrame()
    dense = {p: doc for p, doc in port_docs.items() if p.parent.parent not in priced}
    models = {p: _step_model(inv.rel(p.parent.parent), step_rows) for p in dense}
    by_source = {_source(doc): models[p] for p, doc in dense.items() if models[p]}
    built = _modules_built(jit_builds, inv)
    for p, doc in dense.items():
        jit = _jit(doc, built.get(p.parent))
        rows.append({**_dense_port(inv.rel(p.parent), doc, models[p] or by_source.get(_source(doc)), step_rows,
                                   built_jit=jit["jit_builds"] is not None), **jit})
    return pd.DataFrame(rows, columns=list(PORT_PRICE_COLUMNS)).astype(PORT_PRICE_COLUMNS)


def _jit(doc: dict, logged: str | None) -> dict:
    """A port's ``jit_builds`` and ``jit_build_s``: as its ``port.json`` records them, else the modules its log names."""
    modules = doc.get("jit_modules")
    if not isinstance(modules, list):
        return {"jit_builds": logged, "jit_build_s": None}
    return {"jit_builds": ", ".join(map(str, modules)) or None, "jit_build_s": as_float(doc.get("jit_build_s"))}


def _modules_built(jit_builds: pd.DataFrame | None, inv: Inventory) -> dict[Path, str]:
    """The JIT modules FlashInfer built, comma-joined, by the folder of the log that says so."""
    if jit_builds is None or jit_builds.empty:
        return {}
    folders = log_folders(jit_builds["file"], inv)
    by_folder: dict[Path, list] = {}
    for log, module in zip(jit_builds["file"].astype(str), jit_builds["detail"].astype(str)):
        by_folder.setdefault(folders[log], []).append(module)
    return {folder: ", ".join(dict.fromkeys(modules)) for folder, modules in by_folder.items()}


def log_folders(files: pd.Series, inv: Inventory) -> dict[str, Path]:
    """Each log name in ``files`` (a path, one relative to the root, or a short name) to its folder."""
    logs = inv.paths("log")
    named = {key: p for p in logs for key in (str(p), inv.rel(p))}
    return {log: (named.get(log) or next((p for p in logs if str(p).endswith(f"/{log}")), Path(log))).parent
            for log in files.astype(str).unique()}


def _source(doc: dict) -> tuple:
    """What identifies a port's source tuning: its GPU, cache file name and tuning seconds (a sum over the capture)."""
    return doc.get("source_gpu"), Path(str(doc.get("cache"))).name, doc.get("source_tuning_s")


def _step_model(step_set: str, steps: pd.DataFrame) -> tuple | None:
    """(model, dtype) of the step set ``step_set`` (the port's ``--out`` sits in it), or None."""
    if not {"step_set", "model", "dtype"} <= set(steps.columns):
        return None
    ran = steps[(steps["step_set"] == step_set).to_numpy(dtype=bool)]
    return None if ran.empty else (ran["model"].iloc[0], ran["dtype"].iloc[0])


def _dense_port(folder: str, doc: dict, model_dtype: tuple | None, steps: pd.DataFrame, *, built_jit: bool) -> dict:
    """A ``port.json`` without a ``price.json``, priced against the target's own tuning pass in the step sets. Its
    model and dtype: those of the step set its folder sits in, else of another port of the same source tuning's.
    Like for like: a port that built FlashInfer's JIT modules (``built_jit``: a fresh machine's first) is priced
    against a tuning pass that built them too (``tuning_jit_build_s`` > 0: first in a fresh process with an empty JIT
    workspace), where the step sets hold one, and any other port against one that did not (after its untuned pass);
    else the first by folder."""
    row = {"folder": folder, "source_gpu": doc.get("source_gpu"), "target_gpu": doc["target_gpu"],
           "top_k": as_int(doc.get("top_k")), "port_cold_s": as_float(doc.get("port_s"))}
    if model_dtype is None or not {"state", "tuning_s", "gpu"} <= set(steps.columns):
        return row
    model, dtype = model_dtype
    own = steps[(steps["state"] == "tuned").to_numpy(dtype=bool) & steps["tuning_s"].notna().to_numpy(dtype=bool)
                & (steps["model"] == model).to_numpy(dtype=bool) & (steps["dtype"] == dtype).to_numpy(dtype=bool)
                & (steps["gpu"] == doc["target_gpu"]).to_numpy(dtype=bool)]
    row.update(model=model, dtype=dtype)
    if len(own):
        built = own["tuning_jit_build_s"].fillna(0).to_numpy() > 0  # step rows hold the schema's columns
        first = own.assign(unlike=built != built_jit).sort_values(["unlike", "source"], kind="stable").iloc[0]
        row.update(fresh_tune_s=float(first["tuning_s"]), fresh_tune_from=str(first["source"]),
                   fresh_tune_jit_build_s=None if pd.isna(first["tuning_jit_build_s"]) else float(first["tuning_jit_build_s"]))
    return row


def tag_cache_events(events: pd.DataFrame, inv: Inventory, verify: pd.DataFrame, runs: pd.DataFrame,
                     port_docs: Mapping[Path, dict]) -> pd.DataFrame:
    """``events`` with ``during``: ``profkit verify`` or ``profkit port`` where the log that says FlashInfer ignored a
    cache (``cache_env_mismatch``) was written by such a process, as its results show: a verify table or a
    ``port.json`` in the log's folder or below it, timed on the log's GPU (``current=``), of a capture tuned on the
    ignored file's GPU (``saved=``; a verify table whose capture is not in the catalogue names no such GPU and
    matches any). Such an ignore is on purpose: the process reads the other GPU's picks from the capture."""
    from profkit.catalog.partition import run_gpus

    if events is None or events.empty:
        return events
    results = [(p.parent, "profkit port", d.get("source_gpu"), d["target_gpu"]) for p, d in port_docs.items()]
    if len(verify) and {"source", "verify_gpu"} <= set(verify.columns):
        tuned_on = verify["run_id"].astype("string").map(run_gpus(runs)).astype("string")
        if "capture_gpu" in verify.columns:
            tuned_on = verify["capture_gpu"].astype("string").fillna(tuned_on)
        placed = pd.DataFrame({"source": verify["source"].astype(str), "saved": tuned_on,
                               "current": verify["verify_gpu"].astype("string")}).drop_duplicates()
        results += [(Path(inv.root, source).parent, "profkit verify", None if pd.isna(saved) else saved, current)
                    for source, saved, current in placed.itertuples(index=False)]
    folders = log_folders(events["file"], inv)  # the log's folder, also where it has a short name
    during = []
    for log, kind, detail in zip(events["file"].astype(str), events["kind"], events["detail"]):
        gpus = _SAVED_VS_CURRENT.search(str(detail)) if kind == "cache_env_mismatch" else None
        folder = folders[log]
        during.append(next((what for where, what, saved, current in results
                            if current == gpus["current"] and saved in (None, gpus["saved"])
                            and (where == folder or folder in where.parents)), None) if gpus else None)
    return events.assign(during=pd.array(during, dtype="string"))
