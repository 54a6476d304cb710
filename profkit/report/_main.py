"""The main page: one verdict per op, then the few figures that carry the verdicts, then MoE.

Every builder here formats fields of :class:`profkit.analysis.results.Results`; none computes.
"""

from __future__ import annotations

import pandas as pd

from profkit.outputs.markdown import table_cell
from profkit.report import _text as T
from profkit.report._page import FigureSpec, ReportContext, Section, Table
from profkit.views import (gpu_name, plot_moe_routing, plot_moe_step, plot_moe_tactics, plot_portability,
                           plot_serving_vs_tuner, plot_tuning_time, plot_verdicts)

_HEADLINE = {"keep": "keep autotuning on", "skip": "skip it (no gain beyond noise and chance at the {basis})",
             "plan": "tune with the `profkit advise` plan", "failed": "tuning failed or did nothing",
             "unknown": "unknown from this data"}


def _rows(frame: pd.DataFrame, **where) -> pd.DataFrame:
    keep = pd.Series(True, index=frame.index)
    for column, value in where.items():
        keep &= (frame[column] == value).fillna(False)
    return frame[keep.to_numpy(dtype=bool)]


# -- verdicts -------------------------------------------------------------------------------------
def verdict_line(row) -> str:
    """One op's verdict as one Markdown list item's text: recommendation, cost, what it bought, the plan."""
    r = row
    basis = {"step": "model step", "serving": "serving"}.get(r.basis, str(r.basis))
    parts = [f"**`{r.op}`: {_HEADLINE.get(r.recommendation, r.recommendation).format(basis=basis)}.**"]
    cost = []
    if not T.missing(r.call_s_min):
        cost.append(f"{T.seconds(r.call_s_min, r.call_s_max)} per tuning call ({T.count(r.buckets, 'bucket')}, "
                    f"{T.count(r.calls, 'call')})")
    if not T.missing(r.pass_s_min):
        cost.append(f"{T.seconds(r.pass_s_min, r.pass_s_max)} per model pass ({r.pass_models})")
    parts.append(("Cost: " + "; ".join(cost) + ".") if cost else "Cost: no tuning times in this data.")
    if r.step_points:
        parts.append(_step_sentence(r))
    if r.serving_points:
        parts.append(_serving_sentence(r))
    if not r.step_measurable and not r.serving_points and not T.missing(r.tuner_speedup_median):
        parts.append(f"By the tuner's own timer only: the winner is a median {T.times(r.tuner_speedup_median, digits=3)} "
                     f"the default (at most {T.times(r.tuner_speedup_max, digits=3)}), a timer the serving and step "
                     "checks often contradict.")
    small = _small_sentence(r)
    if small:
        parts.append(small)
    if isinstance(r.plan_decision, str) and r.recommendation == "plan" and not T.missing(r.plan_planned_s):
        parts.append(f"Plan ({r.plan_decision}): {r.plan_tuned_buckets} of {r.plan_buckets} buckets in "
                     f"{T.seconds(r.plan_planned_s)} instead of {T.seconds(r.plan_full_s)}, expected cost "
                     f"{r.plan_cost_pct:+.2f}% per pass.")
    if not T.missing(r.break_even_steps):
        parts.append(f"A tuning pass pays for itself after {T.number(round(r.break_even_steps))} steps of the timed "
                     "layers at the size that saves most.")
    if r.recommendation == "unknown" and isinstance(r.needs, str) and r.needs:
        parts.append(f"To answer, add {r.needs}.")
    return " ".join(parts)


def _step_sentence(r) -> str:
    n, f, s = int(r.step_measurable), int(r.step_faster), int(r.step_slower)
    if not n:
        return (f"Model step: not measurable at any of {T.count(r.step_points, 'size')} (one pass of each state per "
                "process cannot tell a change from drift).")
    text = f"Model step ({r.step_models}): faster beyond noise at {f} of {T.count(n, 'measurable size')}"
    if f:
        text += (f" ({T.faster_span(r.step_change_max_pct / 100, r.step_change_min_pct / 100)} at the measured "
                 f"sizes; best {T.effect_at(r.step_best, r.step_best_lo, r.step_best_hi, r.step_best_at)})"
                 if s == 0 and r.step_change_max_pct < 0 else
                 f" (best {T.effect_at(r.step_best, r.step_best_lo, r.step_best_hi, r.step_best_at)})")
    text += f", slower at {s}" + (f" (worst {T.effect_at(r.step_worst, r.step_worst_lo, r.step_worst_hi, r.step_worst_at)})"
                                   if s else "")
    if r.basis == "step" and r.recommendation == "skip" and f < (r.chance_faster or 0):
        text += f"; fewer than {r.chance_faster} faster of {n} is what identical kernels give by chance"
    text += _detectable(r.step_detectable_min_pct, r.step_detectable_max_pct)
    rest = int(r.step_points) - n
    return text + (f"; {rest} more sizes not measurable." if rest else ".")


