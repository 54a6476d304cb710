"""``profkit ranks``: do my ranks agree, and what does their disagreement cost?"""

from __future__ import annotations

import sys
from pathlib import Path

from profkit.cli._paths import need_out_dir, need_out_file

NAME = "ranks"
HELP = ("do the ranks agree, and what does their disagreement cost: per op and bucket the ranks, distinct picks, "
        "the largest group's share and the worst pick's regret with its verdict; ranks grouped by identical "
        "picks; slow ranks")
EXAMPLES = """examples:
  profkit ranks runs/capture                                # every <host>-pid<pid>-rank<r>/ folder under it
  profkit ranks data/h200-engine-like/capture --json ranks.json
  profkit ranks /shared/fleet --scheduler tcp://10.0.0.5:8786 --work /shared/ranks-parts
  profkit ranks logs/*.log --workers 1                      # debug logs (else cache files), in this process

  profkit ranks data/h200-moe/qwen3-30b-a3b-ranks data/h200-moe/qwen3-30b-a3b-ranks-verify   # + picks re-timed

regret: t(pick) / t(best pick) - 1, timed in the same runs; verdicts by the one rule: slower (the pick
costs beyond noise), within_noise, not_measurable (too few runs timed both). Verify tables under the paths
(profkit verify of the ranks' captures) price the picks again as engines run them: "in serving".
"""


def add_arguments(p) -> None:
    p.add_argument("paths", nargs="+", type=Path,
                   help="capture folders (profkit capture --out, Tables.save) or folders holding them; else debug "
                        "logs or cache files (one per rank, named as the engines name them: rank_tp1_pp0_dp0.json)")
    p.add_argument("--json", type=Path, default=None, metavar="FILE",
                   help="also write one row per op and bucket as a JSON array (op, shape, bucket, ranks, "
                        "distinct_picks, largest_share, worst_regret_pct, verdict, ...)")
    p.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="a Dask cluster to reduce the files on (default: DASK_SCHEDULER_ADDRESS, else a local "
                        "cluster when there is more than one batch of files); its workers must reach the paths "
                        "and --work")
    p.add_argument("--workers", type=int, default=None, metavar="N",
                   help="local cluster workers (default: the cores); 1 reads everything in this process")
    p.add_argument("--served", action="store_true",
                   help="also read the winners tables and print the tactics each rank served (profiled, cached, "
                        "from a cache file), as provenance")
    p.add_argument("--work", type=Path, default=None, metavar="DIR",
                   help="keep the reduced parquet parts here (default: a temporary folder, removed after)")


def run(args) -> int:
    import tempfile
    import time

    from profkit.printable import printable

    need_out_dir(args.work, "a directory for the reduced parts")
    if args.json is not None:
        need_out_file(args.json, "--json", "the JSON rows")
        _refuse_inputs(args.json, args.paths)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="profkit-ranks-") as scratch:
        work = args.work if args.work is not None else Path(scratch)
        answers = _answers(args, work)
    rows = _with_served(answers["agreement"], answers["served_cost"])
    for line in _lines(answers):
        print(printable(line))  # names are data: no escape sequence, line break or bidi mark reaches the terminal
    print(f"{answers['folders']} capture folders reduced and compared in {time.perf_counter() - start:.1f} s",
          file=sys.stderr)
    if args.json is not None:
        _write_json(rows, args.json, args.paths)
        print(f"wrote {len(rows)} rows to {printable(args.json)}", file=sys.stderr)
    return 0


def _answers(args, work: Path) -> dict:
    from profkit.analysis import ranks as judge
    from profkit.query import ranks as q
    from profkit.query.fleet import reduce

    reduced = reduce(args.paths, work, scheduler=args.scheduler, workers=args.workers, served=args.served)
    bands = judge.noise_bands(q.spread(reduced))
    return {"folders": reduced.folders,
            "agreement": judge.rank_agreement(q.pick_stats(reduced), noise=bands),
            "groups": judge.signature_groups(q.signatures(reduced)),
            "slow": judge.slow_ranks(q.rank_speed(reduced)),
            "served": q.served(reduced) if args.served else None,
            "served_cost": _served_cost(args.paths)}


def _served_cost(paths: list[Path]):
    """:func:`~profkit.analysis.ranks.served_agreement` of the verify tables under ``paths`` (None without any)."""
    from profkit.analysis.ranks import served_agreement
    from profkit.sources.verify import read_verify

    files = [f for p in paths for f in (sorted(p.rglob("verify.parquet")) if p.is_dir() else
                                        [p] if p.name == "verify.parquet" else [])]
    return served_agreement(read_verify(*files)) if files else None


