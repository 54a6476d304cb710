"""``profkit report``: figures (PNG, SVG), index.md and a self-contained index.html from a data directory."""

from __future__ import annotations

import argparse
import sys

NAME = "report"
HELP = "Write the figures, index.md and a self-contained index.html for a directory of captures."
EXAMPLES = """examples:
  profkit report --out report                       # the shipped H200 data (data/h200)
  profkit report runs/mine --out runs/mine/report   # your own captures (profkit.capture(...).save)
  profkit report --bench on.txt --bench off.txt --out report   # add an autotune on/off serving pair
  profkit report --only tactic_map,speedup --formats png --no-index --out docs/figures   # README figures
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("data", nargs="?", default=None,
                        help="directory of saved captures (default: the shipped data/h200)")
    parser.add_argument("--out", default="report", help="output directory (default: %(default)s)")
    parser.add_argument("--bench", action="append", default=[], metavar="FILE",
                        help="engine result file to join (profkit.read_bench); repeat for a pair, baseline "
                             "(autotune off, main) first; default with no DATA: the shipped SGLang PR #12306 pair")
    parser.add_argument("--only", default=None, metavar="NAMES",
                        help="comma-separated figure names to draw (default: all)")
    parser.add_argument("--formats", default="png,svg", help="figure formats, comma-separated (default: %(default)s)")
    parser.add_argument("--no-index", action="store_true", help="write the figures only, no index.md / index.html")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")


def run(args: argparse.Namespace) -> int:
    from profkit.views import report

    # With no data given, the shipped H200 captures meet the shipped public serving pair.
    bench = args.bench or (report.shipped_bench() if args.data is None else [])
    data = report.collect(args.data, bench=bench)
    only = [n.strip() for n in args.only.split(",") if n.strip()] if args.only else None
    written = report.build_report(data, args.out, formats=[f.strip() for f in args.formats.split(",") if f.strip()],
                                  only=only, index=not args.no_index, progress=not args.no_progress)
    for path in written:
        print(path)
    print(f"profkit report: {len(written)} files in {args.out}", file=sys.stderr)
    return 0
