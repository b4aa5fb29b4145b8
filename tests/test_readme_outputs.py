"""Outputs that are documentation are checked strictly: re-run nbs/index.ipynb (the README) and compare every
kept text output with what is committed. (nbval's strict mode needs execution counts, which nbdev-clean removes.)"""
import copy
from pathlib import Path
import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent.parent


def _texts(cell):
    out = []
    for o in cell.get("outputs", []):
        if o.get("output_type") == "stream": out.append(o.get("text", ""))
        elif o.get("output_type") in ("execute_result", "display_data"): out.append(o.get("data", {}).get("text/plain", ""))
    return out


def test_index_outputs_are_current():
    nb = nbformat.read(ROOT / "nbs" / "index.ipynb", as_version=4)
    kept = {i: _texts(c) for i, c in enumerate(nb.cells) if c.cell_type == "code" and _texts(c)}
    assert kept, "the README notebook keeps no outputs: nothing to check"
    run = copy.deepcopy(nb)
    for c in run.cells:
        if c.cell_type == "code": c.outputs = []
    NotebookClient(run, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(ROOT / "nbs")}}).execute()
    for i, want in kept.items():
        assert _texts(run.cells[i]) == want, f"cell {i} of nbs/index.ipynb: README output is stale:\n{_texts(run.cells[i])}\n!=\n{want}"