def _detectable(lo_pct, hi_pct) -> str:
    """``; smallest detectable change 0.5-7.3%``: what the design could have called, per measured point."""
    if T.missing(lo_pct):
        return ""
    span = f"{lo_pct:.1f}%" if abs(hi_pct - lo_pct) < 0.05 else f"{lo_pct:.1f}-{hi_pct:.1f}%"
    return f"; smallest detectable change {span}"


def _serving_sentence(r) -> str:
    n = int(r.serving_points)
    text = (f"Serving (`profkit verify`): the pick runs {T.times(r.serving_speedup_min, r.serving_speedup_max)} the "
            f"default's speed (median {T.times(r.serving_speedup_median, digits=3)}); faster beyond noise at "
            f"{r.serving_faster} of {n} points")
    if r.serving_faster:
        text += f" (best {T.effect_at(r.serving_best, r.serving_best_lo, r.serving_best_hi, r.serving_best_at)})"
    text += f", slower at {r.serving_slower}"
    if r.serving_slower:
        text += f" (worst {T.effect_at(r.serving_worst, r.serving_worst_lo, r.serving_worst_hi, r.serving_worst_at)})"
    return text + _detectable(r.serving_detectable_min_pct, r.serving_detectable_max_pct) + "."


def _small_sentence(r) -> str:
    parts = []
    if r.small_serving_points:
        parts.append(f"serving {r.small_serving_faster} faster, {r.small_serving_slower} slower of "
                     f"{r.small_serving_points}")
    if r.small_step_points:
        parts.append(f"step {r.small_step_faster} faster, {r.small_step_slower} slower of {r.small_step_points}")
    return f"Small batches (M <= 8): {'; '.join(parts)}." if parts else ""


def cache_lines(results) -> list[str]:
    """One loud line per cache file that did nothing: FlashInfer ignored it, or the state that loaded it ran defaults."""
    idle = results.idle_caches
    if idle.empty:
        return []
    lines = []
    ignored = idle[(idle["why"] == "ignored").to_numpy(dtype=bool)]
    for detail, rows in ignored.groupby("detail", sort=True):  # one line per mismatch: every file it ignored named
        files = "; ".join(f"`{r.cache}` (`{r.where}`, {T.count(r.times, 'time')})" for r in rows.itertuples(index=False))
        lines.append(f"WARNING your cache did nothing: FlashInfer ignored {T.count(len(rows), 'cache file')} created "
                     f"in a different environment ({detail}); the process ran default tactics or tuned again: "
                     f"{files}. Tune on this GPU, or `profkit verify` the other GPU's picks here and `profkit repair` "
                     "a file for this one.")
    for row in idle.itertuples(index=False):
        if not row.why.startswith("ignored"):
            lines.append(f"WARNING `{row.cache}` changed nothing: state `{row.detail}` loaded it and ran the default "
                         f"tactic in every layer at every size (`{row.where}`): FlashInfer found no tuned config in it "
                         "for these shapes, or each one it holds is the default.")
    return lines


def expected_ignores(results) -> str:
    """A quiet sentence for the cache files FlashInfer ignored on purpose: in a ``profkit verify`` or ``port`` of
    another GPU's capture, which reads that GPU's picks itself (empty when there are none)."""
    idle = results.idle_caches
    expected = idle[idle["why"].astype(str).str.startswith("ignored by ").to_numpy(dtype=bool)] if len(idle) else idle
    if expected.empty:
        return ""
    processes = " and ".join(sorted(expected["why"].astype(str).str.removeprefix("ignored by ").unique()))
    return (f" FlashInfer ignored {T.count(len(expected), 'cache file')} made on another GPU in {processes} "
            "processes, as it should: they re-time that GPU's picks here, read from its capture (the first: "
            f"`{expected['cache'].iloc[0]}` in `{expected['where'].iloc[0]}`).")


