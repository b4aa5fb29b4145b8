"""An imported run replayed in the dashboard's live view, in a real browser (JupyterLab + headless chromium, as
tests/test_browser.py drives it): every rank's parts beside the estimate of the same config on the topology it was
priced on. Skipped where /usr/bin/chromium is absent."""
import json, os
from pathlib import Path
import pytest
from test_browser import CHROMIUM, ARGS, ARTIFACTS, _jupyter_lab, _lab_env, _open_and_run_all

DATA = Path(__file__).resolve().parent / "data" / "imports"
pytestmark = [pytest.mark.slow, pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"{CHROMIUM} is absent")]

CELL = f"""from supernode_nb.foundation.store import Archive
from supernode_nb.ops.importer import import_run, ImportedLauncher
from supernode_nb.ui.widgets import Dashboard
arc = Archive()
i = import_run({str(DATA / "msprof/cluster_step_trace_time.csv")!r}, archive=arc, model="tiny-gpt", tp=2, dp=2, global_batch_size=8)
r = arc.get(i)
d = Dashboard(launcher=ImportedLauncher(arc, i), warm=False)
d.state.topology = r.extra["topology_preset"]            # priced where it ran: the estimate beside it is the import's own
d.state.load(r.parallel_config(), "tiny-gpt"); d.state.steps = 2
print("imported run", i, r.label)
d"""
OWN = """import os, subprocess, sys, tempfile
from pathlib import Path
from supernode_nb.foundation.store import Archive
from supernode_nb.ops.importer import import_run, ImportedLauncher
from supernode_nb.ui.widgets import Dashboard
tr = Path(tempfile.mkdtemp()) / "traces"      # this project's own run, traced: 2 × 2 ranks, 3 steps
cli = str(Path(sys.executable).parent / "supernode-nb")
subprocess.run([cli, "run", "--dp", "2", "--tp", "2", "--steps", "3", "--profile-trace", str(tr)], check=True,
               env=dict(os.environ, SUPERNODE_NB_ARCHIVE="off"), capture_output=True)
arc = Archive()
i = import_run(tr, archive=arc)
r = arc.get(i)
d = Dashboard(launcher=ImportedLauncher(arc, i), warm=False)
d.state.topology = r.extra["topology_preset"]
d.state.load(r.parallel_config(), r.model["name"]); d.state.steps = 3
print("imported run", i, r.label)
d"""


def notebook(cell: str) -> dict:
    return {"cells": [{"cell_type": "code", "execution_count": None, "id": "imported", "metadata": {}, "outputs": [],
                       "source": cell.splitlines(keepends=True)}],
            "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}},
            "nbformat": 4, "nbformat_minor": 5}

_LIVE_JS = """() => {
  const gd = document.querySelector('.snb-live .js-plotly-plot');
  const comp = gd.data.find(t => t.name === 'compute');
  const est = document.querySelector('.snb-est');
  return {bars: Array.from((comp || {}).x || []), compute: Array.from((comp || {}).y || []),
          estimate_s: est ? Number(est.dataset.stepS) : null,
          text: Array.from(document.querySelectorAll('.jp-OutputArea-output')).map(o => o.textContent).join(' ')};
}"""


@pytest.fixture(params=["msprof", "own"])
def lab_imported(request, tmp_path_factory):
    tmp = tmp_path_factory.mktemp(f"lab_imported_{request.param}")
    cell = CELL if request.param == "msprof" else OWN
    with _jupyter_lab(tmp, json.dumps(notebook(cell)), _lab_env(tmp, "on")) as lb: yield dict(lb, kind=request.param)


def test_imported_run_in_the_dashboard(lab_imported):
    "The step trace CSV of an Ascend run (4 ranks, its config given) and this project's own traced run (run --profile-trace)."
    from playwright.sync_api import sync_playwright
    lab = lab_imported
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        page = browser.new_page(viewport={"width": 1400, "height": 2400})
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        try:
            _open_and_run_all(page, lab, ".snb-dashboard .snb-live .js-plotly-plot", timeout_ms=400_000)
            page.click(".snb-start")
            page.wait_for_selector(".snb-run-status[data-status='done']", timeout=120_000)
            page.wait_for_function("""() => { const gd = document.querySelector('.snb-live .js-plotly-plot');
                const c = gd && gd.data.find(t => t.name === 'compute'); return c && Array.from(c.x || []).includes('estimate'); }""",
                                   timeout=60_000)      # the last redraw lands (the page is busy on a loaded machine)
            got = page.evaluate(_LIVE_JS)
            page.screenshot(path=str(ARTIFACTS / f"browser_imported_{lab['kind']}.png"), full_page=True)
        finally:
            browser.close()
    print("imported run in the browser:", json.dumps({k: v for k, v in got.items() if k != "text"}))
    assert "estimate" in got["bars"] and len(got["bars"]) >= 5, got["bars"]     # four ranks (or their stage) and the estimate
    assert all(v > 0 for v in got["compute"]), got                               # every rank's compute drawn, and the estimate's
    assert got["estimate_s"] and got["estimate_s"] > 0, got
    label = "imported mindspeed-llm" if lab["kind"] == "msprof" else "imported supernode_nb"
    assert "imported run" in got["text"] and label in got["text"], got["text"][:500]
    assert not errors, errors
