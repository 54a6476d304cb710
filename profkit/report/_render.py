"""The report's pages as Markdown and as self-contained HTML (figures embedded as PNG).

Every value from the data (op, runner, model and path names, numbers) is escaped; links keep only
http(s) and relative targets (:mod:`profkit.report._html`). The writers format; they compute nothing.
"""

from __future__ import annotations

import base64
import re
from typing import Mapping, Sequence

from profkit.outputs.markdown import table_cell
from profkit.printable import printable
from profkit.report import _html
from profkit.report._page import PAGE_TITLES, Section, Table, page_file
from profkit import views as _format

INTRO = "What FlashInfer's autotuner picked, what tuning cost, and whether it paid off: the verdicts first."


def markdown_table(table: Table) -> str:
    """The table's shown rows as GitHub-flavoured Markdown, numbers formatted, with its footer."""
    shown = _format.display_frame(table.shown())
    cols = list(shown.columns)
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for row in shown.itertuples(index=False):
        lines.append("| " + " | ".join(table_cell(v) for v in row) + " |")
    return "\n".join(lines + ["", table.footer()])


def _title(page: str) -> str:
    return "profkit report" if page == "index" else f"profkit report: {PAGE_TITLES.get(page, page)}"


def _nav_items(pages: Sequence[str], page: str, ext: str) -> list[tuple[str, str | None]]:
    """(title, file or None for the current page) per page of the report."""
    return [(PAGE_TITLES.get(p, p), None if p == page else page_file(p, ext)) for p in pages]


def markdown_page(data, sections: Sequence[Section], *, img: str = "png", page: str = "index",
                  pages: Sequence[str] = ()) -> str:
    """A page as Markdown: navigation, intro, then every section with its loud lines, figures and tables."""
    parts = [f"# {_title(page)}", ""]
    if len(pages) > 1:
        parts += [" | ".join(f"**{t}**" if f is None else f"[{t}]({f})" for t, f in _nav_items(pages, page, "md")), ""]
    parts += [f"{INTRO} Data: `{data.root}`." if page == "index" else f"Data: `{data.root}`.", ""]
    for s in sections:
        parts += [f"## {s.title}", ""]
        for line in s.loud:
            parts += [f"> **{line}**", ""]
        if s.text:
            parts += [s.text, ""]
        for spec in s.figures:
            parts += [f"<a id='fig-{spec.name}'></a>", f"### {spec.title}", "", spec.caption, "",
                      f"![{spec.title}]({spec.name}.{img})", ""]
        for note in s.omitted:
            parts += [f"*{note}*", ""]
        for table in s.tables:
            parts += [markdown_table(table), ""] if table.top else [table.footer(), ""]
    text = "\n".join(parts)
    for other in pages:  # links between pages go to the Markdown files
        text = text.replace(f"]({page_file(other)}", f"]({page_file(other, 'md')}")
    return _html.markdown_safe(text)  # names from captures carry no HTML into the .md


CSS = """body{font-family:system-ui,sans-serif;max-width:1100px;margin:1.2em auto;padding:0 1em;color:#222;line-height:1.4}
h1{font-size:26px;margin:.2em 0 .3em}h2{font-size:20px;margin:1.2em 0 .4em;border-bottom:1px solid #e4e4e4}
h3{font-size:15px;margin:.3em 0}table{border-collapse:collapse;font-size:12px;margin:.5em 0 .3em}
th,td{border-bottom:1px solid #ddd;padding:2px 8px;text-align:right}th{background:#f4f4f4}
td:first-child,th:first-child{text-align:left}img{max-width:100%;height:auto}figure{margin:.6em 0 1.4em}
figcaption{color:#555;font-size:13px}code{font-size:12px;background:#f6f6f6;padding:0 2px}
nav{font-size:14px;margin:.3em 0 .6em}nav a,nav b{margin-right:.9em}.note{color:#777;font-style:italic}
.foot{font-size:12px;color:#555;margin-bottom:1.2em}.lead{color:#444}
.loud{background:#fdecea;border-left:5px solid #c62828;padding:.4em .8em;margin:.5em 0;font-weight:600}
ul.verdicts{padding-left:1.2em}ul.verdicts li{margin:.45em 0}details>summary{cursor:pointer;font-size:17px;
font-weight:600;margin:1em 0 .3em}table.verdicts{font-size:14px;margin:.3em 0 1em}
table.verdicts td,table.verdicts th{text-align:left;padding:4px 10px}"""


