"""Context parallelism: ring attention and the cp-split GPT against one process (gloo, launch.spawn).

The engine cases train `STEPS` steps of tiny-gpt on a layout with cp > 1 and on one process with the same global
batches, and compare per step the loss and every gradient shard, and at the end every parameter (fp32, SGD:
loss rtol 1e-5; grads and params |Δ| <= 1e-5 + 1e-4·|ref|, `engine.TOLERANCES`). Run with `-s` for the errors.
"""
import io
import pytest
import torch
from supernode_nb.foundation.config import ConfigError, ParallelConfig, get_model
from supernode_nb.parallel.cp import cp_work
from supernode_nb.parallel.engine import TOLERANCES, engine_check, parity_worker, reference_run
from supernode_nb.runtime.launch import spawn
from procs import as_bytes

STEPS = 2


@pytest.mark.parametrize("cp", [2, 3])
def test_ring_attention_matches_one_process(cp):
    "Outputs and q/k/v gradients of ring attention equal causal attention on the whole sequence."
    res = spawn("supernode_nb.parallel.cp:_ring_parity", cp, s=12 * cp // 2 * 2 if cp == 3 else 16)
    for r in res:
        assert r["out"] < 1e-5 and max(r["grads"]) < 1e-5, r
        assert r["ops"] == [("cp", "p2p")] and r["n_p2p"] == 3 * cp - 2     # cp-1 hops forward, 2cp-1 backward


def test_load_balance():
    "Two chunks per rank, one from each end: every rank computes the same (query, key) chunk pairs at every step."
    for cp in (2, 3, 4, 8):
        w = cp_work(cp)
        assert all(row == w[0] for row in w) and sum(map(sum, w)) == (2 * cp) ** 2 / 2


@pytest.mark.parametrize("rope", [False, True])
def test_gpt_cp2(rope):
    res = spawn("supernode_nb.parallel.cp:_gpt_cp_parity", 2, rope=rope)
    for r in res:
        assert abs(r["loss"] - r["ref"]) < 1e-5 and r["grad_err"] < 1e-5, r


CASES = [  # (id, world, config, model)
    ("cp2", 2, dict(cp=2, micro_batch_size=2, global_batch_size=4), "tiny-gpt"),
    ("cp2-pp2-zb-h1", 4, dict(cp=2, pp=2, schedule="zb-h1", micro_batch_size=1, global_batch_size=4), "tiny-gpt"),
    ("cp2-tp2-dp2-sp", 8, dict(cp=2, tp=2, dp=2, sequence_parallel=True, micro_batch_size=1, global_batch_size=4), "tiny-gpt"),
    # MoE: experts over ep = cp; the load-balancing loss sees the whole sequence (counts summed over cp), as one process
    ("cp2-ep2-moe", 2, dict(cp=2, ep=2, micro_batch_size=1, global_batch_size=4), "tiny-moe"),
    ("cp2-moe", 2, dict(cp=2, micro_batch_size=1, global_batch_size=2), "tiny-moe"),
]




@pytest.mark.parametrize("name,world,cfg,model", CASES, ids=[c[0] for c in CASES])
def test_engine_parity(name, world, cfg, model):
    spec, opt = get_model(model), "sgd"
    ref = reference_run(spec, cfg, steps=STEPS, optimizer=opt, lr=0.1)
    res = spawn(parity_worker, world, spec, cfg, as_bytes(ref), steps=STEPS, optimizer=opt, lr=0.1, timeout_s=300)
    tol = TOLERANCES[opt]
    worst = {k: max(r[k] for r in res) for k in ("loss_err", "grad_max_abs", "param_max_abs", "grad_excess", "param_excess")}
    print(f"\n{name}: loss rel err {worst['loss_err']:.1e}, grad max |Δ| {worst['grad_max_abs']:.1e}, "
          f"param max |Δ| {worst['param_max_abs']:.1e}")
    assert worst["loss_err"] <= tol["loss_rtol"] and worst["grad_excess"] <= tol["atol"] and worst["param_excess"] <= tol["atol"], worst
    assert sum(r["checked"] for r in res) >= len(ref["grads"][0]) * STEPS        # every gradient checked somewhere
    assert all(r["losses"] == res[0]["losses"] for r in res)                     # the whole-sequence loss on every rank
    cp_bytes = [sum(v for k, v in d["comm_s"].items() if k == "cp") for r in res for d in r["records"]]
    assert all(b > 0 for b in cp_bytes)                                           # the ring shows in the breakdown


def test_engine_check_cp():
    spec = get_model("tiny-gpt")
    assert engine_check(spec, ParallelConfig(cp=2, global_batch_size=2)) == []
    assert any("2·cp = 6" in e for e in engine_check(spec, ParallelConfig(cp=3, global_batch_size=2)))
