"""plan.json: ``profkit advise`` writes the plan as data and profkit.sources.plan reads it back.

The record written equals the record read, for plans that block tactics, drop buckets or skip ops
(shipped H200 captures) and for hostile names; a damaged file is one ParseError line naming it;
a folder written before plan.json is read from plan.md's switches and blocklist.json.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re

import pandas as pd
import pytest

import profkit
from profkit.analysis import targets
from profkit.analysis.advise import advise, autotune_arguments, plan_violations
from profkit.cli import main
from profkit.errors import ParseError
from profkit.outputs import atomic, engine_plans
from profkit.schema import PLAN_FORMAT
from profkit.sources import plan as plan_source
from profkit.sources.plan import read_plan, read_plan_json

from conftest import DATA

CASES = {  # capture, budget: a plan that drops buckets and blocks tactics, one that skips its op, one unbudgeted
    "fp8-1pct": ("h200/fp8", {"max_slowdown_pct": 1.0}),
    "bf16-step-2pct": ("h200/step/llama3-8b-bf16/capture", {"max_slowdown_pct": 2.0}),
    "fp8-free": ("h200/fp8", {}),
}


def _load(path):
    return profkit.load(DATA / path)


@pytest.fixture(scope="module", params=list(CASES))
def shipped_plan(request):
    path, budget = CASES[request.param]
    tables = _load(path)
    return advise(tables, **budget), tables


@pytest.fixture(scope="module")
def plan_text():
    """A whole plan.json text (the fp8 plan that blocks tactics and drops buckets)."""
    return engine_plans.plan_json(advise(_load("h200/fp8"), max_slowdown_pct=1.0))


def test_plan_json_reads_back_as_the_plan_written(shipped_plan, tmp_path):
    plan, _ = shipped_plan
    engine_plans.write_plan(plan, tmp_path)
    read = read_plan_json(tmp_path / "plan.json")
    assert read == engine_plans.plan_record(plan)
    assert read_plan(tmp_path) == read
    assert (read.skip_ops, read.tuning_buckets, read.blocklist) == (plan.skip_ops, plan.tuning_buckets, plan.blocklist)
    assert (read.budget, read.gain_source, read.metadata, read.notes) == (plan.budget, plan.gain_source, plan.metadata,
                                                                          plan.notes)
    ops = pd.DataFrame([dataclasses.asdict(o) for o in read.ops])
    columns = ["op", "decision", "n_shapes", "n_buckets", "full_s", "planned_s", "jit_s", "prep_kept_s", "pass_ms",
               "cost_ms", "cost_pct", "verdict"]
    pd.testing.assert_frame_equal(ops[columns], plan.ops[columns], check_dtype=False)
    tuned = plan.buckets[plan.buckets["tuned"].to_numpy(dtype=bool)]
    for o in read.ops:
        assert o.tuned_buckets == tuple(sorted(set(tuned.loc[tuned["op"] == o.op, "bucket"].astype(int))))
        assert len(o.tuned_buckets) == plan.ops.set_index("op").loc[o.op, "n_tuned_buckets"]
        if o.op in plan.skip_ops:
            assert o.tuned_buckets == ()
    text = (tmp_path / "plan.json").read_bytes()
    assert text.isascii() and next(iter(json.loads(text))) == "format" and json.loads(text)["format"] == PLAN_FORMAT


def test_the_plan_read_back_checks_a_capture_as_the_plan_itself(shipped_plan, tmp_path):
    plan, tables = shipped_plan
    engine_plans.write_plan(plan, tmp_path)
    written = targets.written_plan(read_plan(tmp_path))
    pd.testing.assert_frame_equal(plan_violations(written, tables), plan_violations(plan, tables))
    assert autotune_arguments(written, "b.json") == autotune_arguments(plan, "b.json")
    assert repr(written) == repr(plan)  # the same op numbers: tuning seconds, ratio and cost


def test_cli_writes_plan_json_with_the_switches_of_plan_md(tmp_path, capsys):
    out = tmp_path / "a"
    assert main(["advise", str(DATA / "h200" / "fp8"), "--max-slowdown", "1", "--out", str(out)]) == 0
    capsys.readouterr()
    from_json = read_plan(out)
    (out / "plan.json").unlink()
    from_md = read_plan(out)  # the fallback for folders written before plan.json
    assert from_md.ops == () and from_md.gain_source == "" and "plan.md" in from_md.notes[0]
    for name in ("budget", "skip_ops", "tuning_buckets", "blocklist", "metadata"):
        assert getattr(from_md, name) == getattr(from_json, name), name


@pytest.mark.parametrize("folder, skip_ops, tuning_buckets, blocked", [
    ("llama3-8b-fp8", (), (1536, 2048, 3584, 4096), {"fp8_gemm::CudnnFp8GemmRunner": 40}),
    ("llama3-8b-bf16", ("bf16_gemm",), None, {}),
])
def test_shipped_plan_folders_without_plan_json_read_from_plan_md(folder, skip_ops, tuning_buckets, blocked):
    plan = read_plan(DATA / "h200-advise" / folder / "plan")
    assert (plan.skip_ops, plan.tuning_buckets) == (skip_ops, tuning_buckets)
    assert {key: len(tactics) for key, tactics in plan.blocklist.items()} == blocked
    assert plan.metadata["gpu"] == "NVIDIA H200" and "generated_at" not in plan.metadata


HOSTILE = ["x\ny", "a\u2028b", 'q"uote\\', "é☃ 日本", "\x00nul", "-flag", "a, b", "", "op::name"]


def test_hostile_names_read_back_exactly(shipped_plan, tmp_path):
    plan, _ = shipped_plan
    ops = list(plan.ops["op"])
    names = dict(zip(ops, HOSTILE[: len(ops)], strict=True))
    renamed = dataclasses.replace(
        plan, ops=plan.ops.assign(op=plan.ops["op"].map(names), verdict=HOSTILE[0]),
        buckets=plan.buckets.assign(op=plan.buckets["op"].map(names)),
        skip_ops=tuple(names[op] for op in plan.skip_ops) + tuple(HOSTILE),
        blocklist={"::".join(HOSTILE[:2]): [HOSTILE, [1, [2, "3"]]], **plan.blocklist},
        metadata={**plan.metadata, "gpu": HOSTILE[1]}, notes=tuple(HOSTILE), budget=HOSTILE[0])
    atomic.write_text(tmp_path / "plan.json", engine_plans.plan_json(renamed))
    assert read_plan_json(tmp_path / "plan.json") == engine_plans.plan_record(renamed)
    assert (tmp_path / "plan.json").read_bytes().isascii()


DROP = object()
# text damage: what the file holds instead of the plan's text
CUT = {
    "empty": (lambda t: "", "empty; expected a JSON document"),
    "cut": (lambda t: t[: len(t) // 2], r"plan.json:\d+: invalid JSON"),
    "not json": (lambda t: "plan: yes", "invalid JSON"),
    "array": (lambda t: "[]", "not a profkit plan: a JSON array"),
    "blocklist file": (lambda t: '{"_metadata": {}, "invalid_tactics": {}}', 'no "format" key'),
    "infinity": (lambda t: re.sub(r'"cost_ms": [^,]*', '"cost_ms": Infinity', t, count=1),
                 r"field ops\[0\].cost_ms: expected a finite number, got a JSON number"),
}
# field damage: (field path, value or DROP) in the plan's document
FIELD = {
    "no format": (("format",), DROP, 'no "format" key'),
    "newer format": (("format",), "profkit-plan/2", "format 'profkit-plan/2'"),
    "missing field": (("skip_ops",), DROP, "field skip_ops is missing"),
    "ops string": (("skip_ops",), "fp8_gemm", "field skip_ops: expected a list of strings, got a JSON string"),
    "fractional bucket": (("tuning_buckets",), [1.5], "field tuning_buckets: expected a list of whole numbers"),
    "boolean bucket": (("tuning_buckets",), [True], "field tuning_buckets: expected a list of whole numbers"),
    "metadata list": (("metadata",), [], "field metadata: expected an object, got a JSON array"),
    "blocked tactics": (("blocklist",), {"a::B": 4}, r"field blocklist\['a::B'\]: expected a list of tactics"),
    "op not object": (("ops",), [1], "field ops: expected a list of objects"),
    "op text number": (("ops", 0, "full_s"), "1.0", r"field ops\[0\].full_s: expected a finite number"),
    "op missing field": (("ops", 0, "decision"), DROP, r"field ops\[0\].decision is missing"),
    "op count": (("ops", 0, "n_shapes"), 6.0, r"field ops\[0\].n_shapes: expected a whole number"),
    "op buckets": (("ops", 0, "tuned_buckets"), ["1"], r"field ops\[0\].tuned_buckets: expected a list"),
}


def _damaged(text: str, damage: str) -> tuple[str, str]:
    """The plan's text with ``damage`` done to it, and the message expected."""
    if damage in CUT:
        cut, message = CUT[damage]
        return cut(text), message
    (*parents, key), value, message = FIELD[damage]
    doc = json.loads(text)
    node = doc
    for part in parents:
        node = node[part]
    if value is DROP:
        del node[key]
    else:
        node[key] = value
    return json.dumps(doc), message


