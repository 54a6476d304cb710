"""``profkit report``: the verdicts, figures (PNG, SVG), tables (CSV), summary.json and self-contained pages from a
data directory, a capture, a FlashInfer debug log or a cache file."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from profkit.cli._paths import need_file, need_out_dir
from profkit.errors import ProfkitError

NAME = "report"
HELP = ("write the verdicts (summary.json), figures, tables and self-contained pages for a directory of captures, "
        "a capture, a FlashInfer debug log or a cache file")
EXAMPLES = """examples:
  profkit report --out report                       # the shipped data (data/: H200 and H100) and serving pair
  profkit report runs/mine --out runs/mine/report   # your own captures (profkit.capture(...).save)
  profkit report runs/on --bench off.txt --bench on.txt --out report   # add an autotune off/on serving pair
  profkit report server.log --out report              # straight from a FlashInfer debug log (or a cache .json)
  profkit report --style doc --formats png,svg --out doc-figures   # for a design doc: larger type, no run ids
  profkit report --only tactic_map,speedup --formats png --no-index --out docs/figures   # README figures
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("data", nargs="*", default=[],
                        help="directories of saved captures, FlashInfer debug logs, cache files or v2 stores, or such "
                             "files, one or many (default: the shipped data/, with its verify and advise results)")
    parser.add_argument("--out", default="report", help="output directory (default: %(default)s)")
    parser.add_argument("--bench", action="append", default=[], metavar="FILE",
                        help="engine result file to join (profkit.read_bench); repeat for a pair, baseline "
                             "(autotune off, main) first; default for the shipped data: the shipped SGLang PR "
                             "#12306 pair")
    parser.add_argument("--only", default=None, metavar="NAMES",
                        help="comma-separated figure names to draw (default: all)")
    parser.add_argument("--formats", default="png", help="figure formats, comma-separated: png, svg, pdf "
                                                         "(default: %(default)s)")
    parser.add_argument("--no-index", action="store_true", help="write the figures only, no pages or tables")
    parser.add_argument("--style", choices=("screen", "doc"), default="screen",
                        help="figure style: screen (default) or doc (design documents: larger type, no run ids)")
    parser.add_argument("--gpu", default=None, metavar="NAME",
                        help="with runs of several GPUs: the GPU whose figures and detail pages to lay out (default: "
                             "the one with the most runs; the first screen shows every GPU's verdicts)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")


_ACCEPTS = ("profkit report reads a directory of saved captures (Tables.save, profkit capture --out, "
            "profkit parse ... --out), a directory of FlashInfer debug logs or cache files, or one such file")


def _check_paths(root: Path, out: Path, bench: list[str]) -> None:
    """The paths named on the command line, before any reading (what a file holds, the reader says)."""
    if not root.exists():
        raise ProfkitError(f"{root}: no such file or directory; {_ACCEPTS}")
    need_out_dir(out, "a directory for the report")
    for file in bench:
        need_file(file, "--bench", "an engine result file (SGLang, vLLM, lm-eval)")


def run(args: argparse.Namespace) -> int:
    for path in args.data or ["."]:
        _check_paths(Path(path), Path(args.out), args.bench)
    from profkit import catalog, report

    shipped = catalog.shipped_root().resolve()
    roots = [Path(p) for p in args.data] or [shipped]
    # The shipped H200 captures meet the shipped public serving pair unless a pair is given.
    inside = all(r.resolve() == shipped or shipped in r.resolve().parents for r in roots)
    bench = args.bench or (catalog.shipped_bench() if inside else [])
    data = catalog.open(roots, bench=bench)
    only = [n.strip() for n in args.only.split(",") if n.strip()] if args.only else None
    written = report.build_report(data, args.out, formats=[f.strip() for f in args.formats.split(",") if f.strip()],
                                  only=only, index=not args.no_index, progress=not args.no_progress,
                                  style=args.style, gpu=args.gpu)
    figures = sum(p.suffix in (".png", ".svg", ".pdf") for p in written)
    tables = sum(p.suffix == ".csv" for p in written)
    print(f"profkit report: {figures} figure files and {tables} tables in {args.out}", file=sys.stderr)
    if args.no_index:
        for path in written:
            print(path)
    else:
        print(Path(args.out) / "index.html")
    return 0
