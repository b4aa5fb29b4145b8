"""The calibration and the local prediction against the runtime itself.

Accuracy is not asserted (the machine is shared and noisy; `benchmarks/calibrate.py` reports the errors). What is
asserted: the collectives the prediction charges are the ones the runtime issues (counted by its recorder), the
prediction moves the way the physics says when one measured figure moves, the calibration's figures are measured
and saved, and predicted and measured parts line up for a real run."""
import dataclasses, json, math, multiprocessing as mp
from pathlib import Path
import numpy as np
import pytest
from supernode_nb.foundation.config import ParallelConfig as P, get_model
from supernode_nb.cost.profile import MachineProfile, find_profile, left_by
from supernode_nb.runtime.calibrate import calibrate, cli_calibrate
from supernode_nb.runtime.probes import comm_cpu
from supernode_nb.runtime.accuracy import local_check, predict
from supernode_nb.cost.steptime import collectives_per_step
from supernode_nb.runtime.launch import spawn

TINY, MOE = get_model("tiny-gpt"), get_model("tiny-moe")


@pytest.mark.parametrize("model,cfg", [
    (TINY, P(tp=2, global_batch_size=4)),
    (TINY, P(tp=2, global_batch_size=2, sequence_parallel=True)),
    (TINY, P(tp=2, global_batch_size=4, recompute="full")),
    (TINY, P(tp=2, pp=2, global_batch_size=4, sequence_parallel=True)),
    (MOE, P(dp=2, ep=2, global_batch_size=4)),
    (TINY, P(dp=2, global_batch_size=4)),
    (TINY, P(dp=2, global_batch_size=4, zero=1)),
    (TINY, P(dp=2, global_batch_size=4, zero=2)),
    (TINY, P(dp=2, global_batch_size=4, zero=3)),
    (MOE, P(dp=4, ep=2, global_batch_size=8, zero=3)),
])
def test_charged_collectives_are_the_runtimes(model, cfg):
    "The blocking collectives the cost model charges a penalty for are the ones the engine's recorder sees (the last stage)."
    seen = spawn("supernode_nb.runtime.accuracy:collective_counts_worker", cfg.world_size, model=model.to_dict(), cfg=cfg.to_dict())[-1]
    n = sum(sum(ops.values()) for ops in seen.values())
    want = collectives_per_step(model, cfg)["total"]
    assert n == want, (seen, collectives_per_step(model, cfg))
    assert mp.active_children() == []


@pytest.mark.parametrize("cfg", [P(tp=2, global_batch_size=1), P(tp=2, global_batch_size=1, sequence_parallel=True),
                                 P(cp=2, global_batch_size=1), P(cp=4, global_batch_size=1), P(cp=2, tp=2, global_batch_size=1)])
def test_priced_operators_are_the_engines(cfg):
    "The operators the cost model prices per micro-batch under tp and cp are the ones the engine dispatches (counted on rank 0)."
    from supernode_nb.cost.engineops import engine_ops
    from supernode_nb.cost.steptime import blocking_collectives, _columns, _memory, _counts
    n = spawn("supernode_nb.runtime.accuracy:op_count_worker", cfg.world_size, model=TINY.to_dict(), cfg=cfg.to_dict())[0]
    C = _columns([cfg]); mem = _memory(TINY, C, _counts(TINY), True, 4)[2]
    priced = engine_ops(TINY, TINY.layers, 1, 0, cfg.tp, cfg.sequence_parallel, cfg.cp)["fwd_bwd"] + blocking_collectives(TINY, C, mem)[0]
    assert n == int(priced[0]), (n, priced)


@pytest.fixture(scope="module")
def prof(quick_profile):
    return quick_profile          # conftest's: one quick calibration of 2 and 4 ranks for the session


@pytest.fixture(scope="module")
def stored_prof():
    "A profile this machine measured, as a stored benchmark run keeps it: for what needs figures, not fresh ones."
    runs = sorted((Path(__file__).resolve().parent.parent / "benchmarks" / "results").glob("calibrate-*.json"))
    return MachineProfile.from_dict(json.loads(next(r for r in reversed(runs) if "AS" not in r.name).read_text())["profile"])


