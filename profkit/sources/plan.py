"""Read back the plan ``profkit advise`` wrote: ``plan.json``, its switches and per-op numbers as data.

``plan.json`` (written by :func:`profkit.outputs.engine_plans.write_plan`) is one JSON object::

    {"format": "profkit-plan/1", "budget": "...", "gain_source": "tuner" | "serving",
     "skip_ops": ["op", ...], "tuning_buckets": [M, ...] | null,
     "blocklist": {"op::RunnerClass": [tactic, ...]}, "metadata": {...}, "notes": ["...", ...],
     "ops": [{"op": ..., "decision": ..., "tuned_buckets": [M, ...], "n_shapes": ..., "n_buckets": ...,
              "full_s": ..., "planned_s": ..., "jit_s": ..., "prep_kept_s": ..., "pass_ms": ...,
              "cost_ms": ..., "cost_pct": ..., "verdict": ...}, ...]}

:func:`read_plan_json` reads it within :data:`PLAN_LIMIT` bytes and checks every field; damage is
one :class:`~profkit.errors.ParseError` line naming the file (and the field). :func:`read_plan`
reads an advise ``--out`` folder: its ``plan.json``, or, for a folder written before advise wrote
one, the switches of ``plan.md`` and ``blocklist.json``.
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import fields
from pathlib import Path

from profkit.errors import ParseError
from profkit.schema import PLAN_FORMAT, PlanFile, PlanOp
from profkit.sources.inputs import Input, boundary, load_json

PLAN_LIMIT = 32 << 20  # a plan of hundreds of ops with every tactic blocked stays far below


def read_plan(folder: str | os.PathLike) -> PlanFile:
    """The plan in a ``profkit advise --out`` folder: ``plan.json``, else ``plan.md`` and ``blocklist.json``.

    Raises:
        ParseError: naming the file, when it is missing or damaged (see :func:`read_plan_json`).
    """
    folder = Path(folder)
    if (folder / "plan.json").exists() or not (folder / "plan.md").exists():
        return read_plan_json(folder / "plan.json")
    return _read_plan_md(folder)


def read_plan_json(path: str | os.PathLike) -> PlanFile:
    """The plan of a ``plan.json`` file, every field checked.

    Raises:
        ParseError: naming the file, when it is missing, not a regular file, larger than
            :data:`PLAN_LIMIT`, not JSON, of another ``format``, or a field is missing or of
            the wrong type (the message names the field).
    """
    item = Input(name=str(path), path=os.fspath(path))
    doc, _ = load_json(item, limit=PLAN_LIMIT)
    where = item.where
    if item.damage:
        raise ParseError(item.damage, path=where)
    if not isinstance(doc, dict):
        raise ParseError(f"not a profkit plan: a JSON {_kind(doc)}, expected an object with "
                         f"\"format\": \"{PLAN_FORMAT}\"", path=where)
    if doc.get("format") != PLAN_FORMAT:
        got = f"format {ascii(doc['format'])[:80]}" if "format" in doc else "no \"format\" key"
        raise ParseError(f"not a profkit plan this version reads: {got}, expected \"{PLAN_FORMAT}\"", path=where)
    with boundary(where):
        return PlanFile(
            budget=_text(doc, "budget", where), gain_source=_text(doc, "gain_source", where),
            skip_ops=tuple(_list(doc, "skip_ops", where, _is_text, "strings")),
            tuning_buckets=(None if _get(doc, "tuning_buckets", where) is None
                            else tuple(_list(doc, "tuning_buckets", where, _is_int, "whole numbers"))),
            blocklist=_blocklist(doc, where), metadata=_object(doc, "metadata", where),
            notes=tuple(_list(doc, "notes", where, _is_text, "strings")),
            ops=tuple(_op(entry, i, where) for i, entry in enumerate(_list(doc, "ops", where, _is_object, "objects"))))


_OP_TYPES = {f.name: f.type for f in fields(PlanOp)}  # annotations as text ("str", "int", "float", ...)


def _op(entry: dict, i: int, where: str) -> PlanOp:
    values = {}
    for name, kind in _OP_TYPES.items():
        key = f"ops[{i}].{name}"
        value = _get(entry, name, where, key=key)
        if kind == "str":
            ok, wanted = _is_text(value), "a string"
        elif kind == "int":
            ok, wanted = _is_int(value), "a whole number"
        elif kind == "float":
            ok, wanted = _is_number(value), "a finite number"
        else:  # tuned_buckets
            ok, wanted = isinstance(value, list) and all(map(_is_int, value)), "a list of whole numbers"
            value = tuple(value) if ok else value
        if not ok:
            raise _wrong(key, wanted, value, where)
        values[name] = float(value) if kind == "float" else value
    return PlanOp(**values)


def _blocklist(doc: dict, where: str, name: str = "blocklist") -> dict[str, list]:
    blocklist = _object(doc, name, where)
    for key, tactics in blocklist.items():
        if not isinstance(tactics, list):
            raise _wrong(f"{name}[{ascii(key)[:80]}]", "a list of tactics", tactics, where)
    return blocklist


def _get(doc: dict, name: str, where: str, *, key: str | None = None):
    if name not in doc:
        raise ParseError(f"not a whole profkit plan: field {key or name} is missing", path=where)
    return doc[name]


def _text(doc: dict, name: str, where: str) -> str:
    value = _get(doc, name, where)
    if not _is_text(value):
        raise _wrong(name, "a string", value, where)
    return value


def _object(doc: dict, name: str, where: str) -> dict:
    value = _get(doc, name, where)
    if not _is_object(value):
        raise _wrong(name, "an object", value, where)
    return value


def _list(doc: dict, name: str, where: str, ok, items: str) -> list:
    value = _get(doc, name, where)
    if not isinstance(value, list) or not all(map(ok, value)):
        raise _wrong(name, f"a list of {items}", value, where)
    return value


def _is_text(value) -> bool:
    return isinstance(value, str)


def _is_object(value) -> bool:
    return isinstance(value, dict)


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _kind(value) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}.get(
        type(value), "number")


def _wrong(key: str, wanted: str, value, where: str) -> ParseError:
    return ParseError(f"field {key}: expected {wanted}, got a JSON {_kind(value)}", path=where)


# -- plan.md: folders written before profkit advise wrote plan.json ----------------------------------
# The shipped data/h200-advise/*/plan folders hold no plan.json, and shipped data is not rewritten.
# Their switches are read back from plan.md's "Switches" lines as plan_markdown wrote them
# (``- `skip_ops`: a, b`` or ``none``; ``- `tuning_buckets`: [M, ...]`` or ``FlashInfer default``)
# and the blocklist from blocklist.json. Nothing else is read: such a plan has no per-op numbers.
_SWITCH = re.compile(r"^- `(skip_ops|tuning_buckets)`: (.*)$", re.MULTILINE)
_TITLE = re.compile(r"^# Tuning plan \((.*)\)$", re.MULTILINE)


def _read_plan_md(folder: Path) -> PlanFile:
    md = Input(name=str(folder / "plan.md"), path=os.fspath(folder / "plan.md"))
    with boundary(md.where):
        text = md.read_text(limit=PLAN_LIMIT)
    if md.damage:
        raise ParseError(md.damage, path=md.where)
    switches = dict(_SWITCH.findall(text))
    if set(switches) != {"skip_ops", "tuning_buckets"}:
        raise ParseError("no `skip_ops` and `tuning_buckets` switch lines (not written by profkit advise)",
                         path=md.where)
    skip, buckets = switches["skip_ops"], switches["tuning_buckets"]
    try:
        tuning = None if buckets == "FlashInfer default" else json.loads(buckets)
    except (ValueError, RecursionError):  # not JSON, a 5000-digit number, or nested 100k deep: named below
        tuning = buckets
    if tuning is not None and not (isinstance(tuning, list) and all(map(_is_int, tuning))):
        raise ParseError(f"`tuning_buckets`: expected a list of whole numbers or FlashInfer default, got "
                         f"{ascii(buckets)[:80]}", path=md.where)
    blocklist_file = Input(name=str(folder / "blocklist.json"), path=os.fspath(folder / "blocklist.json"))
    doc, _ = load_json(blocklist_file, limit=PLAN_LIMIT)
    if blocklist_file.damage:
        raise ParseError(blocklist_file.damage, path=blocklist_file.where)
    if not _is_object(doc):
        raise ParseError(f"a JSON {_kind(doc)}, expected FlashInfer's blocklist object", path=blocklist_file.where)
    meta = doc.get("_metadata", {})
    title = _TITLE.search(text)
    return PlanFile(
        budget=title.group(1) if title else "", gain_source="",
        skip_ops=() if skip == "none" else tuple(op.strip() for op in skip.split(",")),
        tuning_buckets=None if tuning is None else tuple(tuning),
        blocklist=_blocklist(doc, blocklist_file.where, "invalid_tactics"),
        metadata={k: v for k, v in meta.items() if k not in ("generated_at", "generator")} if _is_object(meta) else {},
        notes=("switches read from plan.md and blocklist.json (the folder holds no plan.json): no per-op numbers",))
