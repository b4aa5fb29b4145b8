"""`make demo`'s job end to end: plan on CloudMatrix384 plus a real 8-rank dp2·tp2·pp2 run in one HTML report."""
import json, subprocess, sys
from pathlib import Path

def test_demo_runs_8_ranks_and_writes_report(tmp_path):
    out = tmp_path / "demo.html"
    r = subprocess.run([sys.executable, "-m", "supernode_nb.cli", "demo", "--out", str(out), "--run-steps", "2",
                        "--plotlyjs", "cdn", "--json"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    s = json.loads(r.stdout)
    assert s["world_size"] == 384 and len(s["run"]["losses"]) == 2
    doc = out.read_text()
    assert "Measured step breakdown per rank (8-rank run)" in doc and doc.count('class="plotly-graph-div"') == 8
    # the breakdown figure has one bar per rank in every trace
    assert all(f'"rank {k}"' in doc for k in range(8))