def test_prediction_follows_the_measured_figures(stored_prof):
    prof = stored_prof
    prof = dataclasses.replace(prof, matmul_tflops={"fp32": 0.05}, op_s=30e-6)   # the measured links and shares, fixed rates
    base = P(pp=2, global_batch_size=4)
    p0 = predict(TINY, base, prof)
    slow_ops = predict(TINY, base, dataclasses.replace(prof, op_s=2 * prof.op_s))
    assert slow_ops["compute_s"] > 1.5 * p0["compute_s"]                 # operators dominate tiny models on a CPU
    links = json.loads(json.dumps(prof.links)); links["loopback"]["2×2"]["all"][1] += 1.0     # the pooled fit prices send_recv
    slow_send = predict(TINY, base, dataclasses.replace(prof, links=links))
    assert slow_send["bubble_s"] > p0["bubble_s"] + 1.0 and slow_send["compute_s"] == p0["compute_s"]   # pp waits are bubble
    assert predict(TINY, P(pp=2, global_batch_size=8), prof)["compute_s"] > 1.9 * p0["compute_s"]
    two = dataclasses.replace(prof, devices=2, shares={"2": 1.0, "4": 0.25})       # 4 ranks on 2 cores: a quarter each
    dp4 = predict(TINY, P(dp=4, global_batch_size=8), two)
    assert dp4["step_s"] > predict(TINY, P(dp=4, global_batch_size=8), dataclasses.replace(two, shares={"2": 1.0, "4": 0.5}))["step_s"]
    tp2 = P(tp=2, global_batch_size=4)
    more = (
        predict(TINY, tp2, dataclasses.replace(prof, penalty_s={"2": prof.penalty(2) + 1e-3}))["compute_s"]
        - predict(TINY, tp2, prof)["compute_s"]
    )
    assert more == pytest.approx(1e-3 * collectives_per_step(TINY, tp2)["total"])   # each blocking collective costs the compute after it
    hidden = predict(TINY, P(dp=2, global_batch_size=8), dataclasses.replace(prof, overlap={"2": 1.0}))["comm_s"].get("dp", 0.0)
    assert predict(TINY, P(dp=2, global_batch_size=8), dataclasses.replace(prof, overlap={"2": 0.0}))["comm_s"]["dp"] > hidden
    z2 = lambda **kw: predict(TINY, P(dp=2, global_batch_size=8, zero=2), dataclasses.replace(prof, **kw))["comm_s"]["dp"]
    assert z2(queue={"2": 0.1}) < z2(queue={"2": 0.6}) and z2(queue_alone={"2": 0.5}) < z2(queue_alone={"2": 1.0})   # ZeRO's queued calls
    waits = lambda cfg, k, m=TINY: predict(m, cfg, dataclasses.replace(prof, waits={"2": k, "4": k}))["comm_s"]
    for cfg, ax, m in [(tp2, "tp", TINY), (P(dp=2, ep=2, global_batch_size=4), "ep", MOE)]:
        assert waits(cfg, 2.0, m)[ax] == pytest.approx(2 * waits(cfg, 1.0, m)[ax])     # blocking waits scale with the measured factor
    cp = P(cp=2, global_batch_size=4)
    ring = lambda k, issue: predict(TINY, cp, dataclasses.replace(prof, waits={"2": k}, issue_s=issue))["comm_s"]["cp"]
    assert ring(2.0, {"2×2": 1e-4}) == ring(1.0, {"2×2": 1e-4})   # cp's async shifts do not, their issue priced as compute;
    assert ring(2.0, {}) == pytest.approx(2 * ring(1.0, {}))          # a profile without the issue measured: as before
    cp2 = lambda x: predict(TINY, P(cp=2, global_batch_size=4), dataclasses.replace(prof, issue_s={"2×2": x}))   # a ring shift's issue is
    assert cp2(1e-3)["compute_s"] > cp2(0.0)["compute_s"] + 0.9 * 4 * 8 * 4 * 1e-3                              # its rank's compute:
    assert cp2(1e-3)["comm_s"]["cp"] == cp2(0.0)["comm_s"]["cp"]   # 4 micro-batches × 8 layers × 4 shifts; the waits as before
    dp2 = P(dp=2, global_batch_size=8)
    assert waits(dp2, 2.0)["dp"] == waits(dp2, 1.0)["dp"]                              # async gradient buckets do not
    apart = dataclasses.replace(prof, skew={"2": 0.1, "4": 0.2}, skew_phase_s={"2": 0.02, "4": 0.035})
    sync = lambda k: predict(TINY, P(dp=2, tp=2, global_batch_size=4), dataclasses.replace(apart, waits={"2": k, "4": k}))["comm_s"]["dp"]
    assert sync(2.0) > sync(1.0)   # longer tp waits: the replicas are longer apart before the gradient sync, and wait longer there


