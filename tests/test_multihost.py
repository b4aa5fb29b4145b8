"""The cluster across several "hosts": Linux network namespaces on this machine, joined by veth links.

    head  198.18.0.1  bridge br0 — the notebook's client, the ipyparallel controller, the torch.distributed store
    h1    198.18.0.2  eth0 ─ veth ─ br0      engines (ranks), GLOO_SOCKET_IFNAME=eth0
    h2    198.18.0.3  eth0 ─ veth ─ br0      engines (ranks), GLOO_SOCKET_IFNAME=eth0

Only addresses from the benchmarking range 198.18.0.0/15 are used, and only inside the namespaces created here;
the root namespace gets no interface at all. Engines reach the controller and the store only across the veth links
(their loopback is their own), and gloo's rank-to-rank traffic between h1 and h2 crosses both links and the bridge.

The client must sit beside the controller, as a notebook on a head node would, so this file is also the driver run
inside `head` (`ip netns exec <head> python tests/test_multihost.py --drive ...`). The driver uses the package's own
`Cluster`, unchanged, with `host=` the head's address and an engine launcher that starts each engine inside h1 or h2:
a training run (tiny-gpt, dp2·tp2, losses equal to the single-process run), the link pre-check (ok, then a blocked
rank named), a killed engine — each asserted as `tests/test_cluster.py` asserts it on one host — then a cluster
started by ipyparallel's own SSH launcher from the profile `supernode-nb cluster-config --launcher ssh` writes
(`ssh`/`scp` stand-ins enter the host's namespace), which runs a job and names a hung rank.
A second test runs `examples/train_torchrun.py` with the commands a placement exports, one node per namespace.
The fixture removes namespaces and processes in a `finally`, then proves nothing is left. Needs root (skipped otherwise).
"""
import json, os, shutil, signal, subprocess, sys, time
from pathlib import Path

HEAD_IP, H1_IP, H2_IP = "198.18.0.1", "198.18.0.2", "198.18.0.3"
ROOT = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------- driver (runs inside the head namespace)

def _engine_launchers(namespaces: list[str], ifname: str = "eth0"):
    "An ipyparallel engine-set launcher that starts engine i inside namespaces[i % len], with GLOO_SOCKET_IFNAME set."
    from ipyparallel.cluster.launcher import LocalEngineLauncher, LocalEngineSetLauncher

    class NetnsEngineLauncher(LocalEngineLauncher):
        def find_args(self):
            ns = namespaces[int(self.identifier) % len(namespaces)]
            return ["ip", "netns", "exec", ns, "env", f"GLOO_SOCKET_IFNAME={ifname}", f"SNB_HOST={ns}", *super().find_args()]

    class NetnsEngineSetLauncher(LocalEngineSetLauncher):
        launcher_class = NetnsEngineLauncher
    return NetnsEngineSetLauncher


def _tcp(pid: int) -> list[tuple[str, str, str]]:
    "TCP sockets of `pid`'s network namespace: (local ip, remote ip, state hex) — read from /proc, no tool needed."
    out = []
    for line in Path(f"/proc/{pid}/net/tcp").read_text().splitlines()[1:]:
        f = line.split()
        ip = lambda h: ".".join(str(int(h[i:i + 2], 16)) for i in (6, 4, 2, 0))
        out.append((ip(f[1].split(":")[0]), ip(f[2].split(":")[0]), f[3]))
    return out


def _dev_bytes(pid: int, ifname: str = "eth0") -> int:
    "rx + tx bytes of `ifname` in `pid`'s network namespace."
    for line in Path(f"/proc/{pid}/net/dev").read_text().splitlines()[2:]:
        name, rest = line.split(":", 1)
        if name.strip() == ifname:
            f = rest.split(); return int(f[0]) + int(f[8])
    raise LookupError(ifname)


def _ns_of(pid: int) -> str | None:
    "Name of the network namespace `pid` lives in (from /run/netns), or None for the root namespace."
    ino = os.stat(f"/proc/{pid}/ns/net").st_ino
    return next((n for n in sorted(os.listdir("/run/netns")) if os.stat(f"/run/netns/{n}").st_ino == ino), None)


