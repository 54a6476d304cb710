"""``profkit verify``: re-time the tuner's picks the way engines run them (CUDA graphs, GPU)."""

from __future__ import annotations

import sys
from pathlib import Path

from profkit.cli._paths import need_file, need_out_dir
from profkit.errors import ProfkitError

NAME = "verify"
HELP = "re-time the tuner's top candidates, winner and default in CUDA graphs at every bucket and M (GPU)"
EXAMPLES = """examples:
  profkit verify data/h200/fp8 --out runs/verify/fp8          # every capture under the folder
  profkit verify runs/mine/capture --cache runs/mine/cache.json --top-k 3
  profkit verify data/h200-moe/qwen3-30b-a3b-r0/capture --routings tuner,zipf-0.3   # an MoE capture
"""


def add_arguments(p) -> None:
    p.add_argument("captures", nargs="+", help="capture directories (or folders holding them)")
    p.add_argument("--cache", type=Path, help="FlashInfer cache file of the captures (default: cache.json beside each)")
    p.add_argument("--top-k", type=int, default=5, help="the tuner's fastest candidates per bucket to re-time")
    p.add_argument("--replays", type=int, default=30, help="CUDA graph replays per candidate")
    p.add_argument("--only-buckets", action="store_true", help="time each bucket's own M only")
    p.add_argument("--routings", default="default",
                   help="MoE captures: 'default' (tuner, balanced, zipf-0.3, hot-(top_k/2)) or comma-separated "
                        "routing names (profkit.bench.routing)")
    p.add_argument("--deadline-s", type=float, default=None, help="start no new capture after this many seconds")
    p.add_argument("--out", type=Path, help="write verify.parquet here (default: beside each capture)")


def run(args) -> int:
    _check_paths(args)
    from profkit.bench.graphs import no_cuda

    if no_cuda("profkit verify"):
        return 2
    from profkit.bench.verify import run as verify

    written = verify(args.captures, out=args.out, cache=args.cache, top_k=args.top_k, replays=args.replays,
                     only_buckets=args.only_buckets, routings=args.routings, deadline_s=args.deadline_s,
                     log=lambda line: print(line, file=sys.stderr, flush=True))
    for path in written:
        print(path)
    return 0 if written else 1


def _check_paths(args) -> None:
    """The paths named on the command line, before anything needs a GPU."""
    for capture in map(Path, args.captures):
        if not capture.exists():
            raise ProfkitError(f"{capture}: no such directory; give a capture directory (profkit.capture(...).save, "
                               "profkit capture --out) or a folder holding them")
        if not capture.is_dir():
            raise ProfkitError(f"{capture}: is a file; give a capture directory (profkit.capture(...).save, "
                               "profkit capture --out) or a folder holding them")
    if args.cache is not None:
        need_file(args.cache, "--cache", "the captures' FlashInfer cache file")
    need_out_dir(args.out)


if __name__ == "__main__":  # python -m profkit.cli.verify: the device scripts run it alone
    from profkit.cli import main

    raise SystemExit(main(["verify", *sys.argv[1:]]))
