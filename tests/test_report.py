"""profkit report: the verdicts first, the pages, summary.json, the figures, the tables and the CLI wiring."""

from __future__ import annotations

import json
import re
import shutil

import pandas as pd
import pytest

import profkit
from profkit import analysis
from profkit.analysis.recommend import RECOMMENDATIONS, chance_count
from profkit.analysis.results import analyse
from profkit.catalog import partition
from profkit.outputs.summary import summary_document
from profkit.cli import main
from profkit.errors import ProfkitError
from profkit import catalog
from profkit import report

from conftest import DATA, ROOT, TEST_DATA

MAIN_FIGURES = ("tuning_time",)  # data/h200: no verify table, no MoE runs, nothing measurable
DETAIL_FIGURES = ("tactic_map", "speedup", "candidates", "tuning_value", "winner_flips", "diff", "rank_divergence",
                  "op_timings", "step_change", "step_times_llama3-8b_bf16", "step_times_qwen2.5-32b_fp8",
                  "kernel_vs_e2e", "advise_fp8_gemm")
MOE = "CuteDslFusedMoE::run_moe_sm90::Swiglu"


@pytest.fixture(scope="module")
def built(tmp_path_factory, shipped_h200, shipped_h200_results):
    out = tmp_path_factory.mktemp("report")
    files = report.build_report(shipped_h200, out, results=shipped_h200_results, formats=("png",), progress=False)
    return out, files


def _section(md: str, title: str) -> str:
    return md.split(f"## {title}\n")[1].split("\n## ")[0]


# -- the main page: the verdicts first ------------------------------------------------------------
def test_report_writes_every_page_figure_table_and_the_summary(built):
    out, files = built
    names = {p.name for p in files}
    assert {f"{fig}.png" for fig in MAIN_FIGURES + DETAIL_FIGURES} <= names
    for page in ("index", "tactics", "cost", "step", "serving", "plan", "repeats", "provenance"):
        assert {f"{page}.md", f"{page}.html"} <= names, page
    assert [p.name for p in files[-2:]] == ["index.md", "index.html"]
    worth = pd.read_csv(out / "worth_tuning.csv")
    assert len(worth) == 20 and set(worth["op"]) == {"fp8_gemm", "bf16_gemm"}


def test_main_page_opens_with_one_verdict_per_op_and_a_loud_failure(built, shipped_h200_results):
    out, _ = built
    md = (out / "index.md").read_text()
    assert md.index("## Verdicts") < md.index("## What tuning costs")
    verdicts = _section(md, "Verdicts")
    # The partly tuned bf16 step capture (one bucket without a winner) is said loudly, first.
    assert verdicts.lstrip().startswith("> **WARNING `bf16_gemm` PARTLY TUNED in 1 run:")
    items = [line for line in verdicts.splitlines() if line.startswith("- **`")]
    assert [re.match(r"- \*\*`([^`]+)`", line).group(1) for line in items] == ["bf16_gemm", "fp8_gemm"]
    # data/h200 has no verify table and times each step state once per process: no verdict, and the
    # page says which inputs would answer.
    for line in items:
        assert ": unknown from this data.**" in line and "per tuning call (20 buckets" in line
        assert "To answer, add a `profkit verify` table" in line and "`profkit step` results with the states interleaved" in line
    assert "not drawn: no serving or step comparison in this data is measurable" in verdicts
    page = (out / "index.html").read_text()
    assert page.count("<figure ") <= 10 and "<div class='loud'>" in page
    assert "<a href='step.html'>Model step</a>" in page  # detail a click away


def test_summary_json_holds_the_verdicts_with_their_numbers(built, shipped_h200_results):
    out, _ = built
    doc = json.loads((out / "summary.json").read_text())
    entries = {e["op"]: e for e in doc["ops"]}
    assert set(entries) == {"bf16_gemm", "fp8_gemm"}
    for op, e in entries.items():
        assert e["recommendation"] in RECOMMENDATIONS
        row = shipped_h200_results.op_verdicts.set_index("op").loc[op]
        assert e["call_s_min"] == pytest.approx(row["call_s_min"]) and e["status"] == row["status"]
    assert entries["bf16_gemm"]["status"] == "partly tuned" and doc["rule"]["confidence"] == 0.95


