"""The dashboard in a real browser: JupyterLab + headless Debian chromium driven by Playwright.

Starts JupyterLab on 127.0.0.1 with a token and temporary Jupyter dirs (news popup off), opens a copy of
examples/dashboard.ipynb, waits for the kernel to be idle (polling /api/kernels: the toolbar's indicator lies
early), runs all cells, runs the default pick and dp2·tp2 (changing a degree) once each (SNB_BROWSER_ROUNDS=N:
N interleaved rounds, each priced by a calibration made just before it); checks that the live chart gains points for
every rank, that each run finishes, and that the page shows the dashboard's estimate (with this machine's profile,
calibrated into the test's own archive) and its running error against the measured mean step, the same error this test
reads off the page's own traces. How close the estimate is (a goal, not a test on a shared machine) is recorded in
artifacts/browser_timings.json and measured by benchmarks/dashboard.py. Saves a
screenshot to artifacts/ and prints the time from the click on "start" to the first live point. Skipped only when
/usr/bin/chromium is absent.
"""
import contextlib, json, os, shutil, signal, socket, subprocess, sys, time, urllib.request, secrets
from pathlib import Path
import pytest
from procs import descendants
from supernode_nb.runtime.probes import settle

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run", "--disable-quic"]
ARTIFACTS = ROOT / "artifacts"
NOTEBOOK = Path(os.environ.get("SNB_BROWSER_NOTEBOOK", ROOT / "examples" / "dashboard.ipynb"))   # e.g. nbs/60_ui/62_widgets.ipynb
PICKS = (("default (dp4)", 1), ("dp2·tp2", 2))   # the dashboard's default pick, then tp 2 on the same 4 ranks
ROUNDS = int(os.environ.get("SNB_BROWSER_ROUNDS", "1"))   # interleaved runs of each pick (the timings record the median)
STEPS = 60   # long enough (several seconds at ~0.1 s a step) that the kernel is sampled idle while the run streams

# Outside CI a missing browser skips with the reason; in CI (.ci/run sets SNB_REQUIRE_BROWSER=1) it fails.
if not os.path.exists(CHROMIUM) and os.environ.get("SNB_REQUIRE_BROWSER") == "1":
    raise RuntimeError(f"{CHROMIUM} is absent but SNB_REQUIRE_BROWSER=1: apt-get install -y chromium chromium-driver")
pytestmark = [pytest.mark.slow, pytest.mark.skipif(not os.path.exists(CHROMIUM),
                                reason=f"{CHROMIUM} is absent: apt-get install -y chromium chromium-driver (never `playwright install`)")]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0)); return s.getsockname()[1]


def _get(url: str, timeout: float = 5.0):
    with urllib.request.urlopen(url, timeout=timeout) as r: return json.loads(r.read() or b"null")




@contextlib.contextmanager
def _jupyter_lab(tmp: Path, notebook: Path | str, env: dict):
    "JupyterLab on 127.0.0.1 with a token, temporary Jupyter dirs (news popup off) and `notebook` as dashboard.ipynb; stopped after."
    root = tmp / "root"; root.mkdir()
    if isinstance(notebook, Path): shutil.copy(notebook, root / "dashboard.ipynb")
    else: (root / "dashboard.ipynb").write_text(notebook)
    labconfig = tmp / "config" / "labconfig"; labconfig.mkdir(parents=True)
    (labconfig / "default_setting_overrides.json").write_text(json.dumps(
        {"@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": False}}))
    port, token = _free_port(), secrets.token_hex(16)
    jupyter = Path(sys.executable).parent / "jupyter"
    logf = open(tmp / "lab.log", "w")
    proc = subprocess.Popen([str(jupyter), "lab", "--no-browser", "--allow-root", "--ip=127.0.0.1", f"--port={port}",
                             f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}"],
                            env=env, stdout=logf, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try: _get(f"{base}/api/status?token={token}"); break
        except Exception:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"JupyterLab did not start: {(tmp / 'lab.log').read_text()[-2000:]}")
            time.sleep(0.3)
    try: yield dict(base=base, token=token, proc=proc, log=tmp / "lab.log", env=env)
    finally:
        logf.close()
        _stop_lab(base, token, proc)