def _fake_ssh(d: Path, hosts: dict[str, str]) -> tuple[str, str]:
    "Stand-ins for ssh and scp: `ssh [opts] host cmd` runs cmd (bash) in host's namespace; scp copies (one filesystem)."
    cases = " ".join(f"{ip}) ns={ns};;" for ip, ns in hosts.items())
    ssh, scp = d / "ssh", d / "scp"
    ssh.write_text("#!/bin/bash\nwhile [[ $1 == -* ]]; do case $1 in -[opilF]) shift 2;; *) shift;; esac; done\n"
                   f'h=${{1##*@}}; shift\ncase $h in {cases} *) echo "ssh: no host $h" >&2; exit 255;; esac\n'
                   'exec ip netns exec "$ns" bash -c "$*"\n')
    scp.write_text(
        "#!/bin/bash\na=(); for x in \"$@\"; do [[ $x == -* ]] || a+=(\"${x#*:}\"); done\n"
        '[[ $(realpath -m "${a[0]}") == $(realpath -m "${a[1]}") ]] && exit 0\n'
        'mkdir -p "$(dirname "${a[1]}")" && exec cp "${a[0]}" "${a[1]}"\n'
    )
    for f in (ssh, scp): f.chmod(0o700)
    return str(ssh), str(scp)


def drive(out_path: str, hosts: list[str]) -> None:
    "Scenarios on a cluster whose engines live in `hosts`; one JSON line per scenario to `out_path`."
    import psutil
    from supernode_nb.runtime.cluster import Cluster
    try: from supernode_nb.runtime.worker import publish, steps_worker        # after the cluster/worker split
    except ImportError: from supernode_nb.runtime.cluster import publish, steps_worker
    try: from supernode_nb.runtime.faults import RunFailed
    except ImportError: from supernode_nb.runtime.cluster import RunFailed
    from supernode_nb.runtime.runner import make_spec, train_worker, assemble
    from supernode_nb.foundation.layout import RankLayout
    from supernode_nb.runtime.precheck import precheck
    out = open(out_path, "a")
    def put(name, **d):
        out.write(json.dumps({"scenario": name, **d}, default=str) + "\n"); out.flush()

    launcher = _engine_launchers(hosts)
    fake_ssh, fake_scp = _fake_ssh(Path(out_path).parent, dict(zip((H1_IP, H2_IP), hosts)))
    t = time.monotonic()
    c = Cluster(4, host=HEAD_IP, timeout=5, engine_launcher_class=launcher).start()
    try:
        where = {r: psutil.Process(pid).environ().get("SNB_HOST") for r, pid in c.pids().items()}
        put("start", seconds=time.monotonic() - t, where=where, pids=c.pids(),
            roles=sorted({p["role"] for p in c.processes()}), ctrl_tcp=_tcp(os.getpid()))
        # a training run: tiny-gpt on dp2·tp2, every step streamed live
        spec = make_spec("tiny-gpt", steps=3, tp=2, dp=2, global_batch_size=4)
        before = {r: _dev_bytes(pid) for r, pid in c.pids().items()}
        t = time.monotonic()
        h = c.run_async(train_worker, spec, publish=publish)
        live = [(r["rank"], r["step"]) for r in h.stream(interval=0.05)]
        res = assemble(spec, h.wait())
        put("train", seconds=time.monotonic() - t, live=live, losses=res["losses"],
            bytes={r: _dev_bytes(pid) - before[r] for r, pid in c.pids().items()},
            tcp={r: _tcp(pid) for r, pid in c.pids().items()})
        # the link pre-check: ok, then rank 3 kept busy is named, then ok again
        L = RankLayout(tp=2, dp=2)
        rep = precheck(c, L, timeout=3)
        t = time.monotonic()
        bad = precheck(c, L, timeout=3, block=[3])
        took = time.monotonic() - t
        again = precheck(c, L, timeout=3)
        put("precheck", ok=rep.ok, text=rep.text(), links=[(l.axis, l.a, l.b, l.ok) for l in rep.links],
            collectives={a: v["ok"] for a, v in rep.collectives.items()}, blocked_ok=bad.ok, missing=bad.missing,
            down=[(l.axis, l.a, l.b, l.error) for l in bad.down()], blocked_s=took, again_ok=again.ok)
        # a killed engine: named dead (SIGKILL) with its last record, within seconds; the cluster stopped
        all_pids = [p["pid"] for p in c.processes()]
        h = c.run_async(steps_worker, steps=400, step_s=0.02)
        t = time.monotonic()
        while not any(r["rank"] == 2 and r["step"] >= 3 for r in h.records):
            h.poll(); time.sleep(0.02)
            if time.monotonic() - t > 60: raise TimeoutError("rank 2 never reached step 3")
        t_kill = time.monotonic()
        os.kill(c.pids()[2], signal.SIGKILL)
        try: h.wait(); put("kill", error="no RunFailed")
        except RunFailed as e:
            seen = getattr(h, "failure_seen_at", None)
            put("kill", dead=e.dead, last=e.last.get(2), message=str(e), raised_s=time.monotonic() - t_kill,
                detect_s=None if seen is None else seen - t_kill, processes=c.processes() if c.client is not None else [],
                left=[p for p in all_pids if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE])
    finally:
        c.stop()
    # ipyparallel's own SSH launcher, from the profile `supernode-nb cluster-config --launcher ssh` writes: `ssh` and
    # `scp` are stand-ins that run the command inside the host's namespace (same files, no sshd here)
    from traitlets.config import Config
    from supernode_nb.runtime.clusterconfig import write_profile
    prof = write_profile(Path(out_path).parent / "profile_ssh", "ssh", {H1_IP: 1, H2_IP: 1}, controller_ip=HEAD_IP, ifname="eth0")
    fake = Config({"SSHLauncher": {"ssh_cmd": [fake_ssh], "scp_cmd": [fake_scp]}})
    t = time.monotonic()
    with Cluster(2, host=HEAD_IP, timeout=3, profile_dir=prof["profile_dir"], config=fake) as c:
        where = {r: _ns_of(pid) for r, pid in c.pids().items()}
        ok = c.run(steps_worker, steps=3, step_s=0.0)
        put("ssh", seconds=time.monotonic() - t, where=where, values=[o["value"] for o in ok],
            launcher=type(c._ipp.engine_set).__name__, env=psutil.Process(c.pids()[0]).environ().get("GLOO_SOCKET_IFNAME"))
        # a hung rank: its peers time out in all_reduce; it is named hung, the others failed
        h = c.run_async(steps_worker, steps=6, step_s=0.02, hang_rank=1, at_step=2)
        t = time.monotonic()
        try: h.wait(); put("hang", error="no RunFailed")
        except RunFailed as e:
            rep = getattr(e, "report", None)
            put("hang", where=where, hung=e.hung, failed=e.failed, dead=e.dead, message=str(e), last=e.last.get(1),
                seconds=time.monotonic() - t, stop_s=getattr(rep, "stop_s", None),
                detect_s=rep.detected - rep.started if rep is not None else getattr(e, "detect_s", None))
    put("done")