_SERVED = {"worst_regret_pct": "served_worst_regret_pct", "worst_regret_lo_pct": "served_regret_lo_pct",
           "worst_regret_hi_pct": "served_regret_hi_pct", "verdict": "served_verdict", "n_units": "served_tables"}


def _with_served(rows, served):
    """The agreement rows with the serving price of their worst pick (``served_*`` columns) where verify timed it."""
    if served is None or rows.empty:
        return rows
    keys = ["gpu", "op", "profile", "bucket"]
    return rows.merge(served[keys + list(_SERVED)].rename(columns=_SERVED), on=keys, how="left")


# -- output ----------------------------------------------------------------------------------------
def _lines(answers: dict) -> list[str]:
    rows, groups, slow = answers["agreement"], answers["groups"], answers["slow"]
    if rows.empty:
        return ["no tuning decisions found: nothing to compare"]
    out = []
    for gpu, of_gpu in rows.groupby("gpu", sort=True):
        ranks = int(of_gpu["ranks"].max())
        out.append(f"{gpu}: {ranks} rank{'s' if ranks != 1 else ''}, {len(of_gpu)} buckets")
        out += _group_lines(groups[groups["gpu"] == gpu])
        for (op, shape), g in of_gpu.groupby(["op", "shape"], sort=True, dropna=False):
            out.append(f"  {op}  {shape}")
            out += [f"    bucket {_int(r.bucket):>5}  {_bucket(r)}" for r in g.itertuples(index=False)]
        if answers["served_cost"] is not None:
            out += _served_cost_lines(answers["served_cost"][answers["served_cost"]["gpu"] == gpu])
        out += _slow_lines(slow[slow["gpu"] == gpu])
        if answers["served"] is not None:
            out += _served_lines(answers["served"][answers["served"]["gpu"] == gpu])
    out.append(_summary(rows))
    if answers["served_cost"] is not None:
        out.append(_summary(answers["served_cost"], where="in serving (profkit verify)"))
    return out


def _served_cost_lines(served) -> list[str]:
    """Per bucket where the ranks disagree: the worst pick's regret as ``profkit verify`` timed it."""
    out = [f"  in serving (profkit verify, CUDA graphs: {int(served['ranks'].max()) if len(served) else 0} tables):"]
    for (op, shape), g in served.groupby(["op", "shape"], sort=True, dropna=False):
        out.append(f"    {op}  {shape}")
        out += [f"      bucket {_int(r.bucket):>5}  picks {int(r.distinct_picks):>2}  {_cost(r)}"
                for r in g.itertuples(index=False) if int(r.distinct_picks) > 1]
    return out


def _served_lines(served) -> list[str]:
    """Per rank and op: the tactics it served and how (profiled here, cached from an earlier call, a cache file)."""
    out = ["  served (provenance):"]
    for (rank, op), g in served.groupby(["rank", "op"], sort=True, dropna=False):
        how = ", ".join(sorted(g["source"].dropna().astype(str).unique()))
        out.append(f"    rank {_int(rank)} {op}: {len(g[['runner', 'tactic']].drop_duplicates())} tactics at "
                   f"{int(g['op_buckets'].iloc[0])} buckets ({how})")
    return out


def _bucket(r) -> str:
    head = (f"ranks {_int(r.ranks):>4}  tunings {int(r.tunings):>4}  picks {int(r.distinct_picks):>2}  "
            f"largest {100 * r.largest_share:3.0f}%  top-1 {_pct(r.top1_agreement)}  flips {_pct(r.flip_rate)}")
    if int(r.distinct_picks) == 1:
        return f"{head}  all agree"
    return f"{head}  {_cost(r)}"


def _cost(r) -> str:
    """The worst pick's regret, interval and verdict, and what it was compared with."""
    if r.verdict == "not_measurable" or r.verdict is None or r.verdict != r.verdict:
        return f"worst regret {_signed(r.worst_regret_pct)} not measurable ({_int(r.n_units)} runs timed both)"
    return (f"worst regret {_signed(r.worst_regret_pct)} [{_signed(r.worst_regret_lo_pct)}, "
            f"{_signed(r.worst_regret_hi_pct)}] {str(r.verdict).replace('_', ' ')} "
            f"({r.worst_runner}:{r.worst_tactic} vs {r.best_runner}:{r.best_tactic}, {_int(r.n_units)} runs)")


