"""profkit report: the pages, the figures, the tables and the CLI wiring, on the shipped H200 data."""

from __future__ import annotations

import re
import shutil

import pandas as pd
import pytest

import profkit
from profkit import analysis
from profkit.analysis.overview import overview
from profkit.analysis.step import measured_step_change
from profkit.cli import main
from profkit.errors import ProfkitError
from profkit.sources.datadir import read_datadir
from profkit.views import report

from conftest import DATA, TEST_DATA

FIGURES = ("tactic_map", "speedup", "candidates", "tuning_time", "tuning_value", "winner_flips", "diff",
           "rank_divergence", "op_timings", "step_change", "step_times_llama3-8b_bf16", "step_times_llama3-8b_fp8",
           "step_times_qwen2.5-32b_bf16", "step_times_qwen2.5-32b_fp8", "kernel_vs_e2e")


@pytest.fixture(scope="module")
def built(tmp_path_factory, shipped_h200, shipped_h200_results):
    out = tmp_path_factory.mktemp("report")
    files = report.build_report(shipped_h200, out, results=shipped_h200_results, progress=False)
    return out, files


def _section(md: str, title: str) -> str:
    return md.split(f"## {title}\n")[1].split("\n## ")[0]


def test_report_writes_every_figure_table_and_both_pages(built):
    out, files = built
    names = {p.name for p in files}
    for fig in FIGURES:
        assert {f"{fig}.png", f"{fig}.svg"} <= names, fig
    assert [p.name for p in files[-2:]] == ["index.md", "index.html"]
    worth = pd.read_csv(out / "worth_tuning.csv")
    assert len(worth) == 20 and set(worth["op"]) == {"fp8_gemm", "bf16_gemm"}


def test_pngs_are_at_least_200_dpi(built):
    from PIL import Image

    out, _ = built
    with Image.open(out / "tactic_map.png") as img:
        assert img.info["dpi"][0] >= 199


def test_html_is_self_contained_with_provenance_as_people_write_it(built):
    out, _ = built
    page = (out / "index.html").read_text()
    srcs = re.findall(r"src='([^']*)'", page)
    assert srcs and all(s.startswith("data:image/png;base64,") for s in srcs)
    assert "<link" not in page and "http" not in page.split("<body>")[0]
    for fact in ("NVIDIA H200", "580.159.04", "2.11.0+cu130", "0.7.2.post1", "9.19.0", "13.1.0",
                 "_TGV_DEBUG_USE_CPP"):
        assert fact in page, fact
    assert "91900" not in page


def test_first_screen_answers_the_three_questions_with_their_figures(built):
    out, _ = built
    md = (out / "index.md").read_text()
    assert md.index("## At a glance") < md.index("## Tactic choices")
    contents = md.split("Contents:")[1].split("## ")[0]
    assert "- [At a glance](#at-a-glance)" in contents and "- [Provenance](#provenance)" in contents
    glance = _section(md, "At a glance")
    for question in ("How long does tuning take?", "Can it be switched off", "Does it help low-latency"):
        assert question in glance
    # Every figure the answers point to is on the page under that anchor.
    linked = re.findall(r"\(#fig-([\w.-]+)\)", glance)
    assert {"tuning_time", "speedup", "kernel_vs_e2e", "step_change"} <= set(linked)
    page = (out / "index.html").read_text()
    assert all(f"<figure id='fig-{name}'>" in page for name in linked)
    assert re.search(r"`fp8_gemm`: one call tuning all 20 buckets took 19\.\d-49\.0 s", glance)
    # The speedup numbers name the subset they come from.
    assert "(10 GEMM shapes x 20 buckets, first run each)" in glance


def test_tables_are_short_formatted_and_linked_to_their_csv(built):
    out, _ = built
    md = (out / "index.md").read_text()
    assert "Top 10 of 20 rows (fewest passes to break even first); 10 more in [worth_tuning.csv](worth_tuning.csv)." in md
    assert "| op | shape | tuning (s) | measure (s) |" in md
    assert not re.search(r"\d\.\d+e[+-]\d", md), "scientific notation on the page"
    assert not re.search(r"\| \d{3,}\.0 \|", md), "integer-valued floats printed with .0"
    assert "[0, [[" not in md and "engine 0, KERNEL_CFG=0" in md


