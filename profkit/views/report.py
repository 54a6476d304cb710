"""The profkit report: every figure as PNG and SVG, plus index.md and a self-contained index.html.

:func:`collect` reads a data directory (captures, op timings, ``profkit step`` results,
provenance files); :func:`build_report` runs the analyses, draws the figures and writes the
pages. The CLI (``profkit report``) only wires the two. The data layout is the shipped one
(``data/README.md``); any directory of saved captures works, the rest is optional.
"""

from __future__ import annotations

import base64
import dataclasses
import html
import io
import json
import math
import sys
import warnings
from pathlib import Path
from typing import Callable, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

import profkit
from profkit import analysis, schema
from profkit.errors import ProfkitError
from profkit.views import _style
from profkit.views._candidates import plot_candidates
from profkit.views._compare import plot_diff, plot_rank_divergence, plot_winner_flips
from profkit.views._e2e import plot_kernel_vs_e2e, plot_op_timings, plot_step_change
from profkit.views._speedup import plot_speedup
from profkit.views._step import STATE_ORDER, plot_step_times
from profkit.views._tactic_map import plot_tactic_map
from profkit.views._tuning import plot_tuning_time, plot_tuning_value

# The two figures the README shows (``profkit report --only tactic_map,speedup``).
README_FIGURES = ("tactic_map", "speedup")
_ENV = ("gpu", "driver", "cuda", "torch", "flashinfer", "cudnn", "cublas", "cudnn_frontend", "python", "host")


def shipped_data() -> Path:
    """The H200 data shipped in the repository (``data/h200``)."""
    return Path(__file__).resolve().parents[2] / "data" / "h200"


def shipped_bench() -> list[Path]:
    """The public autotune off/on serving pair shipped with the data (SGLang PR #12306), baseline first."""
    pair = Path(__file__).resolve().parents[2] / "data" / "engines" / "sglang_pr12306"
    return [pair / "seed_sglang_pr12306_autotune_main.txt", pair / "seed_sglang_pr12306_autotune_pr.txt"]


@dataclasses.dataclass(frozen=True, eq=False)
class ReportData:
    """Everything the report reads.

    Attributes:
        tables: all captures under the root, stacked.
        op_timings: the op timed outside tuning (empty when none).
        step: ``profkit step`` rows (engine "profkit-step"; empty when none).
        bench: other engine results given with ``bench=`` (empty when none).
        provenance: provenance.json contents by directory (relative to the root).
        step_captures: run_id of the tuning-pass capture per (model, dtype) of ``step``.
        root: the directory read.
    """

    tables: schema.Tables
    op_timings: pd.DataFrame
    step: pd.DataFrame
    bench: pd.DataFrame
    provenance: dict
    step_captures: dict
    root: Path

    def __repr__(self) -> str:
        return (f"ReportData {self.root}\n  {len(self.tables.runs)} runs, {len(self.tables.candidates)} candidates, "
                f"{len(self.op_timings)} op timings, {len(self.step)} step rows, {len(self.bench)} bench rows")


def collect(path: str | Path | None = None, *, bench: Sequence[str | Path] = ()) -> ReportData:
    """Read a data directory for the report.

    Args:
        path: the directory (default: the shipped ``data/h200``); every saved capture below it
            is loaded (``profkit.load``), with ``op_timings.parquet``, ``step.jsonl`` and
            ``provenance.json`` files where present.
        bench: engine result files to add (read with ``profkit.read_bench``, labelled by file
            name), e.g. an autotune off/on pair of SGLang ``bench_serving`` outputs, baseline first.

    Returns:
        A :class:`ReportData`.

    Raises:
        ProfkitError: when the directory holds no capture.
    """
    root = Path(path) if path is not None else shipped_data()
    if not root.exists():
        raise ProfkitError(f"{root}: no such directory; pass a directory of profkit captures")
    tables = profkit.load(root)
    timings = [pd.read_parquet(p) for p in sorted(root.rglob("op_timings.parquet"))]
    op_timings = schema.conform(pd.concat(timings, ignore_index=True), "op_timings") if timings else schema.empty(
        "op_timings")
    steps, captures = [], {}
    for p in sorted(root.rglob("step.jsonl")):
        rows = profkit.read_bench(p, format="profkit-step")
        steps.append(rows.assign(source=str(p.parent.relative_to(root))))
        if (p.parent / "capture" / "runs.parquet").is_file() and {"model", "dtype"} <= set(rows.columns):
            run = pd.read_parquet(p.parent / "capture" / "runs.parquet")["run_id"].iloc[0]
            captures[(str(rows["model"].iloc[0]), str(rows["dtype"].iloc[0]))] = str(run)
    step = pd.concat(steps, ignore_index=True) if steps else pd.DataFrame()
    provenance = {str(p.parent.relative_to(root)): json.loads(p.read_text()) for p in sorted(root.rglob("provenance.json"))}
    # Label rows by file name so a pair stays apart; the first file is the baseline.
    frames = [profkit.read_bench(str(b), label=Path(b).stem) for b in bench]
    bench_frame = pd.concat(frames, ignore_index=True) if frames else schema.empty("bench")
    return ReportData(tables=tables, op_timings=op_timings, step=step, bench=bench_frame, provenance=provenance,
                      step_captures=captures, root=root)


