"""Figures and the notebook explorer, drawn from profkit.analysis frames (the report lays them out: profkit.report).

Every ``plot_<thing>(frame, *, ..., ax=None)`` returns a matplotlib Figure: with ``ax=None`` a
new ``Figure(layout="constrained")`` (no pyplot, nothing global changes), with ``ax=`` given it
draws only into that Axes and returns ``ax.figure``. Styling comes from ``rc_context``.
Each figure states how its times were measured (fp8_gemm: eager, hot L2, mean; bf16_gemm: CUDA
graph, cold L2, median) in a note under the axes. ``with views.use_style("doc"):`` draws the
figures made inside it for design documents (larger type, no run ids).

Also public, for the report and notebooks that lay figures and tables out: the styles (``STYLES``,
``DPI``, ``styled``), labels and notes (``short_label``, ``timing_note``, ``timings_of``,
``STATE_ORDER``, ``gpu_name``), table formatting (``display_frame``, ``number``) and a figure's
files (``figure_files``).
"""

from profkit.views._candidates import plot_candidates
from profkit.views._compare import plot_diff, plot_rank_divergence, plot_winner_flips
from profkit.views._explorer import explorer  # ipywidgets is imported only when called
from profkit.views._export import figure_files
from profkit.views._e2e import plot_kernel_vs_e2e, plot_op_timings, plot_step_change
from profkit.views._format import display_frame, number
from profkit.views._moe import plot_moe_routing, plot_moe_step, plot_moe_tactics
from profkit.views._portability import gpu_name, plot_portability
from profkit.views._speedup import plot_speedup
from profkit.views._step import STATE_ORDER, plot_step_times
from profkit.views._style import DPI, STYLES, short_label, styled, timing_note, timings_of, use_style
from profkit.views._tactic_map import plot_tactic_map
from profkit.views._tuning import plot_tuning_time, plot_tuning_value
from profkit.views._verdicts import plot_verdicts
from profkit.views._verify import plot_serving_vs_tuner


__all__ = [
    "DPI", "STATE_ORDER", "STYLES", "display_frame", "gpu_name", "number", "short_label", "styled",
    "timing_note", "timings_of", "figure_files",
    "explorer", "plot_candidates", "plot_diff", "plot_kernel_vs_e2e", "plot_moe_routing", "plot_moe_step",
    "plot_moe_tactics", "plot_op_timings", "plot_portability", "plot_rank_divergence",
    "plot_serving_vs_tuner", "plot_speedup", "plot_step_change", "plot_step_times", "plot_tactic_map",
    "plot_tuning_time", "plot_tuning_value", "plot_verdicts", "plot_winner_flips", "use_style",
]
