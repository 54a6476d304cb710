"""Properties of the log grammar's pure functions (profkit.sources.logs.grammar).

Where FlashInfer, logging or tqdm has the formatter that wrote the text, the text is made with it:
parse(format(x)) gives x back. On any other text a function returns its "not one" value (None,
NaN, False) and raises nothing.
"""

from __future__ import annotations

import datetime
import logging
import math

from flashinfer.autotuner import DynamicDim, OptimizationProfile, ProfilingCacheKey, StaticDim
from flashinfer.jit.core import logger as flashinfer_logger
from hypothesis import given, settings
from hypothesis import strategies as st
from tqdm import tqdm

from profkit import schema
from profkit.sources.logs import grammar as g

FORMATTER = flashinfer_logger.handlers[0].formatter  # flashinfer.jit's own record format (jit/core.py)
LEVELS = ["DEBUG", "INFO", "WARNING", "ERROR"]

names = st.text("abcdefghijklmnopqrstuvwxyz0123456789_", min_size=1, max_size=20)
ops = st.lists(names, min_size=1, max_size=3).map("::".join)
dims = st.integers(-1, 2**40)
shapes = st.lists(st.lists(dims, max_size=4).map(tuple), max_size=5).map(tuple)
tactics = st.one_of(st.integers(-1, 10**6), st.lists(st.integers(0, 512), min_size=1, max_size=3).map(tuple),
                    st.lists(st.integers(0, 512), min_size=1, max_size=3))
extras = st.lists(st.one_of(st.integers(), st.booleans(), names), max_size=4).map(tuple)
# Text near the grammar: its own words and punctuation, so garbage reaches past the first test.
pieces = st.sampled_from([g.JIT, "[Autotuner]: ", "profiling ", g.WINNER, g.SHAPES, g.AVG_TIME, "<a.B object at 0x1f>",
                          "ProfilingCacheKey(custom_op='", "', runner_class_name='", "', runner_hash=",
                          ", nearest_profile=", ", extras=", "StaticDim(val=", "DynamicDim(min=", ", opt=",
                          "shapes=[", "], tensor_initializers", "[", "]", "(", ")", ",", " ", "'", "-", ":", "9" * 30,
                          "2026-12-02 21:08:33,061", " - DEBUG - ", "autotuner.py:3115", "\r", "inf", "nan", "1e400"])
garbage = st.one_of(st.text(max_size=300), st.lists(st.one_of(pieces, st.text(max_size=8)), max_size=30).map("".join))


class Runner:
    """A runner whose repr is CPython's default ``<module.Class object at 0x...>``, as FlashInfer's are."""


