"""The `supernode-nb` command line as a script sees it: JSON on stdout, exit statuses, one-line errors."""
import json, subprocess, sys
from pathlib import Path
import pytest
from procs import cli

def test_validate_reports_every_error_and_exits_1():
    r = cli("validate", "--model", "llama3-8b", "--tp", "3", "--pp", "5", "--dp", "2", "--world-size", "32", "--json")
    assert r.returncode == 1, r.stderr
    out = json.loads(r.stdout)
    assert out["ok"] is False
    text = "\n".join(out["errors"])
    for frag in ("≠ world size 32", "heads=32 not divisible by tp=3", "ffn_hidden=14336 not divisible by tp=3",
                 "layers=32 not divisible into pp(5)"):
        assert frag in text, (frag, text)

def test_validate_ok_exits_0():
    r = cli("validate", "--model", "tiny-moe", "--tp", "2", "--pp", "2", "--dp", "2", "--ep", "2", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["ok"] is True

def test_layout_json_groups():
    r = cli("layout", "--tp", "2", "--pp", "2", "--dp", "2", "--ep", "2", "--cp", "1", "--order", "tp-cp-ep-dp-pp", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["world_size"] == 8
    g = out["groups"]
    assert g["tp"] == [[0, 1], [2, 3], [4, 5], [6, 7]] and g["pp"] == [[0, 4], [1, 5], [2, 6], [3, 7]]
    assert g["ep"] == [[0, 2], [1, 3], [4, 6], [5, 7]] and g["edp"] == [[r] for r in range(8)]
    for ax in ("tp", "cp", "dp", "pp", "ep", "edp"):
        assert sorted(r for grp in g[ax] for r in grp) == list(range(8))

@pytest.mark.parametrize("args", [("validate", "--tp", "two"), ("layout", "--order"), ("layout", "--bogus", "1"),
                                  ("validate", "--schedule", "zigzag"), ("nonsense",)])
def test_bad_arguments_one_line_exit_2(args):
    r = cli(*args)
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr, r.stderr

def test_layout_bad_degrees_is_a_clean_error():
    r = cli("layout", "--dp", "2", "--ep", "4")
    assert r.returncode == 1 and r.stderr == "supernode-nb layout: error: ep=4 must divide dp(2) × cp(1) = 2\n", r.stderr

def test_console_script_passes_exit_statuses_through():
    "The installed `supernode-nb` (its `entry`, which skips the interpreter's last garbage collection) exits as `main` returns."
    from pathlib import Path
    exe = Path(sys.executable).with_name("supernode-nb")
    for args, rc in (
        (["nonsense"], 2),
        (["validate", "--tp", "3", "--world-size", "4"], 1),
        (["validate", "--tp", "2", "--world-size", "2", "--json"], 0),
    ):
        r = subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=120)
        assert r.returncode == rc, (args, r.returncode, r.stderr)
    assert json.loads(r.stdout)["ok"] is True           # what was printed before the exit is all there

def test_reader_closing_the_pipe_stops_quietly():
    "`supernode-nb ... | head`: when the reader has gone, the command exits 141 (128 + SIGPIPE) without a traceback or an error line."
    import os
    r, w = os.pipe(); os.close(r)                          # a reader that has already left
    try: p = subprocess.run([sys.executable, "-m", "supernode_nb.cli", "layout", "--tp", "2", "--dp", "2", "--json"], stdout=w,
                            stderr=subprocess.PIPE, text=True, timeout=120)
    finally: os.close(w)
    assert p.returncode == 141 and p.stderr == "", (p.returncode, p.stderr)

H200 = Path(__file__).resolve().parents[1] / "examples" / "topologies" / "dgx-h200.toml"
OFF = {"SUPERNODE_NB_ARCHIVE": "off"}

def test_a_topology_file_goes_where_a_preset_goes():
    "estimate, plan and place take the repository's H200 example; the estimate prices its memory and the die it is tied to."
    r = cli("estimate", "--model", "llama3-70b", "--topology", H200, "--tp", "8", "--pp", "4", "--dp", "8", "--global-batch-size", "512",
            "--sequence-parallel", "--json", env=OFF)
    assert r.returncode == 0, r.stderr
    e = json.loads(r.stdout)
    assert (e["topology"], e["devices"], e["memory_limit_bytes"]) == ("dgx-h200", 256, 131 * 2**30)
    assert e["efficiency_source"] == "fitted to published runs of the H100 family", e["efficiency_source"]
    assert "of the H100 family" in e["expected_error"]["published"]["basis"]   # the H200 is priced and scored as its die
    h100 = json.loads(cli("estimate", "--model", "llama3-70b", "--topology", "dgx-h100-superpod", "--tp", "8", "--pp", "4", "--dp", "8",
                          "--global-batch-size", "512", "--sequence-parallel", "--json", env=OFF).stdout)
    assert e["step_time_s"] < h100["step_time_s"]  # the same compute with faster HBM: never slower
    p = cli(
        "plan",
        "--model",
        "llama3-70b",
        "--topology",
        H200,
        "--global-batch-size",
        "512",
        "--devices",
        "64",
        "--top",
        "1",
        "--json",
        env=OFF,
    )
    assert p.returncode == 0 and json.loads(p.stdout)["topology"] == "dgx-h200", p.stderr
    assert cli("place", "--topology", H200, "--tp", "8", "--dp", "2").returncode == 0

@pytest.mark.parametrize("text, msg", [
    ('name = "x"\nbase = "dgx-h100-superpod"\ngpus = 8\n', "unknown key(s) gpus"),
    ('name = "x"\nbase = "dgx-h100-superpod"\n[chip]\nmemory_gib = 0\n', "chip.memory_gib=0 must be a positive number"),
    ('name = "x"\nbase = ', "not valid TOML")])
def test_a_broken_topology_file_is_one_line_exit_2(tmp_path, text, msg):
    f = tmp_path / "bad.toml"; f.write_text(text)
    for cmd in ("estimate", "plan", "place"):
        r = cli(cmd, "--topology", f, *(("--global-batch-size", "8") if cmd == "plan" else ("--tp", "2")), env=OFF)
        assert r.returncode == 2 and msg in r.stderr and len(r.stderr.strip().splitlines()) == 1, (cmd, r.stderr)
