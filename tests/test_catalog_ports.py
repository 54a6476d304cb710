"""What profkit's own cross-GPU runs left: a port priced against the target's tuning, and the cache files FlashInfer
ignored on purpose in a verify or port of another GPU's capture (never a loud "your cache did nothing")."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from profkit import catalog
from profkit.analysis.caches import idle_caches
from profkit.analysis.portability import port_price
from profkit.report import _main

ROOT = Path(__file__).resolve().parents[1]
VERIFY = ROOT / "data/h100-moe/gpt-oss-120b-verify-cross"  # an H200 capture verified on an H100
PORT = ROOT / "data/h100/port/llama3-8b-bf16"  # the H200's dense tuning ported to an H100, and its step proof
OWN_STEP = ROOT / "data/h100/step/llama3-8b-bf16/step.jsonl"  # the H100's own tuning pass


def _table_rows(price: pd.DataFrame) -> dict[str, list[str]]:
    """The report's port table (:func:`_main.port_price_table` of ``price`` indexed by folder): cells by folder."""
    lines = [line for line in _main.port_price_table(price.reset_index()) if line.startswith("| ")][1:]  # no header
    cells = [[c.strip() for c in line.strip("|").split(" | ")] for line in lines]
    return {row[-1].strip("`"): row for row in cells}


def _log_head(lines: int = 3) -> bytes:
    """The verify process's first debug-log lines: FlashInfer ignoring the H200's cache file on the H100."""
    head = (VERIFY / "debug.log").read_bytes().splitlines(keepends=True)[:lines]
    assert any(b"created in a different environment" in line for line in head)
    return b"".join(head)


def _verify_folder(folder: Path, *, timed_on: str | None = None) -> None:
    """A verify process's folder: its debug log and its table (re-labelled as timed on ``timed_on``)."""
    (folder / "r0").mkdir(parents=True)
    (folder / "debug.log").write_bytes(_log_head())
    table = pd.read_parquet(VERIFY / "gpt-oss-120b-r0/verify.parquet")
    if timed_on:
        table = table.assign(verify_gpu=timed_on)
    table.to_parquet(folder / "r0/verify.parquet")


def test_a_verify_of_another_gpus_capture_explains_the_cache_flashinfer_ignored(tmp_path):
    _verify_folder(tmp_path / "verify-cross")
    (tmp_path / "serving").mkdir()
    (tmp_path / "serving/rank0.log").write_bytes(_log_head())  # the same warning from a process of no profkit result
    _verify_folder(tmp_path / "verify-elsewhere", timed_on="NVIDIA H200")  # its table was timed on another GPU

    data = catalog.open(tmp_path)
    events = data.cache_events[(data.cache_events["kind"] == "cache_env_mismatch").to_numpy(dtype=bool)]
    during = {next(k for k in ("verify-cross", "rank0", "verify-elsewhere") if k in f): d
              for f, d in zip(events["file"], events["during"])}
    assert during["verify-cross"] == "profkit verify"
    assert pd.isna(during["rank0"]) and pd.isna(during["verify-elsewhere"])

    idle = idle_caches(data.cache_events)
    assert sorted(idle["why"]) == ["ignored", "ignored by profkit verify"]
    assert idle.loc[idle["why"] == "ignored", "times"].item() == 2  # the serving log and the unexplained verify log

    results = SimpleNamespace(idle_caches=idle)
    loud = _main.cache_lines(results)
    assert len(loud) == 1 and loud[0].startswith("WARNING your cache did nothing: FlashInfer ignored 1 cache file")
    quiet = _main.expected_ignores(results)
    assert "ignored 1 cache file made on another GPU in profkit verify processes, as it should" in quiet
    assert "verify-cross" in quiet


