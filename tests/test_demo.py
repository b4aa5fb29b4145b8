"""`make demo`'s job end to end: choose → place → estimate → run small → record, on the console and in demo.html,
with the numbers the CLI's own `plan --json` / `estimate --json` give for the same configuration."""
import html, json, os, re, subprocess, sys
from pathlib import Path
import pytest

pytestmark = pytest.mark.slow      # a real multi-process run, a calibration when the archive has no profile (~1–2 min)

STEPS = ("1 Choose", "2 Place", "3 Estimate", "4 Run small", "5 Record")

def cli(*args, env=None, timeout=600):
    r = subprocess.run([sys.executable, "-m", "supernode_nb.cli", *args], capture_output=True, text=True, timeout=timeout, env=env)
    assert r.returncode == 0, (args, r.stderr[-3000:])
    return r.stdout

@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    "One demo run (3 local steps) into a private archive: its console text, its report, and its summary from the report."
    d = tmp_path_factory.mktemp("demo")
    env = {**os.environ, "SUPERNODE_NB_HOME": str(d), "SUPERNODE_NB_ARCHIVE": "on"}
    out = cli("demo", "--out", str(d / "demo.html"), "--run-steps", "3", "--plotlyjs", "cdn", env=env)
    doc = (d / "demo.html").read_text()
    summary = json.loads(html.unescape(doc.split("id='summary'>")[1].split("</script>")[0]))
    return dict(text=out, doc=doc, summary=summary, env=env)

def test_every_step_is_printed_and_drawn(demo):
    text, doc = demo["text"], demo["doc"]
    pos = [text.index(f"{s} — ") for s in STEPS]
    assert pos == sorted(pos), "steps out of order"
    assert "planning llama3-70b on cloudmatrix384" in text and re.search(r"step \d/3 +loss \d+\.\d+", text)   # progress lines
    for n, s in enumerate(STEPS, 1):
        sec = doc.split(f"<h2 id='step-{n}'>")[1].split("<h2 ")[0]
        assert s.split(" ", 1)[1] in sec and 'class="plotly-graph-div"' in sec, f"step {n} has no figure"
    assert "Open next" in text and "make lab" in text and "demo.html" in text

def test_choose_matches_plan_json(demo):
    S = demo["summary"]
    for c in S["choose"]:
        args = ("plan", "--model", "llama3-70b", "--topology", c["topology"], "--global-batch-size", "512", "--top", "3", "--json")
        off = {**demo["env"], "SUPERNODE_NB_ARCHIVE": "off"}
        plan, runnable = json.loads(cli(*args, env=off)), json.loads(cli(*args, "--runnable", env=off))
        assert c["top"] == runnable["top"] and c["rejected"] == plan["rejected"] and c["fastest"] == plan["top"][0]
        assert c["rejected_by"]["engine"] == plan["fitting"] - runnable["fitting"]
        assert c["rejected_by"]["memory"] + c["rejected_by"]["divisibility"] == sum(plan["rejected"].values())
        best = c["top"][0]
        assert f"{best['tokens_per_s']:,.0f} tokens/s" in demo["text"]
    dgx = S["choose"][1]
    assert dgx["topology"] == "dgx-h100-superpod" and dgx["rejected_by"]["communication"] > 0
    assert any(r["level"] == "ib" for r in dgx["communication"])                      # tp/dp leaving the 8-GPU node

def test_estimate_matches_estimate_json(demo):
    E = demo["summary"]["estimate"]
    argv = E["command"].split()[1:]
    est = json.loads(cli(*argv, "--json", env={**demo["env"], "SUPERNODE_NB_ARCHIVE": "off"}))
    for k in ("step_time_s", "tokens_per_s", "mfu", "memory_per_device_bytes", "memory_limit_bytes", "breakdown", "memory_breakdown"):
        assert E["estimate"][k] == est[k], k
    assert E["estimate"]["config"] == {**E["estimate"]["config"], **demo["summary"]["choose"][0]["top"][0]["config"]}
    e = E["estimate"]
    assert f"step {e['step_time_s'] * 1e3:,.0f} ms" in demo["text"] and f"MFU {e['mfu']:.1%}" in demo["text"]
    assert f"{e['memory_per_device_bytes'] / 2**30:.1f} GiB of" in demo["text"]
    assert 0 < E["expected_error"]["median_abs_pct"] < 100 and E["used"]["chip"] == "Ascend 910C"

def test_run_small_beside_its_estimate(demo):
    R = demo["summary"]["run"]
    m = re.search(r"predicted (\d+) ms / step, measured (\d+) ms \(error ([+-]\d+) %\)", demo["text"])
    assert m, demo["text"][-3000:]
    assert (int(m[1]), int(m[2]), int(m[3])) == (round(R["predicted_ms"]), round(R["measured_ms"]), round(R["error_pct"]))
    assert R["predicted_ms"] > 0 and R["measured_ms"] > 0 and len(R["losses"]) == 3
    world = R["config"]["tp"] * R["config"]["pp"] * R["config"]["dp"] * R["config"]["cp"]
    assert len(R["means"]) == world >= 2
    assert all(R["compare"][k]["measured"] > 0 and R["compare"][k]["predicted"] > 0 for k in ("compute_s", "step_time_s"))
    sec = demo["doc"].split("<h2 id='step-4'>")[1]
    assert all(f'"rank {r}"' in sec for r in range(world)) and '"estimate"' in sec    # bars per rank, the estimate beside

def test_record_in_archive_and_compare(demo):
    rec = demo["summary"]["record"]
    assert all(isinstance(rec[k], int) for k in ("plan_id", "small_plan_id", "run_id"))
    assert rec["compare"] == f"supernode-nb archive compare {rec['small_plan_id']} {rec['run_id']}" and rec["compare"] in demo["text"]
    out = cli("archive", "compare", str(rec["small_plan_id"]), str(rec["run_id"]), env=demo["env"])
    assert "predicted vs measured" in out

def test_json_mode_is_the_summary(tmp_path):
    env = {**os.environ, "SUPERNODE_NB_ARCHIVE": "off"}
    s = json.loads(cli("demo", "--out", str(tmp_path / "d.html"), "--run-steps", "0", "--plotlyjs", "cdn", "--json", env=env))
    assert {"choose", "place", "estimate", "record", "report"} <= set(s) and "run" not in s
    assert s["record"]["plan_id"] is None and s["place"]["world_size"] == s["choose"][0]["top"][0]["devices"]

def test_text_is_formatted(demo):
    "Figures rounded (no 0.22617157217412406), nothing printed as a raw dict, no line cut short with '…', every tutorial named."
    from supernode_nb.ui.demo import TUTORIALS
    text = demo["text"]
    raw = re.search(r".*\d\.\d{7,}.*", text)
    assert raw is None, raw[0]
    assert "{'" not in text and "': " not in text
    cut = [l for l in text.splitlines() if re.search(r"\S…$", l.rstrip())]     # progress lines end in " …"; a cut line in "x…"
    assert cut == [], cut
    assert all(f"{n}.ipynb" in text for n, _ in TUTORIALS)