def _stop_lab(base: str, token: str, proc):
    "Shut down: kernels first (they may hold rank processes), then the server, then anything left in its session."
    try:
        for k in _get(f"{base}/api/kernels?token={token}"):
            urllib.request.urlopen(urllib.request.Request(f"{base}/api/kernels/{k['id']}?token={token}", method="DELETE"), timeout=5)
    except Exception: pass
    left = descendants(proc.pid)
    proc.send_signal(signal.SIGTERM)
    try: proc.wait(15)
    except subprocess.TimeoutExpired: proc.kill(); proc.wait(5)
    for pid in left:
        try: os.kill(pid, signal.SIGKILL)
        except ProcessLookupError: pass
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(Path(f"/proc/{p}").exists() and "zombie" not in _state(p) for p in left):
        time.sleep(0.2)
    alive = [p for p in left if Path(f"/proc/{p}").exists() and "zombie" not in _state(p)]
    assert not alive, f"processes left running after the test: {alive}"


def _lab_env(tmp: Path, archive: str) -> dict:
    return dict(os.environ, JUPYTER_CONFIG_DIR=str(tmp / "config"), JUPYTER_DATA_DIR=str(tmp / "data"),
                JUPYTER_RUNTIME_DIR=str(tmp / "runtime"), IPYTHONDIR=str(tmp / "ipython"), PYTHONUNBUFFERED="1",
                SUPERNODE_NB_HOME=str(tmp / "home"), SUPERNODE_NB_ARCHIVE=archive)


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("lab")
    env = _lab_env(tmp, "on")     # the test's own archive, never the user's
    cal = _calibrate(env)     # the default calibration (~20 s), as a user runs it first
    with _jupyter_lab(tmp, NOTEBOOK, env) as lb:
        yield dict(lb, calibration=[cal])


def _calibrate(env) -> list[str]:
    "`supernode-nb calibrate --worlds 2,4` into the test's archive (the dashboard prices with the newest profile); what it printed."
    cal = subprocess.run([sys.executable, "-m", "supernode_nb.cli", "calibrate", "--worlds", "2,4"], env=env,
                         capture_output=True, text=True, timeout=600)
    assert cal.returncode == 0, cal.stderr[-2000:]
    return cal.stdout.strip().splitlines()


def _state(pid: int) -> str:
    try: return "zombie" if (Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z") else "alive"
    except OSError: return "gone zombie"


def _wait_kernel_idle(lab, timeout=180):
    "Poll /api/kernels until the notebook's kernel has a connection and is idle (NOTES.md: the UI's indicator lies early)."
    deadline, ks = time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        try: ks = _get(f"{lab['base']}/api/kernels?token={lab['token']}")
        except Exception as e: ks = [{"error": repr(e)}]   # a kernel still starting can make the listing answer 500
        if ks and all(k.get("connections", 0) >= 1 and k.get("execution_state") == "idle" for k in ks): return ks
        time.sleep(0.25)
    raise AssertionError(f"kernel never idle: {ks}")


def _open_and_run_all(page, lab, wait_for: str, timeout_ms: int = 240_000):
    "Open the lab's notebook, wait for its kernel (NOTES.md: idle and connected), Run All Cells, wait for `wait_for`."
    page.goto(f"{lab['base']}/lab/tree/dashboard.ipynb?token={lab['token']}")
    page.wait_for_selector(".jp-NotebookPanel .jp-Cell", timeout=60_000)
    _wait_kernel_idle(lab)
    page.click(".jp-NotebookPanel .jp-Cell")      # focus the notebook, so the Run menu acts on it
    page.click("div.lm-MenuBar-itemLabel:text-is('Run')")
    page.click("li.lm-Menu-item:has-text('Run All Cells')")
    page.wait_for_selector(wait_for, timeout=timeout_ms)   # minutes under a loaded 2-core machine


_POINTS_JS = """() => {
  const live = document.querySelector('.snb-live .js-plotly-plot');
  if (!live) return null;
  const out = {};
  live.querySelectorAll('.scatterlayer .trace').forEach((t) => {
    const name = (t.__data__ && t.__data__[0] && t.__data__[0].trace) ? t.__data__[0].trace.name : null;
    if (name && name.startsWith('rank ')) out[name] = t.querySelectorAll('.point').length;
  });
  return out;
}"""


_STEP_JS = """() => {
  const el = document.querySelector('.snb-live .snb-est'), gd = document.querySelector('.snb-live .js-plotly-plot');
  if (!el || !gd || !gd.data) return null;
  const worst = {};
  gd.data.filter(t => t.type === 'scatter' && t.name && t.name.startsWith('rank ')).forEach(t =>
    Array.from(t.x || []).forEach((s, i) => { worst[s] = Math.max(worst[s] || 0, t.y[i]); }));
  const w = Object.keys(worst).map(Number).sort((a, b) => a - b).slice(1).map(s => worst[s]);   // the first step warms up
  const run = document.querySelector('.snb-live .snb-running');      // what the page itself says of the run so far
  return {estimate_s: parseFloat(el.dataset.stepS), host_load: parseFloat(el.dataset.hostLoad),
          measured_s: w.length ? w.reduce((a, b) => a + b, 0) / w.length : null, steps: w.length,
          shown_error_pct: run && run.dataset.errorPct !== undefined ? parseFloat(run.dataset.errorPct) : null};
}"""


def _run(page, lab):
    "Click start and follow the run to its end: (points per rank trace, s to the first point, kernel idle while running, steps)."
    settle(max_s=30)     # the page has finished rendering (the host mostly idle), as a user looks before clicking
    page.click(".snb-start")
    t_click = time.monotonic()
    page.wait_for_selector(".snb-run-status:not([data-status='done'])", timeout=30_000)   # the previous run's 'done' is gone
    first, pts, idle_while_running = None, None, False
    deadline = t_click + 400
    while time.monotonic() < deadline:
        pts = page.evaluate(_POINTS_JS)
        if first is None and pts and any(v > 0 for v in pts.values()): first = time.monotonic() - t_click
        if first is not None and not idle_while_running and page.locator(".snb-run-status[data-status='running']").count():
            # the kernel is free while the run streams: the click handler returned, the run is in the background
            ks = _get(f"{lab['base']}/api/kernels?token={lab['token']}")
            idle_while_running = all(k.get("execution_state") == "idle" for k in ks)
        done = page.locator(".snb-run-status[data-status='done']").count() > 0
        if page.locator(".snb-run-status[data-status='failed']").count() > 0:
            raise AssertionError("run failed: " + page.locator(".snb-failure").inner_text())
        if done and pts and len(pts) == 4 and all(v >= STEPS for v in pts.values()): break
        time.sleep(0.5)    # the test polls the page gently: its own load would slow the run it measures
    return pts, first, idle_while_running, time.monotonic() - t_click, page.evaluate(_STEP_JS)


def test_dashboard_in_browser(lab):
    from playwright.sync_api import sync_playwright
    ARTIFACTS.mkdir(exist_ok=True)
    timings, acc, runs, idle_while_running = {}, {}, {}, False
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        page = browser.new_page(viewport={"width": 1400, "height": 3000})
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        try:
            t0 = time.monotonic()
            _open_and_run_all(page, lab, ".snb-dashboard .snb-picker select")
            page.wait_for_selector(".snb-valid", timeout=30_000)
            timings["open_to_dashboard_s"] = time.monotonic() - t0

            # fewer steps for the test
            steps = page.locator(".snb-run .widget-inline-hbox").filter(has=page.locator("label", has_text="steps")).locator("input")
            steps.fill(str(STEPS)); steps.press("Enter")

            # the default pick (4 ranks of dp), then tp 1 -> 2 on 4 ranks (dp follows, 4 -> 2), and back: ROUNDS interleaved
            # repeats of each, as benchmarks/calibrate.py measures (this host moves one run's step by ±20 %). Each
            # round is priced with a calibration made just before it: this VM's speed drifts up to 1.8× over minutes, so
            # one calibration is one draw, and the median run is then the median of five calibrations as of five runs
            tp = page.locator(".snb-picker .widget-dropdown").filter(has=page.locator("label", has_text="tp")).locator("select")
            for i in range(ROUNDS):
                if i: lab["calibration"].append(_calibrate(lab["env"]))      # the page idle meanwhile; its estimate reads the newest
                for name, deg in PICKS:
                    if i or deg != 1:
                        tp.select_option(label=str(deg))
                        page.wait_for_selector(f".snb-picker :text('tp({deg}) × cp(1) × dp({4 // deg}) × pp(1) = 4 ranks')", timeout=20_000)
                    pts, first, idle, t, a = _run(page, lab)
                    runs.setdefault(name, []).append(a); timings.setdefault("start_to_done_s", []).append(round(t, 2))
                    timings.setdefault("start_to_first_point_s", []).append(first); idle_while_running |= idle
            page.locator(".snb-live").scroll_into_view_if_needed()
            page.wait_for_timeout(300)
            page.screenshot(path=str(ARTIFACTS / "browser_dashboard.png"), full_page=True)
            assert pts is not None and sorted(pts) == [f"rank {r}" for r in range(4)], pts
            assert all(v == STEPS for v in pts.values()), pts
            assert page.locator(".snb-run-status[data-status='done']").count() == 1
            assert page.locator(".snb-ranks tr[data-state='done']").count() == 4
            assert idle_while_running, "the kernel was never idle while the run streamed"
            timings["kernel_idle_while_running"] = idle_while_running
        finally:
            for k, rs in runs.items():      # each run's error, then the median run: the one the check reads
                for v in rs:
                    if v and v.get("measured_s"): v["error_pct"] = round(100 * (v["estimate_s"] / v["measured_s"] - 1), 1)
                done = sorted((v for v in rs if v and "error_pct" in v), key=lambda v: v["error_pct"])
                acc[k] = dict(done[len(done) // 2], runs=rs, median_of=len(done)) if done else None
            timings["estimate_vs_measured"], timings["load"] = acc, os.getloadavg()
            timings["calibration"] = lab["calibration"]       # the profiles the rounds used, as `calibrate` printed them
            timings["page_errors"] = errors[:5]
            (ARTIFACTS / "browser_timings.json").write_text(json.dumps(timings, indent=1))
            print("browser timings:", json.dumps(timings))
            browser.close()
    assert all(f is not None and f < 60 for f in timings["start_to_first_point_s"]), timings
    for k, rs in runs.items():
        assert len(rs) == ROUNDS, (k, rs)
        for v in rs:   # estimate and measured both shown, every step; priced for the cores the page and its kernel keep busy
            assert v and v["steps"] >= STEPS - 2 and v["estimate_s"] > 0 and v["host_load"] > 0, (k, v)   # (always some)
            # the running error the page shows is the one this test measures from the page's own traces
            assert v["shown_error_pct"] is not None and abs(v["shown_error_pct"] - v["error_pct"]) < 0.2, (k, v)
    for k, v in acc.items():   # measured on the page (the estimate's error is recorded above: a goal, not asserted here)
        assert v and v.get("measured_s"), (k, runs[k])


# ---- the live view at supernode scale (issue 51 §1): 384 replayed ranks, drawn by group, redrawn at >= 1 Hz ----
SCALE_STEPS = 120
SCALE_NOTEBOOK = {
    "cells": [
        {
            "cell_type": "code",
            "execution_count": None,
            "id": "scale384",
            "metadata": {},
            "outputs": [],
            "source": [
                "from supernode_nb.ui.widgets import Dashboard\n",
                "from supernode_nb.ui.controller import ReplayLauncher\n",
                "# replayed records (never results): a step of all 384 ranks every ~0.25 s (the controller's poll + delay),\n",
                "# rank 77 planted slow\n",
                "d = Dashboard(launcher=ReplayLauncher(per_poll=384, delay=0.125, slow={77: 2.0}), topology='cloudmatrix384',\n",
                "              topo_size=1, world=384, tp=8, pp=4,\n",
                f"              steps={SCALE_STEPS}, warm=False)\n",
                "d",
            ],
        }
    ],
    "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}},
    "nbformat": 4,
    "nbformat_minor": 5,
}

_REDRAWS_JS = """() => {   // count the live figure's renders from now on (plotly_afterplot: one per update drawn)
  const gd = document.querySelector('.snb-live .js-plotly-plot');
  window.__snbDraws = [];
  gd.on('plotly_afterplot', () => window.__snbDraws.push(performance.now()));
  return true;
}"""

_SCALE_JS = """() => {
  const gd = document.querySelector('.snb-live .js-plotly-plot');
  const tr = (n) => gd.data.find(t => t.name === n);
  const heat = tr('rank × step'), comp = tr('compute');
  const slow = Array.from(document.querySelectorAll('.snb-slowest tr.snb-slow')).map(r => Number(r.dataset.rank));
  return {traces: gd.data.length, rank_traces: gd.data.filter(t => /^rank \\d+$/.test(t.name || '')).length,
          bars: Array.from(comp.x || []), heat_rows: heat && heat.z ? heat.z.length : 0,
          heat_steps: heat && heat.z && heat.z[0] ? heat.z[0].length : 0,
          slowest: slow, nodes: document.querySelectorAll('.snb-scale .js-plotly-plot').length,
          summary: (document.querySelector('.snb-ranks-summary') || {}).textContent || null, draws: window.__snbDraws || [],
          server_redraws: Number((document.querySelector('.snb-live .snb-perf') || {dataset: {}}).dataset.redraws || 0)};
}"""


@pytest.fixture(scope="module")
def lab_scale(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("lab_scale")
    with _jupyter_lab(tmp, json.dumps(SCALE_NOTEBOOK), _lab_env(tmp, "off")) as lb: yield lb


def test_live_view_at_384_ranks_in_browser(lab_scale):
    "384 replayed ranks drawn by stage with a heatmap and the slowest ranks named; the page redraws at >= 1 Hz while they stream."
    from playwright.sync_api import sync_playwright
    ARTIFACTS.mkdir(exist_ok=True)
    lab, out = lab_scale, {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        page = browser.new_page(viewport={"width": 1400, "height": 3000})
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        try:
            _open_and_run_all(page, lab, ".snb-dashboard .snb-live .js-plotly-plot")
            page.wait_for_selector(".snb-valid", timeout=30_000)
            settle(max_s=30)
            page.evaluate(_REDRAWS_JS)
            page.click(".snb-start"); t_click = time.monotonic()
            page.wait_for_selector(".snb-live .snb-perf", timeout=120_000)     # the first redraw of the run
            t_run, p_run = time.monotonic(), page.evaluate("performance.now()")
            page.wait_for_selector(".snb-run-status[data-status='done']", timeout=300_000)
            t_done, p_done = time.monotonic(), page.evaluate("performance.now()")
            page.wait_for_timeout(1500)       # the last redraw lands
            got = page.evaluate(_SCALE_JS)
            page.locator(".snb-live").scroll_into_view_if_needed()
            page.screenshot(path=str(ARTIFACTS / "browser_live_384.png"), full_page=True)
        finally:
            browser.close()
    draws = got.pop("draws")
    inside = [t for t in draws if p_run <= t <= p_done]     # while the run streamed: its first redraw shown to 'done' shown (page clock)
    rate = len(inside) / ((p_done - p_run) / 1e3) if p_done > p_run else 0.0
    out = dict(
        got,
        redraws=len(draws),
        redraws_while_streaming=len(inside),
        stream_s=round(t_done - t_run, 2),
        start_to_running_s=round(t_run - t_click, 2),
        redraw_hz=round(rate, 2),
        redraw_gaps_ms=[round(b - a) for a, b in zip(draws, draws[1:])][:80],
        page_errors=errors[:5],
        load=os.getloadavg(),
        note="replayed records (dashstate.synthetic_records), never results",
    )
    (ARTIFACTS / "browser_live_384.json").write_text(json.dumps(out, indent=1))
    print("live view at 384 ranks in the browser:", json.dumps({k: v for k, v in out.items() if k != "redraw_gaps_ms"}))
    assert got["bars"] == ["stage 0", "stage 1", "stage 2", "stage 3", "estimate"] or got["bars"][:4] == [f"stage {i}" for i in range(4)], (
        got
    )
    assert got["rank_traces"] == 0 and got["traces"] == 20, got          # no trace per rank: the same figure as at 8,192
    assert got["heat_rows"] == 384 and got["heat_steps"] == min(60, SCALE_STEPS), got     # the last 60 steps
    assert got["slowest"] and got["slowest"][0] == 77, got               # the planted straggler named first
    assert got["nodes"] >= 2 and got["summary"] and "384 ranks" in got["summary"], got
    assert not errors, errors
    # the goal, measured on this page: >= 1 redraw a second while 384 ranks stream (the rate is printed above)
    assert rate >= 1.0, f"the live figure redrew at {rate:.2f} Hz while 384 replayed ranks streamed (goal: >= 1 Hz); {out}"
