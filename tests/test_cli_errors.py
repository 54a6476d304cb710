"""The ``profkit`` command's one error boundary: every failure is one line naming the file and what to do.

Exit 2 for usage errors, 1 for other failures, no traceback unless --debug; paths are checked
before anything needs a GPU; parsing and --help import nothing heavy.
"""

from __future__ import annotations

import json
import subprocess
import sys
import warnings

import pytest

from profkit import cli
from profkit.cli import parse as parse_command
from profkit.cli import main
from profkit.errors import ParseError


def fails(capsys, argv: list[str], code: int = 1) -> str:
    """Run the command, check its exit code and that stderr is one line for it; return that line."""
    assert main(argv) == code
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"profkit {argv[0]}: ") and "Traceback" not in err
    return lines[0]


@pytest.fixture
def a_file(tmp_path):
    path = tmp_path / "server.log"
    path.write_text("INFO: a line\n")
    return path


# -- argument and path checks, before any reading (and before the GPU) -------------------------------------
def test_report_on_a_file_that_is_no_log_says_what_it_expected(capsys, a_file, tmp_path):
    line = fails(capsys, ["report", str(a_file), "--out", str(tmp_path / "r")])
    assert line.startswith(f"profkit report: {a_file}") and "no such" not in line


def test_report_on_a_missing_path_says_what_the_report_reads(capsys, tmp_path):
    line = fails(capsys, ["report", str(tmp_path / "nothing"), "--out", str(tmp_path / "r")])
    assert f"{tmp_path / 'nothing'}: no such file or directory; profkit report reads a directory" in line


def test_report_out_an_existing_file(capsys, a_file, tmp_path):
    line = fails(capsys, ["report", str(tmp_path), "--out", str(a_file)])
    assert line == f"profkit report: --out {a_file}: is a file; give a directory for the report (it is created if missing)"


def test_report_missing_bench_file(capsys, tmp_path):
    line = fails(capsys, ["report", str(tmp_path), "--bench", str(tmp_path / "on.txt"), "--out", str(tmp_path / "r")])
    assert f"--bench {tmp_path / 'on.txt'}: no such file" in line


@pytest.mark.parametrize("argv, missing", [([], "no --out and no command"), (["--", "true"], "no --out"),
                                            (["python", "x.py"], "no --out"), (["--out", "runs/x"], "no command")])
def test_capture_without_out_or_command_is_a_usage_error_naming_the_command(capsys, argv, missing):
    line = fails(capsys, ["capture", *argv], code=2)
    assert line.startswith(f"profkit capture: {missing}: give --out DIR and the command after --")
    assert "[" not in line  # not the argv as a Python list


def test_capture_out_an_existing_file(capsys, a_file):
    line = fails(capsys, ["capture", "--out", str(a_file), "--", "true"])
    assert f"--out {a_file}: is a file" in line


def test_verify_names_a_missing_path_before_the_gpu(capsys, tmp_path):
    line = fails(capsys, ["verify", str(tmp_path / "missing")])
    assert f"{tmp_path / 'missing'}: no such directory; give a capture directory" in line
    assert "GPU" not in line


def test_verify_missing_cache_and_out_a_file(capsys, tmp_path, a_file):
    assert "--cache" in fails(capsys, ["verify", str(tmp_path), "--cache", str(tmp_path / "c.json")])
    assert f"--out {a_file}: is a file" in fails(capsys, ["verify", str(tmp_path), "--out", str(a_file)])


def test_step_checks_its_files_and_dtype_before_the_gpu(capsys, tmp_path, a_file):
    base = ["step", "--model", "llama3-8b", "--dtype", "bf16", "--out", str(tmp_path / "s")]
    line = fails(capsys, [*base, "--cache", f"repaired={tmp_path / 'rep.json'}"])
    assert line == (f"profkit step: --cache {tmp_path / 'rep.json'}: no such file; give a FlashInfer cache file "
                    "([STATE=]PATH)")
    assert f"--out {a_file}: is a file" in fails(capsys, [*base[:-1], str(a_file)])
    line = fails(capsys, ["step", "--model", "qwen3-30b-a3b", "--dtype", "fp8", "--out", str(tmp_path)], code=2)
    assert "bf16 only; pass --dtype bf16" in line


