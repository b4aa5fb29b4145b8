"""The first hour of a new user: one default batch everywhere, every CLI option explained, the archive never filled
silently, one name for one thing (old names warned), and `make demo`'s text formatted and pointing at every tutorial."""
import contextlib, io, json, os, warnings
from pathlib import Path
import pytest

from supernode_nb.cli import COMMANDS, _resolve, main
from supernode_nb.foundation.config import DEFAULT_GLOBAL_BATCH, ParallelConfig, get_model
from supernode_nb.foundation.core import parser_of, undocumented

ROOT = Path(__file__).resolve().parents[1]


def _cli(*argv, env=None) -> tuple[int, str, str]:
    "`supernode-nb ARGV` in this process: (status, stdout, stderr)."
    out, err = io.StringIO(), io.StringIO()
    old = {k: os.environ.get(k) for k in (env or {})}
    os.environ.update(env or {})
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err): rc = main(list(argv))
    finally:
        for k, v in old.items():
            if v is None: os.environ.pop(k, None)
            else: os.environ[k] = v
    return rc, out.getvalue(), err.getvalue()


@pytest.fixture(autouse=True)
def _no_archive(monkeypatch): monkeypatch.setenv("SUPERNODE_NB_ARCHIVE", "off")


@pytest.mark.parametrize("degrees", [dict(dp=2, tp=2), dict(dp=2, pp=2), dict(dp=4)])
def test_one_default_batch(degrees):
    "The CLI's estimate and run, the Python API's estimate and make_spec, and the dashboard settle on one global batch."
    from supernode_nb.cost.costmodel import estimate
    from supernode_nb.runtime.runner import spec_from_argv
    from supernode_nb.runtime.spec import make_spec
    from supernode_nb.ui.dashstate import DashboardState
    flags = [x for k, v in degrees.items() for x in (f"--{k}", str(v))]
    rc, out, _ = _cli("estimate", *flags, "--topology", "local", "--profile", "none", "--json")
    assert rc == 0
    world = 1
    for v in degrees.values(): world *= v
    got = {"cli estimate": json.loads(out)["config"]["global_batch_size"],
           "cli run": spec_from_argv(flags)[0].parallel.gbs,
           "python estimate": estimate(get_model("tiny-gpt"), ParallelConfig(**degrees), "local").config["global_batch_size"],
           "python make_spec": make_spec("tiny-gpt", **degrees).parallel.gbs,
           "dashboard": DashboardState(world=world, **degrees).config().gbs}
    assert set(got.values()) == {DEFAULT_GLOBAL_BATCH}, got


def test_every_option_has_help():
    "Every option of every subcommand says what it does (`core.undocumented` over each command's parser)."
    missing = []
    for name in COMMANDS:
        missing += undocumented(parser_of(_resolve(name)))
    assert missing == [], f"{len(missing)} options without help: {missing}"


def test_top_level_help_says_what_each_command_does():
    rc, out, _ = _cli("--help")
    rows = {l.split()[0]: l.split(None, 1)[1] for l in out.splitlines() if l.startswith("  ")}
    assert rc == 0 and set(rows) == set(COMMANDS)
    assert rows["plan"].startswith("the fastest configurations that fit") and all(len(v) > 10 for v in rows.values())


@pytest.mark.parametrize("argv", [("estimate", "--dp", "2", "--topology", "local", "--profile", "none"),
                                  ("plan", "--global-batch-size", "8", "--devices", "2", "--topology", "local", "--top", "1")])
def test_recording_is_said(argv, tmp_path):
    "estimate and plan say where they recorded and how to stop it; with SUPERNODE_NB_ARCHIVE=off they record and say nothing."
    from supernode_nb.foundation.store import Archive
    env = {"SUPERNODE_NB_ARCHIVE": "on", "SUPERNODE_NB_HOME": str(tmp_path)}
    rc, out, _ = _cli(*argv, env=env)
    path = tmp_path / "archive.sqlite"
    assert rc == 0 and f"archived as record 1 in {path}" in out and "SUPERNODE_NB_ARCHIVE=off records nothing" in out
    rc, out, _ = _cli(*argv, "--json", env=env)
    note = json.loads(out)["archived"]
    assert (note["id"], note["path"]) == (2, str(path)) and len(Archive(path).list_runs()) == 2
    rc, out, _ = _cli(*argv, "--json", env={"SUPERNODE_NB_ARCHIVE": "off", "SUPERNODE_NB_HOME": str(tmp_path)})
    assert json.loads(out)["archived"] is None and len(Archive(path).list_runs()) == 2


@pytest.mark.parametrize("argv,old,new", [
    (("estimate", "--topology", "local", "--profile", "none", "--json", "--global-batch", "4"), "--global-batch", "--global-batch-size"),
    (("estimate", "--topology", "local", "--profile", "none", "--json", "--micro-batch", "2"), "--micro-batch", "--micro-batch-size"),
    (("validate", "--json", "--world", "1"), "--world", "--world-size")])
def test_old_flags_work_and_warn(argv, old, new):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        rc, out, err = _cli(*argv)
    assert rc == 0 and f"{old} is deprecated; use {new}" in err
    assert any(x.category is DeprecationWarning and new in str(x.message) for x in w)
    d = json.loads(out)
    if old == "--global-batch": assert d["config"]["global_batch_size"] == 4
    if old == "--micro-batch": assert d["config"]["micro_batch_size"] == 2
    if old == "--world": assert d["world_size"] == 1


def test_old_python_names_warn():
    from supernode_nb.cost.planner import plan
    from supernode_nb.runtime.sweep import sweep
    import inspect
    assert "global_batch_size" in inspect.signature(plan).parameters and "world_size" in inspect.signature(sweep).parameters
    with pytest.warns(DeprecationWarning, match=r"plan\(global_batch=...\) is deprecated; use global_batch_size="):
        p = plan(get_model("tiny-gpt"), "local", global_batch=4, top=1, max_devices=2)
    assert p.global_batch == 4


def test_demo_names_every_tutorial():
    "`make demo`'s 'open next' lists the teaching path as it is on disk."
    from supernode_nb.ui.demo import NEXT, TUTORIALS
    on_disk = sorted(p.stem for p in (ROOT / "nbs" / "tutorials").glob("*.ipynb"))
    assert [n for n, _ in TUTORIALS] == on_disk and len(on_disk) >= 16
    text = "\n".join(NEXT).format(report="demo.html")
    assert all(f"{n}.ipynb" in text for n in on_disk)


def test_calibration_progress_is_formatted():
    "The calibration lines the demo prints: rounded figures, no dict or list printed raw."
    from supernode_nb.runtime.calibrate import _world_text
    f = dict(background=0.1, share=0.22617157217412406, penalty_s=1.234e-4, issue_s={"2×2": 1.1e-3}, cpu=0.51234, overlap=0.3,
             queue_alone=0.1, queue=0.2, skew=0.01, link_fits={"2×2": {"all": [0.6123456, 4.81e-5, 1e-6]}})
    t = _world_text(2, f)
    assert "share 0.23" in t and "links 2×2 0.61 GB/s + 48 µs" in t
    assert "{" not in t and "[" not in t and "0.2261" not in t
