"""Regenerate supernode_nb/data/flags/*.txt: the command-line flags Megatron-LM and MindSpeed-LLM define, read from their sources.

`supernode-nb export` writes flags for these frameworks; tests/test_export.py fails on any flag written that the
framework does not define. The flag lists are extracted here, once, from checkouts of the public repositories
(nothing of their code is copied: only each flag's name, action, value type and destination).

    python tools/framework_flags.py MEGATRON_GIT_DIR MINDSPEED_LLM_GIT_DIR MINDSPEED_GIT_DIR

Megatron-LM at the tag of the installed megatron-core (core_v0.16.1): its own `add_megatron_arguments` builds the parser
(megatron/training from the tag, megatron.core from the venv, only the tokenizer's `regex` stubbed), and every action
of that parser is listed. MindSpeed-LLM runs on Megatron-LM core_v0.12.1 (its install guide) plus MindSpeed: the
`add_argument("--...")` calls of those sources are read with `ast`.
"""
import argparse, ast, importlib.abc, importlib.machinery, subprocess, sys, tempfile, types, warnings
from pathlib import Path
from unittest import mock

OUT = Path(__file__).resolve().parents[1] / "supernode_nb" / "data" / "flags"
MEGATRON_TAG, MINDSPEED_MEGATRON_TAG = "core_v0.16.1", "core_v0.12.1"

def git(repo, *a) -> str: return subprocess.run(["git", "-C", str(repo), *a], check=True, capture_output=True, text=True).stdout

def _kind(act) -> tuple[str, str]:
    "(action, value type) of an argparse action."
    name = type(act).__name__
    action = {"_StoreTrueAction": "store_true", "_StoreFalseAction": "store_false", "_StoreAction": "store",
              "_StoreConstAction": "store_const", "_AppendAction": "append"}.get(name, name)
    t = act.type
    tn = t.__name__ if t in (int, float, str) else ("-" if t is None else "other")
    if action == "store" and t is None: tn = "str"
    if act.nargs not in (None, 0): tn += f"*{act.nargs}"
    return action, tn

class _Stub(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] == "regex": return importlib.machinery.ModuleSpec(name, self, is_package=True)
    def create_module(self, spec): m = mock.MagicMock(); m.__path__ = []; m.__spec__ = spec; return m
    def exec_module(self, m): pass

def megatron_arguments(repo, tag=MEGATRON_TAG):
    "Megatron-LM's megatron/training/arguments.py at `tag`, imported over the venv's megatron.core (which must be that release)."
    tmp = tempfile.mkdtemp()
    subprocess.run(f"git -C {repo} archive {tag} megatron/training megatron/legacy | tar -x -C {tmp}", shell=True, check=True)
    warnings.filterwarnings("ignore"); sys.meta_path.insert(0, _Stub()); sys.path.insert(0, tmp)
    pkg = types.ModuleType("megatron.training"); pkg.__path__ = [f"{tmp}/megatron/training"]; sys.modules["megatron.training"] = pkg
    from megatron.training import global_vars
    for k in dir(global_vars):
        if k.startswith("get_"): setattr(pkg, k, getattr(global_vars, k))
    from megatron.training import arguments
    return arguments

def megatron_parser_rows(repo, tag=MEGATRON_TAG) -> list[tuple]:
    "Every flag of Megatron-LM's own parser at `tag`."
    p = megatron_arguments(repo, tag).add_megatron_arguments(argparse.ArgumentParser(allow_abbrev=False))
    return [(s, *_kind(a), a.dest, _choices(a.choices), _default(a.default)) for a in p._actions for s in a.option_strings
            if s.startswith("--") and s != "--help"]

def _choices(c) -> str: return ",".join(map(str, c)) if c else "-"
def _default(d) -> str: return repr(d) if isinstance(d, (int, float, str, bool, type(None), list, tuple)) else "?"

