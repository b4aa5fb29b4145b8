"""Process-tree helpers shared by the tests that must prove nothing is left running."""
from pathlib import Path


def descendants(pid: int) -> list[int]:
    "Every descendant of `pid` (read from /proc), deepest last."
    kids = {}
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try: ppid = int((p / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError): continue
            kids.setdefault(ppid, []).append(int(p.name))
    out, todo = [], [pid]
    while todo:
        for c in kids.get(todo.pop(), []): out.append(c); todo.append(c)
    return out


def cli(*args, timeout: float = 120, env: dict | None = None, input: str | None = None):
    "Run `supernode-nb ARGS...` in a fresh interpreter (`python -m supernode_nb.cli`); the CompletedProcess, text mode."
    import os, subprocess, sys
    return subprocess.run([sys.executable, "-m", "supernode_nb.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, input=input, env={**os.environ, **(env or {})})


def as_bytes(obj) -> bytes:
    "`obj` saved with torch.save: a reference passed to forkserver ranks in one piece (tensors would each travel as a file descriptor)."
    import io, torch
    buf = io.BytesIO(); torch.save(obj, buf); return buf.getvalue()
