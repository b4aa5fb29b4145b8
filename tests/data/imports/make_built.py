"""Writes the *built* sample files of this folder (see SOURCE.md): Megatron-LM logs, a torchtitan log and job TOML, and an
msprof-analyze step trace CSV, each to its tool's documented format. Run from the repository root:
`python tests/data/imports/make_built.py`. The Megatron rows' iteration times come from published throughput (below)."""
from pathlib import Path

HERE = Path(__file__).parent

def args_dump(a: dict) -> str:
    "Megatron-LM's `_print_args`: a dashed title, `  name ..... value` sorted by name, a dashed end line."
    lines = ["------------------------ arguments ------------------------"]
    lines += [f"  {k} {'.' * max(2, 48 - len(k))} {v}" for k, v in sorted(a.items())]
    return "\n".join(lines + ["-------------------- end of arguments ---------------------"])

def iteration(i: int, n: int, ms: float, gbs: int, tf: float, loss: float) -> str:
    "Megatron-LM's `training_log` line (megatron/training/training.py)."
    return (f" [2021-04-09 12:{i // 60:02d}:{i % 60:02d}] iteration {i:8d}/{n:8d} | consumed samples: {i * gbs:12d} | "
            f"elapsed time per iteration (ms): {ms:.1f} | throughput per GPU (TFLOP/s/GPU): {tf:.1f} | learning rate: 6.000000E-05 | "
            f"global batch size: {gbs:5d} | lm loss: {loss:.6E} | loss scale: 65536.0 | grad norm: 1.234 | "
            f"number of skipped iterations: {0:3d} | number of nan iterations: {0:3d} |")

# Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU Clusters Using Megatron-LM", Table 1:
# (name, heads, hidden, layers, tp, pp, GPUs, batch, TFLOP/s per GPU); A100-80GB, seq 2048, vocab 51200, full recompute.
PAPER = [("1.7B", 24, 2304, 24, 1, 1, 32, 512, 137), ("3.6B", 32, 3072, 30, 2, 1, 64, 512, 138),
         ("7.5B", 32, 4096, 36, 4, 1, 128, 512, 142), ("18B", 48, 6144, 40, 8, 1, 256, 1024, 135)]

def paper_ms(h, l, B, n, tf, s=2048, V=51200) -> float:
    "The paper's eq. 3: FLOPs per iteration 96·B·s·l·h²·(1 + s/6h + V/16lh) at `tf` TFLOP/s on each of `n` GPUs, in ms."
    return 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h)) / (n * tf * 1e12) * 1e3

def megatron_log(name, a, h, l, tp, pp, n, B, tf) -> str:
    args = dict(num_layers=l, hidden_size=h, num_attention_heads=a, ffn_hidden_size=4 * h, seq_length=2048,
                max_position_embeddings=2048, padded_vocab_size=51200, tensor_model_parallel_size=tp,
                pipeline_model_parallel_size=pp, context_parallel_size=1, expert_model_parallel_size=1, world_size=n,
                data_parallel_size=n // (tp * pp), micro_batch_size=1, global_batch_size=B, sequence_parallel=False,
                recompute_granularity="full", recompute_method="uniform", fp16=True, bf16=False,
                use_distributed_optimizer=False, overlap_grad_reduce=False, tp_comm_overlap=False, swiglu=False,
                add_bias_linear=True, position_embedding_type="learned_absolute", untie_embeddings_and_output_weights=False,
                num_experts=None, train_iters=5)
    ms = paper_ms(h, l, B, n, tf)
    its = [iteration(i, 5, ms, B, tf, 10.5 - 0.3 * i) for i in range(1, 6)]
    return "using world size: %d\n" % n + args_dump(args) + "\n" + "\n".join(its) + "\n"

def timed_log() -> str:
    "A small Megatron-Core run's log with timers (--timing-log-level 1) and memory reports: built, its numbers made up."
    args = dict(num_layers=4, hidden_size=1024, num_attention_heads=16, ffn_hidden_size=4096, seq_length=1024,
                padded_vocab_size=32768, tensor_model_parallel_size=2, pipeline_model_parallel_size=2, world_size=8,
                data_parallel_size=2, micro_batch_size=2, global_batch_size=16, bf16=True, transformer_impl="transformer_engine",
                use_distributed_optimizer=True, overlap_grad_reduce=True, recompute_granularity=None, num_experts=None,
                sequence_parallel=True, swiglu=True, add_bias_linear=False, position_embedding_type="rope",
                untie_embeddings_and_output_weights=True)
    out = [args_dump(args)]
    for i, ms in enumerate([420.0, 251.3, 249.8, 250.6, 252.1], start=1):
        out.append(iteration(i, 5, ms, 16, 0.0, 10.4 - 0.2 * i).replace("throughput per GPU (TFLOP/s/GPU): 0.0 | ", ""))
        if i == 1: out.append("[Rank 0] (after 1 iterations) memory (MB) | allocated: 1534.2 | max allocated: 2711.9 | "
                              "reserved: 3072.0 | max reserved: 3072.0")
        fb, fc, bc = ms * 0.86, ms * 0.30, ms * 0.46
        out += ["(min, max) time across ranks (ms):",
                f"    forward-backward ...............................: ({fb - 1:.2f}, {fb:.2f})",
                f"    forward-compute ................................: ({fc - 2:.2f}, {fc:.2f})",
                f"    backward-compute ...............................: ({bc - 2:.2f}, {bc:.2f})",
                f"    forward-recv ...................................: ({ms * .03:.2f}, {ms * .05:.2f})",
                f"    backward-send-forward-recv .....................: ({ms * .02:.2f}, {ms * .03:.2f})",
                f"    batch-generator ................................: (0.40, {ms * .01:.2f})",
                f"    all-grads-sync .................................: ({ms * .05:.2f}, {ms * .06:.2f})",
                f"    optimizer ......................................: ({ms * .04:.2f}, {ms * .05:.2f})"]
    return "\n".join(out) + "\n"

