"""Checkpoints on real process groups: bit-identical resume, resharding across dp/tp/pp/ep/ZeRO changes against the
single-process reference, a crash in every phase of a save, and corrupt files."""
import json, os, shutil
from dataclasses import replace
import pytest, torch
from supernode_nb.parallel.checkpoint import (latest, list_checkpoints, verify, CheckpointError, load, MANIFEST)
from supernode_nb.foundation.config import MODEL_PRESETS, ParallelConfig
from supernode_nb.parallel.engine import reference_run

LOSS_RTOL = 1e-4     # fp32 AdamW: the engine's own parity tolerance for losses (engine.TOLERANCES["adamw"])
from supernode_nb.runtime.launch import spawn as _spawn, LaunchError
from supernode_nb.runtime.spec import make_spec

TW = "supernode_nb.runtime.runner:train_worker"                # the one training loop (runner), on spawned ranks


def train(world, model, cfg, steps, directory=None, every=None, resume=False, lr=1e-3, **kw):
    "`world` ranks of the runner's worker: train `cfg` to `steps`, saving into `directory` every `every`, resuming from it."
    s = make_spec(model, cfg, steps=steps, lr=lr, checkpoint_dir=directory if every else None, checkpoint_every=every,
                  resume=directory if resume else None)
    return _spawn(TW, world, s, **kw)

GPT4 = replace(MODEL_PRESETS["tiny-gpt"], layers=4)            # divisible by pp 2 and 4
MOE2 = replace(MODEL_PRESETS["tiny-moe"], layers=2)
LR = 1e-2                                                     # large enough that a wrong restore shows in the losses


def _losses(res):
    out = {}
    for r in res: out.update(r["losses"])
    return [out[s] for s in sorted(out)]


def _reshard(tmp_path, spec, a: ParallelConfig, b: ParallelConfig, save_at=2, steps=4):
    "Train `a` to `save_at` (checkpoint), resume under `b` to `steps`; compare with the single-process reference."
    d = str(tmp_path / "ck")
    ref = reference_run(spec, a, steps, lr=LR)["losses"]
    first = train(a.world_size, spec, a, save_at, d, save_at, lr=LR)
    second = train(b.world_size, spec, b, steps, d, None, True, lr=LR)
    assert all(r["start"] == save_at for r in second)
    assert second[0]["resumed"]["same_layout"] is (a == b)
    got = _losses(first) + _losses(second)
    err = max(abs(x - y) / abs(y) for x, y in zip(got, ref))
    assert err <= LOSS_RTOL, (got, ref, err)
    short = lambda c: (
        "·".join(f"{k}{getattr(c, k)}" for k in ("dp", "tp", "pp", "ep") if getattr(c, k) > 1) + (f"·zero{c.zero}" if c.zero else "")
    )
    print(f"reshard {short(a)} -> {short(b)}: max relative loss error vs single process {err:.2e}")
    return err


@pytest.mark.parametrize("a,b", [
    (ParallelConfig(dp=2, tp=2, pp=2, global_batch_size=8), ParallelConfig(dp=4, tp=1, pp=2, global_batch_size=8)),
    (ParallelConfig(tp=2, global_batch_size=4), ParallelConfig(tp=4, global_batch_size=4)),
    (ParallelConfig(dp=2, pp=2, global_batch_size=8), ParallelConfig(pp=4, global_batch_size=8)),
    (ParallelConfig(dp=2, zero=1, global_batch_size=4), ParallelConfig(dp=4, zero=0, global_batch_size=4)),
    (ParallelConfig(dp=4, zero=1, global_batch_size=4), ParallelConfig(dp=2, tp=2, zero=1, global_batch_size=4)),
], ids=["dp2tp2pp2-to-dp4pp2", "tp2-to-tp4", "dp2pp2-to-pp4", "zero1dp2-to-dp4", "zero1dp4-to-zero1dp2tp2"])
def test_reshard_matches_reference(tmp_path, a, b):
    _reshard(tmp_path, GPT4, a, b)


