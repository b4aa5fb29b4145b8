"""The package's layers, read from its source: imports only go downward, and no module imports another in a cycle.

foundation → cost → comm → parallel → runtime → ops → ui → cli. A module may import its own layer and any below
it, never one above (imports inside functions count too: they are the same dependency, only later).
"""
import ast
from pathlib import Path
import pytest

PKG = Path(__file__).resolve().parent.parent / "supernode_nb"
LAYERS = ["foundation", "cost", "comm", "parallel", "runtime", "ops", "ui", "cli"]


def layer_of(mod: str) -> int | None:
    "Index of `supernode_nb.<layer>...` in LAYERS; None for the package root (its lazy entry points may name any layer)."
    parts = mod.split(".")
    return LAYERS.index(parts[1]) if len(parts) > 1 and parts[1] in LAYERS else None


def modules() -> dict[str, Path]:
    out = {}
    for f in sorted(PKG.rglob("*.py")):
        if f.name == "_modidx.py": continue
        parts = list(f.relative_to(PKG.parent).with_suffix("").parts)
        if parts[-1] == "__init__": parts = parts[:-1]
        out[".".join(parts)] = f
    return out


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    "Package modules that `name` imports, anywhere in its source (relative imports resolved)."
    base = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import): cands = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            head = base[: len(base) - (node.level - 1)] if node.level > 1 else base
            mod = ".".join((head if node.level else []) + ([node.module] if node.module else []))
            cands = [mod] + [f"{mod}.{a.name}" for a in node.names]
        else: continue
        for c in cands:
            while c and c not in known: c = c.rpartition(".")[0]
            if c and c != name: found.add(c)
    return found


def graph() -> dict[str, set[str]]:
    mods = modules()
    return {m: imports_of(m, p, set(mods)) for m, p in mods.items()}


def test_every_module_sits_in_a_layer():
    stray = [m for m in modules() if m != "supernode_nb" and layer_of(m) is None]
    assert not stray, f"modules outside the layers {LAYERS}: {stray}"


def test_imports_only_go_down():
    up = [f"{m} (layer {LAYERS[layer_of(m)]}) imports {d} (layer {LAYERS[layer_of(d)]})"
          for m, deps in graph().items() if layer_of(m) is not None
          for d in deps if layer_of(d) is not None and layer_of(d) > layer_of(m)]
    assert not up, "imports that run upward:\n" + "\n".join(sorted(up))


def test_no_import_cycles():
    g = {m: {d for d in deps if d != "supernode_nb"} for m, deps in graph().items() if m != "supernode_nb"}
    seen, stack, cycles = {}, [], []
    def visit(v):
        seen[v] = 1; stack.append(v)
        for w in sorted(g.get(v, ())):
            if seen.get(w) == 1: cycles.append(stack[stack.index(w):] + [w])
            elif w not in seen: visit(w)
        stack.pop(); seen[v] = 2
    for v in sorted(g):
        if v not in seen: visit(v)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_the_checker_catches_an_upward_import(tmp_path):
    "The rule itself can fail: a foundation module importing the runtime is reported."
    f = tmp_path / "x.py"; f.write_text("from ..runtime.runner import run\n")
    assert imports_of("supernode_nb.foundation.x", f, {"supernode_nb.runtime.runner"}) == {"supernode_nb.runtime.runner"}
    assert layer_of("supernode_nb.runtime.runner") > layer_of("supernode_nb.foundation.x")