def test_a_port_alone_is_priced_against_the_target_gpus_own_tuning_pass(tmp_path):
    port = tmp_path / "port/llama3-8b-bf16"
    shutil.copytree(PORT / "ported", port / "ported", ignore=shutil.ignore_patterns("timings"))
    shutil.copytree(PORT / "step", port / "step")
    (tmp_path / "own/llama3-8b-bf16").mkdir(parents=True)
    shutil.copy(OWN_STEP, tmp_path / "own/llama3-8b-bf16/step.jsonl")
    again = tmp_path / "again/x/ported"  # the same source tuning ported again, with no step set beside it
    shutil.copytree(PORT / "ported", again, ignore=shutil.ignore_patterns("timings"))
    doc = json.loads((PORT / "ported/port.json").read_text())
    (again / "port.json").write_text(json.dumps({**doc, "port_s": doc["port_s"] / 2}))
    lone = tmp_path / "lone/x/ported"  # another source tuning's port with no step set: no model to price it against
    lone.mkdir(parents=True)
    (lone / "port.json").write_text(json.dumps({**doc, "source_tuning_s": doc["source_tuning_s"] + 1}))

    price = port_price(catalog.open(tmp_path).port_prices).set_index("folder")
    row = price.loc["port/llama3-8b-bf16/ported"]
    assert (row["model"], row["dtype"], row["fresh_tune_from"]) == ("llama3-8b", "bf16", "own/llama3-8b-bf16")
    assert row["source_gpu"] == "NVIDIA H200" and row["target_gpu"] == "NVIDIA H100 80GB HBM3"
    tuned = pd.read_json(OWN_STEP, lines=True)
    assert row["fresh_tune_s"] == pytest.approx(tuned.loc[tuned["state"] == "tuned", "tuning_s"].dropna().iloc[0])
    assert row["port_over_fresh_tune"] == pytest.approx(row["port_s"] / row["fresh_tune_s"])
    assert pd.isna(row["port_warm_s"]) and pd.isna(price.loc["lone/x/ported", "fresh_tune_s"])
    assert price.loc["again/x/ported", "model"] == "llama3-8b"
    assert price.loc["again/x/ported", "port_over_fresh_tune"] == pytest.approx(row["port_over_fresh_tune"] / 2)

    rows = _table_rows(price)
    assert rows["port/llama3-8b-bf16/ported"][:6] == ["llama3-8b bf16", "H200 -> H100", "3", "15.4 s", "203.2 s",
                                                      "0.08x"]
    assert rows["again/x/ported"][3] == "7.7 s" and rows["again/x/ported"][5] == "0.04x"
    assert rows["lone/x/ported"][4:6] == ["none in this data", ""] and rows["lone/x/ported"][0] == "?"  # no model


def test_a_hostile_cache_path_reaches_the_report_pages_as_data(tmp_path):
    """The ignored file's path comes from someone's log: its ESC sequence is shown, never written raw to a page."""
    from profkit import report

    hostile = 'x"`$(touch pwned)`<b>t</b>$x^{$\x1b[31m\u202e.json'
    _verify_folder(tmp_path / "data" / "verify-cross")
    log = tmp_path / "data" / "verify-cross" / "debug.log"
    log.write_bytes(log.read_bytes().replace(b".moe-in/gpt-oss-120b-r0/cache.json", hostile.encode()))
    report.build_report(catalog.open(tmp_path / "data"), tmp_path / "out", progress=False)
    for page in ("index.md", "index.html"):
        text = (tmp_path / "out" / page).read_text()
        assert "\x1b" not in text and "\u202e" not in text and "<b>t</b>" not in text
        assert "\\x1b[31m\\u202e.json" in text  # the name, shown as its escapes
    assert not (tmp_path / "out" / "pwned").exists() and not (ROOT / "pwned").exists()


def test_a_ports_one_time_jit_builds_are_named_from_the_debug_log_in_its_folder(tmp_path):
    """A port on a fresh machine built FlashInfer's JIT modules inside its time; its log beside port.json says so."""
    first = ROOT / "data/h100/port-top10-again/llama3-8b-fp8"
    for name in ("ported-first", "ported-again"):
        shutil.copytree(first / name, tmp_path / "port" / name, ignore=shutil.ignore_patterns("timings"))
    (tmp_path / "port/ported-again/debug.log.gz").unlink()  # a port without its log: nothing to say
    price = port_price(catalog.open(tmp_path).port_prices).set_index("folder")
    assert price.loc["port/ported-first", "jit_builds"] == "gemm"
    assert pd.isna(price.loc["port/ported-again", "jit_builds"])
    assert _table_rows(price)["port/ported-first"][3].endswith(", with FlashInfer's one-time JIT builds (`gemm`)")


def test_jit_builds_are_found_where_logs_are_only_scanned_beside_captures(shipped_whole):
    """In the shipped data the logs beside captures are scanned for a few lines, not parsed: the builds are kept."""
    price = port_price(shipped_whole.port_prices).set_index("folder")
    assert price.loc["h100/port-top10/llama3-8b-bf16/ported", "jit_builds"] == "mm_bf16_cublaslt, tinygemm2"
    assert pd.isna(price.loc["h100/port-top10-again/llama3-8b-fp8/ported-again", "jit_builds"])


def test_a_port_json_that_records_its_jit_builds_is_believed_over_its_log(tmp_path):
    """profkit port records the modules it compiled and their seconds; the log is read only for older port.json."""
    first = ROOT / "data/h100/port-top10-again/llama3-8b-fp8/ported-first"
    doc = json.loads((first / "port.json").read_text())
    for name, jit in (("timed", {"jit_modules": ["gemm"], "jit_build_s": 41.25}),
                      ("none", {"jit_modules": [], "jit_build_s": 0.0})):
        shutil.copytree(first, tmp_path / name, ignore=shutil.ignore_patterns("timings"))
        (tmp_path / name / "port.json").write_text(json.dumps({**doc, **jit}))
    price = port_price(catalog.open(tmp_path).port_prices).set_index("folder")
    assert (price.loc["timed", "jit_builds"], price.loc["timed", "jit_build_s"]) == ("gemm", 41.25)
    assert pd.isna(price.loc["none", "jit_builds"]) and price.loc["none", "jit_build_s"] == 0.0  # its log says gemm
    assert _table_rows(price)["timed"][3].endswith("one-time JIT builds (`gemm`: 41.2 s)")


