"""The dashboard's run path with real ranks: `RunController` + a runtime launcher (`LocalLauncher`: the runner on
supervised local processes; `ClusterLauncher`: ipyparallel engines) — a run streams every rank's records, a stop ends
it, a killed rank is named, a fault injected from the dashboard is reported, and nothing is left running; the
dashboard's live figure fills for every rank; the doctor tab runs."""
import os, signal, time
from pathlib import Path
import pytest
from supernode_nb.ui.dashstate import DashboardState
from supernode_nb.ui.controller import RunController
from supernode_nb.runtime.supervise import LocalLauncher
from procs import descendants

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]




def _alive(pids) -> list[int]:
    "Live processes among `pids`, leaving out the ranks' forkserver and its resource tracker (one per process, kept)."
    out = []
    for p in pids:
        try:
            st = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[0]
            if b"multiprocessing" in Path(f"/proc/{p}/cmdline").read_bytes(): continue
        except OSError: continue
        if st != "Z": out.append(p)
    return out


def _wait_gone(before: set, timeout=10.0) -> list[int]:
    "Processes started by this test that are still alive after `timeout` s."
    deadline = time.monotonic() + timeout
    while True:
        left = _alive(set(descendants(os.getpid())) - before)
        if not left or time.monotonic() > deadline: return left
        time.sleep(0.1)


def _wait(cond, timeout, step=0.02):
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline: return False
        time.sleep(step)
    return True


def test_run_streams_every_rank_and_finishes():
    before = set(descendants(os.getpid()))
    s = DashboardState(world=4, tp=2, steps=3)
    rc = RunController(s, LocalLauncher(), interval=0.05).start()
    assert rc.join(180), "run did not finish"
    assert s.status == "done", s.failure
    assert rc.log.complete_steps() == [0, 1, 2]
    for r in range(4): assert rc.log.series("wall_s", r)[0] == [0, 1, 2]
    assert rc.result["losses"] == pytest.approx(rc.log.loss()[1], rel=1e-6)
    b = rc.log.breakdown()
    assert all(v > 0 for v in b["compute"]) and all(v > 0 for v in b["comm tp"])     # tp=2: exposed tp comm measured
    print(f"start -> first record {rc.first_record_s:.2f} s")
    assert not _wait_gone(before)


def test_stop_ends_the_run_and_leaves_nothing():
    before = set(descendants(os.getpid()))
    s = DashboardState(world=2, steps=10_000)
    rc = RunController(s, LocalLauncher(), interval=0.05).start()
    assert _wait(lambda: rc.log is not None and len(rc.log) >= 2, 120), s.status
    t0 = time.monotonic(); rc.stop()
    assert rc.join(30)
    assert s.status == "stopped" and time.monotonic() - t0 < 10
    assert {v["state"] for v in s.rank_states.values()} == {"stopped"}
    assert not _wait_gone(before)


def test_killed_rank_is_named_with_its_layer():
    before = set(descendants(os.getpid()))
    s = DashboardState(world=2, steps=10_000)
    rc = RunController(s, LocalLauncher(), interval=0.05).start()
    assert _wait(lambda: rc.log is not None and len(rc.log.complete_steps()) >= 2, 120), s.status
    victim_rank = 1
    t0 = time.monotonic(); os.kill(rc.handle.procs[victim_rank].pid, signal.SIGKILL)     # the LocalRun's rank process
    assert rc.join(60), "the failure was not reported"
    dt = time.monotonic() - t0
    assert s.status == "failed"
    assert s.failure["rank"] == victim_rank, s.failure
    assert s.failure["layer"] == "scheduling & orchestration" and "killed by SIGKILL" in s.failure["message"], s.failure
    assert "last op" in s.failure["message"], s.failure                     # what it was doing (the fault report)
    assert s.rank_states[victim_rank]["state"] == "failed"
    print(f"killed rank reported after {dt:.2f} s: {s.failure}")
    assert dt < 15                                                         # seconds, not a group timeout
    assert not _wait_gone(before)


def test_dashboard_live_figure_fills_for_every_rank():
    from supernode_nb.ui.widgets import Dashboard, _trace
    before = set(descendants(os.getpid()))
    d = Dashboard(world=2, steps=3, debounce=0, interval=0.05, warm=False)
    from supernode_nb.foundation.config import DEFAULT_GLOBAL_BATCH
    d.picker.controls["pp"].value = 2                               # dp2 -> pp2: the default batch, one sequence a micro-batch
    assert (d.state.pp, d.state.dp, d.state.microbatches) == (2, 1, DEFAULT_GLOBAL_BATCH)
    d.run.start_btn.click()
    assert d.controller.join(180) and d.state.status == "done", d.state.failure
    time.sleep(0.2)
    for r in range(2): assert list(_trace(d.live.fig, f"rank {r}").x) == [0, 1, 2]
    bub = _trace(d.live.fig, "bubble").y
    assert len(bub) == 3 and bub[-1] > 0                           # the estimate's bar: a pipeline has a bubble
    assert d.live.redraws >= 1 and 'data-status="done"' in d.run.status.value
    assert d.log.entries == []
    d.close()
    assert not _wait_gone(before)


