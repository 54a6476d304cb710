"""The catalogue: one walk, one sniffer, each file read once, runs keyed by GPU; and the report judging each GPU apart."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys

import pandas as pd
import pytest

import profkit
from profkit import catalog, testing
from profkit.catalog import keys, partition, sniff
from profkit.catalog.walk import walk
from profkit.report import build_model

from conftest import DATA, ROOT, TEST_DATA


def _capture_on(gpu: str, folder, monkeypatch) -> None:
    """A CPU tuning of toy_gemm whose environment names ``gpu`` (the one fact a CPU cannot give), saved to ``folder``."""
    from profkit.sources import env

    facts = env._torch_facts
    monkeypatch.setattr(env, "_torch_facts", lambda: {**facts(), "gpu": gpu, "sm": "90"})
    with testing.cpu_autotuner(), profkit.capture() as cap:
        testing.tune("toy_gemm", [testing.ToyCublasRunner(), testing.ToyCudnnRunner()], m=64)
    cap.save(folder)
    monkeypatch.setattr(env, "_torch_facts", facts)


def test_an_h100_run_beside_an_h200_run_is_two_gpus_not_a_repeat(tmp_path, monkeypatch):
    _capture_on("NVIDIA H200", tmp_path / "data" / "h200" / "capture", monkeypatch)
    _capture_on("NVIDIA H100 80GB HBM3", tmp_path / "data" / "h100" / "capture", monkeypatch)
    cat = catalog.open(tmp_path / "data")
    assert sorted(cat.runs["gpu"]) == ["NVIDIA H100 80GB HBM3", "NVIDIA H200"]
    assert set(cat.runs["sm_count"]) == {132} and set(cat.runs["compute_capability"]) == {"9.0"}
    model = build_model(cat)
    assert sorted(model.gpus) == sorted(cat.runs["gpu"])
    rows = model.verdicts[model.verdicts["op"] == "toy_gemm"]
    assert sorted(rows["gpu"]) == sorted(cat.runs["gpu"])  # one verdict per (op, GPU)
    for gpu in model.gpus:
        part = partition.for_gpu(cat, gpu)
        assert list(part.runs["gpu"]) == [gpu]
        noise = profkit.analysis.noise(part.tables.candidates)
        assert set(noise["noise_source"]) == {"threshold"}  # one run per GPU: no repeats to pool
        assert profkit.analysis.repeat_diff(profkit.analysis.winners(part.tables.candidates),
                                            first=list(part.runs["run_id"]), candidates=part.tables.candidates).empty
    # Without the split the two GPUs' timings would pool into one noise estimate, as repeats.
    assert set(profkit.analysis.noise(cat.tables.candidates)["noise_source"]) == {"repeats"}


def test_a_gpu_analysed_in_a_forked_worker_gives_what_this_process_gives(tmp_path, monkeypatch):
    _capture_on("NVIDIA H200", tmp_path / "h200" / "capture", monkeypatch)
    _capture_on("NVIDIA H100 80GB HBM3", tmp_path / "h100" / "capture", monkeypatch)
    cat = catalog.open(tmp_path)
    from profkit.report import _model

    analyse = _model.analyse
    def marked(part, **kwargs):  # noqa: E306 - leaves the id of the process that analysed a part
        (tmp_path / f"analysed-in-{os.getpid()}").touch()
        return analyse(part, **kwargs)

    monkeypatch.setattr(_model, "analyse", marked)
    models = {}
    for workers in ("1", "2"):  # 2: the second GPU's part is analysed in a forked worker, its results pickled back
        monkeypatch.setenv("PROFKIT_REPORT_WORKERS", workers)
        models[workers] = build_model(cat, gpu=partition.gpus(cat)[1])
    here, forked = models["1"], models["2"]
    assert len(list(tmp_path.glob("analysed-in-*"))) == 2  # here, and a forked worker
    pd.testing.assert_frame_equal(here.verdicts, forked.verdicts)
    frames = [f.name for f in dataclasses.fields(here.results) if isinstance(getattr(here.results, f.name), pd.DataFrame)]
    assert "op_verdicts" in frames and "winners" in frames
    for name in frames:
        pd.testing.assert_frame_equal(getattr(here.results, name), getattr(forked.results, name), obj=name)
    for gpu in here.gpus:  # the rank questions, answered where the part was analysed
        for field in dataclasses.fields(here.ranks[gpu]):
            mine, theirs = getattr(here.ranks[gpu], field.name), getattr(forked.ranks[gpu], field.name)
            if isinstance(mine, pd.DataFrame):
                pd.testing.assert_frame_equal(mine, theirs, obj=field.name)


def test_one_gpu_is_the_whole_catalogue():
    cat = catalog.open(DATA / "h200" / "fp8-repeat-r1")
    assert partition.gpus(cat) == ["NVIDIA H200"]
    assert partition.for_gpu(cat, "NVIDIA H200") is cat


def test_each_input_file_is_opened_once_per_report(tmp_path):
    """A whole report on the MoE folder, in a fresh interpreter: Python's audit hook counts every open of a file
    there (logs, JSON, step rows), and a wrapper of pyarrow's read_table counts the parquet reads it does in C++.
    Every analysis, table and page is made and one figure drawn: all figures would be drawn by forked workers, whose
    opens this process never counts; one is drawn in this process, where its opens count."""
    code = f"""
