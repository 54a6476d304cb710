"""A folder of MoE runs (``profkit.bench.moe_sweep`` and ``profkit step`` of MoE models, e.g. data/h200-moe).

Each run folder holds some of: ``capture/`` (profkit tables), ``cache.json`` and ``repaired.json``
(FlashInfer's), ``verify.parquet``, ``step.jsonl``, ``provenance.json`` and FlashInfer's
``debug.log``. :func:`read_moe_runs` reads them all into one :class:`MoeRuns`.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pandas as pd

from profkit import schema
from profkit.errors import ProfkitError

RUN_COLUMNS = {"folder": "string", "run_id": "string", "model": "string", "shape": "string", "note": "string",
               "tune_call_s": "float64", "candidates": "Int64", "winners": "Int64"}


@dataclasses.dataclass(frozen=True)
class MoeRuns:
    """Every run of an MoE folder.

    Attributes:
        tables: the captures, concatenated (run ids are distinct: ``<folder>-<tag>``).
        verify: every ``verify.parquet``, with ``source`` (its file).
        step: every ``step.jsonl`` as bench rows (``series`` names each timed series).
        runs: one row per folder with a ``provenance.json`` or a capture (:data:`RUN_COLUMNS`, plus
            ``verify_<routing>_s`` per verified routing), sorted by folder.
    """

    tables: schema.Tables
    verify: pd.DataFrame
    step: pd.DataFrame
    runs: pd.DataFrame

    def model_of(self, run_id: str) -> str | None:
        """The model a capture run tuned."""
        hit = self.runs[self.runs["run_id"] == run_id]["model"].dropna()
        return str(hit.iloc[0]) if len(hit) else None


def read_moe_runs(path) -> MoeRuns:
    """Read every run folder under ``path`` (see the module docstring)."""
    from profkit.sources.engines import read_bench
    from profkit.sources.verify import read_verify

    root = Path(path)
    if not root.is_dir():
        raise ProfkitError(f"{root}: not a folder of MoE runs")
    folders = sorted({p.parent for p in root.rglob("provenance.json")} | {p.parent for p in root.rglob("capture")
                                                                         if p.is_dir()})
    provenance = {f: json.loads((f / "provenance.json").read_text()) for f in folders
                  if (f / "provenance.json").is_file()}
    captures = {f: schema.load(f / "capture") for f in folders if (f / "capture").is_dir()}
    steps = [read_bench(f) for f in sorted(root.rglob("step.jsonl"))]
    verify = read_verify(root) if any(root.rglob("verify.parquet")) else pd.DataFrame()
    return assemble_moe_runs(root, provenance, captures, steps, verify)


def assemble_moe_runs(root: Path, provenance: dict, captures: dict, steps: list, verify: pd.DataFrame) -> MoeRuns:
    """A :class:`MoeRuns` from what was read of the run folders under ``root``: their provenance documents and
    captures by folder (None where a folder has none), their step rows (``source`` = the step.jsonl) and
    verify rows."""
    rows = []
    for folder in sorted(set(provenance) | set(captures)):
        row = {"folder": str(Path(folder).relative_to(root))}
        prov = provenance.get(folder)
        if isinstance(prov, dict):
            row.update({k: prov.get(k) for k in ("run_id", "model", "shape", "note", "tune_call_s", "candidates",
                                                 "winners")})
            row.update({f"verify_{name}_s": s for name, s in (prov.get("verify_s") or {}).items()})
        tables = captures.get(folder)
        if tables is not None and len(tables.runs):  # the capture's id: the catalogue's, where it renamed the run
            row["run_id"] = str(tables.runs["run_id"].iloc[0])
        elif tables is not None:
            row.setdefault("run_id", str(tables.winners["run_id"].iloc[0]) if len(tables.winners) else None)
        rows.append(row)
    step = pd.concat(steps, ignore_index=True) if steps else pd.DataFrame()
    runs = pd.DataFrame(rows)
    if len(step) and len(runs):  # a step folder's capture is its tuning pass: model and seconds are the step's
        for i, folder in enumerate(runs["folder"]):
            mine = step[step["source"].astype(str).str.contains(f"/{folder}/", regex=False)]
            if len(mine) and ("model" not in runs or pd.isna(runs.at[i, "model"])):
                runs.loc[i, "model"] = mine["model"].dropna().iloc[0]
                runs.loc[i, "tune_call_s"] = mine["tuning_s"].dropna().iloc[0] if mine["tuning_s"].notna().any() \
                    else None
    extra = [c for c in runs.columns if c not in RUN_COLUMNS]
    runs = schema.conform_columns(runs, {**RUN_COLUMNS, **{c: "float64" for c in extra}}) if len(runs) else runs
    parts = [captures[f] for f in sorted(captures)]
    return MoeRuns(tables=schema.concat(parts) if parts else schema.Tables.empty(), verify=verify, step=step, runs=runs)
