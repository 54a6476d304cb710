"""Every notebook runs top to bottom with the venv's python3 kernel, and is committed without outputs."""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
import pytest

from conftest import ROOT

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def _kernel_name() -> str:
    """A kernelspec whose python is this interpreter (install one into sys.prefix if missing)."""
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    manager = KernelSpecManager()
    try:
        spec = manager.get_kernel_spec("python3")
        if Path(spec.argv[0]).resolve() == Path(sys.executable).resolve() or spec.argv[0] in ("python", "python3"):
            return "python3"
    except NoSuchKernel:
        pass
    from ipykernel.kernelspec import install

    install(prefix=sys.prefix, kernel_name="profkit-test", display_name="profkit test kernel")
    return "profkit-test"


def test_the_five_notebooks_exist():
    assert [p.name[:2] for p in NOTEBOOKS] == ["01", "02", "03", "04", "05"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_committed_without_outputs(path):
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert not cell.outputs and cell.execution_count is None, f"{path.name}: clear outputs before committing"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs(path):
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=300, kernel_name=_kernel_name(), resources={"metadata": {"path": str(path.parent)}})
    client.execute()  # raises CellExecutionError naming the cell on any error
    images = sum("image/png" in out.get("data", {}) for cell in nb.cells if cell.cell_type == "code"
                 for out in cell.outputs)
    assert images >= 1, f"{path.name}: no figure was displayed"
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            assert out.get("output_type") != "error"
            data = out.get("data", {})
            if data.get("text/plain", "").startswith("<Figure size"):
                assert "image/png" in data, f"{path.name}: a figure printed as text, not as an image"
