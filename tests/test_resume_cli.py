"""`supernode-nb run --checkpoint-dir/--resume/--max-restarts`: the command line path of issues 7 and 14 (§4), end to end."""
import json, os, subprocess, sys
import pytest

def run(*args, env=None):
    r = subprocess.run([sys.executable, "-m", "supernode_nb.cli", "run", "--json", *args], capture_output=True, text=True, timeout=600,
                       env={**os.environ, "SUPERNODE_NB_ARCHIVE": "off", **(env or {})})
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout)

@pytest.mark.slow   # real runs, checkpoints and restarts
def test_resume_same_layout_is_bit_identical(tmp_path):
    full = run("--world-size", "2", "--dp", "2", "--steps", "4")
    run("--world-size", "2", "--dp", "2", "--steps", "2", "--checkpoint-dir", str(tmp_path), "--checkpoint-every", "2")
    resumed = run("--world-size", "2", "--dp", "2", "--steps", "4", "--resume", str(tmp_path))
    assert [s["step"] for s in resumed["steps"]] == [2, 3]
    assert resumed["losses"] == full["losses"][2:]          # fp32, same layout: exactly equal

@pytest.mark.slow   # real runs, checkpoints and restarts
def test_resume_into_another_layout_matches_single_process(tmp_path):
    ref = run("--world-size", "1", "--steps", "6")
    first = run("--world-size", "8", "--dp", "2", "--tp", "2", "--pp", "2", "--steps", "4", "--checkpoint-dir", str(tmp_path),
                "--checkpoint-every", "2")
    resumed = run("--world-size", "8", "--dp", "4", "--pp", "2", "--steps", "6", "--resume", str(tmp_path))   # reshards
    got = first["losses"] + resumed["losses"]
    assert len(got) == 6
    for a, b in zip(got, ref["losses"]):
        assert abs(a - b) <= 1e-4 * abs(b), (got, ref["losses"])

@pytest.mark.slow   # real runs, checkpoints and restarts
def test_restart_after_kill_matches_single_process(tmp_path):
    "A kill at step 3 with --max-restarts 1: dp shrinks 2 → 1 on the 3 healthy devices, resharded from step 2; losses as one process."
    ref = run("--world-size", "1", "--steps", "5")
    out = run("--world-size", "4", "--dp", "2", "--tp", "2", "--steps", "5", "--checkpoint-dir", str(tmp_path / "ck"),
              "--checkpoint-every", "2", "--max-restarts", "1", "--inject-fault", "rank=3,step=3,kind=kill",
              env={"SUPERNODE_NB_ARCHIVE": "on", "SUPERNODE_NB_HOME": str(tmp_path / "home")})
    assert len(out["losses"]) == 5 and out["start"] == 2 and [s["step"] for s in out["steps"]] == [2, 3, 4]
    (r,) = out["restarts"]
    assert (r["kind"], r["culprits"], r["resume_step"], r["config"]["dp"], r["reshard"]) == ("dead", [3], 2, 1, True), r
    for a, b in zip(out["losses"], ref["losses"]):
        assert abs(a - b) <= 1e-4 * abs(b), (out["losses"], ref["losses"])
    from supernode_nb.foundation.store import Archive
    (rec,) = Archive(tmp_path / "home" / "archive.sqlite").list_runs()
    assert rec.outcome == "ok" and rec.extra["restarts"][0]["culprits"] == [3], rec.extra
