"""views.figure_files: the PNG has the pixels savefig draws with its render settings (laid out once, RGB when opaque,
a valid file); a format saved after it draws as after savefig."""

from __future__ import annotations

import io

import matplotlib as mpl
import numpy as np
import pytest
from matplotlib.figure import Figure
from PIL import Image

from profkit import views
from profkit.views._export import RENDER_RC


def _figure(layout: str | None = "constrained", facecolor: str = "white", height: float = 3.0) -> Figure:
    """Two panels, a log2 axis, a wrapped note under the axes, a title and a legend outside: what the layout moves."""
    fig = Figure(figsize=(6.0, height), layout=layout, facecolor=facecolor)
    left, right = fig.subplots(1, 2)
    left.plot([1, 2, 4, 8], [3, 1, 2, 5], marker="o", label="tuned")
    left.set_xscale("log", base=2)
    right.bar(["a", "b"], [2, 4], label="default")
    left.annotate("a note under the axes, long enough to wrap at the figure's edge " * 2, xy=(0, 0),
                  xycoords="axes fraction", xytext=(0, -30), textcoords="offset points", fontsize=7, wrap=True)
    fig.suptitle("step time per state")
    fig.legend(loc="outside lower center" if layout else "lower center")
    return fig


def _savefig(fig: Figure, fmt: str) -> bytes:
    buf = io.BytesIO()
    with mpl.rc_context(RENDER_RC):
        fig.savefig(buf, format=fmt, dpi=views.DPI, metadata={"png": {"Software": None}, "svg": {"Date": None}}[fmt])
    return buf.getvalue()


def _pixels(png: bytes) -> np.ndarray:
    with Image.open(io.BytesIO(png)) as img:
        return np.asarray(img.convert("RGBA"))


# A height computed a hair under 8.9 in: 1780 px at 200 dpi, as the canvas rounds it (int() would cut a row).
@pytest.mark.parametrize("layout, height", [("constrained", 3.0), (None, 3.0), ("constrained", 8.899999999999999)])
def test_png_has_the_pixels_savefig_draws_as_rgb_without_text_chunks(layout, height):
    png = views.figure_files(_figure(layout, height=height), ["png"])["png"]
    assert np.array_equal(_pixels(png), _pixels(_savefig(_figure(layout, height=height), "png")))
    with Image.open(io.BytesIO(png)) as img:
        img.verify()  # every chunk's CRC
    with Image.open(io.BytesIO(png)) as img:
        assert img.mode == "RGB" and round(img.info["dpi"][0]) == views.DPI and not img.text


def test_a_transparent_figure_keeps_its_alpha():
    png = views.figure_files(_figure(facecolor="none"), ["png"])["png"]
    with Image.open(io.BytesIO(png)) as img:
        assert img.mode == "RGBA" and img.getchannel("A").getextrema()[0] == 0
    assert np.array_equal(_pixels(png), _pixels(_savefig(_figure(facecolor="none"), "png")))


def test_a_format_after_the_png_draws_as_after_savefig_and_the_figure_is_left_as_savefig_leaves_it():
    fig = _figure()
    files = views.figure_files(fig, ["png", "svg"])
    before = _figure()
    _savefig(before, "png")
    assert list(files) == ["png", "svg"] and files["svg"] == _savefig(before, "svg")
    assert fig.get_layout_engine() is not None and fig.dpi == before.dpi


def test_svg_text_is_text_and_the_files_are_the_same_every_time():
    fonttype = mpl.rcParams["svg.fonttype"]
    files = [views.figure_files(_figure(), ["svg", "png"]) for _ in range(2)]
    svg = files[0]["svg"].decode()
    assert "step time per state</text>" in svg and "DejaVuSans" not in svg  # no glyph outlines
    assert files[0] == files[1]  # ids from a fixed salt, no date
    assert mpl.rcParams["svg.fonttype"] == fonttype  # nothing global changed


def test_render_settings_apply_while_drawing_and_are_undone():
    hinting = mpl.rcParams["text.hinting"]
    png = views.figure_files(_figure(), ["png"])["png"]
    with mpl.rc_context({"text.hinting": "force_autohint"}):
        hinted = views.figure_files(_figure(), ["png"])["png"]
    assert np.array_equal(_pixels(png), _pixels(hinted))  # the render settings win over the caller's
    assert mpl.rcParams["text.hinting"] == hinting
