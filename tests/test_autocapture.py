"""``profkit capture`` / PROFKIT_CAPTURE: whole program trees recorded with no code change.

The programs run in real subprocesses (spawned, forked, SIGKILLed) and tune through FlashInfer's
real AutoTuner with the CPU timer stand-in, installed after the capture's hooks.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import sysconfig
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

import profkit
from profkit import testing as T
from profkit.bench import engine_like
from profkit.sources import autocapture

PROGRAM = Path(__file__).resolve().parent / "programs" / "tune_in_workers.py"
OPS = ("toy_gemm_a", "toy_gemm_b")


def capture_run(out, *command, extra=(), **kwargs) -> subprocess.CompletedProcess:
    """Run ``profkit capture --out out [extra] -- command`` and return the finished process."""
    argv = [sys.executable, "-m", "profkit", "capture", "--out", str(out), *extra, "--", *command]
    return subprocess.run(argv, capture_output=True, text=True, timeout=240, **kwargs)


def run_workers(tmp_path, *args, extra=()):
    truth = tmp_path / "truth"
    truth.mkdir()
    env = {**os.environ, "FLASHINFER_LOGGING_LEVEL": "debug"}  # each rank's debug log lands beside its truth
    done = capture_run(tmp_path / "out", sys.executable, str(PROGRAM), "--truth", str(truth), *args, extra=extra,
                       env=env)
    decisions = {int(p.stem[4:]): json.loads(p.read_text()) for p in truth.glob("rank*.json")}
    return done, decisions


def captured_decisions(winners: pd.DataFrame) -> dict:
    """{op: {profile: [runner, tactic]}} of one rank's captured winners, shaped like the truth files."""
    return {op: {p: [r, t] for p, r, t in zip(g["profile"], g["runner"], g["tactic"])}
            for op, g in winners.groupby("op")}


def test_spawned_ranks_each_write_their_own_capture(tmp_path):
    done, truth = run_workers(tmp_path)
    assert done.returncode == 0, done.stderr
    assert "worker exit codes: [0, 0]" in done.stdout
    folders = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert [f.split("-")[-1] for f in folders] == ["rank0", "rank1"]  # the main process never tuned: no folder
    tables = profkit.load(tmp_path / "out")
    assert tables.problems == ()
    assert set(tables.runs["rank"]) == {0, 1} and len(tables.runs) == 2
    for rank, seen in truth.items():
        mine = tables.winners[tables.winners["rank"] == rank]
        assert set(mine["pid"]) == {seen["pid"]} and set(mine["source"]) == {"profiled"}
        assert captured_decisions(mine) == seen["decisions"]  # FlashInfer's own cache, per rank
        candidates = tables.candidates[tables.candidates["rank"] == rank]
        assert len(candidates[candidates["source"] == "flashinfer"]) == 2 * 6 * 5  # ops x buckets x tactics
        assert len(candidates[candidates["source"] == "default"]) == 2 * 6  # the default, timed per bucket
    assert truth[0]["decisions"] != truth[1]["decisions"]  # the ranks really disagree, and stay apart
    agreement = engine_like.check(tmp_path / "out", tmp_path / "truth")  # the H200 check, on the CPU
    assert list(agreement["rank"]) == [0, 0, 1, 1] and agreement["candidates_equal"].all()
    assert agreement["winners_equal"].all() and (agreement["log_candidates"] == 30).all()


def test_a_worker_sigkilled_during_its_second_call_keeps_the_first(tmp_path):
    done, truth = run_workers(tmp_path, "--kill-rank", "1", "--exit-code", "5")
    assert done.returncode == 5
    assert "worker exit codes: [0, -9]" in done.stdout
    tables = profkit.load(tmp_path / "out")
    assert tables.problems == ()
    killed = tables.winners[tables.winners["rank"] == 1]
    assert set(killed["op"]) == {OPS[0]} and len(killed) == 6
    killed_candidates = tables.candidates[tables.candidates["rank"] == 1]
    assert set(killed_candidates["op"]) == {OPS[0]}  # nothing of the call it died in
    assert captured_decisions(killed) == truth[1]["decisions"]
    assert set(tables.winners.loc[tables.winners["rank"] == 0, "op"]) == set(OPS)


def test_a_forked_child_records_only_its_own_calls(tmp_path):
    done, truth = run_workers(tmp_path, "--fork", extra=("--no-time-default",))
    assert done.returncode == 0, done.stderr
    tables = profkit.load(tmp_path / "out")
    ops_by_rank = tables.winners.groupby("rank")["op"].agg(lambda s: sorted(set(s))).to_dict()
    assert ops_by_rank == {0: [OPS[0]], 1: [OPS[0]], 100: [OPS[1]], 101: [OPS[1]]}
    assert tables.runs["run_id"].is_unique and tables.runs["pid"].is_unique
    assert (tables.candidates["source"] == "flashinfer").all()  # --no-time-default reached every process
    for rank, seen in truth.items():
        assert captured_decisions(tables.winners[tables.winners["rank"] == rank]) == seen["decisions"]


PLAIN = "import sys; print('to stdout'); print('to stderr', file=sys.stderr); sys.exit(7)"


@pytest.mark.parametrize("program", [PLAIN, "import flashinfer; " + PLAIN], ids=["no-flashinfer", "never-tunes"])
def test_output_and_exit_code_pass_through_and_nothing_is_written(tmp_path, program):
    plain = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120)
    captured = capture_run(tmp_path / "out", sys.executable, "-c", program)
    assert (captured.returncode, captured.stdout, captured.stderr) == (plain.returncode, plain.stdout, plain.stderr)
    assert plain.returncode == 7 and plain.stdout == "to stdout\n"
    assert not (tmp_path / "out").exists()


