"""`supernode_nb/__init__.py` comes from nbs/80_api.ipynb like every module: exporting it (twice) gives the committed
file byte for byte, `__version__` included; and `import supernode_nb` imports nothing heavy."""
import shutil, subprocess, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

def test_init_is_exported_from_its_notebook_and_stable(tmp_path):
    (tmp_path / "nbs").mkdir()
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    shutil.copy(ROOT / "nbs" / "80_api.ipynb", tmp_path / "nbs")
    shutil.copy(ROOT / "nbs" / "index.ipynb", tmp_path / "nbs")      # the package docstring reads it
    exe = Path(sys.executable).with_name("nbdev-export")
    init = tmp_path / "supernode_nb" / "__init__.py"
    texts = []
    for _ in range(2):
        r = subprocess.run([str(exe)], cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr[-2000:]
        texts.append(init.read_text())
    assert texts[0] == texts[1] == (ROOT / "supernode_nb" / "__init__.py").read_text()
    assert '__version__ = "0.0.1"' in texts[0] and "def __getattr__" in texts[0]

def test_import_is_cheap_and_names_resolve():
    code = ("import sys, supernode_nb as s; heavy = {'torch', 'plotly', 'ipywidgets', 'numpy'} & set(sys.modules); "
            "assert not heavy, heavy; from supernode_nb import estimate, plan, place, Dashboard, run; "
            "from supernode_nb.ui.widgets import Dashboard as D; assert Dashboard is D; print(s.__version__)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "0.0.1"