def _group_lines(groups) -> list[str]:
    if groups.empty:
        return ["  signature groups: no ranks stated (no rank in the rows or folder names)"]
    n_ranks, n_groups = int(groups["n_ranks"].sum()), len(groups)
    largest = groups.iloc[0]
    head = f"  signature groups: {n_ranks} ranks in {n_groups} group{'s' if n_groups != 1 else ''} of identical picks"
    if n_groups > 5 and int(largest["n_ranks"]) == 1:
        return [f"{head}: no two ranks picked the same in every bucket (a group is a rank: see the buckets below)"]
    out = [f"{head}; the largest: {_ranks(largest['n_ranks'], largest['ranks'])}"]
    odd = groups.iloc[1:]
    for g in odd.head(5).itertuples(index=False):
        out.append(f"    odd one out: {_ranks(g.n_ranks, g.ranks)}: {int(g.differs)} bucket(s) "
                   f"differ from the largest group" + (f" ({g.examples}{', ...' if g.differs > 3 else ''})"
                                                       if g.examples else ""))
    if len(odd) > 5:
        out.append(f"    ... and {len(odd) - 5} more groups of {int(odd['n_ranks'].iloc[5:].sum())} ranks")
    return out


def _slow_lines(slow) -> list[str]:
    if slow.empty:
        return []
    flagged = slow[slow["slow"].fillna(False).to_numpy(dtype=bool)]
    if flagged.empty:
        top = slow.iloc[0]
        return [f"  slow ranks: none beyond noise (the slowest, rank {int(top['rank'])}: "
                f"{_signed(top['slower_pct'])} over {int(top['n_buckets'])} buckets, {str(top['verdict']).replace('_', ' ')})"]
    return [f"  slow rank {int(r.rank)}: {_signed(r.slower_pct)} [{_signed(r.slower_lo_pct)}, {_signed(r.slower_hi_pct)}] "
            f"than the ranks' median over {int(r.n_buckets)} buckets, slower in {r.ops_slower}: a GPU, not a tactic, problem"
            for r in flagged.itertuples(index=False)]


def _summary(rows, *, where: str = "") -> str:
    agree = int((rows["distinct_picks"] == 1).sum())
    slower = rows[(rows["verdict"] == "slower").fillna(False).to_numpy(dtype=bool)]
    text = (f"{len(rows)} buckets{' ' + where if where else ''}: all tunings agree in {agree}; "
            f"a pick costs beyond noise in {len(slower)}, "
            f"within noise in {int((rows['verdict'] == 'within_noise').sum())}, "
            f"not measurable in {int((rows['verdict'] == 'not_measurable').sum())}")
    if len(slower):
        worst = slower.sort_values("worst_regret_pct", ascending=False).iloc[0]
        text += f" (worst: {worst['op']} {worst['shape']} bucket {_int(worst['bucket'])} {_signed(worst['worst_regret_pct'])})"
    return text


def _ranks(n, ranks) -> str:
    return f"{int(n)} rank{'s' if int(n) != 1 else ''} ({_ranges(ranks)})"


def _ranges(ranks) -> str:
    """'0-3, 5, 7-9' (the first 12 runs of ranks, then how many more)."""
    ranks = sorted(int(r) for r in ranks)
    runs, start = [], None
    for i, r in enumerate(ranks):
        start = r if start is None else start
        if i + 1 == len(ranks) or ranks[i + 1] != r + 1:
            runs.append(f"{start}-{r}" if r > start else str(r))
            start = None
    return ", ".join(runs[:12]) + (f", ... ({len(runs) - 12} more)" if len(runs) > 12 else "")


def _int(value) -> str:
    return "?" if value is None or value != value else str(int(value))


def _pct(value) -> str:
    return "  n/a" if value is None or value != value else f"{100 * value:4.0f}%"


def _signed(value) -> str:
    return "n/a" if value is None or value != value else f"{value:+.2f}%"


def _refuse_inputs(json_path: Path, paths: list[Path]) -> None:
    """--json may not replace an input: a file given, or a file beside the output inside a folder given."""
    from profkit.outputs import atomic

    folder = json_path.resolve().parent
    inputs = [p for p in paths if not p.is_dir()]
    if any(p.is_dir() and folder.is_relative_to(p.resolve()) for p in paths) and folder.is_dir():
        inputs += [f for f in folder.iterdir() if f.is_file()]
    atomic.refuse_inputs([json_path], inputs, flag="--json")


def _write_json(rows, path: Path, paths: list[Path]) -> None:
    import json

    from profkit.outputs import atomic

    records = json.loads(rows.to_json(orient="records"))  # NaN and NA as null, numpy scalars as numbers
    atomic.write_text(path, json.dumps(records, indent=1) + "\n", inputs=[p for p in paths if not p.is_dir()])


if __name__ == "__main__":
    from profkit.cli import main

    raise SystemExit(main(["ranks", *sys.argv[1:]]))
