"""Collective benchmark on local gloo ranks: every op, 1 KB … 64 MB, groups of 2, 4 and 8.

Prints one JSON document: the rows ({op, bytes, group_size, time_s, algbw_gbps, busbw_gbps}) and the
wrapper's overhead against calling torch.distributed directly (goal: ≤ 3 % at 1 MB, < 20 µs at 1 KB).

    python benchmarks/comm.py [--world 8] [--quick]
"""
import argparse, json, platform, sys, time
import torch
from supernode_nb.launch import spawn
from supernode_nb.comm import bench_collectives, BENCH_OPS

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--world", type=int, default=8)
    ap.add_argument("--quick", action="store_true", help="sizes 1 KB, 1 MB only; fewer iterations")
    a = ap.parse_args()
    sizes = (1 << 10, 1 << 20) if a.quick else tuple(1 << k for k in (10, 14, 17, 20, 22, 24, 26))   # 1 KB … 64 MB
    t0 = time.time()
    res = spawn(bench_collectives, a.world, sizes=sizes, group_sizes=[2, 4, 8], ops=BENCH_OPS,
                iters=3 if a.quick else 5, overhead_iters=100 if a.quick else 400, timeout_s=3600)[0]
    o1k, o1m = res["overhead"][str(1 << 10)], res["overhead"][str(1 << 20)]
    out = {"benchmark": "comm", "backend": "gloo", "world": a.world, "torch": torch.__version__,
           "machine": {"cpus": __import__("os").cpu_count(), "python": platform.python_version()},
           "rows": res["rows"], "overhead": res["overhead"],
           "goals": {"overhead_1MB_pct<=3": o1m["overhead_pct"] <= 3.0, "overhead_1KB_us<20": o1k["overhead_s"] * 1e6 < 20},
           "elapsed_s": round(time.time() - t0, 1)}
    json.dump(out, sys.stdout, indent=1); print()

if __name__ == "__main__":
    main()
