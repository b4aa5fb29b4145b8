"""Cluster timings on this machine, as JSON: start and stop, an empty run's round trip, live-record latency, and how
fast a dead rank, a missing rank (init and pre-check) and a hung rank are reported.

    python benchmarks/cluster.py [--world 4] [--timeout 3]

Each figure is one measurement (starting engines takes seconds; repeat the script for spread). Nothing is left
running: every cluster is stopped and its processes checked.
"""
import argparse, json, os, signal, sys, tempfile, time
# benchmarks/comm.py would shadow the `comm` package ipykernel imports: drop this folder from the import path
sys.path = [q for q in sys.path if os.path.abspath(q or ".") != os.path.dirname(os.path.abspath(__file__))]

for var, sub in (
    ("JUPYTER_CONFIG_DIR", "config"),
    ("JUPYTER_DATA_DIR", "data"),
    ("JUPYTER_RUNTIME_DIR", "runtime"),
    ("IPYTHONDIR", "ipython"),
):
    os.environ.setdefault(var, os.path.join(tempfile.mkdtemp(prefix="snb-bench-"), sub))

from supernode_nb.runtime.cluster import Cluster, RankMissing
from supernode_nb.runtime.faults import RunFailed
from supernode_nb.runtime.worker import steps_worker, sleep_worker
from supernode_nb.runtime.precheck import precheck
from supernode_nb.foundation.layout import RankLayout


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--world", type=int, default=4)
    p.add_argument("--timeout", type=float, default=3.0, help="group / pre-check timeout for the failure cases")
    a = p.parse_args(argv)
    W, T, out = a.world, a.timeout, {"world": a.world, "timeout_s": a.timeout, "cpus": os.cpu_count()}

    t = time.monotonic(); c = Cluster(W, timeout=10).start(); out["start_s"] = time.monotonic() - t
    out.update({f"start_{k}": v for k, v in c.timings.items() if k != "start_s"})
    ts = []
    for _ in range(5):
        t = time.monotonic(); c.run(sleep_worker, seconds=0); ts.append(time.monotonic() - t)
    out["empty_run_s_median"] = sorted(ts)[2]
    h = c.run_async(steps_worker, steps=20, step_s=0.05)
    lat = []
    for rec in h.stream(interval=0.01): lat.append(time.time() - rec["time"])
    h.wait()
    out["record_latency_s_median"] = sorted(lat)[len(lat) // 2]
    out["records_lost"] = sum(h.lost.values())
    L = RankLayout(tp=2, dp=W // 2) if W % 2 == 0 else RankLayout(dp=W)
    out["precheck_ok_s"] = precheck(c, L, timeout=T).elapsed_s
    t = time.monotonic(); rep = precheck(c, L, timeout=T, block=[W - 1]); out["precheck_missing_rank_s"] = time.monotonic() - t
    assert rep.missing == [W - 1], rep.text()
    pid = c.pids()[W - 1]
    h = c.run_async(steps_worker, steps=1000, step_s=0.02)
    while not any(r["rank"] == W - 1 and r["step"] >= 2 for r in h.records): h.poll(); time.sleep(0.01)
    t = time.monotonic(); os.kill(pid, signal.SIGKILL)
    try: h.wait(); raise SystemExit("a killed rank was not reported")
    except RunFailed as e: assert list(e.dead) == [W - 1], e
    out["dead_rank_detect_s"] = h.failure_seen_at - t
    out["dead_rank_reported_incl_stop_s"] = time.monotonic() - t
    out["left_after_failure"] = len(c.processes())

    c = Cluster(W, timeout=T, init=False).start()
    c.view(W - 1).apply_async(time.sleep, T + 4)
    t = time.monotonic()
    try: c.init_dist(); raise SystemExit("a missing rank was not reported")
    except RankMissing: out["init_missing_rank_s"] = time.monotonic() - t
    time.sleep(max(0.0, T + 4.5 - (time.monotonic() - t)))
    c.init_dist()
    h = c.run_async(steps_worker, steps=10, step_s=0.02, hang_rank=1, at_step=2)
    t = time.monotonic()
    try: h.wait(); raise SystemExit("a hung rank was not reported")
    except RunFailed as e: assert e.hung == [1], e
    out["hung_rank_s"] = time.monotonic() - t
    out["left_after_hang"] = len(c.processes())
    t = time.monotonic(); c2 = Cluster(2, timeout=10).start(); out["start_2_s"] = time.monotonic() - t
    out["stop_2_s"] = c2.stop()["stop_s"]
    print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in out.items()}, indent=2))


if __name__ == "__main__":
    main()
