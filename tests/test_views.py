"""profkit.views: info records with ==, drawings read back through their artists, ax= composition, smoke."""

from __future__ import annotations

import ast
import base64
import inspect
import io
import sys
import warnings

import numpy as np
import pandas as pd
import pytest
from matplotlib.collections import PathCollection
from matplotlib.colors import to_hex
from matplotlib.figure import Figure

import profkit
from profkit import analysis, schema, views
from profkit.views import _candidates, _compare, _speedup, _step, _tactic_map, _tuning

from conftest import DATA, ROOT

P = "(({m}, 64), (64, 32))"


def speedups(rows):
    """speedup_vs_default output from (bucket, runner, tactic, time, default) tuples."""
    out = []
    for i, (bucket, runner, tactic, time_ms, default_ms) in enumerate(rows):
        p = P.format(m=bucket)
        out += [{"run_id": "r1", "call": 1, "op": "gemm", "profile": p, "bucket": bucket, "runner": runner,
                 "tactic": tactic, "time_ms": time_ms, "seq": 2 * i, "source": "flashinfer", "timing": "eager"},
                {"run_id": "r1", "call": 1, "op": "gemm", "profile": p, "bucket": bucket, "runner": runner,
                 "tactic": "-1", "time_ms": default_ms, "seq": 2 * i + 1, "source": "default", "timing": "eager"}]
    frame = schema.frame("candidates", out)
    # A 2% band measured by repeats, so the comparison rule can judge one run's winner against its default.
    return analysis.speedup_vs_default(frame, noise=analysis.noise(frame).assign(noise_pct=2.0, noise_source="repeats"))


def save(fig: Figure) -> None:
    fig.savefig(io.BytesIO(), format="png")


def cells_of(ax) -> list[tuple[float, float, tuple, str | None]]:
    """(left, width, face colour, hatch) of each heat-map cell (``views._style.cells``' collections), left to right."""
    out = [(path.vertices[0][0], path.vertices[1][0] - path.vertices[0][0], tuple(face), cells.get_hatch())
           for cells in ax.collections for path, face in zip(cells.get_paths(), cells.get_facecolor())]
    return sorted(out, key=lambda cell: cell[0])


# -- tactic map -------------------------------------------------------------------------------------
def test_tactic_map_info():
    s = speedups([(1, "CublasFp8GemmRunner", "3", 0.010, 0.011), (2, "CudnnFp8GemmRunner", "[0, [[12, 5]]]", 0.011, 0.010)])
    info = _tactic_map._tactic_map_info(s, labels={"N=32 K=64": "toy"}, batch_sizes=[2])
    assert info == _tactic_map.TacticMapInfo(
        rows=("gemm  toy (N=32, K=64)",), buckets=((1, 2),),
        winners=((("CublasFp8GemmRunner", "3"), ("CudnnFp8GemmRunner", "[0, [[12, 5]]]")),),
        cell_text=(("#3", "e0/c5"),), speedups=((pytest.approx(1.1), pytest.approx(10 / 11)),),
        slower_than_default=((2,),), batch_sizes=(2,), timing="gemm: eager", dropped_runs=0)


def test_tactic_map_draws_cells_flags_and_legend():
    info = _tactic_map.TacticMapInfo(rows=("gemm  a", "gemm  b"), buckets=((1, 2, 4), (4,)),
                                     winners=((("A", "0"), ("A", "1"), ("B", "0")), (("A", "0"),)),
                                     cell_text=(("#0", "#1", "#0"), ("#0",)), speedups=((1.1, 1.0, 0.9), (1.2,)),
                                     slower_than_default=((4,), ()), batch_sizes=(3,), timing="gemm: eager")
    fig = Figure()
    ax = fig.add_subplot()
    _tactic_map._draw_tactic_map(info, ax)
    cells = cells_of(ax)
    assert len(cells) == 4
    assert [left for left, _, _, hatch in cells if hatch] == [1.5]  # bucket 4, the third cell
    assert [t.get_text() for t in ax.get_yticklabels()] == ["gemm  b", "gemm  a"]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == ["A", "B", "slower than default beyond noise (flashinfer#3537)"]  # one entry per runner
    assert ax.get_legend().get_title().get_text().endswith("\ntimed gemm: eager")
    # One equal cell per bucket on a categorical axis labelled with M.
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "2", "4"] and ax.get_xlabel() == "bucket (M, tokens)"
    assert {(left, width) for left, width, _, _ in cells} == {(-0.5, 1.0), (0.5, 1.0), (1.5, 1.0)}
    assert [t.get_text() for t in ax.texts if t.get_text().startswith("bs")] == ["bs 3"]
    assert ax.lines[0].get_xdata()[0] == 2  # batch 3 runs in bucket 4, the third cell
    save(fig)


def test_tactic_map_empty_warns():
    with pytest.warns(UserWarning, match="no winners"):
        fig = views.plot_tactic_map(speedups([]))
    save(fig)