@pytest.mark.parametrize("damage", [*CUT, *FIELD])
def test_damaged_plan_json_is_one_line_naming_the_file(damage, plan_text, tmp_path):
    text, message = _damaged(plan_text, damage)
    path = tmp_path / "plan.json"
    path.write_text(text)
    with pytest.raises(ParseError, match=message) as info:
        read_plan_json(path)
    text = str(info.value)
    assert text.startswith(f"{path}:") and "\n" not in text and len(text) < 300


def test_missing_folder_and_fifo_are_named_without_blocking(tmp_path):
    with pytest.raises(ParseError, match=f"^{tmp_path / 'plan.json'}: no such file"):
        read_plan(tmp_path)  # neither plan.json nor plan.md
    os.mkdir(tmp_path / "plan.json")
    with pytest.raises(ParseError, match=f"^{tmp_path / 'plan.json'}: "):
        read_plan_json(tmp_path / "plan.json")
    os.mkfifo(tmp_path / "fifo.json")
    with pytest.raises(ParseError, match=f"^{tmp_path / 'fifo.json'}: "):
        read_plan_json(tmp_path / "fifo.json")


def test_a_plan_larger_than_the_limit_is_refused_unread(plan_text, tmp_path, monkeypatch):
    path = tmp_path / "plan.json"
    path.write_text(plan_text)
    monkeypatch.setattr(plan_source, "PLAN_LIMIT", 1000)
    with pytest.raises(ParseError, match="larger than 1,000 bytes"):
        read_plan_json(path)


def test_plan_md_without_switches_is_named(tmp_path):
    (tmp_path / "plan.md").write_text("# Tuning plan (x)\n\nno switches here\n")
    with pytest.raises(ParseError, match=f"^{tmp_path / 'plan.md'}: no `skip_ops` and `tuning_buckets`"):
        read_plan(tmp_path)
    (tmp_path / "plan.md").write_text("- `skip_ops`: none\n- `tuning_buckets`: [1, oops]\n")
    with pytest.raises(ParseError, match="`tuning_buckets`: expected a list of whole numbers"):
        read_plan(tmp_path)
    (tmp_path / "plan.md").write_text("- `skip_ops`: none\n- `tuning_buckets`: FlashInfer default\n")
    with pytest.raises(ParseError, match=f"^{tmp_path / 'blocklist.json'}: no such file"):
        read_plan(tmp_path)
    (tmp_path / "blocklist.json").write_text('{"invalid_tactics": {"a::B": [1]}}')
    assert read_plan(tmp_path).blocklist == {"a::B": [1]}
