"""``profkit port``: carry a tuning made on one GPU to this one, at a fraction of tuning here."""

from __future__ import annotations

import sys
from pathlib import Path

from profkit.cli._paths import need_file, need_out_dir
from profkit.errors import ProfkitError
from profkit.printable import printable

NAME = "port"
HELP = "re-time another GPU's shortlist here and write this GPU's cache file (GPU); --blind: copy its picks as they are"
EXAMPLES = """examples:
  profkit port data/h200-moe/qwen3-30b-a3b-r0/capture --out runs/qwen-on-h100     # on the target GPU
  # then: with flashinfer.autotune(False, cache="runs/qwen-on-h100/cache.json"): model(x)
  profkit port data/h200-moe/qwen3-30b-a3b-r0/capture --blind --like my-h100/cache.json --out blind/
"""


def add_arguments(p) -> None:
    p.add_argument("capture", type=Path, help="the capture tuned on the other GPU (profkit capture --out)")
    p.add_argument("--cache", type=Path, help="its FlashInfer cache file (default: cache.json beside the capture)")
    p.add_argument("--top-k", type=int, default=3, help="the source tuner's fastest candidates per bucket to re-time")
    p.add_argument("--replays", type=int, default=30, help="CUDA graph replays per candidate")
    p.add_argument("--blind", action="store_true",
                   help="time nothing: write the source's picks as they are under this GPU's _metadata (or --like's), "
                        "to measure what a blind copy costs")
    p.add_argument("--like", type=Path, help="--blind: take _metadata from this cache file of the target GPU")
    p.add_argument("--out", type=Path, required=True, help="a new folder: cache.json, port.json and the timings")


def run(args) -> int:
    if not args.capture.is_dir():
        raise ProfkitError(f"{args.capture}: not a capture directory; give the capture tuned on the other GPU")
    cache = args.cache or args.capture.parent / "cache.json"
    need_file(cache, "--cache", "the capture's FlashInfer cache file")
    if args.like is not None:
        need_file(args.like, "--like", "a FlashInfer cache file written on the target GPU")
    need_out_dir(args.out)
    if args.blind:
        from profkit.bench.port import blind

        print(printable(blind(cache, args.out / "cache.json", like=args.like)))
        return 0
    from profkit.bench.graphs import no_cuda

    if no_cuda("profkit port"):
        return 2
    from profkit.bench.port import port

    doc = port(args.capture, cache=cache, out=args.out, top_k=args.top_k, replays=args.replays,
               log=lambda line: print(line, file=sys.stderr, flush=True))
    tuned, source, target = doc["source_tuning_s"], printable(doc["source_gpu"]), printable(doc["target_gpu"])
    price = f"; the tuning on {source} took {tuned:.1f} s ({doc['port_s'] / tuned:.2f}x)" if tuned else ""
    # the GPU names come from the capture's machine: data, never terminal controls
    print(f"profkit port: {doc['buckets']} buckets of {source}'s tuning re-timed on {target} in "
          f"{doc['port_s']:.1f} s ({doc['timed']} timings; its pick kept in {doc['kept_source_pick']}){price}",
          file=sys.stderr)
    print(printable(args.out / "cache.json"))
    return 0


if __name__ == "__main__":  # python -m profkit.cli.port: the device scripts run it alone
    from profkit.cli import main

    raise SystemExit(main(["port", *sys.argv[1:]]))
