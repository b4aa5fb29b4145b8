"""A calibration made on a busy host against one made on an idle one: one profile, an idle host's.

Calibrates this machine twice, interleaved `--rounds` times: once idle, once beside a process that burns `--duty` of a
core in 10 ms slices (a notebook kernel, a browser, the last test's processes winding down). Each profile prices the
dashboard's two picks (tiny-gpt dp4, and dp2·tp2) for an idle host. `calibrate` measures the cores the ranks did not
get while they all computed and divides that background out (`runtime.calibrate._to_idle`); the same profile with the
correction undone shows what it removed. Prints one JSON document with the figures, the background each calibration
measured and the load average beside them (the machine is shared: read the errors beside it).

    python benchmarks/calibrate_busy.py [--rounds 2] [--duty 0.6]
"""
import argparse, json, os, statistics, subprocess, sys, time
from dataclasses import replace
from supernode_nb.foundation.config import ParallelConfig, get_model
from supernode_nb.cost.costmodel import estimate
from supernode_nb.cost.profile import left_by
from supernode_nb.runtime.calibrate import calibrate

BURN = "import sys, time\nd = float(sys.argv[1])\nwhile True:\n    t = time.perf_counter()\n" \
       "    while time.perf_counter() - t < d * 0.01: pass\n    time.sleep((1 - d) * 0.01)"
PICKS = {"dp4": ParallelConfig(dp=4, global_batch_size=4), "dp2·tp2": ParallelConfig(dp=2, tp=2, global_batch_size=2)}


def _undone(p):
    "The profile as measured, before `calibrate` divided out the background it saw (shares × f, link times and penalties ÷ f)."
    shares, links, penalty = dict(p.shares), {}, dict(p.penalty_s)
    for w, bg in (p.detail.get("background_cores") or {}).items():
        f = left_by(p.devices, bg, int(w))
        if w in shares: shares[w] = shares[w] * f
        if w in penalty: penalty[w] = penalty[w] / f
        for lv, fits in p.links.items():
            for key, ops in fits.items():
                if key.split("×")[0] == w:
                    links.setdefault(lv, {})[key] = {o: [v[0] * f] + [x / f for x in v[1:]] for o, v in ops.items()}
    links = {lv: {**p.links[lv], **links.get(lv, {})} for lv in p.links}
    return replace(p, shares=shares, links=links, penalty_s=penalty)


def _price(p) -> dict:
    m = get_model("tiny-gpt")
    return {k: round(1e3 * estimate(m, c, "local", profile=p).step_time_s, 1) for k, c in PICKS.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--duty", type=float, default=0.6, help="share of a core the background process burns")
    a = ap.parse_args()
    out = {"load_before": os.getloadavg(), "cores": len(os.sched_getaffinity(0)), "duty": a.duty, "rounds": []}
    for r in range(a.rounds):
        row = {}
        for mode in ("idle", "busy"):
            burn = subprocess.Popen([sys.executable, "-c", BURN, str(a.duty)]) if mode == "busy" else None
            try:
                time.sleep(0.5)
                p = calibrate(worlds=(2, 4), name=f"bench-{mode}")
            finally:
                if burn is not None: burn.kill(); burn.wait()
            row[mode] = {"ms": _price(p), "as_measured_ms": _price(_undone(p)), "shares": {k: round(v, 3) for k, v in p.shares.items()},
                         "background_cores": p.detail.get("background_cores"), "load_avg": p.load_avg, "seconds": p.detail.get("seconds")}
        row["busy_vs_idle_pct"] = {k: round(100 * (row["busy"]["ms"][k] / row["idle"]["ms"][k] - 1), 1) for k in PICKS}
        row["busy_vs_idle_uncorrected_pct"] = {
            k: round(100 * (row["busy"]["as_measured_ms"][k] / row["idle"]["ms"][k] - 1), 1) for k in PICKS
        }
        out["rounds"].append(row)
    for key in ("busy_vs_idle_pct", "busy_vs_idle_uncorrected_pct"):
        out[f"median_{key}"] = {k: statistics.median(r[key][k] for r in out["rounds"]) for k in PICKS}
    out["load_after"] = os.getloadavg()
    print(json.dumps(out, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()
