"""Numbers in the sentences of the report: counts, percentages with intervals, seconds and ranges."""

from __future__ import annotations

import math

import pandas as pd


def missing(value) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def count(n, noun: str) -> str:
    """``1 call``, ``2 calls``."""
    n = int(n)
    return f"{n} {noun}{'' if n == 1 else 's'}"


def pct(effect, digits: int = 1) -> str:
    """A relative change in percent with its sign (``-3.4%``); ``?`` when unknown."""
    return "?" if missing(effect) else f"{100 * float(effect):+.{digits}f}%"


def interval(lo, hi, digits: int = 1) -> str:
    """``[-3.9%, -0.6%]``, or "" when the interval is unknown."""
    return "" if missing(lo) or missing(hi) else f"[{pct(lo, digits)}, {pct(hi, digits)}]"


def effect_at(effect, lo, hi, at) -> str:
    """``-2.2% [-3.9%, -0.6%] at llama3-8b fp8 prefill 2048``."""
    parts = [pct(effect), interval(lo, hi), f"at {at}" if not missing(at) and str(at) else ""]
    return " ".join(p for p in parts if p)


def seconds(lo, hi=None) -> str:
    """``41.6 s``, or ``19.2-49.0 s`` for a range."""
    if missing(lo):
        return "?"
    if hi is None or missing(hi) or abs(float(hi) - float(lo)) < 0.05:
        return f"{float(lo):.1f} s"
    return f"{float(lo):.1f}-{float(hi):.1f} s"


def times(lo, hi=None, digits: int = 2) -> str:
    """``1.10-1.73x``, or ``1.02x``."""
    if missing(lo):
        return "?"
    if hi is None or missing(hi) or f"{float(lo):.{digits}f}" == f"{float(hi):.{digits}f}":
        return f"{float(lo):.{digits}f}x"
    return f"{float(lo):.{digits}f}-{float(hi):.{digits}f}x"


def faster_span(lo, hi) -> str:
    """Two negative relative changes as how much faster: ``5-35% faster``."""
    a, b = sorted((-100 * float(lo), -100 * float(hi)))
    return f"{a:.0f}-{b:.0f}% faster" if round(a) != round(b) else f"{a:.0f}% faster"


def number(value) -> str:
    from profkit.views import number as fmt

    return fmt(value)