if __name__ == "__main__" and sys.argv[1:2] == ["--drive"]:
    drive(sys.argv[2], sys.argv[3].split(","))
    sys.exit(0)


# ---------------------------------------------------------------- the test (root namespace)
import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]          # a 2-core machine under load 20 needs ~4 min; unloaded ~1.5


def _ip(*args, check=True):
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check, timeout=20)


def _why_no_netns() -> str | None:
    "None when network namespaces can be created here, else the reason (for the skip)."
    if sys.platform != "linux": return "network namespaces are Linux only"
    if shutil.which("ip") is None: return "iproute2's `ip` is not installed"
    if os.geteuid() != 0: return "creating network namespaces needs root (run as root, or in a container with CAP_SYS_ADMIN)"
    name = f"snbprobe{os.getpid()}"
    r = _ip("netns", "add", name, check=False)
    if r.returncode != 0: return f"`ip netns add` failed: {r.stderr.strip()}"
    try:
        r = subprocess.run(["ip", "netns", "exec", name, "ip", "link", "set", "lo", "up"], capture_output=True, text=True, timeout=20)
        if r.returncode != 0: return f"`ip netns exec` failed: {r.stderr.strip()}"
        if shutil.which("unshare") is None: return "util-linux's `unshare` is not installed"
    finally: _ip("netns", "del", name, check=False)
    return None


def _ns_pids(name: str) -> list[int]:
    r = _ip("netns", "pids", name, check=False)
    return [int(x) for x in r.stdout.split()] if r.returncode == 0 else []


def _ours(tok: str) -> list[str]:
    return [l.split()[0] for l in _ip("netns", "list").stdout.splitlines() if l.startswith(f"snb{tok}")]