def test_tactic_map_into_given_axes():
    fig = Figure()
    left, right = fig.subplots(1, 2)
    out = views.plot_tactic_map(speedups([(1, "A", "0", 0.01, 0.02)]), ax=right)
    assert out is fig
    assert not left.patches and not left.lines and not left.collections and not left.texts
    assert len(cells_of(right)) == 1
    save(fig)


# -- candidate spread ----------------------------------------------------------------------------
def toy_candidates():
    rows = []
    for b in (1, 2):
        p = P.format(m=b)
        for tactic, t in (("0", 0.010), ("1", 0.012), ("2", float("nan"))):
            rows.append({"run_id": "r1", "op": "gemm", "profile": p, "bucket": b, "runner": "A", "tactic": tactic,
                         "time_ms": t * b, "source": "flashinfer", "status": "ok" if t == t else "failed"})
        rows.append({"run_id": "r1", "op": "gemm", "profile": p, "bucket": b, "runner": "A", "tactic": "-1",
                     "time_ms": 0.011 * b, "source": "default"})
    return schema.frame("candidates", rows)


def test_candidate_spread_info_and_drawing():
    info = _candidates._candidate_spread_info(toy_candidates(), highlight=2)
    assert info.buckets == (1, 2) and info.runners == ("A",) and info.dropped == 2
    assert info.points == ((1, "A", 1.0), (1, "A", pytest.approx(1.2)), (2, "A", 1.0), (2, "A", pytest.approx(1.2)))
    assert info.winners == ((1, 1.0), (2, 1.0)) and info.defaults == ((1, pytest.approx(1.1)), (2, pytest.approx(1.1)))
    with pytest.warns(UserWarning, match="2 candidates omitted"):
        fig = views.plot_candidates(toy_candidates(), highlight=2)
    ax = fig.axes[0]
    assert len(ax.collections[0].get_offsets()) == 4  # the runner's points
    assert ax.collections[1].get_offsets().tolist() == [[1.0, 1.0], [2.0, 1.0]]  # winner stars
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["A", "winner", "default (runners[0], tactic -1)"]
    assert "2 candidates without a finite time" in ax.texts[-1].get_text()
    save(fig)


def test_candidate_selection_errors_name_the_choices():
    two = pd.concat([toy_candidates(), toy_candidates().assign(profile="((1, 64), (64, 48))")])
    with pytest.raises(profkit.ProfkitError, match="pass shape= one of N=32 K=64, N=48 K=64"):
        views.plot_candidates(two)


# -- speedup curve ---------------------------------------------------------------------------------
def test_speedup_info_and_slower_markers():
    s = speedups([(1, "A", "0", 0.010, 0.012), (2, "A", "0", 0.010, 0.0099), (4, "A", "0", 0.010, 0.009)])
    info = _speedup._speedup_info(s)
    assert info == _speedup.SpeedupInfo(
        series=(_speedup.SpeedupSeries(label="gemm  N=32, K=64", buckets=(1, 2, 4),
                                       speedups=(pytest.approx(1.2), pytest.approx(0.99), pytest.approx(0.9)),
                                       slower=(False, True, True), within_noise=(False, True, False)),),
        noise_pct=2.0, timing="gemm: eager")
    fig = views.plot_speedup(s)
    ax = fig.axes[0]
    assert ax.lines[-1].get_xydata()[:, 0].tolist() == [1, 2, 4]
    beyond, tie = ax.collections[:2]  # colour only beyond noise: the tie within noise is hollow and grey
    assert beyond.get_offsets()[:, 0].tolist() == [4] and tie.get_offsets()[:, 0].tolist() == [2]
    assert tuple(tie.get_facecolors()[0][:3]) == (1.0, 1.0, 1.0)
    assert tuple(beyond.get_facecolors()[0][:3]) != (1.0, 1.0, 1.0)
    texts = [t.get_text() for t in ax.get_legend().get_texts()]
    assert texts == ["noise band ±2.0% (median)", "gemm  N=32, K=64", "slower than default, beyond noise (flashinfer#3537)",
                     "slower than default, within noise (a tie)"]
    # No legend entry for a marker that is not drawn.
    fig = views.plot_speedup(speedups([(1, "A", "0", 0.010, 0.0099)]))
    assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()][-1] == "slower than default, within noise (a tie)"
    # The switches a grid of panels needs: no legend, no note, its own title.
    fig = views.plot_speedup(s, legend=False, note=False, title="one shape")
    assert fig.axes[0].get_legend() is None and not fig.axes[0].texts and fig.axes[0].get_title() == "one shape"
    save(fig)


# -- tuning -----------------------------------------------------------------------------------------
def breakdown():
    return pd.DataFrame({"run_id": "r1", "op": "gemm", "shape": ["N=1 K=1", "N=1 K=1", "N=2 K=2"],
                         "bucket": [1, 2, 1], "measure_s": [1.0, 2.0, 0.5], "prep_s": [3.0, 1.0, 0.5],
                         "jit_s": [0.0, 0.0, 0.0], "other_s": [0.1, 0.1, 0.0], "n_candidates": [10, 12, 5]})