def test_pngs_are_at_least_200_dpi(built):
    from PIL import Image

    out, _ = built
    with Image.open(out / "tactic_map.png") as img:
        assert img.info["dpi"][0] >= 199


def test_pages_are_self_contained_with_provenance_as_people_write_it(built):
    out, _ = built
    for page in ("index", "tactics", "provenance"):
        html = (out / f"{page}.html").read_text()
        srcs = re.findall(r"src='([^']*)'", html)
        assert all(s.startswith("data:image/png;base64,") for s in srcs)
        assert "<link" not in html and "http" not in html.split("<body>")[0]
    page = (out / "provenance.html").read_text()
    for fact in ("NVIDIA H200", "580.159.04", "2.11.0+cu130", "0.7.2.post1", "9.19.0", "13.1.0", "_TGV_DEBUG_USE_CPP"):
        assert fact in page, fact
    assert "91900" not in page


def test_tables_are_short_formatted_and_linked_to_their_csv(built):
    out, _ = built
    md = (out / "cost.md").read_text()
    assert "Top 10 of 20 rows (fewest passes to break even first); 10 more in [worth_tuning.csv](worth_tuning.csv)." in md
    assert "| op | shape | tuning (s) | measure (s) |" in md
    assert not re.search(r"\d\.\d+e[+-]\d", md), "scientific notation on the page"
    assert not re.search(r"\| \d{3,}\.0 \|", md), "integer-valued floats printed with .0"
    tactics = (out / "tactics.md").read_text()
    assert "| time (us) | default (us) |" in tactics  # kernel times in microseconds
    assert "llama3-8b qkv (N=6144, K=4096)" in tactics  # layer names with (N, K)
    assert "[0, [[" not in tactics and "engine 0, KERNEL_CFG=0" in tactics
    assert "[Verdicts](index.md)" in md  # Markdown pages link Markdown pages


def test_break_even_text_and_table(built):
    out, _ = built
    section = _section((out / "cost.md").read_text(), "When does tuning pay for itself?")
    # One pass of tuned and one of untuned per process: not measurable, so nothing saves time beyond noise.
    assert "- qwen2.5-32b bf16: tuning 172.2 s, saves time beyond noise at 0 of 16 sizes; slower beyond noise at 0." in section
    assert "(llama3-8b has 32, qwen2.5-32b has 64)" in section
    assert not (out / "break_even.csv").exists()


# -- inputs a user has ----------------------------------------------------------------------------
def test_cli_only_some_figures_without_index(tmp_path, capsys):
    assert main(["report", str(DATA / "h200" / "fp8"), "--out", str(tmp_path), "--only", "tactic_map",
                 "--formats", "png", "--no-index", "--no-progress"]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tactic_map.png"]
    assert capsys.readouterr().out.strip().endswith("tactic_map.png")


def test_cli_output_ends_with_the_page(tmp_path, capsys):
    assert main(["report", str(DATA / "h200" / "fp8-repeat-r1"), "--out", str(tmp_path), "--formats", "png",
                 "--no-progress"]) == 0
    captured = capsys.readouterr()
    assert captured.out.strip().splitlines() == [str(tmp_path / "index.html")]
    assert re.search(r"\d+ figure files and \d+ tables", captured.err)
    assert (tmp_path / "summary.json").is_file()


def test_cli_reports_errors(tmp_path, capsys):
    assert main(["report", str(tmp_path / "nothing"), "--out", str(tmp_path / "o"), "--no-progress"]) == 1
    assert "no such file or directory" in capsys.readouterr().err
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["report", str(empty), "--out", str(tmp_path / "o"), "--no-progress"]) == 1
    assert "no profkit capture, FlashInfer debug log (*.log), cache file (*.json) or step or verify result here" in capsys.readouterr().err
    with pytest.raises(ProfkitError, match="unknown figure"):
        report.build_report(catalog.open(DATA / "h200" / "fp8-repeat-r1"), tmp_path / "figures", only=["nope"], progress=False)


