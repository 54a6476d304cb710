"""Engine end-to-end results as one ``bench`` frame: SGLang, vLLM and lm-evaluation-harness outputs.

``read_bench`` finds every result it can read in a file (or text) and says which reader read
each row (``format``); the ``read_<engine>_<format>`` functions read one format only. See
``docs/engines.md`` for the columns per engine and the versions read.
"""

from __future__ import annotations

from collections import Counter

import pandas as pd

from profkit.errors import ProfkitError
from profkit.sources.engines import _serving, lmeval, sglang, step, vllm
from profkit.sources.engines._common import Source, collect, json_records

__all__ = ["FORMATS", "read_bench", "read_lmeval_json", "read_lmeval_table", "read_sglang_jsonl",
           "read_sglang_one_batch", "read_sglang_text", "read_step", "read_vllm_json", "read_vllm_text"]

# format -> (reader of one source, what it expects, for error messages)
_READERS = {
    "sglang-text": (sglang.text_rows, "an SGLang bench_serving 'Serving Benchmark Result' block"),
    "sglang-jsonl": (sglang.jsonl_rows, "SGLang bench_serving --output-file JSON records"),
    "sglang-one-batch": (sglang.one_batch_rows, "an SGLang bench_one_batch 'Benchmark ...' pass"),
    "vllm-text": (vllm.text_rows, "a vLLM bench serve 'Serving Benchmark Result' block"),
    "vllm-json": (vllm.json_rows, "vLLM bench serve --save-result JSON records"),
    "lm-eval-table": (lmeval.table_rows, "an lm-eval results table (|Tasks|Version|...|Metric|...|Value|...|)"),
    "lm-eval-json": (lmeval.json_rows, "an lm-eval results JSON (with a 'results' object)"),
    "profkit-step": (step.json_rows, "profkit step results (step.jsonl)"),
}
FORMATS = tuple(_READERS)
_ANY = ("an SGLang or vLLM 'Serving Benchmark Result' block, an SGLang bench_one_batch 'Benchmark ...' pass, "
        "an lm-eval results table, or an SGLang/vLLM/lm-eval JSON result record")

_ENGINES = {"sglang": sglang, "vllm": vllm}
# Labels (and section titles) only one engine prints tell a block's engine; likewise JSON keys.
_SGLANG_LABELS = (set(sglang.TEXT_FIELDS) | set(sglang.SECTIONS)) - (set(vllm.TEXT_FIELDS) | set(vllm.SECTIONS))
_VLLM_LABELS = (set(vllm.TEXT_FIELDS) | set(vllm.SECTIONS)) - (set(sglang.TEXT_FIELDS) | set(sglang.SECTIONS))
_SGLANG_KEYS = (set(sglang.JSONL_FIELDS) - set(vllm.JSON_FIELDS)) | sglang.JSONL_SIGNATURE
_VLLM_KEYS = (set(vllm.JSON_FIELDS) - set(sglang.JSONL_FIELDS)) | vllm.JSON_SIGNATURE


def read_bench(path_or_text, *, format: str | None = None, label: str = "", strict: bool = False) -> pd.DataFrame:
    """Read engine end-to-end results (serving benchmarks, accuracy runs) into one bench frame.

    Without ``format``, every result in the input is read: SGLang ``bench_serving`` blocks and
    ``--output-file`` JSONL, SGLang ``bench_one_batch`` passes, vLLM ``bench serve`` blocks and
    ``--save-result`` JSON, lm-eval tables and results JSON, even mixed in one console log. A
    result block tells its engine by the labels only SGLang or only vLLM prints (``Backend:``,
    ``Concurrency:``, ``Total Token throughput``, ...). What a result does not show stays empty,
    and the fields its tool version always writes but the block lacks (cut pastes, abridged
    docs) are listed in ``missing``. No value is derived or guessed.

    Args:
        path_or_text: a path, output text (it must contain a line break), bytes, or a list of
            paths; a list is read into one frame. Bytes that are not UTF-8 are read with the
            bad bytes replaced (with a warning).
        format: read only this format, one of :data:`FORMATS` (``sglang-text``,
            ``sglang-jsonl``, ``sglang-one-batch``, ``vllm-text``, ``vllm-json``,
            ``lm-eval-table``, ``lm-eval-json``). Needed when a block carries no label only one
            engine prints.
        label: the caller's name for the run (e.g. ``autotune-on``), put on every row.
        strict: raise on the first input that cannot be read or holds no result, instead of
            naming it in a warning and reading the others (a single input always raises).

    Returns:
        One row per serving block, JSON record, bench_one_batch pass or lm-eval metric, sorted
        by source then line. Columns: the ``bench`` table's (``profkit.schema.describe("bench")``):
        ``engine``, ``format``, ``source``, ``line`` (where the block starts), ``label``,
        ``model``, ``backend``, ``autotune`` (from SGLang's ``server_info``, >= 0.5.7),
        ``request_rate`` (req/s, inf = all at once), ``max_concurrency``, the request counts,
        ``duration_s``, token totals, throughputs (``*_tok_s``), latencies
        (``{mean,median,p90,p95,p99}_{ttft,tpot,itl,e2e}_ms``), ``task``/``metric``/``value``/
        ``value_stderr`` for lm-eval, ``missing`` and ``raw``; then the ``bench.engines`` extras
        (``complete``, ``unread_lines``, ``concurrency``, ``accept_length``, ...) and the
        ``bench.step`` ones (``profkit.schema.columns_of``).

    Raises:
        ParseError: naming the file and line, when no input holds anything readable (or, with
            ``strict``, any one does not); a path that is missing, a directory, a FIFO or device
            is unreadable.
        ProfkitError: when ``format`` is not one of :data:`FORMATS`.

    Warns:
        UserWarning: with the count and lines of items skipped (JSON lines that do not parse,
            blocks with no readable line, blocks whose engine cannot be told); naming an input
            that could not be read while others were; naming file, line and value of a value that
            does not fit its column (left empty and listed in ``missing``); when a gzip input is
            cut or corrupt (the lines before the damage are read).
    """
    if format is not None and format not in _READERS:
        raise ProfkitError(f"unknown format {format!r}; read_bench reads {', '.join(FORMATS)} (or None: all)")
    if not isinstance(label, str):
        raise ProfkitError(f"label must be a string, found {type(label).__name__}")
    if format is None:
        return collect(path_or_text, label=label, parse=_any_rows, what=_ANY, strict=strict)
    parse, what = _READERS[format]
    return collect(path_or_text, label=label, parse=parse, what=what, strict=strict)