def test_break_even_text_and_table(built):
    out, _ = built
    section = _section((out / "index.md").read_text(), "Decoder step")
    # The dense step sets time tuned and untuned one pass each: not measurable under the comparison
    # rule (docs/comparison_rule.md), so nothing there is beyond noise; the MoE steps interleave 3 passes.
    assert "- qwen2.5-32b bf16: tuning 172.2 s, saves time beyond noise at 0 of 16 sizes; slower beyond noise at 0." in section
    assert "- qwen2.5-32b fp8: tuning 153.0 s, saves time beyond noise at 0 of 16 sizes; slower beyond noise at 0." in section
    assert "(llama3-8b has 32, qwen2.5-32b has 64)" in section
    assert not (out / "break_even.csv").exists()  # no size saves time beyond noise: no table


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
    assert "figure files" in captured.err


def test_cli_reports_errors(tmp_path, capsys):
    assert main(["report", str(tmp_path / "nothing"), "--out", str(tmp_path / "o"), "--no-progress"]) == 1
    assert "no such file or directory" in capsys.readouterr().err
    with pytest.raises(ProfkitError, match="unknown figure"):
        report.build_report(read_datadir(DATA / "h200" / "fp8"), tmp_path, only=["nope"], progress=False)


def test_a_report_from_logs_says_what_it_does_not_know(tmp_path):
    """A debug log has no phase times and no default timing: no 0% split, no empty figures."""
    profkit.read_log(TEST_DATA / "log_interleaved_ranks" / "server.log").save(tmp_path / "data" / "log")
    files = report.build_report(read_datadir(tmp_path / "data"), tmp_path / "out", formats=("png",), progress=False)
    md = (tmp_path / "out" / "index.md").read_text()
    glance = _section(md, "At a glance")
    assert "split into measuring and plan building is unknown" in glance and "0%" not in glance
    assert "what off costs is unknown here" in glance and "#fig-speedup" not in glance  # no link to a missing figure
    assert "*Speedup: not drawn: no bucket had its default timed" in md
    assert "*Tuned vs untuned op timings: not drawn: the data has no op_timings.parquet.*" in md
    assert not {"speedup.png", "op_timings.png", "step_change.png"} & {p.name for p in files}
    assert "These tuning rows carry no phase times" in _section(md, "Tuning time")


def test_an_unreadable_file_is_named_on_the_page(tmp_path):
    shutil.copytree(DATA / "h200" / "fp8-repeat-r1" / "fp8_gemm-llama3-8b-o", tmp_path / "data" / "good")
    shutil.copytree(DATA / "h200" / "fp8-repeat-r1" / "fp8_gemm-llama3-8b-qkv", tmp_path / "data" / "bad")
    bad = tmp_path / "data" / "bad" / "capture" / "candidates.parquet"
    bad.write_bytes(bad.read_bytes()[:100])
    with pytest.warns(UserWarning, match="could not be read"):
        data = read_datadir(tmp_path / "data")
    report.build_report(data, tmp_path / "out", formats=("png",), progress=False)
    provenance = _section((tmp_path / "out" / "index.md").read_text(), "Provenance")
    assert "**1 file could not be read** and was skipped:" in provenance and str(bad) in provenance


def test_datadir_splits_step_sets_and_reads_caches_beside_captures(shipped_h200):
    data = shipped_h200
    assert set(data.step["source"].str.split("/").str[0]) == {"step"}
    assert set(data.step_other["source"].str.split("/").str[0]) == {"step-sweep-caches"}
    assert len(data.step_captures) == 4 and data.model_layers == {"llama3-8b": 32, "qwen2.5-32b": 64}
    assert data.cache_winners["capture_run_id"].nunique() == 4 + 12 + 6  # step, sweep and repeat captures
    assert data.labels["N=6144 K=4096"] == "llama3-8b qkv"


def test_the_whole_data_folder_reads_like_its_h200_part(shipped_whole, shipped_h200):
    """``profkit report data``: the step set is found by its captures, not by its folder name."""
    whole, h200 = shipped_whole, shipped_h200
    assert len(whole.step) == len(h200.step) and whole.step_captures == h200.step_captures


