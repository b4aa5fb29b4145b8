"""Every comm wrapper against torch.distributed's own result, for several sizes and group sizes (gloo)."""
import json, subprocess, sys
import pytest
import torch
import torch.distributed as dist
from supernode_nb.runtime.launch import spawn, LaunchError
from supernode_nb.foundation.layout import RankLayout
from supernode_nb.comm.collectives import Comm, CommRecorder


def _matrix(rank, world, tp, numels):
    """Worker: on a tp × dp layout, compare each wrapper with plain torch.distributed on the same group."""
    L = RankLayout(tp=tp, dp=world // tp)
    rec = CommRecorder(rank)
    c = Comm.from_layout(L, rank, rec)
    fails, nrec = [], 0
    for axis in ("tp", "dp"):
        ranks, pg = c.peers(axis), c.pg(axis)
        n = len(ranks)
        if n == 1: continue
        for numel in numels:
            numel = numel // n * n
            x = torch.randn(numel, generator=torch.Generator().manual_seed(rank * 7919 + numel))
            # all_reduce
            ref = x.clone(); dist.all_reduce(ref, group=pg)
            if not torch.equal(c.all_reduce(x.clone(), axis), ref): fails.append(("all_reduce", axis, numel))
            # all_gather
            lst = [torch.empty_like(x) for _ in range(n)]; dist.all_gather(lst, x, group=pg)
            if not torch.equal(c.all_gather(x, axis), torch.cat(lst)): fails.append(("all_gather", axis, numel))
            # reduce_scatter
            ref = x.clone(); dist.all_reduce(ref, group=pg)
            if not torch.allclose(c.reduce_scatter(x, axis), ref.chunk(n)[c.index(axis)], rtol=1e-6, atol=1e-6):
                fails.append(("reduce_scatter", axis, numel))
            # broadcast from the last index
            ref = x.clone(); dist.broadcast(ref, src=ranks[-1], group=pg)
            got = x.clone(); c.broadcast(got, axis, src=n - 1)
            if not torch.equal(got, ref): fails.append(("broadcast", axis, numel))
            # uneven all_to_all, both algorithms, vs dist.all_to_all on lists
            i = c.index(axis)
            ins = [(i * 3 + j * 5 + numel) % 7 for j in range(n)]
            y = torch.randn(sum(ins), 3, generator=torch.Generator().manual_seed(rank + numel))
            def block_from(j):   # what group index j sends to me, rebuilt from its seed
                ins_j = [(j * 3 + k * 5 + numel) % 7 for k in range(n)]
                y_j = torch.randn(sum(ins_j), 3, generator=torch.Generator().manual_seed(ranks[j] + numel))
                return y_j.split(ins_j)[i]
            ref = torch.cat([block_from(j) for j in range(n)])
            for alg in ("native", "pairwise"):
                if not torch.equal(c.all_to_all(y, axis, in_splits=ins, algorithm=alg), ref):
                    fails.append(("all_to_all_" + alg, axis, numel))
            # async all_reduce
            ref = x.clone(); dist.all_reduce(ref, group=pg)
            if not torch.equal(c.all_reduce(x.clone(), axis, async_op=True).wait(), ref):
                fails.append(("all_reduce_async", axis, numel))
            # ring send/recv via batch_p2p
            nxt, prv = (i + 1) % n, (i - 1) % n
            buf = torch.empty_like(x)
            c.batch_p2p([("send", x, nxt), ("recv", buf, prv)], axis)
            src_rank = ranks[prv]
            want = torch.randn(numel, generator=torch.Generator().manual_seed(src_rank * 7919 + numel))
            if not torch.equal(buf, want): fails.append(("p2p", axis, numel))
    recs = [(r.axis, r.op, r.nbytes, r.group_size) for r in rec.records]
    return fails, recs


@pytest.mark.parametrize("world,tp", [(2, 2), (4, 2), (4, 4), (8, 2)])
def test_wrappers_equal_torch_distributed(world, tp):
    res = spawn(_matrix, world, tp, (6, 1000, 65536), timeout_s=300)
    for fails, _ in res:
        assert fails == []
    recs = res[0][1]
    # the first record on rank 0 is the tp all_reduce of the first size: numel rounded to the group size, fp32
    n = tp
    first = recs[0]
    assert first == ("tp", "all_reduce", (6 // n * n) * 4, n)
    assert {r[0] for r in recs} == ({"tp", "dp"} if world > tp else {"tp"})
    ag = [r for r in recs if r[1] == "all_gather" and r[0] == "tp"][0]
    assert ag[2] == n * (6 // n * n) * 4        # all_gather records the full gathered array


def _bad_splits(rank, world):
    c = Comm.from_layout(RankLayout(dp=world), rank)
    c.all_to_all(torch.zeros(5, 2), "dp", in_splits=[1, 1])


def test_all_to_all_bad_splits_is_a_clear_error():
    with pytest.raises(LaunchError, match=r"in_splits \[1, 1\] must have 2 entries summing to 5 rows"):
        spawn(_bad_splits, 2, timeout_s=60)


def test_comm_bench_cli_json():
    out = subprocess.run([sys.executable, "-m", "supernode_nb.cli", "comm-bench", "--world-size", "2", "--sizes", "1K,64K",
                          "--iters", "2", "--json"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)
    assert {tuple(sorted(r)) for r in rows} == {("algbw_gbps", "busbw_gbps", "bytes", "group_size", "op", "time_s")}
    assert {r["op"] for r in rows} == {"all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "send_recv"}


def test_comm_bench_cli_bad_args_one_line():
    out = subprocess.run([sys.executable, "-m", "supernode_nb.cli", "comm-bench", "--world-size", "x"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr
