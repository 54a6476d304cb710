"""The detail pages: per shape, per step set, per policy and per model, a click away from the verdicts.

Every builder here formats fields of :class:`profkit.analysis.results.Results`; none computes.
"""

from __future__ import annotations

from profkit.analysis.step_sets import NEW_STATES
from profkit.catalog.reduced import MAX_DETAILED_RUNS
from profkit.report import _text as T
from profkit.report._figures import per_op, small_multiples, step_times_grid
from profkit.report._main import moe_figures, moe_model_line
from profkit.report._page import FigureSpec, ReportContext, Section, Table
from profkit.views import (STATE_ORDER, plot_candidates, plot_diff, plot_kernel_vs_e2e, plot_op_timings,
                           plot_rank_divergence, plot_speedup, plot_step_change, plot_tactic_map, plot_tuning_value,
                           plot_winner_flips)

_WINNER_COLUMNS = ["op", "shape", "bucket", "runner", "tactic", "time_ms", "default_ms", "speedup", "noise_pct",
                   "within_noise"]


# -- tactics ----------------------------------------------------------------------------------------
def tactic_section(ctx: ReportContext) -> Section | None:
    r = ctx.results
    if r.speedups.empty and r.winners.empty:
        return None
    figures = [FigureSpec("tactic_map", "Which runner and tactic won each bucket",
                          "One row per op and shape (first run each), one equal cell per bucket (its M below). Colour "
                          "family = runner, shade and cell text = tactic; red hatched cells timed slower than the "
                          "default beyond noise.",
                          lambda: plot_tactic_map(r.speedups if len(r.speedups) else r.winners, labels=ctx.labels,
                                                  runs=ctx.data.tables.runs))]
    omitted = ()
    if len(r.speedups):
        top = r.speedups.sort_values("speedup", ascending=False, kind="stable").iloc[0]
        figures.append(FigureSpec(
            "candidates", "Every candidate of one shape",
            f"Every candidate of {top['op']} {_shape(ctx, top['shape'])}, the shape of the largest speedup ({top['speedup']:.3f}x at bucket "
            f"{int(top['bucket'])}, shaded); y framed on the 1.0-1.3x band where decisions are made.",
            lambda: plot_candidates(ctx.data.tables.candidates, op=top["op"], shape=top["shape"],
                                    run_id=top["run_id"], highlight=int(top["bucket"]), labels=ctx.labels)))
    else:
        omitted = ("Every candidate of one shape: not drawn: it shows the shape of the largest speedup, and no bucket "
                   "had its default timed.",)
    tables = (Table(ctx.named(r.speedups[_WINNER_COLUMNS]), "winners", sort_by="speedup",
                    what="largest speedup first"),) if len(r.speedups) else ()
    return Section("Tactic choices", "What FlashInfer's autotuner picked, bucket by bucket.", tuple(figures), tables,
                   omitted, page="tactics")


def _shape(ctx: ReportContext, shape) -> str:
    from profkit.views import short_label

    return short_label(shape, ctx.labels)


def speedup_section(ctx: ReportContext) -> Section | None:
    r = ctx.results
    if r.speedups.empty:
        return Section("Speedup over the default by the tuner's timer", page="tactics",
                       omitted=("Speedup: not drawn: no bucket had its default timed (captures with "
                                "time_default=False, logs, caches).",))
    lines = [f"- `{s.op}`: the winner beat the default by a median {s.median_speedup:.3f}x, at most "
             f"{s.max_speedup:.3f}x ({T.count(s.shapes, 'shape')} x "
             f"{T.count(s.buckets_per_shape, 'bucket') if not T.missing(s.buckets_per_shape) else f'{s.buckets} buckets in all'}, "
             f"first run each); {T.count(s.slower, 'bucket')} timed slower than the default, "
             f"{s.slower_beyond_noise} of them beyond the noise band." for s in r.speedup_summary.itertuples(index=False)]
    fig = FigureSpec("speedup", "Speedup of the winner over the default",
                     "default_ms / time_ms per bucket by the tuner's own timer, one panel per shape, with the noise "
                     "band; red triangles: winners slower than the default beyond noise, grey: within noise (a tie).",
                     lambda: small_multiples(
                         r.speedups, lambda f, ax, title: plot_speedup(f, ax=ax, legend=False, note=False, title=title,
                                                                       band_label="noise band (each shape's median)"),
                         labels=ctx.labels, xlabel="bucket (M, tokens)", ylabel="speedup vs default (x)"))
    slow = r.speedups[r.speedups["slower_than_default"].fillna(False).to_numpy(dtype=bool)]
    tables = (Table(ctx.named(slow[_WINNER_COLUMNS]), "slower_than_default", sort_by="speedup", ascending=True,
                    what="slowest first"),) if len(slow) else ()
    text = "\n".join(lines) + ("\n\nThe tuner's own timer: serving and the model step (main page) often disagree "
                               "with it.")
    return Section("Speedup over the default by the tuner's timer", text, (fig,), tables, page="tactics")


