"""Hostile inputs, round three (issue 37): the newer commands keep the promises the old ones keep.

compare's ``--json`` goes through the one atomic writer; names are data wherever they are drawn
(every figure's text), printed (compare's and advise's terminal lines) or written to a CSV cell;
damaged step.jsonl text is named per line while the rest is compared; the smaller findings each
end as one named line; a report replaces its folder whole. Captures are FlashInfer's real
AutoTuner on the CPU (``profkit.testing``); step rows are the shipped H200 step.jsonl.
"""

from __future__ import annotations

import contextlib
import csv
import errno
import io
import json
import os
import re
import socket
import subprocess
import sys
import threading
import warnings
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from matplotlib.text import Text

import profkit
from profkit import schema
from profkit import testing as T
from profkit.cli import compare as compare_cli
from profkit.cli import main
from profkit.errors import ParseError, ProfkitError
from profkit.outputs.csv_text import csv_text
from profkit.printable import printable
from profkit.sources.plan import read_plan
from profkit.sources.verify import read_verify

from conftest import DATA, ROOT
from test_capture_writer import no_space
from test_safe_outputs import capture, pick_rows, renamed, write_verify

STEP = DATA / "h200-verify" / "step-interleaved" / "cache" / "llama3-8b-bf16" / "step.jsonl"
HOSTILE = ["gemm $\\frac{$", "x\x1b]0;owned\x07y", "\x1b[2J\x1b[H16 faster, 0 slower of 16", "a\nb", "a\rb",
           "\u202egnp.exe", "=cmd|' /C calc'!A0", "@SUM(1+1)", "+1+1", "\u200fRTL\u200e", "\x9b31m", "tab\there",
           "a\\$b$"]
NAMES = st.one_of(st.sampled_from(HOSTILE), st.text(min_size=1, max_size=12),
                  st.text(alphabet="$\\{}^_\x1b\x07\x9b\n\r\t\u202e\u2066=+-@ab", min_size=1, max_size=10))
# What must never reach a terminal or a figure as it is (profkit.printable's set; newlines checked apart).
UNSAFE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029\ud800-\udfff]")


def step_rows() -> list[dict]:
    return [json.loads(line) for line in STEP.read_text().splitlines()]


def write_rows(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))  # json.dumps writes a lone surrogate as "\udcff"
    return path


def one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert "\n" not in err, err
    return err


@pytest.fixture(scope="module")
def toy():
    return capture({"gain_op": "gain", "noise_op": "noise"})


# -- 1. compare --json: the one atomic writer ---------------------------------------------------------
def test_compare_json_replaces_a_planted_link_and_refuses_an_input(tmp_path, capsys):
    step = write_rows(tmp_path / "step.jsonl", step_rows())
    before = step.read_bytes()
    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    link = tmp_path / "rows.json"
    link.symlink_to(victim)
    assert main(["compare", str(step), "--json", str(link)]) == 0
    assert victim.read_text() == "keep" and not link.is_symlink() and len(json.loads(link.read_text())) == 16
    capsys.readouterr()
    os.link(step, tmp_path / "hard.jsonl")
    for given_paths, target in (([step], step), ([step], tmp_path / "hard.jsonl"), ([tmp_path], step)):
        assert main(["compare", *map(str, given_paths), "--json", str(target)]) == 1
        err = one_line_error(capsys)
        assert "would overwrite the input" in err and "choose another --json" in err and "--out" not in err
    assert step.read_bytes() == before


def test_compare_json_creates_only_a_last_missing_folder(tmp_path, capsys):
    step = write_rows(tmp_path / "step.jsonl", step_rows())
    assert main(["compare", str(step), "--json", str(tmp_path / "new" / "rows.json")]) == 0
    assert json.loads((tmp_path / "new" / "rows.json").read_text())
    capsys.readouterr()
    assert main(["compare", str(step), "--json", str(tmp_path / "a" / "b" / "rows.json")]) == 1
    err = one_line_error(capsys)
    assert err.startswith("profkit compare: --json ") and "does not exist" in err and not (tmp_path / "a").exists()
    assert main(["compare", str(step), "--json", str(tmp_path)]) == 1
    assert "--json" in one_line_error(capsys)


