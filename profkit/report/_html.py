"""Text from captures, logs and caches placed safely into the report's HTML and Markdown.

Op, runner, model and path names come from other people's machines, so the report treats them
as text everywhere:

- :func:`slug` turns a figure or table name (built from op and model names) into a file name and
  element id of ``[A-Za-z0-9._-]`` only; a name that had to change gets a short hash, so two
  names never share a file.
- :func:`safe_href` keeps a link target only when it is ``http(s)`` or relative (``#anchor``,
  ``file.csv``); ``javascript:``, ``data:`` and every other scheme are dropped.
- :func:`inline` turns the sections' small Markdown (`code`, **bold**, [text](href)) into HTML
  inside already escaped text, with links through :func:`safe_href`.
- :func:`markdown_safe` makes Markdown that carries no raw HTML: every ``<`` from the text becomes
  ``&lt;`` (profkit's own figure anchors excepted) and links with an unsafe target lose the link.

The last two live in :mod:`profkit.outputs.markdown` (free of matplotlib: ``plan.md`` uses them too).
"""

from __future__ import annotations

import hashlib
import html
import re

from profkit.outputs.markdown import markdown_safe, safe_href
from profkit.printable import printable

__all__ = ["escape", "inline", "markdown_safe", "safe_href", "slug"]

_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_LINK = re.compile(r"\[([^\]]+)\]\(([^)\s]+)\)")


def slug(name: str) -> str:
    """``name`` as a file name and HTML id (``a/b`` -> ``a_b-c14cddc0``).

    A name of ``[A-Za-z0-9._-]`` (not starting with a dot or dash) stays as it is; any other
    becomes its safe characters plus 8 hex digits of its hash. Applying it twice changes nothing.
    """
    name = str(name)
    if _SAFE_NAME.fullmatch(name) and len(name) <= 120:
        return name
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._-")[:100] or "x"
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{cleaned}-{digest}"


def escape(text) -> str:
    """``text`` escaped for HTML element content and quoted attribute values (quotes included), its control,
    bidirectional and surrogate characters but line breaks shown as their escapes (:func:`profkit.printable.printable`)."""
    return html.escape(printable(text, newlines=True), quote=True)


def inline(escaped: str) -> str:
    """`code`, **bold** and [text](href) in already escaped text; a link with an unsafe target stays text."""
    escaped = re.sub(r"`([^`]+)`", r"<code>\1</code>", escaped)
    escaped = re.sub(r"\*\*([^*]+)\*\*", r"<b>\1</b>", escaped)

    def link(m: re.Match) -> str:
        href = safe_href(m.group(2))
        return m.group(1) if href is None else f"<a href='{href}'>{m.group(1)}</a>"

    return _LINK.sub(link, escaped)