@pytest.fixture(scope="module")
def hosts():
    "Three namespaces (head, h1, h2) joined by veth links to a bridge in head; removed afterwards, whatever happened."
    why = _why_no_netns()
    if why: pytest.skip(f"multi-host test needs network namespaces: {why}")
    tok = str(os.getpid() % 100000)
    head, h1, h2 = (f"snb{tok}{x}" for x in ("head", "h1", "h2"))
    created, procs = [], []
    links_before = _ip("-br", "link").stdout.split("\n")
    try:
        for ns in (head, h1, h2):
            _ip("netns", "add", ns); created.append(ns)
            _ip("-n", ns, "link", "set", "lo", "up")
        _ip("-n", head, "link", "add", "br0", "type", "bridge")
        _ip("-n", head, "addr", "add", f"{HEAD_IP}/24", "dev", "br0")
        _ip("-n", head, "link", "set", "br0", "up")
        for ns, addr in ((h1, H1_IP), (h2, H2_IP)):
            port = f"v{ns[-2:]}"                           # head's end of the link: vh1, vh2
            _ip("-n", head, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns)
            _ip("-n", head, "link", "set", port, "master", "br0")
            _ip("-n", head, "link", "set", port, "up")
            _ip("-n", ns, "addr", "add", f"{addr}/24", "dev", "eth0")
            _ip("-n", ns, "link", "set", "eth0", "up")
        yield {"head": head, "hosts": [h1, h2], "procs": procs, "tok": tok}
    finally:
        for p in procs:                                   # the driver's own tree first (it stops its clusters itself)
            if p.poll() is None:
                try: os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError: pass
                p.wait(10)
        for ns in created:                                # then anything still inside our namespaces
            for pid in _ns_pids(ns):
                try: os.kill(pid, signal.SIGKILL)
                except ProcessLookupError: pass
        t = time.monotonic()
        while any(_ns_pids(ns) for ns in created) and time.monotonic() - t < 10: time.sleep(0.1)
        for ns in created: _ip("netns", "del", ns, check=False)   # deletes its veth ends and the bridge with it
        assert _ours(tok) == [], f"namespaces left: {_ours(tok)}"
        links_after = {l.split()[0] for l in _ip("-br", "link").stdout.splitlines() if l.strip()}
        assert links_after == {l.split()[0] for l in links_before if l.strip()}, "links left in the root namespace"


@pytest.fixture(scope="module")
def results(hosts, tmp_path_factory):
    "Run the driver inside the head namespace; its scenarios as {name: record}. Prove nothing is left afterwards."
    d = tmp_path_factory.mktemp("multihost")
    out = d / "results.jsonl"
    env = dict(os.environ, IPYTHONDIR=str(d / "ipython"), OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    env.pop("GLOO_SOCKET_IFNAME", None)
    t = time.monotonic()
    p = subprocess.Popen(["ip", "netns", "exec", hosts["head"], sys.executable, __file__, "--drive", str(out),
                          ",".join(hosts["hosts"])], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, start_new_session=True)
    hosts["procs"].append(p)
    try: log, _ = p.communicate(timeout=480)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL); log, _ = p.communicate()
    wall = time.monotonic() - t
    recs = {r["scenario"]: r for r in map(json.loads, out.read_text().splitlines())} if out.exists() else {}
    left, deadline = {}, time.monotonic() + 15        # processes told to stop get a moment to exit (an ssh session's
    while True:                                        # engine sees its hangup asynchronously); then they are left running
        left = {ns: _ns_pids(ns) for ns in [hosts["head"], *hosts["hosts"]]}
        if not any(left.values()) or time.monotonic() > deadline: break
        time.sleep(0.5)
    what = {pid: Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:200]
            for pids in left.values() for pid in pids if Path(f"/proc/{pid}/cmdline").exists()}
    print("\nmeasured:", json.dumps({"driver_wall_s": round(wall, 1), "load": os.getloadavg(),
                                     **{k: round(v["seconds"], 2) for k, v in recs.items() if "seconds" in v}}))
    assert p.returncode == 0 and "done" in recs, f"driver failed (status {p.returncode}):\n{log[-4000:]}"
    assert left == {ns: [] for ns in left}, f"processes left in the namespaces 15 s after the driver ended: {left} {what}"
    return recs


