"""The documentation site, built from the notebooks (tools/build_docs.py) and opened in headless Debian chromium.

Checks the index, an API page reached through a cross-link (the link resolves to the entry it names), and a
tutorial whose plotly figure is drawn (plotly.js is shipped with the site: nothing is fetched from a CDN).
The site is built into a temporary folder unless SNB_DOCS_DIR names one already built (`make docs` writes `_docs/`).
"""
import functools, http.server, os, socket, subprocess, sys, threading
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run", "--disable-quic"]
if not os.path.exists(CHROMIUM) and os.environ.get("SNB_REQUIRE_BROWSER") == "1":
    raise RuntimeError(f"{CHROMIUM} is absent but SNB_REQUIRE_BROWSER=1: apt-get install -y chromium")
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600),
              pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"{CHROMIUM} is absent: apt-get install -y chromium")]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    "(base URL, site folder): the built site served on 127.0.0.1 by a stdlib HTTP server in a thread."
    d = Path(os.environ["SNB_DOCS_DIR"]) if os.environ.get("SNB_DOCS_DIR") else tmp_path_factory.mktemp("site") / "_docs"
    if not (d / "index.html").exists():
        r = subprocess.run([sys.executable, str(ROOT / "tools" / "build_docs.py"), "--out", str(d)], capture_output=True,
                           text=True, timeout=540, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(d))
    http.server.SimpleHTTPRequestHandler.log_message = lambda *a: None
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try: yield f"http://127.0.0.1:{srv.server_address[1]}", d
    finally: srv.shutdown(); srv.server_close()


@pytest.fixture(scope="module")
def page():
    from playwright.sync_api import sync_playwright
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try: yield b.new_page(viewport={"width": 1280, "height": 900})
        finally: b.close()


def test_index_page(site, page):
    base, _ = site
    page.goto(f"{base}/index.html")
    assert "supernode_nb" in page.title()
    assert page.locator("text=Quick start").count() > 0


def test_a_cross_link_resolves_to_its_api_entry(site, page):
    base, d = site
    page.goto(f"{base}/tutorials/02_data_parallel.html")
    links = page.locator("a[href*='#api-']")
    assert links.count() > 0, "no cross-link to an API entry on the data-parallel tutorial"
    href = links.first.get_attribute("href"); name = href.split("#api-")[1]
    links.first.click(); page.wait_for_load_state()
    assert page.url.endswith(f"#api-{name}"), page.url
    assert page.locator(f"[id='api-{name}']").count() == 1          # the anchor exists on the page the link opened
    assert page.locator(f"code:has-text('{name}')").count() > 0      # and its entry shows the name's signature


def test_a_tutorial_draws_its_plotly_figure(site, page):
    base, d = site
    with_figs = sorted(p for p in (d / "tutorials").glob("*.html") if "plotly-graph-div" in p.read_text())
    assert with_figs, "no tutorial page has a plotly figure (tutorials must be committed with their outputs)"
    page.goto(f"{base}/tutorials/{with_figs[0].name}")
    page.wait_for_selector(".js-plotly-plot .main-svg", timeout=30_000)
    assert page.locator(".js-plotly-plot").count() >= 1
    assert page.evaluate("typeof Plotly") == "object"
