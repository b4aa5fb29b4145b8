"Dry runs on fake tensors: the counts equal a real step's on a small model; a full-size stage runs in a small process."
import json, resource, subprocess, sys
import pytest
from supernode_nb.foundation.config import ParallelConfig, get_model
from supernode_nb.runtime.dryrun import CATS, dryrun, measure_rank

def test_fake_counts_equal_real_step_tp1():
    from supernode_nb.runtime.memcheck import memory_worker
    cfg = ParallelConfig(global_batch_size=2, recompute="selective", dtype="bf16")
    real = memory_worker(0, 1, get_model("tiny-gpt").to_dict(), cfg.to_dict())
    fake = measure_rank(get_model("tiny-gpt"), cfg, 0)
    for k in ("parameters", "gradients"): assert fake[k] == real[k], k
    assert fake["optimizer"] == real["optimizer"] * 3 // 2     # + fp32 master slices, which memcheck leaves out
    assert abs(fake["activations"] / real["activations"] - 1) < 0.02

def test_moe_ep_pipeline_dry_run():
    d = dryrun("tiny-moe", ParallelConfig(dp=4, ep=4, pp=2, global_batch_size=16))
    assert (d.stage, d.microbatches) == (0, 4)
    for k in ("parameters", "gradients", "optimizer"): assert abs(d.error_pct[k]) < 0.5, d.error_pct

def test_cli_json():
    out = subprocess.run([sys.executable, "-m", "supernode_nb.cli", "dryrun", "--model", "tiny-gpt", "--tp", "2", "--pp", "2",
                          "--global-batch", "4", "--json"], capture_output=True, text=True, timeout=300)
    if out.returncode != 0 and "invalid choice" in out.stderr: pytest.skip("dryrun not in COMMANDS of this build")
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    assert set(d["measured"]) == set(CATS) and d["rank"] == 0

def test_bad_rank():
    with pytest.raises(ValueError, match="rank=9"): dryrun("tiny-gpt", ParallelConfig(dp=2, global_batch_size=2), rank=9)

@pytest.mark.slow
def test_llama70b_first_stage_full_size():
    "llama3-70b tp8·pp4, first stage, 8 micro-batches of 8192 tokens: ~100 GB held, counted in a process of a few hundred MiB."
    code = ("import json; from supernode_nb.runtime.dryrun import dryrun; from supernode_nb.foundation.config import ParallelConfig;"
            "d = dryrun('llama3-70b', ParallelConfig(tp=8, pp=4, dtype='bf16', global_batch_size=8));"
            "print(json.dumps(d.to_dict()))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-2000:]
    d = json.loads(out.stdout.strip().splitlines()[-1])
    assert d["stage"] == 0 and d["peak_rss_bytes"] < 2 * 2**30
    for k in ("parameters", "gradients", "optimizer"): assert abs(d["error_pct"][k]) < 1, d["error_pct"]
    assert d["measured"]["activations"] > 60 * 2**30    # 4 micro-batches in flight × 20 layers
    assert abs(d["error_pct"]["activations"]) < 5, d["error_pct"]
