"""``profkit repair``: a FlashInfer cache file with the serving-verified best pick per bucket."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from profkit.cli._paths import need_file
from profkit.errors import ProfkitError

NAME = "repair"
HELP = "write a FlashInfer cache file holding, per bucket, the serving-verified best (or the default)"
EXAMPLES = """examples:
  profkit repair runs/verify/fp8/*/verify.parquet --like data/h200/fp8/fp8_gemm-llama3-8b-o/cache.json --out repaired.json
  # then: with flashinfer.autotune(False, cache="repaired.json"): model(x)
"""


def add_arguments(p) -> None:
    p.add_argument("verify", nargs="+", type=Path, help="verify.parquet files, or folders holding them (profkit verify)")
    p.add_argument("--like", type=Path, action="append", default=[],
                   help="the capture's FlashInfer cache file: _metadata and measurement policies are taken "
                        "from it (default: the running FlashInfer's metadata)")
    p.add_argument("--routing", default=None,
                   help="MoE verify tables: the routing whose timings choose the picks (default: tuner)")
    p.add_argument("--prefer", choices=("fastest",), default=None,
                   help="when verify tables of several runs pick differently for one cache key: keep the pick "
                        "with the lowest serving median (default: refuse, naming the key)")
    p.add_argument("--out", type=Path, required=True, help="the cache file to write (never one of the inputs)")


def run(args) -> int:
    from profkit.analysis.verify import repair_picks
    from profkit.outputs import atomic
    from profkit.outputs.flashinfer_cache import cache_file, usable_timings, write_cache_file
    from profkit.sources.cache import read_cache_document
    from profkit.sources.verify import read_verify

    for path in args.like:
        need_file(path, "--like", "the capture's FlashInfer cache file (cache.json)")
    inputs = [*args.verify, *args.like]
    atomic.refuse_inputs([args.out], inputs)
    _refuse_shipped(args.out)
    verify, set_aside = usable_timings(read_verify(*args.verify))
    for reason in set_aside:
        print(f"profkit repair: set aside {reason}: they choose no pick", file=sys.stderr)
    picks = repair_picks(verify, routing=args.routing)
    like: dict = {}
    for path in args.like:
        like.update(read_cache_document(path))
    metadata = like.pop("_metadata", None) or _running_metadata()
    content = cache_file(picks, metadata=metadata, like=like, prefer=args.prefer)
    write_cache_file(args.out, content, inputs=inputs)
    kept = int((picks["runner"] == picks["tuner_runner"]).sum() if len(picks) else 0)
    to_default = int(picks["reason"].str.startswith("nothing").sum()) if len(picks) else 0
    print(f"profkit repair: {len(content) - 1} buckets ({to_default} back to the default, "
          f"{len(picks) - to_default} serving-best; tuner's runner kept in {kept}) -> {args.out}", file=sys.stderr)
    print(args.out)
    return 0


def _refuse_shipped(out: Path) -> None:
    """An existing file of the shipped data (the repository's ``data/``, read by the docs and tests) is never replaced."""
    from profkit.catalog import shipped_root

    shipped, folder = shipped_root().resolve(), out.absolute().parent.resolve()
    if os.path.lexists(out) and (folder == shipped or shipped in folder.parents):
        raise ProfkitError(f"--out {out}: is a shipped data file (under {shipped}); profkit never replaces shipped "
                           "data: choose another --out")


def _running_metadata() -> dict:
    from flashinfer.autotuner.autotuner import _collect_metadata

    return _collect_metadata()


if __name__ == "__main__":  # python -m profkit.cli.repair: the device scripts run it alone, through main's boundary
    from profkit.cli import main

    raise SystemExit(main(["repair", *sys.argv[1:]]))
