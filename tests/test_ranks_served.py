"""What the ranks' disagreement costs in serving: the ranks' picks re-timed by profkit verify (analysis.ranks)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from profkit.analysis.ranks import served_agreement
from profkit.cli import main
from profkit.sources.verify import read_verify

from conftest import DATA

RANKS = DATA / "h200-moe" / "qwen3-30b-a3b-ranks"
RANKS_VERIFY = DATA / "h200-moe" / "qwen3-30b-a3b-ranks-verify"


def _table(unit: str, times: dict, pick: str, *, bucket: int = 8) -> list[dict]:
    """One rank's verify rows at one bucket: each tactic's serving median, its own pick flagged."""
    return [{"run_id": unit, "verify_run_id": f"v-{unit}", "op": "op", "profile": f"p{bucket}", "bucket": bucket,
             "m": bucket, "runner": "R", "tactic": t, "winner": t == pick, "serving_ms": ms, "status": "ok",
             "routing": "tuner", "verify_gpu": "NVIDIA H200"} for t, ms in times.items()]


def test_a_pick_slower_in_every_table_costs_beyond_noise_and_agreeing_ranks_cost_nothing():
    rng = np.random.default_rng(0)
    rows = []
    for i in range(4):  # ranks 0-1 picked the fast tactic, 2-3 one 5% slower; every table timed both
        base = 1.0 + 0.01 * rng.standard_normal()
        rows += _table(f"r{i}", {"fast": base, "slow": base * 1.05}, "fast" if i < 2 else "slow")
        rows += _table(f"r{i}", {"fast": base}, "fast", bucket=16)
    out = served_agreement(pd.DataFrame(rows)).set_index("bucket")
    assert out.loc[8, "distinct_picks"] == 2 and out.loc[8, "best_tactic"] == "fast"
    assert out.loc[8, "verdict"] == "slower" and abs(out.loc[8, "worst_regret_pct"] - 5.0) < 0.1
    assert out.loc[8, "top1_agreement"] == 0.5 and out.loc[8, "n_units"] == 4
    assert out.loc[16, "distinct_picks"] == 1 and out.loc[16, "worst_regret_pct"] == 0


def test_other_routings_sizes_and_failed_rows_are_left_out():
    rows = _table("r0", {"a": 1.0, "b": 2.0}, "a") + _table("r1", {"a": 1.0, "b": 2.0}, "b")
    noise = [dict(r, routing="zipf-0.3", serving_ms=9.0) for r in rows] + [dict(r, m=3, serving_ms=9.0) for r in rows] \
        + [dict(r, status="error", serving_ms=0.1) for r in rows]
    clean = served_agreement(pd.DataFrame(rows))
    assert served_agreement(pd.DataFrame(rows + noise))[["worst_regret_pct", "verdict"]].equals(
        clean[["worst_regret_pct", "verdict"]])
    assert clean["worst_regret_pct"].iloc[0] == 100.0


def test_the_shipped_eight_ranks_picks_are_those_of_their_captures(tmp_path):
    served = served_agreement(read_verify(RANKS_VERIFY))
    assert len(served) == 20 and set(served["ranks"]) == {8}
    caches = [json.loads(p.read_text()) for p in sorted(RANKS.glob("rank*/rank_tp*_pp0_dp0.json"))]
    assert len(caches) == 8
    # Each bucket's distinct picks in the verify tables are the distinct tactics the ranks' cache files hold there.
    distinct = {}
    for cache in caches:
        for key, value in cache.items():
            if not key.startswith("_"):
                distinct.setdefault(key, set()).add(json.dumps(value[1]))
    assert sorted(len(v) for v in distinct.values()) == sorted(served["distinct_picks"])
    out = tmp_path / "ranks.json"
    assert main(["ranks", str(RANKS), str(RANKS_VERIFY), "--json", str(out)]) == 0
    rows = pd.DataFrame(json.loads(out.read_text()))
    assert {"op", "shape", "bucket", "ranks", "distinct_picks", "served_worst_regret_pct", "served_verdict"} <= set(rows)
    assert (rows["ranks"] == 8).all()
