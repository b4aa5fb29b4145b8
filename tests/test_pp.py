"Pipeline parallelism: schedules as data (property tests) and the executor against a single process on 2-4 gloo ranks."
import os, tempfile

for _v in ("JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR", "IPYTHONDIR"):
    os.environ.setdefault(_v, tempfile.mkdtemp(prefix="snb_pp_"))

import pytest, torch
from torch import nn
from hypothesis import given, settings, strategies as st
from supernode_nb.comm.collectives import Comm, CommRecorder
from supernode_nb.runtime.launch import spawn
from supernode_nb.foundation.layout import RankLayout
from supernode_nb.parallel.schedules import (Action, SCHEDULES, Timeline, Event, check_schedule, layer_ranges, make_schedule,
                                             simulate, virtual_stage, _link)
from supernode_nb.parallel.pp import run_schedule

TOL = 1e-6   # fp32, absolute, on losses and gradients


# ---------------------------------------------------------------- schedules as data
@settings(max_examples=150, deadline=None)
@given(p=st.integers(1, 8), m=st.integers(1, 12), v=st.integers(2, 4), kind=st.sampled_from(SCHEDULES),
       t_b=st.sampled_from([1.0, 2.0, 3.0]), t_comm=st.sampled_from([0.0, 0.25]))
def test_schedule_invariants(p, m, v, kind, t_b, t_comm):
    if kind == "interleaved": m *= p
    sched = make_schedule(kind, p, m, v)
    pp, vv, mm = check_schedule(sched)
    assert (pp, mm) == (p, m)
    for s, acts in enumerate(sched):
        for c in range(vv):                     # m F and m B per chunk, F before B
            fs = [a.microbatch for a in acts if a.kind == "F" and a.chunk == c]
            bs = [a.microbatch for a in acts if a.kind == "B" and a.chunk == c]
            ws = [a.microbatch for a in acts if a.kind == "W" and a.chunk == c]
            assert sorted(fs) == sorted(bs) == list(range(m)) and sorted(ws) == (list(range(m)) if kind == "zb-h1" else [])
            for i in range(m): assert acts.index(Action("F", i, c)) < acts.index(Action("B", i, c))
            for i in ws: assert acts.index(Action("B", i, c)) < acts.index(Action("W", i, c))
    # every send has exactly one matching receive, in the same order on both ends of a link
    sends, recvs = {}, {}
    for s, acts in enumerate(sched):
        for a in acts:
            if not a.is_compute:
                src, dst, msg = _link(a, s, p)
                (sends if a.kind.startswith("SEND") else recvs).setdefault((src, dst), []).append(msg)
    assert sends == recvs
    tl = simulate(sched, 1.0, t_b, t_comm)      # no deadlock
    n_compute = sum(1 for e in tl.events if e.kind in ("F", "B", "W"))
    assert n_compute == (3 if kind == "zb-h1" else 2) * m * p * vv
    if t_comm == 0 and kind in ("gpipe", "1f1b"):
        assert abs(tl.bubble_fraction - (p - 1) / (m + p - 1)) < 1e-9
    if t_comm == 0 and kind == "zb-h1" and t_b == 2.0 and m >= p:      # t_B = t_W = t_F
        assert abs(tl.bubble_fraction - (p - 1) / (3 * m + p - 1)) < 1e-9
    if t_comm == 0 and kind == "interleaved" and t_b == 1.0:
        assert abs(tl.bubble_fraction - (p - 1) / (v * m + p - 1)) < 1e-9


def test_1f1b_memory_and_comm_cost():
    "1F1B holds <= p - s micro-batches per stage; interleaving sends v times the messages."
    p, m = 4, 8
    tl = simulate(make_schedule("1f1b", p, m))
    assert [tl.peak_in_flight(s) for s in range(p)] == [4, 3, 2, 1]
    n_msgs = lambda sc: sum(1 for acts in sc for a in acts if a.kind.startswith("SEND"))
    assert n_msgs(make_schedule("interleaved", p, m, 2)) == 2 * n_msgs(make_schedule("1f1b", p, m)) + 2 * m