def test_tuning_time_info_and_bars():
    info = _tuning._tuning_time_info(breakdown())
    assert info == _tuning.TuningTimeInfo(
        title="Where tuning time went, per op and shape", bars=("N=1, K=1", "N=2, K=2"),
        seconds=(("measure_s", (3.0, 0.5)), ("prep_s", (4.0, 0.5)), ("jit_s", (0.0, 0.0)),
                 ("other_s", (pytest.approx(0.2), 0.0))),
        totals=(pytest.approx(7.2), 1.0), n_candidates=(22, 5), per="op",
        takeaway="gemm: 1.0-7.2 s per shape, 55% runner prep", ops=("gemm", "gemm"))
    fig = views.plot_tuning_time(breakdown())
    ax = fig.axes[0]
    assert len(ax.patches) == 6  # 3 non-zero phases x 2 bars; JIT is all zero and not drawn
    assert [t.get_text() for t in fig.legends[0].get_texts()] == [
        "measure (candidates timed)", "runner prep (before its first candidate)", "other (inputs, bookkeeping)"]
    assert fig.get_suptitle() == "gemm: 1.0-7.2 s per shape, 55% runner prep"  # computed: (4.0 + 0.5) / 8.2
    assert [t.get_text() for t in ax.texts][:3] == ["7.2 s, 22 cand.", "1.0 s, 5 cand.", "gemm"]  # the op heads its bars
    assert [t.get_text() for t in ax.get_yticklabels()] == ["N=1, K=1", "N=2, K=2"]
    by_bucket = views.plot_tuning_time(breakdown(), per="bucket", shape="N=1 K=1")
    assert [t.get_text() for t in by_bucket.axes[0].get_xticklabels()] == ["1", "2"]
    with pytest.raises(profkit.ProfkitError, match="needs one op and shape, found 2"):
        views.plot_tuning_time(breakdown(), per="bucket")
    save(fig)


def moe_bill():
    """A fused-MoE tuning call per bucket: two buckets compile (tall), JIT and the rest a few ms."""
    return pd.DataFrame({"run_id": "r1", "op": "moe", "shape": "E=8 top_k=2", "bucket": [1, 2, 4, 8, 16],
                         "measure_s": [12.0, 3.0, 11.0, 3.0, 3.0], "prep_s": [1.0, 0.0, 0.0, 0.0, 0.0],
                         "jit_s": [0.01, 0.0, 0.0, 0.0, 0.0], "other_s": [0.02, 0.01, 0.01, 0.01, 0.01],
                         "n_candidates": 40})


def test_tuning_per_bucket_titles_its_takeaway_and_keys_only_what_it_draws():
    fig = views.plot_tuning_time(moe_bill(), per="bucket", title="mixtral")
    ax = fig.axes[0]
    # 33.07 s in all, 32 of them measuring; buckets 1 and 4 (13.03 + 11.01 s) are the fewest that hold half.
    assert fig.get_suptitle() == "mixtral: 33.1 s over 5 buckets, 97% measuring candidates\nbuckets 1 and 4 took 73% of it"
    # JIT (10 ms) and other (60 ms) would not show next to a 22 s bar: not drawn, not keyed, named in the note.
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["measure (candidates timed)",
                                                                   "runner prep (before its first candidate)"]
    assert not any("cuDNN" in t.get_text() for t in ax.get_legend().get_texts())  # an MoE has no cuDNN runner
    assert len(ax.patches) == 5 + 5
    assert ax.texts[-1].get_text().endswith("Too small to draw: JIT builds 10 ms, other 60 ms")
    grid = Figure()
    left, right = grid.subplots(1, 2)
    views.plot_tuning_time(moe_bill(), per="bucket", title="mixtral", ax=right)
    assert right.get_title(loc="left").startswith("mixtral: 33.1 s over 5 buckets") and not grid.get_suptitle()
    save(fig)


# -- comparisons ------------------------------------------------------------------------------------
def test_winner_flip_info_and_cells():
    stab = pd.DataFrame({"op": "gemm", "shape": "N=1 K=1", "bucket": [1, 2, 4, 8], "n_tunings": [3, 3, 1, 3],
                         "n_distinct": [1, 2, 1, 2], "flip_rate": [0.0, 2 / 3, np.nan, 1 / 3],
                         "within_noise": [True, True, True, False]})
    info = _compare._winner_flip_info(stab)
    assert info == _compare.WinnerFlipInfo(rows=("gemm  N=1, K=1",), buckets=((1, 2, 4, 8),),
                                           flip_rates=((0.0, pytest.approx(2 / 3), pytest.approx(np.nan, nan_ok=True),
                                                        pytest.approx(1 / 3)),),
                                           n_distinct=((1, 2, 1, 2),), n_tunings=(3,),
                                           beyond_noise=((False, False, False, True),))
    fig = views.plot_winner_flips(stab)
    ax = fig.axes[0]
    cells = cells_of(ax)
    assert len(cells) == 4 and [hatch for *_, hatch in cells] == [None, None, "...", None]  # bucket 4: tuned once
    # Colour only for the flip beyond noise; the tie within noise is grey.
    assert cells[1][2][:3] == pytest.approx(tuple(int(_compare._TIE[i:i + 2], 16) / 255 for i in (1, 3, 5)))
    reds = cells[3][2]
    assert reds[0] > reds[1] + 0.1  # red
    assert [t.get_text() for t in ax.texts if t.get_text().isdigit()] == ["2", "2"]
    assert ax.get_yticklabels()[0].get_text() == "gemm  N=1, K=1  (3 tunings)"
    assert ax.get_title().endswith("2 buckets flip, 1 beyond noise")
    save(fig)