def shape_labels(data: ReportData) -> dict[str, str]:
    """Display names per shape label ('N=6144 K=4096' -> 'llama3-8b qkv') from op timings and provenance."""
    labels: dict[str, str] = {}
    t = data.op_timings
    if {"model", "layer", "n", "k"} <= set(t.columns):
        for model, layer, n, k in t[["model", "layer", "n", "k"]].drop_duplicates().itertuples(index=False):
            labels.setdefault(f"N={int(n)} K={int(k)}", f"{model} {layer}")
    for prov in data.provenance.values():
        for shape in prov.get("shapes", []) or []:
            if {"name", "n", "k"} <= set(shape):
                op, _, rest = str(shape["name"]).partition("-")
                model, _, layer = rest.rpartition("-")
                labels.setdefault(f"N={int(shape['n'])} K={int(shape['k'])}", f"{model} {layer}".strip())
    try:
        from profkit.models import available, linear_layers, load_model

        for name in available():
            for lin in linear_layers(load_model(name)):
                labels.setdefault(f"N={lin.n} K={lin.k}", f"{name} {lin.name}")
    except (ImportError, ProfkitError, TypeError, ValueError):
        pass
    return labels


@dataclasses.dataclass
class Results:
    """The analysis frames the report draws and tabulates."""

    noise: pd.DataFrame
    winners: pd.DataFrame
    primary_runs: list
    speedups: pd.DataFrame
    breakdown: pd.DataFrame
    calls: pd.DataFrame
    value: pd.DataFrame
    worth: pd.DataFrame
    stability: pd.DataFrame
    ranks: pd.DataFrame
    diff: pd.DataFrame
    diff_names: tuple
    cache_diff: pd.DataFrame
    between: pd.DataFrame
    step_measured: pd.DataFrame
    step_predicted: pd.DataFrame
    e2e: pd.DataFrame
    step_rows: pd.DataFrame = dataclasses.field(default_factory=pd.DataFrame)
    step_tuning: pd.DataFrame = dataclasses.field(default_factory=pd.DataFrame)
    step_break_even: pd.DataFrame = dataclasses.field(default_factory=pd.DataFrame)


def analyse(data: ReportData) -> Results:
    """Run every analysis the report needs (pure functions over ``data``'s frames)."""
    t = data.tables
    noise = analysis.noise(t.candidates)
    won = analysis.winners(t.candidates, noise=noise)
    primary = _primary_runs(won, t.runs)
    # One decision per bucket for the headline figures: the first call of the first run.
    prim = won[won["run_id"].isin(primary).to_numpy(dtype=bool)].sort_values("call", kind="stable")
    prim = prim.drop_duplicates(["run_id", "op", "profile"])
    speedups = analysis.speedup_vs_default(prim)
    breakdown = analysis.tuning_breakdown(t.tuning)
    calls = analysis.tuning_breakdown(t.tuning, by="call")
    prim_tuning = t.tuning[t.tuning["run_id"].isin(primary).to_numpy(dtype=bool)]
    value = analysis.tuning_value(speedups, prim_tuning)
    worth = analysis.worth_tuning(speedups, prim_tuning)
    stability = analysis.winner_stability(won, candidates=t.candidates)
    ranks = analysis.rank_divergence(t.candidates, noise=noise)
    diff, names = _repeat_diff(won, primary, t.candidates)
    cache_diff = _cache_diff(data, won)
    between = analysis.between_buckets(data.op_timings, speedups=speedups) if len(data.op_timings) else pd.DataFrame()
    step_rows = _step_rows(data)
    measured, predicted = _step_change(data, t, step_rows)
    step_tuning = _step_tuning(data, t)
    break_even = _step_break_even(measured, step_tuning)
    e2e = _kernel_vs_e2e(data, speedups)
    return Results(noise=noise, winners=won, primary_runs=primary, speedups=speedups, breakdown=breakdown,
                   calls=calls, value=value, worth=worth, stability=stability, ranks=ranks, diff=diff,
                   diff_names=names, cache_diff=cache_diff, between=between, step_measured=measured,
                   step_predicted=predicted, e2e=e2e, step_rows=step_rows,
                   step_tuning=step_tuning, step_break_even=break_even)


def _kernel_vs_e2e(data: ReportData, speedups: pd.DataFrame) -> pd.DataFrame:
    """Kernel speedups of the bench's model beside the serving pair (autotune off/on, else file order)."""
    if data.bench.empty:
        return pd.DataFrame()
    serving = data.bench[data.bench["total_output_tokens"].notna().to_numpy(dtype=bool)]
    if len(serving) < 2:
        return pd.DataFrame()
    flags = serving["autotune"].astype("boolean")
    known = not flags.isna().any() and flags.nunique() == 2
    pair = {} if known else {"baseline": str(serving["label"].iloc[0]), "treatment": str(serving["label"].iloc[1])}
    model = str(serving["model"].dropna().iloc[0]).rsplit("/", 1)[-1] if serving["model"].notna().any() else ""
    labels = shape_labels(data)
    mine = speedups[speedups["shape"].map(lambda s: model in labels.get(s, "")).to_numpy(dtype=bool)] if model else speedups
    try:
        return analysis.kernel_vs_e2e(mine if len(mine) else speedups, serving, **pair)
    except ProfkitError as exc:
        warnings.warn(f"bench files given but no serving pair found: {exc}", stacklevel=2)
        return pd.DataFrame()


