"""Shared pytest set-up: Jupyter/IPython state in temp dirs so parallel runs never collide."""
import os, tempfile
import pytest

_TMP = tempfile.mkdtemp(prefix="snb-jupyter-")
for var, sub in (("JUPYTER_CONFIG_DIR", "config"), ("JUPYTER_DATA_DIR", "data"),
                 ("JUPYTER_RUNTIME_DIR", "runtime"), ("IPYTHONDIR", "ipython")):
    os.environ.setdefault(var, os.path.join(_TMP, sub))
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TORCH_DEVICE_BACKEND_AUTOLOAD", "0")
# never write to the user's ~/.supernode_nb from tests; tests that need the archive pass a path
os.environ.setdefault("SUPERNODE_NB_ARCHIVE", "off")


@pytest.fixture(scope="session")
def quick_profile():
    """One quick calibration of this machine (2 and 4 ranks), shared by the tests that need its profile: each calibration
    launches ranks for 20-60 s, so the session makes one (one per xdist worker that asks)."""
    from supernode_nb.runtime.calibrate import calibrate
    return calibrate(quick=True, worlds=(2, 4), name="test")
