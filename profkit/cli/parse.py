"""``profkit parse``: FlashInfer debug logs and cache files into profkit tables (parquet), or a summary."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

NAME = "parse"
HELP = "Read FlashInfer autotuner debug logs or cache files into profkit tables."
EXAMPLES = """examples:
  profkit parse server.log                              # summary of what the log holds
  profkit parse rank0.log.gz rank1.log.gz --out parsed  # candidates/winners/tuning/runs/events/report.parquet
  profkit parse ~/.cache/flashinfer/0.7.2.post1/90/flashinfer_jit.log --out parsed
  profkit parse autotune.json --out cache_tables        # a v1 cache JSON (winners, runs)
  profkit parse ~/.cache/flashinfer/autotune --kind cache   # a v2 managed store, or a directory of cache files
"""

_PROGRESS_BYTES = 8 << 20  # show a progress bar for logs larger than this


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("files", nargs="+", metavar="FILE",
                        help="log files (plain or .gz), cache JSON files or cache directories")
    parser.add_argument("--out", default=None, metavar="DIR",
                        help="write parquet tables here (with logs and caches both given: DIR/log and DIR/cache); "
                             "default: print a summary")
    parser.add_argument("--kind", choices=("auto", "log", "cache"), default="auto",
                        help="what the files are; auto: directories and JSON files are caches, the rest logs")
    parser.add_argument("--strict", action="store_true", help="fail at the first unreadable record or entry")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")


def run(args: argparse.Namespace) -> int:
    import profkit

    groups = {"log": [], "cache": []}
    for file in args.files:
        groups[args.kind if args.kind != "auto" else _kind(Path(file))].append(file)
    results = {}
    if groups["log"]:
        with _ProgressBar(groups["log"], disabled=args.no_progress) as update:
            results["log"] = profkit.read_log(groups["log"], strict=args.strict, progress=update)
    if groups["cache"]:
        results["cache"] = profkit.read_cache(groups["cache"], strict=args.strict)
    if args.out is None:
        for kind, tables in results.items():
            print(_summary(kind, tables))
        return 0
    for kind, tables in results.items():
        target = Path(args.out) / kind if len(results) > 1 else Path(args.out)
        tables.save(target)
        print(target)
    return 0


def _kind(path: Path) -> str:
    """cache for directories and JSON objects, log for everything else (gzip included)."""
    if path.is_dir() or path.suffix == ".json":
        return "cache"
    if path.is_file():
        with open(path, "rb") as f:
            if f.read(64).lstrip()[:1] == b"{":
                return "cache"
    return "log"


class _ProgressBar:
    """A tqdm bar over the logs' bytes on stderr when they are large; yields the update callable or None."""

    def __init__(self, files: list[str], *, disabled: bool):
        total = sum(os.path.getsize(f) for f in files if os.path.isfile(f))
        self.bar = None
        if not disabled and total > _PROGRESS_BYTES:
            from tqdm import tqdm

            self.bar = tqdm(total=total, unit="B", unit_scale=True, desc="profkit parse", file=sys.stderr)

    def __enter__(self):
        return self.bar.update if self.bar is not None else None

    def __exit__(self, *exc) -> None:
        if self.bar is not None:
            self.bar.close()


def _summary(kind: str, tables) -> str:
    """Per run: what was read, as a text table."""
    import pandas as pd

    runs = tables.runs.set_index("run_id")
    c, w = tables.candidates, tables.winners
    summary = pd.DataFrame({
        "ops": w.groupby("run_id")["op"].agg(lambda ops: ",".join(sorted(set(ops.dropna())))),
        "candidates": c.groupby("run_id").size(),
        "failed": c[c["status"] != "ok"].groupby("run_id").size(),
        "winners": w.groupby("run_id").size(),
    }).reindex(runs.index).fillna({"candidates": 0, "failed": 0, "winners": 0})
    summary = summary.astype({"candidates": "int64", "failed": "int64", "winners": "int64"})
    text = f"{kind}: {len(runs)} run(s)\n{summary.to_string()}"
    report = getattr(tables, "report", None)
    if report is not None and len(report):
        problems = report[report["status"] == "unreadable"]
        lines = report.groupby("status")["lines"].sum()
        text += "\nlines: " + ", ".join(f"{status} {int(n)}" for status, n in lines.items())
        if len(problems):
            text += "\nunreadable:\n" + problems[["file", "reason", "lines", "first_line"]].to_string(index=False)
    if kind == "cache":
        flagged = w[w["problem"].fillna("") != ""]
        if len(flagged):
            text += f"\n{len(flagged)} entries FlashInfer would not use as stored (see winners.problem)"
    return text
