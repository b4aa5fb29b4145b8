"""The cost model of this tree against the steps measured in stored runs of `benchmarks/calibrate.py`. Prints JSON.

Each stored run (`benchmarks/results/calibrate-*.json`) keeps its first calibration (`profile`) and, per layout, the
measured step and parts: medians over interleaved repeats on this 2-core VM. Re-pricing every layout with that profile
by today's `costmodel.estimate` (via `runtime.accuracy.predict`) checks a change to the model against measurements
already made, in seconds, with none of the machine's drift between a calibration and the runs after it that a new
run adds (that drift is in the stored runs themselves, once). Reported per run and pooled: median / max |step error|,
layouts within 25 %, Kendall tau; beside each run, its stored first-calibration figures (`profile_only`) as priced by
the code that made it, so the difference is the change's effect on the same measurements. `by_layout`: each layout's
signed error over the runs (median, min, max), sorted by the median: a term the model lacks shows as a layout priced
on one side in most runs, where the machine's drift between runs scatters to both.

    python benchmarks/reprice.py [FILE ...]
"""
import glob, json, os, statistics, sys, time
from supernode_nb.cost.profile import MachineProfile
from supernode_nb.runtime.accuracy import LAYOUTS, kendall_tau, predict, resolve_layouts

HERE = os.path.dirname(os.path.abspath(__file__))


def _stats(errs: dict) -> dict:
    a = [abs(e) for e in errs.values()]
    return dict(n=len(a), median=round(statistics.median(a), 1), max=round(max(a), 1), within_25pct=sum(x <= 25 for x in a))


def reprice(path: str) -> dict:
    "One stored run re-priced: today's error per layout, its stats, and the stored first-calibration stats beside them."
    d = json.load(open(path))
    prof = MachineProfile.from_dict(d["profile"])
    now, then, pred, meas, missing = {}, {}, [], [], []
    for name, lay in d["layouts"].items():
        if name not in LAYOUTS: missing.append(name); continue
        model, cfg = resolve_layouts([name])[name]
        step = lay["parts"]["step"]
        p, m = 1e3 * predict(model, cfg, prof)["step_s"], step["measured_ms"]
        now[name], pred, meas = round(100 * (p / m - 1), 1), pred + [p], meas + [m]
        if step.get("profile_only_ms") is not None: then[name] = round(100 * (step["profile_only_ms"] / m - 1), 1)
    return dict(run=os.path.basename(path), load_avg_median=d["summary"].get("load_avg_median"), commit=d["machine"].get("commit"),
                now=dict(_stats(now), kendall_tau=round(kendall_tau(pred, meas), 3)), stored_profile_only=_stats(then) if then else None,
                error_pct=now, not_in_layouts=missing)


def by_layout(runs: list) -> dict:
    "Per layout, its signed step error over the re-priced runs: n, median, min, max; the most negative median first."
    errs = {}
    for r in runs:
        for k, e in r["error_pct"].items(): errs.setdefault(k, []).append(e)
    out = {k: dict(n=len(v), signed_median=round(statistics.median(v), 1), min=min(v), max=max(v)) for k, v in errs.items()}
    return dict(sorted(out.items(), key=lambda kv: kv[1]["signed_median"]))


def main(argv=None):
    t0 = time.monotonic()
    files = (argv if argv is not None else sys.argv[1:]) or sorted(glob.glob(os.path.join(HERE, "results", "calibrate-*.json")))
    runs = [reprice(f) for f in files]
    pooled = {f"{r['run']}:{k}": v for r in runs for k, v in r["error_pct"].items()}
    print(
        json.dumps(
            {
                "benchmark": "reprice",
                "runs": runs,
                "pooled": _stats(pooled),
                "by_layout": by_layout(runs),
                "seconds": round(time.monotonic() - t0, 1),
                "load_avg_1min": round(os.getloadavg()[0], 2),
            },
            indent=1,
            ensure_ascii=False,
        )
    )


if __name__ == "__main__":
    main()
