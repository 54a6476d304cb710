"""How long ``profkit report`` takes on the shipped data, side by side with ``python -c "import pandas, matplotlib"``.

Both are started in alternating rounds from this checkout (and, with ``--baseline DIR``, the same report from
another checkout, e.g. a git worktree of an older commit, in the same rounds); medians are printed with their
ratio to the import, and each command's peak resident memory (its largest process: the report's forked figure
workers count). The target (issue 35) is at most 30x. Each report writes into a fresh folder under /tmp.
``--data /tmp/profkit-fleet-100`` (``scripts/make_fleet.py 100``) times the report on 100 ranks: issue 38's
target there is under 60 s and 2 GB.
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


def seconds(argv: list[str], checkout: Path) -> tuple[float, float]:
    """Wall time and peak resident GB of one run; ``python -c`` puts its folder first on sys.path, so
    ``checkout``'s profkit runs."""
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    start = time.perf_counter()
    with tempfile.TemporaryFile() as err:
        child = subprocess.Popen(argv, cwd=checkout, env=env, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - start
        child.returncode = os.waitstatus_to_exitcode(status)
        if child.returncode:
            err.seek(0)
            sys.exit(f"{' '.join(argv)} failed in {checkout}: {err.read().decode(errors='replace').strip()[-500:]}")
    return wall, usage.ru_maxrss / 1e6  # Linux: KiB


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
    peaks: dict[str, list[float]] = {label: [] for label in runs}
    for _ in range(args.rounds):
        for label, (argv, checkout) in runs.items():
            wall, peak = seconds(argv(), checkout)
            times[label].append(wall)
            peaks[label].append(peak)
    base = statistics.median(times['python -c "import pandas, matplotlib"'])
    for label, values in times.items():
        median = statistics.median(values)
        print(f"{label:40s} median {median:8.2f} s  ({median / base:6.1f}x the import; "
              f"{', '.join(f'{v:.2f}' for v in values)}), peak {max(peaks[label]):.2f} GB")
    print(f"target: profkit report at most {TARGET:.0f}x the import")


if __name__ == "__main__":
    main()