PORT_JIT = ROOT / "data/h100/port-jit/llama3-8b-fp8/ported"  # the H200's fp8 tuning ported on a fresh H100
OWN_FP8_STEP = ROOT / "data/h100/step/llama3-8b-fp8/step.jsonl"


def _ports_and_tunings(root: Path, fresh_tune: str = "b-fresh") -> tuple[dict, list[dict]]:
    """Under ``root``: the fresh machine's port (``gemm`` built inside it) and a port of modules already built, in a
    step set; the H100's own tuning pass after its untuned pass (``a-own``) and the same rows as a tuning first in a
    fresh process (``fresh_tune``: 40 s longer, 36 s of it JIT builds). Returns the port's document and the own rows."""
    shutil.copytree(PORT_JIT, root / "port/llama3-8b-fp8/ported", ignore=shutil.ignore_patterns("timings"))
    shutil.copytree(ROOT / "data/h100/port-top10/llama3-8b-fp8/step", root / "port/llama3-8b-fp8/step")
    warm = root / "port/llama3-8b-fp8/ported-again"
    warm.mkdir()
    doc = json.loads((PORT_JIT / "port.json").read_text())
    (warm / "port.json").write_text(json.dumps({**doc, "port_s": 30.0, "jit_modules": [], "jit_build_s": 0.0}))
    (root / "a-own").mkdir()
    shutil.copy(OWN_FP8_STEP, root / "a-own/step.jsonl")  # after its untuned pass: no builds, first by folder
    rows = [json.loads(line) for line in OWN_FP8_STEP.read_text().splitlines()]
    fresh = [{**r, "tuning_s": r["tuning_s"] + 40.0, "tuning_jit_build_s": 36.0} for r in rows if r["state"] == "tuned"]
    (root / fresh_tune).mkdir()
    (root / fresh_tune / "step.jsonl").write_text("".join(json.dumps(r) + "\n" for r in fresh))
    return doc, rows


def test_a_port_that_built_jit_modules_is_priced_against_a_tuning_that_built_them_too(tmp_path):
    """Like for like: the fresh machine's port (FlashInfer's ``gemm`` module built inside it) against a tuning pass
    first in its process, which built it too; the port of modules already built against the pass after an untuned
    one. Without the builds, both sides lose their own."""
    doc, rows = _ports_and_tunings(tmp_path)
    price = port_price(catalog.open(tmp_path).port_prices).set_index("folder")
    cold, again = price.loc["port/llama3-8b-fp8/ported"], price.loc["port/llama3-8b-fp8/ported-again"]
    tuning_s = next(r["tuning_s"] for r in rows if r["state"] == "tuned" and r["tuning_s"])
    assert (cold["fresh_tune_from"], cold["fresh_tune_s"]) == ("b-fresh", pytest.approx(tuning_s + 40.0))
    assert cold["fresh_tune_jit_build_s"] == 36.0
    assert cold["port_over_fresh_tune"] == pytest.approx(doc["port_s"] / (tuning_s + 40.0))
    assert cold["port_over_fresh_tune_without_jit"] == pytest.approx((doc["port_s"] - doc["jit_build_s"]) / (tuning_s + 4.0))
    assert (again["fresh_tune_from"], again["fresh_tune_s"]) == ("a-own", pytest.approx(tuning_s))
    assert again["port_over_fresh_tune_without_jit"] == pytest.approx(30.0 / tuning_s)
    cells = _table_rows(price)
    assert cells["port/llama3-8b-fp8/ported"][4] == f"{tuning_s + 40.0:.1f} s, with its JIT builds (36.0 s)"
    assert cells["port/llama3-8b-fp8/ported"][6].startswith(
        f"{doc['port_s'] - doc['jit_build_s']:.1f} s / {tuning_s + 4.0:.1f} s, without the JIT builds")
    assert cells["port/llama3-8b-fp8/ported-again"][4] == f"{tuning_s:.1f} s"


def test_the_targets_script_shows_a_hostile_tuning_folder_as_its_escapes(tmp_path, capsys):
    """scripts/across_gpus_targets.py names the tuning a port is priced against: a folder name is data on a terminal."""
    import runpy

    _ports_and_tunings(tmp_path, fresh_tune="b-fresh\x1b]0;pwned\x07\nMET")
    script = runpy.run_path(str(ROOT / "scripts/across_gpus_targets.py"))
    script["main"](str(tmp_path))
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out and "\nMET" not in out
    assert "b-fresh\\x1b]0;pwned\\x07\\nMET)" in out  # the name, shown as its escapes