def outside_tuning_section(ctx: ReportContext) -> Section | None:
    r = ctx.results
    if r.between.empty:
        return None
    b = r.between
    lines = [f"- `{g.op}` {'at bucket M' if g.at_bucket else 'between buckets'}: median {g.median_speedup:.3f}x "
             f"({g.min_speedup:.3f}-{g.max_speedup:.3f}x over {g.n} points)"
             for g in r.between_summary.itertuples(index=False)]
    fig = FigureSpec("op_timings", "Tuned vs untuned outside tuning",
                     "The op timed at M on and between buckets, with and without the tuned configs (CUDA graph, "
                     "rotating inputs), one panel per op.",
                     lambda: per_op(b, lambda f, ax: plot_op_timings(f, labels=ctx.labels, ax=ax)))
    return Section("Outside tuning", "Tuned vs untuned (untuned_ms / tuned_ms):\n" + "\n".join(lines), (fig,),
                   (Table(r.between_summary, "outside_tuning_summary"),
                    Table(ctx.named(b), "outside_tuning", sort_by="speedup", ascending=True,
                          what="slowest tuned first", top=0)), page="tactics")


# -- cost -----------------------------------------------------------------------------------------
def cost_detail_section(ctx: ReportContext) -> Section | None:
    r = ctx.results
    if r.value.empty and r.worth.empty:
        return None
    figures = (FigureSpec("tuning_value", "What tuning time bought",
                          "Per op, one small panel per shape: cumulative tuning seconds against the microseconds one "
                          "call per bucket saves, bucket by bucket.",
                          lambda: small_multiples(
                              r.value, lambda f, ax, title: plot_tuning_value(f, ax=ax, legend=False, note=False,
                                                                              title=title),
                              labels=ctx.labels, log2_ticks=None, xlabel="cumulative tuning wall time (s)",
                              ylabel="saved per call, summed over buckets so far (us)",
                              note="saving = default_ms - winner's time_ms at each bucket, one call per bucket")),) \
        if len(r.value) else ()
    tables = (Table(ctx.named(r.worth[["op", "shape", "tuning_s", "measure_s", "median_speedup", "max_speedup",
                                       "n_slower", "saved_us_per_pass", "saved_pct_per_pass", "break_even_passes"]]),
                    "worth_tuning", sort_by="break_even_passes", ascending=True,
                    what="fewest passes to break even first"),) if len(r.worth) else ()
    text = ("By the tuner's own timer. One pass = one call at every tuned bucket; break-even passes = passes whose "
            "saving repays the tuning time.")
    return Section("Tuning cost per shape", text, figures, tables, page="cost")


