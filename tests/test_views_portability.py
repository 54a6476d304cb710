"""views.plot_portability: the info record with ==, the drawing read back through its artists, ax=, errors."""

from __future__ import annotations

import io

import pandas as pd
import pytest
from matplotlib.figure import Figure

import profkit
from profkit import views
from profkit.views._portability import PortabilityInfo, PortabilityPanel, _portability_info

H200, H100 = "NVIDIA H200", "NVIDIA H100 80GB HBM3"
OP = "CuteDslFusedMoE::run_moe_sm90::Swiglu"
QWEN = "E=128 top_k=8 H=2048 I=768"


def point(m, routing, regret, verdict, vs_default=-0.125, vs_verdict="faster", shape=QWEN, source=H200):
    return {"op": OP, "shape": shape, "routing": routing, "m": m, "source_gpu": source, "target_gpu": H100,
            "regret": regret, "regret_lo": regret - 0.0625, "regret_hi": regret + 0.0625, "regret_verdict": verdict,
            "vs_default": vs_default, "vs_default_verdict": vs_verdict}


def carried(*extra) -> pd.DataFrame:
    return pd.DataFrame([point(1, "tuner", 0.0, "same_pick"), point(64, "tuner", 0.25, "slower"),
                         point(64, "balanced", 0.03125, "within_noise", 0.03125, "within_noise"), *extra])


def save(fig: Figure) -> None:
    fig.savefig(io.BytesIO(), format="png")


def test_info_holds_one_panel_per_shape_in_percent_sorted_by_m_and_routing():
    info = _portability_info(carried(), source_gpu=None, target_gpu=None, labels={QWEN: "qwen3-30b-a3b"})
    assert info == PortabilityInfo(source_gpu=H200, target_gpu=H100, panels=(PortabilityPanel(
        op=OP, shape=QWEN, title=f"qwen3-30b-a3b\n{QWEN}", ms=(1, 64, 64), routings=("tuner", "balanced", "tuner"),
        regret_pct=(0.0, 3.125, 25.0), regret_lo_pct=(-6.25, -3.125, 18.75), regret_hi_pct=(6.25, 9.375, 31.25),
        regret_verdicts=("same_pick", "within_noise", "slower"), vs_default_pct=(-12.5, 3.125, -12.5),
        vs_default_verdicts=("faster", "within_noise", "faster")),))


def test_drawing_colours_only_beyond_noise_and_names_the_worst_point():
    fig = views.plot_portability(carried(), title="the takeaway")
    top, bottom = fig.axes
    assert fig._suptitle.get_text() == "the takeaway"
    texts = [t.get_text() for t in top.texts]
    assert "1 slower, 0 faster, 1 same pick of 3" in texts
    assert [t.get_text() for t in bottom.texts] == ["2 faster, 0 slower of 3"]
    worst = [a for a in top.texts if a.get_text().startswith("+25% at M=64")]
    assert worst and worst[0].xy == (64, 25.0)
    colours = {line.get_markerfacecolor() for line in top.lines if line.get_marker() not in (None, "None", "")}
    assert colours == {views._portability.COLOURS["slower"], views._portability.COLOURS["within_noise"], "white"}
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert legend[:4] == ["slower beyond noise", "faster beyond noise", "within noise", "the same pick as the H100's"]
    assert "tuner routing" in legend and "balanced routing" in legend
    assert top.get_ylabel().startswith("vs the H100's own pick (%)")
    assert bottom.get_xlabel() == "M (tokens)"
    save(fig)


def test_panels_share_their_row_and_the_default_title_says_what_is_drawn():
    fig = views.plot_portability(carried(point(8, "tuner", -0.15, "faster", shape="E=8 top_k=2 H=4096 I=14336")))
    top = fig.axes[:2]  # a row's top axes first, then its bottom ones
    assert len(fig.axes) == 4 and len({a.get_ylim() for a in top}) == 1
    assert top[0].get_ylim()[0] <= -15 and top[0].get_ylim()[1] >= 25
    assert fig._suptitle.get_text().startswith("The H200's picks timed on the H100")
    save(fig)


def test_draws_into_a_given_axes_place():
    fig = Figure()
    left, right = fig.subplots(1, 2)
    assert views.plot_portability(carried(), ax=right) is fig
    assert not left.lines and not left.collections and not left.texts
    assert len(fig.axes) == 3  # the left Axes and the two rows in the right one's place
    save(fig)


def test_several_pairs_need_a_choice_and_an_absent_pair_is_named():
    two = carried(point(8, "tuner", 0.0, "same_pick", source="NVIDIA B200"))
    with pytest.raises(profkit.ProfkitError, match="several GPU pairs; pass source_gpu= and target_gpu="):
        views.plot_portability(two)
    assert len(views.plot_portability(two, source_gpu="NVIDIA B200").axes) == 2
    with pytest.raises(profkit.ProfkitError, match="no carried picks from NVIDIA A100"):
        views.plot_portability(two, source_gpu="NVIDIA A100")


def test_nothing_carried_warns_and_draws_an_empty_figure():
    with pytest.warns(UserWarning, match="no pick carried"):
        fig = views.plot_portability(carried().iloc[:0])
    assert len(fig.axes) == 1 and not fig.axes[0].lines
    save(fig)


def test_gpu_names_drop_vendor_and_memory():
    assert [views.gpu_name(g) for g in (H100, H200, "unknown GPU")] == ["H100", "H200", "unknown GPU"]


def test_panels_wrap_four_to_a_row_and_each_op_starts_its_own_rows():
    shapes = [f"E=8 top_k=2 H={h} I=14336" for h in (1024, 2048, 3072, 4096, 5120)]
    gemm = {**point(64, "", 0.25, "slower", shape="N=4096 K=4096"), "op": "fp8_gemm"}
    fig = views.plot_portability(carried(*[point(8, "tuner", 0.0, "same_pick", shape=s) for s in shapes], gemm))
    rows = sorted({round(a.get_position().y0, 3) for a in fig.axes}, reverse=True)
    assert len(rows) == 6  # MoE: 6 shapes in rows of 4 and 2; fp8_gemm: 1; each a top and a bottom row
    per_row = [sum(round(a.get_position().y0, 3) == y for a in fig.axes) for y in rows]
    assert per_row == [4, 4, 2, 2, 1, 1]
    assert [a.get_title() for a in fig.axes if a.get_title().startswith("fp8_gemm: ")] == ["fp8_gemm: N=4096, K=4096"]
    dense = next(a for a in fig.axes if a.get_title().startswith("fp8_gemm"))
    assert [t.get_text() for t in dense.texts if t.get_text().startswith("+25%")] == ["+25% at M=64"]  # no routing
    assert " routing" not in {t.get_text() for t in fig.legends[0].get_texts()}
    save(fig)
