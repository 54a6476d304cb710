"""How fast the ``profkit`` command answers, side by side with ``python -c "import argparse"``.

``profkit --help``, each subcommand's ``--help`` and two argument errors (a missing path, found
before anything heavy is imported) are started in alternating rounds with the bare interpreter
importing argparse; medians are printed with their ratio to it. The target (issue 26) is at most
5x. The command is started the way the ``profkit`` console script starts it. Run:
``python benchmarks/bench_cli_startup.py`` (``--rounds N``; ``PYTHONPATH=<another checkout>`` measures that one).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

from profkit.cli import SUBCOMMANDS

ENTRY = "import sys; from profkit.cli import main; sys.exit(main())"  # what the console script runs
TARGET = 5.0


def commands() -> dict[str, list[str]]:
    """Label -> argv, the baseline first."""
    out = {'python -c "import argparse"': [sys.executable, "-c", "import argparse"],
           "profkit --help": [sys.executable, "-c", ENTRY, "--help"]}
    for name in SUBCOMMANDS:
        out[f"profkit {name} --help"] = [sys.executable, "-c", ENTRY, name, "--help"]
    out["profkit verify /missing"] = [sys.executable, "-c", ENTRY, "verify", "/missing/capture"]
    out["profkit parse /missing.log"] = [sys.executable, "-c", ENTRY, "parse", "/missing/server.log"]
    return out


def seconds(argv: list[str], env: dict) -> float:
    start = time.perf_counter()
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=11)
    rounds = parser.parse_args().rounds
    # Byte-code caching on, as on a normal install.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    runs = commands()
    for argv in runs.values():
        seconds(argv, env)  # warm the file cache and write the byte code
    times: dict[str, list[float]] = {label: [] for label in runs}
    for _ in range(rounds):
        for label, argv in runs.items():
            times[label].append(seconds(argv, env))
    medians = {label: statistics.median(t) for label, t in times.items()}
    base = next(iter(medians.values()))
    width = max(map(len, medians))
    print(f"{rounds} rounds, median wall time per start (target: at most {TARGET:g}x the first line)")
    for label, median in medians.items():
        flag = "" if median <= TARGET * base else "  over target"
        print(f"{label:{width}}  {median * 1e3:7.1f} ms  {median / base:5.1f}x{flag}")


if __name__ == "__main__":
    main()
