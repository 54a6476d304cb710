"""The process-long capture's writer under a full disk, and profkit.load on damaged capture folders.

The rows are real: FlashInfer's AutoTuner tunes on the CPU (``profkit.testing``) under the same
``_ProcessCapture`` that ``profkit capture`` opens in each process, which appends one segment per
finished tuning call.
"""

from __future__ import annotations

import errno
import functools
import os
import shutil
import tempfile
import warnings
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import profkit
from profkit import schema
from profkit import testing as T
from profkit.errors import ProfkitError
from profkit.sources import autocapture

M = 8  # buckets 1, 2, 4, 8
OPS = ("toy_a", "toy_b", "toy_c")


def runners():
    return [T.ToyCublasRunner(), T.ToyCudnnRunner()]


class ProcessCapture:
    """``profkit capture``'s capture of this process, writing under ``out``, open while the block runs."""

    def __init__(self, out: Path):
        self.process = autocapture._ProcessCapture(out, time_default=False)

    def __enter__(self):
        self.process.capture.__enter__()
        return self.process

    def __exit__(self, *exc):
        self.process.capture.__exit__(*exc)


def no_space(*args, **kwargs):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def half_written_parquet(frame, path, **kwargs):
    """What a full disk leaves: the start of the file, then ENOSPC."""
    Path(path).write_bytes(b"PAR1" + b"\0" * 64)
    no_space()


FULL_DISK = {"parquet": (pd.DataFrame, "to_parquet", half_written_parquet),
             "fsync": (os, "fsync", no_space), "rename": (os, "rename", no_space)}


@pytest.mark.parametrize("step", list(FULL_DISK))
def test_a_full_disk_leaves_no_temporary_folder_and_the_rows_come_with_the_next_write(tmp_path, monkeypatch,
                                                                                     capsys, step):
    with T.cpu_autotuner(), ProcessCapture(tmp_path) as process:
        T.tune(OPS[0], runners(), M)
        with monkeypatch.context() as disk:
            disk.setattr(*FULL_DISK[step])
            T.tune(OPS[1], runners(), M)  # its segment cannot be written
        left = sorted(p.name for p in tmp_path.rglob("*") if p.name.startswith("."))
        assert left == []  # no .seg-N.tmp folder is left behind
        assert len(process.capture.problems) == 1 and "No space left on device" in process.capture.problems[0]
        assert process.capture.problems[0] in capsys.readouterr().err
        assert set(profkit.load(tmp_path).winners["op"]) == {OPS[0]}  # the complete segment reads as before
        T.tune(OPS[2], runners(), M)  # room again: this segment carries the rows kept since
    tables = profkit.load(tmp_path)
    assert tables.problems == ()
    assert sorted(p.name for p in process.writer.folder.iterdir()) == ["seg-000001", "seg-000002"]
    assert list(tables.winners.groupby("op", sort=False).size().items()) == [(op, 4) for op in OPS]
    assert len(tables.candidates) == 3 * 4 * 5 and len(tables.runs) == 1


def test_every_file_and_the_segment_folder_are_fsynced_before_the_rename(tmp_path, monkeypatch):
    done = []
    fsync, rename = os.fsync, os.rename

    def synced(fd):
        done.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        fsync(fd)

    def renamed(source, target):
        done.append(("rename", str(source)))
        rename(source, target)

    monkeypatch.setattr(os, "fsync", synced)
    monkeypatch.setattr(os, "rename", renamed)
    with T.cpu_autotuner(), ProcessCapture(tmp_path) as process:
        T.tune(OPS[0], runners(), M)
    tmp = str(process.writer.folder / ".seg-000001.tmp")
    before = [path for kind, path in done[:done.index(("rename", tmp))] if kind == "fsync"]
    assert sorted(before) == sorted([*(f"{tmp}/{t}.parquet" for t in schema.TABLES), tmp])
    assert done[-1] == ("fsync", str(process.writer.folder))  # and the rename made durable


# -- damaged capture folders: a property ------------------------------------------------------------