def test_compare_json_on_a_full_disk_keeps_the_old_file(tmp_path, capsys, monkeypatch):
    step = write_rows(tmp_path / "step.jsonl", step_rows())
    out = tmp_path / "rows.json"
    out.write_text("[]\n")
    monkeypatch.setattr(os, "fsync", no_space)
    assert main(["compare", str(step), "--json", str(out)]) == 1
    assert "no space left" in one_line_error(capsys)
    assert out.read_text() == "[]\n" and not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_a_reader_never_sees_a_partial_json_file(tmp_path):
    step = write_rows(tmp_path / "step.jsonl", step_rows())
    out = tmp_path / "rows.json"
    stop, reads, partial = threading.Event(), [], []

    def read():
        while not stop.is_set():
            with contextlib.suppress(FileNotFoundError):
                text = out.read_text()
                reads.append(len(text))
                try:
                    json.loads(text)
                except ValueError:
                    partial.append(len(text))

    reader = threading.Thread(target=read)
    reader.start()
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            for _ in range(3):
                assert main(["compare", str(step), "--json", str(out)]) == 0
        rows = pd.DataFrame(json.loads(out.read_text()))
        for _ in range(100):  # the writing step alone, many times: a cut file would be read at least once
            compare_cli._write_json(rows.drop(columns="kind"), "step", out, [step])
    finally:
        stop.set()
        reader.join()
    assert len(reads) > 100 and partial == []


def test_a_fifo_given_to_compare_is_named_not_waited_on(tmp_path):
    fifo = tmp_path / "verify.parquet"
    os.mkfifo(fifo)
    for args in ([str(fifo)], ["--kind", "verify", str(fifo)]):
        ran = subprocess.run([sys.executable, "-m", "profkit", "compare", *args], capture_output=True, text=True,
                             timeout=120, cwd=ROOT)
        assert ran.returncode == 1 and f"{fifo}: is a FIFO" in ran.stderr, ran.stderr
    with pytest.raises(ParseError, match="is a FIFO"):
        read_verify(fifo)


# -- 3. damaged text in step.jsonl ---------------------------------------------------------------------
@pytest.mark.filterwarnings("default::UserWarning")  # the reader's warnings: lines of the CLI's stderr
def test_a_lone_surrogate_is_named_by_line_and_the_rest_compared(tmp_path, capsys):
    rows = step_rows()
    rows[0]["model"], rows[5]["dtype"] = "llama3-8b\udcff", "\udcffbf16"
    step = write_rows(tmp_path / "step.jsonl", rows)
    assert '"llama3-8b\\udcff"' in step.read_text()
    assert main(["compare", str(step), "--json", str(tmp_path / "rows.json")]) == 0
    out, err = capsys.readouterr()
    assert f"{step}: line(s) 1, 6: lone surrogates" in err
    assert "faster" in out and len(json.loads((tmp_path / "rows.json").read_text())) >= 15
    with pytest.warns(UserWarning, match=r"line\(s\) 1, 6: lone surrogates"):
        bench = profkit.read_bench(step, format="profkit-step")
    assert bench["model"].iloc[0] == "llama3-8b\ufffd" and len(bench) == len(rows)


@pytest.mark.filterwarnings("default::UserWarning")  # the reader's warnings: lines of the CLI's stderr
@pytest.mark.parametrize("bad", [2**70, "12abc"])
def test_step_rows_with_absurd_tokens_are_named_and_set_aside(tmp_path, capsys, bad):
    rows = step_rows()
    for row in rows:
        row["tokens"] = bad if row["tokens"] == 1 else row["tokens"]
    step = write_rows(tmp_path / "step.jsonl", rows)
    assert main(["compare", str(step)]) == 0
    out, err = capsys.readouterr()
    lost = sum(r["tokens"] == bad for r in rows)
    assert f"{step}:1: values that do not fit their column were left empty: tokens=" in err
    assert f"set aside {lost} step row(s) without a readable tokens" in err
    assert "decode      2  cache" in out and "decode      1  cache" not in out and out.endswith("of 15\n")


