"""profkit.read_log against the live capture of the same runs (H200 and CPU) and against damaged logs."""

from __future__ import annotations

import functools
import gzip
import random

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import profkit
import log_golden
from conftest import DATA, TEST_DATA
from profkit.cli import main as cli_main
from profkit.errors import ParseError

H200 = DATA / "h200"
SETS = sorted(p.parent.name for p in H200.glob("*/debug.log.gz"))
SHAPES = sorted((s, p.parent.parent.name) for s in SETS for p in (H200 / s).glob("*/capture/runs.parquet"))
CANDIDATE_KEY = ["op", "profile", "bucket", "runner", "tactic"]
WINNER_KEY = ["op", "profile", "bucket", "runner", "tactic", "time_ms", "status", "extras"]


@functools.lru_cache(maxsize=None)
def log_of(path) -> profkit.Tables:
    return profkit.read_log(path)


@functools.lru_cache(maxsize=None)
def capture_of(set_name: str, shape: str) -> profkit.Tables:
    return profkit.load(H200 / set_name / shape / "capture")


def sorted_rows(frame: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    return frame[columns].sort_values(columns, kind="stable").reset_index(drop=True).astype("object")


# -- the shipped H200 runs -----------------------------------------------------------------------
@pytest.mark.parametrize("set_name,shape", SHAPES, ids=[f"{s}/{p}" for s, p in SHAPES])
def test_h200_log_agrees_with_the_capture(set_name, shape):
    """Same candidates (per op/profile/runner, tactics, times exactly as printed) and identical winners."""
    cap = capture_of(set_name, shape)
    call = int(cap.candidates["call"].iloc[0])  # the shape's tuning call in the process
    log = log_of(H200 / set_name / "debug.log.gz")
    theirs = cap.candidates[cap.candidates["source"] == "flashinfer"]  # profkit's default timings never hit the log
    ours = log.candidates[log.candidates["call"] == call]
    assert ours.groupby(["op", "profile", "runner"]).size().to_dict() == \
        theirs.groupby(["op", "profile", "runner"]).size().to_dict()
    pd.testing.assert_frame_equal(sorted_rows(ours, CANDIDATE_KEY + ["time_ms", "status"]),
                                  sorted_rows(theirs, CANDIDATE_KEY + ["time_ms", "status"]))
    pd.testing.assert_frame_equal(sorted_rows(log.winners[log.winners["call"] == call], WINNER_KEY),
                                  sorted_rows(cap.winners, WINNER_KEY))


@pytest.mark.parametrize("set_name", SETS)
def test_h200_logs_read_whole(set_name):
    log = log_of(H200 / set_name / "debug.log.gz")
    assert set(log.report["status"]) <= {"read", "ignored", "foreign"}  # nothing unreadable
    assert (log.candidates["source"] == "flashinfer").all() and log.candidates["op"].notna().all()
    calls = log.tuning[log.tuning["kind"] == "call"]
    assert (calls["n_profiles"] == 20).all() and (calls["n_profiled"] == 20).all() and (calls["status"] == "ok").all()
    assert len(log.runs) == 1 and log.runs["source_kind"].eq("log").all()
    assert log.events["kind"].value_counts()[["tuning_start", "tuning_end", "cache_saved"]].eq(len(calls)).all()


def test_first_record_of_each_profile_is_glued_to_tqdm():
    """The errata's trap: split only on line ends and each profile's first candidate is lost."""
    path = H200 / "fp8" / "debug.log.gz"
    lines = gzip.decompress(path.read_bytes()).decode().split("\n")
    glued = [line for line in lines if line.startswith("\r[AutoTuner]: Tuning") and "avg_time" in line]
    assert len(glued) >= 100
    log = log_of(path)
    glued_rows = log.candidates["line"].isin([i + 1 for i, line in enumerate(lines) if line in set(glued)])
    assert glued_rows.sum() == len(glued)


def test_flashinfer_jit_log_assigns_ops_forward_and_splits_processes():
    """No tqdm there; the bf16 workspace log appended the fp8 process and then the bf16 one."""
    fp8 = log_of(H200 / "fp8" / "flashinfer_jit.log.gz")
    assert fp8.candidates["op"].eq("fp8_gemm").all()
    pd.testing.assert_frame_equal(sorted_rows(fp8.candidates, CANDIDATE_KEY + ["call", "time_ms"]),
                                  sorted_rows(log_of(H200 / "fp8" / "debug.log.gz").candidates,
                                              CANDIDATE_KEY + ["call", "time_ms"]))
    both = log_of(H200 / "bf16" / "flashinfer_jit.log.gz")
    assert list(both.runs["run_id"]) == ["flashinfer_jit.log.gz#1", "flashinfer_jit.log.gz#2"]
    second = both.candidates[both.candidates["run_id"] == "flashinfer_jit.log.gz#2"]
    assert set(second["op"]) == {"bf16_gemm"} and sorted(second["call"].unique()) == [1, 2, 3, 4, 5, 6]
    pd.testing.assert_frame_equal(sorted_rows(second, CANDIDATE_KEY + ["call", "time_ms"]),
                                  sorted_rows(log_of(H200 / "bf16" / "debug.log.gz").candidates,
                                              CANDIDATE_KEY + ["call", "time_ms"]))


def test_out_of_range_warnings_are_cache_misses():
    events = log_of(H200 / "bf16" / "debug.log.gz").events
    misses = events[events["kind"] == "cache_miss"]
    assert len(misses) == 17 and misses["op"].eq("bf16_gemm").all() and misses["runner"].eq("CudnnBf16GemmRunner").all()
    calls = events[events["kind"] == "fallback_call"]
    assert calls["count"].sum() == 472 and calls["profile"].notna().all()  # one row per message, counted


# -- real AutoTuner on the CPU -------------------------------------------------------------------
CPU = TEST_DATA / "log_cpu_failures"


@pytest.mark.parametrize("name", ["failures.stderr.log", "failures.flashinfer_jit.log"])
def test_cpu_log_agrees_with_the_capture(name):
    """Failures, fallbacks, OOM: the log holds all of it except the OOM'd candidate and repeated warnings."""
    log, cap = log_of(CPU / name), profkit.load(CPU / "capture")
    theirs = cap.candidates[cap.candidates["status"] != "oom"]  # an OOM leaves no candidate line
    key = CANDIDATE_KEY + ["call", "time_ms"]
    pd.testing.assert_frame_equal(sorted_rows(log.candidates, key), sorted_rows(theirs, key))
    failed = log.candidates[log.candidates["status"] == "failed"]
    assert len(failed) == 6 and failed["tactic"].eq("2").all() and failed["time_ms"].isna().all()
    assert failed["error"].str.startswith("tactic 2 is not supported for shape").all()
    fallback = log.candidates[log.candidates["status"] == "fallback"]
    assert set(fallback["tactic"]) <= {"[4, []]"} and len(fallback) == (1 if name.endswith("stderr.log") else 0)
    wkey = ["call", "op", "bucket", "tactic", "time_ms", "source", "reason"]
    pd.testing.assert_frame_equal(sorted_rows(log.winners, wkey), sorted_rows(cap.winners, wkey))
    calls = log.tuning[log.tuning["kind"] == "call"].set_index("op")
    assert calls.loc["toy_oom", "status"] == "oom_abort" and calls.loc["toy_gemm", "status"] == "ok"
    kinds = log.events["kind"].value_counts()
    assert kinds["skipped_tactics"] == 6 and kinds["oom"] == 1 and kinds["cache_saved"] == 1 and kinds["cache_miss"] == 1


def test_cache_hits_loaded_and_mismatched_files():
    hits = log_of(TEST_DATA / "log_cache_hits" / "hits.stderr.log")
    assert hits.candidates.empty and hits.winners.empty
    kinds = hits.events["kind"].value_counts()
    assert kinds["cache_loaded"] == 2 and kinds["cache_hit"] == 2
    call = hits.tuning[hits.tuning["kind"] == "call"].iloc[0]
    assert (call["op"], call["n_profiles"], call["n_profiled"]) == ("toy_gemm", 6, 0)
    mismatch = log_of(TEST_DATA / "cache_metadata_mismatch" / "mismatch.stderr.log").events
    row = mismatch[mismatch["kind"] == "cache_env_mismatch"].iloc[0]
    assert row["detail"] == "gpu: saved=NVIDIA H100 80GB HBM3 vs current=unknown" and row["path"].endswith("other_gpu.json")


def test_autotune_v2_races_the_default():
    log = log_of(TEST_DATA / "cache_v2_store" / "v2.stderr.log")
    assert "managed_cache" in set(log.events["kind"])
    default = log.candidates[(log.candidates["runner"] == "ToyCublasRunner") & (log.candidates["tactic"] == "-1")]
    assert len(default) == 4  # v2 adds runners[0] / -1 to every profile


# -- servers, interleaving, damage ---------------------------------------------------------------
RANKS = TEST_DATA / "log_interleaved_ranks"


def test_interleaved_ranks_read_like_separate_logs():
    server = log_of(RANKS / "server.log")
    assert sorted(server.runs["rank"]) == [0, 1] and sorted(server.runs["pid"]) == [4100, 4101]
    for rank in (0, 1):
        alone = log_of(RANKS / f"rank{rank}.log")
        mine = server.candidates[server.candidates["rank"] == rank]
        key = CANDIDATE_KEY + ["call", "time_ms"]
        pd.testing.assert_frame_equal(sorted_rows(mine, key), sorted_rows(alone.candidates, key))
        pd.testing.assert_frame_equal(sorted_rows(server.winners[server.winners["rank"] == rank], WINNER_KEY),
                                      sorted_rows(alone.winners, WINNER_KEY))


def test_engine_lines_are_foreign_not_unreadable():
    log = log_of(TEST_DATA / "log_server_prefixes" / "sglang_tp0.log")
    assert len(log.candidates) == 19 and len(log.winners) == 1
    foreign = log.report[log.report["status"] == "foreign"]
    assert foreign["lines"].sum() == 2 and "unreadable" not in set(log.report["status"])


def test_truncated_log_keeps_what_is_whole():
    whole, cut = log_of(TEST_DATA / "log_truncated" / "whole.log"), log_of(TEST_DATA / "log_truncated" / "cut.log")
    assert len(cut.candidates) == len(whole.candidates) - 1  # the half-written candidate is not read
    assert cut.candidates[["line", "tactic", "time_ms"]].isin(whole.candidates[["line", "tactic", "time_ms"]].to_dict("list")).all().all()
    unreadable = cut.report[cut.report["status"] == "unreadable"]
    assert list(unreadable["lines"]) == [1] and unreadable["reason"].str.contains("cut off").all()
    with pytest.raises(ParseError, match=r"cut\.log:61: record cut off"):
        profkit.read_log(TEST_DATA / "log_truncated" / "cut.log", strict=True)


def test_a_record_cut_by_the_next_process_is_not_read():
    log = log_of(TEST_DATA / "log_truncated" / "appended_flashinfer_jit.log")
    assert len(log.candidates) == 19 and log.winners.empty  # its winner line was the one cut off
    assert log.candidates["op"].isna().all()  # no winner, no tqdm in flashinfer_jit.log: the op is unknown, kept
    assert log.report.set_index("status").loc["unreadable", "lines"] == 1
    assert list(log.runs[["first_line", "last_line"]].itertuples(index=False, name=None)) == [(1, 41), (42, 42)]


def test_nothing_readable_names_file_and_line(tmp_path):
    junk = tmp_path / "junk.log"
    junk.write_text("hello\nworld\n")
    with pytest.raises(ParseError, match=r"junk\.log:1: no readable FlashInfer autotuner record in 2 line"):
        profkit.read_log(junk)
    empty = tmp_path / "empty.log"
    empty.write_bytes(b"")
    with pytest.raises(ParseError, match=r"empty\.log:1: the log is empty"):
        profkit.read_log(empty)
    with pytest.raises(ParseError, match="no such file"):
        profkit.read_log(tmp_path / "missing.log")


def test_inputs_text_lists_gzip_and_utf16(tmp_path):
    text = (RANKS / "rank0.log").read_text()
    from_text = profkit.read_log(text)
    assert len(from_text.candidates) == len(log_of(RANKS / "rank0.log").candidates)
    utf16 = tmp_path / "utf16.log"
    utf16.write_text(text, encoding="utf-16")
    zipped = tmp_path / "rank0.log.gz"
    zipped.write_bytes(gzip.compress(text.encode()))
    both = profkit.read_log([utf16, zipped])
    assert both.candidates.groupby("file").size().to_dict() == {"utf16.log": 57, "rank0.log.gz": 57}
    assert set(both.runs["run_id"]) == {"utf16.log#1", "rank0.log.gz#1"}


def test_log_tables_print_and_save(tmp_path):
    log = log_of(RANKS / "server.log")
    assert "events" in repr(log) and "lines      read" in repr(log)
    log.save(tmp_path / "out")
    assert {p.name for p in (tmp_path / "out").iterdir()} == {
        "candidates.parquet", "winners.parquet", "tuning.parquet", "runs.parquet", "events.parquet", "report.parquet"}
    assert len(profkit.load(tmp_path / "out").candidates) == len(log.candidates)


def test_cli_parse(tmp_path, capsys):
    assert cli_main(["parse", str(RANKS / "server.log"), str(H200 / "fp8" / "fp8_gemm-llama3-8b-o" / "cache.json")]) == 0
    out = capsys.readouterr().out
    assert "log: 2 run(s)" in out and "cache: 1 run(s)" in out
    assert cli_main(["parse", str(RANKS / "rank0.log"), "--out", str(tmp_path / "t")]) == 0
    assert (tmp_path / "t" / "events.parquet").is_file()
    assert cli_main(["parse", str(tmp_path / "nope.log")]) == 1


# -- property tests ------------------------------------------------------------------------------
EXCERPT = (RANKS / "rank0.log").read_bytes()
FULL = profkit.read_log(EXCERPT.decode())
ROW = ["runner", "tactic", "time_ms"]
FAST = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def rows_are_real(tables: profkit.Tables) -> None:
    """Every candidate read is one of the excerpt's candidates (nothing invented)."""
    known = set(map(tuple, FULL.candidates[ROW].astype(str).values))
    assert set(map(tuple, tables.candidates[ROW].astype(str).values)) <= known
    assert len(tables.winners[tables.winners["source"] == "profiled"]) <= len(FULL.winners)


def read_or_refuse(data: bytes, tmp_path_factory) -> profkit.Tables | None:
    path = tmp_path_factory.mktemp("fuzz") / "fuzz.log"
    path.write_bytes(data)
    try:
        return profkit.read_log(path)
    except ParseError as exc:
        assert "fuzz.log:" in str(exc)
        return None


@FAST
@given(cut=st.integers(min_value=0, max_value=len(EXCERPT)))
def test_random_truncation(cut, tmp_path_factory):
    tables = read_or_refuse(EXCERPT[:cut], tmp_path_factory)
    if tables is not None:
        rows_are_real(tables)
        full_lines = EXCERPT[:cut].count(b"\n")
        assert (tables.candidates["line"] <= full_lines).all()  # the unterminated tail is never read


@FAST
@given(seed=st.integers(min_value=0, max_value=2**32 - 1))
def test_shuffled_ranks_read_like_each_rank(seed):
    ranks = [(RANKS / f"rank{r}.log").read_text().splitlines(keepends=True) for r in (0, 1)]
    queues = [[f"[rank{r}]: {line}" for line in lines] for r, lines in enumerate(ranks)]
    rng, merged = random.Random(seed), []
    while any(queues):
        merged.append(rng.choice([q for q in queues if q]).pop(0))
    tables = profkit.read_log("".join(merged))
    for rank in (0, 1):
        alone = log_of(RANKS / f"rank{rank}.log").candidates
        mine = tables.candidates[tables.candidates["rank"] == rank]
        pd.testing.assert_frame_equal(sorted_rows(mine, CANDIDATE_KEY + ["time_ms"]),
                                      sorted_rows(alone, CANDIDATE_KEY + ["time_ms"]))


@FAST
@given(seed=st.integers(min_value=0, max_value=2**32 - 1),
       garbage=st.lists(st.text(min_size=0, max_size=80), min_size=1, max_size=20))
def test_garbage_lines_invent_nothing(seed, garbage):
    lines = EXCERPT.decode().splitlines(keepends=True)
    rng = random.Random(seed)
    for text in garbage:
        lines.insert(rng.randrange(len(lines) + 1), text.replace("\r", "").replace("\n", "") + "\n")
    try:
        tables = profkit.read_log("".join(lines))
    except ParseError:
        return
    rows_are_real(tables)


@FAST
@given(data=st.binary(max_size=2000), encoding=st.sampled_from(["utf-16-le", "utf-32", "latin-1", "cp1252"]))
def test_wrong_encodings_and_bytes(data, encoding, tmp_path_factory):
    for blob in (data, EXCERPT.decode().encode(encoding, errors="replace")[:4000]):
        tables = read_or_refuse(blob, tmp_path_factory)
        if tables is not None:
            rows_are_real(tables)


def test_truncated_gzip_keeps_what_was_decompressed(tmp_path):
    data = gzip.compress((RANKS / "rank0.log").read_bytes())
    broken = tmp_path / "broken.log.gz"
    broken.write_bytes(data[: len(data) * 2 // 3])
    log = profkit.read_log(broken)
    rows_are_real(log)
    assert 0 < len(log.candidates) < len(FULL.candidates)
    assert log.report[log.report["status"] == "unreadable"]["reason"].str.contains("compressed data ends early").any()


# -- the bulk path against one line at a time and against the reader before the package ----------

def every_kind(names: list[str], around: int = 3) -> bytes:
    """One log holding every kind of line of the logs ``names``: in each, the first line of each kind (its first 100
    bytes with digits and a-f masked, so timestamps, times, counts and addresses do not make kinds) with the
    ``around`` lines before and after it, as logged."""
    mask = bytes.maketrans(b"0123456789abcdef", b"0" * 16)
    out = []
    for name in names:
        data = (TEST_DATA.parents[1] / name).read_bytes()
        lines = (gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data).splitlines(keepends=True)
        kinds, keep = set(), set()
        for i, masked in enumerate(b"".join(lines).translate(mask).splitlines()):
            if masked[:100] not in kinds:
                kinds.add(masked[:100])
                keep.update(range(max(0, i - around), min(len(lines), i + around + 1)))
        out.extend(lines[i] for i in sorted(keep))
    return b"".join(out)


def test_bulk_tables_equal_one_line_at_a_time_and_the_golden_digests(monkeypatch, tmp_path):
    """Every input's tables (bulk path) equal its golden digests; read one line at a time they are equal too, for
    the inputs under tests/data, the damaged variants, one log of every kind of line of the logs under data/ (those
    are many lines of few kinds: reading each one line at a time took half of this test's 30 s) and any input
    without digests (a log added since). Golden digests: scripts/compare_log_tables.py digests, run with commit
    318e49f's profkit (before the package) or, for the logs added to data/ later, the reader of their day
    (tests/data/log_golden/README.md)."""
    import json
    import tempfile
    from pathlib import Path

    from profkit.sources import logs
    from profkit.sources.logs import bulk

    def one_by_one(arg):
        with monkeypatch.context() as patched:
            patched.setattr(logs, "feed", functools.partial(bulk.feed, bulk=False))
            return log_golden.digest(log_golden.tables_of(arg))

    golden = json.loads((TEST_DATA / "log_golden" / "digests.json").read_text())
    monkeypatch.chdir(TEST_DATA.parents[1])  # runs.path as the digests were made: relative to the repository
    with tempfile.TemporaryDirectory(prefix="pk-golden-", dir="/tmp") as tmp:  # one level: tables_of names it <tmp>
        made = dict(log_golden.small(Path(tmp)))
        assert set(golden) <= set(made)
        shipped = [name for name in made if name.startswith("data/")]
        assert any("log_moe_public" in name for name in made) and shipped
        differing = []
        for name, make in made.items():
            arg = make()
            in_bulk = log_golden.digest(log_golden.tables_of(arg))
            if in_bulk != golden.get(name, in_bulk) or (
                    (name not in golden or name not in shipped) and in_bulk != one_by_one(arg)):
                differing.append(name)
    assert differing == [], differing
    kinds = tmp_path / "every_kind.log"
    kinds.write_bytes(every_kind(shipped))
    block = bulk._prepared(iter([kinds.read_bytes()]), True)
    assert len(block.segments) > 100 and len(block.bars) > 100  # profiles and glued renders the bulk path takes
    monkeypatch.setattr(bulk, "BLOCK", 1 << 16)  # many blocks: lines of every kind near a block's end
    assert log_golden.digest(log_golden.tables_of(kinds)) == one_by_one(kinds)


def test_extra_column_groups_describe_the_log_and_cache_tables():
    """docs/schema.md lists the readers' extra columns from the schema's groups: they must be the tables' own."""
    from profkit import schema

    def check(frame, table, group):
        extras = schema.dtypes_of(group)
        assert list(frame.columns) == [*schema.columns(table), *extras]
        assert {name: str(frame[name].dtype) for name in extras} == extras

    for table in ("candidates", "winners", "tuning", "runs"):
        check(getattr(FULL, table), table, f"{table}.log")
    check(profkit.read_cache(TEST_DATA / "cache_metadata_mismatch").winners, "winners", "winners.cache")


# -- several files in a process pool ---------------------------------------------------------------

POOLED = [DATA / "h200" / "fp8" / "debug.log.gz", DATA / "h200-engine-like" / "logs" / "rank0.log",
          DATA / "h200-engine-like" / "logs" / "rank1.log", RANKS / "rank0.log"]


def test_a_pool_reads_several_files_as_one_process_does():
    """Same six tables, rows in the same order, with a pool of two processes as in this process alone."""
    alone, pooled = profkit.read_log(POOLED, workers=1), profkit.read_log(POOLED, workers=2)
    for name in log_golden.TABLES:
        pd.testing.assert_frame_equal(getattr(pooled, name), getattr(alone, name), obj=name)
    assert list(pooled.candidates["file"].unique()) == ["debug.log.gz", "logs/rank0.log", "rank1.log",
                                                        "log_interleaved_ranks/rank0.log"]


def test_a_pool_reports_progress_and_names_a_file_it_could_not_read(tmp_path):
    seen = []
    profkit.read_log(POOLED, workers=2, progress=seen.append)
    assert sum(seen) == sum(p.stat().st_size for p in POOLED)  # gzip: its compressed bytes
    with pytest.raises(ParseError, match="missing.log: no such file"):
        profkit.read_log([*POOLED[:2], tmp_path / "missing.log"], workers=2, strict=True)
    with pytest.warns(UserWarning, match=r"skipped 1 unreadable file\(s\).*missing.log"):
        log = profkit.read_log([tmp_path / "missing.log", *POOLED[:2]], workers=2)
    assert set(log.candidates["file"]) == {"debug.log.gz", "rank0.log"}


@pytest.mark.parametrize("workers", [0, -1, 1.5, True, "2"])
def test_workers_must_be_a_whole_number(workers):
    with pytest.raises(ValueError, match="workers must be a whole number"):
        profkit.read_log(POOLED[:1], workers=workers)


HEADER = "2026-12-02 21:17:06,471 - DEBUG - autotuner.py:3115 - flashinfer.jit: "
# (pattern, replacement) in a candidate line whose tactic is 15 digits and time 20 characters, the commonest lengths:
# each makes a line the bulk path must leave to the general one, most with what the bulk path searches for found a
# second time where such lines have it once.
TRIPS = {
    "runner with '> ' inside": (r"<flashinfer\.gemm", "<fla> infer.gemm"),
    "runner with a record": (r"<flashinfer\.gemm", "<" + HEADER + "gemm"),
    "tactic with ', shapes='": (r"> \d+, shapes=", "> 1, shapes=12345, shapes="),
    "tactic with a record": (r"> \d+, shapes=", "> 1 " + HEADER + "[Autotuner]: x, shapes="),
    "shapes with a record": (r"shapes=\(\(1,", "shapes=((" + HEADER + "1,"),
    "avg_time twice": (r"avg_time \S+", "avg_time 0.51, avg_time 0.123"),
    "avg_time in the tactic": (r", shapes=", ", avg_time 2, shapes="),
    "time nan": (r"avg_time \S+", "avg_time nan"),
    "time with spaces": (r"avg_time \S+", "avg_time  1.5 "),
    "time with an underscore": (r"avg_time \S+", "avg_time 1_0.5"),
    "time no number": (r"avg_time \S+", "avg_time 0.1x"),
    "no shapes": (r", shapes=", ", shape="),
    "other header": (r"DEBUG - autotuner\.py:3115", "INFO - autotuner.py:3116"),
    "no candidate": (r"profiling <", "profilinG <"),
    "not ASCII": (r", shapes=", "\u00e9, shapes="),
    "header not ASCII": (r"autotuner\.py", "autotuner\u00e9.py"),
    "header not UTF-8": (r"autotuner\.py", "autotuner\udcff.py"),  # a lone surrogate: bytes ED B3 BF
    "tab": (r", shapes=", "\t, shapes="),
}


@pytest.mark.parametrize("seed", range(3))
def test_bulk_path_leaves_lines_that_trip_it_to_the_general_path(seed, monkeypatch):
    """Candidate lines whose runner, tactic, shapes or time hold what the bulk path searches for, tactics of many
    lengths (more than it learns before searching line by line), and lines near a block's end: the tables equal
    those read one line at a time, and the bulk path took most lines."""
    import re

    import numpy as np

    from profkit.sources import logs
    from profkit.sources.logs import bulk

    lines = (RANKS / "rank0.log").read_text().splitlines(keepends=True)
    rng, out, tripped = random.Random(seed), [], set()
    for line in lines:
        out.append(line)
        if line.startswith("2") and "profiling <" in line and "chosen" not in line:
            for _ in range(rng.randrange(60)):  # the same profile again, half of them with the commonest lengths
                digits = 15 if rng.random() < 0.5 else rng.randrange(1, 40)
                made = re.sub(r"> \S+, shapes=(.*), avg_time \S+",
                              lambda m: f"> {rng.randrange(10 ** (digits - 1), 10 ** digits)}, shapes={m[1]}, "
                                        f"avg_time {rng.random():.18f}", line)
                if rng.random() < 0.2:
                    name = rng.choice(list(TRIPS))
                    made, tripped = re.sub(*TRIPS[name], made, count=1), tripped | {name}
                out.append(made)
    text = "".join(out)
    assert len(tripped) == len(TRIPS)
    data = text.encode("utf-8", "surrogatepass")
    plain = bulk.plain_candidates(data, np.flatnonzero(np.frombuffer(data, np.uint8) == ord("\n")))
    assert len(plain.rows) > len(out) // 2
    monkeypatch.setattr(bulk, "BLOCK", 1 << 12 + seed)  # many blocks: many lines near a block's end
    in_bulk = log_golden.digest(log_golden.tables_of(text))
    monkeypatch.setattr(logs, "feed", functools.partial(bulk.feed, bulk=False))
    assert in_bulk == log_golden.digest(log_golden.tables_of(text))


# A tqdm render glued before a record, as FlashInfer's logs hold it ("\r[AutoTuner]: Tuning ...|<record>"), and
# renders made to trip the bulk path's reading of it: each must be read as one line at a time reads it.
GLUES = {
    "as logged": lambda bar, record, other: f"\r{bar}{record}",
    "another record": lambda bar, record, other: f"\r{bar}{other}",
    "two renders": lambda bar, record, other: f"\r{bar}\r{bar}{record}",
    "render not UTF-8": lambda bar, record, other: f"\r{bar}\udcff{record}",  # bytes ED B3 BF
    "a record header in the render": lambda bar, record, other: f"\r{bar[:25]}{HEADER}{bar[25:]}{record}",
    "a second record after it": lambda bar, record, other: f"\r{bar}{record}{HEADER}[Autotuner]: x",
    "timestamp garbled": lambda bar, record, other: f"\r{bar}{record[:5]}x{record[6:]}",
    "level not upper case": lambda bar, record, other: f"\r{bar}{record.replace(' - DEBUG - ', ' - Debug - ', 1)}",
    "CRLF": lambda bar, record, other: f"\r{bar}{record}\r",
    "render only": lambda bar, record, other: f"\r{bar}",
}
GLUED_LOGS = [DATA / "h200-moe" / "gpt-oss-120b-r0" / "debug.log", H200 / "bf16" / "debug.log.gz"]


@pytest.mark.parametrize("seed", range(3))
def test_bulk_path_reads_renders_glued_to_records_as_one_line_at_a_time(seed, monkeypatch):
    """Lines holding a tqdm render and then a record (a candidate, or any other), the same made to trip the bulk
    path, such lines before the first record and on line 1, and under a vLLM-style prefix on every other line (the
    render is then the one prefixed process's): the tables equal those read one line at a time, and the bulk path
    took most glued lines."""
    import re

    import numpy as np

    from profkit.sources import logs
    from profkit.sources.logs import bulk

    rng, out = random.Random(seed), []
    for path in GLUED_LOGS:
        data = path.read_bytes()
        lines = (gzip.decompress(data) if path.suffix == ".gz" else data).decode().splitlines(keepends=True)[:2500]
        records = [line for line in lines if line.startswith("2")]
        for line in lines:
            m = re.match(r"\r(\[AutoTuner\]: Tuning .*?)(\d{4}-\d\d-\d\d .*)\n", line)
            if m is None or rng.random() < 0.5:
                out.append(line)
                continue
            name = rng.choice(list(GLUES))
            out.append(GLUES[name](m[1], m[2], rng.choice(records).rstrip("\n")) + "\n")
    glued = [line for line in out if line.startswith("\r[AutoTuner]") and " - flashinfer.jit: " in line]
    texts = {"glued": "".join(out), "glued from line 1": "".join([*glued[:3], *out]),
             "prefixed": "".join(f"(Worker_TP0 pid=7) {line}" if line.startswith("2") else line for line in out)}
    data = texts["glued"].encode("utf-8", "surrogatepass")
    block = bulk._prepared(iter([data]), True)
    taken = len(block.bars) + int(np.sum(block.plain.at != np.asarray(block.starts)[block.plain.rows]))
    assert taken > len(glued) // 2
    monkeypatch.setattr(bulk, "BLOCK", 1 << 14 + seed)  # many blocks: glued lines near a block's end
    for name, text in texts.items():
        in_bulk = log_golden.digest(log_golden.tables_of(text))
        with monkeypatch.context() as one_by_one:
            one_by_one.setattr(logs, "feed", functools.partial(bulk.feed, bulk=False))
            assert in_bulk == log_golden.digest(log_golden.tables_of(text)), name


# Winner lines right after candidates the bulk path read, as logged and made to trip its reading of them.
WINNER_TRIPS = {
    "as logged": lambda line: line,
    "CRLF": lambda line: line.replace("\n", "\r\n"),
    "a record header inside": lambda line: line.replace(" for ProfilingCacheKey(",
                                                        f" {HEADER}x for ProfilingCacheKey("),
    "key garbled": lambda line: line.replace("ProfilingCacheKey(", "ProfilingCacheKy("),
    "tactic printed another way": lambda line: line.replace(", ((", ",  ((", 1),
    "runner at another address": lambda line: line.replace(" object at 0x", " object at 0x1", 1),
    "another profile": lambda line: line.replace("nearest_profile=((", "nearest_profile=((7", 1),
    "timestamp garbled": lambda line: f"{line[:5]}x{line[6:]}",
    "not UTF-8": lambda line: line.replace(" for ProfilingCacheKey(", "\udcff for ProfilingCacheKey("),
    "a garbled candidate instead": lambda line: line.replace("profiling chosen runner: ", "profiling "),
    "an event instead": lambda line: line.split("[Autotuner]: ")[0] + "[Autotuner]: Config cache hit for fp8_gemm "
                                     "(runner=CudnnFp8GemmRunner, source=config file)\n",
}


@pytest.mark.parametrize("seed", range(2))
def test_bulk_path_reads_winner_lines_after_candidates_as_one_line_at_a_time(seed, monkeypatch):
    """Each profile's winner line (which follows its candidates) of a MoE, a bf16 and an fp8 log, as logged or made
    to trip the bulk path: the tables equal those read one line at a time."""
    from profkit.sources import logs
    from profkit.sources.logs import bulk

    rng, out = random.Random(seed), []
    for path in (*GLUED_LOGS, H200 / "fp8" / "debug.log.gz"):
        data = path.read_bytes()
        for line in (gzip.decompress(data) if path.suffix == ".gz" else data).decode().splitlines(keepends=True):
            out.append(WINNER_TRIPS[rng.choice(list(WINNER_TRIPS))](line) if "chosen runner" in line else line)
    text = "".join(out)
    assert sum(1 for line in out if "profiling chosen runner" in line) >= 200
    monkeypatch.setattr(bulk, "BLOCK", 1 << 16 + seed)
    in_bulk = log_golden.digest(log_golden.tables_of(text))
    monkeypatch.setattr(logs, "feed", functools.partial(bulk.feed, bulk=False))
    assert in_bulk == log_golden.digest(log_golden.tables_of(text))
