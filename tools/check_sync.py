"""Fail when `nbdev-export` would change the package or `nbdev-clean` would change a notebook.

Runs both, then compares file hashes before and after; names every file that changed.
"""
import hashlib, subprocess, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent

def snapshot(*dirs):
    out = {}
    for d in dirs:
        for p in sorted((ROOT / d).rglob("*")):
            if p.is_file() and "__pycache__" not in p.parts and ".ipynb_checkpoints" not in p.parts:
                out[str(p.relative_to(ROOT))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out

def changed(before, after):
    return sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))

def main():
    bad = []
    b = snapshot("supernode_nb")
    subprocess.run([str(BIN / "nbdev-export")], cwd=ROOT, check=True)
    if ch := changed(b, snapshot("supernode_nb")):
        bad.append("nbdev-export changed the package (notebooks and package out of sync): " + ", ".join(ch))
    b = snapshot("nbs", "examples")
    subprocess.run([str(BIN / "nbdev-clean")], cwd=ROOT, check=True)
    if ch := changed(b, snapshot("nbs", "examples")):
        bad.append("nbdev-clean changed notebooks (commit them clean): " + ", ".join(ch))
    before = (ROOT / "README.md").read_text() if (ROOT / "README.md").exists() else ""
    subprocess.run([sys.executable, str(ROOT / "tools" / "make_readme.py")], cwd=ROOT, check=True)
    if (ROOT / "README.md").read_text() != before:
        bad.append("README.md was not generated from nbs/index.ipynb (run tools/make_readme.py and commit)")
    svg = ROOT / "images" / "layers.svg"
    before = svg.read_text() if svg.exists() else ""
    subprocess.run([sys.executable, str(ROOT / "tools" / "layers_svg.py")], cwd=ROOT, check=True, capture_output=True)
    if svg.read_text() != before:
        bad.append("images/layers.svg does not show the package's layers (run tools/layers_svg.py and commit)")
    for line in bad: print("check-sync: " + line, file=sys.stderr)
    if not bad: print("check-sync: package in sync with notebooks; notebooks clean")
    return 1 if bad else 0

if __name__ == "__main__":
    sys.exit(main())
