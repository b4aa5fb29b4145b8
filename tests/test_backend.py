"""Backend choice and support table: gloo's table checked on a real process group; the NPU path with fake torch_npu packages."""
import json, os, subprocess, sys, textwrap
import pytest
from supernode_nb.runtime.launch import spawn
from supernode_nb.comm.backend import (measure_support, compare_support, supports, check_support, probe_npu, pick,
                                  UnsupportedError, DTYPES, SUPPORT)


def test_gloo_table_matches_real_gloo_2_and_3_ranks():
    for world in (2, 3):
        measured = spawn(measure_support, world)[0]
        assert len(measured) == len(DTYPES) * (3 * 5 + 4) + 1          # every cell was tried
        assert compare_support(measured, "gloo") == [], compare_support(measured, "gloo")
        # and the table is not vacuous: both kinds of cells occur
        assert sum(v == "ok" for v in measured.values()) > 100
        assert sum(v != "ok" for v in measured.values()) > 50


def test_compare_support_catches_a_wrong_table():
    measured = {"all_reduce/int16/sum": "RuntimeError: Invalid scalar type", "all_gather/float32": "ok"}
    assert compare_support(measured, "gloo") == []
    assert compare_support(measured, "hccl") == ["all_reduce/int16/sum: table says supported, measured RuntimeError: Invalid scalar type"]


def _fake_pkg(tmp_path, body, entry_point=False):
    pkg = tmp_path / "torch_npu"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(textwrap.dedent(body))
    if entry_point:      # what torch_npu >= 2.5.1 ships: an entry point torch loads at `import torch`
        di = tmp_path / "torch_npu-2.5.1.dist-info"
        di.mkdir()
        (di / "METADATA").write_text("Metadata-Version: 2.1\nName: torch_npu\nVersion: 2.5.1\n")
        (di / "entry_points.txt").write_text("[torch.backends]\ntorch_npu = torch_npu:_autoload\n")
    return tmp_path


_NO_CANN = """
    raise ImportError("libhccl.so: cannot open shared object file: No such file or directory")
    def _autoload(): pass
"""

_FAKE_NPU = """
    import types, torch
    __version__ = "2.5.1"
    torch.npu = types.SimpleNamespace(is_available=lambda: True, device_count=lambda: 8)
    def _autoload(): pass
"""


def _py(code, path, autoload="0"):
    env = dict(os.environ, PYTHONPATH=str(path), TORCH_DEVICE_BACKEND_AUTOLOAD=autoload)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env, timeout=120)


def test_npu_without_cann_is_reported_not_raised(tmp_path):
    path = _fake_pkg(tmp_path, _NO_CANN)
    r = _py("""
        import json
        from supernode_nb.comm.backend import probe_npu, pick
        print(json.dumps([probe_npu().to_dict(), probe_npu(isolated=True).to_dict(), pick().to_dict()]))
    """, path)
    assert r.returncode == 0, r.stderr
    inproc, iso, choice = json.loads(r.stdout.strip().splitlines()[-1])
    for p in (inproc, iso):
        assert p["available"] is False
        assert "import torch_npu failed: ImportError: libhccl.so" in p["reason"], p
    assert (choice["device"], choice["backend"]) == ("cpu", "gloo")


def test_autoload_failure_and_the_remedy(tmp_path):
    path = _fake_pkg(tmp_path, _NO_CANN, entry_point=True)
    # torch's autoload turns the missing CANN into a failure of `import torch` itself
    r = _py("import torch", path, autoload="1")
    assert r.returncode != 0 and "TORCH_DEVICE_BACKEND_AUTOLOAD=0" in r.stderr, r.stderr[-500:]
    # with autoload off, the probe reports the reason
    r = _py("""
        import json
        from supernode_nb.comm.backend import probe_npu
        print(json.dumps(probe_npu(isolated=True).to_dict()))
    """, path)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout.strip().splitlines()[-1])
    assert d["available"] is False and "libhccl.so" in d["reason"]


def test_fake_npu_selects_hccl_and_checks_its_table(tmp_path):
    path = _fake_pkg(tmp_path, _FAKE_NPU)
    r = _py("""
        import json
        from supernode_nb.comm.backend import probe_npu, pick, versions, check_support, UnsupportedError
        p = probe_npu(); c = pick(); v = versions()
        try: check_support(c.backend, "all_reduce", "float64"); err = None
        except UnsupportedError as e: err = str(e)
        print(json.dumps([p.to_dict(), c.to_dict(), v["torch_npu"], err]))
    """, path)
    assert r.returncode == 0, r.stderr
    p, c, ver, err = json.loads(r.stdout.strip().splitlines()[-1])
    assert p == {"device": "npu", "available": True, "reason": "torch_npu", "count": 8, "version": "2.5.1"}
    assert (c["device"], c["backend"]) == ("npu", "hccl")
    assert ver == "2.5.1"
    assert (
        err
        == "unsupported op: hccl does not support all_reduce on float64: no reduction on float64 "
        "(reducible: bfloat16, float16, float32, int16, int32, int64, int8)"
    )


def test_check_support_names_op_dtype_backend():
    with pytest.raises(UnsupportedError, match=r"gloo does not support all_to_all on float8_e5m2"):
        check_support("gloo", "all_to_all_single", "float8_e5m2")
    assert supports("hccl", "send", "bfloat16") and not supports("hccl", "send", "bool")
    assert SUPPORT["gloo"].verified and not SUPPORT["hccl"].verified
