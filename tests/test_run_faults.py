"""`runner.run` (behind `supernode-nb run` and the dashboard) under faults: a killed rank and a hung rank are named,
with axis and last op, within seconds; every rank is stopped and no process is left."""
import time
import psutil, pytest
from supernode_nb.runtime.launch import LaunchError
from supernode_nb.runtime.runner import make_spec, run


def _children():
    return [p for p in psutil.Process().children(recursive=True) if p.status() != psutil.STATUS_ZOMBIE]


@pytest.mark.parametrize("kind", ["kill", "hang"])
def test_fault_in_run_is_named_fast(kind):
    spec = make_spec("tiny-gpt", steps=6, dp=2, tp=2, global_batch_size=4)
    spec["fault"] = {"rank": 3, "step": 2, "kind": kind, "axis": "dp"}
    hang = 4.0
    t0 = time.monotonic()
    with pytest.raises(LaunchError) as e:
        run(spec, hang_timeout_s=hang)
    took = time.monotonic() - t0
    rep = e.value.report
    assert rep.kind == ("dead" if kind == "kill" else "hung"), rep.text()
    assert 3 in rep.culprits, rep.text()
    assert "rank 3" in str(e.value)
    if kind == "hang": assert rep.axis == "dp", rep.text()          # blocked in a dp recv
    assert rep.ranks[3].last_op is not None                          # what it was doing: its last recorded op
    assert took < (15 if kind == "kill" else hang + 15), took       # seconds, not gloo's 30-minute default
    assert rep.left == [] and _children() == []