def failure_lines(results) -> list[str]:
    """One loud line per op whose tuning failed or did nothing at some buckets."""
    f = results.failures
    if f is None or f.empty:
        return []
    lines = []
    for op, g in f[(f["status"] != "tuned").to_numpy(dtype=bool)].groupby("op", sort=True):
        runs = [f"{r.run_id}: {r.tuned} of {r.buckets} buckets tuned"
                + (f", {r.default_kept} kept the default (every other candidate failed)" if r.default_kept else "")
                + (f", {r.no_winner} with no winner" if r.no_winner else "")
                for r in g.itertuples(index=False)]
        status = "NOT TUNED" if (g["status"] == "not tuned").all() else "PARTLY TUNED"
        cause = g["cause"].dropna()
        lines.append(f"WARNING `{op}` {status} in {T.count(len(g), 'run')}: " + "; ".join(runs[:3])
                     + (f" and {len(runs) - 3} more" if len(runs) > 3 else "")
                     + (f". Cause: {str(cause.iloc[0])[:200]}" if len(cause) else ""))
    return lines


def verdict_section(ctx: ReportContext) -> Section:
    """Should autotuning stay on for each op on each GPU? A table of op x GPU first, then one line each."""
    r = ctx.results
    v = ctx.verdicts if ctx.verdicts is not None else r.op_verdicts
    env = r.environment
    where = {row.field: row.value for row in env.itertuples(index=False)} if len(env) else {}
    gpus = tuple(ctx.gpus) or (where.get("gpu", "an unrecorded GPU"),)
    measured = (f"Measured on {gpus[0]}, flashinfer {where.get('flashinfer', '?')}" if len(gpus) == 1 else
                f"Measured on {len(gpus)} kinds of GPU ({', '.join(gpus)}), each judged on its own runs; the "
                f"figures and detail pages below are {gpus[0]}'s (`profkit report --gpu NAME` for another's)")
    head = (f"{measured}, read from {', '.join(getattr(ctx.data, 'inputs', ('captures',)))}. The same verdicts, "
            "with the numbers behind them, are in [summary.json](summary.json)." + expected_ignores(r))
    if v.empty:
        return Section("Verdicts", head + "\n\nNo op was tuned in this data.",
                       loud=tuple(cache_lines(r) + failure_lines(r)))
    several = len(gpus) > 1
    lines = [f"- {verdict_line(row)}" + (f" ({row.gpu})" if several else "") for row in v.itertuples(index=False)]
    text = "\n".join([verdict_table(v), "", head, ""] + lines + ["", _how_to_read() + aa_sentence(r.aa)])
    figures, omitted = (), ()
    measured = len(r.evidence) and (r.evidence["verdict"] != "not_measurable").any()
    if not measured:
        omitted = ("What tuning bought beyond noise: not drawn: no serving or step comparison in this data is "
                   "measurable.",)
    else:
        recs = dict(zip(r.op_verdicts["op"], r.op_verdicts["recommendation"]))
        figures = (FigureSpec("verdicts", "What tuning bought beyond noise, per op",
                              "Every comparison a verdict rests on: serving (the tuner's pick against FlashInfer's "
                              "default at each bucket's M; MoE at every verified M under every routing) and the model "
                              "step (the tuned cache against untuned at each size). Change of time with tuning, "
                              "95% interval; colour only beyond noise.",
                              lambda: plot_verdicts(r.evidence, recommendations=recs)),)
    return Section("Verdicts", text, figures, omitted=omitted, loud=tuple(cache_lines(r) + failure_lines(r)))


def verdict_table(v: pd.DataFrame) -> str:
    """The first screen's table: per op and GPU, the recommendation, what tuning costs, what it bought beyond noise
    and the smallest change the data could have seen."""
    lines = ["| op | GPU | do | tuning costs | bought beyond noise | smallest detectable change |", "|---|---|---|---|---|---|"]
    for row in v.itertuples(index=False):
        gpu = str(getattr(row, "gpu", "") or "").removeprefix("NVIDIA ")
        lines.append("| " + " | ".join(table_cell(x) for x in (
            f"`{row.op}`", gpu or "?", f"**{row.recommendation}**", _cost_cell(row), _bought_cell(row),
            _detectable_cell(row))) + " |")
    return "\n".join(lines)


def _cost_cell(row) -> str:
    if not T.missing(row.pass_s_min):
        return f"{T.seconds(row.pass_s_min, row.pass_s_max)} per model pass"
    if not T.missing(row.call_s_min):
        return f"{T.seconds(row.call_s_min, row.call_s_max)} per tuning call"
    return "not in this data"


