"""Layout + placement of 8,192 ranks: how long it takes (goal: under 1 s).

Each case builds a fresh `RankLayout` (its groups are computed on first use), places it on a topology preset and
computes the traffic report of every axis. Times are the median (and min/max) of `--repeat` runs, in seconds.
Prints one JSON object. Run: `python benchmarks/placement.py [--repeat 5]`.
"""
import argparse, json, platform, statistics, time
import numpy as np
from supernode_nb.foundation.layout import RankLayout
from supernode_nb.foundation.placement import place
from supernode_nb.foundation.topology import get_topology

CASES = [  # (label, topology preset, sizes, degrees, strategy, fraction of devices unhealthy)
    ("dgx-h100 1024 nodes, tp8 pp8 dp128", "dgx-h100-superpod", dict(nodes=1024), dict(tp=8, pp=8, dp=128), "topology-aware", 0.0),
    ("cloudmatrix384 x22, tp8 pp8 dp128", "cloudmatrix384", dict(supernodes=22), dict(tp=8, pp=8, dp=128), "topology-aware", 0.0),
    (
        "cloudmatrix384 x22, tp8 pp8 dp128, 2% unhealthy",
        "cloudmatrix384",
        dict(supernodes=22),
        dict(tp=8, pp=8, dp=128),
        "topology-aware",
        0.02,
    ),
    (
        "cloudmatrix384 x22, MoE tp4 ep16 pp8 dp256",
        "cloudmatrix384",
        dict(supernodes=22),
        dict(tp=4, ep=16, pp=8, dp=256),
        "topology-aware",
        0.0,
    ),
    ("dgx-h100 1024 nodes, dp8192 (tp1: most loop steps)", "dgx-h100-superpod", dict(nodes=1024), dict(dp=8192), "topology-aware", 0.0),
    ("dgx-h100 1024 nodes, tp8 pp8 dp128, naive", "dgx-h100-superpod", dict(nodes=1024), dict(tp=8, pp=8, dp=128), "naive", 0.0),
    ("dgx-h100 1024 nodes, tp8 pp8 dp128, random", "dgx-h100-superpod", dict(nodes=1024), dict(tp=8, pp=8, dp=128), "random", 0.0),
]

def run_case(preset, sizes, degrees, strategy, bad_frac, seed=0):
    topo = get_topology(preset, **sizes)
    if bad_frac:
        rng = np.random.default_rng(seed)
        topo = topo.with_unhealthy(rng.choice(topo.num_devices, int(bad_frac * topo.num_devices), replace=False).tolist())
    t0 = time.perf_counter()
    layout = RankLayout(**degrees)
    t1 = time.perf_counter()
    p = place(layout, topo, strategy)
    t2 = time.perf_counter()
    rep = p.axis_report()
    t3 = time.perf_counter()
    return dict(layout=t1 - t0, place=t2 - t1, report=t3 - t2, total=t3 - t0), p, rep

def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    out = {"goal_s": 1.0, "repeat": a.repeat, "python": platform.python_version(), "numpy": np.__version__, "cases": []}
    for label, preset, sizes, deg, strat, bad in CASES:
        runs = [run_case(preset, sizes, deg, strat, bad)[0] for _ in range(a.repeat)]
        _, p, rep = run_case(preset, sizes, deg, strat, bad)
        med = {k: round(statistics.median(r[k] for r in runs), 4) for k in runs[0]}
        out["cases"].append({
            "case": label, "world_size": p.layout.world_size, "devices": p.topology.num_devices,
            "unhealthy": len(p.topology.unhealthy), "strategy": strat, "mode": p.mode,
            "median_s": med, "min_total_s": round(min(r["total"] for r in runs), 4), "max_total_s": round(max(r["total"] for r in runs), 4),
            "under_goal": max(r["total"] for r in runs) < 1.0,
            "tp_groups_leaving_domain": rep["tp"]["groups_leaving_domain"],
            "tp_share_by_level": {k: round(v, 4) for k, v in rep["tp"]["share_by_level"].items()},
        })
    out["all_under_goal"] = all(c["under_goal"] for c in out["cases"])
    print(json.dumps(out, indent=2))

if __name__ == "__main__":
    main()
