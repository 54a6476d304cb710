"""``profkit advise``: a tuning plan from a capture, written in FlashInfer's and the engines' switches."""

from __future__ import annotations

import sys
from pathlib import Path

from profkit.cli._paths import need_file, need_out_dir

NAME = "advise"
HELP = "plan which ops, buckets and tactics to tune (skip_ops, tuning_buckets, a tactics blocklist) and what it costs"
EXAMPLES = """examples:
  profkit advise data/h200/fp8 --out runs/advise-fp8
  profkit advise data/h200/step/llama3-8b-bf16/capture --max-slowdown 1 --mix 1:4,8:4,64:2,512:1 --out runs/a
  profkit advise runs/capture --verify runs/verify/verdicts.parquet --budget-s 20 --out runs/a
  # then: FLASHINFER_TACTICS_BLOCKLIST=runs/a/blocklist.json python my_tuning_run.py   (see runs/a/plan.py)
  # runs/a/plan.json holds the same plan as data ("format": "profkit-plan/1")
"""


def add_arguments(p) -> None:
    p.add_argument("capture", type=Path, help="a capture directory (profkit.load: one run, several runs or ranks)")
    p.add_argument("--verify", type=Path, action="append", default=[],
                   help="per-bucket serving verdicts (parquet: op, shape or n/k, bucket, serving_speedup, "
                        "serving_noise); else the tuner's own timings decide")
    budget = p.add_mutually_exclusive_group()
    budget.add_argument("--budget-s", type=float, default=None, help="at most this many seconds of tuning")
    budget.add_argument("--max-slowdown", type=float, default=None, metavar="PCT",
                        help="at most this many percent slower per pass than full tuning")
    p.add_argument("--mix", type=_mix, default=None,
                   help="batch-size mix: M:weight,... (or M,M,... for equal weights); default: every bucket once")
    p.add_argument("--cache", type=Path, default=None,
                   help="the capture's FlashInfer cache file, for its exact _metadata (default: a cache.json "
                        "beside the capture, else the capture's runs table)")
    p.add_argument("--out", type=Path, required=True, help="directory for plan.md, plan.py, blocklist.json, "
                                                           "sglang_flags.txt, vllm_env.sh and plan.json (the "
                                                           "plan as data: profkit.sources.plan.read_plan_json)")


def _mix(text: str) -> dict[int, float]:
    import argparse

    out: dict[int, float] = {}
    try:
        for part in filter(None, (x.strip() for x in text.split(","))):
            m, _, w = part.partition(":")
            out[int(m)] = out.get(int(m), 0.0) + (float(w) if w else 1.0)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"--mix wants M:weight,... (e.g. 1:4,8:2,512:1), got {text!r}") from exc
    return out


def run(args) -> int:
    from profkit import load
    from profkit.analysis.advise import advise, budget_frontier
    from profkit.outputs import engine_plans
    from profkit.printable import printable

    for path in args.verify:
        need_file(path, "--verify", "a parquet file of per-bucket serving verdicts")
    if args.cache is not None:
        need_file(args.cache, "--cache", "the capture's FlashInfer cache file")
    need_out_dir(args.out, "a directory for the plan")
    tables = _plannable(load(args.capture))
    verify = _read_verify(args.verify)
    plan = advise(tables, verify=verify, budget_s=args.budget_s, max_slowdown_pct=args.max_slowdown, mix=args.mix,
                  metadata=_cache_metadata(args.cache, args.capture))
    frontier = budget_frontier(plan)
    inputs = [*args.verify, *([args.cache] if args.cache is not None else [])]
    engine_plans.write_plan(plan, args.out, frontier=frontier, inputs=inputs)
    for note in dict.fromkeys(plan.notes):  # what was set aside (a bucket of -8), also plan.md's Caveats
        print(f"profkit advise: note: {printable(note)}", file=sys.stderr)
    frontier = frontier[["max_slowdown_pct", "planned_s", "ratio", "cost_pct", "skip_ops", "tuning_buckets"]]
    for line in [*engine_plans.plan_text(plan).splitlines(), *(f"- {v}" for v in plan.ops["verdict"]),
                 "other budgets (at most Y% slower per pass):", *frontier.round(2).to_string(index=False).splitlines()]:
        print(printable(line))  # names are data: no escape sequence or line break of theirs reaches the terminal
    print(f"profkit advise: {printable(repr(plan))} -> {printable(args.out)}", file=sys.stderr)
    return 0


def _plannable(tables):
    """``tables`` without the ops no engine's skip switch can name (``a,b``, ``-x``), each named in a warning;
    a capture whose candidates could not be read is named (not "no tuned bucket")."""
    import dataclasses
    import warnings

    from profkit import schema
    from profkit.errors import ProfkitError
    from profkit.outputs.engine_plans import skip_op_problem

    if tables.candidates.empty and tables.tuning.empty and tables.problems:  # else "no tuned bucket" hides why
        raise ProfkitError(f"cannot plan: the capture's tables could not be read ({tables.problems[0]}"
                           + (f"; and {len(tables.problems) - 1} more file(s)" if len(tables.problems) > 1 else "") + ")")
    ops = set(tables.candidates["op"].dropna()) | set(tables.tuning["op"].dropna())
    bad = {op: why for op in sorted(map(str, ops)) if (why := skip_op_problem(op))}
    for op, why in bad.items():
        warnings.warn(f"op {ascii(op)} {why}; it is left out of the plan (FlashInfer tunes it as it would without "
                      "one) and the other ops are planned")
    if not bad:
        return tables
    if not ops - set(bad):
        raise ProfkitError(f"every op of {tables.runs['run_id'].nunique()} run(s) has a name no engine switch can "
                           "carry (named above): nothing to plan")
    return dataclasses.replace(tables, **{t: _without(getattr(tables, t), bad) for t in schema.TABLES})


def _without(frame, ops):
    return frame[~frame["op"].isin(list(ops)).fillna(False).to_numpy(dtype=bool)] if "op" in frame.columns else frame


def _read_verify(paths: list[Path]):
    """The verdict files stacked, or None; a file that is no readable parquet is named."""
    import pandas as pd

    from profkit.errors import ProfkitError
    from profkit.sources.inputs import regular_file

    frames = []
    for path in paths:
        try:
            regular_file(path)
            frames.append(pd.read_parquet(path))
        except ProfkitError:
            raise
        except Exception as exc:  # noqa: BLE001 - pyarrow raises its own types for a damaged file
            raise ProfkitError(f"--verify {path}: not a readable parquet file ({type(exc).__name__}: "
                               f"{str(exc).splitlines()[0] if str(exc) else ''})") from None
    return pd.concat(frames, ignore_index=True) if frames else None


def _cache_metadata(cache: Path | None, capture: Path) -> dict | None:
    """``_metadata`` of the given cache file, else of the cache.json files in or beside the capture when they agree."""
    from profkit.sources.cache import read_cache_document

    paths = [cache] if cache is not None else sorted({*capture.rglob("cache.json"), *capture.parent.glob("cache.json")})
    metas = []
    for path in paths:
        meta = read_cache_document(path).get("_metadata")
        if isinstance(meta, dict):
            metas.append(meta)
    if not metas or any(m != metas[0] for m in metas):
        return None  # none, or several environments: the runs table decides (and says so)
    return dict(metas[0])
