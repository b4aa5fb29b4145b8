"""`runner.run` (behind `supernode-nb run` and the dashboard) under faults: a killed, exited and hung rank are named,
with axis and last op, within seconds; every rank is stopped and no process is left. The same from the command line
(`--inject-fault`), with clear errors for malformed fault specs."""
import subprocess, sys, time
import psutil, pytest
from supernode_nb.runtime.launch import LaunchError
from supernode_nb.runtime.faults import RunFailed
from supernode_nb.runtime.spec import make_spec
from supernode_nb.runtime.runner import run



@pytest.fixture(scope="module", autouse=True)
def _warm_forkserver():
    "Start the ranks' forkserver (it imports torch once, seconds on a loaded machine) so timings measure the fault path."
    from supernode_nb.runtime.launch import spawn
    spawn("supernode_nb.runtime.launch:_echo_rank", 1)

def _children():
    return [
        p
        for p in psutil.Process().children(recursive=True)
        if p.status() != psutil.STATUS_ZOMBIE and "multiprocessing" not in " ".join(p.cmdline())
    ]  # the forkserver and its resource tracker stay


@pytest.mark.parametrize("kind", ["kill", "hang", "exit"])
def test_fault_in_run_is_named_fast(kind):
    spec = make_spec("tiny-gpt", steps=6, dp=2, tp=2, global_batch_size=4, fault={"rank": 3, "step": 2, "kind": kind, "axis": "dp"})
    hang = 4.0
    t0 = time.monotonic()
    with pytest.raises(LaunchError) as e:
        run(spec, hang_timeout_s=hang)
    took = time.monotonic() - t0
    assert isinstance(e.value, RunFailed)
    rep = e.value.report
    assert rep.kind == ("hung" if kind == "hang" else "dead"), rep.text()
    assert 3 in rep.culprits, rep.text()
    assert "rank 3" in str(e.value)
    if kind == "hang": assert rep.axis == "dp", rep.text()          # blocked in a dp recv
    if kind == "exit": assert rep.ranks[3].detail == "exited with code 3 without a result", rep.text()
    assert rep.ranks[3].last_op is not None                          # what it was doing: its last recorded op
    assert took < (15 if kind != "hang" else hang + 15), took       # seconds, not gloo's 30-minute default
    assert rep.left == [] and _children() == []


def _cli(*argv):
    return subprocess.run([sys.executable, "-m", "supernode_nb.cli", "run", *argv], capture_output=True, text=True, timeout=300,
                          env={**__import__("os").environ, "SUPERNODE_NB_ARCHIVE": "off"})


def test_cli_inject_fault_reports_and_exits_1():
    p = _cli("--world-size", "2", "--dp", "2", "--steps", "4", "--inject-fault", "rank=1,step=1,kind=kill")
    assert p.returncode == 1, p.stderr
    assert "dead rank 1" in p.stderr and "killed by SIGKILL" in p.stderr and "Traceback" not in p.stderr, p.stderr


@pytest.mark.parametrize("spec,text", [
    ("rank=1,kind=kill", "--inject-fault: step= is missing"),
    ("rank=one,step=1,kind=kill", "--inject-fault: rank='one' is not an integer"),
    ("rank=1,step=1,kind=melt", "fault kind 'melt' unknown; use kill, exit, hang, sleep, slow, mismatch"),
    ("rank=1,step=1,kind=slow,factor=1", "factor=1.0 must be > 1 for kind slow"),
    ("rank=5,step=1,kind=kill", "fault rank=5 outside 0..1"),
    ("rank=1,step=9,kind=kill", "fault step=9 outside 0..3"),
    ("rank=1,step,kind=kill", "'step' is not key=value"),
])
def test_malformed_fault_spec_is_a_clear_error(spec, text, capsys):
    from supernode_nb.cli import main
    assert main(["run", "--world-size", "2", "--dp", "2", "--steps", "4", "--inject-fault", spec]) == 1
    err = capsys.readouterr().err
    assert text in err and "Traceback" not in err, err


def test_cli_mismatch_explained_by_the_flight_recorder():
    "Rank 1 calls all_gather where rank 0 calls the step's all_reduce: hung, and the cause line names rank, group and op."
    p = _cli(
        "--world-size", "2", "--dp", "2", "--steps", "4", "--hang-timeout", "4", "--inject-fault", "rank=1,step=1,kind=mismatch,axis=dp"
    )
    assert p.returncode == 1, p.stderr
    assert "hung rank 1 on axis dp" in p.stderr, p.stderr
    assert "cause [mismatch] rank 1: rank 1 is in all_gather" in p.stderr and "where rank 0 is in all_reduce" in p.stderr, p.stderr