@pytest.mark.parametrize(
    "kind,p,v,m",
    [
        ("gpipe", 4, 1, 8),
        ("1f1b", 4, 1, 8),
        ("1f1b", 4, 1, 2),
        ("zb-h1", 4, 1, 8),
        ("interleaved", 2, 2, 4),
        ("interleaved", 4, 2, 16),
        ("interleaved", 4, 3, 8),
        ("interleaved", 4, 2, 4),
    ],
)
def test_cost_model_in_flight_is_the_schedules(kind, p, v, m):
    "The micro-batches (stages' worth) the cost model's memory holds on the first and last stage are the simulator's peak chunks / v."
    from supernode_nb.cost.memory import in_flight
    tl = simulate(make_schedule(kind, p, m, v) if kind == "interleaved" else make_schedule(kind, p, m))
    for stage, s in (("first", 0), ("last", p - 1)):
        if kind == "zb-h1" and stage == "last": continue   # its later stages hold micro-batches waiting only for their weight
        assert abs(in_flight(kind, p, m, v, stage) - tl.peak_in_flight(s) / v) < 1e-9, (stage, tl.peak_in_flight(s))   # gradients


def test_simulate_with_comm_latency():
    "With t_comm > 0 each stage boundary adds latency: GPipe's makespan grows by 2(p-1)·t_comm."
    p, m = 4, 6
    base = simulate(make_schedule("gpipe", p, m), 1, 2).makespan
    slow = simulate(make_schedule("gpipe", p, m), 1, 2, t_comm=0.5).makespan
    assert abs(slow - base - 2 * (p - 1) * 0.5) < 1e-9


def test_errors_name_the_numbers():
    with pytest.raises(ValueError, match="m=6 micro-batches must be a multiple of p=4"): make_schedule("interleaved", 4, 6, 2)
    with pytest.raises(ValueError, match="m=0"): make_schedule("1f1b", 2, 0)
    with pytest.raises(ValueError, match="action kind 'X'"): Action("X", 0)
    with pytest.raises(ValueError, match="piece sizes"): layer_ranges(4, 2, sizes=[1, 1])


# ---------------------------------------------------------------- the executor, against one process
@pytest.mark.parametrize("kind,p,v,m,n_layers", [
    ("gpipe", 4, 1, 8, 4), ("1f1b", 4, 1, 8, 8), ("zb-h1", 4, 1, 8, 8), ("zb-h1", 3, 1, 5, 7), ("1f1b", 3, 1, 5, 7), ("1f1b", 4, 1, 2, 4),
    ("interleaved", 4, 2, 8, 8), ("interleaved", 2, 3, 4, 6), ("gpipe", 2, 1, 1, 3)])
def test_parity(kind, p, v, m, n_layers):
    res = spawn("supernode_nb.parallel.pp:_pp_parity", p, kind=kind, m=m, v=v, n_layers=n_layers, steps=2, timeout_s=120)
    for r in res:
        assert r["loss_diff"] < TOL and r["grad_diff"] < TOL, (r["loss_diff"], r["grad_diff"])
    assert all(r["losses"] == res[0]["losses"] for r in res)          # the loss on every rank
    assert sorted(j for r in res for js in r["layers"] for j in js) == list(range(n_layers))
    tl = Timeline.merge([Timeline([Event(**e) for e in r["events"]], p) for r in res])
    assert sum(e.kind == "F" for e in tl.events) == m * p * v
    assert sum(e.kind == "W" for e in tl.events) == (m * p if kind == "zb-h1" else 0)
    assert 0 <= tl.bubble_fraction < 1


