"""The keys of a run: GPU (name, SM count, compute capability), FlashInfer and CUDA versions, host, rank, process.

Facts come from the run itself first (a capture's environment, a cache file's ``_metadata``); what a
run does not state is taken from where it was found: a rank from the file or folder name
(``rank_tp1_pp0_dp0.json`` as SGLang names per-rank caches, ``rank3.log``, ``...-rank2/`` as
``profkit capture`` names process folders), and a debug log's environment from the ``provenance.json``
of the process that wrote it, in the same folder. ``env_from`` says where the environment came from.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pandas as pd

# Per run: the keys every table joins on through run_id.
KEY_COLUMNS = {
    "run_id": "string", "gpu": "string", "sm_count": "Int64", "compute_capability": "string",
    "flashinfer": "string", "cuda": "string", "host": "string", "rank": "Int64", "tp_rank": "Int64",
    "pp_rank": "Int64", "dp_rank": "Int64", "ep_rank": "Int64", "process": "string",
    "source_kind": "string", "path": "string", "env_from": "string",
}
# Multiprocessors per GPU name (NVIDIA's data sheets; the H100 and H200 measured here: 132 each).
_SM_COUNT = {"H100 80GB HBM3": 132, "H100 SXM": 132, "H100 PCIe": 114, "H100 NVL": 132, "H200": 132, "H20": 78,
             "B200": 148, "A100": 108, "L40S": 142, "GB200": 152}
_CAPABILITY = {"H100": "9.0", "H200": "9.0", "H20": "9.0", "GH200": "9.0", "B200": "10.0", "GB200": "10.0",
               "B300": "10.3", "A100": "8.0", "A10G": "8.6", "L40S": "8.9", "L4": "8.9"}
_PARALLEL = {"tp_rank": r"tp[_-]?(\d+)", "pp_rank": r"pp[_-]?(\d+)", "dp_rank": r"dp[_-]?(\d+)",
             "ep_rank": r"ep[_-]?(\d+)"}
_RANK = re.compile(r"(?:^|[^a-z])rank[_-]?(\d{1,6})(?!\d)", re.IGNORECASE)


def parallel_ranks(path: str) -> dict:
    """``rank`` and ``tp_rank``/``pp_rank``/``dp_rank``/``ep_rank`` a file or folder name states (the last path
    part that states one wins; missing ones are absent)."""
    found: dict = {}
    for part in str(path).replace("\\", "/").split("/"):
        name = part.lower()
        if m := _RANK.search(name):
            found["rank"] = int(m.group(1))
        for column, pattern in _PARALLEL.items():
            if m := re.search(rf"(?:^|[^a-z]){pattern}(?!\d)", name):
                found[column] = int(m.group(1))
    if "rank" not in found and "tp_rank" in found:
        found["rank"] = found["tp_rank"]
    return found


def gpu_facts(name) -> dict:
    """SM count and compute capability of a GPU name, where its name says (else absent)."""
    if not isinstance(name, str) or not name:
        return {}
    short = name.removeprefix("NVIDIA ").strip()
    facts = {}
    for key in sorted(_SM_COUNT, key=len, reverse=True):
        if short.startswith(key):
            facts["sm_count"] = _SM_COUNT[key]
            break
    for key in sorted(_CAPABILITY, key=len, reverse=True):
        if short.startswith(key):
            facts["compute_capability"] = _CAPABILITY[key]
            break
    return facts


def keyed_runs(runs: pd.DataFrame, envs: dict[str, dict]) -> pd.DataFrame:
    """``runs`` with the key columns (:data:`KEY_COLUMNS`) filled where the run, its path or ``envs`` state them.

    Args:
        runs: a Tables' runs (``path`` where the reader knows the file).
        envs: environment by folder (``provenance.json``'s ``env``), keyed by the folder's path.
    """
    out = runs.copy()
    for column in KEY_COLUMNS:
        if column not in out.columns:
            out[column] = pd.NA
    filled = []
    for i, row in zip(out.index, out.to_dict("records")):
        row = {k: (None if _missing(v) else v) for k, v in row.items()}
        facts, source = {}, "run"
        path = row.get("path")
        if isinstance(path, str) and path:
            env = envs.get(path.rpartition("/")[0])
            if env and row.get("gpu") is None and row.get("source_kind") == "log":
                facts.update({k: env.get(k) for k in ("gpu", "flashinfer", "cuda", "host", "driver", "torch",
                                                      "cudnn", "cublas")})
                source = "provenance.json"
            facts.update(parallel_ranks(path))
        sm = row.get("sm")
        if isinstance(sm, str) and sm.isdigit():
            facts["compute_capability"] = f"{sm[:-1]}.{sm[-1]}"
        facts = {**gpu_facts(facts.get("gpu") or row.get("gpu")), **facts}
        if row.get("pid") is not None:
            facts["process"] = f"{row.get('host') or facts.get('host') or '?'}:{row['pid']}"
        # What the run states wins over what its path or a neighbour says.
        filled.append((i, {k: v for k, v in facts.items() if v is not None and row.get(k) is None}, source))
    for i, facts, source in filled:
        for key, value in facts.items():
            out.at[i, key] = value
        out.at[i, "env_from"] = source if not _missing(out.at[i, "gpu"]) else pd.NA
    for column, dtype in KEY_COLUMNS.items():
        values = pd.to_numeric(out[column], errors="coerce") if dtype == "Int64" else out[column]
        out[column] = values.astype(dtype)
    return out


def _missing(value) -> bool:
    return value is None or (not isinstance(value, (str, bytes, list, tuple, dict)) and bool(pd.isna(value)))


def id_rows(rows: pd.DataFrame) -> list[tuple[str, str, set]]:
    """(folder, its GPU, its run ids) per folder of ``rows`` (``folder``, ``run_id``, ``gpu``), in row order; a
    folder's GPU is the first one its rows state ("?" where none)."""
    out = []
    for folder, group in rows.groupby("folder", sort=False):
        gpus = group["gpu"].dropna().astype(str)
        out.append((str(folder), gpus.iloc[0] if len(gpus) else "?", set(group["run_id"].dropna().astype(str))))
    return out


def renames_of(folders: list[tuple[str, str, set]]) -> dict[str, dict[str, str]]:
    """Per folder, {run id as written: run id in the catalogue} for run ids an earlier folder holds.

    A run id seen before gets ``@<GPU>`` when the earlier run was on another GPU (a sweep rerun on a second GPU
    keeps its names), ``@<folder>`` on the same GPU. The GPU with the most folders keeps its ids.
    """
    counts = Counter(gpu for _, gpu, _ in folders)
    seen: dict[str, str] = {}  # run id -> the GPU of the run that has it
    out = {}
    for path, gpu, ids in sorted(folders, key=lambda f: (-counts[f[1]], f[1], f[0])):
        renamed = {i: f"{i}@{gpu.removeprefix('NVIDIA ').split()[0] if seen[i] != gpu else Path(path).parent.name}"
                   for i in ids if i in seen}
        seen.update({renamed.get(i, i): gpu for i in ids})
        if renamed:
            out[path] = renamed
    return out