def test_step_sizes_are_checked_by_argparse(capsys, tmp_path):
    with pytest.raises(SystemExit) as exit_:
        main(["step", "--model", "llama3-8b", "--dtype", "bf16", "--out", str(tmp_path), "--decode", "1,x"])
    assert exit_.value.code == 2
    assert "argument --decode: want positive integers separated by commas" in capsys.readouterr().err


def test_repair_names_a_missing_verify_path_an_empty_folder_and_a_missing_like_file(capsys, tmp_path):
    out = ["--out", str(tmp_path / "repaired.json")]
    line = fails(capsys, ["repair", str(tmp_path / "missing"), *out])
    assert f"{tmp_path / 'missing'}: no such file or directory; give profkit verify's output" in line
    assert "run profkit verify CAPTURE --out DIR first" in fails(capsys, ["repair", str(tmp_path), *out])
    line = fails(capsys, ["repair", str(tmp_path), "--like", str(tmp_path / "cache.json"), *out])
    assert line == (f"profkit repair: --like {tmp_path / 'cache.json'}: no such file; give the capture's FlashInfer "
                    "cache file (cache.json)")
    assert not (tmp_path / "repaired.json").exists()


def test_advise_checks_its_files_and_out_before_reading_the_capture(capsys, tmp_path, a_file):
    capture = str(tmp_path / "not-read")  # never read: the named files fail first
    base = ["advise", capture, "--out", str(tmp_path / "plan")]
    assert f"--verify {tmp_path / 'v.parquet'}: no such file; give a parquet file" in fails(
        capsys, [*base, "--verify", str(tmp_path / "v.parquet")])
    assert f"--cache {tmp_path}: is a directory" in fails(capsys, [*base, "--cache", str(tmp_path)])
    assert f"--out {a_file}: is a file; give a directory for the plan" in fails(capsys, [*base[:-1], str(a_file)])
    assert f"{capture}: no profkit capture here" in fails(capsys, base)


def test_parse_missing_files_are_named_without_a_text_hint(capsys, tmp_path):
    line = fails(capsys, ["parse", str(tmp_path / "a.log"), str(tmp_path / "b.log")])
    assert line.startswith(f"profkit parse: {tmp_path / 'a.log'}, {tmp_path / 'b.log'}: no such file or directory")
    assert "line breaks" not in line


def test_parse_empty_json_says_empty(capsys, tmp_path):
    (tmp_path / "autotune.json").write_text("\n")
    line = fails(capsys, ["parse", str(tmp_path / "autotune.json")])
    assert line == f"profkit parse: {tmp_path / 'autotune.json'}: empty; expected a JSON document"


def test_parse_out_an_existing_file(capsys, a_file):
    assert f"--out {a_file}: is a file" in fails(capsys, ["parse", str(a_file), "--out", str(a_file)])


def test_usage_errors_exit_2():
    with pytest.raises(SystemExit) as exit_:
        main(["report", "--no-such-flag"])
    assert exit_.value.code == 2


# -- the boundary itself -------------------------------------------------------------------------------------
def raising(exc: BaseException):
    def run(args):
        raise exc
    return run


@pytest.mark.parametrize("exc, line", [
    (ParseError("expected a cache entry", path="c.json", line=3), "profkit parse: c.json:3: expected a cache entry"),
    (PermissionError(13, "Permission denied", "/x/out"),
     "profkit parse: /x/out: permission denied; check its permissions or choose another path"),
    (FileExistsError(17, "File exists", "runs/a"),
     "profkit parse: runs/a: already exists (as a file where a directory is needed?); choose another path"),
    (OSError(28, "No space left on device", "runs/a/x.parquet"),
     "profkit parse: runs/a/x.parquet: no space left on the device; free some space or write elsewhere (--out)"),
    (KeyError("op"), "profkit parse: unexpected KeyError: 'op' (a profkit bug; rerun with --debug for the traceback "
                     "and report it)"),
])
def test_every_failure_is_one_line(monkeypatch, capsys, a_file, exc, line):
    monkeypatch.setattr(parse_command, "run", raising(exc))
    assert fails(capsys, ["parse", str(a_file)]) == line


