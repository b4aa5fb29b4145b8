"Data parallelism on 3-4 gloo ranks: parity with one process, expert / dp-cp groups, ZeRO-1 padding, DP x PP."
import os, tempfile

for _v in ("JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR", "IPYTHONDIR"):
    os.environ.setdefault(_v, tempfile.mkdtemp(prefix="snb_dp_"))

import time
import pytest, torch
from torch import nn
from supernode_nb.comm.collectives import Comm, CommRecorder
from supernode_nb.parallel.dp import DataParallel, ZeroOptimizer, make_buckets, _dp_parity
from supernode_nb.runtime.launch import spawn
from supernode_nb.foundation.layout import RankLayout
from supernode_nb.parallel.pp import layer_ranges, make_schedule, run_schedule, toy_blocks

TOL = 1e-6   # fp32, absolute, on gradients, parameters and losses
torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=0.1)   # import torch._dynamo once, before forking ranks


@pytest.mark.parametrize("mode", ["overlap", "no_overlap", "accum", "zero"])
def test_parity_4_ranks(mode):
    res = spawn(_dp_parity, 4, mode=mode, steps=3, bucket_bytes=600, n=8)
    for r in res:
        assert r["grad_diff"] < TOL and r["param_diff"] < TOL, (r["grad_diff"], r["param_diff"])
        assert r["params"] == res[0]["params"]


def test_zero_pads_uneven_shards():
    "484 parameters over 3 ranks: 162 per shard, 2 elements of padding; still equal to AdamW on the whole batch."
    res = spawn(_dp_parity, 3, mode="zero", steps=3, n=12)
    for r in res: assert r["param_diff"] < TOL, r["param_diff"]


def test_local_sgd_4_ranks():
    res = spawn(_dp_parity, 4, mode="local", opt="sgd", steps=4)
    for r in res: assert r["param_diff"] < TOL
    assert [op for op, _, _ in res[0]["ops"]] == ["all_reduce"] * 3 * 2      # 3 buckets, synced at steps 2 and 4
    assert all(r["params"] == res[0]["params"] for r in res)                # step 4 synced: equal again


def _expert_groups(rank, world_size, zero=False):
    "Dense params reduce over dp (4 ranks), expert params over edp (2 ranks); both divided by the dp size."
    comm = Comm.from_layout(RankLayout(dp=4, ep=2), rank, axes=("dp", "ep", "edp"))
    dense, expert = nn.Parameter(torch.zeros(3)), nn.Parameter(torch.zeros(5))
    groups = [([dense], "dp"), ([expert], "edp")]
    if zero: opt = ZeroOptimizer(groups, comm, optim_cls=torch.optim.SGD, lr=1.0)
    else: dp = DataParallel(groups, comm)
    ((dense * (rank + 1)).sum() + (expert * (rank + 1)).sum()).backward()
    if zero: opt.step(); return dense.tolist(), expert.tolist(), comm.peers("edp")
    dp.finish()
    return dense.grad.tolist(), expert.grad.tolist(), comm.peers("edp")


@pytest.mark.parametrize("zero", [False, True])
def test_expert_groups(zero):
    res = spawn(_expert_groups, 4, zero=zero)
    sign = -1.0 if zero else 1.0                       # SGD with lr=1 from zero: params = -averaged grads
    for d, e, edp in res:
        assert d == [sign * 2.5] * 3
        assert len(edp) == 2 and e == [sign * sum(r + 1 for r in edp) / 4] * 5
    assert sorted(tuple(edp) for *_, edp in res) == [(0, 2), (0, 2), (1, 3), (1, 3)]


def _dp_cp(rank, world_size):
    comm = Comm.from_layout(RankLayout(cp=2, dp=2), rank, axes=("dp", "cp", "dp-cp"))
    w = nn.Parameter(torch.ones(4))
    dp = DataParallel([([w], "dp-cp")], comm)
    (w * (rank + 1)).sum().backward(); dp.finish()
    return w.grad.tolist()


def test_dp_cp_axis():
    for g in spawn(_dp_cp, 4): assert g == [2.5] * 4