def _bought_cell(row) -> str:
    if row.step_measurable:
        return f"faster at {row.step_faster} of {row.step_measurable} step sizes, slower at {row.step_slower}"
    if row.serving_points:
        measurable = row.serving_points - row.serving_not_measurable
        return (f"faster at {row.serving_faster} of {measurable} serving points, slower at {row.serving_slower}"
                if measurable else f"{row.serving_points} serving points, none measurable")
    if not T.missing(row.tuner_speedup_median):
        return f"not measured (the tuner's own timer: median {T.times(row.tuner_speedup_median, digits=3)})"
    return "not measured"


def _detectable_cell(row) -> str:
    for kind in ("step", "serving"):
        low, high = getattr(row, f"{kind}_detectable_min_pct"), getattr(row, f"{kind}_detectable_max_pct")
        if not T.missing(low):
            return f"{low:.1f}-{high:.1f}% ({kind})" if high > low + 0.05 else f"{low:.1f}% ({kind})"
    return "-"


def across_gpus_section(ctx: ReportContext) -> Section | None:
    """What one GPU's tuning is worth on another: its picks timed there against that GPU's own and its default, one
    figure per GPU pair, and what carrying a tuning cost against tuning there."""
    p = ctx.portability if ctx.portability is not None else pd.DataFrame()
    price = ctx.port_price if ctx.port_price is not None else pd.DataFrame()
    short = ctx.shortlist if ctx.shortlist is not None else pd.DataFrame()
    if p.empty and price.empty and short.empty:
        return None
    lines = []
    for row in p.itertuples(index=False):
        worst = (f"; at worst {row.worst_regret:+.1%} at {_named_at(row.worst_regret_at, ctx.labels)}"
                 if row.slower_than_own else "")
        lines.append(f"- `{row.op}`, tuned on {row.source_gpu} and run on {row.target_gpu}: the same pick as the "
                     f"target's own at {row.top1_agreement:.0%} of {T.count(row.points, 'point')} (top-1 agreement); "
                     f"slower than the target's own pick beyond noise at {row.slower_than_own}, faster at "
                     f"{row.faster_than_own}{worst}; against the target's default: faster at "
                     f"{row.faster_than_default}, slower at {row.slower_than_default}.")
    lines += port_price_table(price)
    lines += shortlist_lines(short)
    text = "\n".join(["Each carried pick is priced against the default timed in the same process, so the two "
                      "processes' drift cancels; regret is the carried pick's time over the target's own pick's, "
                      "judged by the one rule.", ""] + lines)
    figures = []
    carried = ctx.carried if ctx.carried is not None else pd.DataFrame()
    for (source, target), rows in (p.groupby(["source_gpu", "target_gpu"], sort=True) if len(carried) else ()):
        figures.append(FigureSpec(
            f"portability_{gpu_name(source)}_on_{gpu_name(target)}", f"The {source}'s picks on the {target}",
            f"Per model and M, under each verified routing: the {gpu_name(source)}'s pick timed on the "
            f"{gpu_name(target)} against the {gpu_name(target)}'s own pick (top: regret) and its default (bottom); "
            "colour only beyond noise.",
            lambda source=source, target=target, title=across_gpus_title(rows): plot_portability(
                carried, source_gpu=source, target_gpu=target, labels=ctx.labels, title=title)))
    tables = tuple(t for t in (
        Table(p, "portability") if len(p) else None,
        Table(ctx.named(carried), "carried_picks", sort_by="regret", top=0) if len(carried) else None,
        Table(price, "port_price") if len(price) else None,
        Table(short, "shortlist_reach") if len(short) else None) if t is not None)
    return Section("Across GPUs", text, tuple(figures), tables)


def _named_at(at: str, labels) -> str:
    """``mixtral-8x7b (E=8 top_k=2 ...) M=1024``: a point's shape with its model's name."""
    shape = next((s for s in labels if at.startswith(f"{s} ")), None)
    return f"{labels[shape]} ({shape}){at[len(shape):]}" if shape else at


def across_gpus_title(portability: pd.DataFrame) -> str:
    """The takeaway of one GPU pair's :func:`~profkit.analysis.portability.portability` rows, as a figure title:
    "The H200's picks on the H100: slower than the H100's own pick beyond noise at 14 of 312 points (worst +29%) ..."."""
    source, target = gpu_name(portability["source_gpu"].iloc[0]), gpu_name(portability["target_gpu"].iloc[0])
    slower, points = int(portability["slower_than_own"].sum()), int(portability["points"].sum())
    worst = portability["worst_regret"].max()
    worst = "" if T.missing(worst) else f" (worst {100 * worst:+.0f}%)"
    faster = int(portability["faster_than_own"].sum())
    against = int(portability["slower_than_default"].sum())
    return (f"The {source}'s picks on the {target}: slower than the {target}'s own pick beyond noise at {slower} of "
            f"{points} points{worst}, faster at {faster}; slower than the {target}'s default at "
            f"{against or 'none'}")


