"""The estimate against measured steps of `supernode-nb run` on this machine (the README's "This machine").

Scores only layouts no calibration probe ran: `calibrate` runs one rank of tiny-gpt (its per-step cost) and tiny-gpt at
tp2 and dp2·tp2 (the ratio of a real step's tp waits to their price), so `runtime.accuracy.probe_free` leaves out every
tiny-gpt layout at those degrees, whatever its batch, and the JSON lists them (`settings.probed_left_out`);
`--include-probed` scores them too.

Calibrates this machine into a profile (`runtime.calibrate.calibrate`: matmul rate, per-operator overhead, executor
costs, the per-operator cost per token carried, share of a core per world size, gloo alpha-beta and hand-off latency per
world x group size), then for every
layout of `runtime.accuracy.LAYOUTS` (>= 12: dense and MoE, pp with m = 1..8, tp, cp, dp, ZeRO-1/2/3, recompute, SP; tiny
models, <= 8 ranks) predicts the step breakdown with `costmodel.estimate(profile=...)` and measures it: medians over steps, then the
median over `--repeats` interleaved repeats. Prints one JSON document: per layout predicted / measured step and
parts (ms) and errors — predicted from the profile (with `--probe`, scaled to the machine's speed just before each
run: the calibration's reference forward + backward timed again), and from the first profile alone; median / max
|step error|; median |error| per part; Kendall tau between predicted and
measured steps; whether the predicted-best layout (tokens/s, per model) is within 10 % of the measured best; and
the load average (the machine is shared: read the errors beside it).

Each round of repeats after the first is priced with a calibration made just before it (this machine's speed drifts
by up to 1.8x over minutes, and a calibration is a snapshot of one phase); `--no-recalibrate` prices every run with
the first. The first calibration alone is reported beside it (`profile_only`). Its JSON keeps that calibration, so a
run saved under `benchmarks/results/` can price any later model on the same measurements: `benchmarks/reprice.py`.

With `--max-repeats N` (default 5), a layout whose runs still differ by more than `--unstable-pct` (default 50 %:
slowest / fastest - 1) after the first rounds gets further interleaved rounds, up to N runs.

    python benchmarks/calibrate.py [--repeats 3] [--max-repeats 5] [--steps 8] [--skip 2] [--layouts "dp2,cp2"] [--quick]
                                   [--no-recalibrate] [--include-probed]
"""
import argparse, json, math, os, platform, statistics, subprocess, sys, time
import torch
from supernode_nb.runtime.calibrate import calibrate
from supernode_nb.runtime.accuracy import LAYOUTS, kendall_tau, local_check, probe_free, resolve_layouts, summary


def _uptime() -> str:
    try: return subprocess.run(["uptime"], capture_output=True, text=True, timeout=5).stdout.strip()
    except Exception: return "load average: " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


def _commit():
    "The tree's commit (with '+' when it has uncommitted changes), so a stored run says which model priced it."
    git = lambda *a: subprocess.run(
        ["git", *a], capture_output=True, text=True, timeout=10, cwd=os.path.dirname(os.path.abspath(__file__))
    ).stdout.strip()
    try: return (git("rev-parse", "--short", "HEAD") + ("+" if git("status", "--porcelain", "--untracked-files=no") else "")) or None
    except Exception: return None


def _r(x, k=3):
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else round(float(x), k)


def _best(df, col):
    "Per model: is the layout with the best predicted tokens/s within 10 % of the measured best?"
    st = df[df.part == "step"].copy()
    st["tps_pred"], st["tps_meas"] = st.gbs / st.predicted_s, st.gbs / st.measured_s
    out = {}
    for model, g in st.groupby("model"):
        if len(g) < 2: continue
        pick, best = g.loc[g.tps_pred.idxmax()], g.tps_meas.max()
        out[model] = {"predicted_best": pick.layout, "measured_best": g.loc[g.tps_meas.idxmax()].layout,
                      "pick_vs_best_pct": _r(100 * (pick.tps_meas / best - 1), 1), "within_10pct": bool(pick.tps_meas >= 0.9 * best)}
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--max-repeats", type=int, default=5, help="up to this many runs for a layout whose runs disagree")
    ap.add_argument("--unstable-pct", type=float, default=50.0, help="... by more than this (slowest / fastest - 1, %%)")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--skip", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="calibrate with --quick")
    ap.add_argument("--probe", action="store_true", help="scale the profile by a speed probe before each run")
    ap.add_argument("--recalibrate", action=argparse.BooleanOptionalAction, default=True,
                    help="a fresh calibration before each round of repeats after the first (default: on)")
    ap.add_argument("--layouts", default=None, help=f"comma-separated names from: {', '.join(LAYOUTS)}")
    ap.add_argument("--include-probed", action="store_true",
                    help="also score the layouts the calibration itself runs (its one-rank step and tp wait probes)")
    a = ap.parse_args(argv)
    max_repeats = max(a.max_repeats, a.repeats)
    L = resolve_layouts(a.layouts.split(",") if a.layouts else None)
    L, probed = (L, []) if a.include_probed else probe_free(L)   # the exam holds no layout a calibration probe ran
    if not L: ap.error(f"every layout asked for is one a calibration probe runs ({', '.join(probed)}): add --include-probed")
    up0, t0 = _uptime(), time.monotonic()
    cal = lambda: calibrate(quick=a.quick, progress=lambda s: print(s, file=sys.stderr, flush=True))
    prof = cal()
    t_cal = time.monotonic() - t0
    progress = lambda n, r, m: print(f"{n} #{r}: {m['step_s'] * 1e3:.1f} ms (load {m['load_avg']})", file=sys.stderr, flush=True)
    df = local_check(L, prof, repeats=a.repeats, steps=a.steps, skip=a.skip, progress=progress, probe=a.probe,
                     recalibrate=cal if a.recalibrate else None, max_repeats=max_repeats, unstable_pct=a.unstable_pct)
    s = summary(df)
    ae = s.step_error_pct.abs()
    parts = df[df.part != "step"].copy()
    parts["kind"] = parts.part
    per_part = {k: {"median_abs_error_pct": _r(g.error_pct.abs().median(), 1), "n": len(g),
                    "median_signed_error_pct": _r(g.error_pct.median(), 1)} for k, g in parts.groupby("kind")}
    st = df[df.part == "step"]
    out = {
        "machine": {
            "cpus": os.cpu_count(),
            "cores": prof.devices,
            "torch": torch.__version__,
            "python": platform.python_version(),
            "uptime_before": up0,
            "uptime_after": _uptime(),
            "commit": _commit(),
            "calibrate_s": round(t_cal, 1),
            "sweep_s": round(time.monotonic() - t0, 1),
        },
        "settings": {
            "repeats": a.repeats,
            "max_repeats": max_repeats,
            "unstable_pct": a.unstable_pct,
            "runs": df.attrs["runs"],
            "steps": a.steps,
            "skip": a.skip,
            "threads_per_rank": 1,
            "calibrations": df.attrs["calibrations"],
            "scored": "every layout asked for"
            if a.include_probed
            else "layouts no calibration probe ran (runtime.accuracy.probe_free: not tiny-gpt at the degrees of "
            "calibrate.probed_layouts, whatever the batch)",
            "probed_left_out": probed,
            "measured": "median over interleaved repeats of (median over steps of the slowest rank's wall; rank-mean parts)",
            "predicted_by": f"costmodel.estimate(profile={df.attrs['profile']}) via runtime.accuracy.predict"
            + (", scaled by a speed probe (the calibration's reference forward+backward timed again) before each run" if a.probe else "")
            + (
                ", each round after the first by a calibration made just before it; a layout's prediction the median of its runs'"
                if a.recalibrate
                else ""
            ),
        },
        "profile": {k: v for k, v in prof.to_dict().items() if k not in ("detail", "links")} | {"links": prof.links},
        "summary": {
            "layouts": len(s),
            "step_abs_error_pct": {"median": _r(ae.median(), 1), "max": _r(ae.max(), 1)},
            "within_10pct": int((ae <= 10).sum()),
            "within_25pct": int((ae <= 25).sum()),
            "kendall_tau": _r(kendall_tau(list(st.predicted_s), list(st.measured_s)), 3),
            "best_pick": _best(df, "predicted_s"),
            "per_part": per_part,
            "load_avg_median": _r(st.load_avg.median(), 2),
            "failed_runs": df.attrs["failed"],
            "unmeasured": df.attrs["unmeasured"],
        },
    }
    pe = s.profile_only_error_pct.abs()
    out["summary"]["profile_only"] = {"step_abs_error_pct": {"median": _r(pe.median(), 1), "max": _r(pe.max(), 1)},
                                      "kendall_tau": _r(kendall_tau(list(st.profile_only_s), list(st.measured_s)), 3),
                                      "note": "the first calibration alone, without the speed probe or later calibrations"}
    if a.probe:   # the same runs priced without the probe: what the probe changed
        ue = s.unprobed_error_pct.abs()
        out["summary"]["unprobed"] = {"step_abs_error_pct": {"median": _r(ue.median(), 1), "max": _r(ue.max(), 1)},
                                      "within_25pct": int((ue <= 25).sum()),
                                      "kendall_tau": _r(kendall_tau(list(st.unprobed_s), list(st.measured_s)), 3),
                                      "note": "the same runs and calibrations, without the speed probe's scaling"}
    out["summary"]["slowdown_median"] = _r(st.slowdown.median(), 2)
    out["layouts"] = {}
    for name, g in df.groupby("layout", sort=False):
        r0 = g[g.part == "step"].iloc[0]
        out["layouts"][name] = {
            "model": r0.model,
            "world": int(r0.world),
            "load_avg": _r(r0.load_avg, 2),
            "runs": int(r0.repeats),
            "step_spread_pct": _r(r0.step_spread_pct, 1),
            "slowdown": _r(r0.slowdown, 2),
            "parts": {
                r.part: {
                    "predicted_ms": _r(r.predicted_s * 1e3),
                    "measured_ms": _r(r.measured_s * 1e3),
                    "error_pct": _r(r.error_pct, 1),
                    "profile_only_ms": _r(r.profile_only_s * 1e3),
                    "unprobed_ms": _r(r.unprobed_s * 1e3),
                }
                for r in g.itertuples()
            },
        }
    print(json.dumps(out, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()
