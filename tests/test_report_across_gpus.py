"""The report's Across GPUs section: the portability figure and table, and the port's price read by the catalogue."""

from __future__ import annotations

import dataclasses
import json
import shutil

import pandas as pd
import pytest

from profkit import catalog, report
from profkit.analysis.portability import PORT_PRICE_COLUMNS, carried_picks, port_price, portability
from profkit.analysis.shortlist import shortlist_reach
from profkit.catalog import partition
from profkit.catalog.ports import PORT_PRICE_COLUMNS as CATALOG_PRICE_COLUMNS
from profkit.report._main import port_price_table

from conftest import DATA

H200, H100 = "NVIDIA H200", "NVIDIA H100 80GB HBM3"
PORT = DATA / "h100-moe" / "qwen3-30b-a3b-port"


@pytest.fixture(scope="module")
def across(shipped_across):
    carried = carried_picks(partition.with_gpus(shipped_across.verify, shipped_across.runs))
    return report.ReportContext(data=shipped_across, results=None, carried=carried, portability=portability(carried),
                                port_price=port_price(shipped_across.port_prices))


def test_the_catalogue_reads_the_price_with_the_targets_fresh_process_tuning(shipped_across):
    p = shipped_across.port_prices.set_index("folder")
    assert sorted(p.index) == ["h100-moe/qwen3-30b-a3b-port", "h100-moe/qwen3-30b-a3b-port-top10"]
    assert p.loc["h100-moe/qwen3-30b-a3b-port-top10", "top_k"] == 10
    row = p.loc["h100-moe/qwen3-30b-a3b-port"]
    assert (row["model"], row["source_gpu"], row["target_gpu"], row["top_k"]) == ("qwen3-30b-a3b", H200, H100, 3)
    assert row["fresh_tune_from"] == "h100-moe/qwen3-30b-a3b-r0"
    assert row["fresh_tune_s"] == pytest.approx(87.113446, abs=1e-6)
    assert (row["port_cold_s"], row["tune_warm_s"]) == pytest.approx((24.410773, 18.487378), abs=1e-6)


def test_a_price_without_a_fresh_tuning_is_read_and_a_foreign_price_json_is_named(tmp_path):
    (tmp_path / "port" / "cold").mkdir(parents=True)
    shutil.copy(PORT / "price.json", tmp_path / "port" / "price.json")
    for name in ("port.json", "cache.json"):
        shutil.copy(PORT / "cold" / name, tmp_path / "port" / "cold" / name)
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "price.json").write_text(json.dumps({"usd": 3}))
    with pytest.warns(UserWarning, match="could not be read"):
        c = catalog.open(tmp_path)
    assert [pr for pr in c.problems if "other/price.json" in pr and "port_cold_s and tune_s" in pr]
    row = port_price(c.port_prices).iloc[0]
    assert row["source_gpu"] == H200 and pd.isna(row["fresh_tune_s"]) and pd.isna(row["port_over_fresh_tune"])
    assert row["port_over_tune_without_compiles"] == pytest.approx(3.0086757 / 18.4873782)


def test_port_price_divides_the_port_by_each_tuning():
    prices = pd.DataFrame([{"model": "m", "source_gpu": H200, "target_gpu": H100, "top_k": 3, "port_cold_s": 20.0,
                            "port_warm_s": 2.0, "tune_s": 40.0, "tune_warm_s": 16.0, "fresh_tune_s": 80.0}])
    prices = prices.reindex(columns=list(CATALOG_PRICE_COLUMNS)).astype(CATALOG_PRICE_COLUMNS)  # as the catalogue's
    p = port_price(prices)
    assert list(p.columns) == list(PORT_PRICE_COLUMNS)
    assert p.iloc[0][["port_over_fresh_tune", "port_over_tune_without_compiles", "port_over_tune"]].tolist() == [
        0.25, 0.125, 0.5]
    assert port_price(prices.iloc[:0]).empty