def test_doctor_tab_reports():
    from supernode_nb.ui.widgets import DoctorView
    s = DashboardState(world=2)
    dv = DoctorView(s)
    dv.run(wait=True)
    assert dv.report is not None and {c.layer for c in dv.report.checks} >= {"model", "framework", "communication"}
    checks = {(c.layer, c.name): c for c in dv.report.checks}
    assert checks[("communication", "link setup")].verdict == "ok"     # the view's doctor joined its 2 local ranks
    assert checks[("framework", "strategy")].verdict == "ok"           # dp over 2 ranks: a layout the engine runs
    assert dv.out.value == dv.report.to_html() and f">{dv.report.verdict}<" in dv.out.value   # the view shows that report


def test_run_on_an_ipyparallel_cluster():
    from supernode_nb.runtime.cluster import Cluster
    from supernode_nb.runtime.cluster import ClusterLauncher
    before = set(descendants(os.getpid()))
    s = DashboardState(world=2, steps=3)
    with Cluster(2, backend="gloo", timeout=20) as cl:
        rc = RunController(s, ClusterLauncher(cl), interval=0.05).start()
        assert rc.join(180), "run did not finish"
        assert s.status == "done", s.failure
        assert rc.log.complete_steps() == [0, 1, 2] and rc.result["losses"] == pytest.approx(rc.log.loss()[1], rel=1e-6)
        s2 = DashboardState(world=2, steps=100_000)
        rc2 = RunController(s2, ClusterLauncher(cl), interval=0.05).start()
        assert _wait(lambda: rc2.log is not None and len(rc2.log) >= 2, 120), s2.status
        rc2.stop(); assert rc2.join(60)
        assert s2.status == "stopped"
    assert not _wait_gone(before, timeout=15)


def test_dashboard_runs_are_archived(tmp_path, monkeypatch):
    "Every run is recorded — the dashboard's as well as the command line's."
    monkeypatch.setenv("SUPERNODE_NB_ARCHIVE", "on"); monkeypatch.setenv("SUPERNODE_NB_HOME", str(tmp_path))
    from supernode_nb.foundation.store import Archive
    from supernode_nb.ui.widgets import LiveView
    s = DashboardState(world=2, steps=2)
    rc = RunController(s, LocalLauncher(), interval=0.05)
    live = LiveView(s, rc)
    rc.start(); live.reset(rc)                                  # as the dashboard's run button does
    assert rc.join(120) and s.status == "done"
    runs = Archive().list_runs()
    assert len(runs) == 1 and runs[0].outcome == "ok" and runs[0].label == "dashboard"
    assert len(runs[0].measured["losses"]) == 2
    est = runs[0].estimate                                      # the estimate shown beside the run, kept with it
    assert est["step_time_s"] == pytest.approx(live.idle_step_s) and est["profile"].startswith("none")   # no profile here
    assert [p["id"] for p in Archive().accuracy_pairs()] == [runs[0].id]   # a predicted-vs-measured pair for the error band


def test_fault_injected_from_the_dashboard_is_reported():
    "Chaos testing from the dashboard: the controller's fault (here rank 1 exits at step 1) ends the run, named."
    before = set(descendants(os.getpid()))
    s = DashboardState(world=2, steps=6)
    rc = RunController(s, LocalLauncher(), interval=0.05, fault={"rank": 1, "step": 1, "kind": "exit"}).start()
    assert rc.join(120), "the failure was not reported"
    assert s.status == "failed" and s.failure["rank"] == 1, s.failure
    assert "exited with code 3" in s.failure["message"], s.failure
    assert not _wait_gone(before)


def test_dashboard_runs_on_the_cluster_it_starts():
    "The run panel's 'run on' choice: the same dashboard run on ipyparallel engines it starts; close() stops them."
    from supernode_nb.ui.widgets import Dashboard
    from supernode_nb.runtime.cluster import ClusterLauncher
    before = set(descendants(os.getpid()))
    d = Dashboard(world=2, steps=3, debounce=0, interval=0.05, warm=False)
    d.run.where.where.value = "ipyparallel cluster"
    d.run.start_btn.click()
    assert isinstance(d.controller.launcher, ClusterLauncher) and d.controller.launcher.cluster.n == 2
    assert d.controller.join(180) and d.state.status == "done", d.state.failure
    assert d.controller.log.complete_steps() == [0, 1, 2]
    local = Dashboard(world=2, steps=3, debounce=0, interval=0.05, warm=False)
    local.run.start_btn.click(); assert local.controller.join(180) and local.state.status == "done"
    assert d.controller.result["losses"] == pytest.approx(local.controller.result["losses"], rel=1e-6)   # same run, either launcher
    d.close(); local.close()
    assert d.run.where._cluster is None
    assert not _wait_gone(before, timeout=20)
