"""``profkit step`` results (``step.jsonl``: one JSON object per repetition) as bench rows.

Each record already carries the bench columns it has (engine ``profkit-step``, model,
``output_tok_s`` for decode or ``input_tok_s`` for prefill) plus the step's own fields, which
land in the schema's ``bench.step`` columns; nothing is derived here.
"""

from __future__ import annotations

from profkit import schema
from profkit.sources.engines._common import Record, Source, json_records, rows_of

ENGINE = "profkit-step"

_BENCH = set(schema.columns("bench"))
_STEP = set(schema.dtypes_of("bench.step"))


def is_step(record: Record) -> bool:
    return record.obj.get("engine") == ENGINE


def json_rows(source: Source, skipped: list) -> list[dict]:
    """Rows of every ``profkit step`` record of a source."""
    return rows_of(json_records(source, skipped, only_json=True), record_row, skipped,
                   "JSON record that is not a profkit step result")


def record_row(record: Record) -> dict | None:
    """The bench row of one step record, or None when it is not one."""
    if not is_step(record):
        return None
    row = {k: v for k, v in record.obj.items() if k in _BENCH or k in _STEP}
    series = record.obj.get("label") or record.obj.get("state")  # the bench label is the caller's run name
    return {**row, "series": series, "format": ENGINE, "line": record.line, "raw": record.raw, "complete": True}