import collections, os, sys
import pyarrow.parquet as pq
opened = collections.Counter()
root = {str(DATA / 'h200-moe')!r}
def count(path):
    if isinstance(path, (str, bytes, os.PathLike)):
        path = os.path.abspath(os.fsdecode(path))
        if path.startswith(root) and not os.path.isdir(path):
            opened[path] += 1
sys.addaudithook(lambda event, args: count(args[0]) if event == "open" else None)
def counted(read):
    def wrapper(path, *a, **k):
        count(path)
        return read(path, *a, **k)
    return wrapper
pq.read_table = counted(pq.read_table)  # pandas reads parquet through it
from profkit.cli import main
assert main(["report", root, "--out", {str(tmp_path / 'out')!r}, "--no-progress",
             "--only", "moe_step_qwen3-30b-a3b"]) == 0
print("\\n".join(f"{{n}} {{p}}" for p, n in sorted(opened.items())))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=900)
    assert out.returncode == 0, out.stderr[-2000:]
    counts = [line.split(" ", 1) for line in out.stdout.splitlines() if line.split(" ", 1)[0].isdigit()]
    print("\n".join(f"{n} {p}" for n, p in counts))
    assert any(p.endswith("step.jsonl") for _, p in counts) and any(p.endswith(".parquet") for _, p in counts)
    assert [(n, p) for n, p in counts if int(n) > 1] == []


@pytest.mark.parametrize("name, want", [
    ("rank_tp1_pp0_dp2.json", {"rank": 1, "tp_rank": 1, "pp_rank": 0, "dp_rank": 2}),
    ("logs/rank3.log", {"rank": 3}),
    ("vm-pid492-rank0/seg-000001", {"rank": 0}),
    ("ep_4/server.log", {"ep_rank": 4}),
    ("fp8-repeat-r1/capture", {}),
    ("frank10.log", {}),
])
def test_ranks_are_read_from_names(name, want):
    assert keys.parallel_ranks(name) == want


