"""`supernode-nb doctor` for real: the multi-process checks on this machine, and the command's exit status."""
import json, os, subprocess, sys, time
from supernode_nb.ops.doctor import doctor, LAYERS, leftover_processes
from supernode_nb.foundation.config import MODEL_PRESETS, ParallelConfig


def test_doctor_full_on_two_ranks():
    rep = doctor(world=2)
    assert [c.layer for c in rep.checks] == sorted((c.layer for c in rep.checks), key=LAYERS.index)
    assert set(rep.to_dict()["layers"]) == set(LAYERS)
    link, coll = rep.check("communication", "link setup"), rep.check("communication", "collectives")
    assert link.verdict == "ok" and 0 < link.data["seconds"] < 30
    bw = coll.data["busbw_GBps"]
    assert set(bw) == {str(1 << 20), str(16 << 20)} and all(v > 0 for v in bw.values())
    assert rep.check("framework", "strategy").verdict == "ok"
    assert "<table" in rep.to_html()


def test_doctor_no_process_left():
    import psutil
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    doctor(world=2, quick=True)
    time.sleep(0.5)
    assert {p.pid for p in psutil.Process().children(recursive=True)} - before == set()


def test_cli_doctor_json_and_exit_status():
    env = dict(os.environ)
    r = subprocess.run([sys.executable, "-m", "supernode_nb.cli", "doctor", "--quick", "--json"], capture_output=True, text=True, env=env, timeout=300)
    d = json.loads(r.stdout)
    assert r.returncode == (1 if d["verdict"] == "fail" else 0), r.stderr
    assert d["args"]["world"] == 2 and d["layers"]["communication"] in ("ok", "warn")
    r = subprocess.run([sys.executable, "-m", "supernode_nb.cli", "doctor", "--quick", "--world", "4", "--tp", "3", "--dp", "2"],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 1 and "tp(3) × cp(1) × dp(2) × pp(1) = 6 ≠ world size 4" in r.stdout
