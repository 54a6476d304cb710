"""A tuning plan (``profkit.analysis.advise``) written in FlashInfer's and the engines' own switches.

``profkit advise --out DIR`` writes six files through :func:`write_plan`, as one set
(:func:`profkit.outputs.atomic.write_set`): ``plan.md``, ``plan.py``, ``blocklist.json``,
``sglang_flags.txt``, ``vllm_env.sh`` and ``plan.json`` (the plan as data, read back by
:func:`profkit.sources.plan.read_plan_json`). Op and runner names come from captures of other
machines, so each file carries them only as data of its own language:

- ``plan.py``: Python literals (``ascii()``, so the file is plain ASCII), never in comments or code.
- ``vllm_env.sh`` and ``sglang_flags.txt``: each value one ``shlex.quote``d shell word; comments
  hold only profkit's own words and numbers.
- ``blocklist.json`` and ``plan.json``: JSON strings (ASCII, ``\\u`` escapes).
- ``plan.md``: Markdown with no raw HTML and no unsafe link (:func:`profkit.outputs.markdown.markdown_safe`).

A name an engine cannot take as given (a comma inside a vLLM list entry, a leading ``-`` that
argparse reads as a flag, a NUL) is refused with :class:`~profkit.errors.ProfkitError`.

Each writer names the version it was checked against:

- FlashInfer: flashinfer-python **0.7.2.post1** (the installed wheel; ``AT`` =
  ``flashinfer/autotuner/autotuner.py``, ``TB`` = ``flashinfer/tactics_blocklist.py``).
  ``autotune(tune_mode, cache, tuning_buckets, round_up, skip_ops, cuda_graph_profile_replays)``
  (AT:835); ``FLASHINFER_TACTICS_BLOCKLIST`` is read once, when the AutoTuner singleton is created
  (AT:1576-1583); the file is ``{"_metadata": {...}, "invalid_tactics": {"op::RunnerClass":
  [tactic, ...]}}`` (TB:151-198), looked up by the exact ``f"{custom_op}::{runner class}"``, and
  is skipped when a ``_metadata`` value differs from ``_collect_metadata()`` unless it is ``"*"``
  (TB:75-92).
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

import dataclasses
import json
import os
import shlex
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterable

import numpy as np
import pandas as pd

from profkit.analysis.advise import Plan, split_blocklist_key
from profkit.errors import ProfkitError
from profkit.outputs import atomic
from profkit.outputs.markdown import fence, markdown_safe
from profkit.schema import PLAN_FORMAT, PlanFile, PlanOp

FLASHINFER_CHECKED = "flashinfer-python 0.7.2.post1"
SGLANG_CHECKED = "sgl-project/sglang @ 028ae083 (flashinfer_autotune.py), server_args.py @ 001067ff"
VLLM_CHECKED = "vllm-project/vllm kernel_warmup.py (_flashinfer_autotune_skip_ops)"
FILES = ("plan.md", "plan.py", "blocklist.json", "sglang_flags.txt", "vllm_env.sh", "plan.json")


def write_plan(plan: Plan, out: str | os.PathLike, *, frontier: pd.DataFrame | None = None,
               inputs: Iterable[str | os.PathLike] = ()) -> list[Path]:
    """Write the plan's six files (:data:`FILES`) into ``out`` as one set; return their paths.

    The blocklist variable in ``plan.py``, ``sglang_flags.txt`` and ``vllm_env.sh`` names
    ``out/blocklist.json`` by its absolute path.

    Raises:
        ProfkitError: a name no file can carry safely, ``out`` not a folder, an output that is one
            of ``inputs``, or a failed write (each naming the file).
    """
    out = Path(out)
    blocklist = str(Path(os.path.abspath(out)) / "blocklist.json")
    files = {
        "plan.md": plan_markdown(plan, frontier),
        "plan.py": python_snippet(plan, blocklist),
        "blocklist.json": blocklist_json(plan),
        "sglang_flags.txt": sglang_flags(plan, blocklist),
        "vllm_env.sh": vllm_env(plan, blocklist),
        "plan.json": plan_json(plan),
    }
    return atomic.write_set(out, files, inputs=inputs)


def plan_record(plan: Plan) -> PlanFile:
    """What ``plan.json`` holds: the plan's switches and per-op numbers as plain data.

    Tactics are JSON values (tuples become lists) and numbers Python ints and floats, so the
    record equals what :func:`profkit.sources.plan.read_plan_json` reads back from the file.
    """
    b = plan.buckets
    tuned = b[b["tuned"].fillna(False).to_numpy(dtype=bool)]
    per_op = {str(op): tuple(sorted({int(m) for m in g["bucket"]})) for op, g in tuned.groupby("op", observed=True)}
    ops = tuple(PlanOp(op=str(r.op), decision=str(r.decision), tuned_buckets=per_op.get(str(r.op), ()),
                       n_shapes=int(r.n_shapes), n_buckets=int(r.n_buckets), full_s=float(r.full_s),
                       planned_s=float(r.planned_s), jit_s=float(r.jit_s), prep_kept_s=float(r.prep_kept_s),
                       pass_ms=float(r.pass_ms), cost_ms=float(r.cost_ms), cost_pct=float(r.cost_pct),
                       verdict=str(r.verdict))
                for r in plan.ops.itertuples(index=False))
    return PlanFile(budget=str(plan.budget), gain_source=str(plan.gain_source), skip_ops=tuple(map(str, plan.skip_ops)),
                    tuning_buckets=None if plan.tuning_buckets is None else tuple(int(m) for m in plan.tuning_buckets),
                    blocklist=_as_json(plan.blocklist), metadata=_as_json(plan.metadata),
                    notes=tuple(map(str, plan.notes)), ops=ops)


def plan_json(plan: Plan) -> str:
    """plan.json: :func:`plan_record` as a JSON object with ``"format": "profkit-plan/1"``."""
    return atomic.dumps_json({"format": PLAN_FORMAT, **dataclasses.asdict(plan_record(plan))}, "plan.json")


def _as_json(value):
    """``value`` as JSON reads it back (tuples become lists); ProfkitError naming plan.json when it is no JSON."""
    return json.loads(atomic.dumps_json(value, "plan.json"))


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
    """plan.py: the Python call that tunes with the plan (checked against flashinfer-python 0.7.2.post1).

    Names and paths appear only as Python literals (``ascii``), so no name can end a comment or
    a string; the file is plain ASCII.
    """
    lines = [f"# profkit advise: {_own_words(plan.budget)}; checked against {FLASHINFER_CHECKED}.",
             "# flashinfer.autotune(tune_mode, cache, tuning_buckets, round_up, skip_ops, ...): autotuner.py:835"]
    if not plan.tuned_ops:
        lines += ["# Do not tune the ops in DO_NOT_TUNE on this GPU: the default (runners[0], tactic -1)",
                  "# runs without any tuning pass, so no flashinfer.autotune(True) context is needed.",
                  f"DO_NOT_TUNE = {_literal_list(plan.skip_ops)}"]
        return "\n".join(lines) + "\n"
    if plan.blocklist:
        lines += ["import os", "",
                  "# FlashInfer reads the blocklist once, when it creates its AutoTuner (autotuner.py:1576):",
                  "# set it before the process first tunes.",
                  f"os.environ.setdefault(\"FLASHINFER_TACTICS_BLOCKLIST\", {_python_name(blocklist_path)})"]
    lines += ["import flashinfer", ""]
    args = ["True"]
    if plan.tuning_buckets is not None:
        args.append(f"tuning_buckets={tuple(int(b) for b in plan.tuning_buckets)!r}")
        lines += ["# Sizes whose own bucket (FlashInfer rounds M up to its next bucket) is not in tuning_buckets",
                  "# run the default after tuning: the plan counted that as its expected cost."]
    if plan.skip_ops:
        args.append("skip_ops={" + ", ".join(_python_name(op) for op in sorted(plan.skip_ops)) + "}")
    lines += [f"with flashinfer.autotune({', '.join(args)}):", "    run_model_once()  # your tuning forward"]
    return "\n".join(lines) + "\n"


def blocklist_file(plan: Plan) -> dict:
    """The blocklist in FlashInfer's own layout (``TacticsBlocklist.save``), ``_metadata`` = the capture's."""
    meta = dict(plan.metadata)
    meta["generated_at"] = datetime.now(timezone.utc).isoformat()
    meta["generator"] = "profkit advise"
    for key in plan.blocklist:
        split_blocklist_key(key)
    return {"_metadata": meta, "invalid_tactics": {k: list(v) for k, v in sorted(plan.blocklist.items())}}


def blocklist_json(plan: Plan) -> str:
    """:func:`blocklist_file` as JSON text."""
    return atomic.dumps_json(blocklist_file(plan), "blocklist.json")


def sglang_flags(plan: Plan, blocklist_path: str = "blocklist.json") -> str:
    """sglang_flags.txt: SGLang server flags and environment for the plan, one shell word per value."""
    file = "sglang_flags.txt"
    return _engine_text(plan, SGLANG_CHECKED, off="--disable-flashinfer-autotune",
                        blocklist=lambda: "export FLASHINFER_TACTICS_BLOCKLIST="
                                          f"{_shell_word(blocklist_path, file, what='path')}"
                                          "  # read by FlashInfer itself, in the server's environment",
                        skip=lambda: "--flashinfer-autotune-skip-ops "
                                     + " ".join(_shell_word(op, file, flag_like=True) for op in plan.skip_ops),
                        buckets="SGLang passes no tuning_buckets to FlashInfer")


def vllm_env(plan: Plan, blocklist_path: str = "blocklist.json") -> str:
    """vllm_env.sh: vLLM environment variables for the plan, a shell snippet to ``source``."""
    file = "vllm_env.sh"
    return _engine_text(plan, VLLM_CHECKED, off="# no tuning at all: vllm serve ... --no-enable-flashinfer-autotune",
                        blocklist=lambda: "export FLASHINFER_TACTICS_BLOCKLIST="
                                          f"{_shell_word(blocklist_path, file, what='path')}",
                        skip=lambda: f"export VLLM_FLASHINFER_AUTOTUNE_SKIP_OPS={_vllm_list(plan.skip_ops)}",
                        buckets="VLLM_FLASHINFER_AUTOTUNE_TOKEN_SIZES picks dummy-forward sizes, not buckets")


def _vllm_list(ops) -> str:
    """vLLM's comma-separated op list as one shell word; an op the list cannot hold is refused."""
    for op in ops:
        if _not_list_entry(op):
            raise ProfkitError(f"vllm_env.sh: op {ascii(op)} {_LIST}")
    return _shell_word(",".join(ops), "vllm_env.sh")


