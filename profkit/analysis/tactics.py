"""Decode FlashInfer's opaque tactics into named columns, one small decoder per runner family.

FlashInfer treats a tactic as "pure internal details of the runner": an int for cuBLAS and
cuBLASLt (an index into a per-shape heuristic list), ``[engine_id, [[knob, value], ...]]`` for
cuDNN graph runners (0.7.x, ``_cudnn_graph_engine_knob_tactics``), tuples of tile shapes for some
CUTLASS / CuteDSL runners, and ``(tile, ((tile, n1), swizzle), ((tile, n2), cluster, raster_m))`` for
FlashInfer's SM90 CuTe-DSL fused MoE. A decoder turns one parsed tactic into a dict of ``tactic_*`` fields;
:func:`decode_tactics` applies the registry to a frame and falls back to the raw text.
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable

import pandas as pd

from profkit.analysis._frames import require

Decoder = Callable[[Any], dict]

# cudnn-frontend 1.32 ``KnobType_t`` (include/cudnn_frontend/knobs.h): FlashInfer 0.7.2 stores
# ``int(cudnn.knob_type)``, i.e. the frontend numbering, not the backend's cudnnBackendKnobType_t
# (where 12 would be SPLIT_K_BUF). Unknown ids print as knob<N>.
CUDNN_KNOBS = {
    1: "SWIZZLE", 2: "TILE_SIZE", 3: "EDGE", 4: "MULTIPLY", 5: "SPLIT_K_BUF", 6: "TILEK", 7: "STAGES",
    8: "REDUCTION_MODE", 9: "SPLIT_K_SLC", 10: "IDX_MODE", 11: "SPECFILT", 12: "KERNEL_CFG", 13: "WORKSPACE",
    14: "TILE_CGA_M", 15: "TILE_CGA_N", 16: "BLOCK_SIZE", 17: "OCCUPANCY", 18: "ARRAY_SIZE_PER_THREAD",
    19: "SPLIT_COLS", 20: "TILE_ROWS", 21: "TILE_COLS", 22: "LOAD_SIZE", 23: "CTA_COUNT", 24: "STREAM_K",
    25: "SPLIT_P_SLC", 26: "TILE_M", 27: "TILE_N", 28: "WARP_SPEC_CFG", 29: "SWAP_AB", 30: "INPUT_TMA_ENABLE",
    31: "OUTPUT_TMA_ENABLE", 32: "TILE_CGA",
}

# The decoded tactic_* columns, in the order decode_tactics adds them.
DECODED_COLUMNS = {
    "tactic_kind": "string",    # index, engine_knobs, tiles, moe_tiles, default or raw
    "tactic_index": "Int64",    # cuBLAS / cuBLASLt heuristic index, cuDNN plan index, CUTLASS config index
    "tactic_engine": "Int64",   # cuDNN engine id
    "tactic_knobs": "string",   # cuDNN knobs, "KERNEL_CFG=45, SPLIT_K_SLC=2"
    "tactic_tile": "string",    # CUTLASS / CuteDSL tile shape, "128x128x64"; fused MoE "64 | 64x128 | 64x64"
    "tactic_cluster": "string",  # CUTLASS cluster shape, "2x1x1"
    "tactic_desc": "string",    # short human label used in figures and cards
}

_REGISTRY: list[tuple[re.Pattern, Decoder]] = []


def register_decoder(runner_pattern: str, decoder: Decoder) -> None:
    """Register ``decoder`` for runners whose class name matches ``runner_pattern`` (regex search).

    Later registrations win over earlier ones, so a caller can refine a built-in decoder.

    Args:
        runner_pattern: regular expression searched in the runner class name.
        decoder: takes the parsed tactic (JSON value: int, list, ...) and returns ``tactic_*``
            fields; raise ValueError (or return {}) when the value is not its format.
    """
    _REGISTRY.insert(0, (re.compile(runner_pattern), decoder))


def decode_tactic(runner: str | None, tactic: str | None) -> dict:
    """The ``tactic_*`` fields of one (runner, tactic text); raw text when no decoder applies."""
    raw = "" if tactic is None or tactic is pd.NA else str(tactic)
    try:
        value = json.loads(raw)
    except (TypeError, ValueError):
        value = raw
    fields: dict = {}
    if value == -1:
        fields = {"tactic_kind": "default", "tactic_desc": "default (-1)"}
    else:
        for pattern, decoder in _REGISTRY:
            if runner is not None and runner is not pd.NA and pattern.search(str(runner)):
                try:
                    fields = decoder(value) or {}
                except (ValueError, TypeError, IndexError, KeyError):
                    fields = {}
                if fields:
                    break
    if not fields:
        fields = {"tactic_kind": "raw", "tactic_desc": raw}
    return {name: fields.get(name) for name in DECODED_COLUMNS}


def decode_tactics(frame: pd.DataFrame) -> pd.DataFrame:
    """Add decoded tactic columns to a frame holding ``runner`` and ``tactic``.

    Args:
        frame: any frame with ``runner`` and ``tactic`` (candidates, winners, analysis results).

    Returns:
        A copy of ``frame`` (same rows, same order) with these columns added or replaced:
        ``tactic_kind`` (index, engine_knobs, tiles, default or raw), ``tactic_index`` (cuBLAS /
        cuBLASLt heuristic index: not portable across shapes, decode algo ids on the GPU to learn
        more), ``tactic_engine`` and ``tactic_knobs`` (cuDNN engine id and named knobs),
        ``tactic_tile`` and ``tactic_cluster`` (CUTLASS tiles, when the tactic carries them) and
        ``tactic_desc`` (a short label; the raw tactic text when no decoder knows the runner).

    Raises:
        SchemaError: when ``runner`` or ``tactic`` is missing.
    """
    require(frame, ("runner", "tactic"), "candidates")
    pairs = frame[["runner", "tactic"]].astype("string").drop_duplicates()
    decoded = pd.DataFrame([decode_tactic(r, t) for r, t in pairs.itertuples(index=False)], index=pairs.index)
    decoded = pd.concat([pairs.reset_index(drop=True), decoded.reset_index(drop=True)], axis=1)
    for name, dtype in DECODED_COLUMNS.items():
        decoded[name] = decoded[name].astype(dtype)
    out = frame.drop(columns=[c for c in DECODED_COLUMNS if c in frame.columns])
    keys = out[["runner", "tactic"]].astype("string")
    merged = keys.merge(decoded, on=["runner", "tactic"], how="left")
    for name in DECODED_COLUMNS:
        out[name] = merged[name].to_numpy()
        out[name] = out[name].astype(DECODED_COLUMNS[name])
    return out


def tactic_words(runner: str | None, tactic: str | None) -> str:
    """The tactic in words where its decoder has them (SM90 fused MoE: tiles, cluster, raster), else its label."""
    try:
        value = json.loads(str(tactic))
    except (TypeError, ValueError):
        value = None
    if value == -1:
        return "the runner's default (tactic -1)"
    for pattern, decoder in _REGISTRY:
        if runner is not None and runner is not pd.NA and pattern.search(str(runner)):
            try:
                words = (decoder(value) or {}).get("tactic_words")
            except (ValueError, TypeError, IndexError, KeyError):
                words = None
            if words:
                return words
    return decode_tactic(runner, tactic)["tactic_desc"]


def tactic_label(runner: str | None, tactic: str | None) -> str:
    """'Runner:desc' for legends, e.g. 'CudnnFp8GemmRunner:e0 KERNEL_CFG=0'."""
    return f"{runner}:{decode_tactic(runner, tactic)['tactic_desc']}"


# -- built-in decoders -------------------------------------------------------------------------
def _index(value) -> dict:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError("not an index tactic")
    return {"tactic_kind": "index", "tactic_index": value, "tactic_desc": f"#{value}"}


def _cudnn(value) -> dict:
    if isinstance(value, int) and not isinstance(value, bool):
        return {"tactic_kind": "index", "tactic_index": value, "tactic_desc": f"plan #{value}"}
    engine, knobs = value
    if not isinstance(engine, int):
        raise ValueError("not a cuDNN engine/knob tactic")
    named = ", ".join(f"{CUDNN_KNOBS.get(int(k), f'knob{int(k)}')}={int(v)}" for k, v in knobs)
    desc = f"e{engine}" + (f" {named}" if named else "")
    return {"tactic_kind": "engine_knobs", "tactic_engine": engine, "tactic_knobs": named, "tactic_desc": desc}


def _dims(value) -> str | None:
    if isinstance(value, list) and 2 <= len(value) <= 3 and all(isinstance(v, int) for v in value):
        return "x".join(str(v) for v in value)
    return None


def _cutlass(value) -> dict:
    if isinstance(value, int) and not isinstance(value, bool):
        return {"tactic_kind": "index", "tactic_index": value, "tactic_desc": f"cfg #{value}"}
    if not isinstance(value, list):
        raise ValueError("not a CUTLASS tactic")
    shapes = [d for d in (_dims(v) for v in value) if d is not None]
    if not shapes:
        raise ValueError("no tile shape in tactic")
    tile, cluster = shapes[0], (shapes[1] if len(shapes) > 1 else None)
    desc = f"tile {tile}" + (f" cluster {cluster}" if cluster else "")
    return {"tactic_kind": "tiles", "tactic_tile": tile, "tactic_cluster": cluster, "tactic_desc": desc}


def _sm90_moe(value) -> dict:
    """FlashInfer's SM90 CuTe-DSL fused MoE: ``(tile, ((tile, n1), swizzle), ((tile, n2), cluster, raster_m))``."""
    tile, (gemm1_tile, swizzle), (gemm2_tile, cluster, raster_m) = value
    g1, g2, cl = _dims(gemm1_tile), _dims(gemm2_tile), _dims(cluster)
    if not (isinstance(tile, int) and g1 and g2 and cl and isinstance(swizzle, int) and isinstance(raster_m, bool)):
        raise ValueError("not an SM90 fused-MoE tactic")
    raster = "M" if raster_m else "N"
    desc = f"{tile}: G1 {g1} sw{swizzle}, G2 {g2} cl {cl}" + (" M-raster" if raster_m else "")
    walk = "plain N-fast walk" if swizzle == 1 else f"{swizzle} M-tiles per pass over an expert's weights"
    multicast = "no multicast" if cl == "1x1" else f"CTA cluster {cl} (the intermediate multicast between N-tile CTAs)"
    words = (f"{tile}-row tiles (tokens per expert are padded to {tile}); GEMM1 (gather + SwiGLU) tile {g1}, "
             f"{walk}; GEMM2 (finalize) tile {g2}, {multicast}, tiles walked along {raster}")
    return {"tactic_kind": "moe_tiles", "tactic_tile": f"{tile} | {g1} | {g2}", "tactic_cluster": cl,
            "tactic_desc": desc, "tactic_words": words}


register_decoder(r"Cutlass|CuteDSL|Cute", _cutlass)
register_decoder(r"FusedMoESm90|Sm90MoE", _sm90_moe)
register_decoder(r"TinyGemm|Tgv|TGV", _index)
register_decoder(r"Cudnn", _cudnn)
register_decoder(r"Cublas", _index)
