"""The ranks section: do the ranks (or boots: fresh-process tunings of one op and shape) of each GPU agree,
and what does their disagreement cost? Formats the report model's ``ranks`` (one
:class:`~profkit.analysis.ranks.RankAnswers` per GPU); computes nothing."""

from __future__ import annotations

import pandas as pd

from profkit.report import _text as T
from profkit.report._page import FigureSpec, ReportContext, Section, Table
from profkit.views import short_label
from profkit.views.ranks import plot_rank_picks

# A tuner is a rank of a run: the analysis counts them in ``ranks``; the page calls them tuners.
_SHAPE_COLUMNS = ["op", "shape", "ranks", "buckets", "disagree", "top1_agreement", "flip_rate", "slower",
                  "worst_bucket", "worst_regret_pct", "worst_verdict", "expected_regret_pct"]
_BUCKET_COLUMNS = ["op", "shape", "bucket", "ranks", "tunings", "distinct_picks", "top1_agreement", "flip_rate",
                   "worst_regret_pct", "worst_regret_lo_pct", "worst_regret_hi_pct", "verdict", "n_units"]


_TUNERS = {"ranks": "tuners"}
# The picks figure draws one row per tuner of each op and shape; past this many it is taller than a page can show
# (the shipped data's H200: 53 rows; ten ranks of 29 shapes: 319).
MAX_PICK_ROWS = 120


def ranks_section(ctx: ReportContext) -> Section | None:
    """Per GPU where two runs or more tuned one op and shape: agreement per shape and bucket, groups, slow ranks."""
    answers = {gpu: a for gpu, a in (ctx.ranks or {}).items() if len(a.agreement)}
    if not answers:
        return None
    text = ["Ranks that tune on their own, and tunings repeated in fresh processes (boots), are compared as "
            "FlashInfer's accuracy harness compares them: per bucket the regret of each pick, t(pick) / t(best "
            "pick) - 1 timed in the same runs, the top-1 agreement (the share of tunings that picked the best "
            "pick) and the flip rate (the share of pairs of tunings whose picks differ); each worst regret judged "
            "by the comparison rule (`profkit ranks` answers the same from parquet, for fleets of ranks). A tuner is "
            "one rank of one run (a process); each GPU on its own."]
    figures, tables, omitted = [], [], []
    for gpu, a in answers.items():
        slug = gpu.lower().replace(" ", "-")
        text += ["", f"**{gpu}**: {_headline(a)}", ""]
        text += [f"- {line}" for line in _shape_lines(ctx, a) + _slow_lines(a)]
        rows = _pick_rows(a)
        if rows > MAX_PICK_ROWS:
            omitted.append(f"The picks of each rank or boot on the {gpu}: not drawn: one row per tuner and shape "
                           f"would be {rows} rows (at most {MAX_PICK_ROWS} are drawn); every pick is in "
                           f"rank_agreement_{slug}.csv and the groups of identical picks in rank_groups_{slug}.csv.")
        else:
            figures.append(FigureSpec(
                f"rank_picks_{slug}", f"The picks of each rank or boot on the {gpu}",
                "One block per op and shape tuned by two runs or more, one row per tuner, one cell per bucket: grey, "
                "the bucket's best pick; amber, another pick within noise of it; red, another pick slower beyond "
                "noise (its regret printed).",
                lambda a=a, gpu=gpu: plot_rank_picks(a.tunings, labels=ctx.labels, title=gpu)))
        tables += [
            Table(ctx.named(a.shapes[_SHAPE_COLUMNS].rename(columns=_TUNERS)), f"rank_shapes_{slug}",
                  sort_by="worst_regret_pct", what="costliest disagreement first"),
            Table(ctx.named(a.agreement[_BUCKET_COLUMNS].rename(columns=_TUNERS)), f"rank_agreement_{slug}",
                  sort_by="worst_regret_pct", what="costliest pick first"),
            Table(ctx.named(_groups(a)), f"rank_groups_{slug}", top=0),
            Table(_slow(a), f"rank_speed_{slug}", sort_by="slower_pct", what="slowest first"),
        ]
    return Section("Do the ranks and boots agree?", "\n".join(text), tuple(figures), tuple(tables), tuple(omitted),
                   page="repeats")


def _pick_rows(a) -> int:
    """The rows of the picks figure: one per tuner of each op and shape, and one heading each."""
    blocks = a.tunings.groupby(["op", "shape"], dropna=False)["tuner"].nunique()
    return int(blocks.sum()) + len(blocks)


