"""The `supernode-nb place` command run as a real process, and the placement properties at more examples than a
notebook cell can afford."""
import json, subprocess, sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from supernode_nb.foundation.config import ConfigError
from supernode_nb.foundation.layout import RankLayout
from supernode_nb.foundation.placement import STRATEGIES, PlacementError, check_placement, place
from supernode_nb.foundation.topology import TOPOLOGY_PRESETS, SIZE_PARAM, get_topology

ROOT = Path(__file__).resolve().parent.parent
# supernode_nb.cli has no `__main__` guard yet, so `python -m supernode_nb.cli` would do nothing: call main() instead.


from procs import cli


def test_place_json_shape():
    r = cli("place", "--topology", "dgx-h100-superpod", "--nodes", "64", "--tp", "8", "--pp", "4", "--dp", "16",
            "--strategy", "topology-aware", "--json")
    assert r.returncode == 0, r.stderr
    o = json.loads(r.stdout)
    assert len(o["devices"]) == 512 and sorted(o["devices"]) == list(range(512))
    assert set(o["axes"]) >= {"tp", "dp", "pp", "cp", "ep"}
    tp = o["axes"]["tp"]
    assert tp["groups_leaving_domain"] == 0 and tp["share_by_level"] == {"nvlink": 1.0, "ib": 0.0}
    assert o["axes"]["dp"]["share_by_level"]["ib"] == 1.0
    assert abs(sum(o["axes"]["pp"]["share_by_plane"].values()) - 1) < 1e-9
    assert o["world_size"] == 512 and o["topology"]["name"] == "dgx-h100-superpod"
    assert len(o["nodes"]) == 64 and all(n["env"]["CUDA_VISIBLE_DEVICES"] for n in o["nodes"])


def test_place_sized_to_fit_with_unhealthy_and_script():
    r = cli("place", "--topology", "cloudmatrix384", "--tp", "8", "--pp", "4", "--dp", "12", "--unhealthy", "3,17",
            "--script", "train.py", "--json")
    assert r.returncode == 0, r.stderr
    o = json.loads(r.stdout)
    assert o["topology"]["sizes"] == {"supernodes": 2} and o["topology"]["unhealthy"] == [3, 17]
    assert not {3, 17} & set(o["devices"])
    assert o["axes"]["tp"]["groups_leaving_domain"] == 0
    assert all("torchrun --nnodes" in c and "ASCEND_RT_VISIBLE_DEVICES=" in c for c in o["torchrun"])


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_place_strategies_text(strategy, capsys):
    from supernode_nb.cli import main
    assert main(["place", "--topology", "local", "--dp", "4", "--strategy", strategy, "--seed", "1"]) == 0
    assert f"strategy {strategy}" in capsys.readouterr().out


BAD_ARGS = [
    (["--topology", "tpu-v9", "--tp", "2"], "unknown topology preset 'tpu-v9'"),
    (["--topology", "dgx-h100-superpod", "--racks", "2"], "takes nodes=..., not racks"),
    (["--topology", "dgx-h100-superpod", "--nodes", "1", "--dp", "16"], "needs 16 healthy devices"),
    (["--topology", "local", "--devices", "4", "--unhealthy", "9"], "device 9 out of range 0..3"),
    (["--topology", "local", "--unhealthy", "3,x"], "invalid int_list value"),
    (["--topology", "local", "--tp", "zero"], "invalid int value"),
    (["--topology", "local", "--dp", "2", "--ep", "4"], "ep=4 must divide"),
    (["--topology", "local", "--strategy", "greedy"], "invalid choice"),
    (["--tp", "2"], "required: --topology"),
]


