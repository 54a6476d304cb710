"""A tuning plan (``profkit.analysis.advise``) written in FlashInfer's and the engines' own switches.

Each writer names the version it was checked against:

- FlashInfer: flashinfer-python **0.7.2.post1** (the installed wheel; ``AT`` =
  ``flashinfer/autotuner/autotuner.py``, ``TB`` = ``flashinfer/tactics_blocklist.py``).
  ``autotune(tune_mode, cache, tuning_buckets, round_up, skip_ops, cuda_graph_profile_replays)``
  (AT:835); ``FLASHINFER_TACTICS_BLOCKLIST`` is read once, when the AutoTuner singleton is created
  (AT:1576-1583); the file is ``{"_metadata": {...}, "invalid_tactics": {"op::RunnerClass":
  [tactic, ...]}}`` (TB:151-198) and is skipped when a ``_metadata`` value differs from
  ``_collect_metadata()`` unless it is ``"*"`` (TB:75-92).
- SGLang: sgl-project/sglang @ 028ae083, ``python/sglang/srt/model_executor/runner/flashinfer_autotune.py``:
  ``get_flashinfer_autotune_skip_ops`` reads the server argument ``flashinfer_autotune_skip_ops``
  and ``flashinfer_autotune_context`` enters ``autotune(True, cache=..., skip_ops=skip_ops)``, with
  no ``tuning_buckets``; the argument is declared in ``python/sglang/srt/server_args.py`` @ 001067ff
  (``flashinfer_autotune_skip_ops``, ``nargs="+"``: ``--flashinfer-autotune-skip-ops op [op ...]``),
  beside ``disable_flashinfer_autotune`` (``--disable-flashinfer-autotune``).
- vLLM: ``vllm/model_executor/warmup/kernel_warmup.py`` (vllm-project/vllm, the version in the
  search index that defines ``_flashinfer_autotune_skip_ops``): ``VLLM_FLASHINFER_AUTOTUNE_SKIP_OPS``
  is a comma-separated list (blanks dropped, ``""`` = skip nothing), overriding vLLM's own skip of
  ``fp4_gemm`` for CuTe-DSL NVFP4; ``VLLM_FLASHINFER_AUTOTUNE_TOKEN_SIZES`` only chooses the sizes of
  the dummy forwards run inside ``fi_utils.autotune()`` (no ``tuning_buckets``), and each forward at
  M tunes every bucket up to M, so it cannot leave buckets out; ``kernel_config.enable_flashinfer_autotune``
  False skips tuning (``--no-enable-flashinfer-autotune``, flashinfer_autotuner.md section 5.2).
"""

from __future__ import annotations

import json
from datetime import datetime, timezone

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from profkit.analysis.advise import Plan
from profkit.views._style import ACCENT, NEUTRAL, SLOWER, categorical_bucket_axis, figure_and_axes, styled

FLASHINFER_CHECKED = "flashinfer-python 0.7.2.post1"
SGLANG_CHECKED = "sgl-project/sglang @ 028ae083 (flashinfer_autotune.py), server_args.py @ 001067ff"
VLLM_CHECKED = "vllm-project/vllm kernel_warmup.py (_flashinfer_autotune_skip_ops)"


def plan_table(plan: Plan) -> pd.DataFrame:
    """The short table: per op, full and planned tuning seconds, their ratio and the expected cost."""
    o = plan.ops
    return pd.DataFrame({
        "op": o["op"], "decision": o["decision"], "full_tuning_s": o["full_s"].round(1),
        "planned_tuning_s": o["planned_s"].round(1),
        "ratio": o["ratio"].map(lambda r: "never tuned" if not np.isfinite(r) else f"{r:.1f}x"),
        "tuned_buckets": [f"{t}/{n}" for t, n in zip(o["n_tuned_buckets"], o["n_buckets"])],
        "expected_cost_us": (1000.0 * o["cost_ms"]).round(2), "expected_cost_pct": o["cost_pct"].round(2),
    })


def plan_text(plan: Plan) -> str:
    """:func:`plan_table` as fixed-width text (what ``profkit advise`` prints)."""
    return plan_table(plan).to_string(index=False)


