"""What ``profkit capture``'s writer costs per finished tuning call, early and late in a run.

Under ``profkit capture`` each process appends the rows of every finished tuning call as one
fsynced segment (``autocapture.ProcessWriter``), so a call's write should cost what its own rows
cost, not what the run has recorded so far. Two process captures are open side by side, the same
``_ProcessCapture`` the start-up hook opens: one holding about 100k recorded rows, one about 1k.
In each round a fresh small capture takes one large real tuning call (about 1k rows), then both
record the same measured call (6 buckets x 5 candidates, 43 rows) and each one's write is timed;
which of the two writes first alternates between rounds.
Every row comes from FlashInfer's real AutoTuner on the CPU stand-in (``profkit.testing``).
Prints the median write per call at both sizes and their ratio (target: below 2), and for scale
what rewriting the whole 100k-row capture once costs.
Run: ``python benchmarks/bench_capture_write.py [--rows 100000] [--rounds 15]``.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from profkit import testing as T
from profkit.sources import autocapture

BIG_M, BIG_TACTICS = 1024, 80  # 12 buckets x 80 tactics: about 1k rows per call


class Timed:
    """A process capture whose per-call writes are timed (seconds, in call order)."""

    def __init__(self, out: Path):
        self.process = autocapture._ProcessCapture(out, time_default=False)
        self.seconds: list[float] = []
        self.process.capture._on_call_end_hook = self._flush
        self.process.capture.__enter__()

    def _flush(self, capture) -> None:
        started = time.perf_counter()
        self.process.flush(capture)
        self.seconds.append(time.perf_counter() - started)

    def reopen(self) -> None:
        """Close and open again (rows kept): captures write in the order they were opened."""
        self.process.capture.__exit__(None, None, None)
        self.process.capture.__enter__()

    @property
    def rows(self) -> int:
        return self.process.capture.row_count()

    def close(self) -> None:
        self.process.capture.__exit__(None, None, None)
        if self.process.capture.problems:
            raise RuntimeError(f"the capture could not write: {self.process.capture.problems}")


def big_call(op: str) -> None:
    T.tune(op, [T.ToyCublasRunner(tactics=range(BIG_TACTICS), failing=())], BIG_M)


def main(rows: int, rounds: int) -> None:
    with tempfile.TemporaryDirectory() as tmp, T.cpu_autotuner() as tuner:
        large = Timed(Path(tmp) / "large")
        n = 0
        while large.rows < rows:
            big_call(f"fill_{n}")
            n += 1
        small_s, large_s, small_rows = [], [], []
        for r in range(rounds):
            small = Timed(Path(tmp) / f"small{r}")
            if r % 2:  # every other round the large capture writes second (after the small one)
                large.reopen()
            big_call(f"fill_{n + r}")
            T.tune(f"measured_{r}", [T.ToyCublasRunner(), T.ToyCudnnRunner()], 32)
            small_rows.append(small.rows)
            small_s.append(small.seconds[-1])
            large_s.append(large.seconds[-1])
            small.close()
            tuner.clear_cache()  # memory only: each process capture keeps its rows
        started = time.perf_counter()
        large.process.capture.tables().save(Path(tmp) / "whole")
        whole_s = time.perf_counter() - started
        large_rows = large.rows
        large.close()
    small_ms, large_ms = statistics.median(small_s) * 1e3, statistics.median(large_s) * 1e3
    print(f"per-call write (43-row call), median of {rounds} rounds side by side:")
    print(f"  at {statistics.median(small_rows):>8,.0f} recorded rows: {small_ms:7.2f} ms")
    print(f"  at {large_rows:>8,d} recorded rows: {large_ms:7.2f} ms")
    print(f"  ratio {large_ms / small_ms:.2f} (target < 2)")
    print(f"for scale: rewriting the whole {large_rows:,d}-row capture once: {whole_s * 1e3:.0f} ms")


if __name__ == "__main__":
    from flashinfer.jit.core import logger  # FlashInfer builds it directly: logging.getLogger does not find it

    logger.setLevel("ERROR")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    main(args.rows, args.rounds)
