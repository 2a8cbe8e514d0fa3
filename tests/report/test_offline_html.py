"""Every HTML page specbench writes works offline: the executed run notebook, the report (the
library's page and the executed report notebook), a compare page and the index.

Two checks per page: a static one (no script, style, image or frame addressed on the network)
and a real one: headless Chromium with the network switched off loads the page from disk through
its DevTools pipe and reports every request, failed load, script error and broken image; the
test fails on any of them and keeps a full-page screenshot (under ``$SPECBENCH_SCREENSHOTS`` when
set, to look at). Negative pages prove the browser check catches a missing figure and a script
fetched from a CDN. Needs Debian's chromium (``make setup-test``, scripts/setup_system.sh).
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import select
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from cellfactory import make_cell, spread_cell
from fakeparams import fake_argv
from paramsfiles import DROP, argv_of, fake_plan, write_params
from ports import free_port

from specbench_lib import SweepResult
from specbench_lib.report import export as report
from specbench_lib.report.diff import RunDiff, write_diff
from specbench_lib.runs.run import RunDir

ROOT = Path(__file__).resolve().parents[2]
WINDOW = (1280, 800)  # the window every page must fit, and its first screen
EXTERNAL = re.compile(r"^\s*(https?:|wss?:|ftp:|//)", re.I)


# --- the static check -----------------------------------------------------------------------

class _References(HTMLParser):
    """Every address a page loads by itself: script/img/iframe/source/embed src, link href,
    object data, and url()/@import inside styles (a plain <a href> is a link, not a load)."""

    LOADS = {"script": "src", "img": "src", "iframe": "src", "source": "src", "embed": "src",
             "audio": "src", "video": "src", "link": "href", "object": "data"}

    def __init__(self) -> None:
        super().__init__()
        self.found: list[tuple[str, str]] = []
        self._in: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if tag in self.LOADS and values.get(self.LOADS[tag]):
            self.found.append((tag, str(values[self.LOADS[tag]])))
        if values.get("style"):
            self._css(tag, str(values["style"]))
        self._in = tag if tag in ("style", "script") else None

    def handle_data(self, data: str) -> None:
        if self._in == "style":
            self._css("style", data)
        elif self._in == "script":  # a module import or a loader's address in inline code
            for address in re.findall(r"""(?:import\s*\(|src\s*=)\s*["']([^"']+)""", data):
                self.found.append(("script", address))

    def handle_endtag(self, tag: str) -> None:
        self._in = None

    def _css(self, tag: str, css: str) -> None:
        for address in re.findall(r"""url\(\s*["']?([^"')]+)|@import\s+["']([^"']+)""", css):
            self.found.append((f"{tag} css", next(a for a in address if a)))


def external_loads(page: Path) -> list[tuple[str, str]]:
    parser = _References()
    parser.feed(page.read_text())
    return [(tag, address) for tag, address in parser.found if EXTERNAL.match(address)]


# --- the browser check ----------------------------------------------------------------------

@dataclass
class Loaded:
    """What headless Chromium saw loading a page with the network off."""

    requests: list[str] = field(default_factory=list)  # every address the page asked for
    failed: list[str] = field(default_factory=list)  # loads that failed, with their error
    errors: list[str] = field(default_factory=list)  # script exceptions and console errors
    images: int = 0
    broken_images: list[str] = field(default_factory=list)  # not loaded, or no pixels
    widgets: int = 0  # widget views left for a widget manager to draw (none is loaded offline)
    text_length: int = 0
    width: int = 0  # the page's scroll width in a 1280 px window: over 1280, it overflows
    height: int = 0
    headline_top: float | None = None  # where its first .sb-headline starts (None: it has none)

    def problems(self) -> list[str]:
        external = [f"external request {u}" for u in self.requests if EXTERNAL.match(u)]
        return [*external, *self.failed, *self.errors,
                *(f"broken image {src}" for src in self.broken_images),
                *([f"{self.widgets} widget view(s) that nothing draws"] if self.widgets else [])]


class _Chromium:
    """A headless Chromium driven over ``--remote-debugging-pipe`` (CDP as NUL-ended JSON on
    fds 3 and 4): no driver, no port, nothing but the browser the suite already needs."""

    def __init__(self, profile: Path) -> None:
        binary = shutil.which("chromium")
        if binary is None:  # CI (SPECBENCH_REQUIRE_ENGINE=1) has it: there its absence fails
            message = "chromium is not installed: run 'make setup-test' (scripts/setup_system.sh)"
            if os.environ.get("SPECBENCH_REQUIRE_ENGINE") == "1":
                pytest.fail(message)
            pytest.skip(message)
        to_browser, self._to_browser = os.pipe()
        self._from_browser, from_browser = os.pipe()
        # above 3 and 4, so the child's dup2 onto 3 and 4 never meets its own source
        high = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10) for fd in (to_browser, from_browser)]
        os.close(to_browser)
        os.close(from_browser)

        def onto_3_and_4() -> None:  # in the child, before exec: dup2 leaves them inheritable
            os.dup2(high[0], 3)
            os.dup2(high[1], 4)

        self.proc = subprocess.Popen(
            [binary, "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe",
             f"--user-data-dir={profile}", "--no-first-run", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--disable-quic", "--hide-scrollbars",
             "--proxy-server=http://127.0.0.1:9", "--proxy-bypass-list=<-loopback>",
             "--window-size=1280,2000", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            close_fds=False, preexec_fn=onto_3_and_4)  # noqa: PLW1509 (no threads started here)
        for fd in high:
            os.close(fd)
        self._next, self._buffer = 0, b""
        self.events: list[dict[str, Any]] = []

    def send(self, method: str, params: dict[str, Any] | None = None, *,
             session: str | None = None, timeout: float = 20.0) -> dict[str, Any]:
        self._next += 1
        message: dict[str, Any] = {"id": self._next, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            reply = self._read(deadline)
            if reply.get("id") == self._next:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for(self, method: str, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while not any(e.get("method") == method for e in self.events):
            self.events.append(self._read(deadline))

    def drain(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        try:
            while True:
                self.events.append(self._read(deadline))
        except TimeoutError:
            pass

    def _read(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._from_browser], [], [], left)[0]:
                raise TimeoutError("chromium did not answer in time")
            chunk = os.read(self._from_browser, 1 << 20)
            if not chunk:
                raise RuntimeError(f"chromium exited ({self.proc.poll()})")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def close(self) -> None:
        try:
            self.send("Browser.close", timeout=5)
        except (RuntimeError, TimeoutError, OSError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._to_browser)
        os.close(self._from_browser)


_PAGE_STATE = """JSON.stringify({
  images: document.images.length,
  broken: [...document.images].filter(i => !i.complete || i.naturalWidth === 0)
           .map(i => i.src.slice(0, 120)),
  widgets: document.querySelectorAll(
    'script[type="application/vnd.jupyter.widget-view+json"]').length,
  text: document.body ? document.body.innerText.length : 0,
  width: document.documentElement.scrollWidth,
  height: document.documentElement.scrollHeight,
  headline: (() => { const h = document.querySelector('.sb-headline');
                     return h ? h.getBoundingClientRect().top + window.scrollY : null; })()})"""


def load_offline(page: Path, screenshot: Path) -> Loaded:
    """Load ``page`` from disk in headless Chromium with the network off; save a full-page
    screenshot (1280 px wide) to ``screenshot`` and return what the browser saw."""
    with tempfile.TemporaryDirectory() as profile:
        browser = _Chromium(Path(profile))
        try:
            target = browser.send("Target.createTarget", {"url": "about:blank"})["targetId"]
            session = browser.send("Target.attachToTarget", {"targetId": target,
                                                             "flatten": True})["sessionId"]
            for domain in ("Page", "Network", "Runtime", "Log"):
                browser.send(f"{domain}.enable", session=session)
            browser.send("Network.emulateNetworkConditions", {
                "offline": True, "latency": 0, "downloadThroughput": -1,
                "uploadThroughput": -1}, session=session)
            browser.send("Emulation.setDeviceMetricsOverride", {  # a laptop's first screen
                "width": WINDOW[0], "height": WINDOW[1], "deviceScaleFactor": 1, "mobile": False},
                session=session)
            browser.events.clear()
            browser.send("Page.navigate", {"url": page.resolve().as_uri()}, session=session)
            browser.wait_for("Page.loadEventFired")
            browser.drain(0.5)  # late scripts, module imports, console errors
            state = json.loads(browser.send("Runtime.evaluate", {
                "expression": _PAGE_STATE, "returnByValue": True}, session=session)
                ["result"]["value"])
            size = browser.send("Page.getLayoutMetrics", session=session)["cssContentSize"]
            shot = browser.send("Page.captureScreenshot", {  # the whole page, wide tables too
                "format": "png", "captureBeyondViewport": True,
                "clip": {"x": 0, "y": 0, "scale": 1, "width": min(max(size["width"], 1280), 2560),
                         "height": min(max(size["height"], 200), 12000)}}, session=session)
            screenshot.parent.mkdir(parents=True, exist_ok=True)
            import base64

            screenshot.write_bytes(base64.b64decode(shot["data"]))
        finally:
            browser.close()
    return _seen(browser.events, state)


def _seen(events: list[dict[str, Any]], state: dict[str, Any]) -> Loaded:
    loaded = Loaded(images=state["images"], broken_images=state["broken"],
                    widgets=state["widgets"], text_length=state["text"], width=state["width"],
                    height=state["height"], headline_top=state["headline"])
    urls: dict[str, str] = {}
    for event in events:
        method, params = event.get("method"), event.get("params", {})
        if method == "Network.requestWillBeSent":
            url = params["request"]["url"]
            urls[params["requestId"]] = url
            if not url.startswith("data:"):
                loaded.requests.append(url)
        elif method == "Network.loadingFailed":
            url = urls.get(params["requestId"], "?")
            loaded.failed.append(f"failed load {url[:120]}: {params.get('errorText')}")
        elif method == "Runtime.exceptionThrown":
            details = params["exceptionDetails"]
            loaded.errors.append("script error: " + str(
                (details.get("exception") or {}).get("description") or details.get("text")))
        elif method == "Runtime.consoleAPICalled" and params.get("type") == "error":
            loaded.errors.append("console error: " + " ".join(
                str(a.get("value", a.get("description"))) for a in params.get("args", [])))
        elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
            loaded.errors.append(f"log error: {params['entry'].get('text')}")
    return loaded


# --- the pages --------------------------------------------------------------------------------

def fake_server_params(tmp: Path) -> Path:
    """Three configs on tests/support/fake_server.py run as a server: ``auto``, an ok n-gram config and
    one whose server crashes at start (a crashed cell in every table and figure)."""
    ok, crash = (argv_of("--mode", mode, budget=True) for mode in ("ok", "startup_crash"))
    path = write_params(tmp, fake_plan(
        free_port(), argv=fake_argv("--mode", "ok"), phase="offline", engine={"ready_timeout_s": 4},
        configs=[{"name": "auto", "method": "auto"},
                 {"name": "ngram", "method": "ngram", "budgets": [4], "argv": ok},
                 {"name": "broken", "method": "ngram", "budgets": [8], "argv": crash}],
        timeouts={"first_token_s": 3, "between_tokens_s": 2, "request_s": 8},
        cell_order="fixed",  # the printed lines are checked in the plan's order
        max_coalesced_fraction=DROP, max_coalesced_first_fraction=DROP, host=DROP),
        name="offline.yaml")
    return path


PRINTED: dict[str, str] = {}  # what ``specbench run tp1`` printed (the fixture's first run)


def specbench(outputs: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SPECBENCH_OUTPUTS": str(outputs)}
    done = subprocess.run([sys.executable, "-m", "specbench_lib.cli", *args], capture_output=True,
                          text=True, cwd=ROOT, env=env, timeout=180)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return done


def synthetic_run(root: Path, run_id: str, engine: str, factor: float) -> Path:
    run = RunDir(root / "runs" / run_id)
    run.cells_dir.mkdir(parents=True)
    run.update_manifest(phase="synthetic", status="complete", model={"path": "/m/x.gguf"},
                        engine={"version": engine}, verdict_counts={"ok": 2, "crashed": 1})
    rates = [40.0, 50.0, 60.0]
    for cell in (spread_cell("auto", "auto", None, rates),
                 spread_cell("ngram-b8", "ngram", 8, [r * factor for r in rates]),
                 make_cell("ngram-b16", "ngram", 16, "crashed", None)):
        run.write_cell(cell)
    return run.path


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Every kind of page, written by specbench itself: a run on the fake server through
    ``specbench run tp1`` (its notebook rendered), a second one limited to budget 4, ``specbench
    run report`` on the first, ``specbench compare`` of the two and of two synthetic runs, and
    the index over all of it."""
    tmp = tmp_path_factory.mktemp("offline")
    outputs = tmp / "outputs"
    params = str(fake_server_params(tmp))
    PRINTED["run"] = specbench(outputs, "run", "tp1", "--params", params).stdout
    (run_dir,) = (outputs / "runs").iterdir()
    specbench(outputs, "run", "tp1", "--params", params, "-p", "budget", "4")
    (budget_dir,) = set((outputs / "runs").iterdir()) - {run_dir}
    specbench(outputs, "run", "report", "-p", "runs", run_dir.name)
    specbench(outputs, "compare", run_dir.name, budget_dir.name)
    a = synthetic_run(outputs, "20260101T000000Z_synthetic_a", "b4000", 1.0)
    b = synthetic_run(outputs, "20260102T000000Z_synthetic_b", "b4100", 2.0)
    compare_page = write_diff(RunDiff(SweepResult(a), SweepResult(b)),
                                    outputs / "compare")
    index = report.build_index(outputs)
    return {"run_notebook": run_dir / "tp1.html", "report_notebook": outputs / "report" / "report.html",
            "report": outputs / "report" / "results.html", "compare": compare_page,
            "compare_runs": outputs / "compare" / f"{run_dir.name}__vs__{budget_dir.name}.html",
            "index": index}


def shots(tmp: Path) -> Path:
    return Path(os.environ.get("SPECBENCH_SCREENSHOTS") or tmp)


KINDS = ["run_notebook", "report_notebook", "report", "compare", "compare_runs", "index"]


@pytest.fixture(scope="module")
def browsed(pages: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Loaded]:
    """Each page as headless Chromium loaded it (network off, a 1280 × 800 window), its
    full-page screenshot kept (under ``$SPECBENCH_SCREENSHOTS`` when set)."""
    folder = shots(tmp_path_factory.mktemp("shots"))
    return {kind: load_offline(pages[kind], folder / f"{kind}.png") for kind in KINDS}


@pytest.mark.parametrize("kind", KINDS)
def test_no_page_loads_anything_from_the_network(pages: dict[str, Path], kind: str) -> None:
    assert external_loads(pages[kind]) == []


@pytest.mark.parametrize("kind", KINDS)
def test_every_page_loads_offline_with_its_figures(browsed: dict[str, Loaded], kind: str) -> None:
    seen = browsed[kind]
    assert seen.problems() == []
    assert seen.text_length > 200  # the page drew its text
    figures = {"run_notebook": 5, "report_notebook": 2, "report": 2, "compare": 1,
               "compare_runs": 1, "index": 2}
    assert seen.images >= figures[kind]  # its figures are there, and each one drew


@pytest.mark.parametrize("kind", KINDS)
def test_every_page_fits_1280_px_with_its_headline_on_the_first_screen(
        browsed: dict[str, Loaded], kind: str) -> None:
    seen = browsed[kind]
    assert seen.width <= WINDOW[0], f"{kind} is {seen.width} px wide: it scrolls sideways"
    assert seen.headline_top is not None, f"{kind} has no headline (.sb-headline)"
    assert seen.headline_top < WINDOW[1], f"{kind}'s headline starts at {seen.headline_top} px"


def test_the_pages_say_what_they_show(pages: dict[str, Path]) -> None:
    index = pages["index"].read_text()
    rows = re.findall(r"<tr><td>(\d{8}T\w+)</td>(.*?)</tr>", index)
    assert len(rows) == 4
    for run_id, row in rows:  # ok, invalid, crashed, skipped: a number each, 0 included
        cells = re.findall(r"<td>([^<]*)</td>", row)
        manifest = json.loads((pages["index"].parent / "runs" / run_id / "manifest.json")
                              .read_text())
        assert cells[4:8] == [str(manifest["verdict_counts"].get(k, 0))
                              for k in ("ok", "invalid", "crashed", "skipped")], (run_id, cells)
        assert "0" in cells[4:8]  # each run has a verdict with no cell: shown as 0, not blank
        planned = len(manifest.get("plan_fingerprints") or {}) or "?"
        budget = f" · budget {manifest['budget']} only" if manifest.get("budget") else ""
        assert cells[2] == f"{planned} cells{budget}", (run_id, cells)  # the plan, told apart
        assert cells[3] == "?" if "elapsed_s" not in manifest else re.fullmatch(
            r"(\d+ m )?\d+ s", cells[3]), (run_id, cells)
    assert re.search(r"<td>3 cells</td>", index) and re.search(r"<td>2 cells · budget 4 only</td>",
                                                               index)
    for name in ("report/report.html", "report/results.html", "report/results.tex",
                 "report/speedup_vs_budget_offline.png", "report/speedup_vs_budget_offline.svg",
                 "compare/20260101T000000Z_synthetic_a__vs__20260102T000000Z_synthetic_b.html"):
        assert f'href="{name}"' in index, name
    page = pages["report"].read_text()
    assert 'src="speedup_vs_budget_offline.png"' in page and "broken-b8" in page
    assert "crashed" in page and "server_failed" in page  # the failed cell, listed with its reason
    compared = pages["compare_runs"].read_text()  # the budget-4 run lacks broken-b8: one line
    assert "budget filter: A every budget, B budget 4 only" in compared
    assert "broken-b8: only in A (1 cell: crashed 1)" in compared
    assert "cells planned: A 3, B 2" in compared


def test_the_run_notebook_leads_with_its_answer_and_keeps_the_rest_collapsed(
        pages: dict[str, Path]) -> None:
    import nbformat

    page = pages["run_notebook"].read_text()
    answer, figure = page.find("sb-headline"), page.find("<img")
    log, verdicts = page.find("The progress log ("), page.find("Every cell's verdict")
    how, parameters = page.find("How to run this notebook"), page.find("parameters</summary>")
    assert -1 < answer < figure < log < verdicts < how, (answer, figure, log, verdicts, how)
    assert parameters > how  # the parameters, collapsed at the end, machine paths relative
    assert page.count("<details") >= 4 and "PosixPath(" not in page
    assert str(pages["run_notebook"].parent.parent.parent) not in page  # no /tmp/... paths
    nb = nbformat.read(pages["run_notebook"].with_suffix(".ipynb"), as_version=4)
    run_cell = next(c for c in nb.cells if "sb.run_sweep(" in c.source)
    streams = [o for o in run_cell.outputs if o.output_type == "stream" and o.name == "stdout"]
    assert streams == []  # no line printed on its own: one output that was updated
    (live,) = [o for o in run_cell.outputs if "text/html" in o.get("data", {})
               and "progress log" in o.data["text/html"]]
    log_text = live.data["text/plain"]  # the whole log kept, as plain text
    assert "server auto: ready in" in log_text and "[3/3]" in log_text
    assert "run directory: outputs/runs/" in log_text
    printed = PRINTED["run"]  # the terminal still saw every line, as it came (SPECBENCH_ECHO)
    assert "server auto: ready in" in printed and "[3/3] broken-b8 code ctx16 c1: crashed" in printed
    assert f"run directory: {pages['run_notebook'].parent}" in printed


def test_the_browser_check_fails_on_a_missing_figure_a_cdn_script_and_a_dead_widget(
        tmp_path: Path) -> None:
    _tiny_png(tmp_path / "good.png")
    missing = tmp_path / "missing.html"
    missing.write_text("<!doctype html><html><body><p>a figure follows</p>"
                       "<img src='good.png'><img src='absent.png'></body></html>")
    seen = load_offline(missing, tmp_path / "missing.png")
    assert seen.images == 2 and [s.rsplit("/", 1)[-1] for s in seen.broken_images] == ["absent.png"]
    assert any("absent.png" in p for p in seen.problems())
    cdn = tmp_path / "cdn.html"
    cdn.write_text("<!doctype html><html><head><script src='https://cdn.jsdelivr.net/npm/"
                   "mathjax@3/es5/tex-chtml.js'></script></head><body><p>text</p></body></html>")
    assert external_loads(cdn) == [("script", "https://cdn.jsdelivr.net/npm/mathjax@3/es5/"
                                               "tex-chtml.js")]
    problems = load_offline(cdn, tmp_path / "cdn.png").problems()
    assert any(p.startswith("external request https://cdn.jsdelivr.net/") for p in problems)
    wide = tmp_path / "wide.html"  # what the fit check catches: a table wider than the window
    wide.write_text("<!doctype html><html><body><div class='sb-headline'>x</div><table><tr>"
                    + "<td>a_long_unbroken_column_name_output_tok_s_lo</td>" * 40
                    + "</tr></table></body></html>")
    assert load_offline(wide, tmp_path / "wide.png").width > WINDOW[0]
    widget = tmp_path / "widget.html"  # a progress bar saved as a widget view (stock nbconvert)
    widget.write_text("<!doctype html><html><body><p>restaging</p><div class='jupyter-widgets'>"
                      "<script type='application/vnd.jupyter.widget-view+json'>"
                      '{"model_id": "m1", "version_major": 2}</script></div></body></html>')
    assert load_offline(widget, tmp_path / "widget.png").problems() == [
        "1 widget view(s) that nothing draws"]


def test_a_notebook_with_widgets_and_math_renders_without_a_cdn(tmp_path: Path) -> None:
    """The stock template loads require.js, MathJax and the widget manager from a CDN;
    render_html's page loads none of them and shows a widget's text form instead."""
    import nbformat
    from nbconvert import HTMLExporter

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("speedup $s = t_a / t_b$"),
                nbformat.v4.new_code_cell("bar", outputs=[nbformat.v4.new_output(
                    "display_data", data={"text/plain": "restaging 40%",
                                          "application/vnd.jupyter.widget-view+json": {
                                              "model_id": "m1", "version_major": 2,
                                              "version_minor": 0}})])]
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {
        "state": {}, "version_major": 2, "version_minor": 0}}
    path = tmp_path / "w.ipynb"
    nbformat.write(nb, path)
    stock = tmp_path / "stock.html"
    stock.write_text(HTMLExporter().from_notebook_node(nb)[0])
    assert {tag for tag, _ in external_loads(stock)} >= {"script"}  # what the check catches
    page = report.render_html(path)
    assert external_loads(page) == []
    text = page.read_text()
    assert "restaging 40%" in text and "widget-view+json" not in text and "unpkg" not in text
    assert "t_a / t_b" in text  # the math stays, as its TeX source


def _tiny_png(path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(1, 1))
    ax.plot([0, 1], [0, 1])
    fig.savefig(path, format="png")
    plt.close(fig)