def _headline(a) -> str:
    s, rows = a.shapes, a.agreement
    slower = rows[(rows["verdict"] == "slower").fillna(False).to_numpy(dtype=bool)]
    line = (f"{T.count(len(s), 'op shape')} tuned by two runs or more ({T.count(len(a.tuners), 'tuner')}); the "
            f"tunings disagree in {int(s['disagree'].sum())} of {int(s['buckets'].sum())} buckets; the worst pick "
            f"costs beyond noise in {len(slower)}, within noise in {int(s['within_noise'].sum())}, not measurable in "
            f"{int(s['not_measurable'].sum())}.")
    if len(slower):
        w = slower.sort_values("worst_regret_pct", ascending=False, kind="stable").iloc[0]
        line += (f" The costliest: {w['op']} {w['shape'].replace(' ', ', ')} bucket {int(w['bucket'])}, regret "
                 f"{_pct(w['worst_regret_pct'])} {_interval(w['worst_regret_lo_pct'], w['worst_regret_hi_pct'])}.")
    return line


def _shape_lines(ctx: ReportContext, a) -> list[str]:
    names = a.tuners.set_index("tuner")["label"]
    groups = a.groups
    lines = []
    for r in a.shapes.itertuples(index=False):
        mine = groups[((groups["op"] == r.op) & (groups["shape"] == r.shape)).to_numpy(dtype=bool)]
        head = (f"{r.op} {short_label(str(r.shape), ctx.labels)}: {r.ranks} tuners, "
                f"{r.disagree} of {r.buckets} buckets with more than one pick, top-1 agreement "
                f"{100 * r.top1_agreement:.0f}%, flip rate {100 * r.flip_rate:.0f}%")
        if r.disagree:
            head += (f"; worst regret {_pct(r.worst_regret_pct)} "
                     f"{_interval(r.worst_regret_lo_pct, r.worst_regret_hi_pct)} at bucket {r.worst_bucket} "
                     f"({str(r.worst_verdict).replace('_', ' ')}), expected regret {_pct(r.expected_regret_pct, 3)}")
        lines.append(f"{head}. {_group_line(mine, names)}".rstrip())
    return lines


def _group_line(groups: pd.DataFrame, names: pd.Series) -> str:
    if groups.empty:
        return ""
    largest = groups.iloc[0]
    if len(groups) == int(groups["n_ranks"].sum()):
        return "No two tuners picked the same in every bucket." if len(groups) > 2 else ""
    odd = [f"{_names(g.ranks, names)} ({T.count(g.differs, 'bucket')} differ or were tuned by one only)"
           for g in groups.iloc[1:].itertuples(index=False)]
    return (f"The largest group of identical picks: {_names(largest['ranks'], names)}"
            + (f"; the odd ones out: {'; '.join(odd)}." if odd else "."))


def _slow_lines(a) -> list[str]:
    slow = a.slow
    if slow.empty:
        return []
    peers = a.tuners.set_index("tuner")
    flagged = slow[slow["slow"].fillna(False).to_numpy(dtype=bool)]
    if flagged.empty:
        top = slow.iloc[0]
        return [f"Slow ranks: none; the slowest tuner, {peers.at[int(top['rank']), 'label']}, timed its candidates "
                f"{_pct(top['slower_pct'])} against the tuners' median ({str(top['verdict']).replace('_', ' ')})."]
    out = []
    for r in flagged.itertuples(index=False):
        who = peers.loc[int(r.rank)]
        pair = (" With one other tuner of its shapes, the median is their midpoint: the two processes' timings "
                f"differ by about {2 * r.slower_pct:.1f}%, and which of them is slow is not known."
                if who["peers"] == 1 else "")
        out.append(f"Slow rank (a GPU, not a tactic, problem): {who['label']} timed its candidates "
                   f"{_pct(r.slower_pct)} {_interval(r.slower_lo_pct, r.slower_hi_pct)} against the tuners' median "
                   f"over {r.n_buckets} buckets.{pair}")
    return out


def _groups(a) -> pd.DataFrame:
    names = a.tuners.set_index("tuner")["label"]
    g = a.groups
    return g.assign(ranks=[_names(r, names) for r in g["ranks"]])[
        ["op", "shape", "ranks", "n_ranks", "share", "largest", "keys", "differs", "examples"]]


def _slow(a) -> pd.DataFrame:
    t = a.tuners.set_index("tuner")
    s = a.slow
    return s.assign(tuner=s["rank"].map(t["label"]), peers=s["rank"].map(t["peers"]))[
        ["tuner", "n_buckets", "peers", "slower_pct", "slower_lo_pct", "slower_hi_pct", "verdict", "ops_slower", "slow"]]


def _names(ranks, names: pd.Series) -> str:
    return ", ".join(str(names.get(int(r), r)) for r in ranks)


def _pct(value, digits: int = 2) -> str:
    return "?" if T.missing(value) else f"{float(value):+.{digits}f}%"


def _interval(lo, hi) -> str:
    return "" if T.missing(lo) or T.missing(hi) else f"[{_pct(lo)}, {_pct(hi)}]"
