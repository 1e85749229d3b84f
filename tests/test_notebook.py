"""examples/quickstart.ipynb runs headlessly, top to bottom, on a tiny budget."""

from pathlib import Path

import pytest

NOTEBOOK = Path(__file__).resolve().parents[1] / "examples/quickstart.ipynb"


def test_quickstart_notebook_runs(tmp_path):
    for name in ("nbclient", "ipykernel", "matplotlib"):
        pytest.importorskip(name)
    import nbformat
    from nbclient import NotebookClient

    notebook = nbformat.read(NOTEBOOK, as_version=4)
    # As papermill does: a cell after the one tagged "parameters" overrides its values.
    [index] = [i for i, cell in enumerate(notebook.cells) if "parameters" in cell.metadata.get("tags", [])]
    notebook.cells.insert(index + 1, nbformat.v4.new_code_cell("TOTAL_TIMESTEPS = 2560"))
    client = NotebookClient(notebook, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}})
    client.execute()

    [png] = list(tmp_path.glob("runs/quickstart/version_0/learning_curve.png"))
    figure = [o for o in notebook.cells[-3].outputs if "image/png" in o.get("data", {})]
    assert figure and png.stat().st_size > 10_000  # the curve, shown in the notebook and written
    results = notebook.cells[-1].outputs[-1]["data"]["text/plain"]
    assert "eval/return_mean" in results
