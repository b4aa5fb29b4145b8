"""Build the documentation site into `_docs/` from the notebooks, offline: MkDocs + mkdocs-jupyter + Material.

nbdev's own site builder needs Quarto, which cannot be installed on the project's machines (see README, Development).
This script stages a copy of `nbs/` in `_docs_src/` and changes only the copy:
- every module notebook gets an "API" section at its end: each public name's signature, docstring and docments
  (the trailing `# comment` of every parameter), read from the exported package with fastcore's `docments`;
- a backticked public name in any markdown cell (`RankLayout`) becomes a link to its API entry, on whatever page;
- plotly outputs (`application/vnd.plotly.v1+json`, what the tutorials store: small) become a div and a
  `Plotly.newPlot` call; plotly.js itself is copied once into the site (no CDN: the build and the pages work offline).
Then `mkdocs build` writes `_docs/`.

    python tools/build_docs.py [--out _docs] [--strict]
"""
from __future__ import annotations
import argparse, html, importlib, inspect, json, os, re, shutil, subprocess, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NBS, STAGE = ROOT / "nbs", ROOT / "_docs_src"
LAYER_TITLES = {"00_foundation": "Foundation", "10_cost": "Cost", "20_comm": "Comm", "30_parallel": "Parallel",
                "40_runtime": "Runtime", "50_ops": "Ops", "60_ui": "UI"}


def src(cell) -> str: return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def module_of(nb: dict) -> str | None:
    "The module a notebook exports (`#| default_exp x.y`), or None."
    for c in nb["cells"]:
        if m := re.search(r"^#\|\s*default_exp\s+(\S+)", src(c), re.M): return m.group(1)
    return None


def page_of(path: Path) -> str:
    "The site-relative page (no directory URLs) of a notebook under nbs/."
    return str(path.relative_to(NBS).with_suffix(".html"))


def public_names(mod) -> list[str]:
    return [n for n in getattr(mod, "__all__", []) if not n.startswith("_")]


def signature(obj) -> str:
    try: return str(inspect.signature(obj))
    except (TypeError, ValueError): return ""


def docments_table(obj) -> str:
    "Markdown table of the parameters' docments (trailing comments), when any parameter has one."
    from fastcore.docments import docments
    try: d = docments(obj, full=True)
    except Exception: return ""
    rows = [(k, v) for k, v in d.items() if k != "return" and v.get("docment")]
    if not rows: return ""
    def ann(v):
        a = v.get("anno")
        return "" if a is inspect._empty or a is None else html.escape(getattr(a, "__name__", str(a)))
    def dflt(v):
        x = v.get("default")
        return "" if x is inspect._empty else html.escape(repr(x))[:60]
    out = ["| parameter | type | default | |", "|---|---|---|---|"]
    out += [f"| `{k}` | {ann(v)} | {dflt(v)} | {html.escape(v['docment'])} |" for k, v in rows]
    return "\n".join(out)


def api_markdown(modname: str) -> str:
    "The API section of one module: every public name, its signature, docstring and docments."
    mod = importlib.import_module(f"supernode_nb.{modname}")
    parts = [f"## API of `supernode_nb.{modname}`"]
    for name in public_names(mod):
        obj = getattr(mod, name, None)
        if obj is None: continue
        kind = "class" if inspect.isclass(obj) else "def" if callable(obj) else ""
        parts.append(f'<a id="api-{name}"></a>\n\n### `{name}`')
        if kind:
            parts.append(f"```python\n{kind} {name}{signature(obj)}\n```")
            doc = inspect.getdoc(obj) or ""
            if doc: parts.append(doc.split("\n\n")[0] if kind == "class" and len(doc) > 800 else doc)
            if t := docments_table(obj.__init__ if inspect.isclass(obj) else obj): parts.append(t)
        else:
            parts.append(f"`{name}` = `{html.escape(repr(obj))[:200]}`")
    return "\n\n".join(parts)


def symbol_index(pages: dict[str, str]) -> dict[str, str]:
    "Public name -> page#anchor, for every module notebook (first definition wins)."
    idx = {}
    for modname, page in pages.items():
        mod = importlib.import_module(f"supernode_nb.{modname}")
        for n in public_names(mod): idx.setdefault(n, f"{page}#api-{n}")
    return idx


def relative(target: str, page: str) -> str:
    return os.path.relpath(target.split("#")[0], os.path.dirname(page) or ".") + ("#" + target.split("#")[1] if "#" in target else "")


def link_names(text: str, idx: dict[str, str], page: str) -> str:
    "`Name` -> [`Name`](page#api-Name) outside code blocks and existing links."
    out, fence = [], False
    for line in text.split("\n"):
        if line.strip().startswith("```"): fence = not fence
        if not fence:
            line = re.sub(
                r"(?<![\[\w])`((?:[a-z_]\w*\.)*([A-Za-z_]\w*))(\(\))?`(?![\]\(])",
                lambda m: f"[`{m.group(1)}{m.group(3) or ''}`]({relative(idx[m.group(2)], page)})" if m.group(2) in idx else m.group(0),
                line,
            )
        out.append(line)
    return "\n".join(out)


