"""A NIC bound to the wrong plane flagged by the placement check and by doctor, with its cost."""
import pytest
from supernode_nb.foundation.config import get_model, ParallelConfig
from supernode_nb.foundation.layout import RankLayout
from supernode_nb.foundation.placement import place
from supernode_nb.foundation.topology import get_topology, TopologyError
from supernode_nb.foundation.planes import check_binding, host_binding, slowed_topology, link_speeds
from supernode_nb.ops.doctor import doctor
from supernode_nb.ops.netcheck import check_plane_binding, check_link_speed

SWAP = {"parameter": "eth0", "management": "ib0"}           # parameter and management NICs swapped


def test_placement_flags_the_axis_on_the_wrong_plane():
    T = get_topology("dgx-h100-superpod", nodes=4)
    P = place(RankLayout(tp=8, dp=4), T.with_binding({3: SWAP}))
    rep = P.plane_report({"dp": 2e9, "tp": 8e9}, step_s=0.5)
    assert rep["axes"]["dp"]["lands_on"] == {"parameter": [0, 1, 2], "management": [3]}
    assert "tp" not in rep["axes"]                            # tp stays on NVLink: no NIC involved
    assert rep["flags"][0] == "dp: parameter traffic of node(s) 3 lands on the management plane via eth0 (12.5 GB/s per node, not 400)"
    assert any(f.startswith("management plane saturated") for f in rep["flags"])
    assert [m["node"] for m in rep["misbindings"]] == [3, 3]
    assert "e.g. dp: parameter traffic of node(s) 3 lands on the management plane" in P.summary()   # the placement's own report
    assert P.to_dict()["planes"]["axes"]["dp"]["lands_on"]["management"] == [3]
    good = place(RankLayout(tp=8, dp=4), T).plane_report({"dp": 2e9}, 0.5)
    assert good["flags"] == [] and good["planes"]["parameter"]["seconds"] < 0.5


def test_saturated_plane_without_misbinding():
    T = get_topology("atlas-a2-pod", nodes=2)
    rep = place(RankLayout(tp=8, dp=2), T).plane_report({"dp": 40e9}, step_s=1.0)   # 8 × 40 GB through 200 GB/s: 1.6 s
    assert rep["misbindings"] == [] and rep["flags"] == [
        "parameter plane saturated: 320.00 GB per node per step need 1.60 s at 200 GB/s, step is 1.00 s (dp)"]


def test_doctor_fails_the_network_layer_with_the_step_time_cost():
    rep = doctor(get_model("tiny-gpt"), ParallelConfig(tp=8, dp=2), 16, topology="atlas-a2-pod", binding=SWAP,
                 checks=[check_plane_binding])
    c = rep.check("network", "binding")
    assert c.verdict == "fail" and rep.layer_verdict("network") == "fail" and not rep.ok
    assert "dp: parameter traffic of node(s) 0,1 lands on the management plane" in c.detail
    assert c.data["misbound_step_s"] > c.data["step_s"] and c.data["cost_s"] == pytest.approx(c.data["misbound_step_s"] - c.data["step_s"])
    assert c.data["misbound_comm_s"]["dp"] > 50 * c.data["comm_s"]["dp"]     # 25 → 0.156 GB/s per device (+ latency)
    assert c.data["misbound_comm_s"]["tp"] == c.data["comm_s"]["tp"]         # HCCS untouched
    ok = doctor(get_model("tiny-gpt"), ParallelConfig(tp=8, dp=2), 16, topology="atlas-a2-pod", binding={"parameter": "ib0"},
                checks=[check_plane_binding])
    assert ok.check("network", "binding").verdict == "ok"


def test_host_interfaces_to_planes():
    subnets = {"parameter": "198.18.0.0/24", "management": "198.18.1.0/24", "storage": "198.18.2.0/24"}
    addrs = {"lo": ["127.0.0.1"], "p0": ["198.18.0.7"], "m0": ["198.18.1.7"], "s0": ["198.18.2.7"]}
    speeds = {"p0": 50.0, "m0": 1.25, "s0": 12.5}
    nics, b = host_binding(subnets, {"HCCL_SOCKET_IFNAME": "m0,p0"}, addrs, speeds)
    assert {n: x.plane for n, x in nics.items()} == {"p0": "parameter", "m0": "management", "s0": "storage"}
    (m,) = check_binding(get_topology("local").with_binding(b, nics))
    assert (m.traffic, m.iface, m.lands_on, m.slower) == ("parameter", "m0", "management", True)
    nics, b = host_binding(subnets, {"HCCL_SOCKET_IFNAME": "p0"}, addrs, speeds)
    assert check_binding(get_topology("local").with_binding(b, nics)) == []


def test_slowed_topology_and_bad_nodes():
    T = get_topology("atlas-a2-pod", nodes=2)
    with pytest.raises(TopologyError, match="out of range"): T.with_binding({5: SWAP})
    S = slowed_topology(T.with_binding({1: {"parameter": "eth9"}}))          # no such interface: nothing gets through
    assert S.level_of("roce").bandwidth_GBps == 0.0 and T.level_of("roce").bandwidth_GBps == 25.0


def test_link_far_below_its_level():
    T = get_topology("gb200-nvl72")
    rows = [{"op": "all_gather", "bytes": 256 << 20, "group_size": 72, "busbw_gbps": 30.0},
            {"op": "all_gather", "bytes": 256 << 20, "group_size": 72, "busbw_gbps": 700.0, "level": "ib"}]
    found = {l["level"]: l for l in link_speeds(rows, T)}
    assert found["nvlink"]["slow"] and not found["ib"]["slow"]
    rep = doctor(get_model("tiny-gpt"), ParallelConfig(dp=72), 72, topology="gb200-nvl72", commbench=rows[:1],
                 checks=[check_link_speed])
    assert rep.check("network", "link speed").verdict == "warn"


def test_doctor_reads_this_hosts_interfaces(monkeypatch):
    "loopback declared the management plane and pinned for gloo: the gradients' interface is misbound."
    sub = {"parameter": "198.18.201.0/24", "management": "127.0.0.0/8"}
    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "lo")
    c = doctor(get_model("tiny-gpt"), ParallelConfig(dp=2), 2, subnets=sub, checks=[check_plane_binding]).check("network", "binding")
    assert c.verdict == "warn" and "parameter traffic leaves on lo, wired to the management plane" in c.detail, c.detail
    monkeypatch.delenv("GLOO_SOCKET_IFNAME")
    for v in ("HCCL_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME"): monkeypatch.delenv(v, raising=False)
    c = doctor(get_model("tiny-gpt"), ParallelConfig(dp=2), 2, subnets=sub, checks=[check_plane_binding]).check("network", "binding")
    assert c.verdict == "warn" and "no HCCL/NCCL/GLOO_SOCKET_IFNAME set" in c.detail