def test_the_section_states_agreement_regret_and_price_with_the_figure_and_tables(across):
    s = report.across_gpus_section(across)
    assert "the same pick as the target's own at 18% of 312 points" in s.text
    assert "slower than the target's own pick beyond noise at 14, faster at 4; at worst +29.3% at mixtral-8x7b" in s.text
    assert ("| qwen3-30b-a3b | H200 -> H100 | 3 | 24.4 s | 87.1 s | 0.28x | 3.0 s / 18.5 s (0.16x) | "
            "`h100-moe/qwen3-30b-a3b-port` |") in s.text.splitlines()
    assert [t.name for t in s.tables] == ["portability", "carried_picks", "port_price"]
    assert "tuned on NVIDIA H100 80GB HBM3 and run on NVIDIA H200: the same pick as the target's own at 17% of 336" in s.text
    assert [f.name for f in s.figures] == ["portability_H100_on_H200", "portability_H200_on_H100"]  # both ways
    assert s.figures[0].draw()._suptitle.get_text() == (
        "The H100's picks on the H200: slower than the H200's own pick beyond noise at 5 of 336 points (worst +14%), "
        "faster at 7; slower than the H200's default at none")
    fig = s.figures[1].draw()
    assert fig._suptitle.get_text() == ("The H200's picks on the H100: slower than the H100's own pick beyond noise at "
                                        "14 of 312 points (worst +29%), faster at 4; slower than the H100's default "
                                        "at none")
    assert [a.get_title() for a in fig.axes[:3]] == [  # the top row first
        "gpt-oss-120b\nE=128 top_k=4 H=2880 I=2880", "mixtral-8x7b\nE=8 top_k=2 H=4096 I=14336",
        "qwen3-30b-a3b\nE=128 top_k=8 H=2048 I=768"]


def test_the_section_says_how_long_a_ports_shortlist_must_be(across, shipped_across):
    short = shortlist_reach(partition.candidates_with_gpus(shipped_across))
    s = report.across_gpus_section(dataclasses.replace(across, shortlist=short))
    assert [t.name for t in s.tables][-1] == "shortlist_reach"
    for source, target in ((H200, H100), (H100, H200)):
        rows = short[(short["source_gpu"] == source).to_numpy() & (short["target_gpu"] == target).to_numpy()]
        three, ten = (rows[rows["top_k"] == k].iloc[0] for k in (3, 10))
        assert 0 < three["own_in_shortlist"] < ten["own_in_shortlist"] <= ten["points"]  # a longer list holds more
        line = next(x for x in s.text.splitlines() if f"the {source.split()[1]}'s list on the {target.split()[1]}" in x)
        assert (f"own pick is in the top-3 at {three['own_in_shortlist']} of {three['points']} points (the best of "
                f"them at worst {three['worst_regret']:+.1%}), in the top-10 at {ten['own_in_shortlist']}") in line


def test_the_title_says_none_when_nothing_is_slower():
    rows = pd.DataFrame([{"source_gpu": H100, "target_gpu": H200, "points": 20, "slower_than_own": 0,
                          "faster_than_own": 1, "worst_regret": float("nan"), "slower_than_default": 2}])
    assert report.across_gpus_title(rows) == ("The H100's picks on the H200: slower than the H200's own pick beyond "
                                              "noise at 0 of 20 points, faster at 1; slower than the H200's default "
                                              "at 2")


def test_no_section_without_carried_picks_or_a_price(shipped_h200):
    assert report.across_gpus_section(report.ReportContext(data=shipped_h200, results=None)) is None


def test_the_report_draws_the_figure_in_its_pipeline(tmp_path):
    """One model's H200 capture beside its H100 capture and cross verify: what the report needs for the figure."""
    data = catalog.open([DATA / "h200-moe" / "qwen3-30b-a3b-r0", DATA / "h100-moe" / "qwen3-30b-a3b-r0",
                         DATA / "h100-moe" / "qwen3-30b-a3b-verify-cross"])
    written = report.build_report(data, tmp_path / "r", only=["portability_H200_on_H100"], index=False, progress=False)
    assert [p.name for p in written] == ["portability_H200_on_H100.png"]
    assert written[0].stat().st_size > 50_000


def test_a_dense_port_that_timed_its_jit_builds_is_priced_without_them_too():
    prices = pd.DataFrame([{"model": "llama3-8b", "dtype": "fp8", "source_gpu": H200, "target_gpu": H100, "top_k": 10,
                            "port_cold_s": 70.0, "fresh_tune_s": 140.0, "jit_builds": "gemm", "jit_build_s": 35.0},
                           {"model": "llama3-8b", "dtype": "bf16", "source_gpu": H200, "target_gpu": H100, "top_k": 10,
                            "port_cold_s": 80.0, "fresh_tune_s": 160.0, "jit_builds": "tinygemm2"}])
    p = port_price(prices.reindex(columns=list(CATALOG_PRICE_COLUMNS)).astype(CATALOG_PRICE_COLUMNS))
    assert p["port_over_fresh_tune_without_jit"].iloc[1] == 0.25 and pd.isna(p["port_over_fresh_tune_without_jit"].iloc[0])
    rows = [line for line in port_price_table(p) if line.startswith("| llama3-8b")]
    assert "| 70.0 s, with FlashInfer's one-time JIT builds (`gemm`: 35.0 s) | 140.0 s | 0.50x | 35.0 s, without the " \
           "JIT builds (0.25x) |" in rows[1]
    assert "| 80.0 s, with FlashInfer's one-time JIT builds (`tinygemm2`) | 160.0 s | 0.50x |  |" in rows[0]
