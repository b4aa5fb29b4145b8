"""`supernode-nb sweep` when a run loses a rank: the sweep goes on, archives the run as failed with its estimate, says
which configuration failed and why, and ranks the ones measured. The lost rank is real: rank 1 is killed at its first step."""
import dataclasses, json, multiprocessing as mp
from supernode_nb.foundation.store import Archive
from supernode_nb.runtime import runner
from supernode_nb.runtime.faults import FaultSpec
from supernode_nb.runtime.sweep import cli_sweep, row_text


def test_a_lost_rank_fails_one_configuration_not_the_sweep(tmp_path, monkeypatch, capsys):
    real, calls = runner.run, []
    def first_loses_a_rank(spec, **kw):
        calls.append(spec.parallel)
        return real(dataclasses.replace(spec, fault=FaultSpec(rank=1, step=0, kind="kill")) if len(calls) == 1 else spec, **kw)
    monkeypatch.setattr(runner, "run", first_loses_a_rank)
    a = tmp_path / "a.sqlite"
    args = ["--world-size", "2", "--global-batch-size", "4", "--top", "2", "--steps", "3", "--profile", "auto", "--archive", str(a)]
    assert cli_sweep(args + ["--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    first, second = out["rows"]
    assert len(calls) == 2 and first["measured_s"] is None and first["error_pct"] is None and "rank 1" in first["failed"]
    assert second["measured_s"] > 0 and second["failed"] == "" and out["kendall_tau"] is None   # one measured: no ranking
    runs = Archive(a).list_runs(kind="run")
    assert sorted(r.outcome for r in runs) == ["failed", "ok"]
    failed = next(r for r in runs if r.outcome == "failed")
    assert "rank 1" in failed.error and failed.estimate["step_time_s"] == first["predicted_s"]
    assert row_text(first).startswith("1. ") and "failed: " in row_text(first) and "measured" not in row_text(first)
    assert mp.active_children() == []


def test_a_sweep_with_nothing_measured_exits_1(tmp_path, monkeypatch, capsys):
    real = runner.run
    monkeypatch.setattr(
        runner, "run", lambda spec, **kw: real(dataclasses.replace(spec, fault=FaultSpec(rank=1, step=0, kind="kill")), **kw)
    )
    fig = tmp_path / "sweep.html"
    assert (
        cli_sweep(
            [
                "--world-size",
                "2",
                "--global-batch-size",
                "4",
                "--top",
                "1",
                "--steps",
                "3",
                "--archive",
                str(tmp_path / "a.sqlite"),
                "--figure",
                str(fig),
            ]
        )
        == 1
    )
    text = capsys.readouterr().out
    assert "failed: " in text and "over 0 configs; 1 failed" in text
    assert "nothing measured" in fig.read_text()                    # the chart is drawn, and says why it is empty
    assert mp.active_children() == []
