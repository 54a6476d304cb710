"""The report's ranks section: the rank questions answered in memory per GPU (profkit.analysis.ranks.repeated_tunings,
equal to the DuckDB path of `profkit ranks` on the shipped captures), on the report model, formatted by the section
only where a GPU has two runs of one op and shape, and drawn by profkit.views.ranks.plot_rank_picks."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from conftest import DATA, TEST_DATA
from profkit.analysis import _rank_reduce as reduce_in_memory
from profkit.analysis import ranks as judge

H200 = "NVIDIA H200"
H100 = "NVIDIA H100 80GB HBM3"
# Three fresh-process tunings of Qwen3-30B-A3B's MoE layer on the H200, two on the H100 (real data).
QWEN = [DATA / "h200-moe" / "qwen3-30b-a3b-r0", DATA / "h200-moe" / "qwen3-30b-a3b-r2",
        DATA / "h200-moe" / "qwen3-30b-a3b-step" / "capture", DATA / "h100-moe" / "qwen3-30b-a3b-r0",
        DATA / "h100-moe" / "qwen3-30b-a3b-step" / "capture"]


@pytest.fixture(scope="module")
def model():
    """The report model of the five Qwen tunings (two GPUs), each GPU's part analysed once."""
    import profkit
    from profkit.report._model import build_model

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return build_model(profkit.open(QWEN))


def _context(model):
    from profkit import report

    return report.ReportContext(data=model.data, results=model.results, gpus=model.gpus, ranks=model.ranks)


def test_in_memory_frames_equal_the_duckdb_path_on_the_shipped_captures(tmp_path):
    from profkit import schema
    from profkit.analysis import winners
    from profkit.query import ranks as q
    from profkit.query.fleet import reduce

    folders = [DATA / "h200-moe", DATA / "h200-engine-like"]
    reduced = reduce(folders, tmp_path / "parts", workers=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        candidates = schema.concat(schema.load(p) for p in folders).candidates.assign(gpu=H200)
    decisions = winners(candidates).assign(gpu=H200)
    times = reduce_in_memory.timings(candidates)

    key = ["op", "profile", "runner", "tactic"]
    got = reduce_in_memory.pick_stats(decisions, times).sort_values(key).reset_index(drop=True)
    want = q.pick_stats(reduced).sort_values(key).reset_index(drop=True)
    assert len(got) == len(want) > 100
    for column in ("tunings", "ranks", "first_seen", "bucket_tunings", "bucket_ranks", "timed_runs", "n_paired", "best"):
        assert got[column].astype("int64").tolist() == want[column].astype("int64").tolist(), column
    for column in ("geo_ms", "mean_log_ratio", "sd_log_ratio"):
        np.testing.assert_allclose(got[column].astype(float), want[column].astype(float), rtol=1e-9, atol=1e-12)

    speed_key = ["rank", "op"]
    got = reduce_in_memory.rank_speed(times).sort_values(speed_key, na_position="first").reset_index(drop=True)
    want = q.rank_speed(reduced).sort_values(speed_key, na_position="first").reset_index(drop=True)
    assert got["rank"].tolist() == want["rank"].tolist() and (got["n_buckets"] == want["n_buckets"]).all()
    np.testing.assert_allclose(got["mean_log_ratio"], want["mean_log_ratio"], rtol=1e-9)

    got = judge.signature_groups(reduce_in_memory.signatures(decisions))
    want = judge.signature_groups(q.signatures(reduced))
    assert [list(r) for r in got["ranks"]] == [list(r) for r in want["ranks"]]
    assert got[["differs", "examples"]].values.tolist() == want[["differs", "examples"]].values.tolist()


def test_the_model_answers_each_gpu_on_its_own(model):
    assert set(model.ranks) == {H200, H100}
    h200, h100 = model.ranks[H200], model.ranks[H100]
    assert h200.tuners["label"].tolist() == ["qwen3-30b-a3b-r0", "qwen3-30b-a3b-r2", "qwen3-30b-a3b-step"]
    assert h100.tuners["label"].tolist() == ["qwen3-30b-a3b-r0", "qwen3-30b-a3b-step"]
    for gpu, answers, tuners in ((H200, h200, 3), (H100, h100, 2)):  # never the five pooled
        a = answers.agreement
        assert len(a) == 20 and (a["gpu"] == gpu).all() and (a["ranks"] == tuners).all() and (a["tunings"] == tuners).all()
        assert len(answers.tunings) == 20 * tuners and (answers.tunings["gpu"] == gpu).all()
        # A bucket's picks are what its tunings chose: the agreement counts the tuning rows.
        picks = answers.tunings.groupby("bucket")[["runner", "tactic"]].apply(lambda g: len(g.drop_duplicates()))
        assert a.set_index("bucket")["distinct_picks"].sort_index().tolist() == picks.sort_index().tolist()
        agree = a["distinct_picks"] == 1
        assert a.loc[agree, "verdict"].isna().all() and a.loc[~agree, "verdict"].notna().all()
        shapes = answers.shapes.iloc[0]
        assert shapes["disagree"] == int((~agree).sum()) and shapes["worst_regret_pct"] == a["worst_regret_pct"].max()


def test_the_section_formats_the_model_per_gpu(model):
    from profkit import report

    section = report.ranks_section(_context(model))
    assert section.page == "repeats" and [f.name for f in section.figures] == [
        "rank_picks_nvidia-h200", "rank_picks_nvidia-h100-80gb-hbm3"]
    h200 = model.ranks[H200].shapes.iloc[0]
    assert (f"**{H200}**: 1 op shape tuned by two runs or more (3 tuners); the tunings disagree in "
            f"{h200['disagree']} of 20 buckets") in section.text
    assert f"worst regret {h200['worst_regret_pct']:+.2f}%" in section.text
    assert "regret" in section.text and "top-1 agreement" in section.text and "flip rate" in section.text
    shown = {t.name: t for t in section.tables}
    assert len(shown["rank_agreement_nvidia-h200"].frame) == 20 and "tuners" in shown["rank_shapes_nvidia-h200"].frame
    assert shown["rank_groups_nvidia-h100-80gb-hbm3"].frame["ranks"].tolist() == ["qwen3-30b-a3b-r0", "qwen3-30b-a3b-step"]
    fig = section.figures[0].draw()
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()][1:] == ["qwen3-30b-a3b-r0", "qwen3-30b-a3b-r2",
                                                                        "qwen3-30b-a3b-step"]


