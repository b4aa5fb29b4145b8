"""The cluster's worker functions under torchrun — no ipyparallel, same code — on the ranks a placement chose.

    torchrun --nproc-per-node 4 examples/torchrun_steps.py --tp 2 --dp 2 --timeout 5 --steps 5

Every rank takes its layout rank from the placement's exports (`SUPERNODE_NB_RANKS` in the per-node environment of
`Placement.torchrun_commands(..., with_env=True)`, or `--placement FILE` with `Placement.to_dict()`'s JSON; see
`train_torchrun.py`), joins through `init_from_env` (MASTER_ADDR/PORT from torchrun; the backend is the best present —
hccl, nccl, else gloo — unless `--backend`), runs the link pre-check of the layout (rank 0 prints the report; its
tensors live on the rank's device, so the check exercises nccl/hccl where they are), then the demo training loop
`steps_worker`; each rank's records go to `$SUPERNODE_NB_RECORDS.rank<R>.jsonl` when that variable is set.
Exit status 1 if the pre-check fails.
"""
import argparse, json, os, sys
import torch.distributed as dist
try: from supernode_nb.runtime.worker import init_from_env, steps_worker        # after the cluster/worker split
except ImportError: from supernode_nb.runtime.worker import init_from_env, steps_worker
from supernode_nb.runtime.precheck import precheck_local
from supernode_nb.foundation.layout import RankLayout
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_torchrun import placed                                                # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for ax in ("tp", "dp", "pp", "cp", "ep"): p.add_argument(f"--{ax}", type=int, default=1)
    p.add_argument("--timeout", type=float, default=10.0)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--backend", default=None, help="gloo, nccl or hccl (default: the best present)")
    p.add_argument("--placement", default=None, help="the placement's JSON (supernode-nb place --json)")
    a = p.parse_args(argv)
    where = placed(placement=json.load(open(a.placement)) if a.placement else None)
    ctx = init_from_env(backend=a.backend, timeout=a.timeout, env=dict(os.environ, RANK=str(where["rank"])))
    L = RankLayout(tp=a.tp, dp=a.dp, pp=a.pp, cp=a.cp, ep=a.ep)
    if L.world_size != ctx.world_size:
        print(f"layout needs {L.world_size} ranks, torchrun started {ctx.world_size}", file=sys.stderr); return 2
    rep = precheck_local(L, timeout=a.timeout)
    ok = [rep.ok if rep is not None else True]
    dist.broadcast_object_list(ok, src=0)
    if rep is not None: print(rep.text(), flush=True)
    if not ok[0]: return 1
    out = steps_worker(ctx.rank, ctx.world_size, steps=a.steps, step_s=0.01)
    print(json.dumps({**out, "where": where, "backend": ctx.backend}), flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
