"""profkit port: another GPU's shortlist re-timed here becomes this GPU's cache file; --blind copies picks as they are."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from profkit.cli import main

DATA = Path(__file__).resolve().parents[1] / "data"
H200_QWEN = DATA / "h200-moe" / "qwen3-30b-a3b-r0"
ON_H100 = DATA / "h100-moe" / "qwen3-30b-a3b-verify-cross" / "qwen3-30b-a3b-r0" / "verify.parquet"


def test_blind_copy_keeps_every_pick_under_the_target_metadata(tmp_path):
    like = DATA / "h100-moe" / "qwen3-30b-a3b-r0" / "cache.json"
    assert main(["port", str(H200_QWEN / "capture"), "--blind", "--like", str(like), "--out", str(tmp_path)]) == 0
    source, copied = json.loads((H200_QWEN / "cache.json").read_text()), json.loads((tmp_path / "cache.json").read_text())
    assert copied["_metadata"] == json.loads(like.read_text())["_metadata"]
    assert copied["_metadata"]["gpu"] != source["_metadata"]["gpu"]
    assert {k: v for k, v in copied.items() if not k.startswith("_")} == \
        {k: v for k, v in source.items() if not k.startswith("_")}


def test_port_writes_the_fastest_of_the_shortlist_timed_here_with_this_gpus_metadata(tmp_path, monkeypatch):
    import profkit.bench.port as port_module
    import profkit.bench.verify as verify_module

    def timed_here(paths, *, out, only_buckets, routings, **_):  # the H100's timings of the H200 shortlist
        assert only_buckets and routings == "tuner"
        target = Path(out) / "qwen3-30b-a3b-r0" / "verify.parquet"
        target.parent.mkdir(parents=True)
        shutil.copy(ON_H100, target)
        return [target]

    monkeypatch.setattr(verify_module, "run", timed_here)
    metadata = {"gpu": "NVIDIA H100 80GB HBM3", "flashinfer_version": "0.7.2.post1"}
    monkeypatch.setattr(port_module, "running_metadata", lambda: metadata)
    doc = port_module.port(H200_QWEN / "capture", cache=None, out=tmp_path / "port", log=lambda line: None)
    written = json.loads((tmp_path / "port" / "cache.json").read_text())
    assert written["_metadata"] == metadata
    assert doc["buckets"] == len(written) - 1 == 20
    assert doc["source_gpu"] == "NVIDIA H200" and doc["target_gpu"] == metadata["gpu"]
    assert 0 < doc["kept_source_pick"] < 20  # the H100 keeps some of the H200's picks and replaces others
    assert json.loads((tmp_path / "port" / "port.json").read_text())["buckets"] == 20


def test_port_refuses_a_missing_cache_naming_it(tmp_path, capsys):
    capture = tmp_path / "run" / "capture"
    shutil.copytree(H200_QWEN / "capture", capture)
    assert main(["port", str(capture), "--out", str(tmp_path / "out")]) != 0
    assert "cache.json" in capsys.readouterr().err


def test_port_prints_a_hostile_gpu_name_as_its_escapes(tmp_path, monkeypatch, capsys):
    import profkit.bench.graphs as graphs
    import profkit.bench.port as port_module

    hostile = "H200\x1b]0;owned\x07\n$(rm -rf x) <b>"
    doc = {"source_tuning_s": 61.6, "source_gpu": hostile, "target_gpu": "NVIDIA H100", "buckets": 20,
           "port_s": 24.4, "timed": 80, "kept_source_pick": 7}
    monkeypatch.setattr(graphs, "no_cuda", lambda what: False)
    monkeypatch.setattr(port_module, "port", lambda *a, **k: doc)
    assert main(["port", str(H200_QWEN / "capture"), "--out", str(tmp_path / "out")]) == 0
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\x07" not in err and "\\x1b]0;owned\\x07\\n$(rm -rf x) <b>" in err
