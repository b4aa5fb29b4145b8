"""`supernode-nb export` checked by the frameworks' own code: Megatron-LM's and MindSpeed-LLM's flag definitions (tables read
from their sources, tools/framework_flags.py), megatron-core 0.16.1's config classes, torchtitan 0.3.0's ConfigManager; and
the round trip through the log importer's reader of Megatron's argument dump."""
import dataclasses, functools, importlib, json, os, subprocess, sys, warnings
from pathlib import Path
import pytest
from supernode_nb.foundation.config import ParallelConfig, get_model
from supernode_nb.ops.export import (FRAMEWORKS, export, megatron_args, megatron_args_dump, parse_flags, cli_export, Knobs)

HERE = Path(__file__).parent
BF16 = dict(micro_batch_size=1, dtype="bf16")
CASES = {   # name -> (model preset, topology preset, layout): the done-when cases; the demo's pick is added below
    "llama3-70b@cloudmatrix384": ("llama3-70b", "cloudmatrix384", ParallelConfig(
        tp=8, pp=4, dp=12, virtual_stages=2, schedule="interleaved", sequence_parallel=True, zero=1, recompute="full",
        global_batch_size=384, **BF16)),
    "llama3-70b@dgx-h100-superpod": ("llama3-70b", "dgx-h100-superpod", ParallelConfig(
        tp=8, pp=4, cp=2, dp=4, sequence_parallel=True, zero=1, recompute="selective", global_batch_size=256, **BF16)),
    "mixtral-8x7b-ep8@cloudmatrix384": ("mixtral-8x7b", "cloudmatrix384", ParallelConfig(
        tp=2, pp=2, dp=8, ep=8, sequence_parallel=True, zero=1, recompute="full", global_batch_size=64, **BF16)),
    # beyond the done-when cases: the other memory and schedule choices
    "llama3-8b-zero3-gpipe-fp8@dgx-h100-superpod": ("llama3-8b", "dgx-h100-superpod", ParallelConfig(
        tp=2, pp=2, dp=4, zero=3, schedule="gpipe", recompute="full", global_batch_size=32, micro_batch_size=2, dtype="fp8")),
    "llama3-8b-zero2-cp4-fp32@cloudmatrix384": ("llama3-8b", "cloudmatrix384", ParallelConfig(
        cp=4, dp=2, zero=2, global_batch_size=8, micro_batch_size=1)),
}


@functools.cache
def demo_pick() -> tuple[str, str, ParallelConfig]:
    "The configuration `make demo` places: the planner's first runnable pick for llama3-70b on cloudmatrix384 (ui.demo)."
    import inspect
    from supernode_nb.ui.demo import demo
    from supernode_nb.ui.demo_steps import choose
    d = {k: v.default for k, v in inspect.signature(demo).parameters.items()}
    gbs = d.get("global_batch_size", d.get("global_batch"))   # renamed in the demo once already
    ch = choose(d["model"], (d["topology"],), gbs)
    return d["model"], d["topology"], ParallelConfig(**ch[0]["top"][d["pick"] - 1]["config"])


def case(name):
    return demo_pick() if name == "demo-pick" else CASES[name]


NAMES = [*CASES, "demo-pick"]


@functools.cache
def exported(name, to):
    m, topo, c = case(name)
    return export(get_model(m), c, to, topology=topo)


# ---- Megatron-LM and MindSpeed-LLM: every flag defined, every value as ours ----