def test_a_debug_log_and_a_cache_file_are_inputs_themselves(tmp_path, capsys):
    log = TEST_DATA / "log_interleaved_ranks" / "server.log"
    assert main(["report", str(log), "--out", str(tmp_path / "log"), "--formats", "png", "--no-progress"]) == 0
    doc = json.loads((tmp_path / "log" / "summary.json").read_text())
    assert doc["ops"] and all(e["recommendation"] == "unknown" for e in doc["ops"])
    md = (tmp_path / "log" / "index.md").read_text()
    assert "read from debug logs" in md and "a capture with the default timed" in md
    cache = TEST_DATA / "cache_metadata_mismatch" / "ranks" / "rank_tp0_pp0_dp0.json"
    assert main(["report", str(cache), "--out", str(tmp_path / "cache"), "--formats", "png", "--no-progress"]) == 0
    assert "read from cache files" in (tmp_path / "cache" / "index.md").read_text()


def test_a_folder_of_logs_answers_as_far_as_it_can(tmp_path):
    """Only debug logs: no phase times, no default timing, no verify or step: no 0% split, no empty figures,
    and the page names the inputs that would answer."""
    shutil.copytree(TEST_DATA / "log_interleaved_ranks", tmp_path / "data")
    data = catalog.open(tmp_path / "data")
    assert data.inputs == ("debug logs",) and len(data.tables.candidates)
    files = report.build_report(data, tmp_path / "out", formats=("png",), progress=False)
    md = (tmp_path / "out" / "index.md").read_text()
    assert "split into measuring and plan building is unknown" in _section(md, "What tuning costs")
    assert "0%" not in _section(md, "What tuning costs")
    assert "No `profkit verify` table in this data" in md and "unknown from this data" in md
    tactics = (tmp_path / "out" / "tactics.md").read_text()
    assert "*Speedup: not drawn: no bucket had its default timed" in tactics
    assert not {"speedup.png", "op_timings.png", "step_change.png", "verdicts.png"} & {p.name for p in files}


def test_an_unreadable_file_is_named_on_the_page(tmp_path):
    shutil.copytree(DATA / "h200" / "fp8-repeat-r1" / "fp8_gemm-llama3-8b-o", tmp_path / "data" / "good")
    shutil.copytree(DATA / "h200" / "fp8-repeat-r1" / "fp8_gemm-llama3-8b-qkv", tmp_path / "data" / "bad")
    bad = tmp_path / "data" / "bad" / "capture" / "candidates.parquet"
    bad.write_bytes(bad.read_bytes()[:100])
    with pytest.warns(UserWarning, match="could not be read"):
        data = catalog.open(tmp_path / "data")
    report.build_report(data, tmp_path / "out", formats=("png",), only=["tactic_map"], progress=False)
    provenance = _section((tmp_path / "out" / "provenance.md").read_text(), "Provenance")
    assert "**1 file could not be read** and was skipped:" in provenance and str(bad) in provenance


def test_datadir_gives_step_sets_and_loaded_caches_as_columns(shipped_h200):
    data = shipped_h200
    assert set(data.step["step_set"]) == {"step"} and set(data.step_other["step_set"]) == {"step-sweep-caches"}
    assert len(data.step_captures) == 4 and data.model_layers == {"llama3-8b": 32, "qwen2.5-32b": 64}
    assert data.step_caches[("llama3-8b", "fp8")] == "step/llama3-8b-fp8/cache.json"
    assert data.cache_winners["capture_run_id"].nunique() == 4 + 12 + 6  # step, sweep and repeat captures
    assert data.labels["N=6144 K=4096"] == "llama3-8b qkv"
    assert set(data.bench["gpu"]) == {"B200"}  # the shipped serving pair says so in its first line