def _primary_runs(won: pd.DataFrame, runs: pd.DataFrame) -> list:
    """The earliest run per (op, shape): the headline figures show one decision per bucket."""
    started = dict(zip(runs["run_id"], runs["started_at"].astype("string").fillna("")))
    order = won[["op", "shape", "run_id"]].drop_duplicates().assign(
        _t=lambda f: f["run_id"].map(started).fillna(""))
    first = order.sort_values(["_t", "run_id"], kind="stable").drop_duplicates(["op", "shape"])
    return sorted(first["run_id"].unique())


def _repeat_diff(won: pd.DataFrame, primary: list, candidates: pd.DataFrame):
    """Primary run vs the next run of the same shapes (a repeat), priced on the primary's candidates."""
    prim = won[won["run_id"].isin(primary).to_numpy(dtype=bool)]
    others = won[~won["run_id"].isin(primary).to_numpy(dtype=bool)]
    if others.empty:
        return pd.DataFrame(), ("a", "b")
    second = others.sort_values("run_id").drop_duplicates(["op", "profile"])
    a = prim[prim.set_index(["op", "profile"]).index.isin(second.set_index(["op", "profile"]).index)]
    run_b = sorted(second["run_id"].unique())
    diff = analysis.diff_winners(a, second, candidates=candidates[candidates["run_id"].isin(primary).to_numpy(dtype=bool)])
    return diff, ("first run", "next run (" + ", ".join(run_b[:2]) + ("..." if len(run_b) > 2 else "") + ")")


def _cache_diff(data: ReportData, won: pd.DataFrame) -> pd.DataFrame:
    """Capture winners vs the cache.json FlashInfer wrote in the same capture (should agree)."""
    rows = []
    for path in sorted(data.root.rglob("cache.json")):
        capture = path.parent / "capture" / "runs.parquet"
        if not capture.is_file():
            continue
        try:
            cached = profkit.read_cache(str(path)).winners
        except (ImportError, ProfkitError):
            continue
        run = pd.read_parquet(capture)["run_id"].iloc[0]
        mine = won[(won["run_id"] == run).fillna(False).to_numpy(dtype=bool)]
        mine = mine.sort_values("call").drop_duplicates(["op", "profile"])
        cached = cached[cached["profile"].isin(mine["profile"]).to_numpy(dtype=bool)].drop_duplicates(["op", "profile"])
        if mine.empty or cached.empty:
            continue
        d = analysis.diff_winners(mine, cached)
        rows.append(d.assign(run_id=run))
    return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame()


def _step_rows(data: ReportData) -> pd.DataFrame:
    """The step rows of the tuning runs (``step/``), not the sweep-cache reruns beside them."""
    if data.step.empty or not {"state", "step_ms", "tokens"} <= set(data.step.columns):
        return pd.DataFrame()
    source = data.step["source"].astype(str)
    return data.step[(source.str.startswith("step/") | ~source.str.contains("/")).to_numpy(dtype=bool)]


def _step_change(data: ReportData, t: schema.Tables, fresh: pd.DataFrame):
    """Measured change of each state in ``fresh`` (:func:`_step_rows`) vs untuned, and the tuned change the
    tuning-pass capture predicts."""
    if fresh.empty:
        return pd.DataFrame(), pd.DataFrame()
    from profkit.analysis import step as step_analysis
    from profkit.models import linear_layers, load_model

    measured = step_analysis.measured_step_change(fresh)
    predicted = []
    for (model, dtype), run in data.step_captures.items():
        try:
            linears = linear_layers(load_model(model))
        except ProfkitError:
            continue
        rows = fresh[(fresh["model"] == model) & (fresh["dtype"] == dtype)]
        tokens = sorted(int(x) for x in rows["tokens"].dropna().unique())
        layers = int(rows["layers"].iloc[0]) if "layers" in rows and len(rows) else 1
        w = t.winners[(t.winners["run_id"] == run).fillna(False).to_numpy(dtype=bool)]
        p = step_analysis.predict_step_change(w, shapes=[(lin.n, lin.k) for lin in linears], tokens=tokens,
                                              layers=layers)
        predicted.append(p.assign(model=model, dtype=dtype))
    return measured, (pd.concat(predicted, ignore_index=True) if predicted else pd.DataFrame())


def _step_tuning(data: ReportData, t: schema.Tables) -> pd.DataFrame:
    """Wall seconds of each step run's tuning pass: its capture's top-level tuning calls summed."""
    rows = []
    for (model, dtype), run in sorted(data.step_captures.items()):
        calls = t.tuning[((t.tuning["run_id"] == run) & (t.tuning["kind"] == "call")
                          & t.tuning["parent_call"].isna()).fillna(False).to_numpy(dtype=bool)]
        if len(calls):
            rows.append({"model": model, "dtype": dtype, "run_id": run, "tuning_s": float(calls["wall_s"].sum())})
    return pd.DataFrame(rows, columns=["model", "dtype", "run_id", "tuning_s"])