def plotly_to_html(nb: dict) -> int:
    "Replace plotly mimetype outputs by a div + Plotly.newPlot; returns how many figures were converted."
    n = 0
    for c in nb["cells"]:
        for o in c.get("outputs", []):
            data = o.get("data", {})
            fig = data.get("application/vnd.plotly.v1+json")
            if fig is None: continue
            n += 1
            div = f"plotly-fig-{n}"
            spec = json.dumps({"data": fig.get("data", []), "layout": fig.get("layout", {}), "config": {"responsive": True}})
            # the theme loads plotly.js (extra_javascript) at the end of the page: draw once the page has loaded
            o["data"] = {"text/html": f'<div id="{div}" class="plotly-graph-div" style="width:100%;min-height:360px"></div>'
                                      f'<script>window.addEventListener("load", function () {{ var s = {spec}; '
                                      f'Plotly.newPlot("{div}", s.data, s.layout, s.config); }});</script>'}
    return n


def stage() -> tuple[list, dict]:
    "Copy the notebooks into _docs_src/ with API sections, cross-links and plotly conversion; return the nav."
    if STAGE.exists(): shutil.rmtree(STAGE)
    STAGE.mkdir()
    nbs = sorted(p for p in NBS.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)
    loaded = {p: json.loads(p.read_text()) for p in nbs}
    pages = {module_of(nb): page_of(p) for p, nb in loaded.items() if module_of(nb)}
    idx = symbol_index(pages)
    nav, sections, stats = [], {}, {"figures": 0, "pages": 0}
    for p, nb in loaded.items():
        page, mod = page_of(p), module_of(nb)
        for c in nb["cells"]:
            if c["cell_type"] == "markdown":
                up = "../" * page.count("/")                         # images/ is copied to the site's root
                c["source"] = link_names(src(c), idx, page).replace("](../images/", f"]({up}images/")
        if mod:
            nb["cells"].append({"cell_type": "markdown", "metadata": {}, "source": api_markdown(mod)})
        stats["figures"] += plotly_to_html(nb)
        dst = STAGE / p.relative_to(NBS)
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.write_text(json.dumps(nb, ensure_ascii=False))
        rel = str(p.relative_to(NBS))
        title = mod or p.stem
        top = p.relative_to(NBS).parts[0]
        if rel == "index.ipynb": nav.insert(0, {"Home": rel})
        else: sections.setdefault(LAYER_TITLES.get(top, "Tutorials" if top == "tutorials" else "Command line"), []).append({title: rel})
        stats["pages"] += 1
    order = ["Tutorials"] + list(LAYER_TITLES.values()) + ["Command line"]
    nav += [{k: sections[k]} for k in order if k in sections]
    assets = STAGE / "assets"; assets.mkdir()
    import plotly
    shutil.copy(Path(plotly.__file__).parent / "package_data" / "plotly.min.js", assets / "plotly.min.js")
    for img in sorted((ROOT / "images").glob("*.*")) if (ROOT / "images").exists() else []:
        (STAGE / "images").mkdir(exist_ok=True); shutil.copy(img, STAGE / "images" / img.name)
    return nav, stats


def config(nav: list, out: Path) -> Path:
    cfg = {
        "site_name": "supernode_nb",
        "docs_dir": str(STAGE),
        "site_dir": str(out),
        "use_directory_urls": False,
        "site_description": "Parallel strategies of large-model training on a supernode, in notebooks: "
        "plan, place, estimate, run, compare.",
        "theme": {"name": "material", "font": False, "features": ["navigation.sections", "navigation.indexes", "search.highlight"]},
        "plugins": [
            "search",
            {
                "mkdocs-jupyter": {
                    "execute": False,
                    "include_source": True,
                    "ignore_h1_titles": True,
                    "include_requirejs": False,
                    "remove_tag_config": {"remove_input_tags": ["hide"]},
                }
            },
        ],
        "extra_javascript": ["assets/plotly.min.js"],
        "markdown_extensions": ["tables", "admonition", "toc"],
        "nav": nav,
    }
    path = STAGE.parent / "_docs_mkdocs.yml"
    path.write_text(json.dumps(cfg, indent=1, ensure_ascii=False))   # YAML is a superset of JSON
    return path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(ROOT / "_docs"))
    ap.add_argument("--strict", action="store_true", help="fail on mkdocs warnings (broken links)")
    a = ap.parse_args(argv)
    nav, stats = stage()
    cfg = config(nav, Path(a.out).resolve())
    cmd = [sys.executable, "-m", "mkdocs", "build", "-q", "-f", str(cfg)] + (["--strict"] if a.strict else [])
    r = subprocess.run(cmd, cwd=ROOT)
    if r.returncode == 0:
        print(f"docs: {stats['pages']} pages, {stats['figures']} plotly figures -> {a.out}")
    return r.returncode


if __name__ == "__main__":
    sys.exit(main())