def _one_line_error(rc, out, err, fragment):
    assert rc == 2, (rc, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("supernode-nb place: error:") and fragment in lines[0], err
    assert "Traceback" not in err and out == ""


@pytest.mark.parametrize("args, fragment", BAD_ARGS)
def test_place_bad_args_one_line_exit_2(args, fragment, capsys):
    "Every bad argument through the real dispatcher, in this process (each new process pays for importing torch)."
    from supernode_nb.cli import main
    rc = main(["place", *args])
    cap = capsys.readouterr()
    _one_line_error(rc, cap.out, cap.err, fragment)


@pytest.mark.parametrize("args, fragment", [BAD_ARGS[0], BAD_ARGS[2], BAD_ARGS[5]])
def test_place_bad_args_one_line_exit_2_subprocess(args, fragment):
    r = cli("place", *args)
    _one_line_error(r.returncode, r.stdout, r.stderr, fragment)


# ---- properties, at more examples than the notebook runs ----

@st.composite
def preset_cases(draw):
    name = draw(st.sampled_from(sorted(TOPOLOGY_PRESETS)))
    param, unit = SIZE_PARAM[name]
    n = draw(st.integers(1, {"supernodes": 2, "racks": 3, "nodes": 12, "devices": 16}[param]))
    topo = get_topology(name, **{param: n})
    bad = draw(st.lists(st.integers(0, topo.num_devices - 1), max_size=max(1, topo.num_devices // 8), unique=True))
    d = {a: draw(st.sampled_from([1, 2, 4, 8, 16])) for a in ("tp", "pp", "dp")}
    d["cp"] = draw(st.sampled_from([1, 2]))
    d["ep"] = draw(st.sampled_from([e for e in (1, 2, 4, 8) if (d["dp"] * d["cp"]) % e == 0]))
    order = draw(st.sampled_from(["tp-cp-ep-dp-pp", "dp-tp-cp-ep-pp", "cp-ep-dp-tp-pp", "tp-dp-cp-ep-pp", "ep-tp-cp-dp-pp"]))
    try: layout = RankLayout(order=order, **d)
    except ConfigError: layout = RankLayout(**d)
    return layout, topo.with_unhealthy(bad)


@settings(max_examples=300, deadline=None)
@given(preset_cases(), st.integers(0, 100))
def test_every_rank_gets_a_distinct_healthy_device(case, seed):
    layout, topo = case
    if len(topo.healthy_ids()) < layout.world_size:
        with pytest.raises(PlacementError, match="healthy devices"): place(layout, topo)
        return
    for s in STRATEGIES: check_placement(place(layout, topo, s, seed))


@settings(max_examples=300, deadline=None)
@given(preset_cases())
def test_topology_aware_never_worse_than_naive_on_tp(case):
    layout, topo = case
    if len(topo.healthy_ids()) < layout.world_size: return
    aware, naive = place(layout, topo), place(layout, topo, "naive")
    ra, rn = aware.axis_report(), naive.axis_report()
    assert ra["tp"]["groups_leaving_domain"] <= rn["tp"]["groups_leaving_domain"]
    # and, with no unhealthy device, TP stays in nodes whenever it fits one
    if not topo.unhealthy and layout.degrees["tp"] <= topo.devices_per_node:
        assert ra["tp"]["groups_leaving_node"] == 0
    # every flagged group is a group that leaves its domain, and each carries a reason
    for ax, r in ra.items():
        assert len(r["flags"]) == r["groups_leaving_domain"] and all(": " in f for f in r["flags"])


def test_tp_leaving_domain_is_the_minimum_possible():
    "With unhealthy devices scattered, each domain holds floor(healthy/tp) TP groups: the optimum."
    topo = get_topology("atlas-a2-pod", nodes=16)
    rng = np.random.default_rng(0)
    topo = topo.with_unhealthy(rng.choice(128, 20, replace=False).tolist())
    layout = RankLayout(tp=4, dp=27)                              # 108 of 108 healthy devices
    p = place(layout, topo)
    check_placement(p)
    h = np.bincount(topo.domain_of[topo.healthy_ids()], minlength=topo.num_domains)
    best_inside = min(27, int((h // 4).sum()))
    assert p.axis_report()["tp"]["groups_leaving_domain"] == 27 - best_inside