def _step_break_even(measured: pd.DataFrame, tuning: pd.DataFrame) -> pd.DataFrame:
    """Tuned vs untuned rows that save time beyond noise, with the steps that repay the tuning pass."""
    if measured.empty:
        return pd.DataFrame()
    from profkit.analysis import step as step_analysis

    rows = []
    for model, dtype, tuning_s in tuning[["model", "dtype", "tuning_s"]].itertuples(index=False):
        m = measured[((measured["model"] == model) & (measured["dtype"] == dtype)
                      & (measured["state"] == "tuned")).fillna(False).to_numpy(dtype=bool)].reset_index(drop=True)
        if m.empty:
            continue
        be = step_analysis.break_even(m, tuning_s=float(tuning_s)).reset_index(drop=True)
        both = m.assign(**{c: be[c] for c in ("saved_ms", "tuning_s", "steps_to_break_even",
                                                "serving_s_to_break_even")})
        rows.append(both[both["saved_ms"] > 0])
    if not rows:
        return pd.DataFrame()
    out = pd.concat(rows, ignore_index=True).rename(columns={"baseline_ms": "untuned_ms", "step_ms": "tuned_ms"})
    return out[["model", "dtype", "phase", "tokens", "untuned_ms", "tuned_ms", "delta_ms", "delta_pct", "noise_ms",
                "tuning_s", "steps_to_break_even", "serving_s_to_break_even"]]


# -- figures --------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class FigureSpec:
    name: str
    title: str
    caption: str
    draw: Callable[[], Figure]


def figure_specs(data: ReportData, r: Results, labels: Mapping[str, str]) -> list[FigureSpec]:
    """The report's figures, in page order; each draws lazily."""
    specs = [
        FigureSpec("tactic_map", "Tactic choices",
                   "The winning runner:tactic per op, shape and bucket (first run of each shape). Red hatched: the "
                   "winner measured slower than the default.",
                   lambda: plot_tactic_map(r.speedups, labels=labels)),
        FigureSpec("speedup", "Speedup over the default",
                   "default_ms / time_ms per bucket for each op, with the noise band; red triangles are slower "
                   "than the default.", lambda: _per_op(r.speedups, lambda f, ax: plot_speedup(f, labels=labels, ax=ax))),
    ]
    if len(r.speedups):
        top = r.speedups.sort_values("speedup", ascending=False).iloc[0]
        specs.append(FigureSpec(
            "candidates", "Candidate spread",
            f"Every candidate of {top['op']} {labels.get(top['shape'], top['shape'])}, the shape and run of the "
            f"largest speedup ({top['speedup']:.3f}x at bucket {int(top['bucket'])}, shaded).",
            lambda: plot_candidates(data.tables.candidates, op=top["op"], shape=top["shape"], run_id=top["run_id"],
                                    highlight=int(top["bucket"]), labels=labels)))
    specs += [
        FigureSpec("tuning_time", "Tuning time",
                   "Tuning wall seconds per op and shape (first run each), split into measuring candidates, "
                   "runner preparation (cuDNN plan builds), JIT and the rest.",
                   lambda: plot_tuning_time(r.breakdown[r.breakdown["run_id"].isin(r.primary_runs)], labels=labels)),
        FigureSpec("tuning_value", "What tuning time bought",
                   "Cumulative tuning seconds against the microseconds saved per call, bucket by bucket.",
                   lambda: plot_tuning_value(r.value, labels=labels)),
    ]
    if len(r.stability) and (r.stability["n_tunings"] > 1).any():
        specs.append(FigureSpec("winner_flips", "Winner flips across repeated runs",
                                "Share of run pairs whose winner differs, per bucket, for shapes tuned more than once.",
                                lambda: plot_winner_flips(r.stability, labels=labels)))
    if len(r.diff):
        specs.append(FigureSpec("diff", "Diff of two captures",
                                f"{r.diff_names[1]} against {r.diff_names[0]}: which buckets changed winner and what "
                                "the other choice costs, priced on the first run's measurements.",
                                lambda: plot_diff(r.diff, labels=labels, names=r.diff_names)))
    if len(r.ranks):
        specs.append(FigureSpec("rank_divergence", "Per-rank divergence",
                                "Buckets where ranks (independent tunings) chose different winners, and the regret.",
                                lambda: plot_rank_divergence(r.ranks, labels=labels)))
    if len(r.between):
        specs.append(FigureSpec("op_timings", "Tuned vs untuned outside tuning",
                                "The op timed at M on and between buckets with and without tuned configs.",
                                lambda: _per_op(r.between, lambda f, ax: plot_op_timings(f, labels=labels, ax=ax))))
    if len(r.step_measured):
        specs.append(FigureSpec("step_change", "Decoder step: tuned vs untuned",
                                "Measured change of a 4-layer decoder step (profkit step) with the repetitions' noise, "
                                "and the change the tuning-pass capture predicts.",
                                lambda: plot_step_change(r.step_measured, predicted=r.step_predicted)))
    if len(r.step_rows):
        for (model, dtype), rows in r.step_rows.groupby(["model", "dtype"], sort=True):
            states = ", ".join(s for s in STATE_ORDER if (rows["state"] == s).any())
            specs.append(FigureSpec(
                f"step_times_{model}_{dtype}", f"Decoder step time per state: {model} {dtype}",
                f"Step time of {model} {dtype} ({states}) across decode batch sizes (left) and prefill chunks "
                "(right): milliseconds on top, relative to untuned below (< 1: faster than FlashInfer's untuned "
                "fallback). Markers are medians over the repetitions, bars min to max.",
                lambda rows=rows, model=model, dtype=dtype: _step_times_grid(rows, model=model, dtype=dtype)))
    if len(r.e2e):
        specs.append(FigureSpec("kernel_vs_e2e", "Kernel speedup beside end-to-end",
                                "Weighted kernel speedups (the captured GEMMs of the bench's model, where present) "
                                "beside the serving pair's deltas. Kernels and serving may come from different GPUs "
                                "and ops: read them side by side, not as cause and effect.",
                                lambda: plot_kernel_vs_e2e(r.e2e, labels=labels, note=_e2e_note(data))))
    return specs