def test_the_whole_data_folder_reads_like_its_h200_part(shipped_whole, shipped_h200):
    """``profkit report data``: the step set is found by its captures, not by its folder name."""
    whole, h200 = shipped_whole, shipped_h200
    on_h200 = (whole.step["gpu"] == "NVIDIA H200").to_numpy(dtype=bool)
    dense = whole.step[~whole.step["model"].isin(whole.moe.runs["model"]).to_numpy(dtype=bool) & on_h200]
    assert len(dense) == len(h200.step)
    # The H100 ran Llama-3.1-8B's step too: the whole folder's captures are the H200's (most runs), each GPU's part
    # its own.
    assert {k: v for k, v in whole.step_captures.items() if k in h200.step_captures} == h200.step_captures
    h100 = partition.for_gpu(whole, "NVIDIA H100 80GB HBM3")
    assert h100.step_captures[("llama3-8b", "fp8")] != whole.step_captures[("llama3-8b", "fp8")]
    assert h100.step_caches[("llama3-8b", "fp8")] == "h100/step/llama3-8b-fp8/cache.json"
    bracketed = whole.step_other[whole.step_other["source"] == "h200-verify/step-bracketed/llama3-8b-fp8"]
    loaded = dict(zip(bracketed["state"], bracketed["loaded_cache"]))
    assert loaded["cache"] == "h200/step/llama3-8b-fp8/cache.json" == whole.step_caches[("llama3-8b", "fp8")]
    assert loaded["untuned"] == ""


def test_results_step_frames_agree_with_the_capture_and_the_step_rows():
    data = catalog.open(DATA / "h200" / "step")
    r = analyse(data)
    # One pass of tuned and one of untuned per process: not measurable, so no size saves time beyond noise.
    assert r.step_break_even.empty and (r.step_measured["verdict"] == "not_measurable").all()
    spent = analysis.tuning_breakdown(data.tables.tuning, by="call").groupby("run_id")["wall_s"].sum()
    assert len(r.step_tuning) == 4
    for model, dtype, tuning_s in r.step_tuning[["model", "dtype", "tuning_s"]].itertuples(index=False):
        assert tuning_s == pytest.approx(spent[data.step_captures[(model, dtype)]])
    v = r.op_verdicts.set_index("op")
    assert v.loc["fp8_gemm", "pass_s_min"] == pytest.approx(r.step_tuning[r.step_tuning["dtype"] == "fp8"]["tuning_s"].min())


def test_tuning_cost_counts_later_runs():
    """Two ranks tuning the same shapes: the first rank's call heads the line, the other rank's is not hidden."""
    data = catalog.open(DATA / "h200-engine-like" / "capture")
    costs = analyse(data).call_costs.set_index("op")
    assert costs.loc["bf16_gemm", "buckets"] == 10 and costs.loc["bf16_gemm", "calls"] == 1
    assert costs.loc["bf16_gemm", "wall_s_max"] == pytest.approx(35.5, abs=0.05)
    assert costs.loc["bf16_gemm", "later_s_max"] == pytest.approx(14.8, abs=0.05)


def test_a_new_section_drops_in_with_one_entry(tmp_path):
    """The package docstring's example: one builder, one entry in the list, on the page it names."""
    def runner_share(ctx):
        cost = analysis.runner_cost(ctx.data.tables.candidates)
        if cost.empty:
            return None
        return report.Section("Where measuring time went per runner", "Candidates timed and seconds spent.",
                              tables=(report.Table(cost, "runner_cost", sort_by="measure_s",
                                                   what="most seconds first"),), page="cost")

    data = catalog.open(DATA / "h200" / "fp8-repeat-r1")
    sections = list(report.SECTIONS)
    sections.insert(sections.index(report.provenance_section), runner_share)
    # One figure: the CLI test above draws all of this data's.
    report.build_report(data, tmp_path, sections=sections, formats=("png",), only=["tactic_map"], progress=False)
    md = (tmp_path / "cost.md").read_text()
    assert "## Where measuring time went per runner" in md
    cost = pd.read_csv(tmp_path / "runner_cost.csv")
    assert len(cost) == len(analysis.runner_cost(data.tables.candidates)) > 10
    assert f"Top 10 of {len(cost)} rows (most seconds first)" in md