def record(message: str, level: str, when: datetime.datetime, filename: str = "autotuner.py",
           lineno: int = 3115) -> str:
    """One record as flashinfer.jit's logger formats it."""
    created = when.timestamp()
    rec = logging.makeLogRecord({"msg": message, "levelname": level, "filename": filename, "lineno": lineno,
                                 "created": created, "msecs": when.microsecond // 1000})
    return FORMATTER.format(rec)


moments = st.datetimes(min_value=datetime.datetime(2000, 1, 1), max_value=datetime.datetime(2099, 12, 31))


# -- headers ---------------------------------------------------------------------------------------
@given(message=st.text(max_size=200).filter(lambda m: g.JIT not in m and "\n" not in m and "\r" not in m),
       level=st.sampled_from(LEVELS), when=moments, glued=st.text(max_size=80).filter(lambda t: g.JIT not in t))
def test_a_formatted_record_is_found_where_it_starts(message, level, when, glued):
    line = record(message, level, when)
    header = g.whole_line_header(line)
    assert header is not None and line[header + len(g.JIT):] == message
    found = g.headers(glued + line)  # a tqdm fragment glued before it, as on stderr
    assert found[-1] == g.Header(len(glued), len(glued) + header + len(g.JIT), level)


@given(text=garbage)
def test_headers_of_any_text_are_ordered_and_inside_it(text):
    found = g.headers(text)
    for header in found:
        assert 0 <= header.start < header.message <= len(text) and header.level.isupper()
        assert text[header.message - len(g.JIT):header.message] == g.JIT
    assert [h.start for h in found] == sorted(h.start for h in found)
    at = g.whole_line_header(text)
    assert at is None or text[at:at + len(g.JIT)] == g.JIT


# -- timestamps and tqdm -------------------------------------------------------------------------
@given(a=moments, b=moments)
def test_span_of_two_log_timestamps_is_their_difference(a, b):
    ts = [record("x", "INFO", t)[:g.TIMESTAMP_LENGTH] for t in (a, b)]
    exact = [t.replace(microsecond=t.microsecond // 1000 * 1000) for t in (a, b)]
    assert g.span(*ts) == round((exact[1] - exact[0]).total_seconds(), 3)
    assert datetime.datetime.fromisoformat(g.iso(ts[0])) == exact[0]


@given(text=garbage)
def test_seconds_and_clock_of_other_text_are_nan(text):
    value = g.seconds(text)
    assert math.isnan(value) or g._TIMESTAMP.fullmatch(text)
    clock = g.clock_seconds(text)
    assert math.isnan(clock) or clock >= 0


@given(op=ops, total=st.integers(1, 10**6), data=st.data(), elapsed=st.floats(0, 10**6))
def test_a_tqdm_render_gives_op_count_total_and_elapsed(op, total, data, elapsed):
    n = data.draw(st.integers(0, total))
    text = tqdm.format_meter(n, total, elapsed, prefix=f"[AutoTuner]: Tuning {op}", unit="profile")
    assert g.parse_bar(text) == g.Bar(op, n, total, float(int(elapsed)))
    assert g.clock_seconds(tqdm.format_interval(elapsed)) == int(elapsed)


@given(text=garbage)
def test_parse_bar_of_any_text_is_a_bar_or_none(text):
    bar = g.parse_bar(g.TQDM_START + text)
    assert bar is None or (isinstance(bar.n, int) and bar.elapsed_s >= 0)


# -- candidates, runners, tactics -----------------------------------------------------------------
@given(tactic=tactics, shape=shapes, time_ms=st.one_of(st.floats(allow_nan=False), st.just(math.inf)))
def test_a_candidate_line_reads_back(tactic, shape, time_ms):
    runner = repr(Runner())
    body = g.autotuner_body(f"[Autotuner]: profiling {runner} {tactic}, shapes={shape}, avg_time {time_ms}")
    assert g.parse_candidate(body) == g.Candidate(runner, str(tactic), str(shape), time_ms)
    assert g.runner_parts(runner) == ("Runner", runner.rsplit(" ", 1)[-1][:-1])
    assert g.tactic_text(str(tactic)) == schema.tactic_text(tactic)


@given(text=garbage)
def test_candidate_runner_and_tactic_of_any_text_never_raise(text):
    parsed = g.parse_candidate(g.CANDIDATE + text)
    assert parsed is None or isinstance(parsed.time_ms, float)
    assert isinstance(g.tactic_text(text), str)
    name, address = g.runner_parts(text)
    assert isinstance(name, str) and (address is None or address.startswith("0x"))
    split = g.split_runner(text, 0)
    assert split is None or text.startswith(split[0])


# -- keys and profiles ---------------------------------------------------------------------------
@given(op=ops, runner=names, runner_hash=st.integers(-2**63, 2**63), nearest=shapes, extra=extras)
def test_a_profiling_cache_key_reads_back(op, runner, runner_hash, nearest, extra):
    key = ProfilingCacheKey(op, runner, runner_hash, nearest, extra)
    assert g.parse_key(str(key)) == {"op": op, "runner": runner, "profile": str(nearest), "extras": str(extra)}


@given(text=garbage)
@settings(max_examples=300)
def test_parse_key_of_any_text_is_a_dict_or_none(text):
    for candidate in (text, "ProfilingCacheKey(custom_op='" + text + ")", "(" + text + ")"):
        key = g.parse_key(candidate)
        assert key is None or {"op", "runner", "profile", "extras"} <= set(key)


profile_dims = st.one_of(st.integers(0, 2**40).map(StaticDim),
                         st.tuples(st.integers(0, 2**20), st.integers(0, 2**20), st.integers(0, 2**20)).map(
                             lambda t: DynamicDim(min=min(t), opt=sorted(t)[1], max=max(t))))


@given(tensors=st.lists(st.lists(profile_dims, max_size=4), max_size=5))
def test_opt_shapes_of_a_generated_profile_are_flashinfers(tensors):
    profile = OptimizationProfile(shapes=tensors, tensor_initializers=[None] * len(tensors))
    text = f"{profile}"  # as "[Autotuner]: generated profile: {p}" prints it
    assert g.opt_shapes(text) == str(profile.get_opt_shapes())
    assert g.fits(g.opt_shapes(text), g.opt_shapes(text))


@given(text=garbage)
def test_opt_shapes_and_fits_of_any_text_never_raise(text):
    shapes_text = g.opt_shapes(text)
    assert shapes_text is None or shapes_text.startswith("(")
    assert g.fits(text, text) and isinstance(g.fits(text, "(" + text + ")"), bool)


@given(shape=st.lists(st.lists(st.integers(0, 2**20), min_size=1, max_size=4).map(tuple), min_size=1,
                      max_size=4).map(tuple), data=st.data())
def test_shapes_fit_a_profile_that_frees_some_of_their_dims(shape, data):
    freed = tuple(tuple(-1 if data.draw(st.booleans()) else d for d in t) for t in shape)
    assert g.fits(str(shape), str(freed))
    other = tuple(tuple(d + 1 if f != -1 else d for d, f in zip(t, u)) for t, u in zip(shape, freed))
    assert g.fits(str(other), str(freed)) == all(f == -1 for u in freed for f in u)