def python_snippet(plan: Plan, blocklist_path: str = "blocklist.json") -> str:
    """The Python call that tunes with the plan (checked against flashinfer-python 0.7.2.post1)."""
    lines = [f"# profkit advise: {plan.budget}; checked against {FLASHINFER_CHECKED}.",
             "# flashinfer.autotune(tune_mode, cache, tuning_buckets, round_up, skip_ops, ...): autotuner.py:835"]
    if not plan.tuned_ops:
        lines += [f"# Do not tune {', '.join(plan.skip_ops)} on this GPU: the default (runners[0], tactic -1)",
                  "# runs without any tuning pass, so no flashinfer.autotune(True) context is needed."]
        return "\n".join(lines) + "\n"
    if plan.blocklist:
        lines += ["import os", "",
                  "# FlashInfer reads the blocklist once, when it creates its AutoTuner (autotuner.py:1576):",
                  "# set it before the process first tunes.",
                  f"os.environ.setdefault(\"FLASHINFER_TACTICS_BLOCKLIST\", {blocklist_path!r})"]
    lines += ["import flashinfer", ""]
    args = ["True"]
    if plan.tuning_buckets is not None:
        args.append(f"tuning_buckets={tuple(int(b) for b in plan.tuning_buckets)!r}")
        lines += ["# Sizes whose own bucket (FlashInfer rounds M up to its next bucket) is not in tuning_buckets",
                  "# run the default after tuning: the plan counted that as its expected cost."]
    if plan.skip_ops:
        args.append(f"skip_ops={set(plan.skip_ops)!r}")
    lines += [f"with flashinfer.autotune({', '.join(args)}):", "    run_model_once()  # your tuning forward"]
    return "\n".join(lines) + "\n"


def blocklist_file(plan: Plan) -> dict:
    """The blocklist in FlashInfer's own layout (``TacticsBlocklist.save``), ``_metadata`` = the capture's."""
    meta = dict(plan.metadata)
    meta["generated_at"] = datetime.now(timezone.utc).isoformat()
    meta["generator"] = "profkit advise"
    return {"_metadata": meta, "invalid_tactics": {k: list(v) for k, v in sorted(plan.blocklist.items())}}


def sglang_flags(plan: Plan, blocklist_path: str = "blocklist.json") -> str:
    """SGLang server flags and environment for the plan."""
    return _engine_text(plan, SGLANG_CHECKED, off="--disable-flashinfer-autotune",
                        blocklist=f"# environment (read by FlashInfer itself): FLASHINFER_TACTICS_BLOCKLIST={blocklist_path}",
                        skip="--flashinfer-autotune-skip-ops " + " ".join(plan.skip_ops),
                        buckets="SGLang passes no tuning_buckets to FlashInfer")


def vllm_env(plan: Plan, blocklist_path: str = "blocklist.json") -> str:
    """vLLM environment variables (a shell snippet) for the plan."""
    return _engine_text(plan, VLLM_CHECKED, off="# no tuning at all: vllm serve ... --no-enable-flashinfer-autotune",
                        blocklist=f"export FLASHINFER_TACTICS_BLOCKLIST={blocklist_path}",
                        skip=f"export VLLM_FLASHINFER_AUTOTUNE_SKIP_OPS={','.join(plan.skip_ops)}",
                        buckets="VLLM_FLASHINFER_AUTOTUNE_TOKEN_SIZES picks dummy-forward sizes, not buckets")


def _engine_text(plan: Plan, checked: str, *, off: str, blocklist: str, skip: str, buckets: str) -> str:
    """An engine's lines: ``off`` when nothing is tuned, else the blocklist, skip and bucket lines that apply."""
    lines = [f"# profkit advise: {plan.budget}; checked against {checked}."]
    if not plan.tuned_ops:
        return "\n".join(lines + [off]) + "\n"
    if plan.blocklist:
        lines.append(blocklist)
    if plan.tuning_buckets is not None:
        lines.append(f"# {buckets}: the plan's bucket selection {tuple(int(b) for b in plan.tuning_buckets)} "
                     "cannot be applied through this engine.")
    if plan.skip_ops:
        lines.append(skip)
    return "\n".join(lines) + "\n"


def plan_markdown(plan: Plan, frontier: pd.DataFrame | None = None) -> str:
    """plan.md: the table, the switches, what is blocked and why, other budgets (``budget_frontier``), caveats."""
    out = [f"# Tuning plan ({plan.budget})", "",
           f"Gains by {plan.gain_source} timings; costs from the capture's tuning table; one pass = "
           "one call of every captured shape at every bucket (or at the batch-size mix).", "",
           "```text", plan_text(plan), "```", ""]
    out += [f"- {v}" for v in plan.ops["verdict"]]
    out += ["", "## Switches", "",
            f"- `skip_ops`: {', '.join(plan.skip_ops) if plan.skip_ops else 'none'}",
            f"- `tuning_buckets`: {'FlashInfer default' if plan.tuning_buckets is None else list(plan.tuning_buckets)}",
            f"- blocklist: {_blocked_summary(plan)}", ""]
    if frontier is not None and len(frontier):
        shown = frontier.assign(ratio=frontier["ratio"].round(1), planned_s=frontier["planned_s"].round(1),
                                full_s=frontier["full_s"].round(1), cost_pct=frontier["cost_pct"].round(2))
        out += ["## Other budgets (at most Y% slower per pass)", "", "```text", shown.to_string(index=False), "```", ""]
    if plan.notes:
        out += ["## Caveats", ""] + [f"- {n}" for n in plan.notes] + [""]
    return "\n".join(out)