def test_doc_style_draws_larger_type_and_no_run_ids(shipped_h200):
    from profkit import views

    c = shipped_h200.tables.candidates
    kwargs = {"op": "bf16_gemm", "shape": "N=4096 K=4096", "run_id": "bf16_gemm-llama3-8b-o-r0"}
    screen = views.plot_candidates(c, **kwargs)
    with views.use_style("doc"):
        doc = views.plot_candidates(c, **kwargs)
    assert "bf16_gemm-llama3-8b-o-r0" in screen.axes[0].texts[-1].get_text()
    assert "bf16_gemm-llama3-8b-o-r0" not in doc.axes[0].texts[-1].get_text()
    assert doc.axes[0].title.get_fontsize() > screen.axes[0].title.get_fontsize()
    with pytest.raises(ProfkitError, match="unknown style"):
        report.build_report(shipped_h200, "unused", style="poster", progress=False)


# -- the whole data folder: verify, the step sets and MoE -------------------------------------------
@pytest.fixture(scope="module")
def whole(shipped_whole, shipped_whole_results):
    return report.ReportContext(data=shipped_whole, results=shipped_whole_results)


def test_moe_is_the_clear_keep_with_model_summarys_numbers(whole):
    r = whole.results
    row = r.op_verdicts.set_index("op").loc[MOE]
    s = r.moe_summary
    assert row["recommendation"] == "keep" and row["basis"] == "step"
    # Every number of the verdict is analysis.moe's: the op speedup over every routing and M, the step sizes.
    assert row["serving_speedup_min"] == pytest.approx(s["op_speedup_min"].min())
    assert row["serving_speedup_max"] == pytest.approx(s["op_speedup_max"].max())
    assert row["serving_slower"] == s["pick_slower"].sum() == 0
    assert row["step_faster"] == s["step_faster"].sum() and row["step_measurable"] == s["step_sizes"].sum()
    assert row["step_change_min_pct"] == pytest.approx(s["step_change_min_pct"].min())
    assert row["step_change_max_pct"] == pytest.approx(s["step_change_max_pct"].max())
    assert 1.05 < row["serving_speedup_min"] < row["serving_speedup_max"] < 2.0
    line = report.verdict_line(r.op_verdicts.set_index("op").loc[[MOE]].reset_index().iloc[0])
    assert line.startswith(f"**`{MOE}`: keep autotuning on.**") and "faster at the measured sizes" in line


def test_every_recommendation_follows_the_documented_rule(whole):
    for row in whole.results.op_verdicts.itertuples(index=False):
        if row.recommendation in ("failed", "unknown"):
            continue
        n = row.step_measurable if row.basis == "step" else row.serving_points - row.serving_not_measurable
        f = row.step_faster if row.basis == "step" else row.serving_faster
        s = row.step_slower if row.basis == "step" else row.serving_slower
        if s > f or f < chance_count(n):
            assert row.recommendation == "skip", row.op
        elif s == 0 and 2 * f >= n:
            assert row.recommendation == "keep", row.op
        else:
            assert row.recommendation in ("plan", "keep"), row.op


def test_chance_count_is_the_binomial_tail():
    # Identical kernels are called faster at <= 2.5% of points: 1 of 16 is chance, 3 of 16 is not.
    assert chance_count(16) == 3 and chance_count(100) == 6 and chance_count(1) == 1 and chance_count(0) == 1


def test_moe_section_shows_the_headline_models_figures_and_every_model(whole):
    section = report.moe_section(whole)
    models = list(whole.results.moe_models["model"])
    assert models[0] == "qwen3-30b-a3b"  # most tunings and step sets
    assert [f.name for f in section.figures] == [f"moe_{k}_qwen3-30b-a3b" for k in ("routing", "step", "tactics",
                                                                                     "tuning")]
    for model in models:
        assert f"**{model}**" in section.text
    detail = report.moe_detail_section(whole)
    assert detail.page == "moe" and {f.name for f in detail.figures} >= {f"moe_step_{m}" for m in models[1:]}


