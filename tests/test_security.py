"""Security basics, tested: loopback-only sockets by default, connection files with their key readable by the
owner only, parameterised SQL in the archive, and checkpoint manifests that cannot point outside their folder.
(Binding elsewhere when told to — `Cluster(host=...)` — is exercised across network namespaces in test_multihost.py.)"""
import inspect, ipaddress, json, os, stat
from pathlib import Path

import psutil
import pytest

from supernode_nb.foundation.core import LOOPBACK

EVIL = "'); DROP TABLE runs;--"
NASTY = ['x"y', "it's", EVIL, "Robert'); DELETE FROM runs WHERE ('1'='1", "%_\\", "名前 'quoted' \"both\""]


# ---------------------------------------------------------------- the cluster binds loopback unless told otherwise

def _sockets(pid: int):
    try: return psutil.Process(pid).net_connections(kind="inet")
    except psutil.Error: return []


def _v4(ip: str) -> str:
    "An IPv4-mapped IPv6 address ('::ffff:127.0.0.1', how dual-stack sockets show) as plain IPv4."
    a = ipaddress.ip_address(ip)
    return str(a.ipv4_mapped) if getattr(a, "ipv4_mapped", None) else str(a)


@pytest.mark.timeout(180)
@pytest.mark.slow   # an ipyparallel cluster
def test_cluster_listens_on_loopback_only_and_connection_files_are_owner_only():
    from supernode_nb.runtime.cluster import Cluster
    try: from supernode_nb.runtime.worker import sleep_worker          # after the cluster/worker split
    except ImportError: from supernode_nb.runtime.cluster import sleep_worker
    assert inspect.signature(Cluster).parameters["host"].default == LOOPBACK == "127.0.0.1"
    with Cluster(2, timeout=10) as c:
        assert c.run(sleep_worker, seconds=0) == [0, 1]          # the process group is up: gloo's sockets exist too
        procs = c.processes()
        assert {p["role"] for p in procs} >= {"controller", "engine", "nanny"}
        listening, peers = {}, set()
        for p in procs:
            for s in _sockets(p["pid"]):
                if s.status == psutil.CONN_LISTEN: listening.setdefault(p["role"], set()).add(_v4(s.laddr.ip))
                elif s.raddr: peers |= {_v4(s.laddr.ip), _v4(s.raddr.ip)}
        store = [s for s in _sockets(os.getpid()) if s.status == psutil.CONN_LISTEN and s.laddr.port == c._port]
        listening["store"] = {_v4(s.laddr.ip) for s in store}
        assert set(listening) >= {"controller", "engine", "nanny", "store"}, listening
        assert all(ips == {LOOPBACK} for ips in listening.values()), listening     # nothing on 0.0.0.0 or an external address
        assert peers <= {LOOPBACK}, peers
        # the connection files: present, carrying their HMAC key, mode 0600, in a 0700 folder
        sec = Path(c._ipp.profile_dir) / "security"
        files = sorted(sec.glob(f"ipcontroller-{c._ipp.cluster_id}-*.json"))
        assert {f.name.rsplit("-", 1)[1] for f in files} == {"client.json", "engine.json"}, files
        for f in files:
            d = json.loads(f.read_text())
            assert len(d["key"]) >= 32 and d["signature_scheme"].startswith("hmac-"), f
            assert stat.S_IMODE(f.stat().st_mode) == 0o600, (f, oct(f.stat().st_mode))
            assert f.stat().st_uid == os.getuid()
            assert d["interface"] == f"tcp://{LOOPBACK}", d["interface"]       # what engines and clients connect to
        assert stat.S_IMODE(sec.stat().st_mode) == 0o700, oct(sec.stat().st_mode)


# ---------------------------------------------------------------- the archive: parameterised SQL