@_style.styled
def _per_op(frame: pd.DataFrame, draw: Callable) -> Figure:
    """One panel per op, side by side, each drawn with ``ax=`` (the composition case)."""
    ops = sorted(frame["op"].dropna().unique()) or [None]
    fig = Figure(figsize=(8.5, 3.6 * len(ops)), layout="constrained")
    axes = fig.subplots(len(ops), 1, squeeze=False)[:, 0]
    for op, ax in zip(ops, axes):
        draw(frame[(frame["op"] == op).fillna(False).to_numpy(dtype=bool)] if op else frame, ax)
    return fig


@_style.styled
def _step_times_grid(rows: pd.DataFrame, *, model: str, dtype: str) -> Figure:
    """Decode and prefill side by side, ms above and relative to untuned below; one legend, one note."""
    phases = [p for p in ("decode", "prefill") if (rows["phase"] == p).any()] or ["decode"]
    scales = (None, "untuned") if (rows["state"] == "untuned").any() else (None,)
    fig = Figure(figsize=(11.0, 3.8 * len(scales)), layout="constrained")
    axes = fig.subplots(len(scales), len(phases), squeeze=False, width_ratios=[3, 1][:len(phases)])
    for col, phase in enumerate(phases):
        for row, relative_to in enumerate(scales):
            ax = axes[row, col]
            plot_step_times(rows, model=model, dtype=dtype, phase=phase, relative_to=relative_to, ax=ax)
            if (row, col) != (0, 0) and ax.get_legend() is not None:
                ax.get_legend().remove()
            if (row, col) != (len(scales) - 1, 0):
                for text in list(ax.texts):
                    text.remove()
            if col:
                ax.set_title(f"{phase}" + (f" / {relative_to}" if relative_to else ""))
    return fig


def _e2e_note(data: ReportData) -> str:
    kernel_gpu = ", ".join(sorted(data.tables.runs["gpu"].dropna().unique()))
    models = ", ".join(sorted(data.bench["model"].dropna().astype(str).unique())) if len(data.bench) else ""
    return f"kernels captured on {kernel_gpu or '?'}; serving runs: {models or '?'} (GPU as the bench files say)"


# -- pages ------------------------------------------------------------------------------------------
def build_report(data: ReportData, out: str | Path, *, formats: Iterable[str] = ("png", "svg"),
                 only: Iterable[str] | None = None, index: bool = True, progress: bool = True) -> list[Path]:
    """Analyse ``data``, write its figures and (with ``index``) index.md and index.html into ``out``.

    Args:
        data: from :func:`collect`.
        out: output directory (created).
        formats: figure formats to write ("png", "svg", "pdf").
        only: figure names to draw (default all; see the page for names).
        index: also write index.md and the self-contained index.html.
        progress: show a tqdm progress bar on stderr.

    Returns:
        The files written, figures first.

    Raises:
        ProfkitError: for an unknown figure name in ``only`` or format.
    """
    from tqdm.auto import tqdm

    out = Path(out)
    formats = tuple(formats)
    bad = [f for f in formats if f not in ("png", "svg", "pdf")]
    if bad:
        raise ProfkitError(f"unknown figure format(s) {', '.join(bad)}; use png, svg or pdf")
    labels = shape_labels(data)
    bar = tqdm(total=3, desc="profkit report", unit="step", file=sys.stderr, disable=not progress, leave=False)
    bar.set_postfix_str("analysis")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        results = analyse(data)
        bar.update()
        specs = figure_specs(data, results, labels)
        names = [s.name for s in specs]
        if only is not None:
            only = list(only)
            unknown = [n for n in only if n not in names]
            if unknown:
                raise ProfkitError(f"unknown figure(s) {', '.join(unknown)}; this data has {', '.join(names)}")
            specs = [s for s in specs if s.name in only]
        bar.total = 2 + len(specs)
        out.mkdir(parents=True, exist_ok=True)
        written: list[Path] = []
        embedded: dict[str, str] = {}
        for spec in specs:
            bar.set_postfix_str(spec.name)
            fig = spec.draw()
            for fmt in formats:
                path = out / f"{spec.name}.{fmt}"
                fig.savefig(path, format=fmt, metadata=_metadata(fmt))
                written.append(path)
            if index:
                buf = io.BytesIO()
                fig.savefig(buf, format="png", dpi=110)
                embedded[spec.name] = base64.b64encode(buf.getvalue()).decode("ascii")
            bar.update()
    if index:
        bar.set_postfix_str("pages")
        sections = _sections(data, results, labels)
        md = out / "index.md"
        md.write_text(_markdown(data, specs, sections, formats), encoding="utf-8")
        page = out / "index.html"
        page.write_text(_html(data, specs, sections, embedded), encoding="utf-8")
        written += [md, page]
    bar.update()
    bar.close()
    return written


