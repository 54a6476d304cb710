"""profkit step's record of what FlashInfer ran per linear (picks_text): pure, on hand-made choices."""

from __future__ import annotations

from profkit.bench.step import picks_text

NAMES = ["qkv", "o", "gate_up", "down"]


def choice(runner: str, tactic: str) -> dict:
    return {"op": "fp8_gemm", "runner": runner, "tactic": tactic}


def test_the_captured_forward_names_each_linear_of_its_first_layer():
    warm = [choice("CublasFp8GemmRunner", "-1")] * 8  # 2 layers x 4 linears, per eager warm-up
    captured = [choice("CudnnFp8GemmRunner", "[0, []]"), choice("CublasFp8GemmRunner", "1"),
                choice("CublasFp8GemmRunner", "0"), choice("CublasFp8GemmRunner", "-1")] * 2
    text = picks_text(warm + warm + captured, NAMES, layers=2)
    assert text == ("qkv=CudnnFp8GemmRunner:[0, []] o=CublasFp8GemmRunner:1 gate_up=CublasFp8GemmRunner:0 "
                    "down=CublasFp8GemmRunner:-1")


def test_choices_that_do_not_match_the_linear_calls_are_said_not_guessed():
    assert picks_text([choice("CublasFp8GemmRunner", "-1")] * 5, NAMES, layers=1) == (
        "unattributed: 5 choices for 12 linear calls")
    assert picks_text([], NAMES, layers=1) == ""  # torch linears: FlashInfer chose nothing