def break_even_section(ctx: ReportContext) -> Section | None:
    r = ctx.results
    if r.break_even_summary.empty:
        return None
    lines = ["Tuning wall time divided by the time the tuned step saves = steps before the tuning pass pays for "
             "itself. Only sizes where tuned is faster beyond noise count: elsewhere tuning never pays back.", ""]
    for b in r.break_even_summary.itertuples(index=False):
        saving = f"saves time beyond noise at {b.saving_sizes} of {b.sizes} sizes"
        if b.saving_sizes:
            saving += (f", breaking even after {T.number(b.steps_min)} to {T.number(b.steps_max)} steps "
                       f"({T.number(b.serving_s_min)} to {T.number(b.serving_s_max)} s of serving at that size)")
        tuning = f"tuning {T.seconds(b.tuning_s)}, " if not T.missing(b.tuning_s) else "no tuning capture, "
        lines.append(f"- {b.model} {b.dtype}: {tuning}{saving}; slower beyond noise at {b.slower}.")
    layers = sorted({int(x) for x in r.step_rows["layers"].dropna()}) if "layers" in r.step_rows else []
    if len(layers) == 1:
        full = [f"{name} has {n}" for name, n in sorted(ctx.data.model_layers.items())]
        lines += ["", f"A step here is the {layers[0]} timed decoder layers, not the whole model"
                  + (f" ({', '.join(full)})" if full else "") + ": if the saving per layer held in every layer, a "
                  "full model would break even in proportionally fewer steps."]
    tables = (Table(r.step_break_even, "break_even", sort_by="steps_to_break_even", ascending=True,
                    what="soonest break-even first"),) if len(r.step_break_even) else ()
    return Section("When does tuning pay for itself?", "\n".join(lines), tables=tables, page="cost")


# -- the step -------------------------------------------------------------------------------------
def step_section(ctx: ReportContext) -> Section | None:
    r = ctx.results
    if r.step_measured.empty:
        return None
    figures = [FigureSpec("step_change", "Decoder step: tuned vs untuned",
                          "Measured change of a decoder step (profkit step), tuned vs untuned, one line per model and "
                          "dtype: on the left the steps the comparison rule could judge (95% interval; filled beyond "
                          "noise), on the right those it could not (one pass of each state), with the change the "
                          "tuning-pass capture predicts (dashed).",
                          lambda: plot_step_change(r.step_measured, predicted=r.step_predicted))]
    m = r.step_measured
    tables = (Table(m[["model", "dtype", "phase", "tokens", "state", "step_ms", "baseline_ms", "delta_pct", "effect_lo",
                       "effect_hi", "detectable", "verdict", "design"]], "step_change", sort_by="delta_pct",
                    what="largest slowdown first"),)
    text = ("Each state against untuned, in the step sets that hold their tuning pass's capture: tuned ran in the "
            "same process after the tuning pass, cache in a fresh process that loaded its cache.json, torch with "
            "plain torch linears. One pass of each state per process is **not measurable** under the comparison rule.")
    return Section("Decoder step", text, tuple(figures), tables, page="step")


def step_times_section(ctx: ReportContext) -> Section | None:
    """Step time per state, one figure per model and dtype (closed on the page: detail of the step change above)."""
    r = ctx.results
    if r.step_measured.empty:
        return None
    figures = []
    for (model, dtype), rows in r.step_rows.groupby(["model", "dtype"], sort=True):
        states = ", ".join(s for s in STATE_ORDER if (rows["state"] == s).any())
        figures.append(FigureSpec(
            _step_times_name(model, dtype), f"Step time per state: {model} {dtype}",
            f"Step time of {model} {dtype} ({states}) across decode batch sizes (left) and prefill chunks (right): "
            "milliseconds on top, relative to untuned below (< 1: faster than FlashInfer's untuned fallback). Markers "
            "are medians over the repetitions, bars min to max; every state at its true size.",
            lambda rows=rows, model=model, dtype=dtype: step_times_grid(rows, model=model, dtype=dtype)))
    return Section("Step time per state, per model", "Milliseconds per state at every size, per model and dtype.",
                   tuple(figures), page="step", collapsed=True)


def _step_times_name(model: str, dtype: str) -> str:
    return f"step_times_{model}_{dtype}"