def html_page(data, sections: Sequence[Section], pngs: Mapping[str, bytes], *, page: str = "index",
              pages: Sequence[str] = (), widths: Mapping[str, int] | None = None) -> str:
    """A page as self-contained HTML: the Markdown page's content with the figures embedded as PNG.

    Args:
        data: what the page is about (its ``root`` is named under the title).
        sections: the page's sections, in order.
        pngs: PNG bytes per figure name.
        page: the page's stem (``index`` is the main page).
        pages: every page of the report, for the navigation.
        widths: the width (CSS px) each figure is shown at most, so a small figure stays small.
    """
    esc = _html.escape
    widths = widths or {}
    parts = ["<!doctype html><html><head><meta charset='utf-8'>",
             f"<meta name='viewport' content='width=device-width'><title>{esc(_title(page))}</title>",
             f"<style>{CSS}</style></head><body>"]
    if len(pages) > 1:
        parts.append("<nav>" + "".join(f"<b>{esc(t)}</b>" if f is None else f"<a href='{esc(f)}'>{esc(t)}</a>"
                                       for t, f in _nav_items(pages, page, "html")) + "</nav>")
    parts.append(f"<h1>{esc(_title(page))}</h1>")
    lead = f"{INTRO} Data: " if page == "index" else "Data: "
    parts.append(f"<p class='lead'>{esc(lead)}<code>{esc(str(data.root))}</code>.</p>")
    for s in sections:
        body = []
        for line in s.loud:
            body.append(f"<div class='loud'>{_html.inline(esc(line))}</div>")
        body.append(_html_text(s.text, list_class="verdicts" if s.loud or s.page == "index" else ""))
        for spec in s.figures:
            src = f"data:image/png;base64,{base64.b64encode(pngs[spec.name]).decode('ascii')}" \
                if spec.name in pngs else ""
            width = f" style='max-width:min(100%,{int(widths[spec.name])}px)'" if spec.name in widths else ""
            body.append(f"<figure id='fig-{esc(spec.name)}'><h3>{esc(spec.title)}</h3>"
                        f"<img alt='{esc(spec.title)}' src='{src}'{width}><figcaption>{_html.inline(esc(spec.caption))}"
                        "</figcaption></figure>")
        for note in s.omitted:
            body.append(f"<p class='note'>{_html.inline(esc(note))}</p>")
        for table in s.tables:
            if table.top:
                shown = _format.display_frame(table.shown()).map(printable)  # a name's ESC shown, not obeyed
                body.append(shown.to_html(index=False, border=0, escape=True))
            body.append(f"<p class='foot'>{_html.inline(esc(table.footer()))}</p>")
        if s.collapsed:
            parts.append(f"<details id='{esc(s.anchor)}'><summary>{esc(s.title)}</summary>{''.join(body)}</details>")
        else:
            parts.append(f"<section id='{esc(s.anchor)}'><h2>{esc(s.title)}</h2>{''.join(body)}</section>")
    parts.append("</body></html>")
    return "\n".join(parts)


def _html_text(text: str, *, list_class: str = "") -> str:
    """The small Markdown the sections write: paragraphs, ``- `` lists and ``| a | b |`` tables."""
    out, items, rows = [], [], []
    cls = f" class='{list_class}'" if list_class else ""
    for line in text.splitlines() + [""]:
        if line.startswith("|") and line.rstrip().endswith("|"):
            rows.append(line)
            continue
        if rows:
            out.append(_html_table(rows))
            rows = []
        if line.startswith("- "):
            items.append(f"<li>{_html.inline(_html.escape(line[2:]))}</li>")
            continue
        if items:
            out.append(f"<ul{cls}>" + "".join(items) + "</ul>")
            items = []
        if line.strip():
            out.append(f"<p>{_html.inline(_html.escape(line))}</p>")
    return "".join(out)


def _html_table(rows: list[str]) -> str:
    """A Markdown pipe table (header, ``|---|`` rule, rows; ``\\|`` inside a cell) as an HTML table."""
    cells = [[c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", row.strip())[1:-1]] for row in rows]
    body = [r for r in cells[1:] if not all(set(c) <= set("-: ") for c in r)]
    head = "".join(f"<th>{_html.inline(_html.escape(c))}</th>" for c in cells[0])
    lines = "".join("<tr>" + "".join(f"<td>{_html.inline(_html.escape(c))}</td>" for c in r) + "</tr>" for r in body)
    return f"<table class='verdicts'><thead><tr>{head}</tr></thead><tbody>{lines}</tbody></table>"
