"""The device scripts' commands, run here with stand-ins for ``nvidia-smi`` and ``python3`` that record what they
were asked: a GPU call is scarce, so a script's mistakes are found on the CPU first."""

from __future__ import annotations

import os
import shlex
import subprocess

import pytest

from conftest import ROOT

STAND_INS = {
    "nvidia-smi": 'echo "$GPU_NAME"\n',
    # each call's arguments on one line; a port's --out folder made, as the real one makes it
    "python3": 'echo "$*" >> "$CALLS"\n'
               'echo "${FLASHINFER_WORKSPACE_BASE:-}" >> "$CALLS.workspaces"\n'
               'prev=""; for a in "$@"; do [ "$prev" = --out ] && mkdir -p "$a"; prev=$a; done\n',
}


def port_dense(tmp_path, gpu: str, **env: str) -> list[list[str]]:
    """The python3 calls ``scripts/device/port_dense.sh`` makes on a GPU named ``gpu``, each as its arguments."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in STAND_INS.items():
        (bin_dir / name).write_text("#!/usr/bin/env bash\n" + body)
        (bin_dir / name).chmod(0o755)
    calls = tmp_path / "calls.txt"
    run_env = {**os.environ, **env, "PATH": f"{bin_dir}:{os.environ['PATH']}", "GPU_NAME": gpu, "CALLS": str(calls),
               "DTYPES": "fp8"}
    done = subprocess.run(["bash", "scripts/device/port_dense.sh", str(tmp_path / "out")], cwd=ROOT, env=run_env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return [shlex.split(line) for line in calls.read_text().splitlines()]


def _value(call: list[str], flag: str) -> list[str]:
    return [call[i + 1] for i, a in enumerate(call[:-1]) if a == flag]


@pytest.mark.parametrize("gpu, source, own", [("NVIDIA H200", "h100-step-fp8", "h200-fp8"),
                                              ("NVIDIA H100 80GB HBM3", "h200-fp8", "h100-own-fp8")])
def test_port_dense_blind_steps_the_copy_beside_the_own_cache_its_twin_and_the_port(tmp_path, gpu, source, own):
    calls = port_dense(tmp_path, gpu, BLIND="1", PORT_AGAIN="1", TOP_K="10")
    out = tmp_path / "out" / "llama3-8b-fp8"
    ports = [c for c in calls if c[:2] == ["-m", "profkit.cli.port"]]
    assert [(c[2], _value(c, "--out")) for c in ports] == [
        (f".dense-in/{source}/capture", [str(out / "ported")]),
        (f".dense-in/{source}/capture", [str(out / "blind")]),
        (f".dense-in/{source}/capture", [str(out / "ported-again")])]
    assert "--blind" in ports[1] and _value(ports[1], "--like") == [f".dense-in/{own}/cache.json"]
    assert _value(ports[0], "--top-k") == ["10"] and "--blind" not in ports[0]
    (step,) = [c for c in calls if c[:2] == ["-m", "profkit.cli.step"]]
    assert _value(step, "--states") == [",".join(["untuned,cache,advised,blind,ported"] * 3)]
    assert sorted(_value(step, "--cache")) == sorted([
        f"cache=.dense-in/{own}/cache.json", f"advised=.dense-in/{own}/cache.json",
        f"ported={out / 'ported'}/cache.json", f"blind={out / 'blind'}/cache.json"])
    assert all((out / name / "debug.log").is_file() for name in ("ported", "blind", "ported-again"))


def test_port_dense_fresh_tune_tunes_first_in_a_process_of_its_own_with_an_empty_jit_workspace(tmp_path):
    calls = port_dense(tmp_path, "NVIDIA H200", FRESH_TUNE="1")
    workspaces = (tmp_path / "calls.txt.workspaces").read_text().splitlines()
    first, *rest = calls
    assert first[:2] == ["-m", "profkit.cli.step"] and _value(first, "--states") == ["tuned"]
    assert _value(first, "--out") == [str(tmp_path / "out" / "llama3-8b-fp8" / "fresh-tune")]
    assert _value(first, "--decode") == ["1,4096"] and _value(first, "--prefill") == ["4096"]  # tunes to 4096
    assert workspaces[0] and not any(workspaces[1:])  # its own JIT workspace; the port and the rest share the machine's
    assert not os.path.exists(workspaces[0])  # removed after
    assert rest[0][:2] == ["-m", "profkit.cli.port"]
    assert (tmp_path / "out" / "llama3-8b-fp8" / "fresh-tune" / "debug.log").is_file()


def test_port_dense_without_blind_steps_no_copy(tmp_path):
    calls = port_dense(tmp_path, "NVIDIA H200")
    assert not any("--blind" in c for c in calls)
    (step,) = [c for c in calls if c[:2] == ["-m", "profkit.cli.step"]]
    assert _value(step, "--states") == [",".join(["untuned,cache,advised,ported"] * 3)]
    assert len([c for c in calls if c[:2] == ["-m", "profkit.cli.port"]]) == 1  # no PORT_AGAIN: one port
