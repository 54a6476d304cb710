"""The rank questions as DuckDB queries over the reduced parts (:mod:`profkit.catalog.reduce`), as small frames.

Every query reads the parts where they lie and returns one row per bucket, pick, rank or signature group:
numbers only, no verdict (:mod:`profkit.analysis.ranks` judges them). A run's GPU is its ``gpu`` key
(``unknown GPU`` where none is stated): ranks are compared within one GPU. A bucket is one (gpu, op,
profile, bucket); a pick is a (runner, tactic) some tuning of the bucket chose; a unit of a paired
comparison is a run (one process) that timed both sides.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pandas as pd

from profkit.catalog import engine
from profkit.catalog.reduce import PARTS

UNKNOWN_GPU = "unknown GPU"  # as profkit.catalog.partition names a run without one


@dataclasses.dataclass(frozen=True)
class Reduced:
    """The reduced parts of a set of capture folders.

    Attributes:
        root: the folder holding ``<part>/part-<n>.parquet`` for each of :data:`~profkit.catalog.reduce.PARTS`.
        folders: capture folders reduced.
        problems: files that could not be read (set aside), as ``"<file>: <reason>"``.
    """

    root: Path
    folders: int
    problems: tuple[str, ...] = ()

    def files(self, part: str) -> list[str]:
        """The written files of one part, in part order."""
        return sorted(str(p) for p in (Path(self.root) / part).glob("part-*.parquet"))

    def relation(self, part: str) -> str:
        """SQL text reading one part (every file of it)."""
        files = self.files(part)
        if part not in PARTS or not files:
            raise ValueError(f"{self.root}: no {part} part")
        return f"read_parquet([{', '.join(map(engine.repr_sql, files))}])"


def _with_gpu(red: Reduced, part: str, where: str = "") -> str:
    return (f"(SELECT p.*, coalesce(r.gpu, '{UNKNOWN_GPU}') AS gpu FROM {red.relation(part)} p "
            f"LEFT JOIN (SELECT run, any_value(gpu) AS gpu FROM {red.relation('runs')} GROUP BY run) r USING (run) {where})")


def _names(red: Reduced) -> str:
    """(k, op, profile): the names of the hashed (op, profile) keys, from the decisions."""
    return f"(SELECT DISTINCT k, op, profile FROM {red.relation('decisions')})"


def _query(red: Reduced, sql: str, con=None) -> pd.DataFrame:
    own = con is None
    con = con or engine.connect(spill=Path(red.root) / ".spill")
    try:
        return con.sql(sql).df()
    finally:
        if own:
            con.close()


def decisions(red: Reduced, *, con=None) -> pd.DataFrame:
    """Every tuning decision (one row per run, rank, call, op and profile), with its run's ``gpu``, sorted.

    As :func:`profkit.analysis.winners` finds them: ``runner``, ``tactic``, ``time_ms`` (the fastest of the
    decision's own candidates), ``default_runner``, ``default_ms``, ``n_candidates``. A fleet's decisions are
    many rows (ranks x buckets): the other queries here reduce them further.
    """
    return _query(red, f"SELECT * FROM {_with_gpu(red, 'decisions')} ORDER BY gpu, op, profile, run_id, rank, call", con)


def spread(red: Reduced, *, con=None) -> pd.DataFrame:
    """Run-to-run spread per (gpu, op, profile), from runs that timed the same candidate.

    Per candidate (runner, tactic) timed by two or more runs: the relative variance of the runs' mean times;
    pooled (mean) over the profile's candidates. Returns ``gpu``, ``op``, ``profile``, ``n_runs`` (runs that
    timed the profile), ``n_pairs`` (candidates timed by two runs or more) and ``rel_sd`` (root of the pooled
    relative variance; NaN without repeats), sorted. :func:`profkit.analysis.noise` computes the same from the
    candidates in memory (``noise_pct = 200 * rel_sd``).
    """
    timings = _with_gpu(red, "timings")
    return _query(red, f"""
        WITH cand AS (SELECT gpu, k, count(*) AS n, var_samp(mean_ms) / (avg(mean_ms) ^ 2) AS cv2
                      FROM {timings} t GROUP BY gpu, k, p),
             prof AS (SELECT gpu, k, count(*) FILTER (n >= 2) AS n_pairs, avg(cv2) FILTER (n >= 2) AS cv2
                      FROM cand GROUP BY gpu, k),
             runs AS (SELECT gpu, k, count(DISTINCT run) AS n_runs
                      FROM {_with_gpu(red, "decisions", "WHERE p.n_candidates > 0")} d GROUP BY gpu, k)
        SELECT gpu, op, profile, n_runs, n_pairs, sqrt(cv2) AS rel_sd
        FROM prof JOIN runs USING (gpu, k) JOIN {_names(red)} USING (k) ORDER BY gpu, op, profile""", con)


def pick_stats(red: Reduced, *, ranked: bool = False, con=None) -> pd.DataFrame:
    """Each distinct pick of each bucket: how many tunings and ranks chose it, and its time against the best pick.

    The best pick of a bucket is the pick with the smallest geometric-mean time over the runs that timed it.
    Every other pick is compared with it run by run: the log of (the pick's time / the best pick's time),
    both the fastest the run measured, over the runs that timed both (whatever they picked).

    Args:
        red: the reduced parts.
        ranked: only decisions and runs with a rank (the ranks of a tensor-parallel job).

    Returns:
        One row per (gpu, op, profile, bucket, runner, tactic): ``tunings`` and ``ranks`` that picked it,
        ``first_seen`` (its first tuning in run_id, rank, call order: ties go to the first), ``bucket_tunings``
        and ``bucket_ranks`` (all of the bucket's), ``timed_runs`` (runs that timed it), ``geo_ms`` (geometric
        mean of their times), ``best``, ``n_paired`` (runs that timed it and the best pick), ``mean_log_ratio``
        and ``sd_log_ratio`` (of log(pick / best) over them; 0 for the best itself), sorted by gpu, op,
        profile, tunings (descending), first_seen.
    """
    where = "WHERE p.rank IS NOT NULL" if ranked else ""
    d, t = _with_gpu(red, "decisions", where), _with_gpu(red, "timings", where)
    return _query(red, f"""
        WITH d AS MATERIALIZED (SELECT *, hash(gpu, k, bucket) AS g,
                          row_number() OVER (PARTITION BY gpu, k, bucket
                                             ORDER BY run_id, rank NULLS LAST, call NULLS LAST) AS seen FROM {d}),
             buckets AS (SELECT g, count(*) AS bucket_tunings, count(DISTINCT rank) AS bucket_ranks FROM d GROUP BY g),
             picks AS (SELECT g, gpu, k, bucket, p, any_value(op) AS op, any_value(profile) AS profile,
                              any_value(runner) AS runner, any_value(tactic) AS tactic, count(*) AS tunings,
                              count(DISTINCT rank) AS ranks, min(seen) AS first_seen
                       FROM d GROUP BY g, gpu, k, bucket, p),
             pt AS MATERIALIZED (SELECT picks.g, picks.p, t.run, ln(t.min_ms) AS lt
                    FROM (SELECT * FROM {t} WHERE min_ms > 0) t
                    JOIN picks ON picks.gpu = t.gpu AND picks.k = t.k AND picks.p = t.p),
             geo AS (SELECT g, p, count(*) AS timed_runs, avg(lt) AS mean_lt FROM pt GROUP BY g, p),
             best AS (SELECT g, arg_min(p, mean_lt) AS b FROM geo GROUP BY g),
             bt AS (SELECT pt.g, pt.run, pt.lt FROM pt JOIN best ON pt.g = best.g AND pt.p = best.b),
             ps AS (SELECT pt.g, pt.p, count(*) AS n_paired, avg(pt.lt - bt.lt) AS mean_log_ratio,
                           stddev_samp(pt.lt - bt.lt) AS sd_log_ratio
                    FROM pt JOIN bt ON pt.g = bt.g AND pt.run = bt.run GROUP BY pt.g, pt.p)
        SELECT picks.gpu, picks.op, picks.profile, picks.bucket, picks.runner, picks.tactic, picks.tunings,
               picks.ranks, picks.first_seen, buckets.bucket_tunings, buckets.bucket_ranks,
               coalesce(geo.timed_runs, 0) AS timed_runs, exp(geo.mean_lt) AS geo_ms,
               coalesce(picks.p = best.b, false) AS best, coalesce(ps.n_paired, 0) AS n_paired,
               ps.mean_log_ratio, ps.sd_log_ratio
        FROM picks JOIN buckets USING (g)
        LEFT JOIN geo ON geo.g = picks.g AND geo.p = picks.p
        LEFT JOIN best ON best.g = picks.g
        LEFT JOIN ps ON ps.g = picks.g AND ps.p = picks.p
        ORDER BY picks.gpu, picks.op, picks.profile, picks.bucket, picks.tunings DESC, picks.first_seen""", con)


# The ranks' median time of a candidate is taken over at most about this many runs (those whose hash falls
# in a fixed share): an exact median over every rank of a 1,000-rank fleet is its slowest query, and the
# median of 128 ranks drawn at random stands within a fraction of a percent of it.
MEDIAN_RUNS = 128


def rank_speed(red: Reduced, *, con=None) -> pd.DataFrame:
    """How each rank's timings compare with the other ranks' median, per op and across ops.

    Per candidate (gpu, op, profile, runner, tactic) timed by two ranks or more: the median of the ranks'
    fastest times (over every run, or a fixed hash-drawn share of about :data:`MEDIAN_RUNS` runs in a larger
    fleet); per (rank, bucket): the mean over its candidates of log(its time / that median); per rank and op
    (and per rank across ops, ``op`` NA): the buckets' mean and standard deviation.

    Returns:
        ``gpu``, ``rank``, ``op`` (NA: every op), ``n_buckets``, ``mean_log_ratio``, ``sd_log_ratio``, sorted by
        gpu, rank, op (NA first).
    """
    runs = _query(red, f"SELECT count(DISTINCT run) AS n FROM {red.relation('decisions')}", con)["n"].iloc[0]
    share = max(1, int(runs) // MEDIAN_RUNS)
    t = _with_gpu(red, "timings", "WHERE p.rank IS NOT NULL AND p.min_ms > 0")
    return _query(red, f"""
        WITH t AS NOT MATERIALIZED (SELECT * FROM {t}),
             med AS (SELECT gpu, k, p, median(min_ms) AS m FROM t WHERE hash(run) % {share} = 0
                     GROUP BY gpu, k, p HAVING min(rank) < max(rank)),
             per AS (SELECT t.gpu, t.rank, t.k, avg(ln(t.min_ms / med.m)) AS lr
                     FROM t JOIN med USING (gpu, k, p) GROUP BY t.gpu, t.rank, t.k),
             named AS (SELECT per.*, n.op FROM per JOIN {_names(red)} n USING (k))
        SELECT gpu, rank, op, count(*) AS n_buckets, avg(lr) AS mean_log_ratio, stddev_samp(lr) AS sd_log_ratio
        FROM named GROUP BY GROUPING SETS ((gpu, rank, op), (gpu, rank))
        ORDER BY gpu, rank, op NULLS FIRST""", con)


def signatures(red: Reduced, *, examples: int = 3, con=None) -> pd.DataFrame:
    """Ranks grouped by identical picks: one signature per rank, over every bucket it tuned (tlparse's all-ranks view).

    A rank's signature is the set of its (op, profile, picks) (a rank that tuned a bucket several times
    holds all its distinct picks there), as one hash. Each group is compared with the GPU's largest group (most ranks; the
    lowest rank on ties), through one rank of each.

    Returns:
        One row per (gpu, signature): ``ranks`` (a list), ``n_ranks``, ``keys`` (buckets its ranks tuned),
        ``largest`` (the GPU's largest group), ``differs`` (buckets where its picks differ from the largest
        group's, or that only one of them tuned) and ``examples`` (up to ``examples`` such buckets, "op bucket"),
        sorted by gpu, n_ranks (descending), first rank.
    """
    d = _with_gpu(red, "decisions", "WHERE p.rank IS NOT NULL")
    return _query(red, f"""
        WITH kp AS (SELECT gpu, rank, k, p, any_value(op) AS op, min(bucket) AS bucket FROM {d} GROUP BY gpu, rank, k, p),
             rk AS MATERIALIZED (SELECT gpu, rank, hash(gpu, rank) AS who, k, any_value(op) AS op, min(bucket) AS bucket,
                                        hash(bit_xor(p), count(*)) AS picks FROM kp GROUP BY gpu, rank, k),
             sig AS (SELECT gpu, rank, bit_xor(hash(k, picks)) AS signature, count(*) AS keys FROM rk GROUP BY gpu, rank),
             groups AS (SELECT gpu, signature, list(rank ORDER BY rank) AS ranks, count(*) AS n_ranks,
                               min(rank) AS rep, any_value(keys) AS keys FROM sig GROUP BY gpu, signature),
             largest AS (SELECT gpu, arg_min(rep, (-n_ranks, rep)) AS lrep, arg_min(keys, (-n_ranks, rep)) AS lkeys
                         FROM groups GROUP BY gpu),
             mine AS MATERIALIZED (SELECT g.signature, rk.* FROM (SELECT *, hash(gpu, rep) AS who FROM groups) g
                                   JOIN rk USING (who)),
             theirs AS MATERIALIZED (SELECT rk.* FROM (SELECT hash(gpu, lrep) AS who FROM largest) l JOIN rk USING (who)),
             cmp AS (SELECT a.gpu, a.signature, count(*) AS common, count(*) FILTER (a.picks <> b.picks) AS changed,
                            list(a.op || ' ' || coalesce(CAST(a.bucket AS VARCHAR), '?') ORDER BY a.op, a.bucket)
                              FILTER (a.picks <> b.picks) AS changed_keys
                     FROM mine a JOIN theirs b ON hash(b.gpu, b.k) = hash(a.gpu, a.k) GROUP BY a.gpu, a.signature)
        SELECT g.gpu, g.signature, g.ranks, g.n_ranks, g.keys, g.rep = l.lrep AS largest,
               g.keys + l.lkeys - 2 * coalesce(cmp.common, 0) + coalesce(cmp.changed, 0) AS differs,
               coalesce(array_to_string(list_slice(cmp.changed_keys, 1, {int(examples)}), '; '), '') AS examples
        FROM groups g JOIN largest l USING (gpu)
        LEFT JOIN cmp ON cmp.gpu = g.gpu AND cmp.signature = g.signature
        ORDER BY g.gpu, g.n_ranks DESC, g.rep""", con)


def served(red: Reduced, *, con=None) -> pd.DataFrame:
    """The tactics each rank served (its winners table: profiled, cached, from a cache file...), as provenance.

    Returns:
        One row per (gpu, rank, op, runner, tactic, source): ``buckets`` (profiles it served them at),
        ``calls``, and ``op_buckets`` (the profiles the rank served the op at, whatever the tactic), sorted.
    """
    rows = _with_gpu(red, "served")
    return _query(red, f"""
        WITH s AS (SELECT * FROM {rows}),
             per_op AS (SELECT gpu, rank, op, count(DISTINCT profile) AS op_buckets FROM s GROUP BY gpu, rank, op)
        SELECT gpu, rank, op, runner, tactic, source, count(DISTINCT profile) AS buckets, sum(calls) AS calls,
               any_value(op_buckets) AS op_buckets
        FROM s JOIN per_op USING (gpu, rank, op)
        GROUP BY gpu, rank, op, runner, tactic, source ORDER BY gpu, rank, op, runner, tactic, source""", con)
