"""notebooks/explore.ipynb runs top to bottom (nbclient) against real tiny CPU sweeps, from
``notebooks/`` (where Jupyter starts), and compares the newest sweep with the one before."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

try:
    from synthetic import tiny_cpu_sweep
except ImportError:  # tests/ imported as a package
    from tests.synthetic import tiny_cpu_sweep

REPO = Path(__file__).resolve().parent.parent
NOTEBOOK = REPO / "notebooks" / "explore.ipynb"


@pytest.mark.slow
def test_explore_notebook_runs(tmp_path_factory, tmp_path, monkeypatch):
    nbformat = pytest.importorskip("nbformat", reason="pip install nbformat nbclient ipykernel")
    nbclient = pytest.importorskip("nbclient", reason="pip install nbclient ipykernel")
    pytest.importorskip("ipykernel", reason="pip install ipykernel")
    tiny = tiny_cpu_sweep(tmp_path_factory)
    results = tmp_path / "results"  # two sweeps: the notebook must pick both, newest last,
    # by when they wrote their results: the older one's name sorts after the newer one's
    base = shutil.copytree(tiny, results / "zz_named_earlier")
    sweep = shutil.copytree(tiny, results / "2026-01-02_00-00-00.000000")
    for number, folder in enumerate((base, sweep)):
        for path in folder.rglob("*.parquet"):
            os.utime(path, (1_700_000_000 + number * 3600,) * 2)
    monkeypatch.setenv("OPSWEEP_RESULTS", str(results))
    for name in ("OPSWEEP_SWEEP", "OPSWEEP_BASE", "OPSWEEP_RESULTS_ROOT", "PYTHONPATH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=120, kernel_name="python3",
                                     resources={"metadata": {"path": str(NOTEBOOK.parent)}})
    client.execute()  # raises CellExecutionError, with the cell and traceback, on failure

    def text_of(cell) -> str:
        parts = []
        for out in cell.get("outputs", []):
            parts.append(out.get("text", ""))
            parts.append(out.get("data", {}).get("text/plain", ""))
        return "\n".join(parts)

    code = [c for c in nb.cells if c.cell_type == "code"]
    assert f"sweep: {sweep}" in text_of(code[0]) and f"base:  {base}" in text_of(code[0])
    assert "ok" in text_of(code[1])
    assert "compared:" in text_of(code[2]) and "0 faster, 0 slower" in text_of(code[2])
    # the table is printed text (what `jupyter execute` and nbconvert show), never raw ANSI
    streams = "".join(o.get("text", "") for o in code[2].outputs if o.output_type == "stream")
    assert "verdict" in streams and "speedup" in streams
    assert "\x1b[" not in text_of(code[2])
    images = [o for c in code for o in c.get("outputs", []) if "image/png" in o.get("data", {})]
    assert len(images) >= 2, "the roofline and the custom pandas plot should both draw"