def step_sets_section(ctx: ReportContext) -> Section | None:
    """Every step run or set: its states against untuned and the tuned cache, the drift, the predictions."""
    r = ctx.results
    if r.step_sets.empty:
        return None
    lines = []
    for (where, model, dtype), g in r.step_sets.groupby(["where", "model", "dtype"], sort=True):
        parts = []
        for state in [s for s in STATE_ORDER if s in set(g["state"])] + sorted(set(g["state"]) - set(STATE_ORDER)):
            h = g[g["state"] == state]
            versus = "; ".join(f"vs {x.baseline} {x.faster} faster, {x.slower} slower"
                               + (f", {x.not_measurable} not measurable" if x.not_measurable else "")
                               for x in h.itertuples(index=False))
            same = h["same_kernels"].dropna()
            if state in NEW_STATES and len(same):
                versus += f"; ran untuned's kernels at every linear at {int(same.iloc[0])} of {int(h['sizes'].iloc[0])} sizes"
            parts.append(f"**{state}** {versus}")
        lines.append(f"- {model} {dtype} ({where}), {T.count(int(g['sizes'].max()), 'size')}: " + " | ".join(parts) + ".")
    text = ["Every step run or set (a run where each of its set's runs timed untuned, else the set across processes), "
            "each state against untuned and the new states also against the tuned cache, sizes faster / slower "
            "beyond noise:", "\n".join(lines)]
    if len(r.drift_summary):
        parts = [f"by a median {d.drift_pct_median:.2f}% at {d.phase} (up to {d.drift_pct_max:.2f}%; the spread "
                 f"inside one pass: a median {d.within_pct_median:.2f}%)" for d in r.drift_summary.itertuples(index=False)]
        text.append("Between-pass drift (step runs that repeat a state): the median of one state's pass, same kernels "
                    "and sizes, moved " + "; ".join(parts) + ". A state timed once after another cannot tell a change "
                    "of that size from drift.")
    if len(r.predictions):
        names = {"verify": "predicted from verify (serving timings) against the tuning pass's tuned step",
                 "capture": "predicted from the capture (the tuner's timings), same measurement",
                 "verify_cache": "predicted from verify against the cache state of"}
        pl = [f"- {p.model} {p.dtype}, {names.get(p.against, p.against)}{' ' + p.where if p.where else ''}: sign "
              f"right at **{p.agree} of {p.sizes} sizes** ({p.agree_beyond_noise} of the {p.beyond_noise} measured "
              "beyond noise)." for p in r.predictions.itertuples(index=False)]
        text.append("Does the predicted step change have the measured sign?\n" + "\n".join(pl))
    return Section("Step sets: repaired, advised and policy states", "\n\n".join(text), (),
                   (Table(r.step_sets, "step_sets", top=0),), page="step")


def step_set_figures_section(ctx: ReportContext) -> Section | None:
    """Step time of every step set with a new state (repaired, advised, policies) relative to untuned, closed on the
    page; a set that holds every step run of its model and dtype is the per-model figure already: linked, not drawn
    twice."""
    r = ctx.results
    figures, twins = [], []
    for where, model, dtype, rows in r.step_comparisons:
        states = [s for s in STATE_ORDER if (rows["state"] == s).any()]
        new = [s for s in states if s in NEW_STATES]
        if not new:
            continue
        title = f"{', '.join(new)} against untuned: {model} {dtype} ({where})"
        mine = r.step_rows[((r.step_rows["model"] == model) & (r.step_rows["dtype"] == dtype)).to_numpy(dtype=bool)] \
            if len(r.step_rows) else r.step_rows
        per_model = ctx.figure(_step_times_name(model, dtype), f"step time per state: {model} {dtype}")
        if "source" in mine and len(mine) and set(mine["source"]) == set(rows["source"]):
            twins.append(f"- {title}: the same runs as {per_model}.")
            continue
        caption = (f"Step time of {model} {dtype} ({', '.join(states)}) from {where}"
                   + (" relative to untuned (< 1: faster)" if "untuned" in states else "")
                   + ", decode left, prefill right; medians over the repetitions, bars min to max."
                   + (f" The model's step in milliseconds (the tuning-pass runs): {per_model}." if len(mine) else ""))
        figures.append(FigureSpec(
            f"{where.replace('/', '_')}_{model}_{dtype}", title, caption,
            lambda rows=rows, model=model, dtype=dtype: step_times_grid(rows, model=model, dtype=dtype, ms=False)))
    if not figures and not twins:
        return None
    text = "\n".join(["Each step set that times a new state, against untuned per size."] + ([""] + twins if twins else []))
    return Section("Step time per step set", text, tuple(figures), page="step", collapsed=True)


