"""The catalogue reads every step.jsonl at once, and each as if alone: the same rows, one file's fault its own."""

from __future__ import annotations

import shutil

import pandas as pd

from profkit.catalog import _inventory, _read
from profkit.sources.engines import read_bench
from conftest import DATA


def steps_in(tmp_path, *names):
    for name in names:
        (tmp_path / "set" / name).mkdir(parents=True)
        shutil.copy(DATA / "h200" / "step" / name / "step.jsonl", tmp_path / "set" / name / "step.jsonl")
    return _inventory([tmp_path])


def test_step_files_read_together_are_each_file_read_alone(tmp_path):
    inv = steps_in(tmp_path, "llama3-8b-bf16-cache", "llama3-8b-fp8-cache", "qwen2.5-32b-fp8-cache")
    problems = []
    rows = _read.step_rows(inv, problems)
    assert problems == [] and len(rows) == 3
    for path, frame in rows.items():
        alone = read_bench(path, format="profkit-step")
        pd.testing.assert_frame_equal(frame.drop(columns=["source", "step_set", "loaded_cache"]),
                                      alone.drop(columns="source"))
        assert (frame["source"] == inv.rel(path.parent)).all() and (frame["step_set"] == "set").all()


def test_an_unreadable_step_file_is_named_and_the_others_are_read(tmp_path):
    inv = steps_in(tmp_path, "llama3-8b-bf16-cache", "llama3-8b-fp8-cache")
    broken = tmp_path / "set" / "broken" / "step.jsonl"
    broken.parent.mkdir()
    broken.write_text("not json at all\n")
    inv = _inventory([tmp_path])
    problems = []
    rows = _read.step_rows(inv, problems)
    assert sorted(p.parent.name for p in rows) == ["llama3-8b-bf16-cache", "llama3-8b-fp8-cache"]
    assert len(problems) == 1 and problems[0].startswith(f"{broken}: ")
    together = pd.concat(rows.values(), ignore_index=True)
    assert set(together["model"]) == {"llama3-8b"} and set(together["dtype"]) == {"bf16", "fp8"}


def test_the_few_runs_check_only_skips_reductions_that_would_not_happen(monkeypatch):
    from profkit.catalog import reduced
    from profkit.catalog.captures import folder_rows

    captures = _inventory([DATA]).paths("capture")
    folders = folder_rows(captures)
    # The shipped data: at most 11 runs of one bucket on one GPU, 13 on both GPUs together.
    for most, few, reduces in ((13, True, False), (12, False, False), (10, False, True)):
        monkeypatch.setattr(reduced, "MAX_DETAILED_RUNS", most)
        assert reduced._few_runs(folders) is few
        assert (reduced.reduce_captures(captures, []) is not None) is reduces