def test_engines_live_on_two_hosts_and_reach_the_head_over_veth(results):
    s = results["start"]
    per_host = [v[-2:] for v in s["where"].values()]
    assert sorted(per_host) == ["h1", "h1", "h2", "h2"], s["where"]            # two ranks on each host
    assert set(s["roles"]) >= {"controller", "engine", "nanny"}
    # the controller (in head) listens on the head's address only, and its peers are the engines' addresses
    listen = {l for l, r, st in s["ctrl_tcp"] if st == "0A"}
    assert listen and listen <= {HEAD_IP, "127.0.0.1"} and HEAD_IP in listen, listen
    peers = {r for l, r, st in s["ctrl_tcp"] if st == "01" and l == HEAD_IP}
    assert {H1_IP, H2_IP} <= peers, peers


def test_training_across_hosts_matches_the_single_process_run(results):
    from supernode_nb.runtime.runner import make_spec, run
    t = results["train"]
    assert sorted(map(tuple, t["live"])) == [(r, s) for r in range(4) for s in range(3)]
    ref = run(make_spec("tiny-gpt", steps=3, global_batch_size=4))["losses"]      # one process, the same global batch
    assert all(abs(a - b) <= 1e-4 * abs(b) for a, b in zip(t["losses"], ref)), (t["losses"], ref)
    where = results["start"]["where"]
    for r, conns in t["tcp"].items():          # gloo pairs between the hosts: established h1 ↔ h2 connections
        mine = H1_IP if where[r].endswith("h1") else H2_IP
        other = H2_IP if mine == H1_IP else H1_IP
        est = {(l, rr) for l, rr, st in conns if st == "01"}
        assert (mine, other) in est, (r, est)
        assert (mine, HEAD_IP) in est, (r, est)           # the controller and the store, on the head
        assert all(l != "127.0.0.1" or rr == "127.0.0.1" for l, rr in est)
    assert all(b > 100_000 for b in t["bytes"].values()), t["bytes"]   # the run's traffic crossed each host's link


def test_precheck_across_hosts(results):
    p = results["precheck"]
    assert p["ok"], p["text"]
    assert [tuple(x[:3]) for x in p["links"]] == [("tp", 0, 1), ("tp", 2, 3), ("dp", 0, 2), ("dp", 1, 3)]
    assert p["collectives"] == {"tp": True, "dp": True}
    assert not p["blocked_ok"] and p["missing"] == [3] and p["blocked_s"] < 3 + 5
    assert [tuple(x[:3]) for x in p["down"]] == [("tp", 2, 3), ("dp", 1, 3)]
    assert all("rank 3 never joined" in x[3] for x in p["down"])
    assert p["again_ok"]


def test_killed_engine_named_within_seconds(results):
    k = results["kill"]
    assert list(k["dead"]) == ["2"] and "SIGKILL" in k["dead"]["2"], k
    assert k["last"]["step"] >= 3 and k["last"]["last_op"]["op"] == "all_reduce"
    assert "rank 2" in k["message"] and "SIGKILL" in k["message"], k["message"]
    assert (k["detect_s"] if k["detect_s"] is not None else k["raised_s"]) < 3.0
    assert k["left"] == [] and k["processes"] == []           # the other engines, nannies and controller: all gone


def test_hung_rank_named_at_the_group_timeout(results):
    h = results["hang"]
    assert {v[-2:] for v in h["where"].values()} == {"h1", "h2"}      # one rank per host
    assert h["hung"] == [1] and not h["dead"], h                      # rank 0 timed out waiting for it
    assert "rank 1" in h["message"] and "hung" in h["message"], h["message"]
    assert h["last"]["step"] == 1                                      # its last record: the step before the hang
    assert h["detect_s"] < 3 + 7, h                                    # the 3 s group timeout (+ a loaded machine)


def test_ssh_launcher_with_the_cluster_config_profile(results):
    "ipyparallel's SSH launcher from `cluster-config --launcher ssh`'s profile: one engine per host, each on eth0."
    s = results["ssh"]
    assert s["launcher"] == "SSHEngineSetLauncher" and s["env"] == "eth0", s
    assert sorted(v[-2:] for v in s["where"].values()) == ["h1", "h2"], s["where"]
    assert s["values"] == [5.0, 5.0]                                   # last step's all_reduce of rank + step over both hosts