def test_overview_step_frames_agree_with_the_capture_and_the_step_rows():
    data = read_datadir(DATA / "h200" / "step")
    r = overview(data)
    be = r.step_break_even
    # One pass of tuned and one of untuned per process: not measurable, so no size saves time beyond noise.
    assert be.empty and (r.step_measured["verdict"] == "not_measurable").all()
    spent = analysis.tuning_breakdown(data.tables.tuning, by="call").groupby("run_id")["wall_s"].sum()
    assert len(r.step_tuning) == 4
    for model, dtype, tuning_s in r.step_tuning[["model", "dtype", "tuning_s"]].itertuples(index=False):
        assert tuning_s == pytest.approx(spent[data.step_captures[(model, dtype)]])
    assert be["steps_to_break_even"].to_numpy() == pytest.approx(be["tuning_s"] * 1e3 / -be["delta_ms"])
    assert be["serving_s_to_break_even"].to_numpy() == pytest.approx(be["steps_to_break_even"] * be["tuned_ms"] / 1e3)
    rows = r.step_rows
    for row in be.itertuples(index=False):
        mine = rows[(rows["model"] == row.model) & (rows["dtype"] == row.dtype) & (rows["phase"] == row.phase)
                    & (rows["tokens"] == row.tokens)]
        assert mine.loc[mine["state"] == "tuned", "step_ms"].median() == pytest.approx(row.tuned_ms)
        assert mine.loc[mine["state"] == "untuned", "step_ms"].median() == pytest.approx(row.untuned_ms)


def test_tuning_time_counts_later_runs():
    """Two ranks tuning the same shapes: the first rank's call heads the line, the other rank's is not hidden."""
    data = read_datadir(DATA / "h200-engine-like" / "capture")
    lines = report.tuning_time_lines(report.ReportContext(data=data, results=overview(data)))
    bf16 = next(line for line in lines if line.startswith("`bf16_gemm`"))
    assert "tuning all 10 buckets took 35.5 s over 1 call;" in bf16
    assert bf16.endswith("Later runs of the same shapes (repeats, other ranks): 14.8 s.")


def test_a_new_section_drops_in_with_one_entry(tmp_path):
    """The module docstring's example: one builder, one entry in the list."""
    def runner_share(ctx):
        cost = analysis.runner_cost(ctx.data.tables.candidates)
        if cost.empty:
            return None
        return report.Section("Where measuring time went per runner", "Candidates timed and seconds spent.",
                              tables=(report.Table(cost, "runner_cost", sort_by="measure_s",
                                                   what="most seconds first"),))

    data = read_datadir(DATA / "h200" / "fp8-repeat-r1")
    sections = list(report.SECTIONS)
    sections.insert(sections.index(report.serving_section), runner_share)
    report.build_report(data, tmp_path, sections=sections, formats=("png",), progress=False)
    md = (tmp_path / "index.md").read_text()
    assert "- [Where measuring time went per runner](#where-measuring-time-went-per-runner)" in md
    assert md.index("## Outside tuning") < md.index("## Where measuring time went per runner") < md.index(
        "## Kernels beside serving")
    cost = pd.read_csv(tmp_path / "runner_cost.csv")
    assert len(cost) == len(analysis.runner_cost(data.tables.candidates)) > 10
    assert f"Top 10 of {len(cost)} rows (most seconds first)" in md


# -- profkit verify and advise on the page ---------------------------------------------------------
@pytest.fixture(scope="module")
def whole(shipped_whole, shipped_whole_results):
    """The report context of the whole data folder: the H200 captures and the verify tables."""
    return report.ReportContext(data=shipped_whole, results=shipped_whole_results)


@pytest.fixture(scope="module")
def verified(whole):
    """The whole data folder's verify section, built once (it reads every verify and step set)."""
    return report.verify_section(whole)


def test_verify_section_counts_what_op_summary_computes(whole, verified):
    from profkit.analysis.verify import bucket_verdicts, op_summary
    from profkit.sources.verify import read_verify

    # The shipped tunings' verify tables; the policy study's (a policy column) have their own table.
    summary = op_summary(bucket_verdicts(read_verify(DATA / "h200-verify" / "sweep", DATA / "h200-verify" / "step")))
    section = verified
    assert section.title == "Do the tuner's picks hold in serving?"
    for row in summary.itertuples(index=False):
        assert (f"- `{row.op}`: of {row.buckets} buckets the tuner's pick was **{row.faster} faster, {row.slower} "
                f"slower** and {row.within_noise} within noise") in section.text
    shipped = whole.data.verify[whole.data.verify["policy"].isna()]
    n = shipped["source"].nunique()
    assert n >= 16 and f"{n} verify tables of {shipped['run_id'].nunique()} captured tuning runs" in section.text
    shown = section.tables[0].frame
    assert shown[["op", "faster", "slower", "within_noise"]].astype(str).values.tolist() == \
        summary[["op", "faster", "slower", "within_noise"]].astype(str).values.tolist()
    names = [f.name for f in section.figures]
    assert names[0] == "serving_vs_tuner" and len(section.figures[0].draw().axes) == 2  # one panel per op
    assert {"h200-verify_step-bracketed_llama3-8b_fp8", "h200-verify_step-v2_llama3-8b-fp8-v2-graph",
            "h200-advise_llama3-8b-fp8_proof"} <= set(names) and len(set(names)) == len(names)
    assert "verify_policies" in [t.name for t in section.tables]


