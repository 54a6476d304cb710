"""What porting an MoE tuning to this GPU costs against tuning it here, side by side in one fresh process.

    python -m profkit.bench.port_price --model qwen3-30b-a3b --capture OTHER_GPU/capture --out DIR

In order, in one process on the target GPU: the port of ``--capture`` (:func:`profkit.bench.port.port`:
its kernels compiled on first use, ``DIR/cold``), the same port again (every kernel compiled, ``DIR/warm``),
then FlashInfer's full tuning of the model's MoE layer at ``--max-m`` tokens (every bucket, no cache file;
the port's kernels are already compiled, so this tuning is a little cheaper than a fresh process's), then
the cache cleared and the same tuning again (no compiles). Writes ``DIR/price.json`` with the four wall
times and the two ratios (port over tuning, with and without compiles). A fresh process's tuning with its
compiles is the ``tune_call_s`` of ``profkit.bench.moe_sweep``'s provenance.json.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    from profkit.bench.graphs import no_cuda

    if no_cuda("profkit port price"):
        return 2
    import torch
    from flashinfer import autotune
    from flashinfer.autotuner import AutoTuner

    from profkit.bench import moe
    from profkit.bench.port import port, running_metadata
    from profkit.bench.routing import route
    from profkit.models import load_model
    from profkit.outputs import atomic

    moe.preload_kit_moe_utils()
    price = {"model": args.model, "capture": str(args.capture), "max_m": args.max_m, "top_k": args.top_k,
             "gpu": running_metadata().get("gpu"), "argv": sys.argv}
    for name in ("cold", "warm"):
        t0 = time.perf_counter()
        port(args.capture, cache=None, out=args.out / name, top_k=args.top_k, log=print)
        price[f"port_{name}_s"] = time.perf_counter() - t0
    layer = moe.MoeLayer(load_model(args.model), copies=2)
    x, ids, scales, y = layer.inputs(route("tuner", args.max_m, layer.experts, layer.top_k), 1)[0]
    for name in ("tune_s", "tune_warm_s"):
        AutoTuner.get().clear_cache()
        t0 = time.perf_counter()
        with autotune(True):
            layer.forward(x, ids, scales, y)
            torch.cuda.synchronize()
        price[name] = time.perf_counter() - t0
    price["port_over_tune"] = price["port_cold_s"] / price["tune_s"]
    price["port_over_tune_without_compiles"] = price["port_warm_s"] / price["tune_warm_s"]
    atomic.write_json(args.out / "price.json", price)
    print({k: round(v, 3) if isinstance(v, float) else v for k, v in price.items() if k != "argv"})
    return 0


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m profkit.bench.port_price", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True, help="a shipped MoE model config (qwen3-30b-a3b, gpt-oss-120b, mixtral-8x7b)")
    p.add_argument("--capture", type=Path, required=True, help="the capture tuned on the other GPU (cache.json beside it)")
    p.add_argument("--max-m", type=int, default=4096, help="tokens of the tuning call (as the capture's)")
    p.add_argument("--top-k", type=int, default=3, help="the source tuner's fastest candidates per bucket to re-time")
    p.add_argument("--out", type=Path, required=True, help="a new folder")
    return p


if __name__ == "__main__":
    raise SystemExit(main())
