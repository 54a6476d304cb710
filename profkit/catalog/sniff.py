"""What a file or folder is, for every command that reads what the user points at: one sniffer.

Names decide first (``step.jsonl``, ``verify.parquet``, ``cache.json``, ``*.log``...); only a file whose
name does not say is opened, and then only its first MiB. The kinds:

``capture``      a folder of profkit tables (``runs.parquet``...) or of ``seg-<n>`` segments
``v2_store``     a FlashInfer ``autotune_v2`` managed store (``<root>/v2/<env16>/manifest.json``)
``log``          a FlashInfer debug log (plain or gzip)
``cache``        a FlashInfer v1 cache file (JSON)
``step``         ``profkit step`` results (``step.jsonl``)
``verify``       ``profkit verify`` table (``verify.parquet``)
``op_timings``   op timings outside tuning (``op_timings.parquet``)
``provenance``   a run's ``provenance.json``
``port_price``   ``profkit.bench.port_price``'s ``price.json`` (a port against a full tuning, timed side by side)
``port``         ``profkit port``'s ``port.json`` (what it re-timed, from which GPU to which, in how many seconds)
``bench``        an engine result (SGLang, vLLM, lm-eval), a candidate for ``profkit.read_bench``
``folder``       any other folder (walked into)
``other``        anything else (documentation, figures, archives, profkit's own outputs): not an input
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from profkit.errors import ParseError, ProfkitError

HEAD_BYTES = 1 << 20
# Text only FlashInfer's logger and its tuning progress bar print.
FLASHINFER_MARKS = (b" - flashinfer.jit: ", b"[AutoTuner]", b"[Autotuner]", b"Autotuning process")
# A v1 cache's keys are "(op, runner, profile, extras)" tuples written as text; newer files carry _metadata.
_CACHE_MARKS = re.compile(rb'"_metadata"|"\(\s*[\'"]')
BY_NAME = {"step.jsonl": "step", "verify.parquet": "verify", "op_timings.parquet": "op_timings",
           "provenance.json": "provenance", "cache.json": "cache", "price.json": "port_price",
           "port.json": "port"}
# profkit's own outputs and files that are nobody's input (``nvidia-smi*.txt``: a GPU's state beside a run).
NOT_INPUTS = {"verify.json", "summary.json", "plan.json", "blocklist.json", "manifest.json",
              "run.txt", "log.txt", "check.txt", "pth-check.txt"}
_NOT_INPUT_SUFFIXES = {".md", ".png", ".svg", ".pdf", ".html", ".ipynb", ".py", ".sh", ".xz", ".tar", ".csv",
                       ".src", ".parquet"}
SEGMENT = re.compile(r"seg-\d+")
TABLE_FILES = {"candidates.parquet", "winners.parquet", "tuning.parquet", "runs.parquet"}


def folder_kind(path: Path, names: list[str] | None = None) -> str:
    """``capture``, ``v2_store`` or ``folder`` for a directory (``names``: its entries, when already listed)."""
    names = os.listdir(path) if names is None else names
    if TABLE_FILES & set(names) or any(SEGMENT.fullmatch(n) for n in names):
        return "capture"
    if "manifest.json" in names and "entries" in names:
        return "v2_store"
    if "v2" in names and os.path.isdir(os.path.join(path, "v2")) and any(
            os.path.isfile(os.path.join(path, "v2", d, "manifest.json")) for d in _listdir(os.path.join(path, "v2"))):
        return "v2_store"
    return "folder"


def file_kind(path: Path) -> str:
    """The kind of one file: by its name, else by its first MiB (see the module's docstring)."""
    name = path.name
    if name in BY_NAME:
        return BY_NAME[name]
    if name in NOT_INPUTS or path.suffix in _NOT_INPUT_SUFFIXES or name.startswith("nvidia-smi"):
        return "other"
    if name.endswith((".log", ".log.gz")):
        return "log"
    head = read_head(path)
    if head is None:
        return "log" if path.suffix in (".gz", ".txt") else "other"  # its reader names what is wrong with it
    return kind_of_head(head, path.suffix)


def kind_of_head(head: bytes, suffix: str = "") -> str:
    """``log``, ``cache``, ``bench`` or ``other`` from a file's first bytes."""
    if any(mark in head for mark in FLASHINFER_MARKS):
        return "log"
    text = head.lstrip()
    if text[:1] == b"{" and _CACHE_MARKS.search(head[:4096]):
        return "cache"
    if suffix in (".json", ".jsonl", ".txt", ".log", ".out", "") or text[:1] in (b"{", b"["):
        return "bench"
    return "other"


def read_head(path: Path, limit: int = HEAD_BYTES) -> bytes | None:
    """The first ``limit`` bytes of a file (decompressed when gzipped); None when it cannot be opened (missing,
    a FIFO, a device: the reader it goes to says so). Never blocks."""
    from profkit.sources.inputs import inputs_of

    try:
        with inputs_of(path)[0].open(limit=limit) as stream:
            return stream.read()
    except (ParseError, ProfkitError, OSError):
        return None


def _listdir(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []
