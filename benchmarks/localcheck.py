"""The cost model's step estimate against measured steps of `supernode-nb run` on this machine (issue 6, "Local").

Calibrates this machine (`localcheck.calibrate_machine`: matmul rate, per-operator overhead, copy bandwidth, gloo
alpha-beta per world x group size), then for every layout of `localcheck.LAYOUTS` predicts the step breakdown and
runs it (`runner.run`, medians of the steps after the first `--skip`). Prints one JSON document: per layout the
predicted and measured step and parts (ms), the error (predicted / measured - 1, %), the uncorrected cost model's
figure and error, and the load average during the run (`uptime` before and after the whole sweep too). The machine
is shared: read the errors beside the load.

    python benchmarks/localcheck.py [--steps 12] [--skip 2] [--layouts "1 rank,dp2"] [--threads-effect]
"""
import argparse, json, math, os, platform, statistics, subprocess, sys, time
import torch
from supernode_nb.runtime.calibrate import LAYOUTS, calibrate_machine, local_check, measure, needed_links, resolve_layouts, summary


def _uptime() -> str:
    try: return subprocess.run(["uptime"], capture_output=True, text=True, timeout=5).stdout.strip()
    except Exception: return "load average: " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


def _r(x, k=3):
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else round(float(x), k)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--skip", type=int, default=2)
    ap.add_argument("--layouts", default=None, help=f"comma-separated names from: {', '.join(LAYOUTS)}")
    ap.add_argument("--threads-effect", action="store_true",
                    help="also run the 1-rank layout with one intra-op thread per core (runner.run's default in-process)")
    a = ap.parse_args(argv)
    names = a.layouts.split(",") if a.layouts else None
    L = resolve_layouts(names)
    up0, t0 = _uptime(), time.monotonic()
    calib = calibrate_machine(links=needed_links(L))
    progress = lambda n, p, m: print(f"{n}: predicted {p['step_s'] * 1e3:.1f} ms, measured {m['step_s'] * 1e3:.1f} ms "
                                     f"(load {m['load_avg']})", file=sys.stderr, flush=True)
    df = local_check(L, steps=a.steps, skip=a.skip, calib=calib, progress=progress)
    out = {"machine": {"cpus": os.cpu_count(), "cores_used": calib.cores, "torch": torch.__version__, "python": platform.python_version(),
                       "uptime_before": up0, "uptime_after": _uptime(), "sweep_s": round(time.monotonic() - t0, 1)},
           "settings": {"steps": a.steps, "skip": a.skip, "threads_per_rank": 1,
                        "measured": "median over steps of the slowest rank's wall (step) and of the rank-mean of each part"},
           "calibration": {k: (_r(v, 9) if isinstance(v, float) else v) for k, v in calib.to_dict().items()},
           "layouts": {}}
    for name, g in df.groupby("layout", sort=False):
        st = g[g.part == "step"].iloc[0]
        out["layouts"][name] = {
            "model": st.model, "world": int(st.world), "load_avg": _r(st.load_avg, 2), "steps_measured": int(st.steps),
            "step": {"predicted_ms": _r(st.predicted_s * 1e3), "measured_ms": _r(st.measured_s * 1e3), "error_pct": _r(st.error_pct, 1),
                     "costmodel_ms": _r(st.costmodel_s * 1e3), "costmodel_error_pct": _r(st.costmodel_error_pct, 1)},
            "parts": {r.part: {"predicted_ms": _r(r.predicted_s * 1e3), "measured_ms": _r(r.measured_s * 1e3), "error_pct": _r(r.error_pct, 1),
                               "costmodel_ms": _r(r.costmodel_s * 1e3), "costmodel_error_pct": _r(r.costmodel_error_pct, 1)}
                      for r in g[g.part != "step"].itertuples()}}
    s = summary(df)
    ae = s.step_error_pct.abs()
    out["summary"] = {"step_abs_error_pct": {"median": _r(ae.median(), 1), "max": _r(ae.max(), 1), "min": _r(ae.min(), 1)},
                      "costmodel_step_abs_error_pct": {"median": _r(s.costmodel_step_error_pct.abs().median(), 1),
                                                       "max": _r(s.costmodel_step_error_pct.abs().max(), 1)},
                      "mean_abs_part_error_pct_median": _r(s.mean_abs_part_error_pct.median(), 1),
                      "within_25pct": int((ae <= 25).sum()), "within_50pct": int((ae <= 50).sum()), "layouts": len(s)}
    if a.threads_effect:
        m, c = LAYOUTS["1 rank"]
        one = measure(m, c, a.steps, a.skip, threads=1)
        many = measure(m, c, a.steps, a.skip, threads=calib.cores)
        out["threads_effect_1_rank"] = {"threads_1_step_ms": _r(one["step_s"] * 1e3), f"threads_{calib.cores}_step_ms": _r(many["step_s"] * 1e3),
                                        "load_avg": [one["load_avg"], many["load_avg"]]}
    out["machine"]["uptime_after"] = _uptime()
    print(json.dumps(out, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()
