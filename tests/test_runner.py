"""`supernode-nb run` and `examples/train_torchrun.py` end to end: JSON shape, losses equal to the single-process run,
clean errors (status 1 / 2, no traceback), a Chrome trace, and no process left behind."""
import json, os, subprocess, sys, time, uuid
from pathlib import Path

import psutil
import pytest

from supernode_nb.foundation.core import free_port

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
KEYS = {"rank", "wall_s", "data_s", "compute_s", "comm_s", "bubble_s", "other_s", "tokens_per_s", "peak_mem_bytes"}


def _leftovers(tag, wait=5.0):
    "Processes still alive that carry this test's environment tag (the forkserver exits within moments of its parent)."
    t = time.monotonic()
    while True:
        out = []
        for p in psutil.process_iter(["pid"]):
            try:
                if p.environ().get("SNB_TEST_TAG") == tag and p.status() != psutil.STATUS_ZOMBIE: out.append(p.pid)
            except (psutil.Error, OSError): pass
        if not out or time.monotonic() - t > wait: return out
        time.sleep(0.2)


def _run(args, timeout=240):
    tag = uuid.uuid4().hex
    env = dict(os.environ, SNB_TEST_TAG=tag, OMP_NUM_THREADS="1")
    p = subprocess.run(args, capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT)
    assert _leftovers(tag) == [], "processes left running"
    return p


def _reference(steps=2, **cfg):
    "Losses of the single-process run (in this process) — what `supernode-nb run --world 1` prints."
    from supernode_nb.runtime.runner import make_spec, run
    return run(make_spec("tiny-gpt", steps=steps, **cfg))["losses"]


def _cli(*argv, timeout=240): return _run([str(BIN / "supernode-nb"), "run", *argv], timeout)


def test_run_json_matches_single_process():
    par = _cli("--world-size", "4", "--dp", "2", "--pp", "2", "--steps", "2", "--json")
    assert par.returncode == 0, par.stderr
    res = json.loads(par.stdout)
    assert set(res) >= {"config", "losses", "steps"} and len(res["losses"]) == 2
    assert res["config"]["parallel"]["dp"] == 2 and res["config"]["world_size"] == 4
    for st in res["steps"]:
        assert [r["rank"] for r in st["ranks"]] == [0, 1, 2, 3]
        for r in st["ranks"]:
            assert set(r) >= KEYS
            assert abs(r["data_s"] + r["compute_s"] + sum(r["comm_s"].values()) + r["bubble_s"] + r["other_s"] - r["wall_s"]) < 1e-9
            assert min(r["data_s"], r["bubble_s"], r["other_s"], *r["comm_s"].values()) >= 0 and r["compute_s"] > 0  # nothing counted twice
    stage1 = [r for r in res["steps"][1]["ranks"] if r["coords"]["pp"] == 1]
    assert all(r["bubble_s"] > 0 for r in stage1)                        # the last stage waits for the first
    ref = _reference(global_batch_size=8)                                # the CLI default (config.DEFAULT_GLOBAL_BATCH)
    assert all(abs(a - b) <= 1e-4 * abs(b) for a, b in zip(res["losses"], ref)), (res["losses"], ref)


def test_run_human_table_and_trace(tmp_path):
    trace = tmp_path / "trace.json"
    p = _cli("--world-size", "2", "--tp", "2", "--steps", "2", "--trace", str(trace))
    assert p.returncode == 0, p.stderr
    assert "step 2/2" in p.stderr                                         # progress while running
    lines = p.stdout.splitlines()
    assert lines[0].startswith("tiny-gpt on 2 rank(s): tp2") and "comm:tp" in lines[1]
    assert [ln.split()[0] for ln in lines[3:5]] == ["0", "1"]
    ev = json.loads(trace.read_text())["traceEvents"]
    cats = {e.get("cat") for e in ev}
    assert {"compute", "tp"} <= cats and {e["pid"] for e in ev} == {0, 1}


def test_moe_expert_parallel_counts():
    p = _cli("--world-size", "2", "--dp", "2", "--ep", "2", "--model", "tiny-moe", "--steps", "1", "--json")
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout)["steps"][0]["ranks"][0]
    assert len(r["expert_counts"]) == 8 and all(
        sum(c) == 4 * 32 * 2 for c in r["expert_counts"]
    )  # 8 layers; batch 8 / dp2 = 4 seq × 32 tokens × top-2
    assert set(r["comm_s"]) >= {"ep", "dp"}


@pytest.mark.parametrize("argv,code,text", [
    (["--world-size", "4", "--dp", "2"], 1, "= 2 ≠ world size 4"),
    (["--kv-heads", "2", "--tp", "4"], 1, "replicating key/value heads is not implemented"),   # what the engine lacks
    (["--ep", "2", "--dp", "2"], 1, "ep=2 needs an MoE model"),
    (["--steps", "x"], 2, "invalid int value"),
    (["--schedule", "zb"], 2, "invalid choice"),
])
def test_bad_config(argv, code, text, capsys):
    "In-process through the console script's `main`: status and a one-line-per-constraint message."
    from supernode_nb.cli import main
    assert main(["run", *argv]) == code
    out = capsys.readouterr()
    assert text in out.err and out.out == "", out


def test_bad_config_subprocess():
    "The real console script: status 1, every broken constraint, no traceback, nothing started."
    p = _cli("--world-size", "8", "--tp", "3", "--dp", "2", timeout=60)
    assert p.returncode == 1 and "heads=8 not divisible by tp=3" in p.stderr and "≠ world size 8" in p.stderr, p.stderr
    assert "Traceback" not in p.stderr and p.stdout == ""


def test_torchrun_example():
    port = free_port()
    p = _run([str(BIN / "torchrun"), "--nproc-per-node", "2", "--master-addr", "127.0.0.1", "--master-port", str(port),
              "examples/train_torchrun.py", "--pp", "2", "--micro-batches", "2", "--steps", "2", "--json"])
    assert p.returncode == 0, p.stderr[-2000:]
    res = json.loads(p.stdout)
    assert len(res["steps"][0]["ranks"]) == 2 and res["config"]["parallel"]["pp"] == 2
    ref = _reference(global_batch_size=2)
    assert all(abs(a - b) <= 1e-4 * abs(b) for a, b in zip(res["losses"], ref)), (res["losses"], ref)


@pytest.mark.timeout(240)
@pytest.mark.slow   # an ipyparallel cluster
def test_train_worker_on_ipyparallel_engines():
    "The same worker on a 2-engine ipyparallel cluster, each step's record streamed live through `cluster.publish`."
    from supernode_nb.runtime.cluster import Cluster
    from supernode_nb.runtime.worker import publish
    from supernode_nb.runtime.runner import make_spec, train_worker, assemble, run
    spec = make_spec("tiny-gpt", steps=3, tp=2, micro_batch_size=2, global_batch_size=4)
    with Cluster(2, timeout=20) as c:
        h = c.run_async(train_worker, spec, publish=publish)
        live = [(r["rank"], r["step"]) for r in h.stream(interval=0.05)]
        outs = h.wait()
    assert sorted(live) == [(r, s) for r in range(2) for s in range(3)]
    res = assemble(spec, outs)
    ref = run(spec)                                       # the same spec on local processes
    assert all(abs(a - b) <= 1e-6 * abs(b) for a, b in zip(res["losses"], ref["losses"])), (res["losses"], ref["losses"])
