"""profkit.capture against FlashInfer's real AutoTuner on the CPU (only GPU timing is faked)."""

from __future__ import annotations

import json
import re
import threading
import warnings

import pandas as pd
import pytest
import flashinfer
import torch
from flashinfer.autotuner import AutoTuner, autotune

import profkit
from profkit import testing as T
from profkit.errors import ProfkitError
from profkit.sources import capture as capture_module

OPS_M = 32  # hybrid buckets 1, 2, 4, 8, 16, 32 -> 6 profiles


def runners():
    return [T.ToyCublasRunner(), T.ToyCudnnRunner()]


def flashinfer_winners(tuner, op):
    """FlashInfer's own decisions: {nearest profile text: (runner, tactic json)} from its cache."""
    return {str(k.nearest_profile): (k.runner_class_name, profkit.schema.tactic_text(list(v[0]) if isinstance(v[0], tuple) else v[0]))
            for k, v in tuner.profiling_cache.items() if k.custom_op == op}


def test_candidates_cover_every_bucket_runner_and_tactic(tuner):
    with profkit.capture(time_default=False) as cap:
        T.tune("toy_gemm", runners(), OPS_M)
    c = cap.candidates
    assert sorted(c["bucket"].unique()) == [1, 2, 4, 8, 16, 32]
    per_bucket = c.groupby("bucket").size()
    assert (per_bucket == 5).all()  # 3 cuBLAS-like + 2 cuDNN-like tactics
    assert set(c["tactic"]) == {"0", "1", "2", "[1, [[2, 3]]]", "[4, []]"}
    assert (c["source"] == "flashinfer").all()
    assert c["seq"].is_monotonic_increasing and c["seq"].is_unique
    assert c["timing"].eq("eager, hot L2, mean of 10").all()


def test_statuses_failed_and_fallback(tuner):
    with profkit.capture(time_default=False) as cap:
        T.tune("toy_gemm", runners(), OPS_M)
    c = cap.candidates
    failed = c[c["tactic"] == "2"]
    assert failed["status"].eq("failed").all() and failed["time_ms"].isna().all()
    assert failed["error"].str.startswith("RuntimeError: tactic 2 is not supported").all()
    fallback = c[c["tactic"] == "[4, []]"]
    assert fallback["status"].eq("fallback").all()
    assert fallback["error"].str.contains("falling back to default tactic=-1").all()
    ok = c[c["status"] == "ok"]
    expected = [T.default_time(r, json.loads(t) if t.startswith("[") else int(t), eval_free_shapes(s))
                for r, t, s in zip(ok["runner"], ok["tactic"], ok["shapes"])]
    assert ok["time_ms"].tolist() == pytest.approx(expected)


def eval_free_shapes(text: str) -> tuple:
    """'((20, 8), (8, 4))' -> ((20, 8), (8, 4)) for the toy inputs (two 2-d tensors)."""
    numbers = [int(x) for x in text.replace("(", " ").replace(")", " ").replace(",", " ").split()]
    return (tuple(numbers[:2]), tuple(numbers[2:4]))


def test_winners_are_flashinfers_own_decisions(tuner):
    with profkit.capture() as cap:
        chosen_runner, chosen_tactic = T.tune("toy_gemm", runners(), OPS_M)
    w = cap.winners
    assert len(w) == 6 and (w["source"] == "profiled").all()
    assert {p: (r, t) for p, r, t in zip(w["profile"], w["runner"], w["tactic"])} == flashinfer_winners(tuner, "toy_gemm")
    last = w[w["bucket"] == OPS_M].iloc[0]
    assert (last["runner"], last["tactic"]) == (type(chosen_runner).__name__, str(chosen_tactic))
    # the winner's time is its candidate's time, and the default is timed by the same timer
    assert w["time_ms"].notna().all() and w["default_time_ms"].notna().all()
    assert (w["default_runner"] == "ToyCublasRunner").all()


def test_same_decisions_with_and_without_capture(tuner):
    plain = T.tune("toy_gemm", runners(), OPS_M)
    before = flashinfer_winners(tuner, "toy_gemm")
    tuner.clear_cache()
    with profkit.capture():
        captured = T.tune("toy_gemm", runners(), OPS_M)
    assert flashinfer_winners(tuner, "toy_gemm") == before
    assert (type(plain[0]), plain[1]) == (type(captured[0]), captured[1])


