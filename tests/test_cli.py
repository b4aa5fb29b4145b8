"""The `supernode-nb` command line as a script sees it: JSON on stdout, exit statuses, one-line errors."""
import json, subprocess, sys
import pytest
from procs import cli

def test_validate_reports_every_error_and_exits_1():
    r = cli("validate", "--model", "llama3-8b", "--tp", "3", "--pp", "5", "--dp", "2", "--world", "32", "--json")
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
    for args, rc in ((["nonsense"], 2), (["validate", "--tp", "3", "--world", "4"], 1), (["validate", "--tp", "2", "--world", "2", "--json"], 0)):
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
