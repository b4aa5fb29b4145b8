"""The run archive under concurrent writers and through the real `supernode-nb archive` command."""
import json, multiprocessing as mp, os, sqlite3, subprocess, sys
import pytest
from procs import cli
from supernode_nb.foundation.store import Archive, ArchiveError, _record_many
from supernode_nb.foundation.config import MODEL_PRESETS, ParallelConfig


def test_four_writers_at_once(tmp_path):
    path = str(tmp_path / "a.sqlite")
    with mp.get_context("fork").Pool(4) as pool:
        ids = pool.starmap(_record_many, [(path, 25, f"w{i}") for i in range(4)])
    flat = sorted(i for chunk in ids for i in chunk)
    assert flat == list(range(1, 101))                       # every write landed, no id twice
    a = Archive(path)
    assert len(a.list_runs()) == 100
    assert all(len(a.list_runs(label=f"w{i}-")) == 25 for i in range(4))
    with sqlite3.connect(path) as con: assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_reader_while_writing(tmp_path):
    path = str(tmp_path / "a.sqlite")
    Archive(path).record_plan(MODEL_PRESETS["tiny-gpt"], ParallelConfig(), versions={})
    ctx = mp.get_context("fork")
    p = ctx.Process(target=_record_many, args=(path, 50, "bg")); p.start()
    seen = []
    while p.is_alive(): seen.append(len(Archive(path).list_runs()))   # WAL: readers never blocked, never see half a row
    p.join(); assert p.exitcode == 0
    assert seen == sorted(seen) and len(Archive(path).list_runs()) == 51


def _cli(*args, home):
    return cli("archive", *args, env={"SUPERNODE_NB_HOME": str(home)})


def test_cli_end_to_end(tmp_path):
    a = Archive(tmp_path / "archive.sqlite")              # the default location under SUPERNODE_NB_HOME
    pid = a.record_plan(MODEL_PRESETS["tiny-gpt"], ParallelConfig(dp=2, tp=2), estimate={"step_s": 0.1})
    rid = a.record_run(MODEL_PRESETS["tiny-gpt"], ParallelConfig(dp=2, tp=2),
                       measured={"losses": [5.5, 5.4], "steps": [{"step": 0, "ranks": [{"rank": 0, "wall_s": 0.2}]},
                                                                  {"step": 1, "ranks": [{"rank": 0, "wall_s": 0.12}]}]},
                       extra={"run_args": {"steps": 2, "seed": 1}})
    r = _cli("list", "--json", home=tmp_path); assert r.returncode == 0, r.stderr
    assert [x["id"] for x in json.loads(r.stdout)] == [rid, pid]
    r = _cli("compare", str(pid), str(rid), "--json", home=tmp_path); assert r.returncode == 0, r.stderr
    rows = {(x["section"], x["field"]): x for x in json.loads(r.stdout)}
    assert rows[("predicted vs measured", "step_s")][f"#{rid}"] == pytest.approx(0.12)
    r = _cli("rerun", str(rid), "--dry-run", home=tmp_path)
    assert (
        r.stdout.strip() == "supernode-nb run --model tiny-gpt --tp 2 --dp 2 --global-batch-size 2 --steps 2 --seed 1"
    )  # its batch, not the flags' 8
    r = _cli("show", "999", home=tmp_path)
    assert r.returncode == 1 and "no run with id 999" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    (tmp_path / "archive.sqlite").write_bytes(b"\0garbage" * 64)
    for f in ("archive.sqlite-wal", "archive.sqlite-shm"): (tmp_path / f).unlink(missing_ok=True)
    r = _cli("list", home=tmp_path)
    assert r.returncode == 1 and str(tmp_path / "archive.sqlite") in r.stderr and "not a database" in r.stderr