# -- 2. names are data: the terminal, the figures, the CSV files -----------------------------------------
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(model=NAMES, dtype=NAMES, state=NAMES)
@example(model=" ", dtype="gemm $\\frac{$", state="gemm")  # a name of spaces beside the separator (CI, 2026-12-07)
def test_property_compare_prints_names_as_data(tmp_path_factory, model, dtype, state):
    if state.strip() in ("", "untuned"):
        state = "s" + state
    rows = step_rows()
    for row in rows:
        row["model"], row["dtype"] = model, dtype
        if row["state"] == "cache":
            row["state"] = row["label"] = state
    folder = tmp_path_factory.mktemp("step")
    step = write_rows(folder / "step.jsonl", rows)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["compare", str(step), "--json", str(folder / "rows.json")]) == 0
    for text in (out.getvalue(), err.getvalue()):
        assert not UNSAFE.search(text), ascii(text)
    lines = out.getvalue().splitlines()
    assert len(lines) == 18 and lines[-1].endswith("of 16")  # a group line, 16 comparisons, the counts: none forged
    assert lines[0].endswith(f"  {printable(model)}  {printable(dtype)}")  # the group line: each name as data
    written = json.loads((folder / "rows.json").read_text())
    assert {r["model"] for r in written} == {model} and {r["state"] for r in written} == {state}


def _shown(text: Text) -> str:
    """What matplotlib draws of a text: mathtext's escaped dollar as a dollar."""
    return text.get_text().replace(r"\$", "$") if text.get_parse_math() else text.get_text()


def _drawn(fig) -> list[Text]:
    fig.savefig(io.BytesIO(), format="svg")  # ticks are formatted while drawing; a name that fails to draw raises
    return [t for t in fig.findobj(Text) if t.get_text()]


def _math_free(text: Text) -> bool:
    """No text of a name starts mathtext: either parsing is off or every dollar is escaped (matplotlib's own
    log-axis labels, ``$\\mathdefault{10^{1}}$``, are its own mathtext)."""
    raw = text.get_text()
    return (not text.get_parse_math() or "$" not in raw.replace(r"\$", "")
            or re.fullmatch(r"\$\\mathdefault\{[^$]*\}\$", raw) is not None)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=NAMES)
@example(name="gemm $\\frac{$")
@example(name="x\x1b]0;owned\x07\u202e")
def test_property_every_figure_text_shows_the_name_as_it_is(toy, name):
    from profkit import views

    tables = renamed(toy, {"gain_op": name})
    bench = pd.DataFrame([{**r, "model": name, "dtype": name} for r in step_rows()])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # glyphs a font lacks (a random name's), empty-figure notes
        figures = [views.plot_tactic_map(tables.winners), views.plot_candidates(tables.candidates, op=name),
                   views.plot_step_times(bench, model=name, dtype=name)]
        drawn = [_drawn(fig) for fig in figures]
    shown = printable(name, newlines=True)
    for texts in drawn:
        assert all(not UNSAFE.search(t.get_text()) and _math_free(t) for t in texts), [ascii(t.get_text()) for t in texts]
        assert any(shown in _shown(t) for t in texts), (ascii(name), [ascii(t.get_text()) for t in texts])


def test_a_callers_own_mathtext_beside_a_plot_stays_mathtext(toy):
    from matplotlib.figure import Figure

    from profkit import views

    fig = Figure()
    left, right = fig.subplots(1, 2)
    left.set_title(r"$\alpha$ mine")
    left.set_xticks([0, 1], [r"$\beta$", "b"])
    views.plot_tactic_map(renamed(toy, {"gain_op": "$x$"}).winners, ax=right)
    drawn = _drawn(fig)
    assert left.title.get_parse_math() and left.get_title() == r"$\alpha$ mine"
    assert [t.get_text() for t in left.get_xticklabels()] == [r"$\beta$", "b"]
    assert any(t.get_text() == r"\$x\$  N=4, K=8" for t in drawn)