@pytest.mark.parametrize("a,b", [
    (ParallelConfig(dp=4, zero=3, global_batch_size=4), ParallelConfig(dp=2, tp=2, global_batch_size=4)),
    (ParallelConfig(dp=2, pp=2, zero=3, global_batch_size=8), ParallelConfig(pp=4, global_batch_size=8)),
    (ParallelConfig(dp=2, tp=2, zero=2, global_batch_size=4), ParallelConfig(dp=4, zero=3, global_batch_size=4)),
], ids=["zero3dp4-to-dp2tp2", "zero3dp2pp2-to-pp4", "zero2dp2tp2-to-zero3dp4"])
def test_reshard_through_zero3(tmp_path, a, b):
    "ZeRO-3 saves each rank's 1/dp slices (fp32 masters and AdamW moments) and loads into, or from, any other layout."
    _reshard(tmp_path, GPT4, a, b)


def test_reshard_moe_expert_parallel(tmp_path):
    _reshard(tmp_path, MOE2, ParallelConfig(dp=2, ep=2, global_batch_size=4), ParallelConfig(dp=4, ep=4, global_batch_size=4))


def test_resume_same_layout_is_bit_identical(tmp_path):
    cfg = ParallelConfig(dp=2, tp=2, pp=2, global_batch_size=8)
    d = str(tmp_path / "ck")
    full = train(8, GPT4, cfg, 4, lr=LR)
    a = train(8, GPT4, cfg, 2, d, 2, lr=LR)
    b = train(8, GPT4, cfg, 4, d, None, True, lr=LR)
    assert b[0]["resumed"]["same_layout"] and b[0]["resumed"]["rng_restored"]
    assert _losses(a) + _losses(b) == _losses(full)                      # exactly equal floats
    for x, y in zip(full, b): assert x["digest"] == y["digest"]          # every shard, bit for bit


@pytest.mark.parametrize("phase", ["written", "manifest", "renamed"])
def test_crash_during_save_keeps_previous(tmp_path, phase, monkeypatch):
    d = tmp_path / "ck"
    cfg = ParallelConfig(dp=2, global_batch_size=4)
    monkeypatch.setenv("SUPERNODE_NB_CKPT_FAULT", f"{phase}@4")
    with pytest.raises(LaunchError, match="exited with code 17"):
        train(2, GPT4, cfg, 4, str(d), 2, lr=LR, timeout_s=120)
    monkeypatch.delenv("SUPERNODE_NB_CKPT_FAULT")
    if phase == "renamed":                                              # complete, renamed: the newest usable one
        assert latest(d).name == "step_000004"
        assert (d / "latest").read_text() == "step_000002"                  # the pointer was not rewritten
    else:                                                               # unfinished: ignored
        assert latest(d).name == "step_000002" and (d / "step_000004.tmp").exists() and not (d / "step_000004").exists()
    verify(d)
    if phase != "renamed":
        res = train(2, GPT4, cfg, 4, str(d), 2, True, lr=LR)   # resume from 2; its save at 4 sweeps the .tmp
        assert res[0]["start"] == 2 and latest(d).name == "step_000004" and not list(d.glob("*.tmp"))


def test_corrupt_checkpoint_named_and_nothing_overwritten(tmp_path):
    d = tmp_path / "ck"
    cfg = ParallelConfig(dp=2, global_batch_size=4)
    train(2, GPT4, cfg, 2, str(d), 2, lr=LR)
    f = sorted((d / "step_000002").glob("__1_*.distcp"))[0]
    f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])
    before = {p.name: p.stat().st_mtime_ns for p in (d / "step_000002").iterdir()}
    with pytest.raises(LaunchError) as e:
        train(2, GPT4, cfg, 4, str(d), None, True, lr=LR)
    assert f"checkpoint file {f} is truncated or altered" in str(e.value)
    assert {p.name: p.stat().st_mtime_ns for p in (d / "step_000002").iterdir()} == before


def test_doctor_verifies_a_checkpoint(tmp_path):
    from supernode_nb.ops.doctor import doctor, _check_checkpoint
    d = tmp_path / "ck"
    train(1, GPT4, ParallelConfig(global_batch_size=2), 1, str(d), 1)
    assert doctor(checkpoint=str(d), checks=[_check_checkpoint]).check("model", "checkpoint").verdict == "ok"
    f = next((d / "step_000001").glob("*.distcp")); b = bytearray(f.read_bytes()); b[100] ^= 1; f.write_bytes(bytes(b))
    c = doctor(checkpoint=str(d), checks=[_check_checkpoint]).check("model", "checkpoint")
    assert c.verdict == "fail" and str(f) in c.detail