@pytest.mark.slow   # a calibration and real runs
def test_calibration_is_measured_and_saved(prof, tmp_path, capsys):
    assert prof.kind == "cpu" and prof.matmul_tflops["fp32"] > 0 and prof.op_s > 0   # (the figures' clamps are not checked here)
    assert set(prof.shares) == set(prof.penalty_s) == set(prof.overlap) == set(prof.queue) == set(prof.queue_alone) == {"2", "4"}
    # recompute costs something beyond its FLOPs: per region, per re-run operator, or both. The split is a difference of
    # two noisy timings (one CI run measured region_s 0.0, clipped at zero); their sum, a few ms, stands above the noise
    assert prof.region_s + prof.recompute_op_s > 0, prof.detail
    fits = prof.links["loopback"]["2×2"]
    assert {"all", "all_reduce", "all_to_all", "send_recv", "handoff"} <= set(fits)
    assert all(bw > 0 and lat >= 0 and call >= 0 for bw, lat, call in fits.values())   # gloo: a cost per call besides α–β
    assert prof.backend == "gloo"
    w2 = prof.detail["waits"]["2"]                                                       # a supervised tp 2 step's waits, measured
    assert min(w2["measured_s"]) > 0 and w2["priced_s"] > 0 and set(prof.waits) == {"2"}   # (the ratio: test_wait_ratio)
    assert prof.skew_phase_s["2"] > 0  # the phase as run (how much of the 20 ms asked depends on the host's load)
    coll = [r for r in prof.detail["link_rows"] if r["op"] != "handoff" and r["world"] == 2]  # each collective's CPU while it ran,
    assert coll and all("cpu" in r for r in coll)                                        # pooled by time into the world's figure
    assert set(prof.comm_cpu) == {"2", "4"} and abs(prof.comm_cpu["2"] - comm_cpu(coll)) < 1e-3
    assert cli_calibrate(["--quick", "--worlds", "2", "--name", "saved", "--archive", str(tmp_path / "a.sqlite"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["saved"] and find_profile("local", path=tmp_path / "a.sqlite").name == "saved"


def test_wait_ratio(stored_prof, monkeypatch):
    prof = stored_prof
    "A supervised step's tp waits over their price, from stand-in runs whose waits are known multiples of it (kept in ×0.5–3)."
    import supernode_nb.runtime.probes as probes
    from supernode_nb.runtime.calibrate import WAIT_PROBES, _supervised_waits
    from supernode_nb.cost.costmodel import estimate
    priced = estimate(TINY, P(**WAIT_PROBES[2]), "local", profile=dataclasses.replace(prof, waits={}), advise=False)
    priced = priced.breakdown["comm_s"]["tp"]
    for k, want in ((2.0, 2.0), (1.25, 1.25), (10.0, 3.0), (0.1, 0.5)):
        monkeypatch.setattr(probes, "measure", lambda m, cfg, k=k, **kw: {"comm_s": {"tp": k * priced}})
        got = _supervised_waits(TINY, prof, [2], runs=1)
        assert got["waits"] == {"2": want} and got["detail"]["2"]["priced_s"] == pytest.approx(priced), (k, got)


@pytest.mark.slow   # a calibration and real runs
def test_parts_line_up_with_a_real_run(prof):
    df = local_check(["tp2", "pp2 1f1b m2"], prof, repeats=2, steps=4, skip=1)
    assert list(df[df.layout == "tp2"].part) == ["step", "compute", "comm.tp", "other"]
    assert list(df[df.layout == "pp2 1f1b m2"].part) == ["step", "compute", "bubble", "other"]   # pp waits are bubble
    for name, g in df.groupby("layout"):
        assert g[g.part == "step"].predicted_s.iloc[0] == pytest.approx(g[g.part != "step"].predicted_s.sum(), rel=1e-9)
        assert (g.measured_s > 0).all() and (g.repeats == 2).all()
        assert g[g.part == "step"].measured_s.iloc[0] >= 0.5 * g[g.part != "step"].measured_s.sum()   # a step holds its parts
    assert mp.active_children() == []


@pytest.mark.slow   # a calibration and real runs
def test_a_lost_rank_costs_one_run_not_the_check(prof, monkeypatch):
    "A run that loses a rank (here killed on purpose) is tried once more; the check goes on, lists every lost run, and"
    "leaves out a layout no try measured, with no process left behind."
    from supernode_nb.runtime import accuracy
    from supernode_nb.runtime.faults import FaultSpec
    real, calls = accuracy.measure, []
    def flaky(model, cfg, *a, **k):       # runs 1, 3 and 4 lose rank 1 at their first step: dp2's first try, both of tp2's
        calls.append(cfg.world_size)
        return real(model, cfg, *a, fault=FaultSpec(rank=1, step=0, kind="kill") if len(calls) in (1, 3, 4) else None, **k)
    monkeypatch.setattr(accuracy, "measure", flaky)
    df = local_check(["dp2", "tp2"], prof, repeats=1, steps=3, skip=1)
    assert len(calls) == 4 and set(df.layout) == {"dp2"} and (df.repeats == 1).all()
    assert [(f["layout"], f["attempt"]) for f in df.attrs["failed"]] == [("dp2", 1), ("tp2", 1), ("tp2", 2)]
    assert all("rank 1" in f["error"] for f in df.attrs["failed"]), df.attrs["failed"]
    assert df.attrs["unmeasured"] == ["tp2"] and df.attrs["runs"] == 1
    monkeypatch.setattr(accuracy, "measure", lambda *a, **k: real(*a, fault=FaultSpec(rank=1, step=0, kind="kill"), **k))
    with pytest.raises(RuntimeError, match="no layout measured: every run lost a rank"):
        local_check(["dp2"], prof, repeats=1, steps=3, skip=1)
    assert mp.active_children() == []


@pytest.mark.parametrize("model,cfg", [("tiny-gpt", P(dp=2, global_batch_size=2)), ("tiny-moe", P(dp=2, ep=2, global_batch_size=2))])
def test_priced_ddp_operators_are_the_engines(model, cfg):
    "The operators the cost model prices for this engine's DDP (4 per parameter tensor, 3 per bucket) are the ones it dispatches."
    from supernode_nb.cost.engineops import engine_tensors
    from supernode_nb.cost.steptime import _n_buckets, _columns, _memory, _counts
    m = get_model(model)
    n = spawn("supernode_nb.runtime.accuracy:ddp_op_count_worker", cfg.world_size, model=m.to_dict(), cfg=cfg.to_dict())[0]
    mem = _memory(m, _columns([cfg]), _counts(m), True, 4)[2]
    buckets = sum(int(_n_buckets(mem[k], 4).item()) for k in ("Pd", "Pe") if np.asarray(mem[k]).item() > 0)   # fp32 gradients
    priced = 4 * int(engine_tensors(m, m.layers, cfg.ep)) + 3 * buckets
    assert abs(n - priced) <= 0.01 * priced, (n, priced)


@pytest.mark.slow   # a calibration and real runs
def test_run_is_priced_and_the_pair_kept(prof, tmp_path):
    "`supernode-nb run` prices the run with the newest profile before it starts, prints the estimate beside the measured step,"
    "keeps the pair in the archive (so the next run quotes its error), and refuses a profile the archive does not hold."
    import os, subprocess, sys
    from pathlib import Path
    from supernode_nb.foundation.store import Archive
    Archive(tmp_path / "archive.sqlite").save_profile(dataclasses.replace(prof, name="pricing"))
    env = dict(os.environ, SUPERNODE_NB_HOME=str(tmp_path), SUPERNODE_NB_ARCHIVE="on", OMP_NUM_THREADS="1")
    cli = lambda *a: subprocess.run(
        [str(Path(sys.executable).parent / "supernode-nb"), *a], capture_output=True, text=True, env=env, timeout=240
    )
    runs = [cli("run", "--world-size", "2", "--dp", "2", "--steps", "3") for _ in range(2)]
    for r in runs: assert r.returncode == 0, r.stderr
    first, second = (r.stdout.splitlines()[-2:] for r in runs)
    assert first[0].startswith("estimate: ") and "comm dp" in first[0] and first[0].endswith("costmodel.estimate, profile pricing")
    assert first[1].startswith("measured: ") and first[1].endswith("before this run, no history yet"), first
    assert "before this run, past error" in second[1] and "over 1 run(s) with profile pricing" in second[1], second
    pairs = Archive(tmp_path / "archive.sqlite").accuracy_pairs("pricing")
    assert [p["layout"] for p in pairs] == ["dp2", "dp2"] and all(p["predicted_s"] > 0 and p["measured_s"] > 0 for p in pairs)
    assert f"estimate {pairs[0]['error_pct']:+.0f} %" in first[1]      # the error printed is the one the archive keeps
    j = json.loads(cli("run", "--world-size", "2", "--tp", "2", "--steps", "2", "--json").stdout)
    assert j["estimate"]["profile"] == "pricing" and j["expected_error"]["n"] == 2 and j["estimate_error_pct"] is not None
    bad = cli("run", "--profile", "nosuch", "--steps", "2")
    assert bad.returncode == 1 and "--profile nosuch: profile 'nosuch' not found" in bad.stderr and "step 1/2" not in bad.stderr
    assert "saved: pricing (local)" in bad.stderr, bad.stderr                      # the error names what there is
    assert len(Archive(tmp_path / "archive.sqlite").list_runs(kind="run")) == 3   # the refused run never started
    # the newest profile cannot price (no matmul rate): without --profile the run goes ahead unpriced, and says so
    Archive(tmp_path / "archive.sqlite").save_profile(dataclasses.replace(prof, name="broken", matmul_tflops={}))
    unpriced = cli("run", "--world-size", "2", "--dp", "2", "--steps", "2")
    assert unpriced.returncode == 0 and "warning: not priced" in unpriced.stderr and "has no matmul rate" in unpriced.stderr, (
        unpriced.stderr
    )
    assert "estimate: " not in unpriced.stdout and not Archive(tmp_path / "archive.sqlite").accuracy_pairs("broken")


def test_stored_benchmark_runs_reprice():
    "Every stored run of benchmarks/calibrate.py can be priced by this tree's model: each of its layouts is still known,"
    "its first calibration loads as a profile, and every error is a number (benchmarks/reprice.py; no accuracy asserted)."
    import subprocess, sys
    from pathlib import Path
    root = Path(__file__).resolve().parents[1]
    stored = sorted((root / "benchmarks" / "results").glob("calibrate-*.json"))
    assert stored, "no stored runs under benchmarks/results"
    out = subprocess.run([sys.executable, str(root / "benchmarks" / "reprice.py")], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    assert [r["run"] for r in d["runs"]] == [p.name for p in stored]
    for r in d["runs"]:
        assert r["not_in_layouts"] == [] and r["now"]["n"] >= 12, r["run"]
        assert all(math.isfinite(e) for e in r["error_pct"].values()), r["run"]
    assert d["pooled"]["n"] == sum(r["now"]["n"] for r in d["runs"])
    by = d["by_layout"]                                   # each layout over the runs that priced it, most negative first
    assert set(by) == {k for r in d["runs"] for k in r["error_pct"]}
    assert all(b["n"] == sum(k in r["error_pct"] for r in d["runs"]) and b["min"] <= b["signed_median"] <= b["max"] for k, b in by.items())
    assert [b["signed_median"] for b in by.values()] == sorted(b["signed_median"] for b in by.values())