TT_TOML = '''# torchtitan job config (torchtitan/models/llama3/train_configs/llama3_8b.toml of the TOML era, trimmed)
[job]
dump_folder = "./outputs"
description = "Llama 3 8B training"

[model]
name = "llama3"
flavor = "8B"

[training]
local_batch_size = 1
seq_len = 8192
steps = 10
mixed_precision_param = "bfloat16"

[parallelism]
data_parallel_replicate_degree = 1
data_parallel_shard_degree = -1
tensor_parallel_degree = 1
pipeline_parallel_degree = 1
context_parallel_degree = 1

[activation_checkpoint]
mode = "selective"
'''

def torchtitan_log() -> str:
    "torchtitan's `MetricsProcessor.log` lines (torchtitan/components/metrics.py) with its colour codes; numbers made up."
    c = {k: f"\x1b[{v}m" for k, v in dict(red=31, green=32, orange=33, turquoise=36, blue=34, cyan=96, magenta=35, reset=39).items()}
    out = ["[rank0]:[titan] 2025-01-01 10:00:00,000 - root - INFO - Building 1-D device mesh with ['dp_shard'], [8]",
           "[rank0]:[titan] 2025-01-01 10:00:05,000 - root - INFO - Model llama3 8B size: 8,030,261,248 total parameters"]
    for step, (loss, tps) in enumerate([(12.25, 4210), (11.80, 5790), (10.95, 5802), (10.31, 5797), (9.88, 5811)], start=1):
        tf, mfu = tps * 6 * 8.03e9 / 1e12 * 1.12, tps * 6 * 8.03e9 / 1e12 * 1.12 / 989 * 100
        head = f"[rank0]:[titan] 2025-01-01 10:00:{10 + step:02d},000 - root - INFO - "
        out.append(f"{head}{c['red']}step: {step:2}  {c['green']}loss: {loss:8.5f}  "
                   f"{c['orange']}grad_norm: {1.5:7.4f}  {c['turquoise']}memory: {61.27:5.2f}GiB({64.50:.2f}%)  {c['blue']}tps: {tps:,}  "
                   f"{c['cyan']}tflops: {tf:,.2f}  {c['magenta']}mfu: {mfu:.2f}%{c['reset']}")
    return "\n".join(out) + "\n"

MSPROF_HEAD = ["Step", "Type", "Index", "Computing", "Communication(Not Overlapped)", "Overlapped", "Communication", "Free",
               "Stage", "Bubble", "Communication(Not Overlapped and Exclude Receive)", "Preparing"]

def step_trace_csv() -> str:
    "msprof-analyze's cluster_step_trace_time.csv (cluster_analyse/prof_bean/step_trace_time_bean.py's header), µs; numbers made up."
    rows = [",".join(MSPROF_HEAD)]
    for step in (1, 2):
        for rank in range(4):
            comp, nov, ov = 81000.0 + 700 * rank + 300 * step, 9200.0 - 400 * rank, 14100.0
            free, bub = 2100.0 + 150 * rank, 1800.0 * (rank % 2)
            row = [step, "rank", rank, comp, nov, ov, nov + ov, free, comp + nov + free - bub, bub, nov - bub, 0.0]
            rows.append(",".join(str(x) for x in row))
    return "\n".join(rows) + "\n"

if __name__ == "__main__":
    for row in PAPER: (HERE / "megatron" / f"gpt_{row[0]}.log").write_text(megatron_log(*row))
    (HERE / "megatron" / "mcore_timers.log").write_text(timed_log())
    (HERE / "torchtitan" / "llama3_8b.toml").write_text(TT_TOML)
    (HERE / "torchtitan" / "llama3_8b.log").write_text(torchtitan_log())
    (HERE / "msprof" / "cluster_step_trace_time.csv").write_text(step_trace_csv())
