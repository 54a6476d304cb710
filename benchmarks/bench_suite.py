"""The test suite's wall time here, side by side with the suite of another commit, on the same machine.

The other commit is checked out into a temporary git worktree and both suites run one after the
other with this checkout's interpreter (the same installed packages; each imports its own
``profkit`` through ``PYTHONPATH``), alternating for ``--rounds`` rounds. The worktree has this
checkout's ``../shared`` beside it and its ``.venv-extra`` in it (links), so tests that read them run
alike in both suites (not only here, and without a download there).
Printed: each round's seconds, the medians, their ratio, and each suite's warning count
(``--durations N``: also each suite's N slowest tests, from its last round). Issue 26's target is half the
baseline's time. Run: ``python benchmarks/bench_suite.py --baseline caa818b`` (``--cpus 0,1`` pins
both to two cores with ``taskset``, as CI's 2-core machine).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET = 0.5


def run_suite(checkout: Path, cpus: str | None, durations: int) -> tuple[float, str, list[str]]:
    """Seconds, the last line (then any failed test's) and the ``durations`` slowest tests' lines of one whole-suite
    run in ``checkout``."""
    argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider"]  # each checkout's addopts: its summary line
    if durations:
        argv.append(f"--durations={durations}")
    if cpus:
        argv = ["taskset", "-c", cpus, *argv]
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    start = time.perf_counter()
    # Ctrl-C as from a terminal: a background start (`cmd &`) ignores SIGINT, and the signal tests need it.
    done = subprocess.run(argv, cwd=checkout, env=env, capture_output=True, text=True, check=False,
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    seconds = time.perf_counter() - start
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    last = lines[-1] if lines else f"no output (exit {done.returncode}): {done.stderr.strip()[-300:]}"
    if done.returncode != 0:
        last += f"  [exit {done.returncode}]"
    slowest = [line for line in lines if re.match(r"\d+\.\d+s (call|setup|teardown) ", line)]
    failed = [line for line in lines if line.startswith(("FAILED ", "ERROR "))]  # pytest's short summary
    return seconds, "\n  ".join([last, *failed]), slowest


def warnings_in(summary: str) -> int:
    found = re.search(r"(\d+) warnings?", summary.splitlines()[0])  # the summary line, not a failure's
    return int(found.group(1)) if found else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", required=True, help="the commit to compare with (e.g. caa818b)")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--cpus", default=None, help="taskset CPU list for both suites, e.g. 0,1")
    parser.add_argument("--durations", type=int, default=0, help="print each suite's N slowest tests")
    args = parser.parse_args()
    if args.cpus and not shutil.which("taskset"):
        parser.error("--cpus needs taskset")
    tmp = Path(tempfile.mkdtemp(prefix="profkit-baseline-"))
    if (ROOT.parent / "shared").is_dir():
        (tmp / "shared").symlink_to(ROOT.parent / "shared")
    baseline = tmp / "profkit"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(baseline), args.baseline],
                   check=True)
    if (ROOT / ".venv-extra").is_dir():  # the other FlashInfer wheels the suite installs once, not on each run
        (baseline / ".venv-extra").symlink_to(ROOT / ".venv-extra")
    suites = {f"baseline {args.baseline}": baseline, "this checkout": ROOT}
    times: dict[str, list[float]] = {label: [] for label in suites}
    last: dict[str, str] = {}
    slowest: dict[str, list[str]] = {}
    try:
        for round_ in range(args.rounds):
            for label, checkout in suites.items():
                seconds, last[label], slowest[label] = run_suite(checkout, args.cpus, args.durations)
                times[label].append(seconds)
                print(f"round {round_ + 1}: {label}: {seconds:.0f} s  ({last[label]})", flush=True)
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(baseline)], check=False)
        shutil.rmtree(tmp, ignore_errors=True)
    for label, lines in slowest.items():
        print(f"{label}: slowest {len(lines)} tests (last round)", *lines, sep="\n  ")
    base, mine = (statistics.median(t) for t in times.values())
    for label, t in times.items():
        print(f"{label}: median {statistics.median(t):.0f} s over {len(t)} round(s), "
              f"{warnings_in(last[label])} warnings")
    flag = "" if mine <= TARGET * base else "  over target"
    print(f"ratio this/baseline: {mine / base:.2f} (target at most {TARGET:g}){flag}")


if __name__ == "__main__":
    main()
