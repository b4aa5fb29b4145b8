"""Memory per rank measured beside the cost model.

For every case of `runtime.memcheck.CASES` (recompute none / selective / full, SP on and off, GPipe and 1F1B
micro-batches in flight, ZeRO 0 and 1, dense and MoE, two model sizes) runs one training step on local ranks and
counts what the fullest rank holds — parameters, gradients, optimizer state, peak activations saved for backward
(`torch.autograd.graph.saved_tensors_hooks`) — beside `costmodel.estimate`'s bytes per category. Prints one JSON
document: per case and category measured / model MiB and the error (model / measured - 1, %), and per category
the median and max |error|.

    python benchmarks/memcheck.py
"""
import json, os, statistics
from supernode_nb.runtime.memcheck import CASES, compare_memory


def main():
    df = compare_memory(CASES)
    out = {"cases": {}, "per_category": {}, "load_avg": round(os.getloadavg()[0], 2)}
    for r in df.itertuples():
        out["cases"].setdefault(r.case, {"model": r.model, "rank": int(r.rank)})[r.category] = {
            "measured_MiB": round(r.measured_MiB, 4), "model_MiB": round(r.model_MiB, 4), "error_pct": round(r.error_pct, 1)}
    for k, g in df.groupby("category", sort=False):
        e = g.error_pct.abs()
        out["per_category"][k] = {"median_abs_error_pct": round(statistics.median(e), 1), "max_abs_error_pct": round(e.max(), 1),
                                  "within_5pct": int((e <= 5).sum()), "cases": len(g)}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
