"""CSV that a spreadsheet opens as data: no cell of it starts a formula (OWASP, CSV injection)."""

from __future__ import annotations

import re

import pandas as pd

__all__ = ["csv_text"]

# What Excel, LibreOffice and Google Sheets read as the start of a formula (or DDE call).
_FORMULA = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?|[+-]?(inf|nan)|-", re.IGNORECASE)


def csv_text(frame: pd.DataFrame) -> str:
    """``frame`` as CSV text (no index), every text cell and header that would open as a formula quoted.

    A cell starting with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return (an op named
    ``=HYPERLINK(...)``) gets a leading single quote, as OWASP advises: the spreadsheet shows it
    as text. A number written as text (a tactic ``-1``, ``+inf``) and a lone ``-`` stay as they
    are: they start no formula. Numeric columns are written as pandas writes them.
    """
    text = [c for c in frame.columns if not (pd.api.types.is_numeric_dtype(frame[c])
                                             or pd.api.types.is_datetime64_any_dtype(frame[c]))]
    safe = frame.assign(**{c: frame[c].map(_cell, na_action="ignore") for c in text}) if text else frame
    return safe.rename(columns=_cell).to_csv(index=False)


def _cell(value):
    if isinstance(value, str) and value[:1] in _FORMULA and not _NUMBER.fullmatch(value):
        return "'" + value
    return value