def test_diff_and_rank_views_read_back():
    diff = pd.DataFrame({"op": "gemm", "shape": "N=1 K=1", "bucket": [1, 2, 4], "change": ["same", "tactic", "runner"],
                         "changed": [False, True, True], "cost_pct": [0.0, 1.5, -0.5], "priced_on": "candidates"})
    fig = views.plot_diff(diff, names=("r0", "r1"))
    ax = fig.axes[0]
    assert ax.get_title() == "r1 vs r0: 2 of 3 decisions changed"
    assert [c.get_offsets()[:, 1].tolist() for c in ax.collections] == [[0.0], [1.5], [-0.5]]
    ranks = pd.DataFrame({"op": "gemm", "shape": "N=1 K=1", "bucket": [1, 2, 4], "ranks": "0,1",
                          "agree": [True, False, False], "regret_pct": [0.0, 0.5, 3.0], "noise_pct": 1.0,
                          "within_noise": [True, True, False]})
    fig = views.plot_rank_divergence(ranks)
    ax = fig.axes[0]
    assert ax.get_title() == "Per-rank divergence: 2 of 3 buckets disagree, 1 beyond noise"
    sizes = [len(c.get_offsets()) for c in ax.collections[1:]]
    assert sizes == [1, 1, 1]  # agree, within noise, beyond noise
    save(fig)


def test_kernel_vs_e2e_bars():
    frame = pd.DataFrame({"kind": ["kernel", "e2e", "e2e"], "metric": ["gemm N=1 K=1", "output_tok_s", "mean_ttft_ms"],
                          "unit": ["ms/layer", "tok/s", "ms"], "baseline": [2.0, 100.0, 10.0],
                          "treatment": [1.0, 116.8, 10.1], "improvement_pct": [100.0, 16.8, -0.99]})
    fig = views.plot_kernel_vs_e2e(frame, labels={"N=1 K=1": "toy"}, note="Kernels: H200. Serving: B200.",
                                   kernel_where="H200", serving_where="B200, SGLang")
    kernel, serving = fig.axes  # never on one axis, each titled with where it was measured and what it adds up to
    assert kernel.get_title(loc="left").startswith("Kernels on H200, tuned vs default: +100.0%\n")
    assert serving.get_title(loc="left") == ("Serving on B200, SGLang, autotune on vs off:\n"
                                             "1 of 2 metrics improved (+16.8%)\nworse: mean TTFT -1.0%")
    assert [t.get_text() for t in kernel.get_yticklabels()] == ["gemm toy (N=1, K=1)"]
    assert [t.get_text() for t in serving.get_yticklabels()] == ["output throughput", "mean TTFT"]
    assert [round(p.get_width(), 2) for p in kernel.patches + serving.patches] == [100.0, 16.8, -0.99]
    assert serving.texts[0].get_text().startswith("+16.8%")
    # A negative bar's label starts right of zero, never over the names left of the axis.
    assert [t.xy[0] for t in serving.texts] == [16.8, 0.0] and all(t.get_ha() == "left" for t in serving.texts)
    assert fig.get_suptitle().endswith("Kernels: H200. Serving: B200.")
    assert kernel.get_position().y0 > serving.get_position().y1  # kernels above serving, both the figure's width
    long = frame.assign(metric=["CuteDslFusedMoE::run_moe_sm90::Swiglu E=128 top_k=4 H=2880 I=2880", "output_tok_s",
                                "mean_ttft_ms"])
    names = views.plot_kernel_vs_e2e(long).axes[0].get_yticklabels()
    assert [t.get_text() for t in names] == ["CuteDslFusedMoE::run_moe_sm90::Swiglu\nE=128 top_k=4 H=2880 I=2880"]
    save(fig)