# -- serving --------------------------------------------------------------------------------------
def verify_detail_section(ctx: ReportContext) -> Section | None:
    r = ctx.results
    if r.verdicts.empty and r.policies.empty:
        return None
    tables, text = [], []
    if len(r.verdicts):
        v = r.verdicts
        text.append(f"Each capture's top candidates by the tuner's times, its winner and FlashInfer's default re-timed "
                    f"the way engines run decode (CUDA graph replays, inputs rotated past L2) by `profkit verify`: "
                    f"{T.count(v['run_id'].nunique(), 'captured tuning run')}. Verdicts by the comparison rule "
                    "(processes as units; one process: the calibrated spread).")
        s = r.verify_summary
        tables.append(Table(s.assign(median_regret_pct=(100 * s["median_regret"]).round(2)).drop(columns="median_regret"),
                            "verify_summary"))
        shown = ctx.named(v.assign(effect_pct=100 * v["effect"], regret_pct=100 * v["regret"]))
        tables.append(Table(shown[["run_id", "op", "shape", "m", "bucket", "pick_runner", "pick_tactic", "pick_ms",
                                   "default_ms", "tuner_speedup", "serving_speedup", "effect_pct", "verdict",
                                   "regret_pct"]], "verify_verdicts", sort_by="serving_speedup", ascending=True,
                            what="the pick slowest against the default first; M between buckets included"))
    if len(r.policies):
        text.append("Measurement policies (each policy tuned the linears inside `profkit.capture`, then `profkit "
                    "verify` timed its picks the same way):\n"
                    + "\n".join(f"- `{p.policy}` {p.op} ({T.count(p.shapes, 'shape')}, {p.buckets} buckets): "
                                f"**{p.slower} slower** than the default in serving beyond noise, {p.faster} faster; "
                                f"median serving speedup {p.median_serving_speedup:.3f}x"
                                for p in r.policies.itertuples(index=False))
                    + "\n\nTuning seconds are summed over the study's calls; the first policy tuned in a process also "
                      "pays the cuDNN plan builds, so compare them only across process orders.")
        tables.append(Table(r.policies.assign(median_regret_pct=(100 * r.policies["median_regret"]).round(2),
                                              tuning_s=r.policies["tuning_s"].round(1)).drop(columns="median_regret"),
                            "verify_policies", sort_by="slower", ascending=True, top=len(r.policies)))
    return Section("Verify: the picks per capture, shape and M", "\n\n".join(text), tables=tuple(tables),
                   page="serving")


def e2e_section(ctx: ReportContext) -> Section | None:
    r = ctx.results
    if r.e2e.empty:
        return Section("Kernel speedup beside end-to-end serving", f"Engine results given but no serving pair: "
                       f"{r.e2e_problem}", page="serving") if r.e2e_problem else None
    w = r.serving_where
    kernel_where = w.get("kernel_gpus", "").replace("NVIDIA ", "")
    serving_where = ", ".join(x for x in (w.get("serving_gpus", "") or "GPU not recorded", w.get("serving_engines", ""),
                                          w.get("serving_models", "")) if x)
    rows = r.e2e[(r.e2e["kind"] == "e2e").to_numpy(dtype=bool)]
    parts = [f"{m.metric} {T.number(m.baseline)} -> {T.number(m.treatment)} {m.unit} ({m.improvement_pct:+.1f}%)"
             for m in rows.itertuples(index=False)]
    caveat = ("" if w.get("same_gpu") else
              f" These serving numbers come from {serving_where}, not from the {kernel_where or 'captured'} GPU of the "
              "kernels: read them beside the kernels, never as their effect.")
    text = f"Serving pair, autotune off -> on ({serving_where}): {'; '.join(parts)}.{caveat}"
    fig = FigureSpec("kernel_vs_e2e", "Kernel speedup beside end-to-end serving",
                     "Left: weighted kernel speedups of the captured GEMMs, where they were timed. Right: the serving "
                     "pair's deltas, in its own panel titled with where it ran.",
                     lambda: plot_kernel_vs_e2e(r.e2e, labels=ctx.labels, kernel_where=kernel_where,
                                                serving_where=serving_where,
                                                note="" if w.get("same_gpu") else f"Kernels on {kernel_where}; serving "
                                                f"on {serving_where}."))
    return Section("Kernels beside a serving pair", text, (fig,),
                   (Table(r.e2e[["kind", "metric", "unit", "baseline", "treatment", "improvement_pct", "note"]],
                          "kernel_vs_e2e"),), page="serving")