def test_the_sniffer_names_each_shipped_kind_by_name_and_by_content(tmp_path):
    inv = walk(DATA / "h200-moe" / "qwen3-30b-a3b-r0")
    kinds = dict(zip(inv.files["rel"], inv.files["kind"]))
    assert kinds == {"cache.json": "cache", "capture": "capture", "debug.log": "log", "log.txt": "other",
                     "provenance.json": "provenance", "repaired.json": "cache", "verify.parquet": "verify"}
    (tmp_path / "out.txt").write_text("2026-12-02 10:24:30,839 - DEBUG - autotuner.py:1 - flashinfer.jit: "
                                      "[AutoTuner]: Autotuning process starts ...\n")
    (tmp_path / "cfg.json").write_text(json.dumps({"_metadata": {"gpu": "NVIDIA H200"}}))
    (tmp_path / "notes.md").write_text("# notes\n")
    assert [sniff.file_kind(tmp_path / n) for n in ("out.txt", "cfg.json", "notes.md")] == ["log", "cache", "other"]


def test_a_debug_log_takes_the_environment_of_the_process_that_wrote_it(tmp_path):
    shutil.copytree(DATA / "h200" / "fp8-repeat-r1", tmp_path / "run", ignore=shutil.ignore_patterns("fp8_gemm-*"))
    cat = catalog.open(tmp_path / "run")
    assert cat.inputs == ("debug logs",)
    logged = cat.runs[cat.runs["source_kind"] == "log"]
    assert len(logged) and set(logged["gpu"]) == {"NVIDIA H200"} and set(logged["env_from"]) == {"provenance.json"}
    assert set(logged["flashinfer"]) == {"0.7.2.post1"}


def test_several_paths_are_one_catalogue():
    one = catalog.open(DATA / "h200" / "fp8-repeat-r1")
    two = catalog.open([DATA / "h200" / "fp8-repeat-r1", DATA / "h200" / "fp8-repeat-r2"])
    assert len(two.runs) == 2 * len(one.runs)
    assert set(two.runs["run_id"]) > set(one.runs["run_id"])
    with pytest.raises(profkit.ProfkitError, match="no such file"):
        catalog.open([DATA / "h200" / "fp8-repeat-r1", DATA / "nope"])


def test_profkit_open_is_the_catalogue():
    assert profkit.open is catalog.open


def test_the_inventory_lists_what_is_not_an_input():
    inv = walk(DATA / "h200-moe")
    assert (inv.files["kind"] == "other").any()
    assert not inv.files["path"].duplicated().any()
    assert pd.api.types.is_string_dtype(inv.files["kind"])


def test_a_cache_flashinfer_ignored_is_said_first(tmp_path):
    """FlashInfer's "created in a different environment ... Ignoring cached configs" warning, read from a log
    beside captures (scanned for cache lines only) or as the tables' own log, becomes a loud first-screen line."""
    from profkit.report import _main

    cat = catalog.open(TEST_DATA / "cache_metadata_mismatch")
    ignored = cat.cache_events[cat.cache_events["kind"] == "cache_env_mismatch"]
    assert len(ignored) == 2 and set(ignored["detail"]) == {"gpu: saved=NVIDIA H100 80GB HBM3 vs current=unknown"}
    model = build_model(cat)
    lines = _main.cache_lines(model.results)
    assert len(lines) == 1 and "FlashInfer ignored" in lines[0] and "saved=NVIDIA H100 80GB HBM3" in lines[0]
    # The same log beside a capture: scanned for its cache lines, the capture read for the rest.
    shutil.copytree(DATA / "h200" / "fp8-repeat-r1", tmp_path / "run")
    shutil.copy(TEST_DATA / "cache_metadata_mismatch" / "mismatch.stderr.log", tmp_path / "run" / "server.log")
    mixed = catalog.open(tmp_path / "run")
    assert mixed.inputs == ("captures",)
    assert list(mixed.cache_events["kind"]) == ["cache_env_mismatch"]
    assert mixed.cache_events["file"].iloc[0].endswith("server.log") and mixed.cache_events["line"].iloc[0] == 2