def test_verify_section_policy_table_from_the_policy_study(whole, verified):
    from profkit.analysis.verify import policy_table

    v = whole.data.verify
    study = v[v["policy"].notna()]
    study = study.assign(run_id=study["source"].str.rpartition("/")[0])  # one tuning per table
    section = verified
    table = next(t.frame for t in section.tables if t.name == "verify_policies")
    assert sorted(set(zip(table["policy"], table["op"]))) == sorted(set(zip(study["policy"], study["op"])))
    expected = policy_table(study)
    assert table[["policy", "slower", "buckets"]].values.tolist() == expected[["policy", "slower", "buckets"]].values.tolist()
    assert table["tuning_s"].notna().all()  # from the study's provenance.json runs
    # 20 buckets per tuning. fp8: o in two processes, qkv in one, down (v2-eager only) in one;
    # bf16: o in two, qkv in one, down (no v2-graph) in one.
    buckets = {(r.op, r.policy): r.buckets for r in table.itertuples(index=False)}
    assert buckets == {("fp8_gemm", "autotune"): 60, ("fp8_gemm", "v2-graph"): 60, ("fp8_gemm", "v2-eager"): 80,
                       ("bf16_gemm", "autotune"): 80, ("bf16_gemm", "v2-graph"): 60, ("bf16_gemm", "v2-eager"): 80}
    for row in expected.itertuples(index=False):
        assert (f"- `{row.policy}` {row.op} ({row.shapes} shapes, {row.buckets} buckets): **{row.slower} slower** "
                f"than the default") in section.text


def test_verify_section_states_the_repaired_step_against_untuned_and_cache(whole, verified):
    rows = whole.data.step_other
    rows = rows[rows["source"].str.startswith("h200-verify/step-three-processes/llama3-8b-fp8")]
    assert set(rows["state"]) == {"untuned", "cache", "repaired"}
    m = measured_step_change(rows, baseline="untuned")
    rep = m[m["state"] == "repaired"]
    faster = int((rep["beyond_noise"] & ~rep["slower"]).sum())
    assert (f"- llama3-8b fp8 step (h200-verify/step-three-processes), sizes of {len(rep)} beyond noise: **repaired** "
            f"vs untuned {faster} faster, {int(rep['slower'].sum())} slower; vs cache ") in verified.text


def test_verify_section_gives_the_step_predictions_sign_agreement(whole, verified):
    from profkit.analysis.step import sign_agreement
    from profkit.analysis.verify import verify_step_changes

    r, data = whole.results, whole.data
    served = sign_agreement(r.step_measured, verify_step_changes(data.verify, r.step_rows, captures=data.step_captures,
                                                                 linears=data.linears))
    assert set(served["model"]) == {"llama3-8b", "qwen2.5-32b"}  # both models' step captures were verified
    text = verified.text
    for a in served.itertuples(index=False):
        assert (f"- {a.model} {a.dtype}: predicted from verify, the tuned step's change has the measured sign at "
                f"**{a.agree} of {a.sizes} sizes** ({a.agree_beyond_noise} of the {a.beyond_noise}") in text


def test_verify_section_absent_without_verify_tables(shipped_h200, shipped_h200_results):
    data = shipped_h200
    assert data.verify.empty
    ctx = report.ReportContext(data=data, results=shipped_h200_results)
    assert ctx.verdicts.empty and report.verify_section(ctx) is None
    assert report.verify_low_latency_lines(ctx) == []


