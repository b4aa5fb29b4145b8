"""Draw the package's layers — bottom first, each with its modules and the seed layers it serves — as images/layers.svg.

Reads the layers from the package folders (so the picture cannot drift from the code) and writes a plain SVG that
GitHub, the docs site and JupyterLab all show. Run after adding or moving a module:

    python tools/layers_svg.py
"""
from html import escape
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "supernode_nb"
LAYERS = [  # (package folder, what it is, the seed layers it serves)
    ("foundation", "what a configuration is: pure data", "1 model · 5 scheduling · 6 planes · 7 hardware"),
    ("cost", "what it will cost: pure estimates", "across"),
    ("comm", "collectives, recorded per axis", "3 collective communication · 4 operators"),
    ("parallel", "the strategies, checked against one process", "1 model & data · 2 training framework"),
    ("runtime", "ranks launched, supervised, measured", "5 scheduling & orchestration"),
    ("ops", "diagnosis and the archive's questions", "across"),
    ("ui", "figures, dashboard, demo", "across"),
    ("cli", "supernode-nb commands", "—"),
]
COLORS = ["#e8f1fb", "#e9f5ec", "#fdf3e1", "#fbe9ea", "#efe9f7", "#e6f4f4", "#f4f4e6", "#eeeeee"]


def modules(layer: str) -> list[str]:
    if layer == "cli": return ["cli"]
    return sorted(p.stem for p in (PKG / layer).glob("*.py") if p.stem != "__init__")


def svg() -> str:
    w, row, pad = 980, 58, 10
    rows = list(reversed(LAYERS))                      # drawn top-down: ui on top, foundation at the bottom
    h = pad * 2 + row * len(rows) + 30
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="Helvetica, Arial, sans-serif">',
           f'<rect width="{w}" height="{h}" fill="white"/>',
           f'<text x="{pad}" y="{pad + 14}" font-size="14" fill="#444">supernode_nb: imports only go down '
           f'(tests/test_layers.py checks it)</text>']
    for i, (name, what, seeds) in enumerate(rows):
        y = pad + 24 + i * row
        color = COLORS[LAYERS.index((name, what, seeds))]
        mods = ", ".join(modules(name))
        out += [f'<rect x="{pad}" y="{y}" width="{w - 2 * pad}" height="{row - 6}" rx="6" fill="{color}" stroke="#999"/>',
                f'<text x="{pad + 12}" y="{y + 21}" font-size="16" font-weight="bold">{escape(name)}</text>',
                f'<text x="{pad + 110}" y="{y + 21}" font-size="13" fill="#333">{escape(what)}</text>',
                f'<text x="{w - pad - 12}" y="{y + 21}" font-size="12" fill="#666" text-anchor="end">seed layers: {escape(seeds)}</text>',
                f'<text x="{pad + 110}" y="{y + 41}" font-size="12" fill="#1f4e79" font-family="monospace">{escape(mods)}</text>']
    out.append("</svg>")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    (ROOT / "images").mkdir(exist_ok=True)
    (ROOT / "images" / "layers.svg").write_text(svg())
    print("images/layers.svg written")
