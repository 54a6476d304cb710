"""The rank questions on fleets of 10, 100 and 1,000 ranks: DuckDB (profkit.query), pyarrow.dataset and Polars lazy.

    .venv/bin/python benchmarks/bench_ranks.py [--ranks 10 100 1000] [--fleets /tmp] [--build]
        [--engines duckdb pyarrow polars] [--full] [--dask]

Each engine answers the same questions on the same fleet (``/tmp/profkit-fleet-N``, as captures leave them:
``scripts/make_fleet.py N``; ``--build`` builds a missing one), each in a fresh process, which reports its
wall time and peak resident memory (the fleet's files are read once before, so that no engine pays a cold
page cache the others do not):

- per rank first, a batch of 64 rank folders at a time: each decision's winner (FlashInfer's argmin, the
  first measured on ties) with its time, and each run's fastest and mean time per tactic;
- then across ranks: per bucket, each pick's tunings and ranks, the best pick (the smallest geometric-mean
  time) and the paired log ratio of every pick against it over the runs that timed both.

``--full`` also times all of ``profkit ranks`` (in this process: DuckDB; with ``--dask``, also on a
2-worker LocalCluster): signature groups, slow ranks and the verdicts. The answers are
checked equal across engines on the smallest fleet. Prints each engine's seconds and peak memory side by
side and the ratios from one fleet size to the next (targets: 1,000 ranks under 60 s and 2 GB, growth no
worse than linear). No assertion: this is a measurement.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BATCH = 64
COLUMNS = ["run_id", "rank", "call", "op", "profile", "bucket", "runner", "tactic", "time_ms", "seq", "source"]
KEY = ["op", "profile", "bucket", "runner", "tactic"]
ANSWER = [*KEY, "tunings", "ranks", "bucket_tunings", "bucket_ranks", "timed_runs", "geo_ms", "best", "n_paired",
          "mean_log_ratio", "sd_log_ratio"]


# -- the engines: each returns the pick statistics as a pandas frame (ANSWER columns) ----------------
def duckdb_core(fleet: Path, work: Path):
    from profkit.query import ranks as q
    from profkit.query.fleet import reduce

    return q.pick_stats(reduce([fleet], work, workers=1, served=False))


def duckdb_full(fleet: Path, work: Path, workers: int = 1):
    from profkit.analysis import ranks as judge
    from profkit.query import ranks as q
    from profkit.query.fleet import reduce

    reduced = reduce([fleet], work, workers=workers, served=False)  # as profkit ranks without --served
    picks = q.pick_stats(reduced)
    judge.rank_agreement(picks, noise=judge.noise_bands(q.spread(reduced)))
    judge.signature_groups(q.signatures(reduced))
    judge.slow_ranks(q.rank_speed(reduced))
    return picks


def _batches(fleet: Path):
    from profkit.catalog.captures import capture_folders, table_files

    folders = capture_folders([fleet])
    for i in range(0, len(folders), BATCH):
        yield list(table_files(folders.iloc[i:i + BATCH], "candidates")["file"])


def _agg(table, keys: list[str], aggs: dict, *, ordered: bool = False):
    """``table`` grouped by ``keys``, each ``{name: (column, function[, options])}`` aggregated and named."""
    specs = [(col, fn, *rest) for col, fn, *rest in aggs.values()]
    out = table.group_by(keys, use_threads=not ordered).aggregate(specs)
    return out.rename_columns({f"{spec[0]}_{spec[1]}": name for name, spec in aggs.items()}).select([*keys, *aggs])


def pyarrow_core(fleet: Path, work: Path):
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    decisions, timings = [], []
    for files in _batches(fleet):
        t = ds.dataset(files, format="parquet").to_table(columns=COLUMNS)
        own = pc.fill_null(pc.not_equal(t["source"], "default"), True)
        t = t.filter(pc.and_(own, pc.fill_null(pc.is_finite(t["time_ms"]), False)))
        timings.append(_agg(t, ["run_id", "op", "profile", "runner", "tactic"], {
            "min_ms": ("time_ms", "min"), "mean_ms": ("time_ms", "mean"), "rank": ("rank", "max")}))
        t = t.sort_by([("time_ms", "ascending"), ("seq", "ascending")])
        decisions.append(_agg(t, ["run_id", "rank", "call", "op", "profile"], {
            c: (c, "first") for c in ("bucket", "runner", "tactic", "time_ms")}, ordered=True))
    d, t = pa.concat_tables(decisions), pa.concat_tables(timings)
    picks = _agg(d, KEY, {"tunings": ("run_id", "count"), "ranks": ("rank", "count_distinct")})
    buckets = _agg(d, KEY[:3], {"bucket_tunings": ("run_id", "count"), "bucket_ranks": ("rank", "count_distinct")})
    pt = t.join(picks.select(KEY), keys=["op", "profile", "runner", "tactic"], join_type="inner")
    pt = pt.append_column("lt", pc.ln(pt["min_ms"])).select([*KEY, "run_id", "lt"])
    geo = _agg(pt, KEY, {"timed_runs": ("lt", "count"), "mean_lt": ("lt", "mean")})
    best = _agg(geo.sort_by([("mean_lt", "ascending")]), KEY[:3], {"runner": ("runner", "first"),
                                                                    "tactic": ("tactic", "first")}, ordered=True)
    bt = pt.join(best, keys=KEY, join_type="inner").select([*KEY[:3], "run_id", "lt"]).rename_columns(
        [*KEY[:3], "run_id", "best_lt"])
    paired = pt.join(bt, keys=[*KEY[:3], "run_id"], join_type="inner")
    paired = paired.append_column("d", pc.subtract(paired["lt"], paired["best_lt"]))
    ps = _agg(paired, KEY, {"n_paired": ("d", "count"), "mean_log_ratio": ("d", "mean"),
                            "sd_log_ratio": ("d", "stddev", pc.VarianceOptions(ddof=1))})
    out = picks.join(buckets, keys=KEY[:3]).join(geo, keys=KEY).join(ps, keys=KEY).to_pandas()
    out["geo_ms"] = np.exp(out.pop("mean_lt"))
    marked = best.append_column("best", pa.array([True] * best.num_rows)).to_pandas()
    out = out.merge(marked, on=KEY, how="left")
    out["best"] = out["best"].fillna(False).astype(bool)
    return out


def polars_core(fleet: Path, work: Path):
    import polars as pl

    decisions, timings = [], []
    for files in _batches(fleet):
        lf = pl.scan_parquet(files).select(COLUMNS).filter(
            (pl.col("source") != "default").fill_null(True) & pl.col("time_ms").is_finite().fill_null(False))
        lf = lf.with_columns(k=pl.struct("op", "profile").hash(), p=pl.struct("runner", "tactic").hash())
        batch = lf.collect()
        timings.append(batch.lazy().group_by("run_id", "k", "p").agg(
            pl.col("time_ms").min().alias("min_ms"), pl.col("time_ms").mean().alias("mean_ms"),
            pl.col("rank").max()).collect())
        decisions.append(batch.lazy().sort("time_ms", "seq").group_by("run_id", "rank", "call", "k").agg(
            pl.col("op", "profile", "bucket", "runner", "tactic", "p", "time_ms").first()).collect())
    d, t = pl.concat(decisions).lazy(), pl.concat(timings).lazy()
    picks = d.group_by("k", "bucket", "p").agg(pl.len().alias("tunings"), pl.col("rank").n_unique().alias("ranks"),
                                               pl.col("op", "profile", "runner", "tactic").first())
    buckets = d.group_by("k", "bucket").agg(pl.len().alias("bucket_tunings"),
                                            pl.col("rank").n_unique().alias("bucket_ranks"))
    pt = t.join(picks.select("k", "bucket", "p"), on=["k", "p"]).select(
        "k", "bucket", "p", "run_id", pl.col("min_ms").log().alias("lt"))
    geo = pt.group_by("k", "bucket", "p").agg(pl.len().alias("timed_runs"), pl.col("lt").mean().alias("mean_lt"))
    best = geo.sort("mean_lt").group_by("k", "bucket").agg(pl.col("p").first().alias("best_p"))
    bt = pt.join(best, on=["k", "bucket"]).filter(pl.col("p") == pl.col("best_p")).select(
        "k", "bucket", "run_id", pl.col("lt").alias("best_lt"))
    ps = pt.join(bt, on=["k", "bucket", "run_id"]).with_columns(d=pl.col("lt") - pl.col("best_lt")).group_by(
        "k", "bucket", "p").agg(pl.len().alias("n_paired"), pl.col("d").mean().alias("mean_log_ratio"),
                                pl.col("d").std(ddof=1).alias("sd_log_ratio"))
    out = (picks.join(buckets, on=["k", "bucket"]).join(geo, on=["k", "bucket", "p"]).join(ps, on=["k", "bucket", "p"])
           .join(best, on=["k", "bucket"]).with_columns(best=pl.col("p") == pl.col("best_p"),
                                                        geo_ms=pl.col("mean_lt").exp()))
    return out.collect().to_pandas()


def logs_reduce(logs: Path, work: Path, workers: int = 1):
    """Read every debug log under ``logs`` (one task per file) and reduce them: ``profkit ranks`` on logs."""
    from profkit.query import ranks as q
    from profkit.query.fleet import reduce

    return q.pick_stats(reduce([logs], work, workers=workers, served=False))


def build_logs(n: int, out: Path, copies: int = 1) -> Path:
    """``n`` debug logs ``rank<i>.log``, each every shipped debug log one after another, ``copies`` times."""
    import gzip

    out.mkdir(parents=True, exist_ok=True)
    sources = sorted(ROOT.glob("data/h200/*/debug.log.gz")) + sorted(ROOT.glob("data/h200-moe/*/debug.log"))
    text = b"".join(gzip.decompress(p.read_bytes()) if p.suffix == ".gz" else p.read_bytes() for p in sources) * copies
    for i in range(n):
        (out / f"rank{i}.log").write_bytes(text)
    return out


ENGINES = {"duckdb": duckdb_core, "pyarrow": pyarrow_core, "polars": polars_core, "profkit ranks": duckdb_full,
           "profkit ranks, dask 2": lambda fleet, work: duckdb_full(fleet, work, workers=2),
           "logs, 1 process": logs_reduce, "logs, dask 2": lambda logs, work: logs_reduce(logs, work, workers=2)}


# -- measuring -------------------------------------------------------------------------------------
def child(engine: str, fleet: Path, out: Path) -> None:
    """Run one engine on one fleet in this (fresh) process; write its answer and print its time and memory."""
    import tempfile

    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-ranks-") as work:
        answer = ENGINES[engine](fleet, Path(work))
    seconds = time.perf_counter() - start
    answer = answer[ANSWER].sort_values(KEY).reset_index(drop=True)
    answer.to_parquet(out)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    workers = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(json.dumps({"seconds": seconds, "rss_mb": rss, "workers_rss_mb": workers, "rows": len(answer)}))


def measure(engine: str, fleet: Path, out: Path) -> dict:
    out.unlink(missing_ok=True)  # an answer left from an earlier run is never compared
    proc = subprocess.run([sys.executable, __file__, "--child", engine, str(fleet), str(out)], capture_output=True,
                          text=True, cwd=ROOT)
    if proc.returncode != 0:
        return {"error": (proc.stderr.strip().splitlines() or ["?"])[-1][:120]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def same(a: Path, b: Path) -> str:
    import numpy as np
    import pandas as pd

    x, y = pd.read_parquet(a), pd.read_parquet(b)
    if len(x) != len(y):
        return f"{len(x)} vs {len(y)} rows"
    for column in ANSWER:
        u, v = x[column].to_numpy(), y[column].to_numpy()
        if u.dtype.kind == "f" or v.dtype.kind == "f":
            ok = np.allclose(u.astype(float), v.astype(float), rtol=1e-9, atol=1e-12, equal_nan=True)
        else:
            ok = (pd.Series(u).astype(str).to_numpy() == pd.Series(v).astype(str).to_numpy()).all()
        if not ok:
            return f"differ in {column}"
    return "same"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ranks", type=int, nargs="+", default=[10, 100, 1000])
    p.add_argument("--fleets", type=Path, default=Path("/tmp"), help="folder of profkit-fleet-N (default /tmp)")
    p.add_argument("--build", action="store_true", help="build a missing fleet with scripts/make_fleet.py")
    p.add_argument("--engines", nargs="+", default=["duckdb", "pyarrow", "polars"], choices=list(ENGINES)[:3])
    p.add_argument("--full", action="store_true", help="also time all of profkit ranks (DuckDB)")
    p.add_argument("--dask", action="store_true", help="with --full: also on a 2-worker LocalCluster")
    p.add_argument("--logs", type=int, default=0, metavar="N",
                   help="instead: N debug logs (each every shipped log) read and reduced in one process and on a "
                        "2-worker LocalCluster (target: at most 0.6x the one process's time)")
    p.add_argument("--log-copies", type=int, default=1, metavar="K", help="with --logs: each log K times as long")
    p.add_argument("--child", nargs=3, metavar=("ENGINE", "FLEET", "OUT"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        child(args.child[0], Path(args.child[1]), Path(args.child[2]))
        return 0
    if args.logs:
        logs = build_logs(args.logs, args.fleets / f"profkit-logs-{args.logs}", args.log_copies)
        one, two = (measure(e, logs, Path("/tmp") / f"bench-ranks-{i}.parquet")
                    for i, e in enumerate(("logs, 1 process", "logs, dask 2")))
        print(f"{args.logs} logs ({sum(f.stat().st_size for f in logs.iterdir()) / 1e6:.0f} MB): one process "
              f"{_cell(one)}; 2-worker LocalCluster {_cell(two)}; ratio "
              + (f"{two['seconds'] / one['seconds']:.2f}x" if "seconds" in one and "seconds" in two else "n/a"))
        return 0
    engines = args.engines + (["profkit ranks"] if args.full else []) + (["profkit ranks, dask 2"] if args.dask else [])
    results: dict[tuple[str, int], dict] = {}
    answers = Path(os.environ.get("TMPDIR", "/tmp")) / "bench-ranks-answers"
    answers.mkdir(exist_ok=True)
    print(f"machine: {os.cpu_count()} cores; load average {os.getloadavg()[0]:.1f}", file=sys.stderr)
    for n in args.ranks:
        fleet = args.fleets / f"profkit-fleet-{n}"
        if not fleet.is_dir():
            if not args.build:
                print(f"{fleet}: missing; build it with scripts/make_fleet.py {n} (or pass --build)", file=sys.stderr)
                continue
            subprocess.run([sys.executable, str(ROOT / "scripts" / "make_fleet.py"), str(n), "--out", str(fleet)],
                           check=True)
        print(f"{n:5d} ranks  the fleet's files read once before the engines (so none pays a cold page cache): "
              f"{_warm(fleet):.1f} s", file=sys.stderr)
        for engine in engines:
            results[engine, n] = measure(engine, fleet, answers / _file(engine, n))
            print(f"{n:5d} ranks  {engine:22s} {_cell(results[engine, n])}", file=sys.stderr)
        first = answers / _file(engines[0], n)
        for engine in engines[1:]:
            other = answers / _file(engine, n)
            if first.exists() and other.exists():
                print(f"{n:5d} ranks  {engine} vs {engines[0]}: {same(first, other)}", file=sys.stderr)
    _table(engines, args.ranks, results)
    return 0


def _warm(fleet: Path) -> float:
    start = time.perf_counter()
    for path in fleet.rglob("*.parquet"):
        path.read_bytes()
    return time.perf_counter() - start


def _file(engine: str, n: int) -> str:
    return f"{engine.replace(' ', '_').replace(',', '')}-{n}.parquet"


def _cell(r: dict) -> str:
    if "error" in r:
        return f"failed: {r['error']}"
    workers = f" (+workers {r['workers_rss_mb'] / 1024:.2f} GB)" if r.get("workers_rss_mb", 0) > 200 else ""
    return f"{r['seconds']:7.1f} s  {r['rss_mb'] / 1024:5.2f} GB{workers}"


def _table(engines: list[str], sizes: list[int], results: dict) -> None:
    print("| ranks | " + " | ".join(engines) + " |")
    print("|---|" + "---|" * len(engines))
    for n in sizes:
        print(f"| {n} | " + " | ".join(_cell(results[e, n]) if (e, n) in results else "-" for e in engines) + " |")
    for e in engines:
        done = [(n, results[e, n]) for n in sizes if "seconds" in results.get((e, n), {})]
        for (a, ra), (b, rb) in zip(done, done[1:]):
            print(f"{e}: {a} -> {b} ranks (x{b / a:g}): time x{rb['seconds'] / ra['seconds']:.1f}, "
                  f"peak memory x{rb['rss_mb'] / ra['rss_mb']:.1f}")


if __name__ == "__main__":
    raise SystemExit(main())
