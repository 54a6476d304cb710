"""An ipywidgets explorer: pick op, shape, run, runner and bucket; see the candidates and the card.

It only wires controls to :mod:`profkit.analysis` and to ``views.plot_*(..., ax=...)``: the
figure is one matplotlib Figure redrawn in place and shown as a PNG image widget, so it renders
the same in JupyterLab, VS Code and exported notebooks, whatever matplotlib backend is active.
Its display also carries a static picture of itself (the figure and the card), which a notebook
read without a kernel (a code host, nbconvert) shows in place of the live controls.
"""

from __future__ import annotations

import base64
import html
import io
from typing import Mapping

import pandas as pd
from matplotlib.figure import Figure

from profkit import analysis
from profkit.errors import ProfkitError
from profkit.views._candidates import plot_candidates
from profkit.views._speedup import plot_speedup

_ALL = "(all runners)"


def _widgets():
    try:
        import ipywidgets
    except ImportError as exc:
        raise ImportError("profkit.views.explorer needs ipywidgets, which failed to import "
                          f"({exc}); install the notebook extra: pip install 'profkit[notebook]'") from exc
    return ipywidgets


def explorer(tables, *, noise: pd.DataFrame | None = None, labels: Mapping[str, str] | None = None,
             k: int = 8):
    """Build the interactive explorer over one set of tables.

    Selectors: op, shape (problem shape of that op), run, runner (all or one) and bucket. They
    drive a two-panel figure (every candidate per bucket with the selected bucket shaded, and
    the speedup curve of that op), the "why this tactic" :class:`~profkit.analysis.WinnerCard`
    of the selected bucket, and the bucket's candidate table with decoded tactics.

    Args:
        tables: a :class:`profkit.Tables` (e.g. ``profkit.load("data/h200/fp8")``).
        noise: noise estimate from :func:`profkit.analysis.noise` (default: from ``tables``).
        labels: display names per shape label.
        k: candidates listed on the card.

    Returns:
        An :class:`Explorer` (an ``ipywidgets.VBox``); end a notebook cell with it.

    Raises:
        ImportError: when ipywidgets is missing (names the ``profkit[notebook]`` extra).
        ProfkitError: when the tables hold no candidates.
    """
    widgets = _widgets()
    if tables.candidates.empty:
        raise ProfkitError("the explorer needs candidates; these tables hold none (a cache file has only winners)")
    return _make_explorer(widgets)(tables, noise=noise, labels=labels, k=k)