def test_verify_sections_count_what_op_summary_computes(whole):
    from profkit.analysis.verify import op_summary

    r = whole.results
    summary = op_summary(r.verdicts)
    section = report.serving_section(whole)
    for row in summary.itertuples(index=False):
        assert (f"- `{row.op}`: of {row.buckets} buckets (each at its own M) the pick was **{row.faster} faster, "
                f"{row.slower} slower** and {row.within_noise} within noise") in section.text
    assert [f.name for f in section.figures] == ["serving_vs_tuner"]
    detail = report.verify_detail_section(whole)
    assert detail.page == "serving" and {t.name for t in detail.tables} == {"verify_summary", "verify_verdicts",
                                                                            "verify_policies"}


def test_policy_table_from_the_policy_study(whole):
    from profkit.analysis.verify import policy_table

    v = whole.data.verify
    study = v[v["policy"].notna()]
    expected = policy_table(study.assign(run_id=study["folder"]))
    table = whole.results.policies
    assert table[["policy", "slower", "buckets"]].values.tolist() == expected[["policy", "slower", "buckets"]].values.tolist()
    assert table["tuning_s"].notna().all()  # from the study's provenance.json runs
    buckets = {(r.op, r.policy): r.buckets for r in table.itertuples(index=False)}
    assert buckets == {("fp8_gemm", "autotune"): 60, ("fp8_gemm", "v2-graph"): 60, ("fp8_gemm", "v2-eager"): 80,
                       ("bf16_gemm", "autotune"): 80, ("bf16_gemm", "v2-graph"): 60, ("bf16_gemm", "v2-eager"): 80}


def test_step_sets_compare_each_run_with_its_own_untuned(whole):
    from profkit.analysis.step import measured_step_change

    sets = whole.results.step_sets
    rows = whole.data.step_other
    run = rows[rows["source"] == "h200-verify/step-v2/llama3-8b-bf16-v2-graph"]
    m = measured_step_change(run)
    mine = sets[(sets["where"] == "h200-verify/step-v2/llama3-8b-bf16-v2-graph") & (sets["baseline"] == "untuned")]
    assert mine[["faster", "slower"]].values.tolist() == [[int((m["verdict"] == "faster").sum()),
                                                            int((m["verdict"] == "slower").sum())]]
    # The three-process set has untuned in one process only: its states meet that untuned across processes.
    assert "h200-verify/step-three-processes" in set(sets["where"])
    section = report.step_sets_section(whole)
    assert section.page == "step" and "Between-pass drift" in section.text
    figures = report.step_set_figures_section(whole)  # their step times, closed on the page
    names = [f.name for f in figures.figures]
    assert figures.collapsed and figures.page == "step" and not section.figures
    assert len(names) == len(set(names)) and "h200-verify_step-bracketed_llama3-8b_fp8" in names
    # A set holding every step run of its model (the MoE models') is the per-model figure: linked, never drawn twice.
    per_model = {f.name for f in report.step_times_section(whole).figures}
    assert "step_times_qwen3-30b-a3b_bf16" in per_model and not any(n.startswith("h200-moe") for n in names)
    assert "the same runs as [step time per state: qwen3-30b-a3b bf16](#fig-step_times_qwen3-30b-a3b_bf16)" \
        in figures.text


def test_step_times_grid_draws_a_step_sets_relative_row_alone_and_each_y_label_once():
    from profkit.report._figures import step_times_grid

    rows = pd.DataFrame([{"model": "m", "dtype": "bf16", "phase": phase, "tokens": t, "state": state,
                          "step_ms": t * factor} for phase in ("decode", "prefill")
                         for state, factor in (("untuned", 1.0), ("repaired", 0.9)) for t in (1, 4)])
    relative = ["m bf16, decode: step time relative to untuned", "prefill / untuned"]
    both = step_times_grid(rows, model="m", dtype="bf16")
    assert [ax.get_title() for ax in both.axes] == ["m bf16, decode: step time per state", "prefill"] + relative
    assert [bool(ax.get_ylabel()) for ax in both.axes] == [True, False, True, False]
    alone = step_times_grid(rows, model="m", dtype="bf16", ms=False)
    assert [ax.get_title() for ax in alone.axes] == relative and alone.axes[0].get_legend() is not None
    no_untuned = step_times_grid(rows[rows["state"] == "repaired"], model="m", dtype="bf16", ms=False)
    assert [ax.get_title() for ax in no_untuned.axes] == ["m bf16, decode: step time per state", "prefill"]


