"""Scaling measured locally beside the prediction (weak scaling over dp)."""
import math
from supernode_nb.runtime.accuracy import local_scaling, local_scaling_figure


def test_local_scaling_measured_beside_predicted():
    df = local_scaling(dps=(1, 4), steps=4, skip=1)        # a group of 4: links measured at 4 ranks
    assert list(df.ranks) == [1, 4]
    for k in ("predicted", "measured"):
        assert df[f"{k}_efficiency"].iloc[0] == 1.0
        assert all(v > 0 and math.isfinite(v) for v in df[f"{k}_tokens_per_s"])
    fig = local_scaling_figure(df)
    assert [t.name for t in fig.data] == ["predicted", "measured"] and list(fig.data[1].x) == [1, 4]