def shortlist_lines(table: pd.DataFrame, ks: tuple = (3, 10)) -> list[str]:
    """How long a port's shortlist must be, per op and GPU pair: at how many points the source tuner's top-k holds the
    target's own pick, and the worst regret of the best of them (:func:`~profkit.analysis.shortlist.shortlist_reach`;
    tuner timings, not judged by the rule). Empty without two GPUs' tunings of one op."""
    if table.empty:
        return []
    lines = ["", "How long must a port's shortlist be? From the two GPUs' own tunings (tuner timings, no extra GPU "
             "time, not judged by the rule: where a short list cannot hold the target's own pick, not what a port "
             "loses there):"]
    for (op, source, target), g in table.groupby(["op", "source_gpu", "target_gpu"], sort=True):
        parts = []
        for row in g[g["top_k"].isin(ks).to_numpy(dtype=bool)].itertuples(index=False):
            worst = "" if T.missing(row.worst_regret) else f" (the best of them at worst {row.worst_regret:+.1%})"
            parts.append(f"in the top-{row.top_k} at {row.own_in_shortlist}" + (
                f" of {T.count(row.points, 'point')}" if not parts else "") + worst)
        lines.append(f"- `{op}`, the {gpu_name(source)}'s list on the {gpu_name(target)}: the {gpu_name(target)}'s "
                     f"own pick is {', '.join(parts)}.")
    return lines


def port_price_table(price: pd.DataFrame) -> list[str]:
    """What each port cost against a full tuning on its target, one row per port
    (:func:`~profkit.analysis.portability.port_price`), as a markdown table (empty without ports)."""
    if price.empty:
        return []
    lines = ["", "What carrying a tuning cost against tuning on the target GPU (an MoE: against a full tuning in a fresh "
             "process, and both again with every kernel compiled; a dense GEMM: against the target's own tuning pass "
             "in `profkit step`, one that built FlashInfer's one-time JIT modules where the port did, and both again "
             "without those builds where the port timed them):", "",
             "| tuning | GPUs | top-k | port | full tuning | port / tuning | without compiles | folder |",
             "|---|---|---|---|---|---|---|---|"]
    for row in price.itertuples(index=False):
        what = " ".join(str(v) for v in (row.model, row.dtype) if not T.missing(v)) or "?"
        gpus = f"{gpu_name(row.source_gpu) if not T.missing(row.source_gpu) else '?'} -> {gpu_name(row.target_gpu)}"
        took = "" if T.missing(row.jit_build_s) else f": {T.seconds(row.jit_build_s)}"
        port = T.seconds(row.port_s) + ("" if T.missing(row.jit_builds) else
                                        f", with FlashInfer's one-time JIT builds (`{row.jit_builds}`{took})")
        tune_built = not T.missing(row.fresh_tune_jit_build_s) and row.fresh_tune_jit_build_s > 0
        tuning, ratio = (("none in this data", "") if T.missing(row.fresh_tune_s) else
                         (T.seconds(row.fresh_tune_s) + (f", with its JIT builds ({T.seconds(row.fresh_tune_jit_build_s)})"
                                                         if tune_built else ""), T.times(row.port_over_fresh_tune)))
        if not T.missing(row.port_warm_s):
            warm = (f"{T.seconds(row.port_warm_s)} / {T.seconds(row.tune_warm_s)} "
                    f"({T.times(row.port_over_tune_without_compiles)})")
        elif not T.missing(row.port_over_fresh_tune_without_jit):  # known only with jit_build_s
            tune = f" / {T.seconds(row.fresh_tune_without_jit_s)}" if tune_built else ""
            warm = (f"{T.seconds(row.port_without_jit_s)}{tune}, without the JIT builds "
                    f"({T.times(row.port_over_fresh_tune_without_jit)})")
        else:
            warm = ""
        cells = (what, gpus, str(row.top_k), port, tuning, ratio, warm, f"`{row.folder}`")
        lines.append("| " + " | ".join(table_cell(c) for c in cells) + " |")
    return lines