def test_no_section_without_two_runs_of_one_shape():
    import profkit
    from profkit import report
    from profkit.report._model import build_model

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        m = build_model(profkit.open([DATA / "h200-moe" / "qwen3-30b-a3b-r0"]))
    assert m.ranks[H200].agreement.empty and m.ranks[H200].tunings.empty
    assert report.ranks_section(_context(m)) is None
    assert report.ranks_section(report.ReportContext(data=m.data, results=m.results)) is None  # no model: nothing


def test_two_ranks_of_one_debug_log_that_agree_form_one_group():
    import profkit
    from profkit import report
    from profkit.report._model import build_model

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        m = build_model(profkit.open([TEST_DATA / "log_interleaved_ranks" / "server.log"]))
    (answers,) = m.ranks.values()
    assert answers.tuners["label"].tolist() == ["log_interleaved_ranks/server.log rank 0",
                                                "log_interleaved_ranks/server.log rank 1"]
    assert answers.groups["n_ranks"].tolist() == [2] and answers.groups["examples"].tolist() == [""]
    shape = answers.shapes.iloc[0]
    assert (shape["disagree"], shape["top1_agreement"], shape["flip_rate"], shape["groups"]) == (0, 1.0, 0.0, 1)
    text = report.ranks_section(_context(m)).text
    assert "the tunings disagree in 0 of 3 buckets" in text and "log_interleaved_ranks/server.log rank 0, " in text


def _tunings(rows) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=["tuner", "bucket", "tactic", "best", "regret_pct", "verdict"])
    return frame.assign(op="toy_gemm", shape="N=8 K=8", runner="ToyRunner", label=frame["tuner"].map("rank {}".format))


def test_plot_rank_picks_colours_each_tuner_pick():
    from profkit.views.ranks import _FACE, _rank_picks_info, plot_rank_picks

    tunings = _tunings([(0, 1, "a", True, 0.0, None), (1, 1, "a", True, 0.0, None),
                        (0, 2, "a", True, 0.0, None), (1, 2, "b", False, 0.4, "within_noise"),
                        (0, 4, "c", False, 3.0, "slower"), (1, 4, "d", True, 0.0, None),
                        (1, 4, "c", False, 3.0, "slower")])  # rank 1 tuned bucket 4 twice, picking two tactics
    info = _rank_picks_info(tunings)
    assert info.blocks == ("toy_gemm  N=8, K=8",) and info.tuners == (("rank 0", "rank 1"),)
    assert (info.differ, info.costly) == (2, 1)
    assert sorted(info.cells[0]) == sorted([(0, "best", 1, 0.0), (1, "best", 1, 0.0), (0, "best", 1, 0.0),
                                            (1, "other", 1, 0.4), (0, "slower", 1, 3.0), (1, "slower", 2, 3.0)])
    ax = plot_rank_picks(tunings, title="toy").axes[0]
    faces = [tuple(c) for cells in ax.collections for c in cells.get_facecolor()]  # the cells: PolyCollections
    from matplotlib.colors import to_rgba

    assert faces.count(to_rgba(_FACE["slower"])) == 2 and faces.count(to_rgba(_FACE["other"])) == 1
    assert sorted(t.get_text() for t in ax.texts if not t.get_text().startswith("bold")) == ["+3.0", "+3.0"]
    assert "2 buckets with more than one pick, 1 where one costs beyond noise" in ax.get_title()


def test_plot_rank_picks_warns_on_nothing_to_draw():
    from profkit.views.ranks import plot_rank_picks

    with pytest.warns(UserWarning, match="two runs or more"):
        plot_rank_picks(_tunings([]))
