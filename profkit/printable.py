"""Names from files are data: the one way profkit shows one on a terminal or in a figure.

An op, model or state name read from a capture, log or step.jsonl may hold ESC / OSC sequences
(which move the cursor, clear the screen or retitle the terminal), a carriage return or line
break (which forges a line of its own), bidirectional overrides (which reorder what is printed
beside them) or a lone surrogate (which no terminal encoding can print). :func:`printable`
shows each as its Python escape (``\\x1b``, ``\\u202e``, ``\\udcff``), so the name is read, not
obeyed. Imports nothing heavy: the CLI's error boundary uses it.
"""

from __future__ import annotations

import re

__all__ = ["printable"]

# C0 and C1 controls, DEL, bidirectional marks, embeddings, overrides and isolates, the Unicode line and
# paragraph separators, and lone surrogates.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029\ud800-\udfff]")
_UNSAFE_KEEPING_LINES = re.compile(_UNSAFE.pattern.replace("\x00-\x1f", "\x00-\x09\x0b-\x1f"))


def printable(text, *, newlines: bool = False) -> str:
    """``text`` with every control, bidirectional or surrogate character shown as its escape (``\\x1b``).

    Args:
        text: any value (``str()`` of it is shown).
        newlines: keep ``\\n`` as a line break (profkit's own multi-line figure labels); any other
            control character, ``\\r`` included, is still escaped.
    """
    text = str(text)
    pattern = _UNSAFE_KEEPING_LINES if newlines else _UNSAFE
    return pattern.sub(lambda m: ascii(m.group())[1:-1], text) if pattern.search(text) else text