def _ast_rows(src: str) -> list[tuple]:
    rows = []
    for n in ast.walk(ast.parse(src)):
        if not (isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "add_argument"): continue
        names = [a.value for a in n.args if isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.startswith("--")]
        kw = {k.arg: k.value for k in n.keywords}
        action = kw["action"].value if isinstance(kw.get("action"), ast.Constant) else ("store" if "action" not in kw else "other")
        t = kw.get("type")
        tn = t.id if isinstance(t, ast.Name) and t.id in ("int", "float", "str") else ("-" if t is None else "other")
        if action == "store" and t is None: tn = "str"
        if "nargs" in kw: tn += "*" + (str(kw["nargs"].value) if isinstance(kw["nargs"], ast.Constant) else "?")
        dest = kw["dest"].value if isinstance(kw.get("dest"), ast.Constant) else (names[0][2:].replace("-", "_") if names else "")
        ch = kw.get("choices")
        literal = isinstance(ch, (ast.List, ast.Tuple)) and all(isinstance(e, ast.Constant) for e in ch.elts)
        ch = _choices([e.value for e in ch.elts]) if literal else "-"
        d = kw.get("default")
        implicit = {"store": "None", "store_true": "False", "store_false": "True"}.get(action, "?")   # argparse's own defaults
        d = _default(d.value) if isinstance(d, ast.Constant) else (implicit if d is None else "?")
        rows += [(s, action, tn, dest, ch, d) for s in names]
    return rows

def ast_rows(repo, rev: str, paths: list[str]) -> tuple[list[tuple], list[str]]:
    "Flags of every `add_argument` call in the Python files under `paths` at `rev`; also the files read."
    files = [f for f in git(repo, "ls-tree", "-r", "--name-only", rev, "--", *paths).split() if f.endswith(".py")]
    rows, used = [], []
    for f in files:
        r = _ast_rows(git(repo, "show", f"{rev}:{f}"))
        if r: rows += r; used.append(f)
    return rows, used

def write(name: str, header: list[str], rows: list[tuple]):
    seen, lines = set(), []
    for r in sorted(rows):
        if r[0] in seen: continue
        seen.add(r[0]); lines.append("\t".join(map(str, r)))
    OUT.mkdir(parents=True, exist_ok=True)
    head = "".join(f"# {h}\n" for h in header) + "# flag\taction\ttype\tdest\tchoices\tdefault[\tsource]\n"
    (OUT / name).write_text(head + "\n".join(lines) + "\n")
    print(f"{name}: {len(lines)} flags")

def main(mlm, msllm, ms):
    mlm_c = git(mlm, "rev-parse", f"{MEGATRON_TAG}^{{commit}}").strip()
    write("megatron_lm.txt", ["Megatron-LM: every flag of its own parser (add_megatron_arguments)", "repository: NVIDIA/Megatron-LM",
                              f"commit: {mlm_c} (tag {MEGATRON_TAG}, the release of the installed megatron-core)",
                              "path: megatron/training/arguments.py, megatron/training/argument_utils.py (flags of TransformerConfig...)",
                              "read by: tools/framework_flags.py (the parser built and listed)"], megatron_parser_rows(mlm))
    old_c = git(mlm, "rev-parse", f"{MINDSPEED_MEGATRON_TAG}^{{commit}}").strip()
    llm_c, ms_c = git(msllm, "rev-parse", "HEAD").strip(), git(ms, "rev-parse", "HEAD").strip()
    r1, f1 = ast_rows(mlm, MINDSPEED_MEGATRON_TAG, ["megatron/training/arguments.py"])
    r2, f2 = ast_rows(msllm, "HEAD", ["mindspeed_llm/training", "mindspeed_llm/features_manager"])
    r3, f3 = ast_rows(ms, "HEAD", ["mindspeed/arguments.py", "mindspeed/features_manager"])
    rows = [(*r, "megatron") for r in r1] + [(*r, "mindspeed") for r in r3] + [(*r, "mindspeed_llm") for r in r2]
    write("mindspeed_llm.txt", ["MindSpeed-LLM: flags of Megatron-LM core_v0.12.1 (which it runs on), MindSpeed and MindSpeed-LLM",
                                f"repository: NVIDIA/Megatron-LM commit: {old_c} (tag {MINDSPEED_MEGATRON_TAG}) path: {', '.join(f1)}",
                                f"repository: Ascend/MindSpeed-LLM commit: {llm_c} (master) paths: {len(f2)} files under "
                                "mindspeed_llm/training, mindspeed_llm/features_manager",
                                f"repository: Ascend/MindSpeed commit: {ms_c} (master) paths: {len(f3)} files: mindspeed/arguments.py, "
                                "mindspeed/features_manager/**",
                                "read by: tools/framework_flags.py (ast: every add_argument('--flag', ...) call); "
                                "a flag defined twice keeps "
                                "its first source in the order megatron, mindspeed, mindspeed_llm"], rows)

if __name__ == "__main__": main(*sys.argv[1:4])