def test_low_latency_lines_from_verify_at_m_up_to_8(whole):
    v = whole.verdicts
    lines = report.verify_low_latency_lines(whole)
    assert len(lines) == 2
    for op, line in zip(("bf16_gemm", "fp8_gemm"), lines):
        small = v[(v["op"] == op) & (v["m"] <= 8)]
        counts = small["verdict"].value_counts()
        assert line.startswith(f"`{op}` in serving at M = 1, 2, 3, 4, 5, 6, 7, 8 ")
        assert (f"median {small['serving_speedup'].median():.3f}x the default's speed; **{counts['faster']} faster, "
                f"{counts['slower']} slower** beyond noise and {counts['within_noise']} within noise, of "
                f"{len(small)} (capture, shape, M) points.") in line
    glance = report.glance(whole).text
    assert lines[0] in glance
    assert "(figure: [serving vs tuner](#fig-serving_vs_tuner), [step change](#fig-step_change))" in glance


def test_advise_section_is_on_the_page(built, whole):
    out, files = built
    md = (out / "index.md").read_text()
    assert "- [Tuning plan (profkit advise)](#tuning-plan-profkit-advise)" in md
    assert {"advise_fp8_gemm.png", "advise_bf16_gemm.png", "advise_plan.csv"} <= {p.name for p in files}
    assert "by tuner timings" in _section(md, "Tuning plan (profkit advise)")  # no verify tables under data/h200
    assert "by serving timings" in report.advise_report_section(whole).text


def test_datadir_stacks_every_verify_table_and_names_an_unreadable_one(tmp_path):
    shutil.copytree(DATA / "h200" / "fp8-repeat-r1" / "fp8_gemm-llama3-8b-o", tmp_path / "data" / "cap")
    good = DATA / "h200-verify" / "sweep"
    for name in ("fp8_gemm-llama3-8b-o", "bf16_gemm-llama3-8b-o"):
        (tmp_path / "data" / "verify" / name).mkdir(parents=True)
        shutil.copy(good / name / "verify.parquet", tmp_path / "data" / "verify" / name)
    bad = tmp_path / "data" / "verify" / "broken" / "verify.parquet"
    bad.parent.mkdir()
    bad.write_bytes((good / "fp8_gemm-llama3-8b-o" / "verify.parquet").read_bytes()[:200])
    with pytest.warns(UserWarning, match="could not be read"):
        data = read_datadir(tmp_path / "data")
    assert len(data.problems) == 1 and str(bad) in data.problems[0]
    assert sorted(data.verify["source"].unique()) == ["verify/bf16_gemm-llama3-8b-o/verify.parquet",
                                                      "verify/fp8_gemm-llama3-8b-o/verify.parquet"]
    assert len(data.verify) == 2 * 174 and "verify rows" in repr(data)


def test_prediction_lines_check_verify_against_step_sets_that_loaded_the_verified_cache(whole):
    from profkit.analysis.step import sign_agreement
    from profkit.analysis.verify import verify_step_changes

    data = whole.data
    rows = data.step_other[data.step_other["source"].str.startswith("h200-verify/step-bracketed/llama3-8b-fp8")]
    measured = measured_step_change(rows[rows["state"].isin(["untuned", "cache"])])
    predicted = verify_step_changes(data.verify, whole.results.step_rows, captures=data.step_captures,
                                    linears=data.linears)
    a = sign_agreement(measured, predicted, state="cache").set_index("dtype").loc["fp8"]
    text = report._prediction_lines(whole, report._step_comparisons(whole))
    assert (f"llama3-8b fp8, against the tuned cache.json vs untuned of h200-verify/step-bracketed: predicted from "
            f"verify, the sign holds at **{a['agree']} of {a['sizes']} sizes**") in text
    assert "of h200-advise/" not in text  # the advise proofs loaded their own tuning pass's cache, not the verified one
    assert "against the tuned cache.json vs untuned of h200-verify/step-interleaved/cache" in text  # no new state there


def test_verify_section_compares_each_step_run_with_the_untuned_of_its_own_process(whole, verified):
    rows = whole.data.step_other
    run = rows[rows["source"] == "h200-verify/step-v2/llama3-8b-bf16-v2-graph"]
    assert set(run["state"]) == {"untuned", "v2-graph"}
    m = measured_step_change(run)
    faster = int((m["beyond_noise"] & ~m["slower"]).sum())
    text = verified.text
    assert (f"- llama3-8b bf16 step (h200-verify/step-v2/llama3-8b-bf16-v2-graph), sizes of 16 beyond noise: "
            f"**v2-graph** vs untuned {faster} faster, {int(m['slower'].sum())} slower;") in text
    # The three-process set has untuned in one process only: its states meet that untuned across processes.
    assert "(h200-verify/step-three-processes)" in text and "step-three-processes/llama3-8b-fp8-cache)" not in text
    assert "Between-pass drift (" in text
