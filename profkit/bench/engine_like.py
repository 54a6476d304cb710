"""An engine's tuning pattern on a GPU, to run under ``profkit capture`` and check against the debug log.

As SGLang and vLLM warm up, the main process spawns one worker per rank; each worker imports
FlashInfer and runs one dummy forward of a model's linears (random weights, ``--max-m`` tokens)
inside ``flashinfer.autotune(True)``. The program never calls profkit's capture itself:
``profkit capture`` records it. Each worker's stderr goes to ``LOGS/rank<r>.log``, so with
``FLASHINFER_LOGGING_LEVEL=debug`` every rank has its own debug log. Ranks that share a GPU run
one after the other, so they do not disturb each other's timings. Then ``--check`` compares each
rank's capture with its log (:func:`compare_with_logs`).

Example (one GPU, two ranks tuning in turn)::

    FLASHINFER_LOGGING_LEVEL=debug profkit capture --out runs/e/capture -- \\
        python -m profkit.bench.engine_like --logs runs/e/logs --ranks 2 --ops fp8_gemm,bf16_gemm
    python -m profkit.bench.engine_like --check runs/e/capture --logs runs/e/logs
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
from pathlib import Path

import pandas as pd

# Status stays out of the candidate key: Python prints a warning once per message, so the log
# shows only the first cuDNN "falling back" of each kind (autotuner_errata.md, Logs).
CANDIDATE_KEY = ["op", "profile", "runner", "tactic", "time_ms"]
WINNER_KEY = ["op", "profile", "bucket", "runner", "tactic", "time_ms", "status", "extras"]


def worker(rank: int, args: argparse.Namespace) -> None:
    """One rank: its stderr to its own log, then a dummy forward of the linears inside autotune."""
    os.environ["RANK"] = str(rank)  # what torchrun would set; capture names the folder by it
    log = open(Path(args.logs) / f"rank{rank}.log", "w")  # noqa: SIM115 - stays open for the process's life
    os.dup2(log.fileno(), sys.stderr.fileno())
    import torch

    import flashinfer
    from profkit import models
    from profkit.bench import gemm as G

    torch.cuda.set_device(rank % torch.cuda.device_count())
    if "bf16_gemm" in args.ops:
        G.enable_bf16_auto_on_sm90()
    layers = [layer for layer in models.linear_layers(models.load_model(args.model)) if layer.name in args.layers]
    gemms = [G.make_gemm(op, layer.n, layer.k, copies=1) for op in args.ops for layer in layers]
    with torch.inference_mode(), flashinfer.autotune(True):
        for gemm in gemms:
            gemm(gemm.inputs(args.max_m, 1)[0], gemm.weights[0], gemm.out(args.max_m))
    torch.cuda.synchronize()


def compare_with_logs(tables, logs: dict[int, object]) -> pd.DataFrame:
    """Per rank and op: what the capture and that rank's debug log hold, and whether they agree.

    Args:
        tables: ``profkit.load`` of a ``profkit capture`` directory (``rank`` set).
        logs: ``{rank: profkit.read_log(...)}`` of each rank's own log.

    Returns:
        One row per (rank, op): candidate, fallback and winner counts from each side (the log's
        fallbacks are a lower bound), ``candidates_equal`` (same runner, tactic and time per
        profile), ``winners_equal`` (same winner, time, status and extras per profile).
    """
    rows = []
    for rank, log in sorted(logs.items()):
        mine = tables.candidates[(tables.candidates["rank"] == rank) & (tables.candidates["source"] == "flashinfer")]
        won = tables.winners[tables.winners["rank"] == rank]
        for op in sorted(set(mine["op"].dropna()) | set(log.candidates["op"].dropna())):
            cap_c, log_c = mine[mine["op"] == op], log.candidates[log.candidates["op"] == op]
            cap_w, log_w = won[won["op"] == op], log.winners[log.winners["op"] == op]
            rows.append({"rank": rank, "op": op, "capture_candidates": len(cap_c), "log_candidates": len(log_c),
                         "capture_fallbacks": int((cap_c["status"] == "fallback").sum()),
                         "log_fallbacks": int((log_c["status"] == "fallback").sum()),
                         "capture_winners": len(cap_w), "log_winners": len(log_w),
                         "candidates_equal": _same(cap_c, log_c, CANDIDATE_KEY),
                         "winners_equal": _same(cap_w, log_w, WINNER_KEY)})
    return pd.DataFrame(rows)


def _same(a: pd.DataFrame, b: pd.DataFrame, key: list[str]) -> bool:
    def rows(frame):
        return frame[key].astype("object").sort_values(key, kind="stable").reset_index(drop=True)

    return len(a) == len(b) and rows(a).equals(rows(b))


def check(capture_dir: str, logs_dir: str) -> pd.DataFrame:
    """:func:`compare_with_logs` on a capture directory and a folder of ``rank<r>.log`` files."""
    import profkit

    logs = {int(p.stem[4:]): profkit.read_log(p) for p in sorted(Path(logs_dir).glob("rank*.log"))}
    return compare_with_logs(profkit.load(capture_dir), logs)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.check:
        result = check(args.check, args.logs)
        print(result.to_string(index=False))
        agree = bool(len(result)) and bool(result["candidates_equal"].all() and result["winners_equal"].all())
        print(json.dumps({"ranks_ops": len(result), "all_agree": agree}))
        return 0 if agree else 1
    from profkit.bench.graphs import no_cuda

    if no_cuda("profkit engine_like"):
        return 2
    import torch

    Path(args.logs).mkdir(parents=True, exist_ok=True)
    context = multiprocessing.get_context("spawn")
    together = torch.cuda.device_count() >= args.ranks  # ranks sharing a GPU tune one after the other
    workers = [context.Process(target=worker, args=(rank, args)) for rank in range(args.ranks)]
    for w in workers:
        w.start()
        if not together:
            w.join()
    for w in workers:
        w.join()
    print("worker exit codes:", [w.exitcode for w in workers])
    return 0 if all(w.exitcode == 0 for w in workers) else 1


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m profkit.bench.engine_like", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--logs", required=True, help="folder of the per-rank stderr logs rank<r>.log")
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--ops", type=lambda s: s.split(","), default=["fp8_gemm", "bf16_gemm"])
    p.add_argument("--model", default="llama3-8b")
    p.add_argument("--layers", type=lambda s: s.split(","), default=["o"], help="e.g. qkv,o")
    p.add_argument("--max-m", type=int, default=512, help="tokens of the dummy forward: buckets up to it tune")
    p.add_argument("--check", metavar="CAPTURE_DIR", help="compare a capture directory with the logs instead")
    return p


if __name__ == "__main__":
    raise SystemExit(main())
