"""Train a small GPT with any dp × tp × pp × ep under torchrun — the same `train_worker` that `supernode-nb run`,
`launch.spawn` and the ipyparallel cluster use — on the ranks and devices a placement chose.

One machine:

    torchrun --nproc-per-node 4 --master-addr 127.0.0.1 --master-port 29511 \
        examples/train_torchrun.py --dp 2 --tp 2 --model tiny-gpt --steps 5 [--json]

Several machines, where the placement says: `supernode-nb place ... --script examples/train_torchrun.py --json`
(or `Placement.torchrun_commands(script, with_env=True)`) gives one command per node, each prefixed with that node's
environment — `SUPERNODE_NB_RANKS` (the layout ranks of its local ranks) and the visible-devices variable — and
`Placement.hostfile()` the hosts. Run each node's command on its host; give the placement's JSON with
`--placement FILE` and every rank also checks it runs on the host the placement named. Without the environment
prefix, `--placement` alone gives each node its ranks (torchrun's GROUP_RANK is the node rank) and devices.

The backend is the best one present (`supernode_nb.comm.backend.pick`: hccl on Ascend, nccl on NVIDIA, gloo on
CPU) unless `--backend` says; the process group is `cpu:gloo,<device>:<backend>` so CPU tensors still have a path —
`train_worker` trains on the CPU today, so only device tensors (the pre-check in `torchrun_steps.py`) use nccl/hccl.
Takes the flags of `supernode-nb run` (the world size comes from torchrun). The rank with layout rank 0 prints each
step (stderr), then the per-step table, or the whole result as JSON with `--json`, including where every rank ran.
"""
import json, os, socket, sys
from datetime import timedelta

import torch
import torch.distributed as dist

from supernode_nb.foundation.config import ConfigError
from supernode_nb.foundation.core import UsageError
from supernode_nb.foundation.placement import RANKS_ENV, logical_rank
from supernode_nb.runtime.runner import assemble, spec_from_argv, step_table, train_worker

_LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")


def _take(argv: list[str], flag: str) -> str | None:
    "Remove `flag VALUE` (or `flag=VALUE`) from argv; return VALUE."
    for i, a in enumerate(argv):
        if a == flag and i + 1 < len(argv): v = argv[i + 1]; del argv[i:i + 2]; return v
        if a.startswith(flag + "="): del argv[i]; return a.split("=", 1)[1]
    return None


def placed(env=None, placement: dict | None = None) -> dict:
    """This process's place: its layout rank, node, local device and host — from the placement's environment
    (`SUPERNODE_NB_RANKS`, visible devices) or its JSON (`Placement.to_dict()`). Sets the visible-devices variable
    from the JSON when the environment lacks it, and refuses to run on a host other than the one the placement named."""
    env = os.environ if env is None else env
    local, node = int(env.get("LOCAL_RANK", 0)), int(env.get("GROUP_RANK", 0))
    if RANKS_ENV in env or placement is None: rank = logical_rank(env)
    else:
        nodes = placement["nodes"]
        if node >= len(nodes) or local >= len(nodes[node]["ranks"]):
            raise SystemExit(f"node {node} local rank {local}: the placement has {len(nodes)} node(s) with "
                             f"{[len(n['ranks']) for n in nodes]} ranks; start torchrun with its commands")
        rank = nodes[node]["ranks"][local]
    where = {"rank": rank, "launcher_rank": int(env.get("RANK", rank)), "node_rank": node, "local_rank": local,
             "host": socket.gethostname()}
    if placement is not None:
        n = next(n for n in placement["nodes"] if rank in n["ranks"])
        where.update(planned_host=n["host"], device=placement["devices"][rank], local_device=n["local_devices"][n["ranks"].index(rank)])
        for k, v in n["env"].items():
            if k != RANKS_ENV: env.setdefault(k, v)     # visible devices, before any device is touched
        if n["host"] not in _LOCAL_HOSTS and n["host"] != where["host"]:
            raise SystemExit(f"rank {rank} runs on {where['host']} but the placement puts it on {n['host']} "
                             f"(device {where['device']}): run each node's command on its own host")
    return where


def _group_backend(backend: str | None) -> tuple[str, str]:
    "(process-group backend string, device) from `backend.pick`: the best backend present, gloo for CPU tensors."
    from supernode_nb.comm.backend import pick
    c = pick("cpu" if backend == "gloo" else None, backend)
    return ("gloo" if c.device == "cpu" else f"cpu:gloo,{c.device}:{c.backend}"), c.device


def main(argv=None) -> int:
    world = int(os.environ["WORLD_SIZE"])
    argv = list(sys.argv[1:] if argv is None else argv)
    pfile, backend = _take(argv, "--placement"), _take(argv, "--backend")
    placement = json.loads(open(pfile).read()) if pfile else None
    where = placed(placement=placement)
    rank = where["rank"]
    if "--world" not in argv: argv += ["--world", str(world)]
    try: spec, opts = spec_from_argv(argv)
    except (ConfigError, UsageError) as e:
        if rank == 0: print(f"train_torchrun: {e}", file=sys.stderr)
        return 1 if isinstance(e, ConfigError) else 2
    def show(rec):
        print(f"step {rec['step'] + 1}/{spec.steps}  loss {rec['loss']:.4f}  wall {rec['wall_s'] * 1e3:.1f} ms",
              file=sys.stderr, flush=True)
    pg_backend, where["device_kind"] = _group_backend(backend)
    where["backend"] = pg_backend
    if where["device_kind"] != "cpu":                  # nccl/hccl drive the local rank's device (visible devices only)
        getattr(torch, where["device_kind"]).set_device(where["local_rank"])
    dist.init_process_group(pg_backend, init_method="env://", rank=rank, world_size=world,
                            timeout=timedelta(seconds=opts["timeout"]))
    try:
        out = train_worker(rank, world, spec, publish=show if rank == 0 and not opts["json"] else (lambda rec: None))
        out["where"] = where
        outs = [None] * world if rank == 0 else None
        dist.gather_object(out, outs, dst=0)
        if rank == 0:
            res = assemble(spec, outs)
            res["placement"] = {"where": [o["where"] for o in sorted(outs, key=lambda o: o["rank"])]}
            if opts["trace"]:
                with open(opts["trace"], "w") as f: json.dump(res.pop("trace"), f)
            print(json.dumps(res, indent=2) if opts["json"] else step_table(res))
    finally:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
