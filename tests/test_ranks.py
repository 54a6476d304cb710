"""profkit ranks: the rank questions as DuckDB queries (profkit.query) equal the in-memory analyses on the shipped
data, judge small fleets built from the shipped captures (scripts/make_fleet.py) and give the same frames on a
2-worker Dask LocalCluster as in one process."""

from __future__ import annotations

import importlib.util
import json
import warnings

import numpy as np
import pandas as pd
import pytest

from conftest import DATA, ROOT
from profkit.analysis import ranks as judge
from profkit.query import ranks as q
from profkit.query.fleet import reduce

ENGINE_LIKE = DATA / "h200-engine-like" / "capture"
# The shipped H200 captures (data/h100 and others hold other GPUs' sets, some reusing these run_ids).
SHIPPED = [DATA / "h200", DATA / "h200-moe", DATA / "h200-engine-like"]


def _make_fleet():
    spec = importlib.util.spec_from_file_location("make_fleet", ROOT / "scripts" / "make_fleet.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def shipped(tmp_path_factory):
    """The shipped H200 captures, reduced by DuckDB in this process, and read in memory (profkit.load)."""
    from profkit import schema

    reduced = reduce(SHIPPED, tmp_path_factory.mktemp("shipped-parts"), workers=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        tables = schema.concat(schema.load(p) for p in SHIPPED)
    return reduced, tables.candidates


def _fleet(tmp_path, n: int, **options):
    """A fleet of ``n`` ranks built from the engine-like capture's two processes (each rank holds both)."""
    out = tmp_path / f"fleet-{n}"
    _make_fleet().build(n, out, captures=sorted(p for p in ENGINE_LIKE.iterdir() if p.is_dir()), **options)
    return out


def test_decisions_and_noise_equal_the_in_memory_path(shipped):
    from profkit.analysis import noise, winners

    reduced, candidates = shipped
    key = ["run_id", "call", "op", "profile"]
    got = q.decisions(reduced).sort_values(key).reset_index(drop=True)
    want = winners(candidates).sort_values(key).reset_index(drop=True)
    assert len(got) == len(want) == 1190  # the shipped H200 captures: 1,030 decisions and the eight ranks' 160
    for column in ("run_id", "op", "profile", "runner", "tactic", "default_runner"):
        assert got[column].astype("string").fillna("").tolist() == want[column].astype("string").fillna("").tolist()
    for column in ("bucket", "call", "rank", "n_candidates"):
        assert got[column].astype("Int64").fillna(-1).tolist() == want[column].astype("Int64").fillna(-1).tolist()
    for column in ("time_ms", "default_ms"):
        np.testing.assert_array_equal(got[column].to_numpy(dtype=float), want[column].to_numpy(dtype=float))
    bands = judge.noise_bands(q.spread(reduced)).merge(noise(candidates), on=["op", "profile"], suffixes=("", "_mem"))
    assert len(bands) == 460
    np.testing.assert_allclose(bands["noise_pct"], bands["noise_pct_mem"], rtol=1e-9)
    assert (bands["noise_source"] == bands["noise_source_mem"]).all()
    assert (bands["n_runs"] == bands["n_runs_mem"]).all() and (bands["n_pairs"] == bands["n_pairs_mem"]).all()


def test_agreement_equals_winner_stability_and_rank_divergence(shipped):
    from profkit.analysis import rank_divergence, winner_stability, winners

    reduced, candidates = shipped
    agreement = judge.rank_agreement(q.pick_stats(reduced))
    stability = winner_stability(winners(candidates))
    both = agreement.merge(stability, on=["op", "profile"], suffixes=("", "_mem"), validate="one_to_one")
    assert len(both) == len(agreement) == len(stability) == 460
    assert (both["shape"] == both["shape_mem"]).all() and (both["bucket"] == both["bucket_mem"]).all()
    assert (both["tunings"] == both["n_tunings"]).all()
    assert (both["distinct_picks"] == both["n_distinct"]).all()
    np.testing.assert_allclose(both["largest_share"], both["modal_share"])
    np.testing.assert_allclose(both["flip_rate"].astype(float), both["flip_rate_mem"].astype(float))
    assert (both["largest_runner"] == both["modal_runner"]).all() and (both["largest_tactic"] == both["modal_tactic"]).all()
    # The ranks of a job: rank_divergence's rows (buckets two ranks or more tuned).
    ranked = judge.rank_agreement(q.pick_stats(reduced, ranked=True))
    divergence = rank_divergence(candidates)
    joined = divergence.merge(ranked, on=["op", "profile"], how="left", suffixes=("_mem", ""))
    assert len(joined) == 70 and joined["ranks"].notna().all()  # engine-like, fp8 repeats and the eight Qwen ranks
    assert (joined["ranks"] == joined["n_ranks"]).all()
    assert (joined["distinct_picks"] == joined["n_distinct"]).all()
    assert ((joined["distinct_picks"] == 1) == joined["agree"]).all()


def test_signature_groups_name_the_buckets_ranks_disagree_on(tmp_path):
    from profkit import schema
    from profkit.analysis import rank_divergence

    reduced = reduce([ENGINE_LIKE], tmp_path / "parts", workers=1)
    groups = judge.signature_groups(q.signatures(reduced))
    assert groups["n_ranks"].tolist() == [1, 1] and groups["largest"].tolist() == [True, False]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        divergence = rank_divergence(schema.load(ENGINE_LIKE).candidates)
    disagree = divergence[~divergence["agree"].astype(bool)]
    assert int(groups["differs"].iloc[1]) == len(disagree) == 7
    assert groups["examples"].iloc[1] == "; ".join(f"{op} {b}" for op, b in disagree[["op", "bucket"]].head(3).itertuples(index=False))


def test_identical_ranks_form_one_group_and_a_slow_gpu_is_named(tmp_path):
    fleet = _fleet(tmp_path, 4, jitter=(0.0, 0.0), slow={2: 1.05})
    reduced = reduce([fleet], tmp_path / "parts", workers=1, served=False)  # the winners tables left unread
    assert q.served(reduced).empty
    groups = judge.signature_groups(q.signatures(reduced))
    assert len(groups) == 1 and list(groups["ranks"].iloc[0]) == [0, 1, 2, 3]  # 5% slower everywhere: same picks
    slow = judge.slow_ranks(q.rank_speed(reduced))
    assert slow["rank"].tolist()[0] == 2 and slow["slow"].tolist() == [True, False, False, False]
    assert slow["slower_pct"].iloc[0] == pytest.approx(5.0, abs=1e-6) and slow["ops_slower"].iloc[0] == "bf16_gemm, fp8_gemm"
    agreement = judge.rank_agreement(q.pick_stats(reduced), noise=judge.noise_bands(q.spread(reduced)))
    assert (agreement["ranks"] == 4).all() and (agreement["tunings"] == 8).all()  # each rank holds both processes
    split = agreement[agreement["distinct_picks"] > 1]  # where the two shipped processes picked differently
    assert len(split) == 7 and (split["largest_share"] == 0.5).all() and (split["flip_rate"] == 4 * 4 / 28).all()


def test_regret_is_judged_on_the_runs_that_timed_both(tmp_path):
    fleet = _fleet(tmp_path, 6, seed=3)
    reduced = reduce([fleet], tmp_path / "parts", workers=1)
    picks = q.pick_stats(reduced)
    regrets = judge.pick_regrets(picks)
    best = regrets[regrets["best"].astype(bool)]
    assert (best["regret_pct"] == 0).all() and best["verdict"].isna().all()
    others = regrets[~regrets["best"].astype(bool)]
    assert len(others) and (others["n_units"] == 6).all()  # one run per rank, and every run timed every candidate
    assert (others["design"] == "paired").all() and others["verdict"].isin(["slower", "within_noise", "faster"]).all()
    # The regret is the geometric mean, over the runs, of the pick's fastest time over the best pick's.
    timings = pd.concat([pd.read_parquet(f) for f in reduced.files("timings")]).set_index(["k", "p", "run"]).sort_index()
    names = q.decisions(reduced)  # the timings name (op, profile) and (runner, tactic) by their hash: k and p
    key_of = dict(zip(zip(names["op"], names["profile"]), names["k"]))
    pick_of = dict(zip(zip(names["runner"], names["tactic"]), names["p"]))
    for row in others.head(3).itertuples(index=False):
        top = best[(best["op"] == row.op) & (best["profile"] == row.profile)].iloc[0]
        of = timings.loc[key_of[row.op, row.profile], "min_ms"]
        ratio = of.loc[pick_of[row.runner, row.tactic]] / of.loc[pick_of[top["runner"], top["tactic"]]]
        assert row.regret_pct == pytest.approx(100 * (np.exp(np.log(ratio).mean()) - 1), rel=1e-9)


def test_dask_local_cluster_gives_the_same_frames(tmp_path):
    fleet = _fleet(tmp_path, 3, seed=1)
    one = reduce([fleet], tmp_path / "one", workers=1)
    # processes=False: two worker threads of this process; each batch is still a Dask task writing its parts.
    many = reduce([fleet], tmp_path / "many", workers=2, processes=False)
    assert len(many.files("decisions")) == 3 and len(one.files("decisions")) == 1  # a task per folder: 3 parts
    for query in (q.decisions, q.spread, q.pick_stats, q.rank_speed, q.signatures, q.served):
        a, b = query(one), query(many)
        keys = [c for c in a.columns if a[c].dtype != float and c not in ("ranks", "first_seen")]
        a, b = (f.sort_values(keys).reset_index(drop=True) for f in (a, b))
        pd.testing.assert_frame_equal(a, b, check_exact=False, rtol=1e-12)


def test_debug_logs_are_read_per_file_and_ranked_by_name(tmp_path):
    from profkit.analysis import winners
    from profkit.sources.logs import read_log

    logs = DATA / "h200-engine-like" / "logs"
    reduced = reduce([logs], tmp_path / "parts", workers=1)
    got = q.decisions(reduced)
    assert sorted(got["rank"].unique().tolist()) == [0, 1]  # rank0.log, rank1.log
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        want = winners(read_log([str(p) for p in sorted(logs.glob("*.log"))]).candidates)
    key = ["op", "profile", "runner", "tactic"]
    assert sorted(map(tuple, got[key].to_numpy().tolist())) == sorted(map(tuple, want[key].to_numpy().tolist()))


def test_cli_ranks_prints_the_answer_and_writes_json(tmp_path, capsys):
    from profkit.cli import main

    fleet = _fleet(tmp_path, 4, jitter=(0.0, 0.0), slow={3: 1.05})
    out = tmp_path / "ranks.json"
    assert main(["ranks", str(fleet), "--workers", "1", "--json", str(out), "--served"]) == 0
    text = capsys.readouterr().out
    assert "4 ranks in 1 group of identical picks" in text
    assert "rank 3 fp8_gemm: 5 tactics at 10 buckets (profiled)" in text  # both shipped processes' picks
    assert "slow rank 3: +5.00%" in text and "20 buckets: all tunings agree in 13" in text
    rows = json.loads(out.read_text())
    assert len(rows) == 20 and {"op", "shape", "bucket", "ranks", "distinct_picks"} <= set(rows[0])
    assert {r["ranks"] for r in rows} == {4} and sorted(r["distinct_picks"] for r in rows) == [1] * 13 + [2] * 7


def test_cli_ranks_refuses_an_input_as_json(tmp_path, capsys):
    from profkit.cli import main

    fleet = _fleet(tmp_path, 1)
    victim = next(fleet.rglob("candidates.parquet"))
    assert main(["ranks", str(fleet), "--workers", "1", "--json", str(victim)]) == 1
    assert "--json" in capsys.readouterr().err and victim.stat().st_size > 0


def test_cli_ranks_help_imports_nothing_heavy():
    import subprocess
    import sys

    code = ("import sys; from profkit.cli import build_parser; build_parser(); "
            "print(sorted(m for m in ('duckdb', 'pandas', 'dask', 'distributed') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"


def test_a_run_id_reused_on_another_gpu_stays_apart(tmp_path):
    import shutil

    import pyarrow as pa
    import pyarrow.parquet as pq

    source = DATA / "h200" / "bf16" / "bf16_gemm-llama3-8b-o" / "capture"
    for gpu in ("NVIDIA H200", "NVIDIA H100 80GB HBM3"):
        folder = tmp_path / "sets" / gpu.split()[1] / "capture"
        shutil.copytree(source, folder)
        runs = pq.read_table(folder / "runs.parquet")
        pq.write_table(runs.set_column(runs.column_names.index("gpu"), "gpu", pa.array([gpu])), folder / "runs.parquet")
    reduced = reduce([tmp_path / "sets"], tmp_path / "parts", workers=1)
    agreement = judge.rank_agreement(q.pick_stats(reduced))
    assert sorted(agreement["gpu"].unique()) == ["NVIDIA H100 80GB HBM3", "NVIDIA H200"]
    assert (agreement["tunings"] == 1).all() and len(agreement) == 40  # 20 buckets per GPU, never merged


def test_an_unreadable_file_is_named_and_the_rest_is_read(tmp_path):
    fleet = _fleet(tmp_path, 2, jitter=(0.0, 0.0))
    victim = sorted(fleet.rglob("candidates.parquet"))[1]
    victim.write_bytes(victim.read_bytes()[:100])  # a write cut short
    with pytest.warns(UserWarning, match="could not be read") as caught:
        reduced = reduce([fleet], tmp_path / "parts", workers=1)
    assert str(victim) in str(caught[0].message) and len(reduced.problems) == 1
    assert reduced.problems[0].startswith(f"{victim}: not readable as parquet")
    agreement = judge.rank_agreement(q.pick_stats(reduced))
    assert len(agreement) == 20 and agreement["tunings"].sum() == 2 * 40 - 10  # 10 decisions of that segment lost