def expected_megatron(m, c) -> dict:
    "Megatron's argument names and the values our model and layout mean (written here, apart from the exporter's tables)."
    exp = dict(num_layers=m.layers, hidden_size=m.hidden, num_attention_heads=m.heads, seq_length=m.seq_len,
               max_position_embeddings=m.seq_len, vocab_size=m.vocab, tensor_model_parallel_size=c.tp,
               pipeline_model_parallel_size=c.pp, context_parallel_size=c.cp, data_parallel_size=c.dp,
               micro_batch_size=c.micro_batch_size, global_batch_size=c.gbs, sequence_parallel=c.sequence_parallel,
               use_distributed_optimizer=c.zero >= 1, bf16=c.dtype != "fp32", swiglu=m.gated_mlp, add_bias_linear=m.bias,
               untie_embeddings_and_output_weights=not m.tied_embeddings,
               recompute_granularity=None if c.recompute == "none" else c.recompute,
               position_embedding_type="learned_absolute" if m.learned_pos else "rope")
    if m.n_kv_heads != m.heads: exp.update(group_query_attention=True, num_query_groups=m.n_kv_heads)
    if m.is_moe: exp.update(num_experts=m.experts, moe_router_topk=m.top_k, moe_ffn_hidden_size=m.ffn_hidden,
                            expert_model_parallel_size=c.ep, expert_tensor_parallel_size=c.tp)
    exp["ffn_hidden_size"] = m.dense_ffn or m.ffn_hidden
    return exp


@pytest.mark.parametrize("to", ["megatron", "mindspeed"])
@pytest.mark.parametrize("name", NAMES)
def test_megatron_flags_are_the_frameworks_and_mean_our_layout(name, to):
    e = exported(name, to)
    m, _, c = case(name)
    model = get_model(m)
    _, errs = parse_flags(e.argv, to)
    assert errs == [], f"{to} does not define: {errs}"
    ns = megatron_args(e)
    got = {k: ns.get(k) for k in expected_megatron(model, c)}
    assert got == expected_megatron(model, c)
    if c.virtual_stages > 1: assert ns["num_layers_per_virtual_pipeline_stage"] * c.pp * c.virtual_stages == model.layers
    assert sum(n["nproc"] for n in e.nodes) == c.world_size and e.script().count("exec torchrun") == len(e.nodes)


def test_the_flag_check_fails_on_a_flag_the_framework_does_not_define():
    e = exported("llama3-70b@dgx-h100-superpod", "megatron")
    assert parse_flags(e.argv + ["--tensor-parallel-size", "8"], "megatron")[1][0].startswith("--tensor-parallel-size: not defined")
    assert "invalid literal for int()" in parse_flags(["--num-layers", "80.5"], "megatron")[1][0]
    assert "not in its choices" in parse_flags(["--recompute-granularity", "some"], "megatron")[1][0]
    assert parse_flags(["--enable-zero3"], "megatron")[1] and not parse_flags(["--enable-zero3"], "mindspeed")[1]


MEGATRON_LM = os.environ.get("SUPERNODE_NB_MEGATRON_LM")   # a Megatron-LM git checkout (with tag core_v0.16.1), when there is one


@pytest.mark.skipif(not MEGATRON_LM, reason="set SUPERNODE_NB_MEGATRON_LM to a Megatron-LM git checkout to run its own "
                    "parse_args + validate_args on the exports (its training code is not on PyPI)")
