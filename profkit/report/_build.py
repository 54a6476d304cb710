"""Draw a report's figures and write its files: figures, tables (CSV), summary.json and the pages."""

from __future__ import annotations

import dataclasses
import functools
import re
import sys
import warnings
from pathlib import Path
from typing import Callable, Iterable, Sequence

from profkit.errors import ProfkitError
from profkit.outputs import atomic
from profkit.outputs.csv_text import csv_text
from profkit import views as _style
from profkit.report._page import PAGES, Section, page_file
from profkit.report._render import html_page, markdown_page

# CSS pixels per figure inch on the page: a figure is shown at most at this scale, so a small one stays small.
_PX_PER_INCH = 100


def _whole(build: Callable) -> Callable:
    """``build`` writing into a new folder that replaces ``out`` whole (:func:`profkit.outputs.atomic.whole_folder`),
    so no page, figure or table of an earlier report stays; figures only (``index=False``, e.g. into docs/figures
    beside other files) are written into ``out`` itself."""
    @functools.wraps(build)
    def whole(data, out, **kwargs):
        if not kwargs.get("index", True):
            return build(data, out, **kwargs)
        with atomic.whole_folder(out, earlier=_earlier_report) as staged:
            written = build(data, staged, **kwargs)
        return [Path(out) / path.relative_to(staged) for path in written]
    return whole


def _earlier_report(folder: Path, names: set[str]) -> bool:
    """A report folder written before reports listed their files: its pages and only files a report writes."""
    return {"index.html", "summary.json"} <= names and all(
        Path(n).suffix in (".png", ".svg", ".pdf", ".csv", ".md", ".html", ".json") and (folder / n).is_file()
        for n in names)


@_whole
def build_report(data, out: str | Path, *, results=None,
                 sections: Sequence[Callable[..., Section | None]] | None = None,
                 formats: Iterable[str] = ("png",), only: Iterable[str] | None = None, index: bool = True,
                 progress: bool = True, style: str = "screen", gpu: str | None = None) -> list[Path]:
    """Lay out ``data``'s analyses: write the figures, tables (CSV), summary.json and the pages into ``out``.

    The main page (``index.html`` / ``index.md``) holds the verdicts and the figures that carry
    them; each detail page (``step.html``, ``serving.html``, ...) the per-shape, per-step-set and
    per-policy detail, linked from the main page. ``summary.json`` holds one entry per op with its
    recommendation (:func:`profkit.outputs.summary.summary_document`).

    Args:
        data: from :func:`profkit.catalog.open`.
        out: output directory: created, or replaced whole (refused when it holds files profkit did not write).
        results: the analyses of a one-GPU ``data`` (default: :func:`profkit.report._model.build_model`: each
            GPU's part analysed once, the details of ``gpu``).
        sections: section builders in page order (default :data:`profkit.report.SECTIONS`).
        formats: figure formats to write ("png", "svg", "pdf").
        only: figure names to draw (default all; see the pages for names).
        index: also write the pages, the tables' CSV files and summary.json.
        progress: show a tqdm progress bar on stderr.
        style: ``screen`` or ``doc`` (design documents: larger type, no run ids).
        gpu: the GPU the detail sections show (default: the one with the most runs); the first screen shows all.

    Returns:
        The files written: figures, CSV tables, summary.json, the detail pages, then index.md and
        index.html last.

    Raises:
        ProfkitError: for an unknown figure name in ``only``, format or style.
    """
    from tqdm.auto import tqdm

    from profkit.report import SECTIONS, ReportContext
    from profkit.catalog import partition
    from profkit.report._model import STEPS_PER_GPU, build_model
    from profkit.outputs.summary import summary_document, write_summary
    from profkit.report._main import verdict_line

    out = Path(out)
    formats = tuple(formats)
    bad = [f for f in formats if f not in ("png", "svg", "pdf")]
    if bad:
        raise ProfkitError(f"unknown figure format(s) {', '.join(bad)}; use png, svg or pdf")
    if style not in _style.STYLES:
        raise ProfkitError(f"unknown style {style!r}; use {' or '.join(_style.STYLES)}")
    analysed = 0 if results is not None else STEPS_PER_GPU * len(partition.gpus(data)) + 1
    bar = tqdm(total=analysed + 2, desc="profkit report", unit="step", file=sys.stderr, disable=not progress,
               leave=False)

    started: list[str] = []

    def step(name: str) -> None:  # one bar: each analysis step, the sections, each figure, the pages
        if started:
            bar.update()
        started.append(name)
        bar.set_postfix_str(name)
    model = build_model(data, gpu=gpu, progress=step) if results is None else None
    if started:
        bar.update()
        bar.set_postfix_str("sections")
    if model is not None:
        data, results = model.data, model.results
    verdicts = model.verdicts if model is not None else None
    with warnings.catch_warnings(), _style.use_style(style):
        warnings.simplefilter("ignore", UserWarning)
        across = {k: getattr(model, k) for k in ("portability", "carried", "port_price", "shortlist", "ranks")} if model else {}
        ctx = ReportContext(data=data, results=results, verdicts=verdicts, gpus=model.gpus if model else (), **across)
        built = [s for s in (build(ctx) for build in (SECTIONS if sections is None else sections)) if s is not None]
        bar.update()
        names = [f.name for s in built for f in s.figures]
        if only is not None:
            only = list(only)
            unknown = [n for n in only if n not in names]
            if unknown:
                raise ProfkitError(f"unknown figure(s) {', '.join(unknown)}; this data has {', '.join(names)}")
            built = [dataclasses.replace(s, figures=tuple(f for f in s.figures if f.name in only)) for s in built]
        bar.total = analysed + 2 + sum(len(s.figures) for s in built)
        atomic.make_folder(out)
        written: list[Path] = []
        pngs: dict[str, bytes] = {}
        widths: dict[str, int] = {}
        specs = [f for s in built for f in s.figures]
        wanted = formats + (("png",) if index and "png" not in formats else ())
        for spec, (width, files) in zip(specs, _drawn(specs, wanted)):
            bar.set_postfix_str(spec.name)
            widths[spec.name] = width
            pngs[spec.name] = files.get("png", b"")
            written += [atomic.write_bytes(out / f"{spec.name}.{fmt}", files[fmt]) for fmt in formats]
            bar.update()
    if index:
        bar.set_postfix_str("pages")
        for table in (t for s in built for t in s.tables):
            written.append(atomic.write_text(out / f"{table.name}.csv", csv_text(table.frame)))
        rows = results.op_verdicts if verdicts is None else verdicts
        summary = summary_document(rows, reasons=[verdict_line(r) for r in rows.itertuples(index=False)],
                                   aa=results.aa, root=str(data.root))
        written.append(write_summary(out / "summary.json", summary))
        img = "png" if "png" in formats else formats[0]
        pages = [p for p, _ in PAGES if any(s.page == p for s in built)] or ["index"]
        unwritten = [p for p, _ in PAGES if p not in pages]
        for page in sorted(pages, key=lambda p: p == "index"):  # the main page last
            mine = [dataclasses.replace(s, text=_unlinked(s.text, unwritten)) for s in built if s.page == page]
            written.append(atomic.write_text(out / page_file(page, "md"),
                                              markdown_page(data, mine, img=img, page=page, pages=pages)))
            written.append(atomic.write_text(out / page_file(page, "html"),
                                              html_page(data, mine, pngs, page=page, pages=pages, widths=widths)))
    bar.update()
    bar.close()
    return written


