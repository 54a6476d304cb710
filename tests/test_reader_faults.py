"""Readers under damage: one bad file or entry is named and the rest is kept; nothing hangs or runs away.

Damage is made in tmp_path from real inputs (shipped caches, v2 store, engine outputs, logs): a
FIFO or device named like an input, a file whose read fails (a link to /proc/self/mem), a
directory where a file was, a cut or corrupt gzip, JSON FlashInfer never writes but a damaged
file can hold, numbers past what an Int64 column holds.
"""

from __future__ import annotations

import contextlib
import functools
import gzip
import json
import os
import shutil
import signal
import subprocess
import sys
import warnings
import zlib
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import profkit
from conftest import DATA, ROOT, TEST_DATA
from profkit.errors import ParseError, ProfkitError
from profkit.sources import inputs

STORE = TEST_DATA / "cache_v2_store" / "store"
RANKS = TEST_DATA / "cache_metadata_mismatch" / "ranks"
CPU_CACHE = TEST_DATA / "log_cpu_failures" / "cache.json"
H200_CACHE = sorted((DATA / "h200").glob("fp8/*/cache.json"))[0]
CPU_LOG = TEST_DATA / "log_cpu_failures" / "failures.stderr.log"
ENGINES = TEST_DATA / "engines"
SGLANG_JSONL = ENGINES / "sglang_jsonl_appended_runs" / "sglang_bench_serving_datacrunch_llama70b_online.jsonl"
SGLANG_TEXT = ENGINES / "sglang_complete_blocks" / "sglang_bench_serving_cookbook_ministral3_c16.txt"
ONE_BATCH = ENGINES / "sglang_one_batch" / "sglang_bench_one_batch_pr30147.txt"
LMEVAL_TABLE = ENGINES / "lmeval_tables" / "lm_eval_table_recipes_dsv32exp_5shot.txt"
STEP = DATA / "h200" / "step-sweep-caches" / "llama3-8b-bf16" / "step.jsonl"
IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


# -- damage ------------------------------------------------------------------------------------
def make_unreadable(path: Path, how: str) -> None:
    """Put something unreadable at ``path`` (removing what is there)."""
    if path.exists() or path.is_symlink():
        path.unlink()
    if how == "fifo":
        os.mkfifo(path)
    elif how == "directory":
        path.mkdir()
    elif how == "io_error":
        path.symlink_to("/proc/self/mem")  # a regular file whose first read fails (EIO)
    elif how == "device":
        path.symlink_to("/dev/zero")  # endless: reading it would fill the memory
    elif how == "private":
        path.write_text("{}")
        path.chmod(0)
    else:
        raise AssertionError(how)


DAMAGE = ["fifo", "directory", "io_error", "device",
          pytest.param("private", marks=pytest.mark.skipif(IS_ROOT, reason="root reads mode-000 files"))]


@pytest.fixture(autouse=True)
def no_hang():
    """Fail a test that blocks (e.g. on a FIFO) instead of hanging the run."""
    def timeout(*_):
        raise TimeoutError("the reader blocked")

    previous = signal.signal(signal.SIGALRM, timeout)
    signal.alarm(120)  # a blocked read never returns; the slowest property here takes ~20 s on a loaded 2-core machine
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def winner_rows(frame: pd.DataFrame) -> pd.DataFrame:
    columns = ["op", "profile", "bucket", "runner", "tactic", "extras", "policy", "problem"]
    return frame[columns].sort_values(columns[:6]).reset_index(drop=True).astype("object")