@pytest.fixture(scope="module")
def hostile_report(toy, tmp_path_factory):
    """``profkit report`` of a capture whose ops carry hostile names (and a step set with hostile model names)."""
    root = tmp_path_factory.mktemp("hostile")
    names = {"gain_op": "gemm $\\frac{$ \x1b]0;t\x07\n\u202e", "noise_op": "=HYPERLINK(\"http://x\")"}
    renamed(toy, names).save(root / "capture")
    out = root / "report"
    with contextlib.redirect_stderr(io.StringIO()) as err:
        code = main(["report", str(root / "capture"), "--out", str(out), "--formats", "png,svg", "--no-progress"])
    assert code == 0, err.getvalue()
    return out, names


def test_report_figures_draw_hostile_names_as_text(hostile_report):
    out, names = hostile_report
    svgs = sorted(out.glob("*.svg"))
    assert len(svgs) >= 4
    for svg in svgs:
        text = svg.read_text()
        assert not UNSAFE.search(text), svg.name
    assert any("gemm $\\frac{$ \\x1b]0;t\\x07" in svg.read_text() for svg in svgs)


def test_report_csv_cells_never_start_a_formula(hostile_report):
    out, names = hostile_report
    cells = [cell for f in out.glob("*.csv") for row in csv.reader(f.open(newline="")) for cell in row]
    assert "'" + names["noise_op"] in cells
    starts = [c for c in cells if c[:1] in ("=", "+", "-", "@", "\t", "\r")]
    assert all(re.fullmatch(r"[+-]?[\d.]+(e[+-]?\d+)?|[+-]?inf|-", c) for c in starts), starts


def test_csv_text_quotes_formula_cells_and_leaves_numbers():
    frame = pd.DataFrame({"op": pd.array(["=1+1", "@A1", "+x", "-x", "\tx", "ok", None, "-1", "-"], dtype="string"),
                          "tactic": ["-1"] * 9, "ms": [-1.5] * 9})
    rows = list(csv.reader(io.StringIO(csv_text(frame))))
    assert [r[0] for r in rows] == ["op", "'=1+1", "'@A1", "'+x", "'-x", "'\tx", "ok", "", "-1", "-"]
    assert {r[1] for r in rows[1:]} == {"-1"} and {r[2] for r in rows[1:]} == {"-1.5"}
    assert next(csv.reader(io.StringIO(csv_text(frame.rename(columns={"op": "=op"}))))) == ["'=op", "tactic", "ms"]


# -- 5. a report replaces its folder whole -----------------------------------------------------------------
def test_a_report_replaces_an_earlier_report_whole_and_refuses_foreign_files(toy, tmp_path, capsys):
    toy.save(tmp_path / "capture")
    out = tmp_path / "report"
    # One figure (the hostile report above draws them all): pages, tables, summary and a figure to replace.
    args = ["report", str(tmp_path / "capture"), "--out", str(out), "--formats", "png", "--only", "speedup",
            "--no-progress"]
    assert main(args) == 0
    first = sorted(p.name for p in out.iterdir())
    (out / "speedup.png").rename(out / "gone_figure.png")  # a page or figure the next report does not write
    listed = json.loads((out / ".profkit-written").read_text())
    (out / ".profkit-written").write_text(json.dumps(listed + ["gone_figure.png"]))
    assert main(args) == 0
    assert sorted(p.name for p in out.iterdir()) == first and not (out / "gone_figure.png").exists()
    (out / "notes.txt").write_text("mine")
    capsys.readouterr()
    assert main(args) == 1
    err = one_line_error(capsys)
    assert f"{out}: holds files profkit did not write there (notes.txt)" in err
    assert (out / "notes.txt").read_text() == "mine" and sorted(p.name for p in out.iterdir()) == sorted(first + ["notes.txt"])
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staged folder left


