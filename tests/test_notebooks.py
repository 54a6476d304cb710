"""Every notebook runs top to bottom with the venv's python3 kernel, and ships with its outputs.

The outputs (figures, short tables) let the notebooks read on a code host. Refresh them after a
change with nbclient, e.g. ``.venv/bin/jupyter nbconvert --to notebook --execute --inplace notebooks/*.ipynb``.
"""

from __future__ import annotations

import sys
from pathlib import Path

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


def test_the_nine_notebooks_exist():
    assert [p.name[:2] for p in NOTEBOOKS] == ["01", "02", "03", "04", "05", "06", "07", "08", "09"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_shipped_with_their_outputs(path):
    """Every code cell ran, in order, without an error; figures are stored as images."""
    import nbformat  # here, not at the top: its jsonschema import costs every pytest worker ~3 s at collection

    nb = nbformat.read(path, as_version=4)
    code = [cell for cell in nb.cells if cell.cell_type == "code"]
    assert [cell.execution_count for cell in code] == list(range(1, len(code) + 1)), f"{path.name}: re-execute it"
    outputs = [out for cell in code for out in cell.outputs]
    assert not [out for out in outputs if out.get("output_type") == "error"], f"{path.name}: an error is stored"
    assert any("image/png" in out.get("data", {}) for out in outputs), f"{path.name}: no figure stored"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs(path):
    import nbformat
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