def test_archive_stores_and_reads_back_names_with_quotes_and_sql(tmp_path):
    from supernode_nb.foundation.store import Archive
    from supernode_nb.foundation.config import get_model, ParallelConfig
    a = Archive(tmp_path / "runs.db")
    ids = {}
    for s in NASTY:
        m = {**get_model("tiny-gpt").to_dict(), "name": s}
        ids[s] = a.record_run(m, ParallelConfig(dp=2), label=s, error=s, outcome="failed", extra={s: s})
    assert len(a.list_runs()) == len(NASTY)                      # the table is still there, nothing deleted
    for s, i in ids.items():
        r = a.get(i)
        assert (r.label, r.error, r.model["name"], r.extra) == (s, s, s, {s: s})
        assert [x.id for x in a.list_runs(model=s)] == [i]      # an equality filter matches that one record only
        assert i in [x.id for x in a.list_runs(label=s)]
    assert a.list_runs(model="' OR '1'='1") == [] and a.list_runs(outcome="x' OR 1=1 --") == []
    with pytest.raises(Exception):
        a.list_runs(limit="1; DROP TABLE runs")                  # limit is an int, never pasted in as text
    assert len(a.list_runs()) == len(NASTY)
    import supernode_nb.ops.archive                               # adds Archive.compare
    assert EVIL in json.dumps(a.compare(ids[EVIL], ids[NASTY[0]]), ensure_ascii=False, default=str)


def test_archive_profiles_with_sql_in_their_names(tmp_path):
    from supernode_nb.foundation.store import Archive
    a = Archive(tmp_path / "runs.db")
    a.record_run({**__import__("supernode_nb.foundation.config", fromlist=["x"]).get_model("tiny-gpt").to_dict()}, {"dp": 1})
    ids = [a.save_profile({"name": s, "kind": "measured", "host": s, "topology": s, "rates": {s: 1.0}}) for s in NASTY]
    for s, i in zip(NASTY, ids):
        got = a.profiles(name=s)
        assert [g["id"] for g in got] == [i] and got[0]["data"]["rates"] == {s: 1.0}
        assert a.profiles(host=s) == got == a.profiles(topology=s)
    assert a.profiles(name="' OR '1'='1") == [] and len(a.profiles()) == len(NASTY)
    assert len(a.list_runs()) == 1                               # the runs table survived every name


# ---------------------------------------------------------------- checkpoints: no path traversal

def _crafted(tmp_path, names: list[str]) -> Path:
    "A step folder whose manifest lists `names`, with a real 'secret' beside (outside) the checkpoint folder."
    from supernode_nb.parallel.checkpoint import MANIFEST, FORMAT, _sha256
    run = tmp_path / "run"; d = run / "step_000001"; d.mkdir(parents=True)
    secret = tmp_path / "secret.txt"; secret.write_text("not yours\n")
    (d / "__0_0.distcp").write_bytes(b"x")
    files = {n: {"bytes": secret.stat().st_size, "sha256": _sha256(secret)} for n in names}
    (d / MANIFEST).write_text(json.dumps({"format": FORMAT, "step": 1, "world_size": 1, "files": files, "tensors": {}}))
    return d


@pytest.mark.parametrize("name", ["../../secret.txt", "../step_000001/../../secret.txt", "ABS", "sub/../../../secret.txt"])
def test_checkpoint_manifest_cannot_point_outside_its_folder(tmp_path, name):
    from supernode_nb.parallel.checkpoint import verify, read_manifest, CheckpointError
    name = str(tmp_path / "secret.txt") if name == "ABS" else name
    d = _crafted(tmp_path, [name])
    for fn in (verify, read_manifest):
        with pytest.raises(CheckpointError, match=r"outside the checkpoint folder") as ei:
            fn(d)
        assert repr(name) in str(ei.value) or name in str(ei.value)
    with pytest.raises(CheckpointError, match="outside the checkpoint folder"):
        verify(d.parent)                                          # through the run folder (its latest step) too


def test_checkpoint_symlink_out_of_the_folder_is_refused(tmp_path):
    from supernode_nb.parallel.checkpoint import verify, CheckpointError
    d = _crafted(tmp_path, ["__1_0.distcp"])
    (d / "__1_0.distcp").symlink_to(tmp_path / "secret.txt")
    with pytest.raises(CheckpointError, match="outside the checkpoint folder"):
        verify(d)


def test_checkpoint_with_plain_names_still_verifies(tmp_path):
    from supernode_nb.parallel.checkpoint import verify, MANIFEST, _sha256
    d = _crafted(tmp_path, [])
    m = json.loads((d / MANIFEST).read_text())
    m["files"] = {"__0_0.distcp": {"bytes": 1, "sha256": _sha256(d / "__0_0.distcp")}}
    (d / MANIFEST).write_text(json.dumps(m))
    assert verify(d)["files"] == 1