def aa_sentence(aa: pd.DataFrame) -> str:
    """`` On identical kernels in this data ...``: the rule's measured false-positive rate (empty without A/A pairs)."""
    measured = aa[aa["measurable"] > 0] if len(aa) else aa
    if measured.empty:
        return ""
    what = {"series": "a state timed twice", "same_kernels": "a state that ran untuned's kernels"}
    parts = [f"{a.calls} of {a.measurable} ({what.get(a.kind, a.kind)})"
             for a in measured.itertuples(index=False)]
    return " On identical kernels in this data, the rule called " + " and ".join(parts) + " faster or slower."


def _how_to_read() -> str:
    return ("How the verdicts are reached: every faster / slower / within-noise comes from one comparison rule "
            "(per-pass medians, a t interval on the difference, a drift floor; identical kernels are called "
            "different at no more than 5% of points; docs/comparison_rule.md). The recommendation rests on the "
            "model step where any size is measurable, else on serving: **keep** when it is faster beyond noise at "
            "half the points or more and slower at none, **skip** when it is slower more often than faster or "
            "faster no more often than identical kernels are by chance, **plan** in between (tune what "
            "`profkit advise` plans), **failed** when every tuning of the op did nothing.")


# -- cost -----------------------------------------------------------------------------------------
def cost_section(ctx: ReportContext) -> Section | None:
    """What does tuning cost? One bar per op and shape (first run each), split into where the time went."""
    r = ctx.results
    if r.breakdown.empty:
        return None
    lines = []
    for c in r.call_costs.itertuples(index=False):
        line = f"`{c.op}`: one call tuning all {c.buckets} buckets took {T.seconds(c.wall_s_min, c.wall_s_max)}"
        line += f" (median {T.seconds(c.wall_s_median)}) over {T.count(c.calls, 'call')}" if c.calls > 1 else ""
        if c.split_known:
            line += (f"; measuring candidates was {c.measure_share:.0%} of it, runner preparation (cuDNN plan "
                     f"builds) {c.prep_share:.0%}")
        else:
            line += "; the split into measuring and plan building is unknown (these tuning rows have no phase times)"
        if c.later_calls:
            line += f". Later runs of the same shapes (repeats, other ranks): {T.seconds(c.later_s_min, c.later_s_max)}"
        lines.append(f"- {line}.")
    tp = r.step_tuning
    if len(tp):
        lines.append(f"- A model's tuning pass (every tuned layer, one forward at the largest bucket) took "
                     f"{T.seconds(tp['tuning_s'].min(), tp['tuning_s'].max())} "
                     f"({', '.join(f'{m} {d}' for m, d in zip(tp['model'], tp['dtype']))}).")
    timed = ctx.data.tables.tuning["measure_s"].notna().any()
    fig = FigureSpec("tuning_time", "Where tuning time went",
                     "Tuning wall seconds per op and shape (first run each), split into measuring candidates, runner "
                     "preparation (cuDNN plan builds), JIT and the rest." if timed else
                     "Tuning wall seconds per op and shape (first run each). These tuning rows carry no phase times "
                     "(e.g. read from a debug log), so the whole bar is unsplit, not 'other'.",
                     lambda: plot_tuning_time(r.first_breakdown, labels=ctx.labels))
    text = "\n".join(lines) + f"\n\nPer shape and bucket, and what the seconds bought: {ctx.page('cost')}."
    return Section("What tuning costs", text, (fig,))


# -- serving --------------------------------------------------------------------------------------
def serving_section(ctx: ReportContext) -> Section | None:
    """Do the tuner's picks hold when timed the way engines run them (profkit verify)?"""
    r = ctx.results
    if r.verdicts.empty:
        needs = ("No `profkit verify` table in this data: the tuner's picks were not timed the way engines run them "
                 "(CUDA graph replays, rotating inputs). `profkit verify CAPTURE` adds one.")
        return Section("Do the picks hold in serving?", needs)
    lines = [f"- `{s.op}`: of {s.buckets} buckets (each at its own M) the pick was **{s.faster} faster, {s.slower} "
             f"slower** and {s.within_noise} within noise of the default; median speedup "
             f"{T.times(s.median_tuner_speedup, digits=3)} by the tuner's timer, "
             f"{T.times(s.median_serving_speedup, digits=3)} in serving; tuner/serving rank agreement "
             f"{s.median_rank_agreement:.2f}." for s in r.verify_summary.itertuples(index=False)]
    fig = FigureSpec("serving_vs_tuner", "Do the tuner's picks hold in serving?",
                     "Per bucket (at its own M): the tuner's speedup of its pick over the default (x) against the "
                     "serving speedup (y). Right of 1 the tuner expected a gain; below 1 serving lost it. A corner "
                     "counts a bucket only where both the tuner's own times and serving are beyond noise; the rest are "
                     "counted apart as within noise. Colour: the serving verdict; filled: the tuner's too.",
                     lambda: plot_serving_vs_tuner(r.verdicts))
    text = "\n".join(lines) + (f"\n\nPer capture, shape and M, the measurement policies and the serving pair: "
                               f"{ctx.page('serving')}; every step set: {ctx.page('step')}.")
    return Section("Do the picks hold in serving?", text, (fig,))