SLEEPER = "import time; print('ready', flush=True); time.sleep(120)"


def _signalled(argv, sig) -> int:
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert process.stdout.readline() == "ready\n"
    process.send_signal(sig)
    return process.wait(timeout=60)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_signals_reach_the_program_as_without_profkit(tmp_path, sig):
    plain = _signalled([sys.executable, "-c", SLEEPER], sig)
    captured = _signalled([sys.executable, "-m", "profkit", "capture", "--out", str(tmp_path / "out"), "--",
                           sys.executable, "-c", SLEEPER], sig)
    assert captured == plain == -sig


def test_an_existing_sitecustomize_still_runs(tmp_path):
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "sitecustomize.py").write_text("import os\nos.environ['THEIR_SITECUSTOMIZE'] = 'ran'\n")
    program = ("import os, flashinfer; from profkit import testing as T\n"
               "print(os.environ.get('THEIR_SITECUSTOMIZE'))\n"
               "with T.cpu_autotuner(): T.tune('toy_gemm', [T.ToyCublasRunner()], 4)\n")
    env = {**os.environ, "PYTHONPATH": str(theirs)}
    done = capture_run(tmp_path / "out", sys.executable, "-c", program, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "ran"
    assert set(profkit.load(tmp_path / "out").winners["op"]) == {"toy_gemm"}


def test_the_pth_file_turns_capture_on_with_the_variable_alone(tmp_path):
    """A fresh virtual environment sees this one's packages; only PROFKIT_CAPTURE is set, no prefix."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    site_dir = Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                   capture_output=True, text=True, check=True).stdout.strip())
    (site_dir / "00-parent.pth").write_text(f"import site; site.addsitedir({sysconfig.get_paths()['purelib']!r})\n")
    installed = subprocess.run([python, "-m", "profkit", "capture", "--install-pth"], capture_output=True,
                               text=True, check=True, timeout=120)
    assert Path(installed.stdout.strip()) == site_dir / autocapture.PTH_NAME
    program = "import flashinfer; from profkit import testing as T\nwith T.cpu_autotuner(): T.tune('toy_gemm', [T.ToyCublasRunner()], 4)\n"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    subprocess.run([python, "-c", program], check=True, timeout=120, env=env, capture_output=True)
    assert not (tmp_path / "off").exists()
    subprocess.run([python, "-c", program], check=True, timeout=120, env={**env, "PROFKIT_CAPTURE": str(tmp_path / "on")},
                   capture_output=True)
    assert len(profkit.load(tmp_path / "on").winners) == 3  # buckets 1, 2, 4


def test_cli_needs_out_and_a_command(tmp_path):
    for args in ([], ["--out", str(tmp_path)], ["--", "true"]):
        done = subprocess.run([sys.executable, "-m", "profkit", "capture", *args], capture_output=True, text=True)
        assert done.returncode == 2 and "give --out DIR and the command after --" in done.stderr  # a usage error
    missing = capture_run(tmp_path / "out", "no-such-command-profkit")
    assert missing.returncode == 1 and "cannot run 'no-such-command-profkit'" in missing.stderr


# -- the directory format, in process ---------------------------------------------------------------

@pytest.fixture
def small_capture():
    with T.cpu_autotuner():
        with profkit.capture() as cap:
            T.tune("toy_gemm", [T.ToyCublasRunner(), T.ToyCudnnRunner()], 8)
    return cap.tables()


def test_a_corrupt_file_is_named_and_skipped(tmp_path, small_capture):
    autocapture.ProcessWriter(tmp_path).append(small_capture)
    second = autocapture.ProcessWriter(tmp_path)
    second.append(small_capture)
    (second.folder / "seg-000001" / "candidates.parquet").write_bytes(b"PAR1 not really")
    with pytest.warns(UserWarning, match=r"skipped 1 unreadable file\(s\).*candidates\.parquet"):
        tables = profkit.load(tmp_path)
    assert len(tables.problems) == 1 and str(second.folder) in tables.problems[0]
    assert len(tables.candidates) == len(small_capture.candidates)  # the other process's rows
    assert len(tables.winners) == 2 * len(small_capture.winners)  # and every readable table
    assert "could not be read" in repr(tables)


def test_a_reader_never_sees_a_half_written_segment(tmp_path, small_capture):
    writer = autocapture.ProcessWriter(tmp_path)
    writer.append(small_capture)
    stop = threading.Event()

    def keep_writing():  # a tuning call every 20 ms: faster than any real one
        while not stop.wait(0.02):
            writer.append(small_capture)

    thread = threading.Thread(target=keep_writing)
    thread.start()
    try:
        deadline = time.monotonic() + 3
        reads = 0
        while time.monotonic() < deadline:
            tables = profkit.load(tmp_path)
            assert tables.problems == () and len(tables.candidates) % len(small_capture.candidates) == 0
            assert len(tables.winners) == len(tables.candidates) // len(small_capture.candidates) * len(
                small_capture.winners)
            reads += 1
    finally:
        stop.set()
        thread.join()
    assert reads > 3 and writer.segments > 3
    kept = sorted(p.name for p in writer.folder.iterdir())
    assert kept == [f"seg-{n:06d}" for n in range(1, writer.segments + 1)]  # nothing rewritten, no .tmp left
