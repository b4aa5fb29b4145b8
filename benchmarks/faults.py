"""Fault detection and recovery on local gloo ranks: how long until a dead rank and a hung rank are reported, how long
stopping every rank takes, and how long a restart from the last checkpoint (resharded onto fewer devices) takes.

Prints one JSON document.

    python benchmarks/faults.py [--world 4] [--trials 3] [--hang-timeout 2] [--quick]
"""
import argparse, json, platform, tempfile, time
from dataclasses import replace
from pathlib import Path
import torch
from supernode_nb.runtime.faults import RunFailed
from supernode_nb.runtime.supervise import supervise
from supernode_nb.runtime.recovery import run_with_recovery
from supernode_nb.runtime.spec import make_spec
from supernode_nb.runtime.launch import spawn
from supernode_nb.foundation.config import MODEL_PRESETS, ParallelConfig
from supernode_nb.foundation.layout import RankLayout
from supernode_nb.foundation.topology import get_topology


def _fault_run(world, fault, **kw):
    mark = Path(tempfile.mkdtemp()) / "mark.json"
    t0 = time.monotonic()
    try:
        supervise(
            "supernode_nb.runtime.supervise:_steps_with_fault",
            world,
            40,
            {**fault, "mark": str(mark)},
            layout=RankLayout(dp=world),
            step_s=0.05,
            **kw,
        )
    except RunFailed as e:
        rep = e.report
        t_fault = json.loads(mark.read_text())["time"]
        return {
            "kind": rep.kind,
            "culprits": rep.culprits,
            "axis": rep.axis,
            "detect_s": rep.detected - t_fault,
            "stop_s": rep.stop_s,
            "left": len(rep.left),
            "total_s": time.monotonic() - t0,
            "last_op": rep.ranks[rep.culprits[0]].last_op,
        }
    raise RuntimeError("the injected fault was not reported")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--world", type=int, default=4)
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--hang-timeout", type=float, default=2.0)
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    trials = 1 if a.quick else a.trials
    out = {"machine": {"python": platform.python_version(), "torch": torch.__version__, "cpus": __import__("os").cpu_count(),
                       "load1": __import__("os").getloadavg()[0]}, "world": a.world}
    t = time.monotonic(); spawn("supernode_nb.runtime.launch:_echo_rank", 1)   # the ranks' forkserver: started once
    out["forkserver_start_s"] = time.monotonic() - t
    out["dead"] = [_fault_run(a.world, {"rank": a.world - 1, "step": 5, "kind": "kill"}) for _ in range(trials)]
    out["hung_in_comm"] = [_fault_run(a.world, {"rank": 1, "step": 5, "kind": "hang", "axis": "dp"}, hang_timeout_s=a.hang_timeout)
                           for _ in range(trials)]
    out["hung_outside_comm"] = [_fault_run(a.world, {"rank": 1, "step": 5, "kind": "sleep"}, hang_timeout_s=a.hang_timeout)
                                for _ in range(trials)]
    out["hang_timeout_s"] = a.hang_timeout
    if not a.quick:   # the whole path on the training engine: dp2·tp2, rank 3 killed at step 3, restart on 3 devices (dp1·tp2)
        spec = replace(MODEL_PRESETS["tiny-gpt"], layers=2)
        d = tempfile.mkdtemp()
        t0 = time.monotonic()
        rs = make_spec(spec, ParallelConfig(dp=2, tp=2, global_batch_size=4), steps=5, lr=1e-2, checkpoint_dir=d, checkpoint_every=2,
                       fault={"rank": 3, "step": 3, "kind": "kill"})
        rec = run_with_recovery(rs, topology=get_topology("local", devices=4))
        out["recovery"] = {"ok": rec["ok"], "total_s": time.monotonic() - t0,
                           "attempts": [{k: at.get(k) for k in ("attempt", "config", "seconds", "resharded")} |
                                        ({"plan": at["plan"]["reason"]} if "plan" in at else {}) for at in rec["attempts"]],
                           "resumed_at": rec["start"], "losses": rec["losses"], "restarts": rec["restarts"]}
    for k in ("dead", "hung_in_comm", "hung_outside_comm"):
        xs = [t["detect_s"] for t in out[k]]
        out[f"{k}_detect_s"] = {"min": min(xs), "max": max(xs), "mean": sum(xs) / len(xs)}
    print(json.dumps(out, indent=1, default=str))


if __name__ == "__main__":
    main()
