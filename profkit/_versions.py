"""profkit's own version, and library versions as people write them (shared by analysis and views)."""

from __future__ import annotations

PROFKIT_VERSION = "0.1.0"  # pyproject.toml's version: tests/test_capture.py holds them equal


def cudnn_version(value) -> str:
    """cuDNN's integer version as written (91900 -> 9.19.0, 8907 -> 8.9.7); other text unchanged."""
    text = str(value)
    if not text.isdigit():
        return text
    v = int(text)
    if v >= 10000:
        return f"{v // 10000}.{v % 10000 // 100}.{v % 100}"
    return f"{v // 1000}.{v % 1000 // 100}.{v % 100}"
