"""Markdown that carries no HTML and no unsafe link, whatever names it holds.

Shared by the report's ``index.md`` and ``profkit advise``'s ``plan.md`` (both hold op, runner,
model and path names from other people's machines). Free of matplotlib, so ``profkit.outputs``
can use it.
"""

from __future__ import annotations

import html
import re

from profkit.printable import printable

_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")
_CONTROL = re.compile(r"[\x00-\x20\x7f]+")
_ANCHOR_LINE = re.compile(r"<a id='fig-[A-Za-z0-9._-]+'></a>")
_DESTINATION = re.compile(r"\]\(([^)]*)")
_REFERENCE = re.compile(r"( {0,3})\[([^\]]+)\]:[ \t]*(\S+)")


def safe_href(href: str) -> str | None:
    """``href`` when it is http(s) or relative, else None. ``href`` may be HTML-escaped already."""
    plain = _CONTROL.sub("", html.unescape(str(href))).replace("\\", "").lstrip("<")
    scheme = _SCHEME.match(plain)
    if scheme is None:
        return href
    return href if scheme.group(0).lower() in ("http:", "https:") else None


def markdown_safe(page: str) -> str:
    """A Markdown page with no raw HTML from its text and no link to an unsafe target.

    Lines that are exactly one of profkit's figure anchors (``<a id='fig-NAME'></a>``, NAME a
    ``profkit.report._html.slug``) are kept; in every other line ``<`` becomes ``&lt;``. Only ``<``
    opens HTML in Markdown; inside a code span it then shows as ``&lt;``, the price of not trusting
    where code spans made of hostile backticks end. Line ends are Markdown's (``\\r`` too). Control,
    bidirectional and surrogate characters are shown as their escapes (:func:`profkit.printable.printable`),
    so a name's ESC sequence is not obeyed by a terminal that prints the file.
    """
    out = []
    for line in page.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        if _ANCHOR_LINE.fullmatch(line):
            out.append(line)
            continue
        line = printable(line).replace("<", "&lt;")
        ref = _REFERENCE.match(line)
        if ref and safe_href(ref.group(3)) is None:  # "[x]: javascript:..." would define a link target
            line = ref.group(1) + "\\" + line[len(ref.group(1)):]
        out.append(_DESTINATION.sub(_defuse, line))
    return "\n".join(out)


def _defuse(m: re.Match) -> str:
    """``](dest`` kept when ``dest`` (before any title) is safe, else ``]\\(dest``: no link forms."""
    dest = m.group(1).strip().split(maxsplit=1)
    return m.group(0) if not dest or safe_href(dest[0]) is not None else "]\\(" + m.group(1)


def fence(text: str, info: str = "text") -> list[str]:
    """``text`` as a fenced code block whose fence is longer than any backtick run in it."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    mark = "`" * max(3, longest + 1)
    return [mark + info, text, mark]


def table_cell(text) -> str:
    """``text`` as one Markdown table cell: its pipes escaped, its line breaks and other control characters shown as
    escapes (:func:`profkit.printable.printable`), so no name can end the cell or the row."""
    return printable(text).replace("|", "\\|")