# -- MoE ------------------------------------------------------------------------------------------
def moe_model_line(s) -> str:
    """One MoE model's answer (a row of :func:`profkit.analysis.moe.model_summary`)."""
    parts = [f"**{s.model}** (`{s.shape}`): tuning {T.seconds(s.tuning_s)} "
             f"({T.count(s.buckets, 'bucket')}, {T.count(s.tunings, 'tuning')})"]
    if not T.missing(s.op_speedup_min):
        parts.append(f"in serving the pick is {T.times(s.op_speedup_min, s.op_speedup_max)} the default under "
                     f"{T.count(s.routings, 'routing')}, slower beyond noise at {s.pick_slower}, at most "
                     f"{s.max_regret_pct:.1f}% behind the routing's fastest candidate")
    if not T.missing(s.step_sizes):
        parts.append(f"the model step is faster beyond noise at {s.step_faster} of {s.step_sizes} sizes "
                     f"({T.faster_span(s.step_change_max_pct / 100, s.step_change_min_pct / 100)}), slower at "
                     f"{s.step_slower}")
    if not T.missing(s.aa_points):
        parts.append(f"A/A (a series timed twice) {s.aa_beyond_noise} of {s.aa_points} beyond noise")
    if not T.missing(s.repaired_vs_cache_slower):
        than_untuned = ("" if T.missing(s.repaired_slower) else
                        f"untuned at {s.repaired_slower} of {T.count(s.repaired_points, 'size')} and ")
        parts.append(f"the repaired cache file makes the step slower beyond noise than {than_untuned}than the "
                     f"tuning's own cache at {s.repaired_vs_cache_slower} of {T.count(s.repaired_vs_cache_points, 'size')}")
    if not T.missing(s.predicted_beyond_noise) and s.predicted_beyond_noise:
        parts.append(f"verify's predicted step change has the measured sign at {s.sign_agrees_beyond_noise} of "
                     f"{s.predicted_beyond_noise} sizes measured beyond noise ({s.within_1_5x} within 1.5x)")
    if not T.missing(s.flip_buckets) and s.tunings and s.tunings > 1:
        parts.append(f"repeated tunings pick differently at {s.flip_buckets} buckets, within "
                     f"{s.max_flip_spread_pct:.1f}% of each other")
    return "; ".join(parts) + "."


def moe_figures(ctx: ReportContext, model: str) -> tuple[FigureSpec, ...]:
    """The MoE figures of one model: routing, step, tactics and the tuning bill (one figure per question)."""
    r = ctx.results
    m = r.moe_models[(r.moe_models["model"] == model).to_numpy(dtype=bool)]
    if m.empty:
        return ()
    row = m.iloc[0]
    figures = []
    sens = _rows(r.moe_sensitivity, run_id=row.run_id) if len(r.moe_sensitivity) else r.moe_sensitivity
    if len(sens):
        figures.append(FigureSpec(f"moe_routing_{model}", f"{model}: does the pick hold under other routings?",
                                  "The tuned op's speedup over the default per M under each expert routing (left) and "
                                  "the pick's regret against that routing's fastest candidate (right); serving times.",
                                  lambda sens=sens: plot_moe_routing(sens)))
    changes = _rows(r.moe_changes, source=row.step_source) if len(r.moe_changes) and row.step_source else pd.DataFrame()
    if len(changes):
        pred = _rows(r.moe_predictions, source=row.step_source) if len(r.moe_predictions) else None
        figures.append(FigureSpec(f"moe_step_{model}", f"{model}: what tuning buys the model step",
                                  "Four decoder layers, states interleaved in one process: each series against "
                                  "untuned per size with the rule's 95% interval (untuned-2: the A/A pair), and the "
                                  "step change predicted from verify against the measured one.",
                                  lambda changes=changes, pred=pred: plot_moe_step(changes, pred)))
    runs = [x for x in str(row.runs).split(", ") if x]
    parts = r.moe_parts[r.moe_parts["run_id"].isin(runs).to_numpy(dtype=bool)] if len(r.moe_parts) else r.moe_parts
    if len(parts):
        across = _rows(r.moe_across, model=model) if len(r.moe_across) else None
        figures.append(FigureSpec(f"moe_tactics_{model}", f"{model}: what the tuner picked per bucket",
                                  "Each pick's tactic part by part (row tile, each GEMM's tile, swizzle, cluster, "
                                  "raster); bottom row: how the repeated tunings differ.",
                                  lambda parts=parts, across=across: plot_moe_tactics(
                                      parts, run_id=row.run_id, across_runs=across if across is not None and len(across)
                                      else None)))
    bill = _rows(r.moe_tuning, model=model) if len(r.moe_tuning) else r.moe_tuning
    if len(bill):
        figures.append(FigureSpec(f"moe_tuning_{model}", f"{model}: the tuning bill per bucket",
                                  "Where the first tuning call's seconds went, per bucket. Measuring candidates "
                                  "includes CuTe-DSL compiling a tactic's kernels the first time it is timed: at bucket "
                                  "1, and at any bucket that first offers more tactics.",
                                  lambda bill=bill: plot_tuning_time(bill, per="bucket", title=model)))
    return tuple(figures)