def test_a_report_folder_written_before_the_list_is_replaced(toy, tmp_path):
    toy.save(tmp_path / "capture")
    out = tmp_path / "report"
    for name in ("index.html", "summary.json", "old_figure.png", "old.csv"):
        (out / name).parent.mkdir(exist_ok=True)
        (out / name).write_text("earlier report")
    assert main(["report", str(tmp_path / "capture"), "--out", str(out), "--formats", "png", "--only", "speedup",
                 "--no-progress"]) == 0
    assert not (out / "old_figure.png").exists() and (out / "index.html").read_text() != "earlier report"


def test_a_failed_report_leaves_the_earlier_folder_as_it_was(toy, tmp_path, monkeypatch):
    from profkit.outputs import atomic

    out = tmp_path / "out"
    with atomic.whole_folder(out) as staged:
        (staged / "a.txt").write_text("first")
    with pytest.raises(RuntimeError), atomic.whole_folder(out) as staged:
        (staged / "b.txt").write_text("second")
        raise RuntimeError("drawing failed")
    assert sorted(p.name for p in out.iterdir()) == [".profkit-written", "a.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


# -- 4. the smaller findings -------------------------------------------------------------------------------
@pytest.mark.parametrize("buckets", ["[" * 100_000 + "]" * 100_000, "[" + "9" * 5000 + "]"])
def test_a_legacy_plan_md_with_absurd_tuning_buckets_is_named(tmp_path, buckets):
    folder = tmp_path / "plan"
    folder.mkdir()
    shipped = next((DATA / "h200-advise").glob("*/plan"))
    (folder / "blocklist.json").write_bytes((shipped / "blocklist.json").read_bytes())
    md = (shipped / "plan.md").read_text()
    (folder / "plan.md").write_text(re.sub(r"(- `tuning_buckets`: ).*", lambda m: m.group(1) + buckets, md))
    with pytest.raises(ParseError, match="`tuning_buckets`: expected a list of whole numbers") as err:
        read_plan(folder)
    assert "\n" not in str(err.value) and len(str(err.value)) < 300


@pytest.mark.filterwarnings("default::UserWarning")  # the reader's warnings: lines of the CLI's stderr
def test_advise_leaves_out_an_op_no_engine_can_name_and_plans_the_rest(toy, tmp_path, capsys):
    renamed(toy, {"noise_op": "a,b"}).save(tmp_path / "capture")
    assert main(["advise", str(tmp_path / "capture"), "--out", str(tmp_path / "plan")]) == 0
    err = capsys.readouterr().err
    assert "op 'a,b' cannot be written: VLLM_FLASHINFER_AUTOTUNE_SKIP_OPS is a comma-separated list" in err
    assert "left out of the plan" in err
    plan = json.loads((tmp_path / "plan" / "plan.json").read_text())
    assert [o["op"] for o in plan["ops"]] == ["gain_op"]
    renamed(toy, {"noise_op": "-x", "gain_op": "\nx"}).save(tmp_path / "bad")
    assert main(["advise", str(tmp_path / "bad"), "--out", str(tmp_path / "plan2")]) == 1
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert "every op of 1 run(s) has a name no engine switch can carry" in last and not (tmp_path / "plan2").exists()


@pytest.mark.filterwarnings("default::UserWarning")  # the reader's warnings: lines of the CLI's stderr
def test_advise_says_which_buckets_it_set_aside(toy, tmp_path, capsys):
    def moved(frame):
        return frame.assign(bucket=frame["bucket"].where(frame["bucket"] != 1, -8).where(frame["bucket"] != 8, 2**62))

    schema.Tables(candidates=moved(toy.candidates), winners=moved(toy.winners), tuning=moved(toy.tuning),
                  runs=toy.runs).save(tmp_path / "capture")
    assert main(["advise", str(tmp_path / "capture"), "--out", str(tmp_path / "plan")]) == 0
    out, err = capsys.readouterr()
    assert "profkit advise: note: 8 candidate(s) at a bucket that is no positive size (-8) set aside." in err
    assert str(2**62) in out and str(2**62) in (tmp_path / "plan" / "plan.md").read_text()


def test_a_capture_of_unreadable_tables_says_why_nothing_is_planned(toy, tmp_path, capsys):
    folder = toy.save(tmp_path / "capture")
    for table in ("candidates", "winners", "tuning"):
        (folder / f"{table}.parquet").write_bytes(b"PAR1 not utf-8 \xff")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["advise", str(folder), "--out", str(tmp_path / "plan")]) == 1
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert "cannot plan: the capture's tables could not be read" in last and "no tuned bucket" not in last