def _lm_worker(rank, world_size, kind="1f1b", m=4):
    "Token inputs on the first stage (embedding), logits + cross-entropy on the last; records the p2p traffic."
    torch.manual_seed(0)
    V, h, b, s = 11, 6, 2, 5
    emb, mid, head = nn.Embedding(V, h), nn.Sequential(nn.Linear(h, h), nn.Tanh()), nn.Linear(h, V)
    ref = nn.Sequential(emb, mid, head)
    toks = torch.randint(0, V, (m * b, s), generator=torch.Generator().manual_seed(3))
    tgt = torch.randint(0, V, (m * b, s), generator=torch.Generator().manual_seed(4))
    ce = lambda logits, t: nn.functional.cross_entropy(logits.reshape(-1, V), t.reshape(-1))
    want = ce(ref(toks), tgt); want.backward()
    ref_grads = {k: p.grad.clone() for k, p in ref.named_parameters()}
    ref.zero_grad()
    rec = CommRecorder(rank)
    comm = Comm.from_layout(RankLayout(pp=world_size), rank, rec, axes=("pp",))
    chunk = nn.Sequential(emb, mid) if rank == 0 else head
    res = run_schedule(make_schedule(kind, world_size, m)[rank], [chunk], comm,
                       list(toks.chunk(m)) if rank == 0 else None, list(tgt.chunk(m)) if rank == 1 else None,
                       ce, (b, s, h))
    grads = {k: (p.grad - ref_grads[k]).abs().max().item() for k, p in ref.named_parameters() if p.grad is not None}
    pp_wait = sum(r.wait_s for r in rec.records if r.axis == "pp")
    return dict(loss_diff=abs(res.loss - want.item()), grads=grads, ops=sorted({r.op for r in rec.records}),
                n_p2p_bytes=sum(r.nbytes for r in rec.records if r.op in ("send", "recv", "p2p")),
                bubble_s=res.bubble_s, pp_wait=pp_wait, compute_s=res.compute_s, wall_s=res.wall_s)


@pytest.mark.parametrize("kind", ["gpipe", "1f1b", "zb-h1"])
def test_token_pipeline_and_records(kind):
    m = 4
    res = spawn(_lm_worker, 2, kind=kind, m=m)
    for r in res:
        assert r["loss_diff"] < TOL
        assert r["grads"] and max(r["grads"].values()) < TOL
        assert set(r["ops"]) <= {"send", "recv", "p2p", "broadcast"}
        # bubble_s covers the recorded p2p waits (plus the final waits), and the parts fit in the wall time
        assert r["pp_wait"] <= r["bubble_s"] + 1e-3
        assert r["compute_s"] + r["bubble_s"] <= r["wall_s"] + 1e-6
    assert {k for r in res for k in r["grads"]} == {"0.weight", "1.0.weight", "1.0.bias", "2.weight", "2.bias"}
    act_bytes = 2 * 5 * 6 * 4
    assert res[0]["n_p2p_bytes"] == 2 * m * act_bytes        # m activations out, m gradients in


def _gpt_worker(rank, world_size, kind="1f1b", v=1, m=4, b=2):
    "A's GPT cut with model.stage_module, run by our executor, vs the whole GPT on the whole batch."
    from dataclasses import replace
    from supernode_nb.foundation.config import MODEL_PRESETS
    from supernode_nb.parallel.model import GPT, loss_fn, stage_module
    spec = replace(MODEL_PRESETS["tiny-gpt"], layers=4)
    ref, model = GPT(spec, 0), GPT(spec, 0)
    g = torch.Generator().manual_seed(9)
    x = torch.randint(0, spec.vocab, (m * b, spec.seq_len), generator=g)
    y = torch.randint(0, spec.vocab, (m * b, spec.seq_len), generator=g)
    want = loss_fn(ref(x), y); want.backward()
    comm = Comm.from_layout(RankLayout(pp=world_size), rank, axes=("pp",))
    chunks = [stage_module(model, virtual_stage(rank, c, world_size), world_size * v) for c in range(v)]
    res = run_schedule(make_schedule(kind, world_size, m, v)[rank], chunks, comm,
                       list(x.chunk(m)) if rank == 0 else None, list(y.chunk(m)) if rank == world_size - 1 else None,
                       loss_fn, (b, spec.seq_len, spec.hidden))
    refp = dict(ref.named_parameters())
    diffs = {k: (p.grad - refp[k].grad).abs().max().item() for k, p in model.named_parameters() if p.grad is not None}
    return dict(loss_diff=abs(res.loss - want.item()), diffs=diffs, names=sorted(refp))


@pytest.mark.parametrize("kind,v", [("1f1b", 1), ("gpipe", 1), ("interleaved", 2), ("zb-h1", 1)])
def test_gpt_stages_parity(kind, v):
    res = spawn(_gpt_worker, 2, kind=kind, v=v)
    for r in res:
        assert r["loss_diff"] < TOL and max(r["diffs"].values()) < TOL, (r["loss_diff"], max(r["diffs"].values()))
    assert sorted(k for r in res for k in r["diffs"]) == res[0]["names"]     # every parameter on exactly one stage
