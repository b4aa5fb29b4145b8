"""A hang explained from the ranks' flight rings — hand-built rings for each cause, and real hangs on gloo."""
import pytest
from supernode_nb.comm.collectives import CommRecorder
from supernode_nb.comm.flight import explain, lines, flight_table, flight_figure, where
from supernode_nb.runtime.launch import spawn


def E(rank, seq, op="all_reduce", group=(0, 1), axis="tp", state="done", nbytes=64, dtype="float32"):
    return {"rank": rank, "seq": seq, "group": list(group), "axis": axis, "op": op, "nbytes": nbytes, "dtype": dtype,
            "state": state, "error": ""}


def key(c): return (c["kind"], c["rank"], c["group"], c["op"], c["seq"])


def test_ring_keeps_the_last_n_with_sequence_numbers_per_group():
    rec = CommRecorder(rank=0, flight_size=4)
    for i in range(6): rec.post("tp" if i % 2 else "dp", "all_reduce", [0, 1] if i % 2 else [0, 2], 8)
    fl = rec.flight()
    assert len(fl) == 4 and [(f["axis"], f["seq"]) for f in fl] == [("dp", 2), ("tp", 2), ("dp", 3), ("tp", 3)]
    assert all(f["state"] == "posted" for f in fl) and isinstance(fl[0]["group"], list)
    fl[0]["state"] = "done"                                   # a copy: the ring is not changed through it
    assert rec.flight()[0]["state"] == "posted"


def test_missing_rank_named():
    g = (0, 1, 2, 3)
    rings = {r: [E(r, 1, group=g, axis="dp"), E(r, 2, group=g, axis="dp", state="running")] for r in (0, 1, 3)}
    rings[2] = [E(2, 1, group=g, axis="dp")]
    (c,) = explain(rings)
    assert key(c) == ("missing", 2, [0, 1, 2, 3], "all_reduce", 2) and c["waiting"] == [0, 1, 3] and c["last_seq"] == 1
    assert "rank 2 never entered all_reduce #2 on dp" in c["text"]


def test_mismatch_op_size_and_dtype_named():
    for other in ({"op": "all_gather"}, {"nbytes": 128}, {"dtype": "bfloat16"}):
        rings = {0: [E(0, 1), E(0, 2, state="running")], 1: [E(1, 1), E(1, 2, state="running", **other)],
                 2: [E(2, 1, group=(2, 3)), E(2, 2, group=(2, 3))], 3: [E(3, 1, group=(2, 3)), E(3, 2, group=(2, 3))]}
        (c,) = explain(rings)
        assert key(c) == ("mismatch", 1, [0, 1], "all_reduce", 2), other
        assert all(c["other"][k] == v for k, v in other.items())


def test_majority_names_the_odd_one_out_and_uneven_all_to_all_is_fine():
    g = (0, 1, 2)
    rings = {r: [E(r, 1, group=g, state="running")] for r in g}
    rings[0][0]["op"] = "broadcast"                           # rank 0 is the odd one even though it is the lowest
    assert [key(c) for c in explain(rings)] == [("mismatch", 0, [0, 1, 2], "all_reduce", 1)]
    rings = {r: [E(r, 1, "all_to_all", group=g, nbytes=8 * (r + 1), state="running")] for r in g}
    assert explain(rings) == []                               # all present, sizes may differ: slow, not broken


def test_rank_stuck_in_another_group_is_a_mismatch_across():
    rings = {0: [E(0, 1, group=(0, 1), state="running")],
             1: [E(1, 1, group=(1, 3), axis="dp", state="running")],
             3: [E(3, 1, group=(1, 3), axis="dp", state="running")]}
    (c,) = explain(rings)
    assert key(c) == ("mismatch", 1, [0, 1], "all_reduce", 1) and c["across"] and c["other"]["axis"] == "dp"


def test_dead_peer_named_from_world_and_from_dead():
    rings = {0: [E(0, 1, state="running")]}
    assert [key(c) for c in explain(rings, world=2)] == [("dead_peer", 1, [0, 1], "all_reduce", 1)]
    rings[1] = [E(1, 1, state="running")]
    assert [c["kind"] for c in explain(rings, dead=[1])] == ["dead_peer"]
    assert explain(rings) == []                               # both in it, same op: nothing wrong to name


def test_lines_and_table():
    rings = {0: [E(0, 1), E(0, 2, state="running")], 1: [E(1, 1)]}
    cs = explain(rings)
    assert lines(cs) == [f"[missing] rank 1: {cs[0]['text']}"]
    t = flight_table(rings, cs)
    assert "group [0, 1]" in t and "all_reduce running" in t and "—" in t and "<script" not in t
    assert where(rings[1]) is None and where(rings[0])["seq"] == 2
    fig = flight_figure(rings, [0, 1], cs)
    assert fig.data[0].y == ("rank 0", "rank 1 ✗") and fig.data[0].text[1][1] == "—"   # rank 1 never entered #2


@pytest.mark.parametrize("scenario,want", [("mismatch", ("mismatch", 1, [0, 1], "all_reduce", 2)),
                                           ("missing", ("missing", 3, [2, 3], "all_reduce", 2))])
def test_real_hang_on_four_gloo_ranks_is_explained(scenario, want):
    res = spawn("supernode_nb.comm.collectives:_hang_worker", 4, scenario, timeout_s=90, group_timeout_s=20)
    causes = explain({r: x["flight"] for r, x in enumerate(res)})
    assert [key(c) for c in causes] == [want], lines(causes)
    stuck = 0 if scenario == "mismatch" else 2
    assert res[stuck]["error"]                                # the waiting rank really gave up on its collective
    assert all(e["state"] == "done" for e in res[stuck]["flight"][:-1]) and res[stuck]["flight"][-1]["state"] == "running"