def step_change_rows():
    """measured_step_change rows of two models: m1 judged by the rule, m2 one pass each (not measurable)."""
    rows = [("m1", "bf16", "decode", 1, -10.0, "faster"), ("m1", "bf16", "decode", 2, -20.0, "faster"),
            ("m1", "bf16", "decode", 4, -1.0, "within_noise"), ("m1", "bf16", "prefill", 512, 3.0, "slower"),
            ("m2", "fp8", "decode", 1, 2.0, "not_measurable"), ("m2", "fp8", "decode", 2, -4.0, "not_measurable"),
            ("m2", "fp8", "decode", 4, 1.0, "not_measurable")]
    frame = pd.DataFrame(rows, columns=["model", "dtype", "phase", "tokens", "delta_pct", "verdict"])
    measurable = frame["verdict"] != "not_measurable"
    return frame.assign(state="tuned", baseline_ms=10.0,
                        effect_lo=np.where(measurable, frame["delta_pct"] / 100 - 0.02, np.nan),
                        effect_hi=np.where(measurable, frame["delta_pct"] / 100 + 0.02, np.nan))


def test_step_change_panels_judged_apart_from_not_measurable_with_takeaways_and_drawn_keys():
    predicted = pd.DataFrame({"model": "m2", "dtype": "fp8", "tokens": [1, 2, 4], "op": "gemm",
                              "predicted_delta_ms": [-0.1, -0.3, -0.2]})
    fig = views.plot_step_change(step_change_rows(), predicted=predicted)
    judged, unjudged = fig.axes
    assert judged.get_title(loc="left") == ("tuned vs untuned: faster beyond noise\n"
                                            "at 2 of 4 sizes (10-20% faster), slower at 1")
    assert unjudged.get_title(loc="left") == ("tuned vs untuned: 3 sizes not measurable\n(too few passes of each "
                                              "state)\nthe capture predicted -3.0% to -1.0%")
    assert [t.get_text() for t in fig.legends[0].get_texts()] == [
        "m1 bf16", "m2 fp8", "decode", "prefill (same colour)", "filled: beyond noise",
        "hollow: within noise or not measurable", "slower beyond noise", "predicted from the capture (decode M)"]
    # Beyond noise filled in the series' colour, within noise hollow, slower red.
    faces = [tuple(c.get_facecolor()[0][:3]) for c in judged.collections if isinstance(c, PathCollection)]
    assert len(faces) == 3 and (1.0, 1.0, 1.0) in faces and any(r > 0.7 and g < 0.2 for r, g, _ in faces)
    assert [line.get_linestyle() for line in unjudged.lines if line.get_linestyle() == "--"] == ["--"]
    plain = views.plot_step_change(step_change_rows().iloc[:3])  # one model, faster and within noise only
    assert len(plain.axes) == 1
    assert [t.get_text() for t in plain.legends[0].get_texts()] == [
        "m1 bf16", "decode", "filled: beyond noise", "hollow: within noise or not measurable"]
    grid = Figure()
    left, right = grid.subplots(1, 2)
    assert views.plot_step_change(step_change_rows(), predicted=predicted, ax=right) is grid
    assert not left.has_data() and len(grid.axes) == 3 and not grid.legends
    save(fig)


# -- step time per state ----------------------------------------------------------------------------
def step_bench(states=("untuned", "tuned", "torch"), tokens=(1, 4), model="m", dtype="bf16"):
    """profkit step rows: 3 repetitions per (state, tokens), step_ms = base x state factor + rep/100."""
    factor = {"untuned": 1.0, "tuned": 0.9, "cache": 0.95, "torch": 1.2}
    rows = [{"engine": "profkit-step", "model": model, "dtype": dtype, "phase": phase, "tokens": t, "state": s,
             "repetition": rep, "layers": 2, "step_ms": t * factor[s] * (2 if phase == "prefill" else 1) + rep / 100}
            for phase in ("decode", "prefill") for s in states for t in tokens for rep in range(3)]
    return pd.DataFrame(rows)


def test_step_times_info():
    bench = step_bench(states=("torch", "untuned"))
    info = _step._step_times_info(bench[bench["phase"] == "decode"], model="m", dtype="bf16", phase="decode")
    assert info == _step.StepTimesInfo(
        model="m", dtype="bf16", phase="decode", states=("untuned", "torch"), tokens=((1, 4), (1, 4)),
        medians=((1.01, 4.01), (pytest.approx(1.21), pytest.approx(4.81))),
        lows=((1.0, 4.0), (pytest.approx(1.2), pytest.approx(4.8))),
        highs=((1.02, 4.02), (pytest.approx(1.22), pytest.approx(4.82))),
        repetitions=(3, 3), layers=2)
    rel = _step._step_times_info(bench[bench["phase"] == "decode"], model="m", dtype="bf16", phase="decode",
                                 relative_to="untuned")
    assert rel.medians[0] == (1.0, 1.0)
    assert rel.medians[1] == (pytest.approx(1.21 / 1.01), pytest.approx(4.81 / 4.01))
    assert rel.relative_to == "untuned"