def moe_section(ctx: ReportContext) -> Section | None:
    """MoE: the fused-MoE op per model, with the headline model's figures (the others on the MoE page)."""
    r = ctx.results
    if r.moe_summary.empty:
        return None
    lines = [f"- {moe_model_line(s)}" for s in r.moe_summary.itertuples(index=False)]
    ops = ", ".join(f"`{op}`" for op in r.moe_ops)
    headline = str(r.moe_models["model"].iloc[0]) if len(r.moe_models) else ""
    others = [m for m in r.moe_models["model"].astype(str) if m != headline]
    text = (f"FlashInfer's fused MoE ({ops}), per model (`analysis.moe.model_summary`):\n" + "\n".join(lines)
            + (f"\n\nFigures of {headline} below; {', '.join(others)} on the {ctx.page('moe', 'MoE page')}."
               if others else ""))
    return Section("MoE", text, moe_figures(ctx, headline) if headline else ())


# -- docs/findings.md -----------------------------------------------------------------------------
def headline_markdown(results) -> str:
    """The README's short answer: per op its verdict, what it bought and what tuning cost; the rule's A/A rate."""
    lines = [f"- {_headline_line(r)}" for r in results.op_verdicts.itertuples(index=False)]
    aa = aa_sentence(results.aa).strip()
    return "\n".join(lines) + (f"\n\n{aa}" if aa else "") + "\n"


def _headline_line(r) -> str:
    basis = {"step": "model step", "serving": "serving"}.get(r.basis, str(r.basis))
    parts = [f"**`{r.op}`: {_HEADLINE.get(r.recommendation, r.recommendation).format(basis=basis)}.**"]
    if r.serving_points:
        parts.append(f"In serving the pick runs {T.times(r.serving_speedup_min, r.serving_speedup_max)} the default's "
                     f"speed (median {T.times(r.serving_speedup_median, digits=3)}).")
    if r.step_measurable:
        n, f, s = int(r.step_measurable), int(r.step_faster), int(r.step_slower)
        text = f"The model step ({r.step_models}) is faster beyond noise at {f} of {T.count(n, 'measurable size')}"
        if f and s == 0 and r.step_change_max_pct < 0:
            text += f" ({T.faster_span(r.step_change_max_pct / 100, r.step_change_min_pct / 100)})"
        parts.append(f"{text}, slower at {s}.")
    if not T.missing(r.call_s_min):
        parts.append(f"Tuning: {T.seconds(r.call_s_min, r.call_s_max)} per call.")
    return " ".join(parts)


def findings_markdown(results) -> str:
    """The main page's answers as Markdown for docs/findings.md: loud failures, one verdict per op, MoE per model."""
    lines = [f"- {line}" for line in failure_lines(results)]
    lines += [f"- {verdict_line(row)}" for row in results.op_verdicts.itertuples(index=False)]
    if len(results.moe_summary):
        lines += ["", "MoE, per model:", ""] + [f"- {moe_model_line(s)}"
                                                 for s in results.moe_summary.itertuples(index=False)]
    return "\n".join(lines) + "\n"
