"""profkit: what FlashInfer's autotuner picked, why, what tuning cost, and whether it paid off."""

from profkit.errors import ParseError, ProfkitError, SchemaError
from profkit.schema import Tables, concat, load
from profkit.sources.capture import Capture, capture

__all__ = ["Capture", "ParseError", "ProfkitError", "SchemaError", "Tables", "capture", "concat", "load"]
__version__ = "0.1.0"