# -- MoE ------------------------------------------------------------------------------------------
def moe_detail_section(ctx: ReportContext) -> Section | None:
    r = ctx.results
    if r.moe_summary.empty or len(r.moe_models) < 2:
        return None
    figures = tuple(f for model in r.moe_models["model"].astype(str).iloc[1:] for f in moe_figures(ctx, model))
    lines = [f"- {moe_model_line(s)}" for s in r.moe_summary.itertuples(index=False)]
    return Section("MoE per model", "\n".join(lines), figures, (Table(r.moe_summary, "moe_summary"),), page="moe")


# -- the plan -------------------------------------------------------------------------------------
MAX_PLAN_FIGURES = 8  # one figure per op up to this many; above it, one figure of all ops


def plan_section(ctx: ReportContext) -> Section | None:
    from profkit.outputs.engine_plans import plan_table
    from profkit.views.advise import plot_plan

    r = ctx.results
    if r.plan is None:
        return Section("Tuning plan (profkit advise)", f"No plan: {r.plan_error}", page="plan") if r.plan_error else None
    plan = r.plan
    said = dict(zip(r.op_verdicts["op"].astype(str), r.op_verdicts["recommendation"].astype(str)))
    text = "\n".join([f"Gains by {plan.gain_source} timings, costs from the tuning table; one pass = one call of every "
                      "captured shape at every bucket. `profkit advise` writes the switches. Each op's verdict is the "
                      "main page's; the plan says what tuning it would keep, were you to tune it.", ""]
                     + [f"- {_planned(op, v, said.get(str(op)))}" for op, v in zip(plan.ops["op"], plan.ops["verdict"])]
                     + [f"- {' '.join(str(n).split())}" for n in plan.notes])
    caption = ("Tuning seconds per bucket (dark: tuned by the plan, grey: left out) and the step time per pass "
               "each bucket's tuning buys, as the plan counts it (the right axis says by what).")
    ops = list(plan.ops["op"])
    figures = (tuple(FigureSpec(f"advise_{op}", f"Tuning plan for {op}", caption, lambda op=op: plot_plan(plan, op=op))
                     for op in ops) if len(ops) <= MAX_PLAN_FIGURES else
               (FigureSpec("advise_all", f"Tuning plan for all {len(ops)} ops", caption, lambda: plot_plan(plan)),))
    tables = (Table(plan_table(plan), "advise_plan"), Table(r.frontier, "advise_budgets", what="at most Y% slower per pass"))
    return Section("Tuning plan (profkit advise)", text, figures, tables, page="plan")


def _planned(op: str, plan_verdict: str, recommendation: str | None) -> str:
    """One op's plan line, led by the main page's verdict, so the two pages never disagree."""
    plan_verdict = " ".join(str(plan_verdict).split())
    if recommendation in ("skip", "failed"):
        return f"`{op}`: verdict **{recommendation}** (main page): do not tune it. For reference, advise: {plan_verdict}"
    if recommendation in ("keep", "plan", "unknown"):
        return f"`{op}`: verdict **{recommendation}** (main page). Advise: {plan_verdict}"
    return plan_verdict


