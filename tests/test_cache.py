"""profkit.read_cache on FlashInfer's own cache files: the shipped H200 caches, CPU-written v1 and v2 stores."""

from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest

import profkit
from conftest import DATA, TEST_DATA
from profkit.errors import ParseError
from profkit.sources.cache import add_buckets, key_fields, literal

H200 = DATA / "h200"
SETS = sorted(p.parent for p in H200.glob("*/debug.log.gz"))  # the sets tuned one shape per call
CACHES = sorted(c for s in SETS for c in s.glob("*/cache.json"))
KEY = ["op", "profile", "bucket", "runner", "tactic", "extras"]
MISMATCH = TEST_DATA / "cache_metadata_mismatch"
STORE = TEST_DATA / "cache_v2_store" / "store"


def rows(frame: pd.DataFrame, columns=KEY) -> pd.DataFrame:
    return frame[columns].sort_values(columns).reset_index(drop=True).astype("object")


@pytest.mark.parametrize("path", CACHES, ids=lambda p: f"{p.parent.parent.name}/{p.parent.name}")
def test_shipped_cache_reproduces_the_captured_winners(path):
    cache = profkit.read_cache(path)
    captured = profkit.load(path.parent / "capture").winners
    pd.testing.assert_frame_equal(rows(cache.winners), rows(captured))
    w = cache.winners
    assert w["source"].eq("cache_file").all() and w["time_ms"].isna().all() and w["problem"].eq("").all()
    assert w["bucket_rule"].eq("spec: input 0 dim -2").all()
    assert set(w["l2_cache_policy"]) == ({"cold"} if "bf16" in path.parent.name else {"hot"})
    env = cache.env
    assert (env["gpu"], env["flashinfer"], env["cudnn"], env["cublas"], env["cuda"]) == (
        "NVIDIA H200", "0.7.2.post1", "91900", "13.1.0", "13.0")
    assert env["n_entries"] == 20 and env["metadata_indeterminate"] == "cutlass_dsl_version"


def test_a_directory_of_caches_skips_other_json():
    cache = profkit.read_cache(SETS)
    assert len(cache.runs) == len(CACHES) and len(cache.winners) == 20 * len(CACHES)
    assert not cache.runs["run_id"].str.contains("provenance").any()
    assert cache.runs["metadata_differs"].eq("").all()


def test_cpu_cache_matches_flashinfers_decisions():
    """The v1 file the real AutoTuner wrote on the CPU holds the captured profiled winners, OOM'd ones aside."""
    cache = profkit.read_cache(TEST_DATA / "log_cpu_failures" / "cache.json")
    captured = profkit.load(TEST_DATA / "log_cpu_failures" / "capture").winners
    pd.testing.assert_frame_equal(rows(cache.winners), rows(captured[captured["source"] == "profiled"]))
    assert cache.winners["bucket_rule"].str.startswith("varies: input 0 dim 0").all()


def test_mismatching_and_unknown_metadata_are_carried():
    cache = profkit.read_cache(MISMATCH / "other_gpu.json")
    env = cache.env
    assert env["gpu"] == "NVIDIA H100 80GB HBM3" and env["meta_future_field"] == "x"
    assert set(env["metadata_indeterminate"].split(",")) >= {"cuda_version", "cublas_version", "cudnn_version"}
    assert len(cache.winners) == 12  # FlashInfer would ignore the file; the reader keeps every entry


def test_per_rank_files_get_rank_columns_and_disagreements():
    cache = profkit.read_cache(MISMATCH / "ranks")
    runs = cache.runs.set_index("run_id")
    assert list(runs.index) == ["rank_tp0_pp0_dp0.json", "rank_tp1_pp0_dp0.json"]
    assert runs["metadata_differs"].eq("cudnn_version").all()
    assert list(runs["cudnn"]) == ["91900", "91700"]
    w = cache.winners
    assert w.groupby("rank").size().to_dict() == {0: 20, 1: 20} and w["pp_rank"].eq(0).all()


@pytest.mark.parametrize("where", ["root", "v2", "env"])
def test_v2_store_at_any_level(where):
    env_dir = next((STORE / "v2").iterdir())
    path = {"root": STORE, "v2": STORE / "v2", "env": env_dir}[where]
    cache = profkit.read_cache(path)
    entries = [json.loads(p.read_text()) for p in sorted((env_dir / "entries").glob("*.json"))]
    assert sorted(zip(cache.winners["runner"], cache.winners["tactic"])) == sorted(
        (e["runner"], profkit.schema.tactic_text(e["tactic"])) for e in entries)
    assert cache.winners["cache_format"].eq("v2").all() and cache.winners["problem"].eq("").all()
    assert sorted(cache.winners["bucket"]) == [1, 2, 4, 8]
    env = cache.env
    assert env["env_hash"] == env_dir.name and env["meta_cache_schema"] == "v2" and env["problem"] == ""


