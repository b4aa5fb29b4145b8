"""ZeRO-2/3 (`parallel.zero.ZeroDataParallel`) beside PyTorch's FSDP2 (`torch.distributed.fsdp.fully_shard`), 4 gloo ranks.

The same GPT (built from one seed), the same micro-batches, AdamW, one process per rank; in every rank the variants'
steps are interleaved (ours ZeRO-3 reshard="layer", ours ZeRO-3 reshard="step", ours ZeRO-2, FSDP2), so the load of
the shared machine falls on all of them alike. Reported:

- step time: median (and quartiles) over the interleaved samples; ratio ours / FSDP2 (goal <= 1.0), wall and CPU;
- bytes held per rank: parameters + gradients + optimizer state (measured: the tensors each holds after a step) +
  peak activations (autograd's saved tensors of one micro-batch, the same model and batch for every variant);
  "params" = the sharded (fp32 master) parameters + the peak of whole (gathered) parameters: ours measured in its
  gather/free bookkeeping, FSDP2's sampled in hooks before/after each module's forward and before each block's
  backward (the parameters that are plain tensors, not DTensors, at that moment);
- 1/dp: our ZeRO-3 sharded states (fp32 master slice + gradient slice + AdamW moments) measured at dp = 1, 2, 4;
- reshard="layer" (gather before each forward and backward, per micro-batch) vs "step" (gather once per step,
  keep until it ends): the trade-off of gathering per micro-batch or per step, at 4 micro-batches — on dp4 and in
  the engine on dp2·pp2 (1F1B), with gathers per step and the peak of whole parameters;
- bf16: the same ZeRO-3 step with bf16 parameters (fp32 masters) on the 4 ranks, and one process alone (no comm):
  the engine's fp32 step vs its bf16 step on 512-wide matmuls.

Prints one JSON document with os.getloadavg().

    python benchmarks/zero.py [--quick]
"""
import argparse, json, os, platform, statistics, sys, time
from dataclasses import replace
import torch
from torch import nn
from supernode_nb.comm.collectives import Comm, CommRecorder
from supernode_nb.foundation.config import MODEL_PRESETS
from supernode_nb.foundation.layout import RankLayout
from supernode_nb.parallel.model import GPT, loss_fn, saved_activation_bytes
from supernode_nb.parallel.zero import ZeroDataParallel, zero_units
from supernode_nb.runtime.launch import spawn

med = statistics.median
SPEC = replace(MODEL_PRESETS["tiny-gpt"], layers=4, hidden=128, ffn_hidden=512, heads=4, seq_len=64, vocab=512)


def _batches(rank, steps, m, mbs=1):
    g = torch.Generator().manual_seed(100 + rank)
    return [[torch.randint(0, SPEC.vocab, (mbs, SPEC.seq_len), generator=g) for _ in range(m)] for _ in range(steps)]


def _state_bytes(opt) -> int:
    return sum((t.to_local() if hasattr(t, "to_local") else t).numel() * t.element_size()
               for s in opt.state.values() for t in s.values() if torch.is_tensor(t))   # moments and step counters, as ours counts


