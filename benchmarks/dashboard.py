"""The dashboard's latencies, without a browser: what a click costs.

- `valid_choices`: recomputing every control's valid options (run on every settled change of the pick), for a
  local pick and for a 384- and an 8,192-device topology;
- a settled change of a degree with every view attached (picker, placement, schedule, estimate), per topology;
- the dashboard's estimate of each run (with this machine's profile when the archive has one) beside its measured
  step (median over steps, first left out, of the slowest rank's wall time): error %;
- start -> first record and start -> done of a real run (`RunController` + `LocalLauncher`: supernode_nb.runtime.runner on
  supervised local processes started from a forkserver, never by fork), for a few layouts; `first_run` is the first
  run in a fresh process (the forkserver starts and imports torch, torch._dynamo and the runner once), the rest reuse it.

Times in seconds: median (min, max) of `--repeat` runs. The browser test (tests/test_browser.py) adds the page:
it writes artifacts/browser_timings.json with the time from the click on "start" to the first point in the chart.
Prints one JSON object. Run: `python benchmarks/dashboard.py [--repeat 3]`.

`--world 384,2048,8192` measures the live view at supernode scale instead, on replayed records (`dashstate.synthetic_records`,
one rank planted slow), one JSON line per world: `update_ms` (one `dashfigures.update_live` into a `FigureWidget` after a
new step arrived: median, min, max of `--repeat`; wall clock, and `update_cpu_ms`: this process's CPU time, what the update
costs apart from other processes' share of a loaded host), `redraw_ms` (the whole `LiveView.redraw`: the figure, the slowest ranks,
the node map and planes, the drill-down), `traces` (the figure's trace count), `payload_kb` (the update message the widget
sends the browser: numpy arrays at their byte size, the rest as JSON) and the load average when measured.
"""
import argparse, json, os, platform, statistics, time
import numpy as np


def stats(xs):
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "n": len(xs)}


