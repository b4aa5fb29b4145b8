"""Dead and hung ranks in a real training run: detected in seconds, named with axis and last op, every process
stopped, and the run restarted from its last checkpoint on the healthy devices (resharded when it must shrink);
an injected slow rank named as a straggler."""
import json, time
from dataclasses import replace
import psutil, pytest
from supernode_nb.foundation.config import MODEL_PRESETS, ParallelConfig
from supernode_nb.parallel.engine import reference_run
from supernode_nb.runtime.faults import RunFailed, stragglers
from supernode_nb.runtime.supervise import supervise
from supernode_nb.runtime.spec import make_spec
from supernode_nb.runtime.runner import run
from supernode_nb.runtime.recovery import run_with_recovery
from supernode_nb.foundation.layout import RankLayout
from supernode_nb.foundation.topology import get_topology

GPT2 = replace(MODEL_PRESETS["tiny-gpt"], layers=2)
LR, LOSS_RTOL = 1e-2, 1e-4
W = "supernode_nb.runtime.supervise:_steps_with_fault"



@pytest.fixture(scope="module", autouse=True)
def _warm_forkserver():
    "Start the ranks' forkserver (it imports torch once, seconds on a loaded machine) so timings measure the fault path."
    from supernode_nb.runtime.launch import spawn
    spawn("supernode_nb.runtime.launch:_echo_rank", 1)

def _no_children():
    time.sleep(0.3)
    return [
        p.pid
        for p in psutil.Process().children(recursive=True)
        if p.status() != psutil.STATUS_ZOMBIE and "multiprocessing" not in " ".join(p.cmdline())
    ]  # the forkserver and its resource tracker stay


def test_dead_rank_detected_and_run_resumes_resharded(tmp_path):
    cfg = ParallelConfig(dp=2, tp=2, global_batch_size=4)
    mark = tmp_path / "kill.json"
    spec = make_spec(GPT2, cfg, steps=5, lr=LR, checkpoint_dir=str(tmp_path / "ck"), checkpoint_every=2,
                     fault={"rank": 3, "step": 3, "kind": "kill", "mark": str(mark)})
    out = run_with_recovery(spec, topology=get_topology("local", devices=4))
    assert out["ok"] and len(out["attempts"]) == 2
    f = out["attempts"][0]["fault"]
    assert f["kind"] == "dead" and f["culprits"] == [3] and f["left"] == []
    r3 = f["ranks"][3]
    assert r3["detail"] == "killed by SIGKILL" and r3["coords"]["tp"] == 1 and r3["coords"]["dp"] == 1
    assert r3["last_op"] and r3["last_op"]["axis"] in ("tp", "dp") and f["axis"] in ("tp", "dp")
    detect = f["detected"] - json.loads(mark.read_text())["time"]
    print(f"dead rank detected {detect:.3f} s after SIGKILL; stop {f['stop_s']:.3f} s")
    assert detect < 2.0
    plan = out["attempts"][0]["plan"]
    assert plan["config"]["dp"] == 1 and plan["config"]["tp"] == 2 and plan["reshard"] and len(plan["unhealthy"]) == 1
    assert out["start"] == 2 and out["attempts"][1]["resharded"]
    assert out["restarts"][0]["resume_step"] == 2 and out["restarts"][0]["culprits"] == [3]
    ref = reference_run(GPT2, cfg, 5, lr=LR)["losses"]
    got = [out["losses"][s] for s in range(5)]                     # steps 0-1 from the first attempt, 2-4 resharded
    assert max(abs(a - b) / b for a, b in zip(got, ref)) <= LOSS_RTOL, (got, ref)
    assert _no_children() == []


def test_hung_rank_in_communication_detected_and_resumed_bit_identical(tmp_path):
    cfg = ParallelConfig(dp=2, tp=2, global_batch_size=4)
    mark = tmp_path / "hang.json"
    spec = make_spec(GPT2, cfg, steps=5, lr=LR, checkpoint_dir=str(tmp_path / "ck"), checkpoint_every=2,
                     fault={"rank": 1, "step": 3, "kind": "hang", "axis": "dp", "mark": str(mark)})
    out = run_with_recovery(spec, topology=get_topology("local", devices=5), hang_timeout_s=3.0)
    assert out["ok"]
    f = out["attempts"][0]["fault"]
    assert f["kind"] == "hung" and f["culprits"] == [1] and f["left"] == []
    assert f["ranks"][1]["inflight"]["op"] == "recv" and f["ranks"][1]["inflight"]["axis"] == "dp" and f["axis"] == "dp"
    assert all(f["ranks"][r]["state"] == "stopped" for r in (0, 2, 3))
    hang = f["detected"] - json.loads(mark.read_text())["time"]
    print(f"hung rank declared {hang:.2f} s after it blocked (timeout 3 s)")
    assert 3.0 <= hang < 6.0
    plan = out["attempts"][0]["plan"]
    assert not plan["reshard"] and plan["config"]["dp"] == 2 and out["attempts"][1]["resharded"] is False
    full = run(make_spec(GPT2, cfg, steps=5, lr=LR), hang_timeout_s=30)["losses"]     # the run that never failed
    assert [out["losses"][s] for s in range(5)] == full                                # same layout: bit-identical
    assert _no_children() == []


def test_hang_caught_by_group_timeout():
    "With the watchdog off, gloo's group timeout (set by the user) catches it: peers time out, the rank still running is hung."
    layout = RankLayout(dp=2)
    t0 = time.monotonic()
    with pytest.raises(RunFailed) as e:
        supervise(W, 2, 6, {"rank": 0, "step": 1, "kind": "sleep"}, layout=layout, hang_timeout_s=1e9, group_timeout_s=3.0)
    rep = e.value.report
    assert rep.kind == "hung" and rep.culprits == [0] and rep.left == []
    assert "imed out" in rep.ranks[1].detail or "timeout" in rep.ranks[1].detail.lower()
    assert time.monotonic() - t0 < 30
    assert _no_children() == []


def test_exception_is_a_failure_not_a_hang():
    with pytest.raises(RunFailed) as e:
        supervise(W, 2, 4, {"rank": 1, "step": 1, "kind": "bogus"}, hang_timeout_s=30)
    rep = e.value.report
    assert rep.kind == "failed" and rep.culprits == [1] and "fault kind 'bogus' unknown" in rep.ranks[1].detail


def test_injected_slow_rank_named_as_straggler_within_a_few_steps():
    "Rank 2 of dp2 × tp2 computes 4 × slower from step 1: named against its peers after three steps, and in the result."
    spec = make_spec("tiny-gpt", steps=5, dp=2, tp=2, global_batch_size=4, fault={"rank": 2, "step": 1, "kind": "slow", "factor": 4})
    res = run(spec, hang_timeout_s=60)
    steps = [s["ranks"] for s in res["steps"]]
    early = stragglers(steps[1:4])                                     # the live view after three slowed steps
    assert [s["rank"] for s in early] == [2], early
    assert [s["rank"] for s in res["stragglers"]] == [2], res["stragglers"]
    assert res["stragglers"][0]["score"] >= 1.5 and res["stragglers"][0]["axis"] in ("dp", "tp")
    print("straggler:", res["stragglers"][0])
