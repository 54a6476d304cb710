"""The cache files written beside captures, read by the catalogue in one call: each file as if read alone."""

from __future__ import annotations

import shutil

import pandas as pd

from profkit import catalog
from profkit.sources.cache import read_cache

from conftest import DATA

MODELS = ("qwen3-30b-a3b-r0", "mixtral-8x7b-r0")  # two MoE geometries: pooled, their profiles vary in more dims


def test_each_cache_file_read_together_keeps_the_bucket_dimension_of_its_own_profiles(tmp_path):
    for model in MODELS:
        for name in ("capture", "cache.json"):
            source = DATA / "h200-moe" / model / name
            (shutil.copytree if source.is_dir() else shutil.copy)(source, tmp_path / model / name)
    together = catalog.open(tmp_path).cache_winners
    assert list(dict.fromkeys(together["file"].map(lambda f: f.split("/")[-2]))) == sorted(MODELS)  # walk order
    pooled = read_cache([str(tmp_path / m / "cache.json") for m in MODELS]).winners
    assert pooled["bucket_rule"].nunique() == 1 and "input 1" in pooled["bucket_rule"].iloc[0]  # what pooling infers
    for model in MODELS:
        alone = read_cache(str(tmp_path / model / "cache.json")).winners
        mine = together[together["file"].str.contains(model, regex=False).to_numpy(dtype=bool)]
        columns = ["op", "profile", "runner", "tactic", "bucket", "bucket_key", "bucket_rule"]
        pd.testing.assert_frame_equal(mine[columns].reset_index(drop=True), alone[columns].reset_index(drop=True))
        assert mine["capture_run_id"].nunique() == 1
