"""The pieces of a report page: figures, tables, sections, pages, and what a section builder reads."""

from __future__ import annotations

import dataclasses
import re
from typing import Callable

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from profkit.report import _html

_TOP = 10

# The pages of a report, in the order of its navigation: (file stem, title). ``index`` is the
# main page (the verdicts and the figures that carry them); the others hold the detail a click away.
PAGES = (("index", "Verdicts"), ("tactics", "Tactic choices"), ("cost", "Tuning cost"), ("step", "Model step"),
         ("serving", "Serving"), ("moe", "MoE"), ("plan", "Tuning plan"), ("repeats", "Repeats and ranks"),
         ("provenance", "Provenance"))
PAGE_TITLES = dict(PAGES)


@dataclasses.dataclass(frozen=True)
class FigureSpec:
    """One figure: file name (no extension), title, caption, and a function that draws it."""

    name: str
    title: str
    caption: str
    draw: Callable[[], Figure]

    def __post_init__(self):  # the name becomes a file name and an HTML id: op and model names are not safe
        object.__setattr__(self, "name", _html.slug(self.name))


@dataclasses.dataclass(frozen=True, eq=False)
class Table:
    """A table shown shortened on the page and written whole as ``<name>.csv``.

    Attributes:
        frame: the full table (analysis columns; units in the names).
        name: CSV file name without extension.
        sort_by: the column that says what matters; the page shows the ``top`` rows by it.
        ascending: sort order of ``sort_by`` (False: largest first).
        top: rows shown on the page (all when the table is no longer; 0: only the link).
        what: what the shown rows are, e.g. "slowest against the default".
    """

    frame: pd.DataFrame
    name: str
    sort_by: str | None = None
    ascending: bool = False
    top: int = _TOP
    what: str = ""

    def __post_init__(self):  # the name becomes a file name and a link
        object.__setattr__(self, "name", _html.slug(self.name))

    def shown(self) -> pd.DataFrame:
        f = self.frame
        if self.sort_by is not None and self.sort_by in f.columns and len(f) > self.top:
            key = pd.to_numeric(f[self.sort_by], errors="coerce")
            f = f.iloc[np.argsort(key.to_numpy(dtype=float) * (1 if self.ascending else -1), kind="stable")]
        return f.head(self.top)

    def footer(self) -> str:
        if len(self.frame) <= self.top or not self.top:
            return f"All {len(self.frame)} rows in [{self.name}.csv]({self.name}.csv)."
        what = f" ({self.what})" if self.what else ""
        return (f"Top {self.top} of {len(self.frame)} rows{what}; {len(self.frame) - self.top} more in "
                f"[{self.name}.csv]({self.name}.csv).")


@dataclasses.dataclass(frozen=True)
class Section:
    """One section of a page, from one builder of :data:`profkit.report.SECTIONS`.

    Attributes:
        title: the heading (also the navigation entry).
        text: Markdown: paragraphs, ``- `` lists, `code`, **bold** and [links](#anchor).
        figures: the figures, in order.
        tables: the tables, after the figures.
        omitted: one line per figure left out, saying why (drawn as a note, not an empty figure).
        page: the page it goes on (a stem of :data:`PAGES`; ``index`` is the main page).
        loud: lines shown first and loudly (a tuning that failed or did nothing).
        collapsed: drawn closed (``<details>``) in the HTML page, open in Markdown.
    """

    title: str
    text: str = ""
    figures: tuple[FigureSpec, ...] = ()
    tables: tuple[Table, ...] = ()
    omitted: tuple[str, ...] = ()
    page: str = "index"
    loud: tuple[str, ...] = ()
    collapsed: bool = False

    @property
    def anchor(self) -> str:
        return re.sub(r"[^a-z0-9]+", "-", self.title.lower()).strip("-") or "section"


def page_file(page: str, ext: str = "html") -> str:
    """``index.html``, ``step.html``: the file a page is written to."""
    return f"{_html.slug(page)}.{ext}"


@dataclasses.dataclass(frozen=True, eq=False)
class ReportContext:
    """What a section builder reads: one GPU's frames (``data``), the analyses over them (``results``), every GPU's
    verdicts (``verdicts``: one row per op and GPU; None: ``results.op_verdicts``), the GPUs (``gpus``) and what
    one GPU's tuning is worth on another (``carried``, ``portability``, ``port_price``, ``shortlist``: the report
    model's), and
    whether each GPU's ranks and boots agree (``ranks``: the report model's, one ``RankAnswers`` per GPU)."""

    data: object
    results: object
    verdicts: object = None
    gpus: tuple = ()
    portability: object = None
    carried: object = None
    port_price: object = None
    shortlist: object = None
    ranks: object = None

    @property
    def labels(self) -> dict:
        return dict(getattr(self.data, "labels", {}) or {})

    def named(self, frame: pd.DataFrame) -> pd.DataFrame:
        """``frame`` with shape labels ('N=6144 K=4096') shown as 'llama3-8b qkv (N=6144, K=4096)'."""
        from profkit.views import short_label

        if "shape" not in frame.columns:
            return frame
        return frame.assign(shape=frame["shape"].map(lambda s: short_label(s, self.labels)))

    @staticmethod
    def figure(name: str, text: str | None = None, *, page: str | None = None) -> str:
        """A Markdown link to a figure by its name (on ``page``, else on the same page)."""
        from profkit.report import _html

        where = page_file(page) if page else ""
        return f"[{text or name.replace('_', ' ')}]({where}#fig-{_html.slug(name)})"

    @staticmethod
    def page(page: str, text: str | None = None) -> str:
        """A Markdown link to another page of the report."""
        return f"[{text or PAGE_TITLES.get(page, page)}]({page_file(page)})"