def test_torchrun_lands_where_the_placement_says(hosts, tmp_path):
    """`examples/train_torchrun.py` on two "hosts" (h1, h2, each with the hostname the placement gave its node, in its
    own UTS namespace): each node runs the command `Placement.torchrun_commands(..., with_env=True)` wrote for it,
    every rank trains as the layout rank the placement chose (a random placement: launcher and layout ranks differ),
    checks it runs on the placed host, and the losses equal the single-process run."""
    from supernode_nb.foundation.layout import RankLayout
    from supernode_nb.foundation.topology import get_topology
    from supernode_nb.foundation.placement import place
    from supernode_nb.runtime.runner import make_spec, run
    T = get_topology("atlas-a2-pod", nodes=2).with_unhealthy([*range(2, 8), *range(10, 16)])   # 2 devices per node
    P = place(RankLayout(tp=2, dp=2), T, "random", seed=0)
    assert P.rank_map() != [0, 1, 2, 3] and len(P.node_plan()) == 2
    pj = tmp_path / "placement.json"; pj.write_text(json.dumps(P.to_dict(), default=str))
    args = ["--tp", "2", "--dp", "2", "--global-batch-size", "4", "--steps", "2", "--timeout", "60", "--json", "--placement", str(pj)]
    cmds = P.torchrun_commands("examples/train_torchrun.py", args, master_addr=H1_IP, master_port=29400, with_env=True)
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}", OMP_NUM_THREADS="1")
    procs = []
    for ns, node, cmd in zip(hosts["hosts"], P.node_plan(), cmds):
        sh = f"hostname {node['host']} && exec env GLOO_SOCKET_IFNAME=eth0 {cmd}"
        procs.append(subprocess.Popen(["ip", "netns", "exec", ns, "unshare", "--uts", "sh", "-c", sh], cwd=ROOT, env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True))
    hosts["procs"].extend(procs)
    t = time.monotonic()
    outs = []
    for p in procs:
        try: outs.append(p.communicate(timeout=max(1.0, 300 - (time.monotonic() - t))))
        except subprocess.TimeoutExpired:
            for q in procs: os.killpg(q.pid, signal.SIGKILL)
            raise
    print(f"\nmeasured: torchrun across hosts {time.monotonic() - t:.1f} s, load {os.getloadavg()}")
    assert [p.returncode for p in procs] == [0, 0], "\n".join(e[-3000:] for _, e in outs)
    res = json.loads(next(o for o, _ in outs if o.strip()))
    where = res["placement"]["where"]
    assert [w["rank"] for w in where] == [0, 1, 2, 3]
    for w in where:
        node = next(n for n in P.node_plan() if w["rank"] in n["ranks"])
        assert w["host"] == w["planned_host"] == node["host"], w                    # on the host the placement named
        assert w["launcher_rank"] == P.rank_map().index(w["rank"]) and w["node_rank"] == node["node_rank"], w
        assert w["device"] == P.devices[w["rank"]] and w["backend"] == "gloo"
    ref = run(make_spec("tiny-gpt", steps=2, global_batch_size=4))["losses"]
    assert all(abs(a - b) <= 1e-4 * abs(b) for a, b in zip(res["losses"], ref)), (res["losses"], ref)


def test_a_rank_on_the_wrong_host_is_refused():
    "The example's placement check, without namespaces: a rank started on a host the placement did not name stops."
    import importlib.util
    spec = importlib.util.spec_from_file_location("train_torchrun", ROOT / "examples" / "train_torchrun.py")
    m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
    plc = {"devices": [8, 0], "nodes": [{"node_rank": 0, "host": "node0000", "ranks": [1], "local_devices": [0], "env": {}},
                                        {"node_rank": 1, "host": "node0001", "ranks": [0], "local_devices": [0], "env": {}}]}
    env = {"RANK": "0", "LOCAL_RANK": "0", "GROUP_RANK": "0"}
    with pytest.raises(SystemExit, match=r"rank 1 runs on .* but the placement puts it on node0000 \(device 0\)"):
        m.placed(dict(env), plc)
    plc["nodes"][0]["host"] = "127.0.0.1"                                # a local placement: any host will do
    w = m.placed(dict(env), plc)
    assert (w["rank"], w["launcher_rank"], w["device"]) == (1, 0, 0)
    assert m.placed({**env, "SUPERNODE_NB_RANKS": "0"}, None)["rank"] == 0
