"""A figure as file bytes (PNG, SVG, PDF), deterministic: no creation date or software name in the metadata."""

from __future__ import annotations

import io
import struct
import zlib
from typing import Iterable

import matplotlib as mpl
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from profkit.views._style import DPI

# Deterministic files: no creation date or software name.
_METADATA = {"svg": {"Date": None}, "pdf": {"CreationDate": None}}
# Read while drawing, not when the plot functions run: glyphs unhinted (at 200 dpi hinting moves no stroke that
# shows, and FreeType's hinter cost 11% of the report's figure CPU: text is a third of it); SVG text as text
# (selectable, searchable, smaller than glyph paths) with ids from a fixed salt (else a random one per save).
RENDER_RC = {"text.hinting": "no_hinting", "svg.fonttype": "none", "svg.hashsalt": "profkit"}


def figure_files(fig: Figure, formats: Iterable[str], *, dpi: float = DPI) -> dict[str, bytes]:
    """``fig`` as a file per format ("png", "svg", "pdf"), in order; PNG at ``dpi`` (:func:`_png`), the others
    through ``savefig``, drawn with :data:`RENDER_RC`."""
    out = {}
    with mpl.rc_context(RENDER_RC):
        for fmt in formats:
            if fmt == "png":
                out[fmt] = _png(fig, dpi)
            else:
                buf = io.BytesIO()
                fig.savefig(buf, format=fmt, dpi=dpi, metadata=_METADATA.get(fmt))
                out[fmt] = buf.getvalue()
    return out


def _png(fig: Figure, dpi: float) -> bytes:
    """The pixels ``savefig(format="png", dpi=dpi)`` draws, in about 70% of its CPU time (the report's figures).

    savefig lays a constrained figure out in a draw pass of its own, then draws it again; here the
    layout runs once, with the renderer that then draws (its text sizes are measured once), and the
    figure draws once; the file is written by :func:`_png_file`.
    """
    canvas = FigureCanvasAgg(fig)  # the layout and the drawing share this canvas's renderer
    engine, figure_dpi = fig.get_layout_engine(), fig.dpi
    fig.set_dpi(dpi)
    try:
        if engine is not None:
            engine.execute(fig)
            with mpl.rc_context({"figure.autolayout": False, "figure.constrained_layout.use": False}):
                fig.set_layout_engine(None)  # laid out: savefig draws once
        raw = io.BytesIO()
        fig.savefig(raw, format="rgba", dpi=dpi)
        width, height = canvas.get_width_height(physical=True)  # the renderer's, at ``dpi``
    finally:  # as savefig leaves it, for a next format
        fig.set_layout_engine(engine)
        fig.set_dpi(figure_dpi)
    pixels = np.frombuffer(raw.getbuffer(), np.uint8).reshape(height, width, 4)
    return _png_file(pixels[..., :3] if pixels[..., 3].min() == 255 else pixels, dpi)


def _png_file(pixels: np.ndarray, dpi: float) -> bytes:
    """RGB or RGBA ``pixels`` (rows x columns x channels, uint8) as a PNG file with its resolution.

    Rows are stored unfiltered at zlib level 3: a chart's flat colours compress as small as
    savefig's adaptive filters at level 6 (within 2% on the report's figures) in a sixth of the time.
    """
    height, width, channels = pixels.shape
    rows = np.zeros((height, 1 + width * channels), np.uint8)  # each row: filter type 0 (none), then its bytes
    rows[:, 1:] = pixels.reshape(height, -1)
    per_metre = int(dpi / 0.0254 + 0.5)
    chunks = ((b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2 if channels == 3 else 6, 0, 0, 0)),
              (b"pHYs", struct.pack(">IIB", per_metre, per_metre, 1)),
              (b"IDAT", zlib.compress(rows.tobytes(), 3)), (b"IEND", b""))
    return b"\x89PNG\r\n\x1a\n" + b"".join(struct.pack(">I", len(data)) + kind + data
                                           + struct.pack(">I", zlib.crc32(kind + data)) for kind, data in chunks)