def test_step_times_lines_per_state_at_the_batch_sizes():
    fig = views.plot_step_times(step_bench(states=("torch", "cache", "tuned", "untuned"), tokens=(1, 4, 16)))
    ax = fig.axes[0]
    assert len(ax.lines) == 4  # one line of medians per state
    for line in ax.lines:
        assert line.get_xydata()[:, 0].tolist() == [1, 4, 16]
    tuned = ax.lines[1].get_xydata()[:, 1]
    assert tuned.tolist() == pytest.approx([0.91, 3.61, 14.41])
    colours = [_step.STATE_COLOURS[s] for s in ("untuned", "tuned", "cache", "torch")]
    assert [line.get_color() for line in ax.lines] == colours
    bars, caps = ax.collections  # every state's min-max bars in one collection, their caps in another
    assert len(bars.get_segments()) == 12 and len(caps.get_offsets()) == 24
    assert np.allclose(bars.get_segments()[3], [[1, 0.9], [1, 0.92]])  # tuned at 1 token: min to max
    assert [to_hex(c) for c in bars.get_colors()[3:6]] == [colours[1]] * 3
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [
        "untuned (FlashInfer fallback)", "tuned (same process, after the tuning pass)",
        "cache (the tuned cache.json loaded)", "torch (plain torch linears)"]
    assert ax.get_title() == "m bf16, decode: step time per state"
    assert ax.get_xscale() == "log" and [t.get_text() for t in ax.get_xticklabels()] == ["1", "4", "16"]
    assert ax.get_xlabel() == "decode batch size (tokens per step)"
    assert "median of 3 repetitions" in ax.texts[0].get_text()
    save(fig)


def test_step_times_relative_prefill_and_labels():
    fig = views.plot_step_times(step_bench(), phase="prefill", relative_to="untuned", labels={"tuned": "after"})
    ax = fig.axes[0]
    assert ax.get_title() == "m bf16, prefill: step time relative to untuned"
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["untuned (FlashInfer fallback)", "after",
                                                                   "torch (plain torch linears)"]
    assert ax.lines[0].get_xydata()[:, 1].tolist() == [1.0, 1.0]
    assert ax.lines[1].get_xydata()[:, 1].tolist() == pytest.approx([1.81 / 2.01, 7.21 / 8.01])
    save(fig)


def test_step_times_errors_name_the_choices():
    two = pd.concat([step_bench(), step_bench(model="n")])
    with pytest.raises(profkit.ProfkitError, match="pass model= one of m, n"):
        views.plot_step_times(two)
    with pytest.raises(profkit.ProfkitError, match="no dtype 'fp8'; dtypes: bf16"):
        views.plot_step_times(two, model="n", dtype="fp8")
    with pytest.raises(profkit.ProfkitError, match="relative_to='cache': no such state"):
        views.plot_step_times(two, model="m", relative_to="cache")


def test_step_times_empty_warns():
    with pytest.warns(UserWarning, match="no step rows"):
        fig = views.plot_step_times(step_bench().iloc[:0])
    assert not fig.axes[0].lines and not fig.axes[0].collections
    save(fig)
    with pytest.warns(UserWarning, match="no step rows for m bf16, verify"):
        views.plot_step_times(step_bench(), phase="verify")


def test_step_times_into_given_axes():
    fig = Figure()
    left, right = fig.subplots(1, 2)
    out = views.plot_step_times(step_bench(), ax=right)
    assert out is fig
    assert not left.lines and not left.collections and not left.texts
    assert len(right.lines) == 3 and len(right.collections) == 2
    save(fig)


# -- smoke over every plot function on the shipped data ---------------------------------------------
@pytest.fixture(scope="module")
def shipped(shipped_h200, shipped_h200_results):
    return shipped_h200, shipped_h200_results, dict(shipped_h200.labels)


PLOTS = sorted(name for name in views.__all__ if name.startswith("plot_"))


def _args(name, data, r, labels, request):
    """The arguments of ``views.<name>`` on the shipped data; the session fixtures it needs are built on first use."""
    c = data.tables.candidates
    return {
        "plot_tactic_map": lambda: ((r.speedups,), {"labels": labels, "batch_sizes": [512]}),
        "plot_speedup": lambda: ((r.speedups,), {"op": "fp8_gemm", "labels": labels}),
        "plot_candidates": lambda: ((c,), {"op": "bf16_gemm", "shape": "N=4096 K=4096",
                                           "run_id": "bf16_gemm-llama3-8b-o-r0", "highlight": 64}),
        "plot_tuning_time": lambda: ((r.breakdown,), {"labels": labels}),
        "plot_tuning_value": lambda: ((r.value,), {"labels": labels}),
        "plot_winner_flips": lambda: ((r.stability,), {"labels": labels}),
        "plot_diff": lambda: ((r.diff,), {"names": ("first run", "next run")}),
        "plot_rank_divergence": lambda: ((r.ranks,), {"labels": labels}),
        "plot_op_timings": lambda: ((r.between,), {"op": "bf16_gemm", "labels": labels}),
        "plot_step_change": lambda: ((r.step_measured,), {"predicted": r.step_predicted}),
        "plot_step_times": lambda: ((r.step_rows,), {"model": "llama3-8b", "dtype": "fp8"}),
        "plot_kernel_vs_e2e": lambda: ((analysis.kernel_vs_e2e(r.speedups, _seed_pair()),), {}),
        "plot_serving_vs_tuner": lambda: ((request.getfixturevalue("shipped_verify_verdicts"),), {}),
        "plot_verdicts": lambda: ((r.evidence,), {"recommendations": dict(zip(r.op_verdicts["op"],
                                                                              r.op_verdicts["recommendation"]))}),
        "plot_portability": lambda: _portability_args(request),
        **_moe_args(request),
    }[name]()


