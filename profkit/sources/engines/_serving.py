"""The ``Serving Benchmark Result`` block that SGLang ``bench_serving`` and vLLM ``bench serve`` share.

Both print ``"{:<40} {:<10}"`` label/value lines between a centred ``=`` header and a line of
``=``, with ``-``-centred section titles. The labels differ by engine and version, so each engine
module supplies its own label table; this module finds the blocks, splits labels from values and
turns what it read into a row. Labels are looked up, never counted by position: hand-abridged
docs drop lines, pastes are cut mid-block, and markdown quotes (``> ``) prefix every line.
"""

from __future__ import annotations

import dataclasses
import re

from profkit.sources.engines._common import (Field, Printed, Record, Source, expected_columns, json_value,
                                             missing_text, text_value)

HEADER = re.compile(r"=+ Serving Benchmark Result =+")
_CLOSING = re.compile(r"=+")
_SECTION = re.compile(r"-{3,}(?P<title>[^-].*?)-{3,}")
_LABEL = re.compile(r"(?P<label>[^\s:][^:]*?):(?:\s+(?P<value>.*?))?\s*")
_QUOTE = re.compile(r"^\s*(?:>\s?)+")
# The model a run benchmarked: sglang/vLLM print their argparse Namespace before the block;
# a saved command line (or a fixture's "# command:" header) names it with --model.
_NAMESPACE_MODEL = re.compile(r"Namespace\(.*?\bmodel='(?P<model>[^']+)'")
_COMMAND_MODEL = re.compile(r"(?:bench_serving|benchmark\.serving|bench serve|benchmark_serving)\S*\s.*?"
                            r"--model[= ](?P<model>\S+)")


@dataclasses.dataclass(frozen=True)
class Block:
    """One result block.

    Attributes:
        line: line number of the header.
        body: (line number, text without quote prefix) of the lines between header and closing line.
        raw: the block's original text, header to closing line.
        complete: whether the closing ``=`` line was seen.
        context: (line number, text) of the lines between the previous block (or the start of the
            input, fixture header included: its ``# command:`` names the model) and the header.
    """

    line: int
    body: tuple[tuple[int, str], ...]
    raw: str
    complete: bool
    context: tuple[tuple[int, str], ...]

    def labels(self) -> set[str]:
        """Labels and section titles in the block, as printed."""
        found = set()
        for _, text in self.body:
            match = _SECTION.fullmatch(text) or _LABEL.fullmatch(text)
            if match:
                found.add(_normal(match.group(1)))
        return found


def unquote(text: str) -> str:
    """A line without markdown quote prefixes and surrounding whitespace."""
    return _QUOTE.sub("", text).strip()


def find_blocks(source: Source) -> list[Block]:
    """Every result block of a source, cut or whole, in order.

    A block ends at its closing ``=`` line, at the next header, at a blank line (neither
    engine prints one inside a block) or at the end of the input.
    """
    blocks, context, current = [], list(source.header()), None
    for number, text in source.payload():
        plain = unquote(text)
        if HEADER.search(plain):
            if current:
                blocks.append(_block(current, complete=False))
            current = {"line": number, "lines": [(number, text)], "context": tuple(context)}
            context = []
        elif current is None:
            context.append((number, text))
        elif _CLOSING.fullmatch(plain) or not plain:
            if plain:
                current["lines"].append((number, text))
            blocks.append(_block(current, complete=bool(plain)))
            current = None
        else:
            current["lines"].append((number, text))
    if current:
        blocks.append(_block(current, complete=False))
    return blocks


def _block(current: dict, *, complete: bool) -> Block:
    lines = current["lines"]
    body = lines[1:-1] if complete else lines[1:]
    return Block(line=current["line"], body=tuple((n, unquote(t)) for n, t in body),
                 raw="\n".join(t for _, t in lines), complete=complete, context=current["context"])


def _normal(label: str) -> str:
    return " ".join(label.split())


@dataclasses.dataclass
class Reading:
    """What one block or record gave: values by column, the era evidence, what failed."""

    values: dict = dataclasses.field(default_factory=dict)
    seen: list[Printed] = dataclasses.field(default_factory=list)
    unreadable: list[str] = dataclasses.field(default_factory=list)
    unread_lines: list[int] = dataclasses.field(default_factory=list)

    def take(self, field: Field, readable: bool, value) -> None:
        """Record one label (or key) and its value; the first of a repeated column wins."""
        self.seen.append(field.printed)
        if field.column in self.values:
            return
        if readable:
            self.values[field.column] = value
        else:
            self.unreadable.append(field.column)


def read_block(block: Block, labels: dict[str, Field], sections: dict[str, Printed], *,
               cut_line: int | None) -> Reading:
    """Values of a block's known labels; unknown lines are listed, not guessed at."""
    reading = Reading()
    for number, text in block.body:
        section = _SECTION.fullmatch(text)
        if section and _normal(section["title"]) in sections:
            reading.seen.append(sections[_normal(section["title"])])
            continue
        match = _LABEL.fullmatch(text)
        field = labels.get(_normal(match["label"])) if match else None
        if field is None:
            reading.unread_lines.append(number)
            continue
        if field.column in reading.values:
            reading.unread_lines.append(number)
            continue
        reading.take(field, *text_value(field.kind, match["value"], maybe_cut=number == cut_line))
    return reading


def read_record(record: Record, keys: dict[str, Field]) -> Reading:
    """Values of a JSON record's known keys."""
    reading = Reading()
    for key, field in keys.items():
        if key in record.obj:
            reading.take(field, *json_value(field.kind, record.obj[key]))
    return reading


def context_labels(context: tuple[tuple[int, str], ...]) -> dict[str, tuple[int, str | None]]:
    """Label -> (line, value) of the ``Label: value`` lines before a block (last one wins)."""
    found = {}
    for number, text in context:
        match = _LABEL.fullmatch(unquote(text))
        if match:
            found[_normal(match["label"])] = (number, match["value"])
    return found


def context_model(context: tuple[tuple[int, str], ...]) -> str | None:
    """The model named by the last argparse Namespace or bench command line before a block."""
    model = None
    for _, text in context:
        match = _NAMESPACE_MODEL.search(text) or _COMMAND_MODEL.search(text)
        if match:
            model = match["model"].strip("'\"")
    return model


def row(reading: Reading, layout: dict[str, Field], *, engine: str, format: str, line: int, raw: str,
        complete: bool, expected_drop: frozenset = frozenset()) -> dict | None:
    """The row of one block or record, or None when nothing in it could be read."""
    if not reading.values:
        return None
    expected = [c for c in expected_columns(reading.seen, layout.values()) if c not in expected_drop]
    order = [f.column for f in layout.values()]
    return {**reading.values, "engine": engine, "format": format, "line": line, "raw": raw, "complete": complete,
            "missing": missing_text(order, expected, reading.values, reading.unreadable),
            "unread_lines": ",".join(map(str, reading.unread_lines))}
