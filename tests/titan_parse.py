"""Parse exported torchtitan argument lists with torchtitan's own ConfigManager (run by tests/test_export.py in a subprocess).

stdin: a JSON list of argument lists; stdout: a JSON list, per list, of the parsed fields the test compares (or the error).
torchtitan 0.3.0 imports triton in three GPU-kernel modules its model registries pull in; torch on CPU has no triton, so
those three modules (and only they) are replaced by empty stand-ins before the import: config parsing does not use them.
"""
import contextlib, dataclasses, importlib.abc, importlib.machinery, io, json, sys, warnings
from unittest import mock

GPU_KERNEL_MODULES = {"torchtitan.distributed.minimal_async_ep.kernels", "torchtitan.overrides.fused_mla",
                      "torchtitan.overrides.fused_swiglu"}

class _Stand_in(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path, target=None):
        if name in GPU_KERNEL_MODULES: return importlib.machinery.ModuleSpec(name, self, is_package=True)
    def create_module(self, spec): m = mock.MagicMock(); m.__path__ = []; m.__spec__ = spec; return m
    def exec_module(self, m): pass

def _model(c) -> dict:
    m = c.model_spec.model
    layer = m.layers[0]
    attn = layer.attention
    return {"layers": len(m.layers), "hidden": m.dim, "vocab": m.vocab_size, "heads": attn.n_heads, "kv_heads": attn.n_kv_heads,
            "ffn": getattr(getattr(layer.feed_forward, "w1", None), "out_features", None), "flavor": c.model_spec.flavor}

def parse(argv: list[str]) -> dict:
    from torchtitan.config import ConfigManager
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            c = ConfigManager().parse_args(argv)
    except SystemExit as e: return {"error": f"SystemExit {e.code}"}
    except Exception as e: return {"error": f"{type(e).__name__}: {e}"}
    out = {"parallelism": dataclasses.asdict(c.parallelism), "training": dataclasses.asdict(c.training),
           "activation_checkpoint": type(c.activation_checkpoint).__qualname__}
    try: out["model"] = _model(c)
    except Exception as e: out["model"] = {"error": f"{type(e).__name__}: {e}"}
    return out

if __name__ == "__main__":
    warnings.filterwarnings("ignore")
    sys.meta_path.insert(0, _Stand_in())
    print(json.dumps([parse(a) for a in json.load(sys.stdin)], default=str))
