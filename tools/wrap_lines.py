"""Wrap the code lines over 140 characters of notebooks (code cells) and .py files, one statement at a time.

Uses ruff's range formatter on each long line's statement only (quotes kept as written), so the rest of a cell keeps
its hand layout. What a formatter cannot wrap — a long string, comment or docstring — is listed for a person to split.

    python tools/wrap_lines.py nbs/40_runtime/45a_calibrate.ipynb tests/test_x.py ...
"""
import json, subprocess, sys, tempfile, os
from pathlib import Path

RUFF = str(Path(sys.executable).parent / "ruff")
MAX = 140


def _format_line(src: str, line: int) -> str | None:
    "`src` with the statement on `line` (1-based) formatted by ruff; None when ruff cannot parse it."
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(src); p = f.name
    r = subprocess.run([RUFF, "format", "--isolated", "--line-length", str(MAX), "--config", 'format.quote-style="preserve"',
                        "--range", f"{line}-{line + 1}", p], capture_output=True, text=True)
    out = Path(p).read_text(); os.unlink(p)
    return out if r.returncode == 0 else None


def wrap(src: str) -> str:
    "`src` with each long line's statement formatted, until no long line is left that ruff can shorten."
    tried = set()
    while True:
        lines = src.split("\n")
        bad = [i for i, l in enumerate(lines) if len(l) > MAX and l not in tried]
        if not bad: return src
        tried.add(lines[bad[0]])
        new = _format_line(src if src.endswith("\n") else src + "\n", bad[0] + 1)
        if new is not None: src = new if src.endswith("\n") else new.removesuffix("\n")


def main(paths: list[str]) -> int:
    left = 0
    for path in map(Path, paths):
        if path.suffix == ".ipynb":
            nb = json.loads(path.read_text())
            for c in nb["cells"]:
                s = "".join(c["source"])
                if c["cell_type"] != "code" or not any(len(l) > MAX for l in s.split("\n")): continue
                if any(l.lstrip().startswith(("%", "!")) for l in s.split("\n")): continue   # IPython syntax: by hand
                c["source"] = wrap(s).splitlines(keepends=True)
            path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
            code = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
        else:
            code = wrap(path.read_text()); path.write_text(code)
        long = [l.strip()[:80] for l in code.split("\n") if len(l) > MAX]
        left += len(long)
        for l in long: print(f"{path}: still over {MAX}: {l}…")
    return 1 if left else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
