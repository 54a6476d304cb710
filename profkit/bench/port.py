"""Carry a tuning to this GPU: re-time the source GPU's shortlist here and keep, per bucket, the fastest.

A port is a verify of a capture tuned on another GPU (its tuner's top-k, its pick and the default), at each
bucket's own M and, for an MoE, under FlashInfer's own tuning routing only, followed by a repair under this
GPU's ``_metadata``: FlashInfer loads the file on this kind of GPU and ignores it anywhere else. It times a
handful of candidates per bucket where a tuning times every valid tactic; its price against a full tuning is
printed by ``profkit port`` and measured side by side by :mod:`profkit.bench.port_price`.
"""

from __future__ import annotations

import time
from pathlib import Path

from profkit import schema
from profkit.outputs import atomic

PORT_ROUTING = "tuner"  # an MoE's picks are timed under the routing FlashInfer tunes with


def port(capture_dir: Path, *, cache: Path | None, out: Path, top_k: int = 3, replays: int = 30, log=print) -> dict:
    """Re-time ``capture_dir``'s shortlist on this GPU, write ``out/cache.json`` (this GPU's ``_metadata``) and
    ``out/port.json``; the timings are ``out/timings/.../verify.parquet``. Returns port.json's document."""
    from profkit.analysis.verify import repair_picks
    from profkit.bench.verify import cache_beside, run as verify
    from profkit.outputs.flashinfer_cache import cache_file, usable_timings, write_cache_file
    from profkit.sources.jit import jit_builds
    from profkit.sources.verify import read_verify

    cache = cache or cache_beside(capture_dir)
    started = time.perf_counter()
    with jit_builds() as built:  # a fresh machine's one-time module compiles, inside port_s
        written = verify([capture_dir], out=out / "timings", cache=cache, top_k=top_k, replays=replays,
                         only_buckets=True, routings=PORT_ROUTING, log=log)
    seconds = time.perf_counter() - started
    timings, set_aside = usable_timings(read_verify(*written))
    moe = "routing" in timings.columns and timings["routing"].notna().any()
    picks = repair_picks(timings, routing=PORT_ROUTING if moe else None)
    content = cache_file(picks, metadata=running_metadata(), like=_entries(cache))
    write_cache_file(out / "cache.json", content, inputs=[cache, capture_dir])
    source = schema.load(capture_dir)
    document = {
        "capture": str(capture_dir), "cache": str(cache) if cache else None, "top_k": top_k, "replays": replays,
        "source_gpu": _first(source.runs, "gpu"), "target_gpu": content["_metadata"].get("gpu"),
        "buckets": len(content) - 1, "timed": int(len(timings)), "set_aside": list(set_aside),
        "kept_source_pick": int(((picks["runner"] == picks["tuner_runner"])
                                 & (picks["tactic"] == picks["tuner_tactic"])).fillna(False).sum()) if len(picks) else 0,
        "port_s": seconds, "jit_modules": built.modules, "jit_build_s": built.seconds,
        "source_tuning_s": _tuning_seconds(source.tuning),
    }
    atomic.write_json(out / "port.json", document)
    return document


def blind(cache: Path, out: Path, *, like: Path | None = None) -> Path:
    """``cache``'s picks as they are, under this GPU's ``_metadata`` (or ``like``'s): what copying another GPU's
    file costs when it is made to load. Written atomically to ``out``."""
    from profkit.outputs.flashinfer_cache import relabelled, write_cache_file
    from profkit.sources.cache import read_cache_document

    metadata = read_cache_document(like).get("_metadata") if like else running_metadata()
    inputs = [cache, *([like] if like else [])]
    return write_cache_file(out, relabelled(read_cache_document(cache), metadata), inputs=inputs)


def running_metadata() -> dict:
    """FlashInfer's ``_metadata`` of this process's environment (its GPU, versions)."""
    from flashinfer.autotuner.autotuner import _collect_metadata

    return _collect_metadata()


def _entries(cache: Path | None) -> dict:
    from profkit.sources.cache import read_cache_document

    if not cache or not Path(cache).is_file():
        return {}
    return {k: v for k, v in read_cache_document(cache).items() if not k.startswith("_")}


def _tuning_seconds(tuning) -> float | None:
    """Wall seconds of a capture's tuning calls (their per-bucket profile rows are inside them)."""
    calls = tuning[tuning["kind"] == "call"] if "kind" in tuning.columns else tuning.iloc[:0]
    return float(calls["wall_s"].sum()) if len(calls) else None


def _first(frame, column: str):
    values = frame[column].dropna().astype(str) if column in frame.columns else ()
    return values.iloc[0] if len(values) else None