_NUL = "holds a NUL character, which no environment variable or argument can carry"
_SURROGATE = "is not valid Unicode (a lone surrogate)"
_FLAG = "cannot be written: SGLang's argument parser would read it as a flag, not as an op"
_LIST = "cannot be written: VLLM_FLASHINFER_AUTOTUNE_SKIP_OPS is a comma-separated list with blanks dropped"


def skip_op_problem(op: str) -> str | None:
    """Why the engines' skip-op switches (SGLang's flag, vLLM's list) cannot carry ``op``; None when they can.

    ``profkit advise`` leaves such an op out of the plan and names it, instead of writing no plan.
    """
    return _unwritable(op) or (_FLAG if _is_flag(op) else _LIST if _not_list_entry(op) else None)


def _is_flag(op: str) -> bool:
    return not op or op.startswith("-")


def _not_list_entry(op: str) -> bool:
    return "," in op or op != op.strip() or not op


def _engine_text(plan: Plan, checked: str, *, off: str, blocklist: Callable[[], str], skip: Callable[[], str],
                 buckets: str) -> str:
    """An engine's lines: ``off`` when nothing is tuned, else the blocklist, skip and bucket lines that apply.

    ``blocklist`` and ``skip`` are built only when written, so a name the engine never sees is not refused.
    """
    lines = [f"# profkit advise: {_own_words(plan.budget)}; checked against {checked}."]
    if not plan.tuned_ops:
        return "\n".join(lines + [off]) + "\n"
    if plan.blocklist:
        lines.append(blocklist())
    if plan.tuning_buckets is not None:
        lines.append(f"# {buckets}: the plan's bucket selection {tuple(int(b) for b in plan.tuning_buckets)} "
                     "cannot be applied through this engine.")
    if plan.skip_ops:
        lines.append(skip())
    return "\n".join(lines) + "\n"


