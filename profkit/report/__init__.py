"""The profkit report: the verdicts first, the figures that carry them, and the detail a click away.

The layers: :func:`profkit.catalog.open` reads a data directory (or one log,
cache file or capture) into a ``Catalog``; :func:`profkit.analysis.results.analyse` computes
every number the pages show, once (``Results``); this package only lays them out:

- ``_main`` builds the main page: one verdict per op (keep, skip, plan, failed or unknown, with
  what tuning cost and what it bought beyond noise), the cost, serving and MoE figures;
- ``_detail`` builds the detail pages (tactics, cost, step, serving, MoE, plan, repeats,
  provenance), linked from the main page;
- ``_figures`` composes several-panel figures from the ``plot_*`` functions' switches;
- ``_render`` writes each page as Markdown and as self-contained HTML (every value escaped);
- ``_build`` draws the figures and writes the files (``profkit.outputs.atomic``), with
  ``summary.json`` (one entry per op) beside the pages.

Adding a section
----------------
A report is the list :data:`SECTIONS` of section builders, in page order. A builder is a function
``build(ctx: ReportContext) -> Section | None``: it reads frames from ``ctx.results`` (the
``Results``; for a new number, add a field there computed by a public ``profkit.analysis``
function) and ``ctx.data`` (the ``Catalog``), and returns a :class:`Section` (title, Markdown
text, figures, tables, one line per figure it left out saying why, and the ``page`` it goes on),
or None when the data has nothing for it. Tables are shortened on the page and written whole as
CSV beside it. For example::

    from profkit import analysis
    from profkit import report

    def runner_share(ctx):                           # frames in -> Markdown + tables out
        cost = analysis.runner_cost(ctx.data.tables.candidates)
        if cost.empty:
            return None                              # nothing to say: the section is left out
        return report.Section(
            "Where measuring time went per runner", "Candidates timed and seconds spent, per runner.",
            tables=(report.Table(cost, "runner_cost", sort_by="measure_s", what="most seconds first"),),
            page="cost")

    report.SECTIONS.insert(report.SECTIONS.index(report.provenance_section), runner_share)

A figure is a :class:`FigureSpec` (``FigureSpec(name, title, caption, draw=lambda: plot_x(frame, ...))``)
whose ``plot_*`` lives in ``profkit/views/``. Nothing else changes: the navigation, the CSV
files, ``--only`` and both writers pick the section up.
"""

from __future__ import annotations

from typing import Callable

from profkit.report._build import build_report
from profkit.report._detail import (break_even_section, cost_detail_section, e2e_section, moe_detail_section,
                                    outside_tuning_section, plan_section, provenance_section, repeats_section,
                                    speedup_section, step_section, step_set_figures_section, step_sets_section,
                                    step_times_section, tactic_section, verify_detail_section)
from profkit.report._main import (across_gpus_section, across_gpus_title, cost_section, failure_lines,
                                  findings_markdown, headline_markdown, moe_section, serving_section, verdict_line,
                                  verdict_section)
from profkit.report._model import ReportModel, build_model
from profkit.report._page import PAGES, FigureSpec, ReportContext, Section, Table, page_file
from profkit.report._ranks import ranks_section
from profkit.report._render import html_page, markdown_page, markdown_table

# The two figures the README shows (``profkit report --only tactic_map,speedup``).
README_FIGURES = ("tactic_map", "speedup")

SECTIONS: list[Callable[[ReportContext], Section | None]] = [
    # the main page
    verdict_section, across_gpus_section, cost_section, serving_section, moe_section,
    # the detail pages
    tactic_section, speedup_section, outside_tuning_section, cost_detail_section, break_even_section, step_section,
    step_times_section, step_sets_section, step_set_figures_section, verify_detail_section, e2e_section,
    moe_detail_section, plan_section, repeats_section, ranks_section, provenance_section,
]

__all__ = [
    "ReportModel", "across_gpus_section", "across_gpus_title", "build_model",
    "PAGES", "README_FIGURES", "SECTIONS", "FigureSpec", "ReportContext", "Section", "Table", "break_even_section",
    "build_report", "cost_detail_section", "cost_section", "e2e_section", "failure_lines", "findings_markdown",
    "headline_markdown", "html_page", "markdown_page", "markdown_table", "moe_detail_section", "moe_section", "outside_tuning_section",
    "page_file", "plan_section", "provenance_section", "ranks_section", "repeats_section", "serving_section", "speedup_section",
    "step_section", "step_set_figures_section", "step_sets_section", "step_times_section", "tactic_section",
    "verdict_line", "verdict_section", "verify_detail_section",
]
