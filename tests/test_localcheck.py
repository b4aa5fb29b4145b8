"""localcheck on real runs: two layouts predicted and measured, the columns lined up part by part.

Accuracy is not asserted (the machine is shared and noisy; `benchmarks/localcheck.py` reports the errors)."""
import math, multiprocessing as mp
import numpy as np
import pytest
from supernode_nb.runtime.calibrate import LAYOUTS, calibrate_machine, check_figure, local_check, predict, resolve_layouts


@pytest.fixture(scope="module")
def checked():
    cal = calibrate_machine(links={2: [2]}, sizes=(4 << 10, 4 << 20), ops=("all_reduce", "send_recv"), samples=3, calls=10)
    df = local_check(["tp2", "pp2 1f1b"], steps=4, skip=1, calib=cal)
    return cal, df


def test_parts_line_up(checked):
    cal, df = checked
    assert list(df.layout.unique()) == ["tp2", "pp2 1f1b"]
    assert list(df[df.layout == "tp2"].part) == ["step", "compute", "comm.tp", "other"]
    assert list(df[df.layout == "pp2 1f1b"].part) == ["step", "compute", "bubble", "other"]   # pp waits are bubble
    for name, g in df.groupby("layout"):
        model, cfg = resolve_layouts([name])[name]
        p = predict(model, cfg, cal)
        flat = {"step": p["step_s"], "compute": p["compute_s"], "bubble": p["bubble_s"], "other": p["other_s"],
                **{f"comm.{a}": v for a, v in p["comm_s"].items()}}
        for r in g.itertuples():                        # the predicted column is `predict`, row by row
            assert r.predicted_s == pytest.approx(flat[r.part], rel=1e-12)
            assert r.measured_s > 0 and math.isfinite(r.measured_s)
            assert r.error_pct == pytest.approx(100 * (r.predicted_s / r.measured_s - 1), rel=1e-9)
            assert r.steps == 3 and r.world == 2
        parts = g[g.part != "step"].predicted_s.sum()
        assert g[g.part == "step"].predicted_s.iloc[0] == pytest.approx(parts, rel=1e-12)   # the parts make the step
    assert np.isfinite(df[["predicted_s", "measured_s", "error_pct", "costmodel_s", "costmodel_error_pct"]].to_numpy()).all()
    assert mp.active_children() == []                   # every rank was reaped


def test_figure_pairs_each_part(checked):
    _, df = checked
    fig = check_figure(df)
    pred, meas = fig.data[0], fig.data[1]
    assert list(pred.x[0]) == list(meas.x[0]) == list(df.layout) and list(pred.x[1]) == list(df.part)
    assert np.allclose(pred.y, df.predicted_s * 1e3) and np.allclose(meas.y, df.measured_s * 1e3)


def test_layouts_cover_the_brief():
    deg = {n: (c.dp, c.tp, c.pp, c.ep, c.schedule, c.world_size) for n, (_, c) in LAYOUTS.items()}
    assert deg["pp2 gpipe"][4] == "gpipe" and deg["pp2 1f1b"][4] == "1f1b"
    assert deg["dp2·tp2·pp2"][5] == 8 and LAYOUTS["ep2·dp2 moe"][0] == "tiny-moe"
    with pytest.raises(ValueError, match="steps=2 must exceed skip=2"):
        local_check(["1 rank"], steps=2, skip=2, calib=object())