def plan_markdown(plan: Plan, frontier: pd.DataFrame | None = None) -> str:
    """plan.md: the table, the switches, what is blocked and why, other budgets (``budget_frontier``), caveats."""
    out = [f"# Tuning plan ({plan.budget})", "",
           f"Gains by {plan.gain_source} timings; costs from the capture's tuning table; one pass = "
           "one call of every captured shape at every bucket (or at the batch-size mix).", ""]
    out += fence(plan_text(plan)) + [""]
    out += [f"- {_one_line(v)}" for v in plan.ops["verdict"]]
    out += ["", "## Switches", "",
            f"- `skip_ops`: {', '.join(map(_one_line, plan.skip_ops)) if plan.skip_ops else 'none'}",
            f"- `tuning_buckets`: {'FlashInfer default' if plan.tuning_buckets is None else list(plan.tuning_buckets)}",
            f"- blocklist: {_one_line(_blocked_summary(plan))}", ""]
    if frontier is not None and len(frontier):
        shown = frontier.assign(ratio=frontier["ratio"].round(1), planned_s=frontier["planned_s"].round(1),
                                full_s=frontier["full_s"].round(1), cost_pct=frontier["cost_pct"].round(2))
        out += ["## Other budgets (at most Y% slower per pass)", ""] + fence(shown.to_string(index=False)) + [""]
    if plan.notes:
        out += ["## Caveats", ""] + [f"- {_one_line(n)}" for n in plan.notes] + [""]
    return markdown_safe("\n".join(out))