@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> Path:
    """A ``profkit capture --out`` folder of one process: three segments, one per tuning call."""
    out = tmp_path_factory.mktemp("capture")
    with T.cpu_autotuner(), ProcessCapture(out) as process:
        for op in OPS:
            T.tune(op, runners(), M)
    assert process.writer.segments == 3
    return out


def table_files(root: Path) -> list[Path]:
    return sorted(p.relative_to(root) for p in root.rglob("*.parquet"))


@functools.cache
def _pristine_rows(path: Path) -> pd.DataFrame:
    """A pristine segment's table, read once: each example compares with it."""
    return pd.read_parquet(path)


Damage = st.tuples(st.sampled_from(["truncate", "garble", "delete", "empty", "folder", "drop segment"]),
                   st.integers(0, 10**6), st.binary(min_size=1, max_size=64))


def apply(root: Path, files: list[Path], kind: str, where: int, junk: bytes) -> set[Path]:
    """Damage one file (or its segment folder); return the files that no longer hold what they held.

    A file or segment that is gone leaves nothing to name (a segment holds no file for a table
    without new rows); every other damage is named by load unless the file still parses.
    """
    file = root / files[where % len(files)]
    if kind == "drop segment":
        shutil.rmtree(file.parent, ignore_errors=True)
        return {f for f in files if (root / f).parent == file.parent}
    if not file.is_file() or not file.stat().st_size:
        return set()
    data = file.read_bytes()
    if kind == "truncate":
        file.write_bytes(data[: where % len(data)])
    elif kind == "garble":
        at = where % len(data)
        file.write_bytes(data[:at] + junk + data[at + len(junk):])
    elif kind == "delete":
        file.unlink()
    elif kind == "empty":
        file.write_bytes(b"")
    else:  # a folder where the file was
        file.unlink()
        file.mkdir()
    return {file.relative_to(root)}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(damages=st.lists(Damage, min_size=1, max_size=3))
def test_damaged_capture_folders_raise_only_profkits_errors_and_keep_undamaged_segments(pristine, damages):
    files = table_files(pristine)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "out"
        shutil.copytree(pristine, root)
        damaged, present = set(), set()
        for kind, where, junk in damages:
            hit = apply(root, files, kind, where, junk)
            damaged |= hit
            present = {f for f in present | hit if (root / f).exists()}
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                tables = profkit.load(root)
        except ProfkitError:
            assert damaged  # only when there is nothing left to read
            return
        unnamed = [f for f in present if not any(str(f) in p for p in tables.problems)]
        assert all(_still_readable(root / f) for f in unnamed)
    for table in schema.TABLES:
        kept = [_pristine_rows(pristine / f) for f in files if f.name == f"{table}.parquet" and f not in damaged]
        loaded = getattr(tables, table)
        if table == "runs":
            assert {r for k in kept for r in k["run_id"]} <= set(loaded["run_id"])
            continue
        for frame in kept:  # every undamaged segment's rows are there (a garbled file may add its own)
            for call, n in frame["call"].value_counts().items():
                assert (loaded["call"] == call).sum() >= n


def _still_readable(path: Path) -> bool:
    """A damaged file may still parse (garbled bytes in a page pyarrow does not check)."""
    try:
        pd.read_parquet(path)
        return True
    except Exception:  # noqa: BLE001 - any failure means the file is really damaged
        return False


def test_a_segment_deleted_below_the_newest_is_named(tmp_path, pristine):
    root = tmp_path / "out"
    shutil.copytree(pristine, root)
    process = next(root.iterdir())
    shutil.rmtree(process / schema.segment_name(2))
    with pytest.warns(UserWarning, match="seg-000002 missing"):
        tables = profkit.load(root)
    assert any("seg-000002 missing" in p for p in tables.problems)
    assert set(tables.winners["op"]) == {OPS[0], OPS[2]}  # the other calls are kept


def test_the_newest_segment_alone_deleted_leaves_no_gap_to_name(tmp_path, pristine):
    root = tmp_path / "out"
    shutil.copytree(pristine, root)
    shutil.rmtree(next(root.iterdir()) / schema.segment_name(3))  # as if the third call never finished
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tables = profkit.load(root)
    assert tables.problems == () and set(tables.winners["op"]) == set(OPS[:2])