def _metadata(fmt: str) -> dict:
    """Deterministic files: no creation date in PNG/SVG/PDF metadata."""
    if fmt == "png":
        return {"Software": None}
    if fmt == "svg":
        return {"Date": None}
    return {"CreationDate": None}


@dataclasses.dataclass(frozen=True)
class Section:
    title: str
    text: str
    table: pd.DataFrame | None = None


def headline(data: ReportData, r: Results) -> list[str]:
    """The report's headline numbers, one sentence each."""
    lines = []
    # Calls that profiled buckets (a model forward also makes calls that hit the cache).
    per_call = r.breakdown.groupby(["run_id", "call"], observed=True).size().rename("n_buckets").reset_index()
    every = r.calls.merge(per_call, on=["run_id", "call"], how="inner")
    primary = every["run_id"].isin(r.primary_runs).to_numpy(dtype=bool)
    for op, g in every[primary].groupby("op", sort=True):
        full = g[g["n_buckets"] == g["n_buckets"].max()]
        n_buckets = int(full["n_buckets"].max())
        line = (f"Tuning one {op} call that profiled all {n_buckets} buckets took {_spread_s(full['wall_s'])} "
                f"over {_count(len(full), 'call')}; measuring candidates was "
                f"{full['measure_s'].sum() / full['wall_s'].sum():.0%} of it, runner preparation (cuDNN plans) "
                f"{full['prep_s'].sum() / full['wall_s'].sum():.0%}.")
        if len(g) > len(full):
            line += (f" {_count(len(g) - len(full), 'further call')} re-profiled some buckets "
                     f"({(g['wall_s'].sum() - full['wall_s'].sum()):.1f} s).")
        later = every[~primary & (every["op"] == op).to_numpy(dtype=bool)
                      & (every["n_buckets"] == n_buckets).to_numpy(dtype=bool)]
        if len(later):
            line += f" Later runs (repeats, other ranks): {_count(len(later), 'full call')}, {_spread_s(later['wall_s'])}."
        lines.append(line)
    s = r.speedups
    if len(s):
        for op, g in s.groupby("op", sort=True):
            beyond = int((g["slower_than_default"] & ~g["within_noise"]).sum())
            lines.append(f"{op}: winner over default median {g['speedup'].median():.3f}x, max {g['speedup'].max():.3f}x "
                         f"over {len(g)} buckets; {_count(int(g['slower_than_default'].sum()), 'bucket')} measured slower than the "
                         f"default, {beyond} of them beyond the noise band.")
    st = r.stability[r.stability["n_tunings"] > 1] if len(r.stability) else r.stability
    if len(st):
        flipped = st[st["n_distinct"] > 1]
        lines.append(f"Across repeated tunings (runs, and calls that re-profiled), {len(flipped)} of {len(st)} "
                     f"buckets changed winner; the worst flip costs "
                     f"{st['regret_pct'].max():.2f}% ({int((~st['within_noise'].fillna(True).astype(bool)).sum())} "
                     "beyond noise).")
    if len(r.ranks):
        dis = r.ranks[~r.ranks["agree"]]
        lines.append(f"Ranks disagree in {len(dis)} of {len(r.ranks)} buckets, "
                     f"{int((~dis['within_noise']).sum())} beyond noise.")
    if len(r.between):
        b = r.between
        lines.append(f"Outside tuning (CUDA graph, rotating inputs), tuned vs untuned: median "
                     f"{b.loc[b['at_bucket'], 'speedup'].median():.3f}x at bucket M, "
                     f"{b.loc[~b['at_bucket'], 'speedup'].median():.3f}x between buckets (min {b['speedup'].min():.3f}x).")
    m = r.step_measured[(r.step_measured["state"] == "tuned").to_numpy(dtype=bool)] if len(r.step_measured) else []
    if len(m):
        lines.append(f"Decoder step, tuned vs untuned: {m['delta_pct'].min():+.1f}% to {m['delta_pct'].max():+.1f}% "
                     f"(median {m['delta_pct'].median():+.1f}%); {int(m['slower'].sum())} of {len(m)} sizes slower "
                     "beyond noise.")
    return lines


