"""Shared test setup: Agg backend, figures closed after each test, paths to shipped data."""

from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data"
TEST_DATA = Path(__file__).resolve().parent / "data"


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    import matplotlib.pyplot as plt

    plt.close("all")


@pytest.fixture
def tuner():
    """FlashInfer's real AutoTuner made to tune on the CPU (profkit.testing), its cache cleared around."""
    from profkit import testing as T

    with T.cpu_autotuner() as t:
        yield t