def test_a_state_that_ran_only_defaults_says_its_cache_changed_nothing():
    from profkit.analysis.caches import idle_caches

    steps = pd.DataFrame({"state": ["untuned", "cache", "cache", "repaired", "repaired"],
                          "loaded_cache": ["", "a.json", "a.json", "b.json", "b.json"],
                          "picks": ["qkv=R:-1 o=R:-1", "qkv=R:3 o=R:-1", "qkv=R:-1 o=R:-1", "qkv=R:-1 o=R:-1",
                                    "qkv=R:-1 o=R:-1"],
                          "source": ["s"] * 5})
    idle = idle_caches(pd.DataFrame(columns=["file", "line", "kind", "path", "detail"]), steps)
    assert list(zip(idle["cache"], idle["why"], idle["detail"])) == [("b.json", "defaults only", "repaired")]


def test_results_without_their_tuning_still_open():
    cat = catalog.open(DATA / "h200-verify" / "step-interleaved")
    assert cat.inputs == ("step results",) and cat.tables.candidates.empty
    assert len(cat.step) + len(cat.step_other) > 0


def test_another_gpus_picks_timed_here_are_priced_not_judged_as_this_gpus(tmp_path):
    """A verify table of an H200 capture timed on an H100 is left out of both GPUs' own verdicts and priced by
    the portability analysis against the H100's own verify table."""
    shutil.copytree(DATA / "h200-moe" / "qwen3-30b-a3b-r0", tmp_path / "data" / "own")
    cat0 = catalog.open(tmp_path / "data" / "own")
    run = str(cat0.runs["run_id"].iloc[0])
    verify = pd.read_parquet(tmp_path / "data" / "own" / "verify.parquet")
    # The same rows, as if this capture's picks had been timed on another GPU (verify_gpu names where).
    (tmp_path / "data" / "cross").mkdir()
    verify.assign(verify_gpu="NVIDIA H100 80GB HBM3").to_parquet(tmp_path / "data" / "cross" / "verify.parquet")
    cat = catalog.open(tmp_path / "data")
    assert partition.gpus(cat) == ["NVIDIA H200"]
    cross = partition.cross_gpu_verify(cat.verify, cat.runs)
    assert len(cross) == len(verify) and set(cross["timed_gpu"]) == {"NVIDIA H100 80GB HBM3"}
    own = partition.for_gpu(cat, "NVIDIA H200").verify
    assert len(own) == len(verify) and set(own["run_id"]) == {run}
    model = build_model(cat)
    assert model.carried.empty  # no H100 capture of its own to compare with: nothing priced, nothing invented


PUBLIC_LOGS = sorted((TEST_DATA / "public_logs").glob("*.log"))


@pytest.mark.parametrize("log", PUBLIC_LOGS, ids=[p.name for p in PUBLIC_LOGS])
def test_every_public_debug_log_goes_through_the_report(log, tmp_path):
    from profkit.cli import main

    assert main(["report", str(log), "--out", str(tmp_path / "out"), "--no-progress"]) == 0
    doc = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert doc["schema_version"] == 2 and all(e["reason"] for e in doc["ops"])


ENGINE_FIXTURES = sorted(p for p in (ROOT.parent / "shared" / "fixtures" / "engines").glob("*")
                         if p.suffix not in (".src", ".md"))


@pytest.mark.skipif(not ENGINE_FIXTURES, reason="../shared/fixtures/engines is not beside this checkout")
def test_every_shipped_engine_fixture_opens_and_lays_out_a_first_screen():
    """Engine outputs alone: their rows are read, or the file is named as unreadable, and the first screen is laid out."""
    import warnings

    from profkit.report import ReportContext, _main

    for path in ENGINE_FIXTURES:
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            cat = catalog.open(path)
        assert cat.inputs == ("engine results",), path
        assert len(cat.bench) or (cat.problems and any(str(path) in str(w.message) for w in said)), path
        model = build_model(cat)
        context = ReportContext(data=model.data, results=model.results, verdicts=model.verdicts, gpus=model.gpus)
        assert "No op was tuned" in _main.verdict_section(context).text
