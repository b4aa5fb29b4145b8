"""Run exported Megatron flags through Megatron-LM's own parse and validate_args (run by tests/test_export.py in a subprocess).

argv[1]: a Megatron-LM git checkout (its tag core_v0.16.1 is read); stdin: a JSON list of {"argv", "env", "world"}; stdout: a
JSON list of {"ok", "error", "args": the validated namespace's plain values}. No GPU here: validate_args asks the device's
architecture (answered 9.0, an H100) and whether CUDA is available (answered yes); nothing else is stood in for.
"""
import json, os, sys, warnings
from pathlib import Path
from unittest import mock
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
import framework_flags

def check(A, case: dict) -> dict:
    import argparse
    os.environ.update(case["env"], WORLD_SIZE=str(case["world"]), RANK="0")
    try:
        ns = A.add_megatron_arguments(argparse.ArgumentParser(allow_abbrev=False)).parse_args(case["argv"])
        ns.world_size, ns.rank, ns.tokenizer_type = case["world"], 0, "NullTokenizer"
        with mock.patch("torch.cuda.is_available", return_value=True): A.validate_args(ns, {})
    except (SystemExit, Exception) as e: return {"ok": False, "error": f"{type(e).__name__}: {e}"}
    finally:
        for k in case["env"]: os.environ.pop(k, None)
    plain = {k: v for k, v in vars(ns).items() if isinstance(v, (int, float, str, bool, type(None)))}
    return {"ok": True, "args": plain}

if __name__ == "__main__":
    warnings.filterwarnings("ignore")
    A = framework_flags.megatron_arguments(sys.argv[1])
    A.get_device_arch_version = lambda: 9
    cases = json.load(sys.stdin)
    import contextlib, io
    with contextlib.redirect_stdout(io.StringIO()): out = [check(A, c) for c in cases]
    print(json.dumps(out))
