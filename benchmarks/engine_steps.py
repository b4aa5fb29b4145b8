"""Training-step times of the engine on local gloo ranks, layout by layout, with the measured breakdown.

For each layout, `runner.run` trains `--steps` steps of a tiny preset (same global batch of 8 sequences × 32
tokens, 1 sequence per micro-batch) and reports, over the steps after the first (warm-up), the median of the
slowest rank's wall time, tokens/s, and each rank-mean part of the breakdown (data, compute, exposed comm per
axis, bubble, other). Also the single-process step of each preset and the activation memory saved by recompute.

Prints one JSON document.

    python benchmarks/engine_steps.py [--quick] [--steps 6]
"""
import argparse, json, os, platform, statistics, time
import torch

from supernode_nb.foundation.config import get_model
from supernode_nb.parallel.model import GPT, loss_fn, saved_activation_bytes, set_recompute
from supernode_nb.runtime.runner import make_spec, run

med = statistics.median

LAYOUTS = [  # (name, model, parallel config) — global batch 8 everywhere
    ("single", "tiny-gpt", dict()),
    ("dp2", "tiny-gpt", dict(dp=2)),
    ("tp2", "tiny-gpt", dict(tp=2)),
    ("tp2-sp", "tiny-gpt", dict(tp=2, sequence_parallel=True)),
    ("pp2-1f1b", "tiny-gpt", dict(pp=2)),
    ("pp2-gpipe", "tiny-gpt", dict(pp=2, schedule="gpipe")),
    ("pp2-interleaved", "tiny-gpt", dict(pp=2, schedule="interleaved", virtual_stages=2)),
    ("dp2-zero1", "tiny-gpt", dict(dp=2, zero=1)),
    ("single-moe", "tiny-moe", dict()),
    ("ep2-dp2-moe", "tiny-moe", dict(dp=2, ep=2)),
    ("dp2-tp2", "tiny-gpt", dict(dp=2, tp=2)),
    ("dp2-tp2-pp2", "tiny-gpt", dict(dp=2, tp=2, pp=2)),
]
QUICK = ("single", "dp2", "tp2", "pp2-1f1b", "ep2-dp2-moe")


def model_step(preset, steps=6, b=8):
    "Median forward + backward + AdamW step of one process (after one warm-up step)."
    torch.manual_seed(0)
    m = GPT(get_model(preset)); opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
    x = torch.randint(0, 256, (b, m.spec.seq_len))
    ts = []
    for _ in range(steps):
        t0 = time.perf_counter(); loss_fn(m(x), x).backward(); opt.step(); opt.zero_grad(); ts.append(time.perf_counter() - t0)
    return med(ts[1:])


def layout(name, preset, cfg, steps):
    spec = make_spec(preset, steps=steps, micro_batch_size=1, global_batch_size=8, **cfg)
    t0 = time.monotonic()
    res = run(spec)
    total = time.monotonic() - t0
    st = res["steps"][1:]
    n = len(st[0]["ranks"])
    mean = lambda s, k: sum(r[k] for r in s["ranks"]) / n
    axes = sorted({a for s in st for r in s["ranks"] for a in r["comm_s"]})
    return {"layout": name, "model": preset, "world": spec.world_size, "run_s": round(total, 2),
            "wall_ms": round(med(max(r["wall_s"] for r in s["ranks"]) for s in st) * 1e3, 2),
            "tokens_per_s": round(med(min(r["tokens_per_s"] for r in s["ranks"]) for s in st)),
            "parts_ms": {k[:-2]: round(med(mean(s, k) for s in st) * 1e3, 2) for k in ("data_s", "compute_s", "bubble_s", "other_s")},
            "comm_ms": {a: round(med(sum(r["comm_s"].get(a, 0.0) for r in s["ranks"]) / n for s in st) * 1e3, 2) for a in axes},
            "loss_first_last": [round(res["losses"][0], 4), round(res["losses"][-1], 4)]}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true"); p.add_argument("--steps", type=int, default=6)
    a = p.parse_args()
    torch.set_num_threads(1)
    out = {"machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "torch": torch.__version__,
                       "loadavg_start": os.getloadavg()},
           "model_step_ms": {k: round(model_step(k) * 1e3, 1) for k in ("tiny-gpt", "tiny-moe")},
           "saved_activation_MiB": {mode: round(saved_activation_bytes(set_recompute(GPT(get_model("tiny-gpt")), mode),
                                                                       torch.randint(0, 256, (8, 32))) / 2**20, 2)
                                    for mode in ("none", "selective", "full")},
           "layouts": [layout(n, m, c, a.steps) for n, m, c in LAYOUTS if not a.quick or n in QUICK]}
    out["machine"]["loadavg_end"] = os.getloadavg()
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
