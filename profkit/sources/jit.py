"""FlashInfer's JIT module builds: which modules a block of code compiled from scratch, and how long that took.

A module is compiled once per machine (its library then lies in FlashInfer's JIT cache), so the first run of a
port, verify or tuning on a fresh machine pays for it and every later one does not. :func:`jit_builds` wraps
``JitSpec.build`` while the block runs (removed on exit and on error); each build runs, returns and raises as it
would without it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from pathlib import Path
from typing import Iterator

from profkit.sources.hooks import patched


@dataclasses.dataclass
class JitBuilds:
    """The modules built from scratch while the block ran, in order, and the wall seconds of those builds."""

    modules: list[str] = dataclasses.field(default_factory=list)
    seconds: float = 0.0


def jit_spec_class():
    """FlashInfer's class whose ``build`` compiles a JIT module (None where this FlashInfer has none)."""
    try:
        from flashinfer.jit import core
    except ImportError:
        return None
    cls = getattr(core, "JitSpecNvcc", None) or getattr(core, "JitSpec", None)
    return cls if cls is not None and "build" in vars(cls) else None


def _library_missing(spec) -> bool:
    """Whether ``spec``'s library is not on disk yet: its build compiles (a spec without the path: not known, no)."""
    try:
        return not Path(spec.jit_library_path).exists()
    except Exception:  # noqa: BLE001 - another FlashInfer's spec: its builds are not counted, never broken
        return False


@contextlib.contextmanager
def jit_builds() -> Iterator[JitBuilds]:
    """A :class:`JitBuilds` filled while the block runs: each ``JitSpec.build`` whose library was missing (a cold
    build, FlashInfer's "Building JIT module" line) that returned."""
    record = JitBuilds()
    cls = jit_spec_class()
    if cls is None:
        yield record
        return

    def wrap(layer):
        def build(spec, *args, **kwargs):
            cold = _library_missing(spec)
            started = time.perf_counter()
            result = layer.inner(spec, *args, **kwargs)
            if cold:
                record.modules.append(str(getattr(spec, "name", "?")))
                record.seconds += time.perf_counter() - started
            return result
        return build

    with patched(cls, "build", wrap):
        yield record
