"""profkit: what FlashInfer's autotuner picked, why, what tuning cost, and whether it paid off."""

import importlib

from profkit._versions import PROFKIT_VERSION as __version__
from profkit.errors import ParseError, ProfkitError, SchemaError

# Everything else is imported on first use, so that `import profkit` (and with it the `profkit`
# command, its --help and its argument checks) does not pay for pandas, pyarrow or FlashInfer
# before it needs them. profkit.load is profkit.schema.load itself, with its signature and docstring.
_LAZY = {
    "Tables": "profkit.schema",
    "concat": "profkit.schema",
    "load": "profkit.schema",  # saved captures -> Tables
    "Capture": "profkit.sources.capture",
    "capture": "profkit.sources.capture",  # live capture of FlashInfer's AutoTuner
    "read_log": "profkit.sources.logs",  # FlashInfer debug logs -> LogTables
    "read_cache": "profkit.sources.cache",  # FlashInfer cache files and v2 stores -> Tables (winners, runs)
    "read_bench": "profkit.sources.engines",  # SGLang / vLLM / lm-eval / profkit step results -> bench frame
    "open": "profkit.catalog",  # one walk over folders, captures, logs, caches, v2 stores -> a Catalog of runs
}
# Subpackages reachable as attributes after a plain `import profkit` (profkit.analysis.winners(...)).
_SUBMODULES = ("analysis", "schema", "sources", "testing", "views")


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
    elif name in _SUBMODULES:
        value = importlib.import_module(f"profkit.{name}")
    else:
        raise AttributeError(f"module 'profkit' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY) | set(_SUBMODULES))


__all__ = ["open", "read_bench", "read_cache", "read_log", "Capture", "ParseError", "ProfkitError", "SchemaError", "Tables",
           "capture", "concat", "load"]
