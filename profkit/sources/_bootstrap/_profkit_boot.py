"""Watch for FlashInfer's import and only then start profkit's capture (standard library only).

Runs at start-up in every process that ``profkit capture`` (or ``PROFKIT_CAPTURE``) reaches, so
it must cost nothing in the many processes that never touch FlashInfer (tokenizer workers,
resource trackers, compilers): it puts one finder at the front of ``sys.meta_path`` that looks at
two module names and otherwise returns None at once. When ``flashinfer`` finishes executing
(its ``__init__`` imports ``flashinfer.autotuner``), the finder removes itself and calls
:func:`profkit.sources.autocapture.start`, which imports profkit, pandas and the capture.
Nothing here imports flashinfer, torch or profkit.
"""

import os
import sys

ENV_DIR = "PROFKIT_CAPTURE"  # where each process writes; setting it is what turns capture on
_WATCHED = frozenset(("flashinfer", "flashinfer.autotuner"))
_started = False


def start(bootstrap_dir):
    """Arm the watcher in this process and make sure child processes inherit it."""
    global _started
    if _started:
        return
    _started = True
    out = os.environ[ENV_DIR]
    if not os.path.isabs(out):  # children may start elsewhere: pin the directory now
        os.environ[ENV_DIR] = os.path.abspath(out)
    _propagate(bootstrap_dir)
    if "flashinfer" in sys.modules:  # imported by a sitecustomize that ran before us
        _fire()
    else:
        sys.meta_path.insert(0, _Watcher())


def path_first(entry, pythonpath):
    """``pythonpath`` with ``entry`` first and nowhere else (empty parts dropped)."""
    return os.pathsep.join([entry] + [p for p in pythonpath.split(os.pathsep) if p and p != entry])


def _propagate(bootstrap_dir):
    """Keep this folder first on PYTHONPATH, so interpreters started without the .pth see it too."""
    pythonpath = os.environ.get("PYTHONPATH", "")
    parts = [p for p in pythonpath.split(os.pathsep) if p]
    if not parts or parts[0] != bootstrap_dir:
        os.environ["PYTHONPATH"] = path_first(bootstrap_dir, pythonpath)


class _Watcher:
    """A meta-path finder that wraps the loaders of FlashInfer's top modules and finds nothing itself."""

    def __init__(self):
        self.depth = 0  # watched modules executing right now (flashinfer imports flashinfer.autotuner)

    def find_spec(self, name, path=None, target=None):
        if name not in _WATCHED:
            return None
        spec = self._find_elsewhere(name, path, target)
        if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
            self._wrap(spec.loader)
        return spec

    def _find_elsewhere(self, name, path, target):
        for finder in list(sys.meta_path):
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                return spec
        return None

    def _wrap(self, loader):
        inner = loader.exec_module
        watcher = self

        def exec_module(module):
            watcher.depth += 1
            try:
                inner(module)
            finally:
                watcher.depth -= 1
                try:
                    del loader.exec_module  # back to the loader's own method
                except AttributeError:
                    pass
            if watcher.depth == 0:
                watcher.fire()

        try:
            loader.exec_module = exec_module
        except (AttributeError, TypeError):  # a loader that takes no attributes: cannot watch it
            pass

    def fire(self):
        try:
            sys.meta_path.remove(self)
        except ValueError:
            return  # already fired
        _fire()


def _fire():
    """FlashInfer is imported: start recording (never let a failure reach the program)."""
    try:
        try:
            from profkit.sources import autocapture
        except ImportError:
            # The program's interpreter may not have profkit installed (a script run from
            # another folder): add the folder that holds the profkit package, three above this file.
            root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
            if root not in sys.path:
                sys.path.append(root)
            from profkit.sources import autocapture
        autocapture.start(os.environ[ENV_DIR])
    except Exception as exc:  # noqa: BLE001 - the program goes on unrecorded, and says why
        sys.stderr.write(f"profkit capture: not recording process {os.getpid()}: {type(exc).__name__}: {exc}\n")
