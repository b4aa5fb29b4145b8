"""`supernode-nb run --checkpoint-dir/--resume`: the command line path of issue 7, end to end."""
import json, subprocess, sys

def run(*args):
    r = subprocess.run([sys.executable, "-m", "supernode_nb.cli", "run", "--json", *args], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout)

def test_resume_same_layout_is_bit_identical(tmp_path):
    full = run("--world", "2", "--dp", "2", "--steps", "4")
    run("--world", "2", "--dp", "2", "--steps", "2", "--checkpoint-dir", str(tmp_path), "--checkpoint-every", "2")
    resumed = run("--world", "2", "--dp", "2", "--steps", "4", "--resume", str(tmp_path))
    assert [s["step"] for s in resumed["steps"]] == [2, 3]
    assert resumed["losses"] == full["losses"][2:]          # fp32, same layout: exactly equal

def test_resume_into_another_layout_matches_single_process(tmp_path):
    ref = run("--world", "1", "--steps", "6")
    first = run("--world", "8", "--dp", "2", "--tp", "2", "--pp", "2", "--steps", "4", "--checkpoint-dir", str(tmp_path),
                "--checkpoint-every", "2")
    resumed = run("--world", "8", "--dp", "4", "--pp", "2", "--steps", "6", "--resume", str(tmp_path))   # reshards
    got = first["losses"] + resumed["losses"]
    assert len(got) == 6
    for a, b in zip(got, ref["losses"]):
        assert abs(a - b) <= 1e-4 * abs(b), (got, ref["losses"])