def _dp_pp(rank, world_size, kind="1f1b", m=4, steps=2, zero=False, b=2, h=8):
    "dp2 x pp2: each dp replica pipelines its half of the global batch; vs the whole model on the whole batch."
    rec = CommRecorder(rank)
    comm = Comm.from_layout(RankLayout(dp=2, pp=2), rank, rec, axes=("dp", "pp"))
    s, d = comm.index("pp"), comm.index("dp")
    blocks, ref = toy_blocks(4, h), toy_blocks(4, h)
    chunk = nn.Sequential(*blocks[slice(*layer_ranges(4, 2)[s])])
    params = list(chunk.parameters())
    mk = lambda ps: torch.optim.AdamW(ps, lr=1e-2, weight_decay=0.1)
    ropt = mk(ref.parameters())
    if zero: dp, opt = None, ZeroOptimizer(params, comm, "dp", torch.optim.AdamW, lr=1e-2, weight_decay=0.1)
    else: dp, opt = DataParallel([(params, "dp")], comm, bucket_bytes=300), mk(params)
    mse, sched = nn.functional.mse_loss, make_schedule(kind, 2, m)[s]
    out = dict(loss_diff=0.0, grad_diff=0.0, param_diff=0.0, dp_during_pipeline=False)
    for step in range(steps):
        g = torch.Generator().manual_seed(50 + step)
        X, Y = torch.randn(2 * m * b, h, generator=g), torch.randn(2 * m * b, h, generator=g)
        ropt.zero_grad(); want = mse(nn.Sequential(*ref)(X), Y); want.backward()
        opt.zero_grad()
        n0 = len(rec.records)
        res = run_schedule(sched, [chunk], comm, list(X.chunk(2)[d].chunk(m)), list(Y.chunk(2)[d].chunk(m)), mse, (b, h),
                           grad_sync=dp)
        t_end = time.monotonic()
        if dp:
            dp.finish()
            dp_recs = [r for r in rec.records[n0:] if r.axis == "dp"]
            out["dp_during_pipeline"] |= bool(dp_recs) and dp_recs[0].start < t_end
            ref_params = [p for j in range(*layer_ranges(4, 2)[s]) for p in ref[j].parameters()]
            out["grad_diff"] = max(out["grad_diff"], max((a.grad - r_.grad).abs().max().item() for a, r_ in zip(params, ref_params)))
        loss = comm.all_reduce(torch.tensor([res.loss]), "dp")[0].item() / 2        # mean over the two replicas
        out["loss_diff"] = max(out["loss_diff"], abs(loss - want.item()))
        opt.step(); ropt.step()
        ref_params = [p for j in range(*layer_ranges(4, 2)[s]) for p in ref[j].parameters()]
        out["param_diff"] = max(out["param_diff"], max((a - r_).abs().max().item() for a, r_ in zip(params, ref_params)))
    return out


@pytest.mark.parametrize("kind,zero", [("gpipe", False), ("1f1b", False), ("1f1b", True)])
def test_dp2_pp2_parity(kind, zero):
    res = spawn(_dp_pp, 4, kind=kind, zero=zero)
    for r in res:
        assert r["loss_diff"] < TOL and r["grad_diff"] < TOL and r["param_diff"] < TOL, r
        if not zero: assert r["dp_during_pipeline"]      # buckets reduced during the last backwards


def test_bucket_launch_order_is_fixed():
    "Buckets cover every parameter exactly once, in reverse order, with indices 0..n-1."
    m = nn.Sequential(*[nn.Linear(8, 8) for _ in range(5)])
    bs = make_buckets([(list(m.parameters()), "dp")], bucket_bytes=300)
    flat = [p for b in bs for p in b.params]
    assert [id(p) for p in flat] == [id(p) for p in reversed(list(m.parameters()))]
    assert [b.index for b in bs] == list(range(len(bs))) and all(b.nbytes <= 300 or len(b.params) == 1 for b in bs)


def _reduce_dtype(rank, world_size, reduce_dtype):
    "bf16 gradients all-reduced in `reduce_dtype`: the averaged gradient as each rank sees it."
    comm = Comm.from_layout(RankLayout(dp=world_size), rank, axes=("dp",))
    p = nn.Parameter(torch.zeros(4, dtype=torch.bfloat16))
    dp = DataParallel([([p], "dp")], comm, reduce_dtype=reduce_dtype)
    (p * torch.tensor([1.0, 1 / 3, 1e-3, 300.0], dtype=torch.bfloat16) * (rank + 1)).sum().backward()
    dp.finish()
    return p.grad.dtype, p.grad.float().tolist()


@pytest.mark.parametrize("reduce_dtype", ["fp32", "bf16"])
def test_bf16_grads_reduced_in_either_dtype(reduce_dtype):
    res = spawn(_reduce_dtype, 2, reduce_dtype)
    want = torch.tensor([1.0, 1 / 3, 1e-3, 300.0], dtype=torch.bfloat16).float() * 1.5     # mean of (rank + 1) over 2 ranks
    for dt, g in res:
        assert dt == torch.bfloat16 and g == res[0][1]
        assert torch.allclose(torch.tensor(g), want, rtol=2 ** -7)
