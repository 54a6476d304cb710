"""profkit: what FlashInfer's autotuner picked, why, what tuning cost, and whether it paid off."""

import importlib

from profkit.errors import ParseError, ProfkitError, SchemaError
from profkit.schema import Tables, concat, load
from profkit.sources.capture import Capture, capture

# The readers, imported on first use (each pulls in its own parsing code): profkit.read_log is
# profkit.sources.logs.read_log itself, with its signature and docstring.
_READERS = {
    "read_log": "profkit.sources.logs",  # FlashInfer debug logs -> LogTables
    "read_cache": "profkit.sources.cache",  # FlashInfer cache files and v2 stores -> Tables (winners, runs)
    "read_bench": "profkit.sources.engines",  # SGLang / vLLM / lm-eval / profkit step results -> bench frame
}


def __getattr__(name: str):
    if name in _READERS:
        reader = getattr(importlib.import_module(_READERS[name]), name)
        globals()[name] = reader
        return reader
    raise AttributeError(f"module 'profkit' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_READERS))


__all__ = ["read_bench", "read_cache", "read_log", "Capture", "ParseError", "ProfkitError", "SchemaError", "Tables", "capture", "concat", "load"]
__version__ = "0.1.0"
