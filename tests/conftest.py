"""Shared test setup: Agg backend, figures closed after each test, paths to shipped data, and the shipped
data read once per session (the session fixtures are shared: a test reads them and never changes them); those
that tests on several pytest-xdist workers use are computed once per run (:func:`once_per_run`)."""

import fcntl
import inspect
import os
import pickle
from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data"
TEST_DATA = Path(__file__).resolve().parent / "data"


# The slowest test files, slowest first (each one's seconds on one worker of the 2-core machine, --durations).
# --dist loadfile hands files to the workers in collection order, and pyproject's --no-loadscope-reorder keeps this
# order (xdist's own puts the files with the most tests first): the long files start early and the run ends on short
# ones on both workers, not on one long file while the other worker idles. Files not named follow, by name.
SLOWEST_FIRST = (
    "test_report.py", "test_notebooks.py", "test_autocapture.py", "test_catalog.py", "test_views.py",
    "test_hostile_round3.py", "test_safe_outputs.py", "test_reader_faults.py", "test_analysis_batched.py",
    "test_logs.py", "test_flashinfer_0616.py", "test_verify.py", "test_catalog_reduced.py", "test_capture_writer.py",
    "test_moe.py", "test_capture_faults.py", "test_report_across_gpus.py", "test_moe_sm90.py", "test_ranks.py",
)


def pytest_collection_modifyitems(items):
    rank = {name: i for i, name in enumerate(SLOWEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: each file's own order is kept


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


def once_per_run(build):
    """``build`` as a session fixture computed once per run, not once per pytest-xdist worker.

    The first worker to need it computes it (its arguments are fixtures, as in any fixture) and pickles it
    into the run's shared temporary folder, under a lock; the others wait there and unpickle it, without its
    fixtures (a pickle round trip is exact, and a tenth of a second where the analyses take seconds).
    """
    def fixture(request, tmp_path_factory):
        def value():
            return build(*(request.getfixturevalue(name) for name in inspect.signature(build).parameters))

        if "PYTEST_XDIST_WORKER" not in os.environ:
            return value()
        shared = tmp_path_factory.getbasetemp().parent  # each worker's base folder lies in the run's
        with open(shared / f"{build.__name__}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            pickled = shared / f"{build.__name__}.pickle"
            if pickled.is_file():
                return pickle.loads(pickled.read_bytes())
            made = value()
            pickled.write_bytes(pickle.dumps(made, protocol=pickle.HIGHEST_PROTOCOL))
            return made

    fixture.__doc__ = build.__doc__  # not functools.wraps: pytest would read build's arguments as the fixture's
    return pytest.fixture(fixture, scope="session", name=build.__name__)


@once_per_run
def shipped_h200():
    """``data/h200`` with the shipped SGLang serving pair, as the report reads it (a Catalog)."""
    from profkit.catalog import open as open_catalog, shipped_bench

    return open_catalog(DATA / "h200", bench=shipped_bench())


@once_per_run
def shipped_h200_results(shipped_h200):
    """Everything the report computes from ``data/h200`` (analysis.results.analyse)."""
    from profkit.analysis.results import analyse

    return analyse(shipped_h200)


@once_per_run
def shipped_whole():
    """The whole ``data/`` folder: the H200 captures with the verify, advise and MoE results (a Catalog)."""
    from profkit.catalog import open as open_catalog

    return open_catalog(DATA)


@pytest.fixture(scope="session")
def shipped_whole_results(shipped_whole):
    """Everything the report computes from the whole ``data/`` folder for the GPU it details (the H200, with the
    most runs; analysis.results.analyse of that GPU's part)."""
    from profkit.report import build_model

    return build_model(shipped_whole).results


@once_per_run
def shipped_verify_verdicts():
    """:func:`profkit.analysis.verify.bucket_verdicts` of every verify table under ``data/h200-verify``."""
    from profkit.analysis.verify import bucket_verdicts
    from profkit.sources.verify import read_verify

    return bucket_verdicts(read_verify(DATA / "h200-verify"))


@once_per_run
def shipped_moe_runs():
    """``data/h200-moe`` as :func:`profkit.sources.moe_runs.read_moe_runs` reads it (a MoeRuns)."""
    from profkit.sources.moe_runs import read_moe_runs

    return read_moe_runs(DATA / "h200-moe")


@once_per_run
def shipped_across():
    """``data/h200-moe`` and ``data/h100-moe`` read together (a Catalog): the H200's MoE captures verified on the
    H100 beside the H100's own, and the port's price."""
    from profkit.catalog import open as open_catalog

    return open_catalog([DATA / "h200-moe", DATA / "h100-moe"])
