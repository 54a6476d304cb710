"""How fast the ``profkit`` command answers, side by side with ``python -c "import argparse"``.

``profkit --help``, each subcommand's ``--help`` and two argument errors (a missing path, found
before anything heavy is imported) are started in alternating rounds with the bare interpreter
importing argparse; medians are printed with their ratio to it. The target (issue 26) is at most
5x. The command is started the way the ``profkit`` console script starts it, from this checkout.
Run: ``python benchmarks/bench_cli_startup.py`` (``--rounds N``; ``--baseline DIR`` also starts another
checkout's ``profkit --help``, ``report --help`` and ``verify /missing`` in the same rounds, from DIR).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from profkit.cli import SUBCOMMANDS

ROOT = Path(__file__).resolve().parents[1]

ENTRY = "import sys; from profkit.cli import main; sys.exit(main())"  # what the console script runs
TARGET = 5.0


def commands(baseline: Path | None) -> dict[str, tuple[list[str], Path]]:
    """Label -> (argv, the checkout it starts from), python's own start first."""
    entry = [sys.executable, "-c", ENTRY]
    out = {'python -c "import argparse"': ([sys.executable, "-c", "import argparse"], ROOT),
           "profkit --help": ([*entry, "--help"], ROOT)}
    for name in SUBCOMMANDS:
        out[f"profkit {name} --help"] = ([*entry, name, "--help"], ROOT)
    out["profkit verify /missing"] = ([*entry, "verify", "/missing/capture"], ROOT)
    out["profkit parse /missing.log"] = ([*entry, "parse", "/missing/server.log"], ROOT)
    if baseline:
        for args in (["--help"], ["report", "--help"], ["verify", "/missing/capture"]):
            out[f"baseline: profkit {' '.join(args)}"] = ([*entry, *args], baseline)
    return out


def seconds(argv: list[str], checkout: Path, env: dict) -> float:
    """Wall time of one start; ``python -c`` puts its folder first on sys.path, so ``checkout``'s profkit runs."""
    start = time.perf_counter()
    subprocess.run(argv, cwd=checkout, env={**env, "PYTHONPATH": str(checkout)},
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--baseline", type=Path, help="another checkout of profkit, e.g. a git worktree")
    args = parser.parse_args()
    rounds = args.rounds
    # Byte-code caching on, as on a normal install.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    runs = commands(args.baseline.resolve() if args.baseline else None)
    for argv, checkout in runs.values():
        seconds(argv, checkout, env)  # warm the file cache and write the byte code
    times: dict[str, list[float]] = {label: [] for label in runs}
    for _ in range(rounds):
        for label, (argv, checkout) in runs.items():
            times[label].append(seconds(argv, checkout, env))
    medians = {label: statistics.median(t) for label, t in times.items()}
    base = next(iter(medians.values()))
    width = max(map(len, medians))
    print(f"{rounds} rounds, median wall time per start (target: at most {TARGET:g}x the first line)")
    for label, median in medians.items():
        flag = "" if median <= TARGET * base else "  over target"
        print(f"{label:{width}}  {median * 1e3:7.1f} ms  {median / base:5.1f}x{flag}")


if __name__ == "__main__":
    main()
