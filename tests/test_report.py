"""profkit report: the pages, the figures, the tables and the CLI wiring, on the shipped H200 data."""

from __future__ import annotations

import re
import shutil

import pandas as pd
import pytest

import profkit
from profkit import analysis
from profkit.analysis.overview import overview
from profkit.cli import main
from profkit.errors import ProfkitError
from profkit.sources.datadir import read_datadir, shipped_bench
from profkit.views import report

from conftest import DATA, TEST_DATA

FIGURES = ("tactic_map", "speedup", "candidates", "tuning_time", "tuning_value", "winner_flips", "diff",
           "rank_divergence", "op_timings", "step_change", "step_times_llama3-8b_bf16", "step_times_llama3-8b_fp8",
           "step_times_qwen2.5-32b_bf16", "step_times_qwen2.5-32b_fp8", "kernel_vs_e2e")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    files = report.build_report(read_datadir(DATA / "h200", bench=shipped_bench()), out, progress=False)
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
    assert ("- qwen2.5-32b bf16: tuning 172.2 s, saves time beyond noise at 4 of 16 sizes, breaking even after "
            "3.71 M to 9.66 M steps (1.3 h to 4 h of serving at that size); slower beyond noise at 0.") in section
    assert "- qwen2.5-32b fp8: tuning 153.0 s, saves time beyond noise at 0 of 16 sizes; slower beyond noise at 5." in section
    assert "(llama3-8b has 32, qwen2.5-32b has 64)" in section
    be = pd.read_csv(out / "break_even.csv")
    assert len(be) == 12 and (be["delta_ms"] < -be["noise_ms"]).all()


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
    assert "no such directory" in capsys.readouterr().err
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


def test_datadir_splits_step_sets_and_reads_caches_beside_captures():
    data = read_datadir(DATA / "h200")
    assert set(data.step["source"].str.split("/").str[0]) == {"step"}
    assert set(data.step_other["source"].str.split("/").str[0]) == {"step-sweep-caches"}
    assert len(data.step_captures) == 4 and data.model_layers == {"llama3-8b": 32, "qwen2.5-32b": 64}
    assert data.cache_winners["capture_run_id"].nunique() == 4 + 12 + 6  # step, sweep and repeat captures
    assert data.labels["N=6144 K=4096"] == "llama3-8b qkv"


def test_the_whole_data_folder_reads_like_its_h200_part():
    """``profkit report data``: the step set is found by its captures, not by its folder name."""
    whole, h200 = read_datadir(DATA), read_datadir(DATA / "h200")
    assert len(whole.step) == len(h200.step) and whole.step_captures == h200.step_captures


def test_overview_step_frames_agree_with_the_capture_and_the_step_rows():
    data = read_datadir(DATA / "h200" / "step")
    r = overview(data)
    be = r.step_break_even
    assert len(be) == 12 and (be["delta_ms"] < -be["noise_ms"]).all()
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