def test_default_rows_are_tagged_and_kept_out_of_counts(tuner):
    with profkit.capture() as cap:
        T.tune("toy_gemm", runners(), OPS_M)
    c = cap.candidates
    defaults = c[c["source"] == "default"]
    assert len(defaults) == 6 and defaults["tactic"].eq("-1").all() and defaults["runner"].eq("ToyCublasRunner").all()
    calls = cap.tuning[cap.tuning["kind"] == "call"]
    assert calls["n_candidates"].item() == 30  # FlashInfer's own candidates only
    assert calls["default_s"].item() > 0


def test_tuning_rows_break_down_wall_time(tuner):
    with profkit.capture() as cap:
        T.tune("toy_gemm", runners(), OPS_M)
    t = cap.tuning
    profiles, call = t[t["kind"] == "profile"], t[t["kind"] == "call"].iloc[0]
    assert len(profiles) == 6 and call["n_profiles"] == 6 and call["status"] == "ok"
    assert (profiles["wall_s"] >= profiles["measure_s"]).all()
    assert call["wall_s"] >= profiles["wall_s"].sum()
    assert call["measure_s"] == pytest.approx(profiles["measure_s"].sum())
    assert call["overhead_s"] == pytest.approx(call["wall_s"] - call["measure_s"])
    assert profiles["n_candidates"].eq(5).all() and profiles["n_failed"].eq(2).all()


def test_oom_aborts_call_and_later_buckets_fall_back(tuner):
    oom = [T.ToyOomRunner(oom_at=4)]
    with profkit.capture() as cap:
        runner, tactic = T.tune("toy_oom", oom, 16)
    assert tactic == -1  # FlashInfer's OOM fallback
    c, w, t = cap.candidates, cap.winners, cap.tuning
    assert c.loc[c["status"] == "oom", "bucket"].tolist() == [4]
    assert t.loc[t["kind"] == "call", "status"].item() == "oom_abort"
    assert w.loc[w["bucket"] < 4, "source"].eq("profiled").all()
    later = w[w["bucket"] >= 4]
    assert later["bucket"].tolist() == [4, 8, 16]
    assert later["source"].eq("fallback").all() and later["reason"].eq("oom_abort").all()


class Broken(T.ToyCublasRunner):
    def get_valid_tactics(self, inputs, profile):
        raise ValueError("no tactics for this shape")


def test_exceptions_pass_through_unchanged_and_hooks_are_removed(tuner):
    originals = {name: vars(AutoTuner)[name] for name in capture_module._REQUIRED + ("rank_tactics",)
                 if name in vars(AutoTuner)}
    warn = warnings.warn
    with pytest.raises(ValueError, match="no tactics for this shape") as plain:
        T.tune("toy_broken", [Broken()], 4)
    with pytest.raises(ValueError, match="no tactics for this shape") as captured:
        with profkit.capture() as cap:
            T.tune("toy_broken", [Broken()], 4)
    assert type(plain.value) is type(captured.value)
    assert cap.tuning.loc[cap.tuning["kind"] == "call", "status"].item() == "error"
    assert {name: vars(AutoTuner)[name] for name in originals} == originals
    assert warnings.warn is warn


def test_nested_captures_each_see_their_span(tuner):
    with profkit.capture() as outer:
        T.tune("op_a", runners(), 4)
        with profkit.capture() as inner:
            T.tune("op_b", runners(), 4)
    assert set(outer.candidates["op"]) == {"op_a", "op_b"}
    assert set(inner.candidates["op"]) == {"op_b"}
    assert outer.run_id != inner.run_id


def test_threads_do_not_mix_rows(tuner):
    barrier = threading.Barrier(2)

    def work(op):
        barrier.wait()
        T.tune(op, runners(), 32)

    with profkit.capture() as cap:
        threads = [threading.Thread(target=work, args=(op,)) for op in ("op_x", "op_y")]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    c = cap.candidates
    assert c.groupby("call")["op"].nunique().eq(1).all()
    assert c.groupby("call")["thread"].nunique().eq(1).all()
    assert set(c["op"]) == {"op_x", "op_y"}
    assert cap.winners.groupby("op").size().to_dict() == {"op_x": 6, "op_y": 6}


def test_warnings_as_errors_keep_flashinfers_behaviour(tuner):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        T.tune("toy_gemm", runners(), OPS_M)
        plain = flashinfer_winners(tuner, "toy_gemm")
        tuner.clear_cache()
        with profkit.capture() as cap:
            T.tune("toy_gemm", runners(), OPS_M)
    assert flashinfer_winners(tuner, "toy_gemm") == plain
    fallback = cap.candidates[cap.candidates["tactic"] == "[4, []]"]
    assert fallback["status"].eq("failed").all()  # the warning raised, as it would without profkit


