"""Copies of notebooks that keep their outputs, numbered for nbval.

nbval compares a cell's outputs only when the committed cell has an execution count, and refuses a cell that has
outputs but no count ("Unrun reference cell has outputs"); `nbdev-clean` removes every count. So `make test` runs nbval
on numbered copies in `.nbval/` (the committed tutorials stay clean): each code cell gets the count it would have had
in a fresh top-to-bottom run.

    python tools/nbval_copies.py nbs/tutorials [more folders or notebooks] [--out .nbval]
"""
import argparse, json, shutil, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def numbered(nb: dict) -> dict:
    "The notebook with execution counts 1, 2, ... on its code cells (and their execute_result outputs)."
    n = 0
    for c in nb["cells"]:
        if c["cell_type"] != "code": continue
        n += 1; c["execution_count"] = n
        for o in c.get("outputs", []):
            if o.get("output_type") == "execute_result": o["execution_count"] = n
    return nb


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("paths", nargs="+"); ap.add_argument("--out", default=str(ROOT / ".nbval"))
    a = ap.parse_args(argv)
    out = Path(a.out)
    if out.exists(): shutil.rmtree(out)
    n = 0
    for p in map(Path, a.paths):
        for f in sorted(p.glob("*.ipynb")) if p.is_dir() else [p]:
            dst = out / f.parent.name / f.name; dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_text(json.dumps(numbered(json.loads(f.read_text())), indent=1, ensure_ascii=False)); n += 1
    print(f"nbval copies: {n} notebooks -> {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