def test_megatron_lm_parses_and_validates_the_exports():
    cases = [dict(argv=exported(n, "megatron").argv, env=exported(n, "megatron").nodes[0]["env"], world=case(n)[2].world_size)
             for n in NAMES]
    r = subprocess.run([sys.executable, str(HERE / "megatron_validate.py"), MEGATRON_LM], input=json.dumps(cases),
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    for n, got in zip(NAMES, json.loads(r.stdout.strip().splitlines()[-1])):
        assert got["ok"], (n, got["error"])
        c = case(n)[2]
        a = got["args"]
        assert (a["data_parallel_size"], a["tensor_model_parallel_size"], a["pipeline_model_parallel_size"]) == (c.dp, c.tp, c.pp)
        assert a["virtual_pipeline_model_parallel_size"] == (c.virtual_stages if c.virtual_stages > 1 else None)


# ---- megatron-core 0.16.1's config classes accept the values ----

def core_configs(ns: dict):
    """megatron-core configs from Megatron's argument namespace, as Megatron-LM's core_transformer_config_from_args
    (megatron/training/arguments.py, core_v0.16.1) builds them: every field of the class its argument of that name, then
    its renames (num_experts, swiglu, group_query_attention) and what validate_args derives (params dtype, virtual size)."""
    import dataclasses, torch
    import torch.nn.functional as F
    from megatron.core.transformer import TransformerConfig
    from megatron.core.distributed import DistributedDataParallelConfig
    from megatron.core.optimizer import OptimizerConfig
    written = parse_flags(ns["_argv"], ns["_framework"])[0]
    dtype = torch.bfloat16 if ns["bf16"] else torch.float32
    kw = {f.name: ns[f.name] for f in dataclasses.fields(TransformerConfig) if f.name in written}
    kw.update(num_moe_experts=ns["num_experts"], params_dtype=dtype, pipeline_dtype=dtype, bf16=ns["bf16"],
              num_query_groups=ns["num_query_groups"] if ns["group_query_attention"] else None,
              virtual_pipeline_model_parallel_size=ns["virtual_pipeline_model_parallel_size"])
    if ns["swiglu"]: kw.update(gated_linear_unit=True, activation_func=F.silu)
    ddp = {f.name: ns[f.name] for f in dataclasses.fields(DistributedDataParallelConfig) if f.name in written}
    ddp["grad_reduce_in_fp32"] = not ns["grad_reduce_in_bf16"]
    opt = dict(bf16=ns["bf16"], params_dtype=dtype, use_distributed_optimizer=ns["use_distributed_optimizer"])
    return TransformerConfig(**kw), DistributedDataParallelConfig(**ddp), OptimizerConfig(**opt)


@pytest.mark.parametrize("to", ["megatron", "mindspeed"])
@pytest.mark.parametrize("name", NAMES)
def test_megatron_core_config_classes_accept_the_export(name, to):
    warnings.filterwarnings("ignore", message=".*Transformer Engine.*")
    e = exported(name, to)
    m, _, c = case(name)
    model = get_model(m)
    tc, ddp, opt = core_configs(megatron_args(e) | {"_argv": e.argv, "_framework": to})
    assert (tc.num_layers, tc.hidden_size, tc.num_attention_heads, tc.ffn_hidden_size) == (model.layers, model.hidden, model.heads,
                                                                                           model.dense_ffn or model.ffn_hidden)
    assert (tc.tensor_model_parallel_size, tc.pipeline_model_parallel_size, tc.context_parallel_size) == (c.tp, c.pp, c.cp)
    assert tc.num_query_groups == model.n_kv_heads and tc.sequence_parallel == c.sequence_parallel
    assert tc.virtual_pipeline_model_parallel_size == (c.virtual_stages if c.virtual_stages > 1 else None)
    assert tc.recompute_granularity == (None if c.recompute == "none" else c.recompute)
    if c.recompute == "full": assert (tc.recompute_method, tc.recompute_num_layers) == ("uniform", 1)
    if model.is_moe: assert (tc.num_moe_experts, tc.moe_router_topk, tc.expert_model_parallel_size) == (model.experts, model.top_k, c.ep)
    assert ddp.use_distributed_optimizer == opt.use_distributed_optimizer == (c.zero >= 1)
    assert ddp.overlap_grad_reduce == (to == "megatron")   # as the framework profiles price them: MindSpeed-LLM's scripts leave it off


# ---- torchtitan 0.3.0's ConfigManager parses the export ----

@functools.cache
def titan_parsed() -> tuple:
    argvs = [exported(n, "torchtitan").argv for n in NAMES]
    bad = exported(NAMES[0], "torchtitan").argv[:-1] + ["--parallelism.tensor_parallel_size", "8"]
    r = subprocess.run([sys.executable, str(HERE / "titan_parse.py")], input=json.dumps(argvs + [bad]), capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return tuple(json.loads(r.stdout.strip().splitlines()[-1]))


def test_torchtitan_refuses_a_field_it_does_not_have():
    assert "error" in titan_parsed()[-1]


@pytest.mark.parametrize("name", NAMES)
def test_torchtitan_config_manager_parses_the_export_to_our_values(name):
    m, _, c = case(name)
    model = get_model(m)
    got = titan_parsed()[NAMES.index(name)]
    assert "error" not in got, got
    p, t = got["parallelism"], got["training"]
    dp_shard = c.dp if (c.zero >= 1 or c.ep > 1) else 1
    assert (p["tensor_parallel_degree"], p["pipeline_parallel_degree"], p["context_parallel_degree"], p["expert_parallel_degree"]) == \
        (c.tp, c.pp, c.cp, c.ep)
    assert (p["data_parallel_shard_degree"], p["data_parallel_replicate_degree"]) == (dp_shard, c.dp // dp_shard)
    assert p["enable_sequence_parallel"] == c.sequence_parallel
    assert t["seq_len"] == model.seq_len and t["global_batch_size"] == c.gbs
    assert t["mixed_precision_param"] == ("float32" if c.dtype == "fp32" else "bfloat16")
    assert got["activation_checkpoint"] == {"none": "NoneType", "selective": "SelectiveAC.Config", "full": "FullAC.Config"}[c.recompute]
    if c.pp > 1:
        assert p["pipeline_parallel_layers_per_stage"] * c.pp * c.virtual_stages == model.layers
        assert p["pipeline_parallel_microbatch_size"] == c.micro_batch_size and t["local_batch_size"] == c.gbs // c.dp
        assert p["pipeline_parallel_schedule"] == {"1f1b": "1F1B", "interleaved": "Interleaved1F1B", "gpipe": "GPipe",
                                                   "zb-h1": "InterleavedZeroBubble"}[c.schedule]
    else: assert t["local_batch_size"] == c.micro_batch_size
    e = exported(name, "torchtitan")
    if m in ("llama3-8b", "llama3-70b", "llama3-405b"):   # torchtitan has the flavor: its model is ours
        assert {k: got["model"][k] for k in ("layers", "hidden", "heads", "kv_heads", "ffn", "vocab")} == dict(
            layers=model.layers, hidden=model.hidden, heads=model.heads, kv_heads=model.n_kv_heads, ffn=model.ffn_hidden, vocab=model.vocab)
    else: assert any("register a flavor" in u for u in e.unsupported)


# ---- what a framework cannot express is said ----

def test_what_the_framework_cannot_express_is_said_in_the_script_and_the_json():
    from supernode_nb.foundation.layout import RankLayout
    from supernode_nb.foundation.placement import place
    from supernode_nb.foundation.topology import topology_for
    m = get_model("llama3-8b")
    c = ParallelConfig(tp=4, pp=2, dp=4, order="dp-tp-cp-ep-pp", schedule="gpipe", global_batch_size=32, **BF16)
    P = place(RankLayout.from_config(c), topology_for("dgx-h100-superpod", 32), strategy="random", seed=3)
    for to in FRAMEWORKS:
        e = export(m, c, to, placement=P)
        said = " | ".join(e.unsupported)
        assert "rank order dp-tp-cp-ep-pp" in said and "cannot be launched as placed" in said, said
        assert all(f"# UNSUPPORTED: {u}" in e.script() for u in e.unsupported)
        assert json.loads(e.files()["export.json"])["unsupported"] == e.unsupported
    assert "schedule gpipe" in " ".join(export(m, c, "megatron", placement=P).unsupported)
    moe = exported("mixtral-8x7b-ep8@cloudmatrix384", "torchtitan").unsupported
    assert any(u.startswith("etp=2: torchtitan") for u in moe)


def test_knobs_reach_the_flags():
    m, topo, c = CASES["llama3-70b@cloudmatrix384"]
    e = export(get_model(m), c, "megatron", topology=topo, knobs=Knobs(recompute_method="block", recompute_layers=5))
    ns = megatron_args(e)
    assert (ns["recompute_method"], ns["recompute_num_layers"]) == ("block", 5)
    with pytest.raises(ValueError, match="recompute_layers=11 must be in 1..10"):
        export(get_model(m), c, "megatron", topology=topo, knobs=Knobs(recompute_layers=11))


# ---- the round trip: the log importer reads the argument dump back as the same model and layout ----

def _importer_reader():
    "The log importer's reader of Megatron's argument dump: text -> (ModelSpec, ParallelConfig); None until it exists."
    try: imp = importlib.import_module("supernode_nb.ops.importer")
    except ImportError: return None
    if not all(callable(getattr(imp, n, None)) for n in ("megatron_args", "megatron_model", "megatron_config")): return None
    def read(text: str):
        a = imp.megatron_args(text.splitlines())
        return imp.megatron_model(a), imp.megatron_config(a)
    return read


@pytest.mark.parametrize("to", ["megatron", "mindspeed"])
@pytest.mark.parametrize("name", NAMES)
def test_the_log_importer_reads_the_export_back(name, to):
    "What `export --to megatron` writes, rendered as the argument dump its run logs, reads back as the same model and layout."
    read = _importer_reader()
    if read is None: pytest.skip("supernode_nb.ops.importer has no reader of Megatron's argument dump yet (the integrator wires it)")
    m, _, c = case(name)
    log = "using world size: ...\n" + megatron_args_dump(exported(name, to)) + " [2026-12-06] iteration 1/10 | ...\n"
    model, cfg = read(log)
    weights = 4 if c.dtype == "fp32" else get_model(m).bytes_per_param   # an fp32 run holds 4-byte weights, whatever the preset's default
    assert dataclasses.replace(model, name=m) == dataclasses.replace(get_model(m), bytes_per_param=weights)
    # what the framework runs where it has no flag (said in `unsupported`): 1F1B for GPipe / ZB-H1; the importer reads a
    # distributed optimizer as ZeRO-1 (Megatron-FSDP's sharding strategies are not in what it reads)
    runs = c.replace(schedule="1f1b" if c.schedule in ("gpipe", "zb-h1") else c.schedule, zero=min(c.zero, 1))
    assert cfg == runs, {k: (getattr(cfg, k), getattr(runs, k)) for k in c.to_dict() if getattr(cfg, k) != getattr(runs, k)}


# ---- the command line ----

def test_cli_exports_an_archived_plan(tmp_path, capsys):
    from supernode_nb.foundation.store import Archive
    m, topo, c = CASES["llama3-70b@dgx-h100-superpod"]
    arc = tmp_path / "a.sqlite"
    rid = Archive(arc).record_plan(get_model(m), c, topology={"name": topo})
    assert cli_export(["--to", "megatron", "--plan-id", str(rid), "--archive", str(arc), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["config"] == c.to_dict() and out["topology"] == "dgx-h100-superpod" and len(out["nodes"]) == 32
    assert cli_export(["--to", "torchtitan", "--plan-id", str(rid), "--archive", str(arc), "--out", str(tmp_path / "t.sh")]) == 0
    text = (tmp_path / "t.sh").read_text()
    assert text.count("exec torchrun") == 32 and "-m torchtitan.train" in text and "--config llama3_70b" in text
    with pytest.raises(Exception, match="no run with id 999"):
        cli_export(["--to", "megatron", "--plan-id", "999", "--archive", str(arc)])


def test_the_supernode_nb_command_writes_per_node_files(tmp_path):
    env = dict(os.environ, SUPERNODE_NB_ARCHIVE="off")
    r = subprocess.run([sys.executable, "-m", "supernode_nb.cli", "export", "--to", "mindspeed", "--model", "mixtral-8x7b", "--tp", "2",
                        "--pp", "2", "--dp", "8", "--ep", "8", "--sp", "--zero", "3", "--dtype", "bf16", "--global-batch-size", "64",
                        "--topology", "cloudmatrix384", "--out", f"{tmp_path}/out/"], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    files = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert files == ["export.json", "hostfile", "launch.sh", "node000.sh", "node001.sh", "node002.sh", "node003.sh"]
    node1 = (tmp_path / "out" / "node001.sh").read_text()
    assert "--node-rank 1 --nproc-per-node 8" in node1 and "HCCL_SOCKET_IFNAME=" in node1 and "--enable-zero3" in node1
    assert "ASCEND_RT_VISIBLE_DEVICES=" in node1 and "CUDA_DEVICE_MAX_CONNECTIONS=1" in node1
    assert subprocess.run(["bash", "-n", str(tmp_path / "out" / "launch.sh")]).returncode == 0   # bash parses it