def _unlinked(text: str, pages: list[str]) -> str:
    """``text`` with its links to ``pages`` (not written: nothing to show there) as plain words."""
    for page in pages:
        text = re.sub(r"\[([^\]]*)\]\(" + re.escape(page_file(page)) + r"(#[^)]*)?\)", r"\1", text)
    return text


# Figures are drawn in forked worker processes when there are this many or more and more than one core.
_PARALLEL_FROM = 6
_SPECS: list = []  # the figures being drawn: forked workers find them here


def _drawn(specs: list, formats: tuple) -> Iterable[tuple[int, dict[str, bytes]]]:
    """(width in page pixels, {format: bytes}) of each figure, in order; drawn by forked workers where that helps
    (``PROFKIT_REPORT_WORKERS``: how many; 1 draws here). A worker first freezes what it inherited (``gc.freeze``):
    its full collections then skip the report's own objects (1.8 -> 0.8 s of the shipped figures' 42 s of CPU)."""
    import gc
    import multiprocessing as mp

    from profkit.report._model import report_workers

    workers = report_workers()
    if workers < 2 or len(specs) < _PARALLEL_FROM or "fork" not in mp.get_all_start_methods():
        yield from (_draw(spec, formats) for spec in specs)
        return
    _SPECS[:] = specs
    try:
        with mp.get_context("fork").Pool(min(workers, len(specs)), initializer=gc.freeze) as pool:
            yield from pool.imap(functools.partial(_draw_nth, formats=formats), range(len(specs)))
    finally:
        _SPECS.clear()


def _draw_nth(n: int, *, formats: tuple) -> tuple[int, dict[str, bytes]]:
    return _draw(_SPECS[n], formats)


def _draw(spec, formats: tuple) -> tuple[int, dict[str, bytes]]:
    import matplotlib.pyplot as plt

    fig = spec.draw()
    try:
        return int(fig.get_size_inches()[0] * _PX_PER_INCH), _style.figure_files(fig, formats)
    finally:
        plt.close(fig)