def estimate_error(state, log) -> dict:
    "The dashboard's estimate of the pick (profile='auto', as the live view shows it) beside the run's measured step."
    from supernode_nb.ui.panels import estimate_for
    est = estimate_for(state)
    worst = sorted(max(r["wall_s"] for r in log.steps[s].values()) for s in log.complete_steps()[1:])
    meas = worst[len(worst) // 2]
    return {"estimate_s": est.step_time_s, "measured_s": meas, "error_pct": 100 * (est.step_time_s / meas - 1), "profile": est.profile}


SCALE_PICKS = {384: dict(topology="cloudmatrix384", topo_size=1, tp=8, pp=4),
               2048: dict(topology="dgx-h100-superpod", topo_size=256, tp=8, pp=8),
               8192: dict(topology="dgx-h100-superpod", topo_size=1024, tp=8, pp=8)}


def msg_bytes(x) -> int:
    "Bytes of a widget message: numpy arrays at their buffer size (they travel as binary buffers), the rest as JSON."
    if isinstance(x, np.ndarray): return x.nbytes
    if isinstance(x, dict): return 2 + sum(len(json.dumps(str(k))) + 1 + msg_bytes(v) + 1 for k, v in x.items())
    if isinstance(x, (list, tuple)): return 2 + sum(msg_bytes(v) + 1 for v in x)
    return len(json.dumps(x, default=str))


def live_at_scale(world: int, steps: int, repeat: int) -> dict:
    "One world's live view on replayed records: update and redraw times, traces, the update message's size."
    from supernode_nb.ui.dashstate import DashboardState, RunLog, synthetic_records
    from supernode_nb.ui.controller import RunController, ReplayLauncher
    from supernode_nb.ui.widgets import LiveView
    from supernode_nb.ui.dashfigures import update_live
    kw = SCALE_PICKS.get(world) or dict(topology="dgx-h100-superpod", topo_size=-(-world // 8), tp=8, pp=8)
    st = DashboardState(world=world, steps=steps + 2 * repeat, **kw)
    t = time.perf_counter(); st.placement(); place_s = time.perf_counter() - t
    ctl = RunController(st, ReplayLauncher()); lv = LiveView(st, ctl); lv.reset()
    recs = synthetic_records(world, steps + 2 * repeat, slow={world // 5: 2.0})
    ctl.log = RunLog(world)
    for r in recs[:steps * world]: ctl.log.add(r)
    sizes = []
    lv.fig.observe(lambda ch: ch["new"] and sizes.append(msg_bytes(ch["new"])), "_py2js_update")
    upd, red, size, cpu = [], [], [], []
    arrive = lambda i: [ctl.log.add(r) for r in recs[(steps + i) * world:(steps + i + 1) * world]]   # step i arrives
    for i in range(repeat):
        arrive(2 * i)
        t, c = time.perf_counter(), time.process_time()
        update_live(lv.fig, ctl.log, lv.estimate, rm=lv.rm, by="stage")
        upd.append(time.perf_counter() - t); cpu.append(time.process_time() - c)
        size.append(sizes[-1])
        arrive(2 * i + 1); lv.redraw(force=True); red.append(lv.redraw_s[-1])
    ms = lambda xs: {"median": round(1e3 * statistics.median(xs), 1), "min": round(1e3 * min(xs), 1), "max": round(1e3 * max(xs), 1)}
    return {"world": world, "update_ms": ms(upd), "update_cpu_ms": ms(cpu), "redraw_ms": ms(red), "traces": len(lv.fig.data),
            "payload_kb": round(statistics.median(size) / 1024, 1), "steps": steps + 2 * repeat,
            "slowest_named": lv.stats.slow[0]["rank"], "planted": world // 5, "placement_s": round(place_s, 2),
            "figure": "one update = every trace of the figure refilled from numpy arrays inside one batch_update",
            "pick": kw, "load": os.getloadavg()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--world", type=str, default="", help="comma-separated worlds, e.g. 384,2048,8192: the live view at scale only")
    a = ap.parse_args()
    if a.world:
        for w in [int(x) for x in a.world.split(",")]:
            print(json.dumps(live_at_scale(w, max(a.steps, 30), max(a.repeat, 5))), flush=True)
        return
    out = {"machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "load": os.getloadavg()}}

    t0 = time.perf_counter()
    from supernode_nb.ui.dashstate import DashboardState, valid_choices, warm_imports
    from supernode_nb.ui.controller import RunController
    from supernode_nb.runtime.supervise import LocalLauncher
    from supernode_nb.ui.panels import StrategyPicker, PlacementView, ScheduleView, EstimateView
    out["import_s"] = time.perf_counter() - t0

    picks = {"local 4": dict(world=4), "cloudmatrix384 x1, tp8 pp4": dict(topology="cloudmatrix384", topo_size=1, world=384, tp=8, pp=4),
             "dgx-h100 1024 nodes, tp8 pp8": dict(topology="dgx-h100-superpod", topo_size=1024, world=8192, tp=8, pp=8)}
    out["valid_choices_s"], out["degree_change_all_views_s"] = {}, {}
    for name, kw in picks.items():
        s = DashboardState(**kw)
        f = s.fields()
        ts = []
        for _ in range(a.repeat):
            t = time.perf_counter(); valid_choices(f, s.max_world); ts.append(time.perf_counter() - t)
        out["valid_choices_s"][name] = stats(ts)
        views = [StrategyPicker(s), PlacementView(s, debounce=0), ScheduleView(s, debounce=0), EstimateView(s, debounce=0)]
        ts = []
        for i in range(a.repeat):
            t = time.perf_counter(); s.pp = 2 if s.pp != 2 else 1; ts.append(time.perf_counter() - t)
        out["degree_change_all_views_s"][name] = stats(ts)
        assert all(not getattr(v, "log", None) or not v.log.entries for v in views), [v.log.entries for v in views]

    t = time.perf_counter(); warm_imports(); out["warm_imports_s"] = time.perf_counter() - t   # starts the forkserver (returns at once)
    s = DashboardState(steps=a.steps, world=2)
    t = time.monotonic(); rc = RunController(s, LocalLauncher(), interval=0.02).start()
    assert rc.join(300) and s.status == "done", (s.status, s.failure)
    out["first_run"] = {"layout": "dp2", "start_to_first_record_s": rc.first_record_s, "start_to_done_s": time.monotonic() - t,
                        "load": os.getloadavg()}
    runs = {
        "dp2": dict(world=2),
        "tp2 dp2": dict(world=4, tp=2),
        "dp2 pp2": dict(world=4, pp=2),
        "tiny-moe ep2 dp2": dict(model="tiny-moe", world=2, ep=2),
    }
    out["run"] = {}
    for name, kw in runs.items():
        first, done, errs = [], [], []
        for _ in range(a.repeat):
            s = DashboardState(steps=a.steps, **kw)
            t = time.monotonic(); rc = RunController(s, LocalLauncher(), interval=0.02).start()
            assert rc.join(300) and s.status == "done", (name, s.status, s.failure)
            done.append(time.monotonic() - t); first.append(rc.first_record_s)
            errs.append(estimate_error(s, rc.log))
        out["run"][name] = {"start_to_first_record_s": stats(first), "start_to_done_s": stats(done), "steps": a.steps,
                            "estimate_vs_measured": errs[-1], "estimate_error_pct": stats([e["error_pct"] for e in errs]),
                            "load": os.getloadavg()}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