def bench_rows(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.drop(columns=["source"]).reset_index(drop=True)


# -- the shared input module -------------------------------------------------------------------
@pytest.mark.parametrize("how", DAMAGE)
def test_opening_names_what_cannot_be_read_without_blocking(tmp_path, how):
    path = tmp_path / "autotune.json"
    make_unreadable(path, how)
    item = inputs.inputs_of(path)[0]
    if how == "io_error":  # opens; its first read fails: the stream ends and says why
        assert item.read_bytes() == b"" and "read error" in item.damage
        return
    with pytest.raises(ParseError) as err:
        item.read_bytes()
    assert err.value.path == str(path)


def test_whole_reads_are_capped(tmp_path):
    path = tmp_path / "big.txt"
    path.write_bytes(b"x" * 3000)
    item = inputs.inputs_of(path)[0]
    assert len(item.read_bytes(limit=1000)) == 1000 and "larger than 1,000 bytes" in item.damage
    assert item.read_bytes(limit=3000) == b"x" * 3000 and item.damage == ""


def test_lines_are_cut_at_the_line_cap(tmp_path):
    path = tmp_path / "one-line.log"
    path.write_bytes(b"y" * 2500)
    assert [len(line) for line in inputs.inputs_of(path)[0].lines(max_line=1000)] == [1000, 1000, 500]


@pytest.mark.parametrize("keep", [0.25, 0.5, 0.9])
def test_a_cut_gzip_keeps_what_was_readable(tmp_path, keep):
    data = CPU_LOG.read_bytes()
    packed = gzip.compress(data)
    path = tmp_path / "cut.log.gz"
    path.write_bytes(packed[:int(len(packed) * keep)])
    readable = zlib.decompressobj(wbits=31).decompress(path.read_bytes())
    item = inputs.inputs_of(path)[0]
    got = item.read_bytes()
    assert got == readable and data.startswith(got) and "ends early" in item.damage
    assert b"".join(inputs.inputs_of(path)[0].lines()) == readable


def test_unique_names_are_the_shortest_distinguishing_suffix():
    assert inputs.unique_names(["/x/a/rank0.log", "/x/b/rank0.log", "/x/c/other.log"]) == [
        "a/rank0.log", "b/rank0.log", "other.log"]
    assert inputs.unique_names(["/r/a/b/c.log", "/r/x/b/c.log"]) == ["a/b/c.log", "x/b/c.log"]
    assert inputs.unique_names(["/x/a.log", "/x/a.log"]) == ["a.log", "a.log (2)"]
    assert inputs.unique_names(["/y/b.log", "/x/a.log"]) == ["b.log", "a.log"]  # order does not matter


@pytest.mark.parametrize("value, expected", [
    ("12", 12), ("-3", -3), (7, 7), (3.0, 3), ("²", None), ("٣", None), ("abc", None), (1.5, None),
    (2**70, None), ("12345678901234567890", None), (True, None), (None, None), (2**63 - 1, 2**63 - 1),
])
def test_as_int_is_whole_and_within_int64(value, expected):
    assert inputs.as_int(value) == expected


# -- read_cache: one unreadable file or entry --------------------------------------------------
@pytest.mark.parametrize("how", DAMAGE)
def test_a_v2_store_keeps_the_other_entries(tmp_path, how):
    store = shutil.copytree(STORE, tmp_path / "store")
    entries = sorted(next((store / "v2").iterdir()).glob("entries/*.json"))
    make_unreadable(entries[1], how)
    cache = profkit.read_cache(store)
    w = cache.winners
    bad = w[w["problem"] != ""]
    assert list(bad["file"]) == [str(entries[1])] and entries[1].name in bad["problem"].iloc[0]
    whole = profkit.read_cache(STORE).winners
    whole = whole[~whole["file"].str.endswith(entries[1].name)]
    pd.testing.assert_frame_equal(winner_rows(w[w["problem"] == ""]), winner_rows(whole))
    with pytest.raises(ParseError, match=entries[1].name):
        profkit.read_cache(store, strict=True)


@pytest.mark.parametrize("how", [d for d in DAMAGE if d != "directory"])  # a scan enters a directory
def test_a_directory_of_rank_caches_keeps_the_readable_ranks(tmp_path, how):
    ranks = shutil.copytree(RANKS, tmp_path / "ranks")
    make_unreadable(ranks / "rank_tp1_pp0_dp0.json", how)
    cache = profkit.read_cache(ranks)
    runs = cache.runs.set_index("run_id")
    assert list(runs.index) == ["rank_tp0_pp0_dp0.json", "rank_tp1_pp0_dp0.json"]
    assert runs.loc["rank_tp0_pp0_dp0.json", "problem"] == ""
    assert str(ranks / "rank_tp1_pp0_dp0.json") in runs.loc["rank_tp1_pp0_dp0.json", "problem"]
    alone = profkit.read_cache(RANKS / "rank_tp0_pp0_dp0.json").winners
    pd.testing.assert_frame_equal(winner_rows(cache.winners), winner_rows(alone))
    with pytest.raises(ParseError, match="rank_tp1_pp0_dp0.json"):
        profkit.read_cache(ranks, strict=True)
    with pytest.raises(ParseError, match="rank_tp1_pp0_dp0.json"):
        profkit.read_cache(ranks / "rank_tp1_pp0_dp0.json")


def test_same_named_caches_in_different_folders_get_their_own_runs(tmp_path):
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        shutil.copy(CPU_CACHE if folder == "a" else H200_CACHE, tmp_path / folder / "cache.json")
    cache = profkit.read_cache([tmp_path / "a" / "cache.json", tmp_path / "b" / "cache.json"])
    assert list(cache.runs["run_id"]) == ["a/cache.json", "b/cache.json"]
    counts = cache.winners.groupby("run_id").size().to_dict()
    assert counts == {"a/cache.json": len(profkit.read_cache(CPU_CACHE).winners),
                      "b/cache.json": len(profkit.read_cache(H200_CACHE).winners)}


# -- read_cache: JSON it can nearly parse ------------------------------------------------------
def cache_with(tmp_path: Path, edit, name: str = "cache.json") -> Path:
    """A copy of the CPU-written v1 cache with ``edit(data, first_key)`` applied, written as JSON text."""
    data = json.loads(CPU_CACHE.read_text())
    first = next(k for k in data if k.startswith("("))
    text = edit(data, first)
    path = tmp_path / name
    path.write_text(text if isinstance(text, str) else json.dumps(data, indent=2))
    return path


def _plus(data: dict, key: str, raw_value: str) -> str:
    """The JSON text of ``data`` with one more key whose value is ``raw_value`` verbatim."""
    return json.dumps(data)[:-1] + f", {json.dumps(key)}: {raw_value}}}"


@pytest.mark.parametrize("raw_value", ["[" * 100_000 + "]" * 100_000, "1" * 4400], ids=["1e5-deep", "4400-digits"])
def test_deep_or_huge_json_is_a_parse_error_naming_the_file(tmp_path, raw_value):
    path = cache_with(tmp_path, lambda data, first: _plus(data, "x", raw_value))
    with pytest.raises(ParseError) as err:
        profkit.read_cache(path)
    assert err.value.path == str(path)
    cache = profkit.read_cache([CPU_CACHE, path])  # beside a good file: the good file is kept
    assert len(cache.winners) == len(profkit.read_cache(CPU_CACHE).winners)
    assert cache.runs.set_index("path").loc[str(path), "problem"].startswith(str(path))


def test_a_lone_surrogate_key_is_one_flagged_entry_and_the_tables_save(tmp_path):
    path = cache_with(tmp_path, lambda data, first: _plus(data, "\ud800", json.dumps(data[first])))
    cache = profkit.read_cache(path)
    w = cache.winners
    assert len(w) == len(profkit.read_cache(CPU_CACHE).winners) + 1
    assert w["problem"].str.startswith("unreadable key").sum() == 1 and (w["problem"] == "").sum() == len(w) - 1
    cache.save(tmp_path / "saved")
    assert len(profkit.load(tmp_path / "saved").winners) == len(w)


@pytest.mark.parametrize("policy, problem", [
    ([[1], [2]], "not a list of name, value pairs"),
    (["cuda_graph_profile_replays", 2**70, "l2_cache_policy", "hot"], "cuda_graph_profile_replays is not a count"),
])
def test_odd_policies_flag_their_entry_only(tmp_path, policy, problem):
    def edit(data, first):
        data[first] = data[first][:2] + [policy]

    w = profkit.read_cache(cache_with(tmp_path, edit)).winners
    flagged = w[w["problem"] != ""]
    assert len(flagged) == 1 and problem in flagged["problem"].iloc[0]
    assert flagged["cuda_graph_profile_replays"].isna().all()
    assert w["problem"].eq("").sum() == len(w) - 1


@pytest.mark.parametrize("tactic", [
    {"tile": [128, 64], "stages": 3},
    json.loads("[" * 50 + "1" + "]" * 50),
], ids=["dict", "nested"])
def test_a_tactic_shows_fully(tmp_path, tactic):
    def edit(data, first):
        data[first] = [data[first][0], tactic, data[first][2]]

    w = profkit.read_cache(cache_with(tmp_path, edit)).winners
    assert (w["tactic"] == json.dumps(tactic, separators=(", ", ": "))).sum() == 1 and w["problem"].eq("").all()


def test_a_tactic_nested_900_deep_keeps_its_entry(tmp_path):
    deep = "[" * 900 + "1" + "]" * 900

    def edit(data, first):
        runner = data[first][0]
        data[first] = "TACTIC"
        return json.dumps(data).replace('"TACTIC"', f'[{json.dumps(runner)}, {deep}]')

    w = profkit.read_cache(cache_with(tmp_path, edit)).winners
    assert len(w) == len(profkit.read_cache(CPU_CACHE).winners)
    row = w[w["tactic"].fillna("").str.startswith("[[[") | (w["problem"] != "")]
    assert len(row) == 1
    assert row["tactic"].iloc[0] == deep and row["problem"].iloc[0] == ""


@pytest.mark.parametrize("dim", [2**63 + 5, 2**64 - 5])
def test_a_bucket_past_int64_is_missing_not_negative(tmp_path, dim):
    path = tmp_path / "huge.json"
    good = json.loads(CPU_CACHE.read_text())
    first = next(k for k in good if k.startswith("("))
    good[first.replace("((1, 8)", f"(({dim}, 8)")] = good.pop(first)
    path.write_text(json.dumps(good))
    w = profkit.read_cache(path).winners
    huge = w[w["profile"].str.contains(str(dim))]
    assert len(huge) == 1 and huge["bucket"].isna().all() and (w["bucket"].dropna() >= 0).all()
    assert len(w) == len(profkit.read_cache(CPU_CACHE).winners)


# -- read_bench --------------------------------------------------------------------------------
# The raising calls below also warn about the damage they raise on (an I/O error mid-file).
@pytest.mark.filterwarnings("ignore:.*read error:UserWarning")
@pytest.mark.parametrize("how", DAMAGE + ["missing"])
def test_a_list_of_bench_files_keeps_the_readable_ones(tmp_path, how):
    bad = tmp_path / "result.jsonl"
    if how != "missing":
        make_unreadable(bad, how)
    with pytest.warns(UserWarning, match="result.jsonl"):
        frame = profkit.read_bench([SGLANG_JSONL, bad])
    pd.testing.assert_frame_equal(frame, profkit.read_bench(SGLANG_JSONL))
    with pytest.raises(ParseError, match="result.jsonl"):
        profkit.read_bench([SGLANG_JSONL, bad], strict=True)
    with pytest.raises(ParseError, match="result.jsonl"):
        profkit.read_bench(bad)


# A cut leaves a partial last record, which both the plain and the gzipped read skip with a warning;
# the cut gzip's own warning is asserted below.
@pytest.mark.filterwarnings("ignore:.*skipped 1 unreadable item:UserWarning",
                            "ignore:.*compressed data ends early:UserWarning")
@pytest.mark.parametrize("keep", [0.3, 0.6, 0.95])
@pytest.mark.parametrize("source", [SGLANG_JSONL, SGLANG_TEXT], ids=["jsonl", "text"])
def test_read_bench_streams_a_cut_gzip(tmp_path, source, keep):
    packed = gzip.compress(source.read_bytes())
    cut = tmp_path / (source.name + ".gz")
    cut.write_bytes(packed[:int(len(packed) * keep)])
    plain = tmp_path / source.name
    plain.write_bytes(zlib.decompressobj(wbits=31).decompress(cut.read_bytes()))
    try:
        expected = bench_rows(profkit.read_bench(plain))
    except ParseError:
        with pytest.raises(ParseError, match=cut.name):
            profkit.read_bench(cut)
        return
    with pytest.warns(UserWarning, match="compressed data ends early"):
        frame = profkit.read_bench(cut)
    pd.testing.assert_frame_equal(bench_rows(frame), expected)


def edited(tmp_path: Path, source: Path, old: str, new: str, count: int = 1) -> Path:
    text = source.read_text()
    assert old in text
    path = tmp_path / source.name
    path.write_text(text.replace(old, new, count))
    return path


def test_a_20_digit_batch_size_is_left_empty_and_named(tmp_path):
    path = edited(tmp_path, ONE_BATCH, "Batch size: 1,", "Batch size: 12345678901234567890,", 99)
    with pytest.warns(UserWarning, match=rf"{path.name}:\d+: .*batch_size=12345678901234567890"):
        frame = profkit.read_bench(path, format="sglang-one-batch")
    reference = profkit.read_bench(ONE_BATCH, format="sglang-one-batch")
    assert len(frame) == len(reference) and frame["batch_size"].isna().all()
    assert frame["missing"].str.contains("batch_size").all()
    assert frame["decode_latency_s"].tolist() == reference["decode_latency_s"].tolist()


def test_a_superscript_n_shot_is_no_count(tmp_path):
    path = edited(tmp_path, LMEVAL_TABLE, "|     5|exact_match", "|     ²|exact_match", 99)
    frame = profkit.read_bench(path, format="lm-eval-table")
    reference = profkit.read_bench(LMEVAL_TABLE, format="lm-eval-table")
    assert frame["n_shot"].isna().all() and reference["n_shot"].eq(5).all()
    assert frame["value"].tolist() == reference["value"].tolist()


@pytest.mark.parametrize("field, value", [
    ("tokens", "abc"), ("tokens", 1.5), ("tokens", 2**70), ("step_ms", "fast"), ("autotune", "yes"),
])
def test_step_values_that_do_not_fit_are_left_empty_and_named(tmp_path, field, value):
    records = [json.loads(line) for line in STEP.read_text().splitlines()]
    records[3][field] = value
    path = tmp_path / "step.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    with pytest.warns(UserWarning, match=rf"step\.jsonl:4: .*{field}="):
        frame = profkit.read_bench(path)
    assert len(frame) == len(records) and pd.isna(frame.loc[3, field]) and field in frame.loc[3, "missing"]
    reference = profkit.read_bench(STEP)
    unchanged = [c for c in reference.columns if c not in (field, "missing", "raw", "source")]
    pd.testing.assert_frame_equal(frame[unchanged], reference[unchanged])


# -- read_log: lists with an unreadable file ---------------------------------------------------
@pytest.mark.parametrize("how", DAMAGE + ["missing"])
def test_a_list_of_logs_keeps_the_readable_ones(tmp_path, how):
    bad = tmp_path / "rank1.log"
    if how != "missing":
        make_unreadable(bad, how)
    with pytest.warns(UserWarning, match="rank1.log"):
        tables = profkit.read_log([CPU_LOG, bad])
    alone = profkit.read_log(CPU_LOG)
    assert len(tables.candidates) == len(alone.candidates) and len(tables.winners) == len(alone.winners)
    assert tables.report["file"].astype(str).str.contains("rank1.log").any()
    with pytest.raises(ParseError, match="rank1.log"):
        profkit.read_log([CPU_LOG, bad], strict=True)


# -- profkit parse -----------------------------------------------------------------------------
def parse(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "profkit", "parse", "--no-progress", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def test_parse_gives_same_named_logs_their_own_run_ids(tmp_path):
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        shutil.copy(CPU_LOG, tmp_path / folder / "rank0.log")
    both = profkit.read_log([tmp_path / "a" / "rank0.log", tmp_path / "b" / "rank0.log"])
    alone = profkit.read_log(CPU_LOG)
    assert both.runs["run_id"].is_unique and len(both.runs) == 2 * len(alone.runs)
    assert both.candidates.groupby("run_id").size().tolist() == [len(alone.candidates)] * 2
    result = parse("a/rank0.log", "b/rank0.log", cwd=tmp_path)
    assert result.returncode == 0 and "a/rank0.log#1" in result.stdout and "b/rank0.log#1" in result.stdout


def test_parse_names_a_file_that_is_no_log_and_fails_under_strict(tmp_path):
    shutil.copy(CPU_LOG, tmp_path / "rank0.log")
    (tmp_path / "notes.txt").write_text("not a log\nat all\n")
    result = parse("rank0.log", "notes.txt", cwd=tmp_path)
    assert result.returncode == 0 and "notes.txt: nothing read" in result.stderr
    report = profkit.read_log([tmp_path / "rank0.log", tmp_path / "notes.txt"]).report
    assert (report[report["file"].astype(str).str.contains("notes.txt")]["status"] != "read").all()
    strict = parse("rank0.log", "notes.txt", "--strict", cwd=tmp_path)
    assert strict.returncode == 1 and "notes.txt" in strict.stderr


@pytest.mark.parametrize("kind", ["cache", "bench"])
def test_parse_strict_fails_on_any_unreadable_input(tmp_path, kind):
    good = shutil.copy(CPU_CACHE if kind == "cache" else SGLANG_JSONL, tmp_path)
    bad = tmp_path / ("other.json" if kind == "cache" else "other.jsonl")
    make_unreadable(bad, "fifo")
    loose = parse(Path(good).name, bad.name, "--kind", kind, cwd=tmp_path)
    assert loose.returncode == 0 and "other.json" in loose.stderr
    strict = parse(Path(good).name, bad.name, "--kind", kind, "--strict", cwd=tmp_path)
    assert strict.returncode == 1 and "other.json" in strict.stderr and "is a FIFO" in strict.stderr


# -- properties: damage stays local ------------------------------------------------------------
def _mutate(data: bytes, draw) -> bytes:
    """``data`` with one drawn piece of damage: a flipped byte, a cut, an insertion or a deletion."""
    kind = draw(st.sampled_from(["flip", "cut", "insert", "delete", "gzip-cut"]), label="damage")
    at = draw(st.integers(0, max(len(data) - 1, 0)), label="at")
    if kind == "flip":
        return data[:at] + bytes([data[at] ^ draw(st.integers(1, 255), label="xor")]) + data[at + 1:]
    if kind == "cut":
        return data[:at]
    if kind == "delete":
        return data[:at] + data[at + draw(st.integers(1, 200), label="n"):]
    if kind == "gzip-cut":
        packed = gzip.compress(data)
        return packed[:draw(st.integers(0, len(packed)), label="keep")]
    junk = draw(st.sampled_from([b"[" * 5000, b"9" * 5000, b'"\\ud800"', b"\x00", b"\xff\xfe", b"\n", b"{",
                                 b'"x": 1e999, ', b"2026-13-45 99:99:99,999", b"pid=12345678901234567890"]),
                label="junk")
    return data[:at] + junk + data[at:]


PROPERTY = settings(max_examples=40, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def _quietly(read, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return read(*args, **kwargs)


@functools.cache
def _undamaged(read, path: Path):
    """``read(path)`` of an undamaged input, read once: each example of a property compares with it."""
    return read(path)


@PROPERTY
@given(source=st.sampled_from([CPU_CACHE, H200_CACHE]), data=st.data())
def test_a_damaged_cache_beside_a_good_one_never_costs_the_good_ones_rows(tmp_path_factory, source, data):
    folder = tmp_path_factory.mktemp("caches")
    good, damaged = folder / "good.json", folder / "damaged.json"
    shutil.copy(CPU_CACHE, good)
    damaged.write_bytes(_mutate(source.read_bytes(), data.draw))
    with contextlib.suppress(ProfkitError):
        _quietly(profkit.read_cache, damaged)
    both = _quietly(profkit.read_cache, [good, damaged])
    w = both.winners
    pd.testing.assert_frame_equal(winner_rows(w[w["run_id"] == "good.json"]),
                                  winner_rows(_undamaged(profkit.read_cache, CPU_CACHE).winners))


@PROPERTY
@given(data=st.data())
def test_a_damaged_v2_entry_never_costs_the_other_entries(tmp_path_factory, data):
    store = shutil.copytree(STORE, tmp_path_factory.mktemp("v2") / "store")
    entries = sorted(next((store / "v2").iterdir()).glob("entries/*.json"))
    victim = data.draw(st.sampled_from(entries), label="entry")
    victim.write_bytes(_mutate(victim.read_bytes(), data.draw))
    w = _quietly(profkit.read_cache, store).winners
    whole = _undamaged(profkit.read_cache, STORE).winners
    others = w[~w["file"].str.endswith(victim.name)]
    pd.testing.assert_frame_equal(winner_rows(others), winner_rows(whole[~whole["file"].str.endswith(victim.name)]))


@PROPERTY
@given(source=st.sampled_from([SGLANG_JSONL, SGLANG_TEXT, LMEVAL_TABLE, ONE_BATCH, STEP]), data=st.data())
def test_a_damaged_bench_file_beside_a_good_one_never_costs_the_good_ones_rows(tmp_path_factory, source, data):
    damaged = tmp_path_factory.mktemp("bench") / source.name
    damaged.write_bytes(_mutate(source.read_bytes(), data.draw))
    with contextlib.suppress(ProfkitError):
        _quietly(profkit.read_bench, damaged)
    both = _quietly(profkit.read_bench, [SGLANG_JSONL, damaged])
    mine = both[both["source"] == str(SGLANG_JSONL)].reset_index(drop=True)
    pd.testing.assert_frame_equal(mine, _undamaged(profkit.read_bench, SGLANG_JSONL))


@PROPERTY
@given(data=st.data())
def test_a_damaged_log_beside_a_good_one_never_costs_the_good_ones_rows(tmp_path_factory, data):
    folder = tmp_path_factory.mktemp("logs")
    good, damaged = folder / "good.log", folder / "damaged.log"
    shutil.copy(CPU_LOG, good)
    damaged.write_bytes(_mutate(CPU_LOG.read_bytes(), data.draw))
    with contextlib.suppress(ProfkitError):
        _quietly(profkit.read_log, damaged)
    both = _quietly(profkit.read_log, [good, damaged])
    alone = _undamaged(profkit.read_log, CPU_LOG)
    for table in ("candidates", "winners"):
        mine = getattr(both, table)
        mine = mine[mine["file"].astype(str) == "good.log"]
        columns = ["op", "profile", "runner", "tactic", "time_ms", "status"] if table == "candidates" \
            else ["op", "profile", "runner", "tactic", "source"]
        expected = getattr(alone, table)[columns].reset_index(drop=True).astype("object")
        pd.testing.assert_frame_equal(mine[columns].reset_index(drop=True).astype("object"), expected)