def _blocked_summary(plan: Plan) -> str:
    t = plan.tactics
    if not plan.blocklist:
        return "nothing blocked"
    parts = []
    for key, tactics in plan.blocklist.items():
        op, runner = split_blocklist_key(key)
        mine = t[(t["op"] == op) & (t["runner"] == runner)]
        blocked = mine[mine["blocked"].fillna(False).to_numpy(dtype=bool)]
        reasons = " / ".join(dict.fromkeys(blocked["reason"].dropna().astype(str))) or "blocked"
        parts.append(f"{key}: {len(tactics)} of {len(mine)} tactics ({reasons}; "
                     f"{float(blocked['measure_s'].sum()):.1f} s of measuring per full pass)")
    return "; ".join(parts)


def _one_line(text: str) -> str:
    """Text on one Markdown line: line breaks (a name may hold them) become spaces."""
    return " ".join(str(text).splitlines()) if "\n" in str(text) or "\r" in str(text) else str(text)


def _own_words(text: str) -> str:
    """profkit's own text for a comment; refused if it could leave the comment (never expected)."""
    if any(c in text for c in "\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"):
        raise ProfkitError(f"refusing to write {ascii(text)} into a comment")
    return text


def _python_name(value: str) -> str:
    """``value`` as a Python string literal in ASCII: any text, quotes, line breaks and NULs included."""
    return ascii(str(value))


def _literal_list(values) -> str:
    return "[" + ", ".join(_python_name(v) for v in values) + "]"


def _shell_word(value: str, file: str, *, what: str = "op", flag_like: bool = False) -> str:
    """``value`` as one shell word; ProfkitError for what a shell word or argv cannot carry."""
    _writable(value, file, what)
    if flag_like and _is_flag(value):
        raise ProfkitError(f"{file}: {what} {ascii(value)} {_FLAG}")
    return shlex.quote(value)


def _writable(value, file: str, what: str) -> None:
    why = _unwritable(str(value))
    if why:
        raise ProfkitError(f"{file}: {what} {ascii(str(value))} {why}; not written")


def _unwritable(text: str) -> str | None:
    if "\0" in text:
        return _NUL
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE
    return None
