"""One CPU training step of each tiny preset (forward + backward + AdamW on 8 x 32 tokens), one thread.

The best of three steps after a warm-up one, per preset, as JSON with the load average it ran under (the machine may be
shared: read the times beside it). The model notebook (`nbs/30_parallel/30_model.ipynb`) quotes these figures.

    python benchmarks/model_step.py [--steps 4] [--threads 1]
"""
import argparse, json, os, time
import torch
from supernode_nb.foundation.config import get_model
from supernode_nb.parallel.model import GPT, loss_fn


def step_times(name: str, steps: int = 4) -> list[float]:
    "Seconds of each training step of preset `name` (the first warms up)."
    m = GPT(get_model(name)); opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
    tok = torch.randint(0, 256, (8, 32))
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        loss_fn(m(tok), tok).backward(); opt.step(); opt.zero_grad()
        times.append(time.perf_counter() - t0)
    return times


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args(argv)
    torch.set_num_threads(a.threads)
    out = {"load_avg_before": os.getloadavg()[0], "threads": a.threads, "presets": {}}
    for name in ("tiny-gpt", "tiny-moe"):
        t = step_times(name, a.steps)
        out["presets"][name] = {"best_ms": round(1e3 * min(t[1:]), 1), "steps_ms": [round(1e3 * x, 1) for x in t]}
    out["load_avg_after"] = os.getloadavg()[0]
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
