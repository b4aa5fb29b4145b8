"""Full-size layouts dry-run on fake tensors (`supernode_nb.runtime.dryrun`): per layout and category the bytes the engine's
rank held, the estimate's, the error %, the wall time and the peak RSS of the process that ran it (one process each).

    python benchmarks/dryrun.py [--only NAME] [--out benchmarks/results/dryrun.json]

Prints JSON. The figures depend only on the code (fake tensors, seeded routing); wall time and RSS on the machine's load."""
from __future__ import annotations
import argparse, json, multiprocessing as mp, os, sys, time

LAYOUTS = {   # name -> (model, ParallelConfig keywords); micro-batches 2·pp so that 1F1B's first stage fills up
    "llama3-70b tp8·pp4 first stage": ("llama3-70b", dict(tp=8, pp=4, dtype="bf16", global_batch_size=8)),
    "llama3-405b tp8·pp9 first stage": ("llama3-405b", dict(tp=8, pp=9, dtype="bf16", global_batch_size=18)),
    "olmoe-1b-7b ep32·dp32·pp2 (MoE)": ("olmoe-1b-7b", dict(dp=32, ep=32, pp=2, dtype="bf16", global_batch_size=128)),
    "llama3-70b tp8·pp4·dp8 selective ZeRO-1": ("llama3-70b", dict(tp=8, pp=4, dp=8, zero=1, recompute="selective", dtype="bf16",
                                                                    global_batch_size=64)),
    "llama3-70b tp8·pp4 full recompute": ("llama3-70b", dict(tp=8, pp=4, dtype="bf16", recompute="full", global_batch_size=8)),
}

def _one(name, q):
    from supernode_nb.foundation.config import ParallelConfig
    from supernode_nb.runtime.dryrun import dryrun
    model, kw = LAYOUTS[name]
    d = dryrun(model, ParallelConfig(**kw))
    q.put(dict(name=name, **d.to_dict()))

def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", action="append", choices=list(LAYOUTS), help="run only this layout (repeatable)")
    p.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "dryrun.json"))
    a = p.parse_args(argv)
    rows, ctx = [], mp.get_context("spawn")
    for name in a.only or LAYOUTS:
        q = ctx.Queue(); pr = ctx.Process(target=_one, args=(name, q)); pr.start()
        rows.append(q.get()); pr.join()
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)     # progress, one layout a line
    res = dict(layouts=rows, load_avg=os.getloadavg(), cpus=os.cpu_count(), when=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()))
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as f: json.dump(res, f, indent=1)
    print(json.dumps(res, indent=1))
    return 0

if __name__ == "__main__": sys.exit(main())
