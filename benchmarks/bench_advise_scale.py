"""Time profkit advise (and the report built on it) as captures grow: 25 ops beside hundreds.

    .venv/bin/python benchmarks/bench_advise_scale.py [--report [--report-timeout S]] [--cases "25 ops" "50 processes"]

Each case copies a real H200 capture (``data/h200/step/llama3-8b-fp8/capture``: fp8_gemm, 4
shapes x 20 buckets, 1,631 candidates) under new op names and run ids, as captures of many ops
or many processes look:

- ``25 ops``: one process that tuned 25 ops;
- ``263 ops``: one process that tuned 263 ops (where advise took 55 s before it planned from
  op x bucket matrices);
- ``50 processes``: 50 processes (``profkit capture --out`` folders, one per pid) of 5 ops
  each, 250 ops in all: the capture whose report ran past 300 s.

Per case it prints, side by side: ``advise`` (one plan), ``budget_frontier`` (the five other
budgets, reusing the plan's costs and gains), the ``profkit advise`` command end to end (load,
plan, write the five files), the report's advise section (plan, budgets, its figure drawn
as PNG, its tables as Markdown: what ``profkit report`` spends on advise) and the comparisons the
report runs on every capture (``winner_stability`` priced on the candidates, ``rank_divergence``;
``winner_stability`` once took 4 ms per bucket: 75 s for the 50-process capture). ``--report``
adds ``profkit report`` of a folder holding the capture, every section (figures as PNG), run as
its own process (interpreter start included) and stopped after ``--report-timeout`` seconds (then
shown as ``>S``), which also times the report's other sections, and a last line with the report's
seconds for the 25-op case beside the 50-process case. Seconds, wall clock, one run each.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import pandas as pd

import profkit
from profkit import schema
from profkit.analysis import rank_divergence, winner_stability, winners
from profkit.analysis.advise import advise, budget_frontier
from profkit.cli import main

ROOT = Path(__file__).resolve().parents[1]
BASE = ROOT / "data" / "h200" / "step" / "llama3-8b-fp8" / "capture"


CASES = {"25 ops": {"processes": 1, "ops": 25}, "263 ops": {"processes": 1, "ops": 263},
         "50 processes": {"processes": 50, "ops": 5}}


def copies(base: schema.Tables, *, processes: int, ops: int) -> list[schema.Tables]:
    """``processes`` captures of ``ops`` ops each (every op a renamed copy of the base capture's)."""
    out = []
    for p in range(processes):
        parts = []
        for o in range(ops):
            op = f"gemm_p{p:02d}_o{o:03d}"
            frames = {t: getattr(base, t).assign(op=op) for t in ("candidates", "winners", "tuning")}
            parts.append(schema.Tables(**frames, runs=base.runs.iloc[:0]))
        stacked = schema.concat(parts)
        run = f"{base.runs['run_id'].iloc[0]}-p{p:02d}"
        frames = {t: getattr(stacked, t).assign(run_id=run) for t in ("candidates", "winners", "tuning")}
        out.append(schema.Tables(**frames, runs=base.runs.assign(run_id=run, pid=1000 + p)))
    return out


def timed(fn) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def report_section(tables: schema.Tables) -> None:
    """The report's advise section as ``profkit report`` builds it: plan, budgets, figures, tables."""
    from types import SimpleNamespace

    from profkit import report

    plan = advise(tables)  # what the report's Results hold; report.plan_section lays it out
    results = SimpleNamespace(plan=plan, plan_error="", frontier=budget_frontier(plan))
    section = report.plan_section(SimpleNamespace(results=results))
    for spec in section.figures:
        spec.draw().savefig(io.BytesIO(), format="png", dpi=200)
    for table in section.tables:
        report.markdown_table(table)


def report_seconds(folder: Path, out: Path, timeout: float) -> float | str:
    """Seconds of ``profkit report folder`` in a process of its own; ">timeout" when stopped, "exit N" on failure."""
    command = [sys.executable, "-m", "profkit", "report", str(folder), "--out", str(out), "--formats", "png",
               "--no-progress"]
    started = time.perf_counter()
    try:
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return f">{timeout:,.0f}"
    seconds = time.perf_counter() - started
    if done.returncode:
        print(f"profkit report {folder.name} exited {done.returncode}: {done.stderr.strip().splitlines()[-1:]}")
        return f"exit {done.returncode}"
    return seconds


def measure(name: str, parts: list[schema.Tables], work: Path, report: float | None) -> dict:
    folder = work / name.replace(" ", "_") / "capture"
    for i, part in enumerate(parts):
        part.save(folder / f"host-pid{1000 + i}" if len(parts) > 1 else folder)
    tables = schema.concat(parts)
    row = {"case": name, "ops": tables.candidates["op"].nunique(), "processes": len(parts),
           "candidates": len(tables.candidates)}
    plan = None

    def plan_once():
        nonlocal plan
        plan = advise(tables)

    row["advise_s"] = timed(plan_once)
    row["frontier_s"] = timed(lambda: budget_frontier(plan))
    row["report_section_s"] = timed(lambda: report_section(tables))
    decided = winners(tables.candidates)
    row["stability_s"] = timed(lambda: winner_stability(decided, candidates=tables.candidates))
    row["ranks_s"] = timed(lambda: rank_divergence(tables.candidates))
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        row["advise_cmd_s"] = timed(lambda: main(["advise", str(folder), "--out", str(work / f"{name}-plan")]))
    if report is not None:
        row["report_cmd_s"] = report_seconds(folder.parent, work / f"{name}-report", report)
    return row


def _seconds(value: float | str) -> str:
    return f"{value:,.1f} s" if isinstance(value, float) else f"{value} s"


def main_(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--report", action="store_true",
                        help="also time `profkit report` of each case (all sections, not only advise's)")
    parser.add_argument("--report-timeout", type=float, default=600.0, metavar="S",
                        help="stop a case's report after S seconds (default 600)")
    parser.add_argument("--cases", nargs="+", choices=list(CASES), default=list(CASES), metavar="CASE",
                        help=f"cases to time (default all: {', '.join(map(repr, CASES))})")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    base = profkit.load(BASE)
    cases = {name: copies(base, **CASES[name]) for name in CASES if name in args.cases}
    with tempfile.TemporaryDirectory() as tmp:
        rows = [measure(name, parts, Path(tmp), args.report_timeout if args.report else None)
                for name, parts in cases.items()]
    shown = [{k: (f"{v:,.2f}" if isinstance(v, float) else f"{v:,}" if isinstance(v, int) else v)
              for k, v in row.items()} for row in rows]
    print(pd.DataFrame(shown).set_index("case").T.to_string())
    print("seconds, wall clock, one run each; advise_cmd_s = `profkit advise` (load, plan once, write the files); "
          "stability_s, ranks_s = winner_stability (priced), rank_divergence of the case's winners")
    seconds = {row["case"]: row.get("report_cmd_s") for row in rows}
    if args.report and {"25 ops", "50 processes"} <= seconds.keys():
        small, large = seconds["25 ops"], seconds["50 processes"]
        measured = all(isinstance(v, float) for v in (small, large))
        ratio = f" ({large / small:,.1f}x the 25-op report)" if measured else ""
        print(f"profkit report: {_seconds(small)} for 25 ops (1 process), {_seconds(large)} for 50 processes x 5 ops"
              + ratio)
    return 0


if __name__ == "__main__":
    raise SystemExit(main_())
