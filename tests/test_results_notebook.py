"""notebooks/analyze.ipynb runs top to bottom, headless, against a synthetic store; any cell error fails."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from faultline.results.synth import synth_store

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "analyze.ipynb"


@pytest.mark.spark
def test_analyze_notebook_runs_headless(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = tmp_path / "store"
    synth_store(store, runs=4, ops=300, anomaly_rate=0.5, seed=4, keys=3, jobs=1)
    monkeypatch.setenv("FAULTLINE_STORE", str(store))
    monkeypatch.setenv("FAULTLINE_MASTER", "local[1]")
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = NotebookClient(
        nb,
        timeout=600,
        kernel_name="python3",
        allow_errors=False,
        resources={"metadata": {"path": str(NOTEBOOK.parent)}},
    )
    client.execute()  # raises CellExecutionError on the first failing cell
    text = "\n".join(
        str(o.get("text", "")) + str(o.get("data", {}).get("text/plain", ""))
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.get("outputs", [])
    )
    assert "4 runs" in text and "overall verdict: False" in text
    assert "valid=False" in text and "blocked op:" in text  # the drill-down found the injected stale read
    images = [
        o
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.get("outputs", [])
        if "image/png" in o.get("data", {})
    ]
    assert len(images) >= 2  # latency over time, availability by nemesis
    assert (store / "_score" / "scorecard.json").exists()
