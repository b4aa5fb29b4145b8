"""Train a small GPT with any dp × tp × pp × ep under torchrun — the same `train_worker` that `supernode-nb run`,
`launch.spawn` and the ipyparallel cluster use.

    torchrun --nproc-per-node 4 --master-addr 127.0.0.1 --master-port 29511 \
        examples/train_torchrun.py --dp 2 --tp 2 --model tiny-gpt --steps 5 [--json]

Takes the flags of `supernode-nb run` (the world size comes from torchrun). Rank 0 prints each step as it ends
(stderr), then the per-step breakdown table, or the whole result as JSON with `--json`.
"""
import json, os, sys
from datetime import timedelta

import torch.distributed as dist

from supernode_nb.foundation.config import ConfigError
from supernode_nb.foundation.core import UsageError
from supernode_nb.runtime.runner import assemble, spec_from_argv, step_table, train_worker


def main(argv=None) -> int:
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--world" not in argv: argv += ["--world", str(world)]
    try: spec = spec_from_argv(argv)
    except (ConfigError, UsageError) as e:
        if rank == 0: print(f"train_torchrun: {e}", file=sys.stderr)
        return 1 if isinstance(e, ConfigError) else 2
    opts = spec.pop("_cli")
    def show(rec):
        print(f"step {rec['step'] + 1}/{spec['steps']}  loss {rec['loss']:.4f}  wall {rec['wall_s'] * 1e3:.1f} ms",
              file=sys.stderr, flush=True)
    dist.init_process_group("gloo", timeout=timedelta(seconds=opts["timeout"]))
    try:
        out = train_worker(rank, world, spec, publish=show if rank == 0 and not opts["json"] else None)
        outs = [None] * world if rank == 0 else None
        dist.gather_object(out, outs, dst=0)
        if rank == 0:
            res = assemble(spec, outs)
            if opts["trace"]:
                with open(opts["trace"], "w") as f: json.dump(res.pop("trace"), f)
            print(json.dumps(res, indent=2) if opts["json"] else step_table(res))
    finally:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