def _blocked_summary(plan: Plan) -> str:
    t = plan.tactics
    if not plan.blocklist:
        return "nothing blocked"
    parts = []
    for key, tactics in plan.blocklist.items():
        op, runner = key.split("::", 1)
        mine = t[(t["op"] == op) & (t["runner"] == runner)]
        saved = float(mine.loc[mine["blocked"].fillna(False).to_numpy(dtype=bool), "measure_s"].sum())
        parts.append(f"{key}: {len(tactics)} of {len(mine)} tactics (never within noise of the winner; "
                     f"{saved:.1f} s of measuring per full pass)")
    return "; ".join(parts)


@styled
def plot_plan(plan: Plan, *, op: str | None = None, ax=None) -> Figure:
    """Per bucket (one equal cell each): tuning seconds (tuned by the plan: dark, left out: grey), and
    the step time per pass each bucket's tuning buys beyond noise (red line, right axis)."""
    b = plan.buckets if op is None else plan.buckets[plan.buckets["op"] == op]
    fig, ax = figure_and_axes(ax, figsize=(8.0, 3.8))
    per = b.groupby("bucket", observed=True).agg(tuning_s=("tuning_s", "sum"), value_ms=("value_ms", "sum"),
                                                tuned=("tuned", "any")).reset_index()
    where = categorical_bucket_axis(ax, per["bucket"].astype(int).tolist())
    x = [where[int(v)] for v in per["bucket"]]
    tuned = per["tuned"].to_numpy(dtype=bool)
    ax.bar(x, per["tuning_s"], width=0.85, color=[ACCENT if t else NEUTRAL for t in tuned], edgecolor="white")
    ax.set_ylabel("tuning s (all shapes)")
    twin = ax.twinx()
    twin.plot(x, 1000.0 * per["value_ms"], color=SLOWER, marker="o", ms=3.5)
    twin.set_ylabel("us per pass bought by tuning\n(beyond noise)", color=SLOWER)
    twin.set_ylim(bottom=min(0.0, twin.get_ylim()[0]))
    twin.grid(False)
    handles = [Patch(color=ACCENT, label="tuned by the plan")] if tuned.any() else []
    handles += [Patch(color=NEUTRAL, label="left out")] if not tuned.all() else []
    ax.legend(handles=handles + [Line2D([], [], color=SLOWER, marker="o", ms=3.5, label="gain of tuning it")],
              loc="upper left", fontsize=7)
    name = op or ", ".join(plan.ops["op"])
    ops = plan.ops if op is None else plan.ops[plan.ops["op"] == op]
    full, planned = float(ops["full_s"].sum()), float(ops["planned_s"].sum())
    ax.set_title(f"{name}: the plan tunes {int(tuned.sum())} of {len(per)} buckets, "
                 f"{planned:.0f} s of {full:.0f} s of tuning")
    return fig


def advise_section(plan: Plan) -> tuple[str, list[tuple[str, Figure]]]:
    """The report section: its markdown and its figures (name, Figure), one figure per op."""
    text = plan_markdown(plan).replace("# Tuning plan", "## Tuning plan", 1)
    return text, [(f"advise-{op}", plot_plan(plan, op=op)) for op in plan.ops["op"]]


def blocklist_json(plan: Plan) -> str:
    """:func:`blocklist_file` as JSON text."""
    return json.dumps(blocklist_file(plan), indent=2) + "\n"


def advise_report_section(ctx):
    """A section builder for :data:`profkit.views.report.SECTIONS`: the plan of the report's captures.

    The plan is the one with no step cost beyond noise (by serving timings where the report has
    verify verdicts, else the tuner's), with the budgets table beside it; None when the captures
    hold nothing to plan from.
    """
    from profkit.analysis.advise import advise, budget_frontier
    from profkit.errors import ProfkitError
    from profkit.views import report

    verdicts = getattr(ctx, "verdicts", None)
    serving = {"verify": verdicts} if verdicts is not None and len(verdicts) else {}
    try:
        plan = advise(ctx.data.tables, **serving)
        frontier = budget_frontier(ctx.data.tables, metadata=plan.metadata, **serving)
    except ProfkitError:
        return None
    text = "\n".join([f"Gains by {plan.gain_source} timings, costs from the tuning table; one pass = one call of "
                      "every captured shape at every bucket. `profkit advise` writes the switches.", ""]
                     + [f"- {v}" for v in plan.ops["verdict"]] + [f"- {n}" for n in plan.notes])
    figures = tuple(report.FigureSpec(f"advise_{op}", f"Tuning plan for {op}",
                                      "Tuning seconds per bucket (dark: tuned by the plan, grey: left out) and the "
                                      "step time per pass each bucket's tuning buys beyond noise.",
                                      draw=lambda op=op: plot_plan(plan, op=op))
                    for op in plan.ops["op"])
    tables = (report.Table(plan_table(plan), "advise_plan"),
              report.Table(frontier, "advise_budgets", what="at most Y% slower per pass"))
    return report.Section("Tuning plan (profkit advise)", text, figures=figures, tables=tables)
