"""profkit: what FlashInfer's autotuner picked, why, what tuning cost, and whether it paid off."""

from profkit.errors import ParseError, ProfkitError, SchemaError
from profkit.schema import Tables, concat, load
from profkit.sources.capture import Capture, capture



def read_log(path_or_text, **kwargs) -> Tables:
    """FlashInfer debug log(s) as Tables; see :func:`profkit.sources.logs.read_log`."""
    from profkit.sources.logs import read_log as _read_log

    return _read_log(path_or_text, **kwargs)


def read_cache(path, **kwargs) -> Tables:
    """FlashInfer cache file(s) as Tables (winners and runs); see :func:`profkit.sources.cache.read_cache`."""
    from profkit.sources.cache import read_cache as _read_cache

    return _read_cache(path, **kwargs)


def read_bench(path_or_text, **kwargs):
    """Engine end-to-end results as a bench frame; see :func:`profkit.sources.engines.read_bench`."""
    from profkit.sources.engines import read_bench as _read_bench

    return _read_bench(path_or_text, **kwargs)


__all__ = ["read_bench", "read_cache", "read_log", "Capture", "ParseError", "ProfkitError", "SchemaError", "Tables", "capture", "concat", "load"]
__version__ = "0.1.0"