def _spread_s(seconds: pd.Series) -> str:
    """``35.5 s`` for one value, ``19.3-49.0 s (median 38.1 s)`` for several."""
    if len(seconds) == 1:
        return f"{seconds.iloc[0]:.1f} s"
    return f"{seconds.min():.1f}-{seconds.max():.1f} s (median {seconds.median():.1f} s)"


def _count(n: int, noun: str) -> str:
    """``1 call``, ``2 calls``."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _sections(data: ReportData, r: Results, labels: Mapping[str, str]) -> list[Section]:
    named = lambda f: f.assign(shape=f["shape"].map(lambda s: labels.get(s, s))) if "shape" in f else f  # noqa: E731
    out = [Section("Headline", "\n".join(f"- {line}" for line in headline(data, r)))]
    if len(r.worth):
        out.append(Section("Is each op worth tuning?",
                           "One pass = one call at every tuned bucket; break-even = passes that repay the tuning time.",
                           named(r.worth[["op", "shape", "tuning_s", "measure_s", "median_speedup", "max_speedup",
                                          "n_slower", "saved_us_per_pass", "saved_pct_per_pass", "break_even_passes"]])))
    slow = r.speedups[r.speedups["slower_than_default"].fillna(False).to_numpy(dtype=bool)]
    if len(slow):
        out.append(Section("Buckets slower than the default (flashinfer#3537)",
                           "within_noise = the gap lies inside the noise band: a tie, not a regression.",
                           named(slow[["op", "shape", "bucket", "runner", "tactic", "time_ms", "default_ms", "speedup",
                                       "noise_pct", "within_noise"]])))
    if len(r.stability):
        flips = r.stability[r.stability["n_distinct"] > 1]
        if len(flips):
            out.append(Section("Winner flips", "Buckets whose winner differs between runs.",
                               named(flips[["op", "shape", "bucket", "n_tunings", "winners", "flip_rate", "regret_pct",
                                            "noise_pct", "within_noise"]])))
    if len(r.ranks):
        dis = r.ranks[~r.ranks["agree"]]
        if len(dis):
            out.append(Section("Rank divergence", "Buckets where ranks chose different winners.",
                               named(dis[["op", "shape", "bucket", "winners", "regret_pct", "noise_pct",
                                          "within_noise"]])))
    if len(r.cache_diff):
        changed = int(r.cache_diff["changed"].sum())
        out.append(Section("Capture vs cache file",
                           f"Each capture's winners against the cache.json FlashInfer wrote in the same process: "
                           f"{changed} of {len(r.cache_diff)} decisions differ."))
    if len(r.between):
        g = r.between.groupby(["op", "at_bucket"])["speedup"].agg(["median", "min", "max", "count"]).reset_index()
        out.append(Section("Tuned vs untuned outside tuning", "Speedup untuned_ms / tuned_ms by whether M is a bucket.", g))
    if len(r.step_measured):
        m = r.step_measured
        out.append(Section("Decoder step change",
                           "Each state against untuned (baseline_ms): tuned ran in the same process after the tuning "
                           "pass, cache in a fresh process that loaded its cache.json, torch with plain torch linears. "
                           "Median over repetitions; noise = the larger max-min spread of the two states (cache is "
                           "another process than its baseline, so process-to-process drift is not in its band).",
                           m[["model", "dtype", "phase", "tokens", "state", "step_ms", "baseline_ms", "delta_pct",
                              "beyond_noise", "slower"]]))
        out.append(Section("When does tuning pay for itself?", _break_even_text(r), r.step_break_even))
    if len(r.e2e):
        out.append(Section("Kernel vs end to end", "Bigger-is-better percent.",
                           r.e2e[["kind", "metric", "baseline", "treatment", "improvement_pct", "note"]]))
    out.append(Section("Provenance", _provenance_text(data), _env_table(data)))
    return out


def _break_even_text(r: Results) -> str:
    """What the break-even table holds and leaves out, per model and dtype, in the data's numbers."""
    tuned = r.step_measured[(r.step_measured["state"] == "tuned").to_numpy(dtype=bool)]
    be = r.step_break_even
    lines = ["Tuning wall time (the capture's tuning calls summed) divided by the time the tuned step saves against "
             "the untuned one = steps before the tuning pass pays for itself; serving_s = those steps at the tuned "
             "step time. Only sizes where tuned is faster beyond noise are listed: elsewhere tuning never pays back.",
             ""]
    for (model, dtype), g in tuned.groupby(["model", "dtype"], sort=True):
        mine = be[(be["model"] == model) & (be["dtype"] == dtype)] if len(be) else be
        saving = f"saves time beyond noise at {len(mine)} of {len(g)} sizes"
        if len(mine):
            saving += (f", breaking even after {mine['steps_to_break_even'].min():.3g}-"
                       f"{mine['steps_to_break_even'].max():.3g} steps "
                       f"({mine['serving_s_to_break_even'].min() / 3600:.2g}-"
                       f"{mine['serving_s_to_break_even'].max() / 3600:.2g} h of serving at that size)")
        spent = r.step_tuning[(r.step_tuning["model"] == model) & (r.step_tuning["dtype"] == dtype)]["tuning_s"]
        tuning = f"tuning {spent.iloc[0]:.1f} s, " if len(spent) else "no tuning capture, "
        lines.append(f"- {model} {dtype}: {tuning}{saving}; slower beyond noise at {int(g['slower'].sum())}.")
    layers = sorted({int(x) for x in r.step_rows["layers"].dropna()}) if "layers" in r.step_rows else []
    if len(layers) == 1:
        full = []
        try:
            from profkit.models import load_model

            full = [f"{name} has {load_model(name).num_hidden_layers}" for name in sorted(tuned["model"].unique())]
        except (ImportError, ProfkitError, TypeError, ValueError):
            pass
        lines += ["", f"A step here is the {layers[0]} timed decoder layers, not the whole model"
                  + (f" ({', '.join(full)})" if full else "") + ": if the saving per layer held in every layer, a "
                  "full model would break even in proportionally fewer steps."]
    return "\n".join(lines)


