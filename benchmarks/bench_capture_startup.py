"""What ``profkit capture`` costs a process that never imports FlashInfer, measured side by side.

Every Python process under ``profkit capture`` runs profkit's start-up hook, which puts one
import watcher on ``sys.meta_path``; until FlashInfer is imported nothing else happens. Two
programs (an empty one, and one importing pandas: about a thousand modules through the watcher)
are started in alternating rounds, plain and under the capture environment; medians are printed
with their ratio. Run: ``python benchmarks/bench_capture_startup.py``.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time

from profkit.sources import autocapture

PROGRAMS = {"empty program": "pass", "import pandas": "import pandas"}


def seconds(argv, env) -> float:
    start = time.perf_counter()
    subprocess.run(argv, env=env, check=True)
    return time.perf_counter() - start


def main(rounds: int = 21) -> None:
    with tempfile.TemporaryDirectory() as out:
        # Byte-code caching on, as on a normal install (PYTHONDONTWRITEBYTECODE would make every
        # start compile the hook's two small modules again and measure that instead).
        plain_env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        captured_env = autocapture.child_environment(os.path.join(out, "capture"), base=plain_env)
        for name, code in PROGRAMS.items():
            argv = [sys.executable, "-c", code]
            seconds(argv, plain_env), seconds(argv, captured_env)  # warm the file cache
            plain, captured = [], []
            for _ in range(rounds):
                plain.append(seconds(argv, plain_env))
                captured.append(seconds(argv, captured_env))
            base, with_hook = statistics.median(plain), statistics.median(captured)
            print(f"{name:14}: {base * 1e3:7.1f} ms plain, {with_hook * 1e3:7.1f} ms under profkit capture, "
                  f"+{(with_hook - base) * 1e3:5.1f} ms, ratio {with_hook / base:.3f}")
        assert not os.path.exists(os.path.join(out, "capture")), "a process that never tuned wrote a capture"


if __name__ == "__main__":
    main()
