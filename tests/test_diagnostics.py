"""`supernode-nb doctor` for real: the multi-process checks on this machine, and the command's exit status."""
import json, os, subprocess, sys, time
from supernode_nb.ops.doctor import doctor, LAYERS, leftover_processes
from supernode_nb.foundation.config import MODEL_PRESETS, ParallelConfig


def test_doctor_full_on_two_ranks():
    rep = doctor(world=2, timeout_s=120)          # 2 cores shared with other jobs: starting 2 ranks can take 30 s
    assert [c.layer for c in rep.checks] == sorted((c.layer for c in rep.checks), key=LAYERS.index)
    assert set(rep.to_dict()["layers"]) == set(LAYERS)
    link, coll = rep.check("communication", "link setup"), rep.check("communication", "collectives")
    assert link.verdict == "ok" and 0 < link.data["seconds"] < 120, link
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
    r = subprocess.run(
        [sys.executable, "-m", "supernode_nb.cli", "doctor", "--quick", "--json"], capture_output=True, text=True, env=env, timeout=300
    )
    d = json.loads(r.stdout)
    checks = {(c["layer"], c["name"]): c for c in d["checks"]}
    assert checks[("communication", "link setup")]["verdict"] == "ok", checks[("communication", "link setup")]  # 2 ranks joined
    assert checks[("communication", "collectives")]["data"]["busbw_GBps"][str(1 << 20)] > 0
    assert checks[("framework", "strategy")]["verdict"] == "ok" and checks[("network", "binding")]["verdict"] == "skipped"
    fails = [c for c in d["checks"] if c["verdict"] == "fail"]
    assert all(c["next"] for c in fails), fails   # the exit status itself: test_cli_doctor_exit_status (this host's load may warn or fail)
    assert d["args"]["world"] == 2 and set(d["layers"]) == set(LAYERS)
    r = subprocess.run([sys.executable, "-m", "supernode_nb.cli", "doctor", "--quick", "--world-size", "4", "--tp", "3", "--dp", "2"],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 1 and "tp(3) × cp(1) × dp(2) × pp(1) = 6 ≠ world size 4" in r.stdout


def test_cli_doctor_exit_status(monkeypatch, capsys):
    "1 exactly when a check fails (a warning or a skip is not a failure), with checks whose verdicts are known."
    import supernode_nb.ops.doctor as dg
    from supernode_nb.ops.report import Check
    ok = lambda ctx: [Check("model", "known good", verdict="ok", detail="fine")]
    warn = lambda ctx: [Check("scheduling", "known busy", verdict="warn", detail="busy", next="wait")]
    bad = lambda ctx: [Check("physical", "known broken", verdict="fail", detail="broken", next="fix it")]
    for checks, status in (([ok], 0), ([ok, warn], 0), ([ok, bad], 1), ([bad, warn], 1)):
        monkeypatch.setattr(dg, "CHECKS", checks)
        assert dg.cli_doctor(["--quick", "--json"]) == status, [f.__name__ for f in checks]
        assert json.loads(capsys.readouterr().out)["verdict"] == ("fail" if status else ("warn" if warn in checks else "ok"))


def test_cli_doctor_flags_a_misbound_plane_and_a_slow_link(tmp_path):
    "On this machine's local topology (the big-cluster case, with its step-time cost, is in test_planes.py)."
    cb = tmp_path / "cb.json"
    cb.write_text(json.dumps([{"op": "all_reduce", "bytes": 16 << 20, "group_size": 2, "time_s": 1.6, "algbw_gbps": 0.01,
                               "busbw_gbps": 0.01}]))
    r = subprocess.run([sys.executable, "-m", "supernode_nb.cli", "doctor", "--quick", "--json", "--world-size", "2",
                        "--binding", "parameter=eth0", "--commbench", str(cb)], capture_output=True, text=True, timeout=300)
    d = json.loads(r.stdout)
    net = {c["name"]: c for c in d["checks"] if c["layer"] == "network"}
    assert net["binding"]["verdict"] == "warn", net["binding"]      # same speed on loopback: isolation lost, not slower
    assert "every node: parameter traffic leaves on eth0, wired to the management plane (isolation lost)" in net["binding"]["detail"]
    assert net["link speed"]["verdict"] == "warn" and "loopback 0.01 GB/s busbw (1% of 0.8)" in net["link speed"]["detail"]
    assert d["args"]["binding"] == {"parameter": "eth0"} and r.returncode == (1 if d["verdict"] == "fail" else 0)