def _worker(rank, world, steps=8, m=4, warmup=2):
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.device_mesh import init_device_mesh
    torch.set_num_threads(1)
    comm = Comm.from_layout(RankLayout(dp=world), rank, CommRecorder(rank), axes=("dp",))
    variants = {}
    for name, stage, reshard, dt in (("ours-z3", 3, "layer", torch.float32), ("ours-z3-keep-step", 3, "step", torch.float32),
                                     ("ours-z2", 2, "layer", torch.float32), ("ours-z3-bf16", 3, "layer", torch.bfloat16)):
        model = GPT(SPEC, seed=0).to(dt)
        variants[name] = (model, ZeroDataParallel(zero_units([model]), comm, stage, torch.optim.AdamW, reshard=reshard, lr=1e-3))
    fm = GPT(SPEC, seed=0)
    mesh = init_device_mesh("cpu", (world,))
    for b in fm.blocks: fully_shard(b, mesh=mesh)
    fully_shard(fm, mesh=mesh)
    variants["fsdp2"] = (fm, torch.optim.AdamW(fm.parameters(), lr=1e-3))
    from torch.distributed.tensor import DTensor
    whole = {"peak": 0}
    def _whole(*_):   # FSDP2's unsharded parameters right now (plain tensors; sharded ones are DTensors)
        whole["peak"] = max(whole["peak"], sum(p.numel() * p.element_size() for p in fm.parameters() if not isinstance(p, DTensor)))
    for mod in [fm, *fm.blocks]: mod.register_forward_pre_hook(_whole); mod.register_forward_hook(_whole)
    for b in fm.blocks: b.register_full_backward_pre_hook(_whole)
    data = _batches(rank, steps + warmup, m)
    wall = {k: [] for k in variants}; cpu = {k: [] for k in variants}; losses = {k: [] for k in variants}
    for s in range(steps + warmup):
        for name, (model, opt) in variants.items():
            t0, c0 = time.perf_counter(), time.process_time()
            tot = 0.0
            for x in data[s]:
                loss = loss_fn(model(x), x) / m; loss.backward(); tot += float(loss)
            if hasattr(opt, "finish"): opt.finish()
            opt.step(); opt.zero_grad()
            if s >= warmup: wall[name].append(time.perf_counter() - t0); cpu[name].append(time.process_time() - c0)
            losses[name].append(tot)
    held = {}
    for name, (model, opt) in variants.items():
        if hasattr(opt, "held_bytes"): held[name] = opt.held_bytes()
        else:   # FSDP2: the local shards of parameters and gradients (gradients as after a backward), AdamW moments
            p = sum(q.to_local().numel() * q.element_size() for q in model.parameters())
            held[name] = {"params": p + whole["peak"], "grads": p, "optimizer": _state_bytes(opt), "params_whole_peak": whole["peak"]}
    return {"rank": rank, "wall": wall, "cpu": cpu, "held": held, "losses": losses}


def _states(rank, world):
    "Our ZeRO-3 sharded states at dp=world (fp32 master + gradient slices + AdamW moments), after one step."
    comm = (Comm.from_layout(RankLayout(dp=world), rank, axes=("dp",)) if world > 1 else Comm(0, 1, {"dp": ([0], None)}))
    model = GPT(SPEC, seed=0); z = ZeroDataParallel(zero_units([model]), comm, 3, torch.optim.AdamW, lr=1e-3)
    x = _batches(rank, 1, 1)[0][0]; loss_fn(model(x), x).backward(); z.finish(); z.step()
    h = z.held_bytes(); return h["params"] - h["params_whole_peak"] + h["grads"] + h["optimizer"]


def _pp_worker(rank, world, steps=6):
    "dp2·pp2 ZeRO-3 in the engine, 4 micro-batches: reshard='layer' (gather per micro-batch) vs 'step' (once per step), interleaved."
    from supernode_nb.foundation.config import ParallelConfig
    from supernode_nb.parallel.engine import Engine, parallelize
    torch.set_num_threads(1)
    cfg = ParallelConfig(dp=2, pp=2, zero=3, micro_batch_size=1, global_batch_size=8)
    L = RankLayout.from_config(cfg); comm = Comm.from_layout(L, rank, CommRecorder(rank))
    engs = {rs: Engine(parallelize(SPEC, cfg, L, rank, comm), reshard=rs) for rs in ("layer", "step")}
    out = {rs: {"wall": [], "gathers": 0, "whole_peak": 0} for rs in engs}
    for s in range(steps + 1):
        for rs, e in engs.items():
            g0 = e.opt.gathers; r = e.train_step(s)
            if s: out[rs]["wall"].append(r.wall_s); out[rs]["gathers"] = e.opt.gathers - g0
            out[rs]["whole_peak"] = e.opt.peak_live_bytes
    return out


def pp_reshard(steps=6):
    res = spawn(_pp_worker, 4, steps=steps, timeout_s=600)
    return {rs: {"step_s_median": round(med([max(r[rs]["wall"][i] for r in res) for i in range(steps)]), 4),
                 "gathers_per_step_rank0": res[0][rs]["gathers"], "whole_params_peak_bytes_rank0": res[0][rs]["whole_peak"]}
            for rs in ("layer", "step")} | {"config": "dp2·pp2 zero3, 4 micro-batches, 1f1b", "loadavg": os.getloadavg()}


