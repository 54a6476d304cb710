"""How long ``profkit report`` takes on the shipped data, side by side with ``python -c "import pandas, matplotlib"``.

Both are started in alternating rounds from this checkout (and, with ``--baseline DIR``, the same report from
another checkout, e.g. a git worktree of an older commit, in the same rounds); medians are printed with their
ratio to the import. The target (issue 35) is at most 30x. Each report writes into a fresh folder under /tmp.
Run: ``python benchmarks/bench_report.py [--rounds N] [--data DIR] [--baseline DIR]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENTRY = "import sys; from profkit.cli import main; sys.exit(main())"  # what the console script runs
TARGET = 30.0


def seconds(argv: list[str], checkout: Path) -> float:
    """Wall time of one run; ``python -c`` puts its folder first on sys.path, so ``checkout``'s profkit runs."""
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=checkout, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          check=False)
    if done.returncode:
        sys.exit(f"{' '.join(argv)} failed in {checkout}: {done.stderr.strip()[-500:]}")
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--data", type=Path, default=ROOT / "data", help="what to report on (default: the shipped data)")
    parser.add_argument("--baseline", type=Path, help="another checkout of profkit, e.g. a git worktree")
    args = parser.parse_args()
    runs = {'python -c "import pandas, matplotlib"': (lambda: [sys.executable, "-c", "import pandas, matplotlib"], ROOT)}
    for name, checkout in [("profkit report", ROOT)] + ([("baseline: profkit report", args.baseline.resolve())]
                                                        if args.baseline else []):
        runs[name] = (lambda: [sys.executable, "-c", ENTRY, "report", str(args.data.resolve()), "--out",
                               tempfile.mkdtemp(prefix="bench-report-"), "--no-progress"], checkout)
    times: dict[str, list[float]] = {label: [] for label in runs}
    for _ in range(args.rounds):
        for label, (argv, checkout) in runs.items():
            times[label].append(seconds(argv(), checkout))
    base = statistics.median(times['python -c "import pandas, matplotlib"'])
    for label, values in times.items():
        median = statistics.median(values)
        print(f"{label:40s} median {median:8.2f} s  ({median / base:6.1f}x the import; "
              f"{', '.join(f'{v:.2f}' for v in values)})")
    print(f"target: profkit report at most {TARGET:.0f}x the import")


if __name__ == "__main__":
    main()