# -- repeats --------------------------------------------------------------------------------------
def repeats_section(ctx: ReportContext) -> Section | None:
    r = ctx.results
    figures, tables, text = [], [], [reduced_line(ctx.data)] if reduced_line(ctx.data) else []
    repeated = r.stability[(r.stability["n_tunings"] > 1).fillna(False).to_numpy(dtype=bool)] if len(r.stability) \
        else r.stability
    if len(repeated):
        flipped = repeated[(repeated["n_distinct"] > 1).to_numpy(dtype=bool)]
        beyond = int((~flipped["within_noise"].fillna(True).astype(bool)).sum())
        text.append(f"Across repeated tunings (runs, and calls that re-profiled), {len(flipped)} of {len(repeated)} "
                    f"buckets changed winner, {beyond} of them beyond noise; the worst flip costs "
                    f"{repeated['regret_pct'].max():.2f}%.")
        figures.append(FigureSpec("winner_flips", "Winner flips across repeated tunings",
                                  "Share of run pairs whose winner differs, per bucket, for shapes tuned more than once; "
                                  "red only where the flip costs more than noise.",
                                  lambda: plot_winner_flips(r.stability, labels=ctx.labels)))
        tables.append(Table(ctx.named(flipped[["op", "shape", "bucket", "n_tunings", "winners", "flip_rate",
                                               "regret_pct", "noise_pct", "within_noise"]]),
                            "winner_flips", sort_by="regret_pct", what="costliest flip first"))
    if len(r.diff):
        figures.append(FigureSpec("diff", "First run against the next run",
                                  "Which buckets changed winner between the first run of each shape and the next run "
                                  "of it, and what the other choice costs, priced on the first run's measurements.",
                                  lambda: plot_diff(r.diff, labels=ctx.labels, names=("first run", "next run"))))
    if len(r.ranks):
        dis = r.ranks[~r.ranks["agree"].fillna(True).to_numpy(dtype=bool)]
        text.append(f"Ranks disagree in {len(dis)} of {len(r.ranks)} buckets, "
                    f"{int((~dis['within_noise'].fillna(True).astype(bool)).sum())} beyond noise.")
        figures.append(FigureSpec("rank_divergence", "Per-rank divergence",
                                  "Buckets where ranks (independent tunings) chose different winners, and the regret.",
                                  lambda: plot_rank_divergence(r.ranks, labels=ctx.labels)))
        if len(dis):
            tables.append(Table(ctx.named(dis[["op", "shape", "bucket", "winners", "regret_pct", "noise_pct",
                                               "within_noise"]]), "rank_divergence", sort_by="regret_pct",
                                what="costliest first"))
    if len(r.cache_diff):
        text.append(f"Each capture's winners against the cache.json FlashInfer wrote in the same process: "
                    f"{int(r.cache_diff['changed'].sum())} of {len(r.cache_diff)} decisions differ.")
    if not figures and not text:
        return None
    return Section("Repeats and ranks", "\n".join(f"- {line}" for line in text), tuple(figures), tuple(tables),
                   page="repeats")


def reduced_line(data) -> str:
    """How many runs were read whole and how many as reductions ("" when every run was read whole)."""
    reduced = getattr(data, "reductions", None)
    if reduced is None:
        return ""
    whole, only = len(reduced.detailed), len(reduced.reduced)
    return (f"More than {MAX_DETAILED_RUNS} runs tuned one bucket: {T.count(whole, 'run')} read whole (the folders "
            f"holding each bucket's first run: the tactics, speedups, costs, plan and candidate figures are theirs), "
            f"{T.count(only, 'run')} read only as reductions (each decision's pick with its time and the default's, "
            f"and each run's time per candidate): the noise, winner flips, rank and repeat questions count all "
            f"{whole + only}.")


# -- provenance -----------------------------------------------------------------------------------
def provenance_section(ctx: ReportContext) -> Section:
    data = ctx.data
    lines = [f"{T.count(len(data.tables.runs), 'run')} read from `{data.root}` "
             f"({', '.join(getattr(data, 'inputs', ('captures',)))})."]
    if reduced_line(data):
        lines.append(reduced_line(data))
    for where, prov in data.provenance.items():
        env = prov.get("env", {}) if isinstance(prov.get("env", {}), dict) else {}
        flags = ", ".join(prov.get("flags", []) or []) or "none"
        lines.append(f"- `{where}`: started {env.get('started_at', '?')}, flags {flags}, command "
                     f"`{env.get('command', '?')}`")
    loud = ()
    if data.problems:
        loud = (f"{T.count(len(data.problems), 'file')} could not be read and "
                f"{'was' if len(data.problems) == 1 else 'were'} skipped (listed below).",)
        lines += ["", f"**{T.count(len(data.problems), 'file')} could not be read** and "
                  f"{'was' if len(data.problems) == 1 else 'were'} skipped:"] + [f"- `{p}`" for p in data.problems]
    return Section("Provenance", "\n".join(lines), tables=(Table(ctx.results.environment, "environment"),),
                   page="provenance", loud=loud)
