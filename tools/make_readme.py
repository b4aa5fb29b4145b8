"""Write README.md from nbs/index.ipynb (nbdev-readme needs Quarto, which these machines lack).

Markdown cells are copied; code cells become ```python blocks, followed by their text output if kept.
"""
import json, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

def render(nb_path: Path) -> str:
    nb = json.loads(nb_path.read_text())
    out = ["<!-- generated from nbs/index.ipynb by tools/make_readme.py: edit the notebook, not this file -->", ""]
    for c in nb["cells"]:
        src = "".join(c["source"]).rstrip()
        if not src or src.lstrip().startswith("#| hide"): continue
        if c["cell_type"] == "markdown":   # links from nbs/ made relative to the repo root
            out += [src.replace("](../images/", "](images/").replace("](tutorials/", "](nbs/tutorials/"), ""]
        elif c["cell_type"] == "code":
            out += ["```python", src, "```", ""]
            for o in c.get("outputs", []):
                txt = "".join(o.get("text", "") or o.get("data", {}).get("text/plain", ""))
                if txt.strip(): out += ["```", txt.rstrip(), "```", ""]
    return "\n".join(out).rstrip() + "\n"

if __name__ == "__main__":
    (ROOT / "README.md").write_text(render(ROOT / "nbs" / "index.ipynb"))
    print("README.md written from nbs/index.ipynb", file=sys.stderr)
