"""``profkit parse``: FlashInfer debug logs, cache files and engine outputs into tables (parquet), or a summary."""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from pathlib import Path

from profkit.cli._paths import need_out_dir
from profkit.errors import ProfkitError
from profkit.printable import printable

NAME = "parse"
HELP = "read FlashInfer autotuner debug logs, cache files or engine benchmark outputs into profkit tables"
EXAMPLES = """examples:
  profkit parse server.log                              # summary of what the log holds
  profkit parse rank0.log.gz rank1.log.gz --out parsed  # candidates/winners/tuning/runs/events/report.parquet
  profkit parse ~/.cache/flashinfer/0.7.2.post1/90/flashinfer_jit.log --out parsed
  profkit parse autotune.json --out cache_tables        # a v1 cache JSON (winners, runs)
  profkit parse ~/.cache/flashinfer/autotune --kind cache   # a v2 managed store, or a directory of cache files
  profkit parse bench_on.txt bench_off.txt result.json  # SGLang/vLLM/lm-eval results (profkit.read_bench): a summary
  profkit parse bench_on.txt --out parsed               # parsed/bench.parquet
  profkit parse server.log bench_on.txt --out parsed    # parsed/log/*.parquet and parsed/bench/bench.parquet
  profkit parse console.log --kind bench                # engine results from a log that also holds FlashInfer lines
"""

_PROGRESS_BYTES = 8 << 20  # show a progress bar for logs larger than this
# The bench summary: serving rows, and lm-eval rows (one per task and metric).
_SERVING_COLUMNS = ["engine", "format", "label", "model", "request_rate", "max_concurrency", "output_tok_s",
                    "mean_ttft_ms", "mean_itl_ms"]
_EVAL_COLUMNS = ["engine", "format", "label", "model", "task", "metric", "value"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("files", nargs="+", metavar="FILE",
                        help="log files (plain or .gz), cache JSON files or cache directories, engine benchmark "
                             "outputs (SGLang, vLLM, lm-eval)")
    parser.add_argument("--out", default=None, metavar="DIR",
                        help="write parquet tables here (with several kinds given: DIR/log, DIR/cache, DIR/bench); "
                             "default: print a summary")
    parser.add_argument("--kind", choices=("auto", "log", "cache", "bench"), default="auto",
                        help="what the files are; auto: files with FlashInfer log lines in their first MiB are logs, "
                             "files profkit.read_bench finds engine results in are bench, directories and other "
                             "JSON files are caches, the rest logs")
    parser.add_argument("--strict", action="store_true",
                        help="fail at the first unreadable record, entry or file, and when a file given yields "
                             "nothing (e.g. a file that is no log beside a log)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")


def run(args: argparse.Namespace) -> int:
    import profkit

    _check_paths(args.files, args.out)
    groups = {"log": [], "cache": [], "bench": []}
    for file in args.files:
        groups[args.kind if args.kind != "auto" else _kind(Path(file))].append(file)
    results = {}
    if groups["log"]:
        with _ProgressBar(groups["log"], disabled=args.no_progress) as update:
            results["log"] = profkit.read_log(groups["log"], strict=args.strict, progress=update)
    if groups["cache"]:
        results["cache"] = profkit.read_cache(groups["cache"], strict=args.strict)
    if groups["bench"]:
        results["bench"] = profkit.read_bench(groups["bench"], strict=args.strict)
    unread = [line for kind, result in results.items() for line in _unread(kind, groups[kind], result)]
    for line in unread:
        print(f"profkit parse: {printable(line)}", file=sys.stderr)
    if unread and args.strict:
        return 1
    if args.out is None:
        for kind, result in results.items():  # names are data: their escape sequences and bidi marks shown
            print(printable(_bench_summary(result) if kind == "bench" else _summary(kind, result), newlines=True))
        return 0
    for kind, result in results.items():
        target = Path(args.out) / kind if len(results) > 1 else Path(args.out)
        print(_save_bench(result, target) if kind == "bench" else result.save(target))
    return 0


def _check_paths(files: list[str], out: str | None) -> None:
    """The paths named on the command line, before any reading: a mistyped name fails here, not as a skipped file."""
    missing = [file for file in files if not os.path.lexists(file)]
    if missing:
        raise ProfkitError(f"{', '.join(missing)}: no such file or directory; give FlashInfer debug logs, cache "
                           "files (or directories of them) or engine benchmark outputs")
    need_out_dir(out, "a directory for the tables")


def _kind(path: Path) -> str:
    """bench for engine outputs read_bench finds results in, cache for cache files, v2 stores and other
    directories and JSON files, log for everything else (gzip included); by profkit's one sniffer."""
    from profkit.catalog.sniff import kind_of_head, read_head

    if path.is_dir():
        return "cache"
    head = read_head(path)
    kind = kind_of_head(head, path.suffix) if head is not None else "log"  # the log reader names what is wrong
    if kind == "bench" and _has_bench_results(path):
        return "bench"
    if kind == "cache" or path.suffix == ".json":
        return "cache"
    return "log"


def _unread(kind: str, files: list[str], result) -> list[str]:
    """One line per file given that yielded nothing (e.g. a text file that is no log beside a log), and per
    cache the reader could not use."""
    if kind == "bench":
        read = set(result["source"].astype(str))
    else:
        read = set(result.runs["path"].dropna().astype(str))
    lines = [f"{file}: nothing read (no {_WHAT[kind]} found in it)" for file in files
             if os.fspath(file) not in read and not os.path.isdir(file)]
    if kind == "cache":
        problems = result.runs[result.runs["problem"].fillna("") != ""]
        lines += [f"{path}: {problem}" for path, problem in zip(problems["path"], problems["problem"])]
    return lines


_WHAT = {"log": "FlashInfer autotuner record", "cache": "FlashInfer cache entry", "bench": "engine result"}


def _has_bench_results(path: Path) -> bool:
    """Whether read_bench's own auto-detection finds an engine result in the file.

    Logs are large and read_bench reads a whole file, so files whose first MiB shows FlashInfer log
    lines are not asked (see _kind).
    """
    from profkit import read_bench
    from profkit.errors import ProfkitError

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # read_bench warns again when the file is read for real
        try:
            read_bench(path)
        except ProfkitError:
            return False
    return True


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


def _bench_summary(bench) -> str:
    """Per source file: its serving rows and its lm-eval rows, as text tables."""
    parts = [f"bench: {len(bench)} row(s)"]
    for source, rows in bench.groupby("source", sort=False):
        parts.append(str(source))
        evals = rows["engine"] == "lm-eval"
        for chosen, columns in ((~evals, _SERVING_COLUMNS), (evals, _EVAL_COLUMNS)):
            if chosen.any():
                parts.append(rows.loc[chosen, columns].to_string(index=False))
    return "\n".join(parts)


def _save_bench(bench, directory: Path) -> Path:
    """Write ``directory/bench.parquet`` atomically; return its path."""
    from profkit.schema import write_parquet

    directory.mkdir(parents=True, exist_ok=True)
    return write_parquet(bench, directory / "bench.parquet")