def _portability_args(request):
    """The H200's MoE picks timed on the H100 (data/h200-moe and data/h100-moe read together; the reverse is shipped too)."""
    from profkit.analysis.portability import carried_picks
    from profkit.catalog import partition

    data = request.getfixturevalue("shipped_across")
    return (carried_picks(partition.with_gpus(data.verify, data.runs)),), {  # both ways are shipped: draw one
        "labels": dict(data.labels), "source_gpu": "NVIDIA H200", "target_gpu": "NVIDIA H100 80GB HBM3"}


def _moe_args(request) -> dict:
    """The MoE plots on data/h200-moe's Qwen3-30B-A3B runs (built only when asked for)."""
    def frames():
        from profkit.analysis import moe

        runs = request.getfixturevalue("shipped_moe_runs")
        t, r0 = runs.tables, "qwen3-30b-a3b-r0-r0"
        aa = runs.step[runs.step["source"].str.contains("qwen3-30b-a3b-step-aa")]
        verify = runs.verify[runs.verify["run_id"] == r0]
        return t, r0, aa, verify, moe

    def tactics():
        t, r0, _, _, moe = frames()
        return (moe.tactic_parts(t.winners[t.winners["run_id"] == r0]),), {}

    def routing():
        _, r0, _, verify, moe = frames()
        return (moe.routing_sensitivity(verify),), {}

    def step():
        t, r0, aa, verify, moe = frames()
        return (moe.step_changes(aa), moe.step_predictions(aa, t.winners[t.winners["run_id"] == r0], verify,
                                                             state="cache")), {}

    return {"plot_moe_tactics": tactics, "plot_moe_routing": routing, "plot_moe_step": step}


def _seed_pair():
    common = {"engine": "sglang", "max_concurrency": 512, "successful_requests": 2560,
              "total_input_tokens": 2621440, "total_output_tokens": 2621440}
    return schema.frame("bench", [{**common, "label": "main", "autotune": False, "output_tok_s": 16225.25},
                                  {**common, "label": "pr", "autotune": True, "output_tok_s": 18950.11}])


@pytest.mark.parametrize("name", PLOTS)
def test_every_plot_on_shipped_data(name, shipped, request):
    fn = getattr(views, name)
    params = inspect.signature(fn).parameters
    assert "ax" in params and params["ax"].kind is inspect.Parameter.KEYWORD_ONLY
    args, kwargs = _args(name, *shipped, request)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # the shipped data draws whole: no row is dropped with a warning
        fig = fn(*args, **kwargs)
        assert isinstance(fig, Figure) and fig.axes
        grid = Figure()
        left, right = grid.subplots(1, 2)
        assert fn(*args, **kwargs, ax=right) is grid
    assert not left.has_data() and not left.texts
    save(fig)


def test_shipped_tactic_map_flags_the_slower_buckets(shipped):
    data, r, labels = shipped
    info = _tactic_map._tactic_map_info(r.speedups, op="fp8_gemm", labels=labels)
    assert len(info.rows) == 10 and all(len(b) == 20 for b in info.buckets)
    row = info.rows.index("fp8_gemm  llama3-8b o (N=4096, K=4096)")
    s = r.speedups[(r.speedups["op"] == "fp8_gemm") & (r.speedups["shape"] == "N=4096 K=4096")]
    slower = s[s["slower_than_default"].fillna(False)]
    assert sorted(slower["bucket"]) == [32, 256, 512, 1536]  # timed slower than the default ...
    beyond = slower[~slower["within_noise"].fillna(False)]
    assert info.slower_than_default[row] == tuple(sorted(int(b) for b in beyond["bucket"]))  # ... flagged only beyond noise


# -- explorer -------------------------------------------------------------------------------------
def test_explorer_drives_figure_card_and_table():
    tables = profkit.load(DATA / "h200" / "fp8")
    ex = views.explorer(tables)
    assert ex.op.options == ("fp8_gemm",) and len(ex.shape.options) == 6
    ex.shape.value = "N=4096 K=4096"
    ex.bucket.value = 128
    assert "WinnerCard fp8_gemm  bucket=128" in ex.card.value
    assert "CublasFp8GemmRunner" in ex.table.value and "<table" in ex.table.value
    assert ex.image.value[:4] == b"\x89PNG" and len(ex.figure.axes) == 2
    assert ex.figure.axes[0].patches or ex.figure.axes[0].collections
    ex.runner.value = "CudnnFp8GemmRunner"
    assert "CublasFp8GemmRunner" not in ex.table.value.split("</thead>")[1]