def read_sglang_text(path_or_text, *, label: str = "") -> pd.DataFrame:
    """Read SGLang ``bench_serving`` console result blocks; see :func:`read_bench` for the columns."""
    return read_bench(path_or_text, format="sglang-text", label=label)


def read_sglang_jsonl(path_or_text, *, label: str = "") -> pd.DataFrame:
    """Read SGLang ``bench_serving --output-file`` JSONL records; see :func:`read_bench`."""
    return read_bench(path_or_text, format="sglang-jsonl", label=label)


def read_sglang_one_batch(path_or_text, *, label: str = "") -> pd.DataFrame:
    """Read ``python -m sglang.bench_one_batch`` console output (benchmark passes); see :func:`read_bench`."""
    return read_bench(path_or_text, format="sglang-one-batch", label=label)


def read_vllm_text(path_or_text, *, label: str = "") -> pd.DataFrame:
    """Read vLLM ``bench serve`` / ``benchmark_serving.py`` console result blocks; see :func:`read_bench`."""
    return read_bench(path_or_text, format="vllm-text", label=label)


def read_vllm_json(path_or_text, *, label: str = "") -> pd.DataFrame:
    """Read vLLM ``--save-result`` JSON (one object, or one per line with ``--append-result``); see :func:`read_bench`."""
    return read_bench(path_or_text, format="vllm-json", label=label)


def read_lmeval_table(path_or_text, *, label: str = "") -> pd.DataFrame:
    """Read lm-eval console results tables (Tasks and Groups); see :func:`read_bench`."""
    return read_bench(path_or_text, format="lm-eval-table", label=label)


def read_lmeval_json(path_or_text, *, label: str = "") -> pd.DataFrame:
    """Read lm-eval ``--output_path`` results JSON; see :func:`read_bench`."""
    return read_bench(path_or_text, format="lm-eval-json", label=label)


def read_step(path_or_text, *, label: str = "") -> pd.DataFrame:
    """Read ``profkit step`` results (``step.jsonl``); see :func:`read_bench`."""
    return read_bench(path_or_text, format="profkit-step", label=label)


# -- auto-detection ----------------------------------------------------------------------------
def _any_rows(source: Source, skipped: list) -> list[dict]:
    """Every result of a source, whatever its format."""
    return (_serving_rows(source, skipped) + sglang.one_batch_rows(source, skipped)
            + lmeval.table_rows(source, skipped) + _json_rows(source, skipped))


def _serving_rows(source: Source, skipped: list) -> list[dict]:
    blocks = _serving.find_blocks(source)
    engines = _decide([_block_engine(b) for b in blocks])
    rows = []
    for block, engine in zip(blocks, engines):
        if engine is None:
            skipped.append((block.line, "cannot tell whether this result block is SGLang's or vLLM's; "
                                        "pass format='sglang-text' or format='vllm-text'"))
            continue
        row = _ENGINES[engine].block_row(block, cut_line=source.cut_line)
        if row is None:
            skipped.append((block.line, "result block without a readable line"))
        else:
            rows.append(row)
    return rows


def _block_engine(block: _serving.Block) -> str | None:
    labels = block.labels()
    engine = _vote(len(labels & _SGLANG_LABELS), len(labels & _VLLM_LABELS))
    return engine or ("vllm" if vllm.prerun_evidence(block.context) else None)


def _json_rows(source: Source, skipped: list) -> list[dict]:
    records = json_records(source, skipped, only_json=False)
    results = [r for r in records if lmeval.is_results(r.obj)]
    steps = [r for r in records if step.is_step(r)]
    serving = [r for r in records if not lmeval.is_results(r.obj) and not step.is_step(r)]
    rows = [row for r in results for row in lmeval.record_rows(r)] + [step.record_row(r) for r in steps]
    for record, engine in zip(serving, _decide([_vote(len(_SGLANG_KEYS & set(r.obj)), len(_VLLM_KEYS & set(r.obj)))
                                                for r in serving])):
        row = None if engine is None else _ENGINES[engine].record_row(record)
        if row is None:
            skipped.append((record.line, "JSON record that is no SGLang, vLLM or lm-eval result; pass format= "
                                         "to read it as one"))
        else:
            rows.append(row)
    return rows


def _vote(sglang_evidence: int, vllm_evidence: int) -> str | None:
    if sglang_evidence == vllm_evidence:
        return None
    return "sglang" if sglang_evidence > vllm_evidence else "vllm"


def _decide(engines: list[str | None]) -> list[str | None]:
    """Items with no engine evidence of their own take the engine most items of the file show."""
    counts = Counter(e for e in engines if e is not None).most_common()
    majority = counts[0][0] if counts and (len(counts) == 1 or counts[0][1] > counts[1][1]) else None
    return [e or majority for e in engines]