def test_predictions_use_the_step_sets_that_loaded_the_verified_cache(whole):
    p = whole.results.predictions
    cache = p[p["against"] == "verify_cache"]
    assert "h200-verify/step-bracketed" in set(cache["where"])
    assert not cache["where"].str.startswith("h200-advise/").any()  # the advise proofs loaded their own pass's cache
    assert set(p[p["against"] == "verify"]["model"]) == {"llama3-8b", "qwen2.5-32b"}


def test_serving_pair_from_another_gpu_is_never_an_h200_number(shipped_h200, shipped_h200_results):
    ctx = report.ReportContext(data=shipped_h200, results=shipped_h200_results)
    section = report.e2e_section(ctx)
    assert section.page == "serving"
    assert "These serving numbers come from B200" in section.text and "not from the H200 GPU" in section.text
    main_page = [report.verdict_section(ctx), report.cost_section(ctx), report.serving_section(ctx)]
    assert not any("16.8%" in s.text or "throughput" in s.text for s in main_page)


@pytest.mark.parametrize("page,write", [("docs/findings.md", report.findings_markdown),
                                        ("README.md", report.headline_markdown)])
def test_the_docs_findings_and_the_readme_hold_the_current_verdicts(shipped_whole_results, page, write):
    """The generated blocks of docs/findings.md and README.md are what the report says about the shipped data today."""
    text = (ROOT / page).read_text()
    block = re.search(r"<!-- generated by scripts/findings\.py -->\n(.*?)<!-- end of generated -->", text, re.S)
    assert block, f"{page} lost its generated block"
    want = write(shipped_whole_results)
    assert block.group(1) == want, f"{page} is out of date: run python scripts/findings.py"
    assert want.count("keep autotuning on") == 1 and "fp8_gemm" in want


def test_the_readme_headline_says_only_what_was_measured(shipped_whole_results):
    """An op with no measurable step size and no serving table gets neither sentence; no A/A pairs, no A/A line."""
    import types

    verdicts = shipped_whole_results.op_verdicts.copy()
    verdicts.loc[verdicts["op"] == "fp8_gemm", ["step_measurable", "serving_points"]] = 0
    text = report.headline_markdown(types.SimpleNamespace(op_verdicts=verdicts, aa=pd.DataFrame()))
    fp8 = next(line for line in text.splitlines() if "`fp8_gemm`" in line)
    assert "model step (" not in fp8 and "In serving" not in fp8 and "per call" in fp8
    assert "The model step (" in text and "identical kernels" not in text


def test_the_page_states_the_a_a_rate_and_the_smallest_detectable_change(whole):
    """The rule's calibration travels with the verdicts: identical kernels in the data, and what each design could see."""
    aa = whole.results.aa
    assert set(aa["kind"]) == {"series", "same_kernels"} and (aa["called"] <= 0.05).all()
    assert (aa["measurable"] > 0).all()
    text = report.verdict_section(whole).text
    said = [f"{a.calls} of {a.measurable}" for a in aa.sort_values("kind").itertuples()]
    assert all(part in text for part in said) and "On identical kernels in this data, the rule called" in text
    moe = whole.results.op_verdicts.set_index("op").loc[MOE]
    assert 0 < moe["step_detectable_min_pct"] < moe["step_detectable_max_pct"]
    assert f"smallest detectable change {moe['step_detectable_min_pct']:.1f}-" in text
    rows = whole.results.op_verdicts
    document = summary_document(rows, reasons=[report.verdict_line(r) for r in rows.itertuples(index=False)],
                                aa=whole.results.aa)
    assert [a["kind"] for a in document["aa"]] == sorted(aa["kind"])
