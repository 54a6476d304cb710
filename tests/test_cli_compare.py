"""profkit compare: the comparison rule from the shell, on shipped step, verify and capture data."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import DATA, ROOT
from profkit.cli import main

VERDICTS = {"faster", "slower", "within_noise", "not_measurable"}


def test_interleaved_steps_print_each_size_and_write_json(tmp_path, capsys):
    out = tmp_path / "rows.json"
    assert main(["compare", str(DATA / "h200-verify" / "step-interleaved" / "repaired" / "llama3-8b-fp8"),
                 "--json", str(out)]) == 0
    text = capsys.readouterr().out
    lines = text.splitlines()
    assert lines[0].endswith("step-interleaved/repaired/llama3-8b-fp8  llama3-8b  fp8")
    decode_24 = next(line for line in lines if line.split()[:3] == ["decode", "24", "repaired"])
    assert "slower" in decode_24 and "+1.48% [+0.02%, +2.97%]  3 vs 3 passes  detectable 1.46%" in decode_24
    assert lines[-1] == "1 faster, 1 slower, 14 within_noise, 0 not_measurable of 16"
    rows = json.loads(out.read_text())
    assert len(rows) == 16 and {r["verdict"] for r in rows} <= VERDICTS
    assert all(r["kind"] == "step" and r["baseline"] == "untuned" for r in rows)
    assert {"effect", "effect_lo", "effect_hi", "n", "n_baseline", "detectable"} <= set(rows[0])


def test_one_pass_of_each_state_is_not_measurable(capsys):
    assert main(["compare", str(DATA / "h200" / "step" / "llama3-8b-fp8"), "--kind", "step"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1] == "0 faster, 0 slower, 0 within_noise, 32 not_measurable of 32"
    assert "not measurable" in lines[1] and lines[1].endswith("1 vs 1 passes")


def test_an_aa_pair_against_its_twin(capsys):
    assert main(["compare", str(DATA / "h200-moe" / "qwen3-30b-a3b-step-aa" / "step.jsonl"),
                 "--baseline", "untuned-2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    untuned = [line for line in lines if line.split()[2:3] == ["untuned"]]
    assert len(untuned) == 16 and all("within noise" in line for line in untuned)


def test_verify_picks_against_the_default_and_across_runs(tmp_path, capsys):
    table = DATA / "h200-verify" / "sweep" / "fp8_gemm-llama3-8b-o"
    assert main(["compare", str(table), "--json", str(tmp_path / "v.json")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "fp8_gemm-llama3-8b-o-r0  fp8_gemm  N=4096 K=4096"
    assert lines[1].startswith("  M=1     bucket 1      CudnnFp8GemmRunner:[0, []]")
    assert "1 vs 1 processes  detectable 7.10%" in lines[1]
    rows = json.loads((tmp_path / "v.json").read_text())
    assert {r["verdict"] for r in rows} <= VERDICTS and all(r["kind"] == "verify" for r in rows)
    # Another run's pick, verified in another process: not measurable without repeated processes.
    policy = DATA / "h200-verify" / "policy" / "fp8" / "o-autotune-first"
    assert main(["compare", str(policy), "--baseline", "fp8_gemm-autotune-llama3-8b-o"]) == 0
    last = capsys.readouterr().out.splitlines()[-1]
    assert last.startswith("0 faster, 0 slower, 0 within_noise, ") and "not_measurable" in last


def test_captures_against_the_default_and_a_baseline_run(capsys):
    runs = [str(DATA / "h200" / f"fp8-repeat-r{i}") for i in (1, 2, 3)]
    assert main(["compare", runs[0]]) == 0  # one run: the tuner's threshold band is no measured spread
    assert capsys.readouterr().out.splitlines()[-1] == "0 faster, 0 slower, 0 within_noise, 40 not_measurable of 40"
    assert main(["compare", *runs]) == 0  # three runs measure the spread
    assert capsys.readouterr().out.splitlines()[-1] == "72 faster, 3 slower, 45 within_noise, 0 not_measurable of 120"
    assert main(["compare", *runs, "--baseline", "fp8_gemm-llama3-8b-o-r1"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1].startswith("  bucket 1      fp8_gemm-llama3-8b-o-r2  slower")


def test_errors_name_what_to_pass(tmp_path, capsys):
    assert main(["compare", str(DATA / "h200-verify" / "step-interleaved"), "--baseline", "nope"]) == 1
    assert "no step rows of state 'nope'; states: cache, repaired, untuned" in capsys.readouterr().err
    assert main(["compare", str(DATA / "h200" / "step" / "llama3-8b-fp8")]) == 1
    assert "holds capture and step results; pass --kind capture/step" in capsys.readouterr().err
    assert main(["compare", str(tmp_path / "missing")]) == 1
    assert "no such file or directory" in capsys.readouterr().err
    assert main(["compare", str(tmp_path)]) == 1
    assert "found no step.jsonl, verify.parquet or capture" in capsys.readouterr().err


def test_parsing_the_arguments_imports_no_pandas():
    code = ("import sys\nfrom profkit.cli import build_parser\n"
            "build_parser().parse_args(['compare', 'x', '--baseline', 'untuned'])\n"
            "print('pandas' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert done.stdout.strip() == "False"


def test_json_rows_are_laid_out_as_one_json_dumps_of_every_record(tmp_path):
    import pandas as pd

    from profkit.cli.compare import _write_json

    rows = pd.DataFrame({"op": pd.array(["gemm", None, "gemm \u00e9\n\"", "x"], dtype="string"),
                         "m": pd.array([1, None, 3, 4], dtype="Int64"), "effect": [0.1, float("nan"), -2.5e-7, 1 / 3],
                         "nested": [[1, {"a": None}], {}, "t", None]})
    want = json.dumps(json.loads(rows.assign(kind="verify").to_json(orient="records")), indent=1) + "\n"
    for size in (1, 3, 100):  # slices of one row, a part of the rows, every row
        _write_json(rows, "verify", tmp_path / f"{size}.json", [], size=size)
        assert (tmp_path / f"{size}.json").read_text() == want
    _write_json(rows.iloc[:0], "verify", tmp_path / "none.json", [])
    assert (tmp_path / "none.json").read_text() == "[]\n"


def test_lines_head_each_group_once_in_sorted_order_missing_last(capsys):
    import pandas as pd

    from profkit.cli.compare import _lines

    rows = pd.DataFrame({
        "op": pd.array(["b", "a", None, "a", "b"], dtype="string"), "shape": pd.array(["s"] * 5, dtype="string"),
        "m": [1, 2, 3, 4, 5], "run_id": pd.array(["r1", "r2", "r3", "r4", "r5"], dtype="string"),
        "verdict": ["faster", "slower", "within_noise", "faster", "not_measurable"], "effect": [-0.1] * 5,
        "effect_lo": [-0.2] * 5, "effect_hi": [-0.05] * 5, "detectable": [0.01] * 5, "baseline": "r0"})
    lines = list(_lines("verify", rows))
    heads = [line for line in lines if not line.startswith("  ")]
    assert heads[:3] == ["a  s", "b  s", "<NA>  s"] and lines[-1].startswith("2 faster, 1 slower, 1 within_noise")
    assert [line.split()[1] for line in lines if line.startswith("  ")] == ["r2", "r4", "r1", "r5", "r3"]