def _env_table(data: ReportData) -> pd.DataFrame:
    runs = data.tables.runs
    cols = [c for c in _ENV if c in runs.columns]
    rows = []
    for col in cols:
        values = sorted({str(v) for v in runs[col].dropna()})
        rows.append({"field": col, "value": ", ".join(values) if values else "?"})
    return pd.DataFrame(rows)


def _provenance_text(data: ReportData) -> str:
    lines = [f"{len(data.tables.runs)} runs read from `{data.root}`."]
    for where, prov in data.provenance.items():
        env = prov.get("env", {})
        flags = ", ".join(prov.get("flags", []) or []) or "none"
        lines.append(f"- `{where}`: started {env.get('started_at', '?')}, flags {flags}, command `{env.get('command', '?')}`")
    return "\n".join(lines)


def _fmt(value) -> str:
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, (float, np.floating)):
        if math.isinf(value):
            return "inf"
        if abs(value) >= 1e7:
            return f"{value:.3e}"
        return f"{value:.1f}" if abs(value) >= 1000 else f"{value:.4g}"
    return str(value)


def markdown_table(frame: pd.DataFrame) -> str:
    """A GitHub-flavoured Markdown table (no tabulate dependency)."""
    cols = list(frame.columns)
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for row in frame.itertuples(index=False):
        lines.append("| " + " | ".join(_fmt(v).replace("|", "\\|") for v in row) + " |")
    return "\n".join(lines)


def _markdown(data: ReportData, specs, sections, formats) -> str:
    parts = ["# profkit report", "", f"What FlashInfer's autotuner picked, why, what tuning cost, and whether it paid off. "
             f"Data: `{data.root}`.", ""]
    parts += [f"## {sections[0].title}", "", sections[0].text, ""]
    img = "png" if "png" in formats else formats[0]
    for spec in specs:
        parts += [f"## {spec.title}", "", spec.caption, "", f"![{spec.title}]({spec.name}.{img})", ""]
    for sec in sections[1:]:
        parts += [f"## {sec.title}", "", sec.text, ""]
        if sec.table is not None and len(sec.table):
            parts += [markdown_table(sec.table), ""]
    return "\n".join(parts)


_CSS = """body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;font-size:12px;margin:.5em 0 1.5em}th,td{border-bottom:1px solid #ddd;padding:2px 8px;
text-align:right}th{background:#f4f4f4}img{max-width:100%}figcaption{color:#555;font-size:13px}code{font-size:12px}"""


def _html(data: ReportData, specs, sections, embedded) -> str:
    esc = html.escape
    parts = ["<!doctype html><html><head><meta charset='utf-8'><title>profkit report</title>",
             f"<style>{_CSS}</style></head><body><h1>profkit report</h1>",
             f"<p>What FlashInfer's autotuner picked, why, what tuning cost, and whether it paid off. Data: "
             f"<code>{esc(str(data.root))}</code>.</p>", f"<h2>{esc(sections[0].title)}</h2>",
             _md_list_html(sections[0].text)]
    for spec in specs:
        parts.append(f"<h2 id='{spec.name}'>{esc(spec.title)}</h2><figure>"
                     f"<img alt='{esc(spec.title)}' src='data:image/png;base64,{embedded[spec.name]}'>"
                     f"<figcaption>{esc(spec.caption)}</figcaption></figure>")
    for sec in sections[1:]:
        parts.append(f"<h2>{esc(sec.title)}</h2>" + _md_list_html(sec.text))
        if sec.table is not None and len(sec.table):
            parts.append(sec.table.to_html(index=False, border=0, na_rep="", float_format=_fmt))
    parts.append("</body></html>")
    return "\n".join(parts)


def _md_list_html(text: str) -> str:
    esc = html.escape
    items = [line[2:] for line in text.splitlines() if line.startswith("- ")]
    rest = [line for line in text.splitlines() if not line.startswith("- ")]
    out = "".join(f"<p>{esc(line)}</p>" for line in rest if line)
    if items:
        out += "<ul>" + "".join(f"<li>{esc(i)}</li>" for i in items) + "</ul>"
    return out