def _make_explorer(widgets):
    class Explorer(widgets.VBox):
        """The explorer widget; its controls are attributes, for scripting and tests."""

        def __init__(self, tables, *, noise, labels, k):
            self.tables = tables
            self.labels = dict(labels or {})
            self.k = k
            candidates = tables.candidates.assign(shape=analysis.shapes_of(tables.candidates).to_numpy())
            self.candidates = candidates
            self.noise = noise if noise is not None else analysis.noise(candidates)
            self.speedups = analysis.speedup_vs_default(candidates, noise=self.noise)
            self.figure = Figure(figsize=(12.5, 3.9), layout="constrained")
            self._busy = False
            ops = sorted(candidates["op"].dropna().unique())
            style = {"description_width": "initial"}
            self.op = widgets.Dropdown(options=ops, description="op", style=style)
            self.shape = widgets.Dropdown(description="shape", style=style)
            self.run = widgets.Dropdown(description="run", style=style)
            self.runner = widgets.Dropdown(description="runner", style=style)
            self.bucket = widgets.SelectionSlider(options=[0], description="bucket", continuous_update=False,
                                                  style=style, layout=widgets.Layout(width="420px"))
            self.image = widgets.Image(format="png", layout=widgets.Layout(width="100%"))
            self.card = widgets.HTML(layout=widgets.Layout(width="60%"))
            self.table = widgets.HTML(layout=widgets.Layout(width="40%"))
            self.status = widgets.HTML()
            controls = widgets.HBox([self.op, self.shape, self.run, self.runner])
            super().__init__([widgets.HTML("<b>profkit explorer</b>: what FlashInfer's autotuner picked, and why"),
                              controls, self.bucket, self.image, self.status,
                              widgets.HBox([self.card, self.table])])
            self.add_class("profkit-explorer")
            self.op.observe(self._on_op, names="value")
            self.shape.observe(self._on_shape, names="value")
            for w in (self.run, self.runner, self.bucket):
                w.observe(self._redraw, names="value")
            self._on_op()

        def _repr_mimebundle_(self, **kwargs):
            """The live widget, plus a static picture (figure, selection, card) for readers without a kernel."""
            bundle = super()._repr_mimebundle_(**kwargs) or {}
            png = base64.b64encode(self.image.value).decode("ascii")
            picked = (f"op {self.op.value}, shape {self.labels.get(self.shape.value, self.shape.value)}, "
                      f"run {self.run.value}, runner {self.runner.value}, bucket {self.bucket.value}")
            bundle["image/png"] = png
            bundle["text/html"] = (f"<div><b>profkit explorer</b> (a static picture: {html.escape(picked)}; run the "
                                   f"notebook for the controls)<br><img src='data:image/png;base64,{png}' "
                                   f"style='max-width:100%'/>{self.card.value}</div>")
            return bundle

        # -- cascading selectors ---------------------------------------------------------
        def _rows(self, *, shape=True, run=True):
            c = self.candidates[(self.candidates["op"] == self.op.value).fillna(False).to_numpy(dtype=bool)]
            if shape and self.shape.value is not None:
                c = c[(c["shape"] == self.shape.value).fillna(False).to_numpy(dtype=bool)]
            if run and self.run.value is not None:
                c = c[(c["run_id"] == self.run.value).fillna(False).to_numpy(dtype=bool)]
            return c

        def _on_op(self, *_):
            shapes = sorted(self._rows(shape=False, run=False)["shape"].dropna().unique())
            self._busy = True
            self.shape.options = [(self.labels.get(s, s), s) for s in shapes]
            self.shape.value = shapes[0] if shapes else None
            self._busy = False
            self._on_shape()

        def _on_shape(self, *_):
            if self._busy:
                return
            c = self._rows(run=False)
            runs = sorted(c["run_id"].dropna().unique())
            runners = sorted(c["runner"].dropna().unique())
            buckets = sorted(int(b) for b in c["bucket"].dropna().unique()) or [0]
            self._busy = True
            self.run.options = runs
            self.run.value = runs[0] if runs else None
            self.runner.options = [_ALL] + runners
            self.runner.value = _ALL
            keep = self.bucket.value if self.bucket.value in buckets else buckets[len(buckets) // 2]
            self.bucket.options = buckets
            self.bucket.value = keep
            self._busy = False
            self._redraw()

        # -- drawing -----------------------------------------------------------------------
        def _redraw(self, *_):
            if self._busy or self.shape.value is None:
                return
            op, shape, run, bucket = self.op.value, self.shape.value, self.run.value, self.bucket.value
            runners = None if self.runner.value == _ALL else [self.runner.value]
            fig = self.figure
            fig.clear()
            left, right = fig.subplots(1, 2, width_ratios=[1.15, 1.0])
            messages = []
            try:
                plot_candidates(self.candidates, op=op, shape=shape, run_id=run, runners=runners, highlight=bucket,
                                labels=self.labels, ax=left)
                s = self.speedups[((self.speedups["op"] == op) & (self.speedups["shape"] == shape)
                                   & (self.speedups["run_id"] == run)).fillna(False).to_numpy(dtype=bool)]
                plot_speedup(s, labels=self.labels, ax=right)
                right.axvline(bucket, color="#333333", linestyle="--", linewidth=0.9)
                # Two panels side by side: short titles, legends inside the axes.
                left.set_title(f"{op}  {self.labels.get(shape, shape)}: every candidate", fontsize=9)
                left.legend(loc="upper right", fontsize=6.5)
                right.set_title("speedup vs default (selected bucket dashed)", fontsize=9)
                if right.get_legend() is not None:
                    right.get_legend().remove()
            except ProfkitError as exc:
                messages.append(str(exc))
            buf = io.BytesIO()
            fig.savefig(buf, format="png", dpi=90)
            self.image.value = buf.getvalue()
            try:
                card = analysis.winner_card(self.candidates, op=op, bucket=bucket, shape=shape, run_id=run,
                                            k=self.k, tuning=self.tables.tuning, runs=self.tables.runs,
                                            noise=self.noise)
                # Wrap long lines (profiles, WARNINGs) instead of scrolling sideways.
                self.card.value = ("<pre style='font-size:11px;line-height:1.25;white-space:pre-wrap;"
                                   "word-break:normal;overflow-wrap:break-word'>"
                                   f"{html.escape(repr(card))}</pre>")
            except ProfkitError as exc:
                self.card.value = ""
                messages.append(str(exc))
            self.table.value = self._table_html(op, shape, run, bucket, runners)
            self.status.value = "".join(f"<div style='color:#c62828'>{html.escape(m)}</div>" for m in messages)

        def _table_html(self, op, shape, run, bucket, runners) -> str:
            c = self._rows()
            c = c[(c["bucket"] == bucket).fillna(False).to_numpy(dtype=bool)]
            if runners is not None:
                c = c[c["runner"].isin(runners).to_numpy(dtype=bool)]
            if c.empty:
                return "<i>no candidates</i>"
            c = analysis.decode_tactics(c).sort_values(["time_ms", "seq"], kind="stable")
            best = c.loc[c["source"] != "default", "time_ms"].min()
            view = pd.DataFrame({
                "runner": c["runner"], "tactic": c["tactic_desc"], "time_us": (c["time_ms"] * 1000).round(3),
                "vs_winner_pct": (100 * (c["time_ms"] / best - 1)).round(2), "status": c["status"],
                "source": c["source"]})
            return ("<div style='max-height:360px;overflow:auto;font-size:11px'>"
                    + view.to_html(index=False, border=0, na_rep="") + "</div>")

    return Explorer
