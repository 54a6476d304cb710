"""profkit's start-up shim: arm the FlashInfer watcher, then run the sitecustomize this one shadows.

Python imports the first ``sitecustomize`` on sys.path at start-up. ``profkit capture`` puts this
folder first on PYTHONPATH (or the ``profkit-capture.pth`` line puts it first on sys.path), so
this file runs; it then takes its folder off sys.path and imports ``sitecustomize`` again, which
finds whatever would have run without profkit (a project's, a distribution's) and leaves that
module in ``sys.modules``. Standard library only; nothing is imported unless PROFKIT_CAPTURE is set.
"""

import os as _os
import sys as _sys

_HERE = _os.path.dirname(_os.path.abspath(__file__))


def _is_here(entry):
    try:
        return bool(entry) and _os.path.samefile(entry, _HERE)
    except OSError:
        return False


def _start():
    if not _os.environ.get("PROFKIT_CAPTURE"):
        return
    try:
        import _profkit_boot

        _profkit_boot.start(_HERE)
    except Exception as exc:  # noqa: BLE001 - profkit must never stop the program from starting
        _sys.stderr.write(f"profkit capture: not recording process {_os.getpid()}: {type(exc).__name__}: {exc}\n")


def _chain():
    this = _sys.modules.pop("sitecustomize", None)
    _sys.path[:] = [p for p in _sys.path if not _is_here(p)]
    try:
        import sitecustomize  # noqa: F401 - the one this file shadows, if any
    except ImportError as exc:
        if exc.name != "sitecustomize":
            raise
        # None further down: stay registered, as importlib expects to find this module there.
        _sys.modules["sitecustomize"] = this


_start()
_chain()
