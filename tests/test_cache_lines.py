"""The first screen's "your cache did nothing" lines: one per mismatch, every ignored file named in it."""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd

from profkit.report import _main


def test_files_ignored_for_the_same_mismatch_share_one_line_and_each_is_named():
    idle = pd.DataFrame({
        "why": ["ignored", "ignored", "ignored", "defaults"],
        "cache": ["a/cache.json", "b/cache.json", "c/cache.json", "d.json"],
        "detail": ["gpu: saved=H100 vs current=H200", "gpu: saved=H100 vs current=H200",
                   "gpu: saved=H200 vs current=H100", "cache"],
        "where": ["a/debug.log", "b/debug.log", "c/debug.log", "step-x"],
        "times": [1, 3, 1, 0]})
    lines = _main.cache_lines(SimpleNamespace(idle_caches=idle))
    assert len(lines) == 3
    assert lines[0].startswith("WARNING your cache did nothing: FlashInfer ignored 2 cache files created in a "
                               "different environment (gpu: saved=H100 vs current=H200)")
    assert "`a/cache.json` (`a/debug.log`, 1 time); `b/cache.json` (`b/debug.log`, 3 times)" in lines[0]
    assert "ignored 1 cache file created" in lines[1] and "`c/cache.json`" in lines[1]
    assert lines[2].startswith("WARNING `d.json` changed nothing: state `cache` loaded it")
