"benchmarks/device.py's parts on the CPU: the parity check, the memory comparison, the JSON it writes; one slow full rehearsal."
import importlib.util, json, os, pathlib, subprocess, sys
import pytest, torch

ROOT = pathlib.Path(__file__).resolve().parents[1]

@pytest.fixture(scope="module")
def dev():
    spec = importlib.util.spec_from_file_location("device_bench", ROOT / "benchmarks" / "device.py")
    m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); return m

def test_parity_errors(dev):
    ref = {"losses": [2.0, 1.5], "params": {"w": torch.ones(3)}}
    same = dev.parity_errors(ref, {"losses": [2.0, 1.5], "params": {"w": torch.ones(3)}}, 1e-4, 1e-4, 1e-3)
    assert same["ok"] and same["loss_rel_err"] == 0
    off = dev.parity_errors(ref, {"losses": [2.0, 1.6], "params": {"w": torch.ones(3) * 1.01}}, 1e-4, 1e-4, 1e-3)
    assert not off["ok"] and abs(off["loss_rel_err"] - 0.1 / 1.5) < 1e-9 and off["param_excess"] > 0.008

def test_compare_memory_goals(dev):
    m = dict(parameters=100, gradients=100, optimizer=600, activations=1000)
    e = dict(parameters=104, gradients=94, optimizer=600, activations=1090)
    c = dev.compare_memory(m, e)
    assert c["parameters"]["ok"] and not c["gradients"]["ok"] and c["activations"]["ok"]
    assert abs(c["activations"]["error_pct"] - 9.0) < 1e-9 and abs(c["gradients"]["error_pct"] + 6.0) < 1e-9

def test_single_run_and_parity_on_cpu(dev):
    from supernode_nb.foundation.config import ModelSpec
    spec = ModelSpec(**dev.SIZES["small"])
    a, b = dev.single_run(spec, "fp32", "cpu", steps=2), dev.single_run(spec, "fp32", "cpu", steps=2)
    assert dev.parity_errors(a, b, **dev.TOL["fp32"])["ok"] and len(a["losses"]) == 2

def test_memory_step_counts_match_estimate_params(dev):
    from supernode_nb.foundation.config import ModelSpec
    spec = ModelSpec(**dev.SIZES["small"])
    got = dev.memory_step(spec, dict(recompute="none", global_batch_size=1), "cpu", steps=1)
    c = dev.compare_memory(got, dev.estimated_memory(spec, dict(recompute="none", global_batch_size=1)))
    for k in ("parameters", "gradients", "optimizer"): assert c[k]["ok"], (k, c[k])
    assert got["max_allocated"] is None and got["step_s"] > 0

def test_preset_and_name(dev):
    assert dev.preset_for("nvidia-h100-80gb-hbm3") == "dgx-h100-superpod" and dev.preset_for("cpu") == "local"
    assert dev.device_name("cpu") == "cpu"

@pytest.mark.slow
def test_cpu_rehearsal(dev, tmp_path):
    out = tmp_path / "device-cpu.json"
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "device.py"), "--device", "cpu", "--size", "small", "--out", str(out)],
                       capture_output=True, text=True, timeout=900, env=dict(os.environ, SUPERNODE_NB_ARCHIVE="off"))
    assert r.returncode == 0, r.stderr[-3000:]
    res = json.loads(out.read_text())
    for k, t in dev.SCHEMA.items(): assert isinstance(res[k], t), k
    assert res["parity"]["fp32"]["ok"] and len(res["memory"]) == 6 and len(res["step_time"]) == 6
    assert all(res["strategies"][s]["ok"] for s in dev.STRATEGIES)
