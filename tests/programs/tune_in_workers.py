"""An engine in miniature: the main process spawns one worker per rank, each tunes through FlashInfer.

Each worker imports FlashInfer (where ``profkit capture`` starts recording), then installs the
CPU stand-in for the GPU timer (after the capture's hooks, as a test harness or an engine patch
would) and tunes two toy ops through the real ``AutoTuner.choose_one``. What FlashInfer decided
(its own profiling cache) goes to ``--truth DIR/rank<r>.json`` for the test to compare with, and
each worker's stderr (FlashInfer's log) to ``DIR/rank<r>.log``.

    python tune_in_workers.py --truth DIR [--ranks 2] [--kill-rank R] [--fork] [--exit-code N]

``--kill-rank R``: rank R SIGKILLs itself inside FlashInfer's profiling loop of its second tuning call.
"""

import argparse
import json
import multiprocessing
import os
import signal
import sys

OPS = ("toy_gemm_a", "toy_gemm_b")
M = 32  # hybrid buckets 1 .. 32: six profiles per op


def flashinfer_decisions(tuner, op):
    """{nearest profile text: [runner, tactic text]} straight from FlashInfer's profiling cache."""
    from profkit.schema import tactic_text

    return {str(k.nearest_profile): [k.runner_class_name, tactic_text(v[0])]
            for k, v in tuner.profiling_cache.items() if k.custom_op == op}


def tune_ops(rank, truth, ops, *, kill_in_second=False):
    from profkit.testing import ToyCublasRunner, ToyCudnnRunner, cpu_autotuner, default_time, tune

    tuning = []

    def rank_time(runner, tactic, shapes):  # each rank favours its own cuBLAS-like tactic: winners differ
        if kill_in_second and len(tuning) == 2 and shapes[0][0] == 4:  # mid-way through the second call
            os.kill(os.getpid(), signal.SIGKILL)
        return default_time(runner, tactic, shapes) * (0.5 if tactic == rank % 2 else 1.0)

    decided = {}
    with cpu_autotuner(rank_time) as tuner:
        for op in ops:
            tuning.append(op)
            tune(op, [ToyCublasRunner(), ToyCudnnRunner()], M)
            decided[op] = flashinfer_decisions(tuner, op)
            with open(os.path.join(truth, f"rank{rank}.json"), "w") as f:
                json.dump({"pid": os.getpid(), "decisions": decided}, f)


def worker(rank, truth, kill_rank, fork):
    os.environ["RANK"] = str(rank)  # as torchrun sets it; SGLang's ranks come from torch.distributed
    log = open(os.path.join(truth, f"rank{rank}.log"), "w")  # each rank's stderr: its debug log
    os.dup2(log.fileno(), sys.stderr.fileno())
    import flashinfer  # noqa: F401 - profkit capture starts recording here

    if not fork:
        tune_ops(rank, truth, OPS, kill_in_second=rank == kill_rank)
        return
    tune_ops(rank, truth, OPS[:1])
    child = os.fork()
    if child == 0:  # the forked child tunes the second op as a rank of its own
        import torch

        # GNU OpenMP (torch's CPU threads) keeps the parent's thread pool, whose threads a forked
        # child lacks: its first parallel matmul waits for them forever, with or without profkit.
        torch.set_num_threads(1)
        os.environ["RANK"] = str(rank + 100)
        tune_ops(rank + 100, truth, OPS[1:])
        os._exit(0)
    os.waitpid(child, 0)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--truth", required=True)
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--kill-rank", type=int, default=-1)
    parser.add_argument("--fork", action="store_true")
    parser.add_argument("--exit-code", type=int, default=0)
    args = parser.parse_args()
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=worker, args=(r, args.truth, args.kill_rank, args.fork))
               for r in range(args.ranks)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    print("worker exit codes:", [w.exitcode for w in workers])
    sys.exit(args.exit_code)


if __name__ == "__main__":
    main()
