"""Plumbing the engine readers share: inputs, value grammar, layout eras and the bench frame.

An input (path, text, bytes or a list of them) becomes one :class:`Source` per file: its lines,
split on ``\\n`` only so line numbers match an editor's, with the fixture header
(``# source: / # note: / # command:``) marked off. Readers turn a source into row dicts and
:func:`collect` turns those into the ``bench`` frame, warning about what it skipped and raising
:class:`~profkit.errors.ParseError` when a source yields no row at all.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import warnings
from typing import Callable, Iterable, Iterator

import pandas as pd

from profkit import schema
from profkit.errors import ParseError
from profkit.sources.inputs import (LONE_SURROGATE, Input, as_float, as_int, boundary, inputs_of, json_without_surrogates,
                                    without_surrogates)

# The bench frame's extra column groups, in order (see profkit.schema).
_EXTRAS = ("bench.engines", "bench.step")

_FIXTURE_HEADER = re.compile(r"^# (source|note|command): ")


# -- input -------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Source:
    """One input file (or text): its lines and where its payload starts.

    Attributes:
        name: path as given, or ``<text>``.
        lines: physical lines without line ends; ``lines[i]`` is line ``i + 1``.
        start: index of the first line after the fixture header run.
        cut_line: number of the last line when the input does not end in a newline (it may
            have been cut short), else None.
    """

    name: str
    lines: tuple[str, ...]
    start: int
    cut_line: int | None

    def payload(self) -> Iterator[tuple[int, str]]:
        """(line number, text) of every line after the fixture header."""
        for index in range(self.start, len(self.lines)):
            yield index + 1, self.lines[index]

    def header(self) -> Iterator[tuple[int, str]]:
        """(line number, text) of the fixture header lines."""
        for index in range(self.start):
            yield index + 1, self.lines[index]

    def first_text_line(self) -> int:
        """Number of the first non-blank payload line (1 for an empty input)."""
        return next((n for n, text in self.payload() if text.strip()), 1)


def load_source(item: Input) -> Source:
    """The :class:`Source` of one input, warning about bytes it could not decode or data it lost.

    Raises:
        ParseError: naming the file, when it cannot be read at all (see :meth:`Input.open`).
    """
    with boundary(item.where):
        text = item.read_text()
    if item.undecodable_line is not None:
        warnings.warn(f"{item.where}:{item.undecodable_line}: not valid UTF-8; undecodable bytes were replaced "
                      "by U+FFFD and lines holding them are read as far as they go", stacklevel=5)
    if item.text is not None and (lone := LONE_SURROGATE.search(text)):
        warnings.warn(f"{item.where}:{text.count(chr(10), 0, lone.start()) + 1}: lone surrogate characters "
                      "replaced by U+FFFD", stacklevel=5)
        text = without_surrogates(text)
    source = _source(item.where, text)
    if item.damage:
        warnings.warn(f"{item.where}: {item.damage}; read the {len(source.lines)} line(s) before it", stacklevel=5)
        source = dataclasses.replace(source, cut_line=len(source.lines) or None)
    return source


def _source(name: str, text: str) -> Source:
    if "\r" in text and "\n" not in text:  # old Mac line ends (CR alone): each CR ends a line
        text = text.replace("\r", "\n")
    lines = text.split("\n")
    cut_line = None if text.endswith("\n") or not text else len(lines)
    if text.endswith("\n"):
        lines.pop()
    lines = [line[:-1] if line.endswith("\r") else line for line in lines]
    start = 0
    while start < len(lines) and _FIXTURE_HEADER.match(lines[start]):
        start += 1
    return Source(name=name, lines=tuple(lines), start=start, cut_line=cut_line)


# -- values ------------------------------------------------------------------------------------
# Engines print floats with .2f, so a float without exactly two decimals ("1022.") is a paste
# cut inside the value. Only that format proves a value whole on a line that may be cut short.
_TEXT_VALUE = {
    "count": re.compile(r"\d{1,18}"),  # Int64 columns: longer counts are not values any engine prints
    "float2": re.compile(r"-?\d+\.\d\d|-?inf|nan"),
    "count_or_float2": re.compile(r"\d{1,18}(\.00)?"),  # vLLM prints Peak concurrent requests with .2f
    "rate": re.compile(r"inf|\d+\.\d+|trace"),  # str(float); trace = --use-trace-timestamps
    "cap": re.compile(r"\d{1,18}|not set|None"),
    "percent": re.compile(r"\d+(\.\d+)?%"),
    "word": re.compile(r"\S+"),
}
_NO_VALUE = ("not set", "None", "trace")  # no cap / pre-run "None" / --use-trace-timestamps
_PROVEN_WHOLE = ("float2", "percent")


def text_value(kind: str, text: str | None, *, maybe_cut: bool) -> tuple[bool, object]:
    """(readable, value) of a printed value of ``kind``; a rate or cap of 'not set'/'None'/'trace' reads as None."""
    if text is None or not _TEXT_VALUE[kind].fullmatch(text):
        return False, None
    if maybe_cut and kind not in _PROVEN_WHOLE:
        return False, None
    if kind == "word":
        return True, text
    if text in _NO_VALUE:
        return True, None
    if kind in ("count", "cap", "count_or_float2"):
        return True, int(text.partition(".")[0])
    return True, float(text.rstrip("%"))


def json_value(kind: str, value) -> tuple[bool, object]:
    """(readable, value) of a JSON value of ``kind``; null reads as None."""
    if value is None:
        return True, None
    if kind == "str":
        return isinstance(value, str), value if isinstance(value, str) else None
    if isinstance(value, str):
        value = {"inf": math.inf, "infinity": math.inf, "-inf": -math.inf, "nan": math.nan}.get(value.lower(), value)
        if value == "trace" and kind == "rate":
            return True, None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False, None
    number = as_int(value) if kind == "int" else as_float(value)
    return number is not None, number


# -- layout eras -------------------------------------------------------------------------------
Version = tuple[int, int, int]


def _version(text: str) -> Version:
    parts = tuple(int(p) for p in text.split("."))
    return (parts + (0, 0, 0))[:3]


@dataclasses.dataclass(frozen=True)
class Printed:
    """The versions of a tool that write a label or key: always, only on a condition, or not.

    Built from a spec such as ``"0.2.9-0.4.4, ?0.5.6-"``: each range is from a version (included)
    to a version (excluded) or open-ended; a leading ``?`` marks a conditional range.
    """

    always: tuple[tuple[Version, Version | None], ...]
    maybe: tuple[tuple[Version, Version | None], ...]

    @classmethod
    def parse(cls, spec: str) -> "Printed":
        always, maybe = [], []
        for part in (p.strip() for p in spec.split(",")):
            target = maybe if part.startswith("?") else always
            first, _, until = part.lstrip("?").partition("-")
            target.append((_version(first), _version(until) if until else None))
        return cls(tuple(always), tuple(maybe))

    def at(self, version: Version) -> str:
        """'always', 'maybe' or 'never': whether ``version`` writes it."""
        def within(ranges):
            return any(first <= version and (until is None or version < until) for first, until in ranges)
        return "always" if within(self.always) else "maybe" if within(self.maybe) else "never"

    def bounds(self) -> set[Version]:
        return {v for first, until in self.always + self.maybe for v in (first, until) if v is not None}


@dataclasses.dataclass(frozen=True)
class Field:
    """A label (text) or key (JSON) a reader knows: the column it fills, its value kind, its era."""

    column: str
    kind: str
    printed: Printed


def fields(table: dict[str, tuple[str, str, str]]) -> dict[str, Field]:
    """Build a label table from ``{label: (column, kind, printed spec)}``."""
    return {label: Field(column, kind, Printed.parse(spec)) for label, (column, kind, spec) in table.items()}


def expected_columns(seen: Iterable[Printed], layout: Iterable[Field]) -> list[str]:
    """Columns that every tool version able to print all of ``seen`` writes unconditionally.

    The seen labels narrow the versions (e.g. the ``Max reqeuest concurrency`` typo means
    SGLang 0.4.0-0.4.6); absent labels never do, since blocks are often cut or abridged. When
    the seen labels contradict each other (lines from two versions mixed), only the columns
    every version writes are expected. Returned in layout order.
    """
    layout, seen = list(layout), list(seen)
    points = sorted(set().union(*(f.printed.bounds() for f in layout)))
    candidates = [v for v in points if all(p.at(v) != "never" for p in seen)] or points
    order = list(dict.fromkeys(f.column for f in layout))
    return [col for col in order
            if all(any(f.column == col and f.printed.at(v) == "always" for f in layout) for v in candidates)]


def missing_text(order: Iterable[str], expected: Iterable[str], present: Iterable[str],
                 unreadable: Iterable[str]) -> str:
    """Comma-separated columns, in ``order``, that are expected or unreadable and have no value."""
    wanted, present = set(expected) | set(unreadable), set(present)
    return ",".join(c for c in dict.fromkeys(order) if c in wanted and c not in present)


# -- JSON records ------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Record:
    """One JSON object: the line it starts on, the object, and its text."""

    line: int
    obj: dict
    raw: str


def json_records(source: Source, skipped: list[tuple[int, str]], *, only_json: bool) -> list[Record]:
    """JSON objects of a source: one per line (JSONL), or indented documents opening on a lone ``{``/``[`` line.

    Python's json reads the bare ``Infinity``/``NaN`` that SGLang's ``json.dumps`` writes.
    Lines starting with ``{`` that do not parse are noted in ``skipped``; with ``only_json``
    every other non-blank line is too.
    """
    payload = list(source.payload())
    records, index, repaired = [], 0, []
    while index < len(payload):
        number, stripped = payload[index][0], payload[index][1].strip()
        index += 1
        if stripped in ("{", "["):  # json.dump(..., indent=...) of one document
            found, used, error = _document(payload, index - 1, repaired)
            records += found
            index += used - 1
            if error:
                skipped.append(error)
        elif stripped.startswith("{"):
            try:
                records += _records(json.loads(stripped), number, stripped, repaired)
            except (ValueError, RecursionError) as exc:
                skipped.append((number, f"not a whole JSON object ({exc})"))
        elif stripped and only_json:
            skipped.append((number, f"not JSON: {stripped[:60]!r}"))
    if repaired:
        shown = ", ".join(map(str, repaired[:5])) + (f" and {len(repaired) - 5} more" if len(repaired) > 5 else "")
        warnings.warn(f"{source.name}: line(s) {shown}: lone surrogates (such as the JSON escape \"\\udcff\") in "
                      "names replaced by U+FFFD; the rows are read", stacklevel=5)
    return records


def _document(payload: list[tuple[int, str]], index: int, repaired: list[int]) -> tuple[list[Record], int, tuple | None]:
    """Records of the document opening at ``payload[index]``, lines it used, and the error if any."""
    first = payload[index][0]
    text = "\n".join(t for _, t in payload[index:])
    try:
        doc, end = json.JSONDecoder().raw_decode(text, len(text) - len(text.lstrip()))
    except json.JSONDecodeError as exc:
        return [], 1, (first + exc.lineno - 1, f"JSON document cut or malformed: {exc.msg}")
    except (ValueError, RecursionError) as exc:
        return [], 1, (first, f"JSON document unreadable: {exc}")
    return _records(doc, first, text[:end].strip(), repaired), text.count("\n", 0, end) + 1, None


def _records(doc, line: int, text: str, repaired: list[int]) -> list[Record]:
    doc, replaced = json_without_surrogates(doc, text)
    if replaced:
        repaired.append(line)
    if isinstance(doc, dict):
        return [Record(line, doc, text)]
    if isinstance(doc, list):
        return [Record(line, item, json.dumps(item)) for item in doc if isinstance(item, dict)]
    return []


def rows_of(items: Iterable, make_row: Callable, skipped: list[tuple[int, str]], why: str) -> list[dict]:
    """``make_row`` of each block or record; those it returns None for are noted in ``skipped``."""
    rows = []
    for item in items:
        row = make_row(item)
        if row is None:
            skipped.append((item.line, why))
        else:
            rows.append(row)
    return rows


# -- the frame ---------------------------------------------------------------------------------
RowParser = Callable[[Source, list], list[dict]]


def collect(path_or_text, *, label: str, parse: RowParser, what: str, strict: bool = False) -> pd.DataFrame:
    """Read every input with ``parse`` into one bench frame (see ``read_bench``).

    Each file is read on its own: one that cannot be read or holds no result is named in a
    warning and the others are still read, unless ``strict`` or it is the only input.
    """
    items = inputs_of(path_or_text, what="engine output")
    rows, failures = [], []
    for item in items:
        try:
            rows += _rows_of(item, label=label, parse=parse, what=what)
        except ParseError as exc:
            if strict or len(items) == 1:
                raise
            failures.append(exc)
            warnings.warn(f"{exc} (the other inputs are read)", stacklevel=3)
    if not rows:
        raise failures[0]
    return bench_frame(rows)  # one frame of every input's rows: a frame's fixed cost was most of a small file's


def _rows_of(item: Input, *, label: str, parse: RowParser, what: str) -> list[dict]:
    source = load_source(item)
    skipped: list[tuple[int, str]] = []
    with boundary(source.name):
        rows = sorted(parse(source, skipped), key=lambda r: r["line"])
    if not rows:
        raise _nothing_readable(source, what, skipped)
    if skipped:
        _warn_skipped(source, skipped)
    for row in rows:
        row["source"], row["label"] = source.name, label
    return rows


def bench_frame(rows: list[dict]) -> pd.DataFrame:
    """The bench frame of ``rows``: the schema's bench columns, then its ``bench.engines`` and ``bench.step`` extras.

    Every value is checked against its column's dtype first (:func:`typed_value`); one that does
    not fit (``"yes"`` for a boolean, 2**70 or ``"abc"`` for a count) is left empty, its column is
    added to the row's ``missing``, and a warning names the file, line and value.
    """
    dtypes = schema.dtypes_of("bench", *_EXTRAS)
    given = set().union(*rows)  # an engine's rows name a few of the columns: the others are missing whole
    values = {name: [row.get(name) for row in rows] for name in dtypes if name in given}
    if not all(_typed(dtypes[name], column) for name, column in values.items()):  # checked row by row, as read
        for row in rows:
            _check_types(row, dtypes)
        given = set().union(*rows)
        values = {name: [row.get(name) for row in rows] for name in dtypes if name in given}
    # Every value has its column's type: each column is made in its dtype at once (no conversion after).
    missing = pd.RangeIndex(len(rows))
    columns = {name: pd.array(values[name], dtype=dtype) if name in values else
               pd.Series(None, index=missing, dtype=dtype).array for name, dtype in dtypes.items()}
    return schema.conform(pd.DataFrame(columns), "bench")


# The type each column's values have when :func:`typed_value` would keep them as they are.
_KEPT = {"string": str, "float64": float, "Int64": int, "boolean": bool}


def _typed(dtype: str, column: list) -> bool:
    """Whether every value of ``column`` fits ``dtype`` as it is (:func:`typed_value` would keep each): a column's
    types checked at once, not value by value."""
    kinds = set(map(type, column)) - {type(None)}
    if not kinds <= {_KEPT.get(dtype)}:
        return False
    ints = [v for v in column if v is not None] if dtype == "Int64" and kinds else []
    return not ints or (as_int(min(ints)) is not None and as_int(max(ints)) is not None)


def _check_types(row: dict, dtypes: dict[str, str]) -> None:
    wrong = []
    for name, value in row.items():
        if name in dtypes and value is not None:
            fits, row[name] = typed_value(dtypes[name], value)
            if not fits:
                wrong.append(f"{name}={json.dumps(value, default=str)[:40]}")
    if wrong:
        row["missing"] = ",".join(filter(None, [row.get("missing") or "", *(w.partition("=")[0] for w in wrong)]))
        warnings.warn(f"{row.get('source')}:{row.get('line')}: values that do not fit their column were left empty: "
                      + ", ".join(wrong), stacklevel=5)


def typed_value(dtype: str, value) -> tuple[bool, object]:
    """(fits, value as the column holds it) of a value read for a column of ``dtype``; None when it does not fit."""
    if dtype == "Int64":
        number = as_int(value)
    elif dtype == "float64":
        number = None if isinstance(value, str) else as_float(value)
    elif dtype == "boolean":
        number = value if isinstance(value, bool) else None
    else:
        number = value if isinstance(value, str) else None
    return number is not None, number


def _warn_skipped(source: Source, skipped: list[tuple[int, str]]) -> None:
    shown = "; ".join(f"line {n}: {why}" for n, why in skipped[:5])
    more = f" (and {len(skipped) - 5} more)" if len(skipped) > 5 else ""
    warnings.warn(f"{source.name}: skipped {len(skipped)} unreadable item(s): {shown}{more}", stacklevel=5)


def _nothing_readable(source: Source, what: str, skipped: list[tuple[int, str]]) -> ParseError:
    if not any(t.strip() for _, t in source.payload()):
        return ParseError(f"expected {what}, found no output (empty input)", path=source.name, line=1)
    if skipped:
        line, why = skipped[0]
        return ParseError(f"expected {what}; nothing readable: {why}", path=source.name, line=line)
    line = source.first_text_line()
    return ParseError(f"expected {what}, found {source.lines[line - 1].strip()[:120]!r} and nothing else "
                      "readable", path=source.name, line=line)