def test_hooks_follow_code_that_patches_the_tuner_later(tuner):
    def slower(self, runner, inputs, tactic, tuning_config, *args, **kwargs):
        runner(inputs, tactic=tactic)
        return 7.0

    with profkit.capture(time_default=False) as cap:
        AutoTuner._profile_single_kernel = slower
        T.tune("toy_gemm", runners(), 4)
    assert cap.candidates.loc[cap.candidates["status"] == "ok", "time_ms"].eq(7.0).all()
    assert vars(AutoTuner)["_profile_single_kernel"] is slower  # what it found is what it leaves


def test_untuned_calls_record_nothing(tuner):
    with profkit.capture() as cap:
        AutoTuner.get().choose_one("toy_gemm", runners(), T.gemm_config(), T.gemm_inputs(8))
    assert cap.candidates.empty and cap.winners.empty and cap.tuning.empty


def test_skip_ops_call_is_marked_skipped(tuner):
    with profkit.capture() as cap:
        with autotune(True, skip_ops=["toy_gemm"]):
            AutoTuner.get().choose_one("toy_gemm", runners(), T.gemm_config(), T.gemm_inputs(8))
    assert cap.tuning["status"].tolist() == ["skipped"] and cap.candidates.empty


def test_cache_file_winners_are_marked(tuner, tmp_path):
    path = tmp_path / "cache.json"
    with autotune(True, cache=str(path)):
        AutoTuner.get().choose_one("toy_gemm", runners(), T.gemm_config(), T.gemm_inputs(OPS_M))
    decided = flashinfer_winners(tuner, "toy_gemm")
    tuner.clear_cache()
    with profkit.capture(tune=True, cache=str(path)) as cap:
        AutoTuner.get().choose_one("toy_gemm", runners(), T.gemm_config(), T.gemm_inputs(OPS_M))
    w = cap.winners
    assert len(w) == 6 and w["source"].eq("cache_file").all() and cap.candidates.empty
    assert {p: (r, t) for p, r, t in zip(w["profile"], w["runner"], w["tactic"])} == decided


@pytest.mark.skipif(not hasattr(AutoTuner, "rank_tactics"), reason="rank_tactics is 0.7-only")
def test_rank_tactics_is_recorded(tuner):
    with profkit.capture() as cap:
        with autotune(True):
            ranked = AutoTuner.get().rank_tactics("toy_rank", [T.ToyCublasRunner()], T.gemm_config(),
                                                  T.gemm_inputs(8), k=2)
    assert len(ranked) == 2
    assert cap.tuning.loc[cap.tuning["kind"] == "call", "api"].tolist() == ["rank_tactics"]
    assert cap.winners["tactic"].tolist() == [str(ranked[0])]


def test_missing_method_is_one_clear_error(monkeypatch):
    monkeypatch.delattr(AutoTuner, "_prepare_input_tensors")
    version = re.escape(flashinfer.__version__)
    with pytest.raises(ProfkitError, match=rf"{version}: AutoTuner has no method '_prepare_input_tensors'"):
        capture_module._Recorder().open(profkit.capture())


def test_save_load_round_trip_is_lossless(tuner, tmp_path):
    with profkit.capture() as cap:
        T.tune("toy_gemm", runners(), OPS_M)
    tables = cap.tables()
    back = profkit.load(cap.save(tmp_path / "run"))
    for name in ("candidates", "winners", "tuning", "runs"):
        pd.testing.assert_frame_equal(getattr(back, name), getattr(tables, name))
    assert back.env["run_id"] == cap.run_id and back.env["flashinfer"] == flashinfer.__version__


def test_env_has_provenance_fields(tuner):
    with profkit.capture() as cap:
        pass
    env = cap.env
    for key in ("gpu", "driver", "cuda", "torch", "flashinfer", "cudnn", "cublas", "host", "started_at", "command"):
        assert key in env
    assert env["torch"] == torch.__version__


def test_env_names_the_profkit_that_ran_even_from_a_checkout(tuner, monkeypatch):
    import importlib.metadata

    from conftest import ROOT

    real = importlib.metadata.version

    def not_installed(name):  # a checkout on PYTHONPATH, as on the lent GPUs: no profkit distribution
        if name == "profkit":
            raise importlib.metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(importlib.metadata, "version", not_installed)
    with profkit.capture() as cap:
        pass
    project_version = re.search(r'^version = "([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.M).group(1)
    assert cap.env["profkit"] == profkit.__version__ == project_version