def test_explorer_displays_a_static_picture_of_itself_beside_the_live_widget():
    """Read without a kernel (a code host), the cell shows the current figure and card, not an empty Out."""
    ex = views.explorer(profkit.load(DATA / "h200" / "fp8"))
    ex.bucket.value = 64
    bundle = ex._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert base64.b64decode(bundle["image/png"]) == ex.image.value
    assert "bucket 64" in bundle["text/html"] and "WinnerCard fp8_gemm  bucket=64" in bundle["text/html"]


def test_explorer_without_ipywidgets_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "ipywidgets", None)
    with pytest.raises(ImportError, match=r"profkit\[notebook\]"):
        views.explorer(profkit.Tables.empty())


# -- views never read ---------------------------------------------------------------------------
READERS = {"open", "read_parquet", "read_csv", "read_json", "read_text", "read_bytes", "read_log", "read_cache",
           "read_bench", "open", "load", "rglob", "glob", "iterdir"}


def _calls(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            yield node.lineno, f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""


@pytest.mark.parametrize("path", sorted(p for layer in ("views", "report") for p in (ROOT / "profkit" / layer).glob("*.py")),
                         ids=lambda p: f"{p.parent.name}/{p.name}")
def test_views_and_the_report_never_read_a_file_or_call_a_reader(path):
    """A view or report page takes frames, never a path: no open(), Path.read_*, pd.read_*, profkit.load or read_*
    call, and no import of a source module (the data directory is read by profkit.catalog)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found = [f"{path.name}:{line}: {name}()" for line, name in _calls(tree)
             if name in READERS or name.startswith("read_")]
    imports = [f"{path.name}:{node.lineno}: import {node.module}" for node in ast.walk(tree)
               if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("profkit.sources")]
    assert not found and not imports, found + imports


def test_the_reader_scan_sees_a_reader():
    tree = ast.parse("import pandas as pd\nx = pd.read_parquet(p)\nwith open(p) as f: pass\nPath(p).read_text()")
    assert {name for _, name in _calls(tree)} >= {"read_parquet", "open", "read_text"}


def serving_points():
    """Hand-made verdicts: (tuner_speedup, serving_speedup, tuner_verdict, serving verdict) per bucket."""
    points = [(1.20, 1.15, "faster", "faster"), (1.10, 1.12, "faster", "faster"),      # agree, both beyond noise
              (1.15, 0.90, "faster", "slower"),                                         # disagree, both beyond noise
              (1.01, 0.80, "within_noise", "slower"),                                   # tuner within noise
              (1.30, 0.99, "faster", "within_noise"),                                   # serving within noise
              (1.02, 0.98, "not_measurable", "within_noise")]                           # neither
    return pd.DataFrame({"op": "gemm", "at_bucket": True, "tuner_speedup": [p[0] for p in points],
                         "serving_speedup": [p[1] for p in points], "serving_noise": 0.01,
                         "tuner_verdict": [p[2] for p in points], "verdict": [p[3] for p in points]})


def test_serving_vs_tuner_counts_a_corner_only_where_both_sides_are_beyond_noise():
    fig = views.plot_serving_vs_tuner(serving_points())
    ax = fig.axes[0]
    counts = {t.get_text(): int(n.get_text()) for n, t in zip(ax.texts[::2], ax.texts[1::2])}
    # Three points sit right of 1 and below 1, but only one is beyond noise on both sides.
    assert counts == {"tuner: faster, serving: faster": 2, "tuner: slower, serving: faster": 0,
                      "tuner: slower, serving: slower": 0, "tuner: faster, serving: slower": 1}
    assert ax.get_title() == ("gemm\nbeyond noise on both timers: 3 of 6 buckets\n"
                              "serving agrees at 2, not at 1; 3 within noise")
    filled = [c.get_markerfacecolor() for c in ax.lines if c.get_marker() in ("o", "v", "s")]
    assert filled.count("white") == 2  # the tuner side within noise or not measurable: hollow
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert legend == ["pick faster than the default in serving", "within serving noise",
                      "pick slower than the default in serving", "tuner's own times: beyond noise too",
                      "tuner's own times: within noise or not measurable"]
    beyond = serving_points().assign(tuner_verdict="faster", verdict="faster")
    legend = [t.get_text() for t in views.plot_serving_vs_tuner(beyond).legends[0].get_texts()]
    assert legend == ["pick faster than the default in serving", "tuner's own times: beyond noise too"]  # only drawn keys
    save(fig)


def test_serving_vs_tuner_panels_per_op_and_empty(shipped_verify_verdicts):
    v = shipped_verify_verdicts
    both = views.plot_serving_vs_tuner(v)
    assert [a.get_title().split("\n")[0] for a in both.axes] == ["bf16_gemm", "fp8_gemm"]
    with pytest.warns(UserWarning, match="no verify verdict"):
        assert "no verify verdict" in views.plot_serving_vs_tuner(v.iloc[:0]).axes[0].texts[0].get_text()