@pytest.mark.parametrize("where", ["file", "/proc/profkit-x", "/proc/self"])
def test_saving_a_capture_where_it_cannot_go_is_one_named_error(toy, tmp_path, where):
    path = tmp_path / "a-file" if where == "file" else Path(where)
    if where == "file":
        path.write_text("x")
    with pytest.raises(ProfkitError, match=re.escape(str(path))) as err:
        toy.save(path)
    assert "\n" not in str(err.value)


def test_two_captures_in_two_threads_each_record_both_threads_calls(tuner):
    barrier, caps = threading.Barrier(2), {}

    def work(op):
        with profkit.capture() as cap:
            barrier.wait()
            T.tune(op, [T.ToyCublasRunner()], m=4)
            barrier.wait()
        caps[op] = cap

    threads = [threading.Thread(target=work, args=(op,)) for op in ("op_a", "op_b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert caps["op_a"].run_id != caps["op_b"].run_id
    for cap in caps.values():  # docs/capture.md: every open capture records every call of the process
        assert sorted(set(cap.winners["op"])) == ["op_a", "op_b"] and set(cap.winners["run_id"]) == {cap.run_id}


def test_an_integer_op_column_is_named_at_load(toy, tmp_path):
    folder = toy.save(tmp_path / "capture")
    cands = pd.read_parquet(folder / "candidates.parquet")
    cands.assign(op=cands["op"].map({"gain_op": 1, "noise_op": 2}).astype("Int64")).to_parquet(
        folder / "candidates.parquet")
    with pytest.warns(UserWarning, match=r"candidates.parquet: column\(s\) op hold numbers where profkit writes text"):
        tables = profkit.load(folder)
    assert set(tables.candidates["op"]) == {"1", "2"}


@pytest.mark.filterwarnings("default::UserWarning")  # the reader's warnings: lines of the CLI's stderr
def test_compare_sets_aside_an_inverted_band_and_warns_of_routing_on_dense_tables(tmp_path, capsys):
    verify = write_verify(tmp_path / "verify.parquet", [pick_rows("r", "k1", 0.35, p10=0.4, p90=0.3),
                                                        pick_rows("r", "k2", 0.5)])
    assert main(["compare", str(verify), "--routing", "uniform"]) == 0
    err = capsys.readouterr().err
    assert "set aside 1 row(s) with p90 below p10" in err and "not compared" in err
    assert "--routing uniform: these verify tables hold no MoE routing (dense GEMMs)" in err


def test_load_names_what_a_writer_that_ended_left_and_how_to_clean_it(toy, tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    folder = tmp_path / schema.process_dir_name(socket.gethostname(), int(dead.stdout), 0)
    toy.save(folder / schema.segment_name(1))
    (folder / f".{schema.segment_name(2)}.tmp").mkdir()
    (folder / schema.UNWRITTEN).touch()
    with pytest.warns(UserWarning, match="never finished writing"):
        problems = profkit.load(tmp_path).problems
    assert any(".seg-000002.tmp" in p and "delete the folder" in p for p in problems)
    assert any("could not write its last tuning calls" in p and "calls are lost" in p for p in problems)


def test_a_full_disk_marks_the_calls_it_kept_until_they_are_written(tmp_path, monkeypatch):
    from test_capture_writer import FULL_DISK, OPS, M, ProcessCapture, runners

    with T.cpu_autotuner(), ProcessCapture(tmp_path) as process:
        T.tune(OPS[0], runners(), M)
        with monkeypatch.context() as disk, contextlib.redirect_stderr(io.StringIO()):
            disk.setattr(*FULL_DISK["rename"])
            T.tune(OPS[1], runners(), M)
        mark = process.writer.folder / schema.UNWRITTEN
        assert mark.exists() and mark.stat().st_size == 0
        assert profkit.load(tmp_path).problems == ()  # its process runs on: the rows are kept, not lost
        T.tune(OPS[2], runners(), M)
        assert not mark.exists()


def test_repair_never_replaces_a_shipped_data_file(tmp_path, capsys):
    shipped = next((DATA / "h200-verify" / "repaired").glob("*.json"))
    before = shipped.read_bytes()
    verify = write_verify(tmp_path / "verify.parquet", [pick_rows("r", "k1", 0.5)])
    assert main(["repair", str(verify), "--out", str(shipped)]) == 1
    err = one_line_error(capsys)
    assert f"--out {shipped}: is a shipped data file" in err and "choose another --out" in err
    assert shipped.read_bytes() == before


def test_read_verify_of_a_few_columns_holds_what_the_whole_read_holds():
    from profkit.cli.compare import _VERIFY_COLUMNS

    folder = DATA / "h200-moe"
    whole, few = read_verify(folder), read_verify(folder, columns=_VERIFY_COLUMNS)
    assert list(few.columns) == [c for c in whole.columns if c in _VERIFY_COLUMNS or c == "source"]
    pd.testing.assert_frame_equal(few, whole[few.columns])


def test_parse_prints_names_from_a_cache_file_as_data(tmp_path):
    shipped = next((DATA / "h200").rglob("cache.json"))
    doc = json.loads(shipped.read_text())
    key = next(k for k in doc if k != "_metadata")
    op = key.split("'")[1]
    hostile = tmp_path / "cache.json"
    hostile.write_text(json.dumps({"_metadata": doc["_metadata"], key.replace(op, "gemm\x1b]0;pwn\x07\u202e", 1): doc[key]}))
    ran = subprocess.run([sys.executable, "-m", "profkit", "parse", str(hostile)], capture_output=True, text=True,
                         timeout=120, cwd=ROOT)
    assert ran.returncode == 0 and not UNSAFE.search(ran.stdout + ran.stderr)
    assert "gemm\\x1b]0;pwn\\x07\\u202e" in ran.stdout


@pytest.mark.filterwarnings("default::UserWarning")  # the reader's warnings: lines of the CLI's stderr
def test_invalid_utf8_in_step_jsonl_is_named_and_the_rest_compared(tmp_path, capsys):
    data = b"".join(json.dumps(r).encode() + b"\n" for r in step_rows()).replace(b'"llama3-8b"', b'"llama3-8b\xff"', 1)
    step = tmp_path / "step.jsonl"
    step.write_bytes(data)
    assert main(["compare", str(step)]) == 0
    out, err = capsys.readouterr()
    assert f"{step}:1: not valid UTF-8" in err and out.endswith("of 16\n")


def test_a_folder_is_replaced_whole_where_no_atomic_exchange_exists(tmp_path, monkeypatch):
    from profkit.outputs import atomic

    out = tmp_path / "out"
    for text in ("first", "second"):
        with atomic.whole_folder(out) as staged:
            (staged / f"{text}.txt").write_text(text)
        monkeypatch.setattr(atomic, "_exchange", lambda a, b: False)  # the second write: two renames
    assert sorted(p.name for p in out.iterdir()) == [".profkit-written", "second.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_report_pages_show_control_characters_as_escapes_and_keep_tables_whole(hostile_report):
    """A name's ESC, BEL or line break never reaches a page raw: not in a data table's HTML, not splitting a Markdown
    table row (every row of every Markdown table has its header's cells)."""
    out, names = hostile_report
    for page in [*out.glob("*.html"), *out.glob("*.md")]:
        text = page.read_text()
        assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text, page.name
    for page in out.glob("*.md"):
        rows = [line for line in page.read_text().splitlines() if line.startswith("|")]
        assert rows and all(row.endswith("|") for row in rows), page.name  # a row split by a name would not
    index = (out / "index.md").read_text()
    assert "gemm $\\frac{$ \\x1b]0;t\\x07\\n" in index