def test_v2_entries_flashinfer_cannot_use_are_flagged(tmp_path):
    store = shutil.copytree(STORE, tmp_path / "store")
    env_dir = next((store / "v2").iterdir())
    first, second = sorted((env_dir / "entries").glob("*.json"))[:2]
    first.rename(first.with_name("0" * 24 + ".json"))
    second.write_text("{not json")
    cache = profkit.read_cache(store)
    problems = cache.winners["problem"]
    assert problems.str.contains("sha256").sum() == 1 and problems.str.contains("invalid JSON").sum() == 1
    with pytest.raises(ParseError, match="invalid JSON"):
        profkit.read_cache(store, strict=True)


def test_malformed_v1_files(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{\n  "_metadata": {},\n  oops\n}')
    with pytest.raises(ParseError, match=r"bad\.json:3: invalid JSON"):
        profkit.read_cache(bad)
    with pytest.raises(ParseError, match=r"provenance\.json:1: not a FlashInfer cache file"):
        profkit.read_cache(H200 / "fp8" / "provenance.json")
    data = json.loads(CACHES[0].read_text())
    key = next(k for k in data if k.startswith("("))
    data[key] = "not a list"
    data["('op', 'Runner')"] = ["Runner", 1]
    odd = tmp_path / "odd.json"
    odd.write_text(json.dumps(data, indent=2))
    cache = profkit.read_cache(odd)
    assert len(cache.winners) == 21
    problems = cache.winners.set_index("key")["problem"]
    assert problems[key] == "value is not [runner, tactic(, policy)]"
    assert problems["('op', 'Runner')"].startswith("unreadable key")
    with pytest.raises(ParseError, match=r"odd\.json:\d+: entry .*pass strict=False"):
        profkit.read_cache(odd, strict=True)


def test_older_formats(tmp_path):
    """0.6.x: values [runner, tactic] (no policy); before 0.6.13 keys had no extras."""
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"_metadata": {"flashinfer_version": "0.6.12"},
                               "('fp8_gemm', 'CublasFp8GemmRunner', ((1, 8, 64), (1, 64, 32)))": ["CublasFp8GemmRunner", 3]}))
    w = profkit.read_cache(old).winners.iloc[0]
    assert (w["op"], w["bucket"], w["tactic"], w["extras"]) == ("fp8_gemm", 8, "3", "")
    assert pd.isna(w["l2_cache_policy"])


def test_keys_are_parsed_never_evaluated():
    fields = key_fields("('bf16_gemm', 'CublasltBf16GemmRunner', ((64, 4096), (4096, 4096), (0,), (0,), (-1, 4096), "
                        "(41943040,)), (64, 4096, 4096, torch.bfloat16, 0))")
    assert fields["extras"] == "(64, 4096, 4096, torch.bfloat16, 0)" and fields["profile"].startswith("((64, 4096)")
    for hostile in ("__import__('os').system('echo pwned')", "('a', 'b', ((1,),), (open('x'),))", "(lambda: 1)()"):
        with pytest.raises(ValueError):
            key_fields(hostile)
    with pytest.raises(ValueError):
        literal("__import__('os')")
    assert literal("(4, ((12, 43),))") == (4, ((12, 43),)) and literal("torch.float8_e4m3fn") == "torch.float8_e4m3fn"


def test_bucket_rules():
    frame = pd.DataFrame({
        "op": ["fp8_gemm", "moe", "moe", "single", "empty"],
        "profile": ["((1, 256, 64), (1, 64, 32))", "((8, 64), (8, 64), (-1, 64))", "((16, 64), (16, 64), (-1, 64))",
                    "((4, 8), (8, 4))", "((), ())"],
    })
    out = add_buckets(frame)
    assert out["bucket"].tolist()[:4] == [256, 8, 16, 4] and pd.isna(out["bucket"].iloc[4])
    assert out["bucket_rule"].tolist() == ["spec: input 0 dim -2", "varies: input 0 dim 0", "varies: input 0 dim 0",
                                           "assumed: input 0 dim -2", "unknown"]
    assert out["bucket_key"].tolist()[:3] == ["(256,)", "(8,)", "(16,)"]