def test_a_multi_line_message_becomes_one_line(monkeypatch, capsys, a_file):
    monkeypatch.setattr(parse_command, "run", raising(ParseError("first\n  second", path="x.log")))
    assert fails(capsys, ["parse", str(a_file)]) == "profkit parse: x.log: first second"


def test_debug_shows_the_traceback(monkeypatch, a_file):
    monkeypatch.setattr(parse_command, "run", raising(KeyError("op")))
    for argv in (["--debug", "parse", str(a_file)], ["parse", str(a_file), "--debug"]):
        with pytest.raises(KeyError):
            main(argv)


def test_interrupt_is_one_line(monkeypatch, capsys, a_file):
    monkeypatch.setattr(parse_command, "run", raising(KeyboardInterrupt()))
    assert main(["parse", str(a_file)]) == 130
    assert capsys.readouterr().err == "profkit parse: interrupted\n"


@pytest.mark.filterwarnings("default::UserWarning")  # shown as Python shows it, for the CLI to print as a line
def test_warnings_are_one_line_each(monkeypatch, capsys, a_file):
    def run(args):
        warnings.warn("skipped 1 unreadable file(s):\n  a.parquet: truncated", UserWarning)
        return 0

    monkeypatch.setattr(parse_command, "run", run)
    assert main(["parse", str(a_file)]) == 0
    assert capsys.readouterr().err == "profkit parse: warning: skipped 1 unreadable file(s): a.parquet: truncated\n"


def test_a_real_process_fails_in_one_line_without_a_traceback(tmp_path):
    """The console entry and python -m profkit.cli.<command> (the device scripts') both go through main()."""
    for argv in (["-m", "profkit", "verify", str(tmp_path / "gone")],
                 ["-m", "profkit.cli.verify", str(tmp_path / "gone")]):
        done = subprocess.run([sys.executable, *argv], capture_output=True, text=True, timeout=120)
        assert done.returncode == 1 and done.stdout == ""
        assert done.stderr.splitlines() == [f"profkit verify: {tmp_path / 'gone'}: no such directory; give a capture "
                                            "directory (profkit.capture(...).save, profkit capture --out) or a folder "
                                            "holding them"]


# -- parsing answers at once -----------------------------------------------------------------------------
HEAVY = ("pandas", "numpy", "pyarrow", "torch", "flashinfer", "matplotlib", "tqdm")


def test_help_and_argument_checks_import_nothing_heavy(tmp_path):
    """The whole parser, every --help and the path checks run before pandas, torch or FlashInfer are imported
    (benchmarks/bench_cli_startup.py times it)."""
    code = f"""
import contextlib, io, json, sys
from profkit.cli import SUBCOMMANDS, main
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    for argv in (["--help"], *([name, "--help"] for name in SUBCOMMANDS)):
        try:
            main(argv)
        except SystemExit:
            pass
    main(["verify", {str(tmp_path / 'gone')!r}])
    main(["parse", {str(tmp_path / 'gone.log')!r}])
    main(["step", "--model", "llama3-8b", "--dtype", "bf16", "--out", "x", "--cache", {str(tmp_path / 'c')!r}])
print(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert json.loads(done.stdout) == []


def test_every_subcommand_keeps_the_module_contract():
    import importlib

    for name in cli.SUBCOMMANDS:
        module = importlib.import_module(f"profkit.cli.{name}")
        assert module.NAME == name and module.HELP and "profkit " in module.EXAMPLES
        assert callable(module.add_arguments) and callable(module.run)


def test_readers_name_a_missing_file_without_a_hint_about_text(tmp_path):
    import profkit

    with pytest.raises(ParseError) as err:
        profkit.read_log(str(tmp_path / "server.log"))
    assert str(err.value) == f"{tmp_path / 'server.log'}: no such file"
