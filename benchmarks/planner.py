"""Planner speed: every configuration for 8,192 devices, searched and scored. Prints JSON.

Goal: under 1 s per search. Run: python benchmarks/planner.py [--repeats 3]
Wall time depends on what else the machine runs (load_avg_1min is printed); cpu_seconds is this process's own time.
"""
import argparse, json, platform, statistics, time
import os

from supernode_nb.foundation.config import MODEL_PRESETS
from supernode_nb.cost.planner import plan, SearchSpace
from supernode_nb.foundation.topology import get_topology, topology_for

CASES = [  # (model, topology preset, devices, global batch, search space)
    ("llama3-70b", "dgx-h100-superpod", 8192, 1024, SearchSpace()),
    ("llama3-70b", "cloudmatrix384", 8192, 1024, SearchSpace()),
    ("llama3-405b", "dgx-h100-superpod", 8192, 2048, SearchSpace()),
    ("mixtral-8x7b", "cloudmatrix384", 8192, 1024, SearchSpace()),
    ("gpt3-175b", "dgx-a100-superpod", 8192, 1536, SearchSpace()),
    ("llama3-70b", "dgx-h100-superpod", 8192, 1024, SearchSpace(min_devices=1)),   # every world size, not only > half
    ("llama3-70b", "dgx-h100-superpod", 8192, 1024, SearchSpace(), True),         # --runnable: only what the engine runs
]

def main():
    ap = argparse.ArgumentParser(); ap.add_argument("--repeats", type=int, default=3); a = ap.parse_args()
    out = []
    for model, topo_name, n, B, space, *rest in CASES:
        runnable = bool(rest and rest[0])
        topo = topology_for(topo_name, n)
        times, cpu, p = [], [], None
        for _ in range(a.repeats):
            t0, c0 = time.perf_counter(), time.process_time()
            p = plan(MODEL_PRESETS[model], topo, B, space, max_devices=n, runnable_only=runnable)
            times.append(time.perf_counter() - t0); cpu.append(time.process_time() - c0)
        out.append(
            dict(
                model=model,
                topology=topo_name,
                devices=n,
                global_batch=B,
                min_devices=space.min_devices,
                runnable_only=runnable,
                searched=p.searched,
                valid=p.valid,
                fitting=p.fitting,
                seconds_median=round(statistics.median(times), 4),
                seconds_min=round(min(times), 4),
                cpu_seconds_median=round(statistics.median(cpu), 4),  # this process's CPU time: what an idle machine's wall time would be
                configs_per_s=round(p.searched / statistics.median(times)),
                runnable_in_top=sum(r["runnable"] for r in p.top),
                top=len(p.top),  # this engine can run them (foundation.capabilities)
                best=p.best
                and dict(
                    p.best["config"],
                    devices=p.best["devices"],
                    tokens_per_s=round(p.best["tokens_per_s"]),
                    runnable=p.top[0]["runnable"],
                    lacks=p.top[0]["lacks"],
                ),
            )
        )
    print(json.dumps(dict(benchmark="planner", goal_s=1.0, python=platform.python_version(), cpus=os.cpu_count(),
                          load_avg_1min=os.getloadavg()[0], cases=out,
                          all_under_goal=all(c["seconds_median"] < 1.0 for c in out),
                          all_cpu_under_goal=all(c["cpu_seconds_median"] < 1.0 for c in out)), indent=2))

if __name__ == "__main__":
    main()