def bf16_local(steps=6):
    "One process, no communication: an fp32 step vs a bf16 step (fp32 masters) of a GPT with 512-wide matmuls."
    from supernode_nb.foundation.config import ParallelConfig
    from supernode_nb.parallel.engine import Engine, parallelize, local_comm
    torch.set_num_threads(1)
    spec = replace(MODEL_PRESETS["tiny-gpt"], layers=2, hidden=512, ffn_hidden=2048, heads=8, seq_len=128, vocab=1024)
    engs = {dt: Engine(parallelize(spec, ParallelConfig(micro_batch_size=4, global_batch_size=4, dtype=dt), None, 0, local_comm()))
            for dt in ("fp32", "bf16")}
    t = {dt: [] for dt in engs}
    for s in range(steps + 1):
        for dt, e in engs.items():
            r = e.train_step(s)
            if s: t[dt].append(r.wall_s)
    return {"model": {k: getattr(spec, k) for k in ("layers", "hidden", "ffn_hidden", "seq_len", "vocab")}, "batch": 4,
            "step_s_median": {dt: round(med(v), 4) for dt, v in t.items()},
            "bf16_over_fp32": round(med(t["bf16"]) / med(t["fp32"]), 3), "loadavg": os.getloadavg()}


def main(quick=False):
    t = time.time()
    steps = 4 if quick else 10
    res = spawn(_worker, 4, steps=steps, timeout_s=900)
    q = lambda xs: [round(statistics.quantiles(xs, n=4)[0], 5), round(med(xs), 5), round(statistics.quantiles(xs, n=4)[2], 5)]
    names = list(res[0]["wall"])
    step = {n: {"wall_s_q1_med_q3": q([max(r["wall"][n][i] for r in res) for i in range(steps)]),
                "cpu_s_per_rank": round(sum(med(r["cpu"][n]) for r in res) / len(res), 5)} for n in names}
    ratio = {n: {"wall": round(step[n]["wall_s_q1_med_q3"][1] / step["fsdp2"]["wall_s_q1_med_q3"][1], 3),
                 "cpu": round(step[n]["cpu_s_per_rank"] / step["fsdp2"]["cpu_s_per_rank"], 3)} for n in names if n != "fsdp2"}
    act = saved_activation_bytes(GPT(SPEC, seed=0), _batches(0, 1, 1)[0][0])
    held = {}
    for n in names:
        h = res[0]["held"][n]
        held[n] = dict(h, activations_peak=act, total=h["params"] + h["grads"] + h["optimizer"] + act)
    states = {f"dp={d}": (_states(0, 1) if d == 1 else spawn(_states, d)[0]) for d in (1, 2, 4)}
    s1 = states["dp=1"]
    doc = {"benchmark": "zero", "model": {k: getattr(SPEC, k) for k in ("layers", "hidden", "heads", "ffn_hidden", "vocab", "seq_len")},
           "params": sum(p.numel() for p in GPT(SPEC).parameters()), "ranks": 4, "micro_batches": 4, "steps_measured": steps,
           "step_time": step, "ratio_vs_fsdp2": ratio, "bytes_held_per_rank": held,
           "bytes_vs_fsdp2": {n: round(held[n]["total"] / held["fsdp2"]["total"], 3) for n in names if n != "fsdp2"},
           "zero3_sharded_states_bytes": states, "states_times_dp_over_dp1": {k: round(v * int(k[3:]) / s1, 3) for k, v in states.items()},
           "final_loss": {n: round(res[0]["losses"][n][-1], 5) for n in names},
           "bf16_local_step": bf16_local(3 if quick else 6),
           "pp_reshard_layer_vs_step": pp_reshard(3 if quick else 6),
           "loadavg": os.getloadavg(), "cpus": os.cpu_count(), "torch": torch.__version__, "host": platform.node(),
           "seconds": round(time.time() - t, 1)}
    print(json.dumps(doc, indent=1))
    return doc


if __name__ == "__main__":
    ap = argparse.ArgumentParser(); ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", choices=["bf16", "pp"], default=None, help="only the one-process bf16 step, or only dp2·pp2 resharding")
    a = ap.parse_args()
    if a.only: print(json.dumps(bf16_local() if a.only == "bf16" else pp_reshard(), indent=1))
    else: main(a.quick)
