"""The MoE dispatch settings Megatron-Bridge's performance recipes state, for each MoE row of data/published/megatron_bridge.csv.

Reads scripts/performance/configs/*/workload_base_configs.py (or the later *_workload_base_configs.py) from a
Megatron-Bridge clone at the tag matching each row's container (by release date: 25.11 -> v0.2.0, 26.02 -> v0.3.0,
26.02.01 -> v0.3.1, 26.04 -> v0.4.0, 26.04.01 -> v0.4.1, 26.06 -> v0.5.0, 26.06.01 -> v0.5.1, 26.08 -> v0.6.0), finds
the preset of the row's model, GPU and precision whose layout (tp, pp, vp, ep, mbs) equals the row's, and prints the
settings the row may state: ep_dispatch=deepep where moe_flex_dispatcher_backend is "deepep" or "hybridep" (the flex
dispatcher; None restores alltoall), ep_overlap=1 where moe_a2a_overlap is True. A row whose layout matches no preset,
or matches presets that disagree, gets nothing.
Run: python tools/mbridge_moe_settings.py /path/to/Megatron-Bridge [--write]
"""
import csv, io, re, subprocess, sys
from pathlib import Path

TAGS = {"25.11": "v0.2.0", "26.02": "v0.3.0", "26.02.01": "v0.3.1", "26.04": "v0.4.0", "26.04.01": "v0.4.1",
        "26.06": "v0.5.0", "26.06.01": "v0.5.1", "26.08": "v0.6.0"}
MODELS = {"deepseek-v3": "DEEPSEEK_V3", "deepseek-v3+mtp": "DEEPSEEK_V3", "qwen3-235b-a22b": "QWEN3_235B_A22B",
          "qwen3-30b-a3b": "QWEN3_30B_A3B", "gpt-oss-120b": "GPT_OSS_120B"}
GPUS = {"dgx-b200-superpod": "B200", "dgx-b300-superpod": "B300", "gb200-nvl72": "GB200", "gb300-nvl72": "GB300",
        "dgx-h100-superpod": "H100"}
DEFAULTS = dict(tensor_model_parallel_size=1, pipeline_model_parallel_size=1, virtual_pipeline_model_parallel_size=None,
                expert_model_parallel_size=1, micro_batch_size=1, global_batch_size=1, moe_flex_dispatcher_backend=None,
                moe_a2a_overlap=False)
DATA = Path(__file__).resolve().parents[1] / "supernode_nb" / "data" / "published" / "megatron_bridge.csv"

def _git(repo, *a) -> str: return subprocess.run(["git", "-C", repo, *a], capture_output=True, text=True, check=True).stdout

def presets(repo, tag) -> dict:
    "name -> (file, settings) of every preset in the tag's workload base configs (inheritance through `replace` resolved)."
    out = {}
    for f in _git(repo, "ls-tree", "-r", "--name-only", tag, "scripts/performance/configs").split():
        if not f.endswith("workload_base_configs.py"): continue
        src = "\n".join(l for l in _git(repo, "show", f"{tag}:{f}").splitlines() if not l.startswith(("from ", "import ")))
        ns = dict(replace=lambda base, **kw: {**base, **kw}, WorkloadBaseConfig=lambda **kw: {**DEFAULTS, **kw})
        try: exec(compile(src, f, "exec"), ns)
        except Exception as e: print(f"# {tag}:{f} not read: {e}", file=sys.stderr); continue
        out.update({k: (f, v) for k, v in ns.items() if isinstance(v, dict) and "moe_a2a_overlap" in v and k.isupper()})
    return out

def _layout(p) -> tuple:
    return (p["tensor_model_parallel_size"], p["pipeline_model_parallel_size"], p["virtual_pipeline_model_parallel_size"] or 1,
            p["expert_model_parallel_size"], p["micro_batch_size"])

def settings_for(row, ps, tag) -> "str | None":
    "The row's settings from its unique preset ('' where it states the profile's defaults), or None without one."
    model, gpu = MODELS.get(row["model"]), GPUS.get(row["topology"])
    if model is None or gpu is None: return None
    prec = "BF16" if row["dtype"] == "bf16" else "FP8_CS"
    want = (int(row["tp"]), int(row["pp"]), int(row["vp"]), int(row["ep"]), int(row["mbs"]))
    names = [n for n in ps if n.startswith(model) and f"_{gpu}_" in f"{n}_" and "MX" not in n and "NVFP4" not in n
             and ("BF16" not in n and "FP8" not in n or prec in n) and _layout(ps[n][1]) == want]
    got = {(ps[n][1]["moe_flex_dispatcher_backend"], bool(ps[n][1]["moe_a2a_overlap"])) for n in names}
    if len(got) != 1: return None
    (backend, overlap), n = got.pop(), names[0]
    f = ps[n][0]
    out = []
    if backend in ("deepep", "hybridep"):
        out.append(f"ep_dispatch=deepep: Megatron-Bridge {f}@{tag} {n}: moe_flex_dispatcher_backend={backend!r} (flex dispatcher)")
    if overlap: out.append(f"ep_overlap=1: Megatron-Bridge {f}@{tag} {n}: moe_a2a_overlap=True")
    return ";".join(out)

def main(repo, write=False):
    rows = list(csv.DictReader(DATA.open(newline="")))
    cache, n = {}, 0
    for r in rows:
        rel = r["framework"].split("@")[1]
        if r["model"] not in MODELS or rel not in TAGS: continue
        tag = TAGS[rel]
        ps = cache.setdefault(tag, presets(repo, tag))
        s = settings_for(r, ps, tag)
        print(r["id"], "|", "(no unique preset with this layout)" if s is None else s or "(its preset: alltoall, no overlap)")
        if write and s:
            keep = [x for x in r["settings"].split(";") if x.strip() and not x.strip().startswith(("ep_dispatch=", "ep_overlap="))]
            r["settings"] = ";".join(keep + [s]); n += 1
    if write:
        buf = io.StringIO(); w = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n"); w.writeheader(); w.writerows(rows)
        DATA.write_text(buf.getvalue()); print(f"# {n} rows given the settings their recipes state", file=sys.stderr)

if __name__ == "__main__":
    main(sys.argv[1], "--write" in sys.argv)
