"""JupyterLab as a way in: a real JupyterLab in headless Chromium runs notebooks/tp1.ipynb.

The browser test starts ``jupyter lab`` from the venv on a copy of the notebook whose
``params_file`` names a tiny sweep on tests/support/fake_server.py (two cells, a few seconds), drives
Debian's Chromium with Playwright through the menus a researcher uses (Run ▸ Run All Cells, File ▸
Save Notebook), and checks what the page shows (the verdict table, the figures) and what the run
directory keeps (the notebook named in the manifest, its copy refreshed once it is saved). Every
process it starts (jupyter, kernels, Chromium, the fake servers, the notebook watcher) is found by
its command line and ended, pass or fail. The screenshot is /tmp/shots/jupyterlab.png.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from fakeparams import fake_argv
from paramsfiles import argv_of, fake_plan, write_params
from procs import pids_with

from specbench_lib import notebook_link
from specbench_lib.runs.run import RunDir

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
JUPYTER_LAB = Path(sys.executable).parent / "jupyter-lab"
PORTS = range(8230, 8240)
SHOT = Path("/tmp/shots/jupyterlab.png")


def two_free_ports() -> tuple[int, int]:
    free = []
    for port in PORTS:
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        free.append(port)
        if len(free) == 2:
            return free[0], free[1]
    pytest.fail(f"fewer than two free ports in {PORTS.start}-{PORTS.stop - 1}")


def tiny_params(tmp_path: Path, port: int) -> Path:
    """auto and one n-gram config on the fake llama.cpp server: two ok cells in a few seconds."""
    ngram = argv_of("--mode", "ok", budget=True)
    # this test judges what the page shows, not the host: Chromium and JupyterLab share its 2 cores
    path = write_params(tmp_path, fake_plan(
        port, argv=fake_argv("--mode", "ok"), phase="lab",
        configs=[{"name": "auto", "method": "auto"},
                 {"name": "ngram", "method": "ngram", "budgets": [4], "argv": ngram}],
        max_coalesced_first_fraction=1.0, max_coalesced_fraction=1.0), name="lab.yaml")
    return path


# --- the session's notebook, without a browser ----------------------------------------------

def test_session_notebook_is_jupyter_servers_notebook_path(tmp_path: Path) -> None:
    from jupyter_server.services.kernels.kernelmanager import MappingKernelManager
    from jupyter_server.services.sessions.sessionmanager import SessionManager

    notebook = tmp_path / "notebooks" / "tp1.ipynb"
    notebook.parent.mkdir()
    notebook.write_text("{}")
    # what the installed jupyter-server puts in a notebook kernel's environment
    sessions = SessionManager(kernel_manager=MappingKernelManager(root_dir=str(tmp_path)))
    env = sessions.get_kernel_env("notebooks/tp1.ipynb", "tp1.ipynb")
    assert env[notebook_link.SESSION_ENV] == str(notebook)
    assert notebook_link.session_notebook(env) == notebook.resolve()
    for missing in ({}, {"JPY_SESSION_NAME": ""}, {"JPY_SESSION_NAME": str(tmp_path / "no.ipynb")},
                    {"JPY_SESSION_NAME": str(notebook.parent)}):
        assert notebook_link.session_notebook(missing) is None


def test_a_session_name_inherited_from_the_launcher_is_not_this_kernels(tmp_path: Path) -> None:
    """papermill started from a notebook's cell: its kernel inherits the notebook's variable."""
    notebook = tmp_path / "tp1.ipynb"
    notebook.write_text("{}")
    kernel = ("import os, sys; from specbench_lib.notebook_link import session_notebook; "
              "print(session_notebook())")
    launcher = ("import os, subprocess, sys\n"
                f"env = {{**os.environ, 'JPY_PARENT_PID': str(os.getpid())}}\n"
                "if sys.argv[1] == 'set':\n"
                f"    env['JPY_SESSION_NAME'] = {str(notebook)!r}  # as jupyter-server does\n"
                f"print(subprocess.run([sys.executable, '-c', {kernel!r}], env=env, text=True,\n"
                "                     capture_output=True, check=True).stdout.strip())\n")
    inherited = {**os.environ, "JPY_SESSION_NAME": str(notebook)}
    for how, env, expected in (("inherit", inherited, "None"), ("set", dict(os.environ),
                                                                 str(notebook.resolve()))):
        done = subprocess.run([sys.executable, "-c", launcher, how], env=env, capture_output=True,
                              text=True, timeout=60, cwd=ROOT)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == expected, how


def test_the_copy_follows_saves_of_this_run_while_the_kernel_lives(tmp_path: Path) -> None:
    run = RunDir(tmp_path / "outputs" / "runs" / "r1")
    run.path.mkdir(parents=True)
    source = tmp_path / "tp1.ipynb"
    source.write_text(notebook_text("not run yet"))
    kernel = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert notebook_link.keep_session(run, source, "r1", kernel_pid=kernel.pid) == "tp1.ipynb"
        copy = run.path / "tp1.ipynb"
        assert copy.read_text() == source.read_text()  # at once: the last saved state
        wait_for(lambda: (run.path / "tp1.html").is_file(), 30, "the copy was not rendered")
        source.write_text(notebook_text("run r1: complete"))  # JupyterLab saves the run's outputs
        wait_for(lambda: "run r1: complete" in copy.read_text(), 15, "the save was not followed")
        wait_for(lambda: "run r1: complete" in (run.path / "tp1.html").read_text(), 30,
                 "the refreshed copy was not rendered")
        source.write_text(notebook_text("run r2: another run in the same kernel"))
        time.sleep(2.5)  # the watcher polls every second
        assert "run r1: complete" in copy.read_text()  # a save that no longer shows r1 is not r1's
        assert run.notebook_target("tp1.ipynb").name == "tp1.attempt2.ipynb"  # a resumed attempt
    finally:
        kernel.kill()
        kernel.wait()
    wait_for(lambda: not pids_with("specbench_lib.notebook_link", str(copy)), 15,
             "the watcher outlived its kernel")


def notebook_text(line: str) -> str:
    import nbformat

    return nbformat.writes(nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(line)]))


def wait_for(check: Callable[[], bool], limit_s: float, message: str | Callable[[], str]) -> None:
    deadline = time.monotonic() + limit_s
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(message if isinstance(message, str) else message())
        time.sleep(0.2)


# --- the real JupyterLab in a real browser ---------------------------------------------------

def require_browser() -> Any:
    """Playwright's sync API, Debian's Chromium and JupyterLab, or a failure saying what to do."""
    problem = None
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        problem = "playwright is not installed: pip install -e '.[test]'"
    if problem is None and not CHROMIUM.is_file():
        problem = f"{CHROMIUM} missing: make system (scripts/setup_system.sh)"
    if problem is None and not JUPYTER_LAB.is_file():
        problem = f"{JUPYTER_LAB} missing: pip install -e '.[test]'"
    if problem is not None:  # part of the suite (make setup-test installs both): never skipped
        pytest.fail(problem)
    return sync_playwright


def lab_settings(folder: Path) -> None:
    """No news or update toasts over the page, every cell in the DOM (no windowing), and no
    autosave: the test's File ▸ Save Notebook is the one save (the copy's refresh is its doing)."""
    settings = {"@jupyterlab/apputils-extension/notification": {"fetchNews": "false",
                                                                 "checkForUpdates": False},
                "@jupyterlab/notebook-extension/tracker": {"windowingMode": "none"},
                "@jupyterlab/docmanager-extension/plugin": {"autosave": False}}
    for name, values in settings.items():
        package, plugin = name.rsplit("/", 1)
        path = folder / package / f"{plugin}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values))


def ours(tmp_path: Path, engine_port: int) -> list[int]:
    """Every process this test started and may leave: jupyter, its kernels and the notebook
    watcher (their command lines name tmp_path), Chromium (its profile is under tmp_path), and the
    fake servers on the engine port."""
    found = {*pids_with(str(tmp_path)), *pids_with("fake_server.py", f"--port\0{engine_port}")}
    return sorted(found - {os.getpid()})


def reap(tmp_path: Path, engine_port: int) -> None:
    for sig, wait_s in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        for pid in ours(tmp_path, engine_port):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + wait_s
        while ours(tmp_path, engine_port) and time.monotonic() < deadline:
            time.sleep(0.1)


@contextmanager
def jupyter_lab(tmp_path: Path, root_dir: Path, port: int, token: str,
                outputs: Path) -> Iterator[subprocess.Popen[bytes]]:
    """``jupyter lab`` on 127.0.0.1:``port``, isolated under tmp_path; shut down on exit."""
    home = tmp_path / "jupyter"
    lab_settings(home / "lab-settings")
    env = {**os.environ, "SPECBENCH_OUTPUTS": str(outputs),
           "JUPYTER_CONFIG_DIR": str(home / "config"), "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
           "JUPYTERLAB_SETTINGS_DIR": str(home / "lab-settings"),
           "JUPYTERLAB_WORKSPACES_DIR": str(home / "workspaces"), "IPYTHONDIR": str(home / "ipython")}
    env.pop("JPY_SESSION_NAME", None)
    log = (tmp_path / "jupyter.log").open("wb")
    lab = subprocess.Popen(
        [str(JUPYTER_LAB), "--no-browser", f"--IdentityProvider.token={token}", f"--port={port}",
         "--ServerApp.port_retries=0", "--ServerApp.ip=127.0.0.1",
         f"--ServerApp.root_dir={root_dir}", *(["--allow-root"] if os.geteuid() == 0 else [])],
        env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=root_dir)
    try:
        url = f"http://127.0.0.1:{port}/api/status?token={token}"
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(url, timeout=2) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            if lab.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"jupyter lab did not start: {(tmp_path / 'jupyter.log').read_text()}")
            time.sleep(0.3)
        yield lab
    finally:
        if lab.poll() is None:
            lab.send_signal(signal.SIGTERM)  # jupyter-server shuts its kernels down on SIGTERM
            try:
                lab.wait(timeout=15)
            except subprocess.TimeoutExpired:
                lab.kill()
                lab.wait()
        log.close()


def kernel_ready(page: Any, port: int, token: str) -> bool:
    """The notebook's kernel is started and idle; a "Select Kernel" dialog (which JupyterLab
    may show first) is answered with its default, Python 3, as a researcher would."""
    dialog = page.locator(".jp-Dialog .jp-mod-accept")
    if dialog.count() and dialog.first.is_visible():
        dialog.first.click()
        return False
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/sessions?token={token}",
                                timeout=5) as answer:
        sessions = json.loads(answer.read())
    return any(s["path"] == "notebooks/tp1.ipynb" and (s.get("kernel") or {}).get(
        "execution_state") == "idle" for s in sessions)


def click_menu(page: Any, menu: str, item: str) -> None:
    exact = re.compile(rf"^\s*{re.escape(item)}\s*$")
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(rf"^\s*{menu}\s*$")).click()
    page.locator(".lm-Menu-itemLabel").filter(has_text=exact).click()


def executed(page: Any) -> bool:
    """Every code cell has its execution number (none waits with ``[*]`` or ``[ ]``)."""
    prompts = page.locator(".jp-CodeCell .jp-InputArea-prompt").all_inner_texts()
    return bool(prompts) and all(p.strip().strip("[]:").isdigit() for p in prompts)


@pytest.mark.browser
def test_run_all_in_jupyterlab_shows_verdicts_and_figures_and_keeps_the_notebook(
        tmp_path: Path) -> None:
    sync_playwright = require_browser()
    started = time.monotonic()
    lab_port, engine_port = two_free_ports()
    token = secrets.token_hex(16)
    outputs = tmp_path / "outputs"
    project = tmp_path / "project"
    (project / "notebooks").mkdir(parents=True)
    params = tiny_params(tmp_path, engine_port)
    source = (ROOT / "notebooks" / "tp1.ipynb").read_text()
    default = 'params_file: str = \\"params/embedded.yaml\\"'
    assert default in source
    notebook = project / "notebooks" / "tp1.ipynb"
    notebook.write_text(source.replace(default, f'params_file: str = \\"{params}\\"'))
    try:
        with jupyter_lab(tmp_path, project, lab_port, token, outputs), sync_playwright() as pw:
            browser = pw.chromium.launch_persistent_context(
                str(tmp_path / "chromium-profile"), executable_path=str(CHROMIUM), headless=True,
                viewport={"width": 1400, "height": 2000}, args=["--disable-gpu"])
            try:
                page = browser.pages[0] if browser.pages else browser.new_page()
                page.set_default_timeout(30_000)
                page.goto(f"http://127.0.0.1:{lab_port}/lab/tree/notebooks/tp1.ipynb?token={token}")
                page.locator(".jp-Notebook .jp-CodeCell").first.wait_for()
                wait_for(lambda: kernel_ready(page, lab_port, token), 60,
                         "the notebook's kernel did not start within 60 s")
                click_menu(page, "Run", "Run All Cells")
                wait_for(lambda: executed(page), 60, lambda: "Run All did not finish within 60 s: "
                         f"prompts {page.locator('.jp-CodeCell .jp-InputArea-prompt').all_inner_texts()}")
                run_dirs = sorted((outputs / "runs").glob("*_lab_*"))
                assert len(run_dirs) == 1, run_dirs
                run = RunDir(run_dirs[0])

                # what the page shows: the answer, the live progress output ended as one line,
                # the verdict table (collapsed at the end: opened with a click) with both cells
                # ok, and the figures
                assert page.locator(".jp-OutputArea-output .sb-headline").count() == 1
                ended = page.locator(".jp-OutputArea-output", has_text="the whole progress log")
                assert ended.count() == 1
                page.locator("summary", has_text="Every cell's verdict").click()
                table = page.locator(".jp-OutputArea-output table", has_text="verdict").first
                headers = table.locator("th").all_inner_texts()
                assert "verdict" in headers and "output tok/s" in headers, headers
                rows = table.locator("tbody tr").all_inner_texts()
                assert len(rows) == 2 and all("\tok\t" in f"{r}\t" for r in rows), rows
                images = page.locator(".jp-OutputArea-output img")
                assert images.count() >= 1
                widths = images.evaluate_all("els => els.map(e => e.naturalWidth)")
                assert all(w > 100 for w in widths), widths  # decoded images, not broken icons
                page_text = page.locator(".jp-Notebook").inner_text()
                assert f"run {run.run_id}: complete, ok 2" in page_text
                assert "Traceback" not in page_text

                # the run recorded its notebook at once, copied as last saved (no outputs yet)
                manifest = run.manifest()
                assert manifest["notebook_source"] == str(notebook.resolve())
                assert manifest["attempts"][-1]["notebook_source"] == str(notebook.resolve())
                assert manifest["notebook"] == "tp1.ipynb"
                assert "last saved" in manifest["notebook_state"]
                copy = run.path / manifest["notebook"]
                assert run.run_id not in copy.read_text()

                # saving in JupyterLab refreshes the copy: it then holds the run's outputs
                click_menu(page, "File", "Save Notebook")
                wait_for(lambda: run.run_id in copy.read_text(), 20,
                         "the saved notebook did not reach the run directory")
                kept = json.loads(copy.read_text())
                kinds = [o["output_type"] for c in kept["cells"] for o in c.get("outputs", [])]
                assert "error" not in kinds
                assert any("image/png" in o.get("data", {}) for c in kept["cells"]
                           for o in c.get("outputs", []))
                wait_for(lambda: run.run_id in (run.path / "tp1.html").read_text()
                         if (run.path / "tp1.html").is_file() else False, 30,
                         "the refreshed copy was not rendered to HTML")

                # the sweep's cell at the top: its verdict table and the first figures below it
                page.locator(".jp-CodeCell").nth(3).evaluate(
                    "e => e.scrollIntoView({block: 'start'})")
                SHOT.parent.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(SHOT))
            except BaseException:
                SHOT.parent.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(SHOT.with_name("jupyterlab-failed.png")))
                raise
            finally:
                browser.close()
        # jupyter is down, so are its kernels: the watcher makes its last pass and ends
        wait_for(lambda: not ours(tmp_path, engine_port), 20,
                 f"processes left behind: {ours(tmp_path, engine_port)}")
    finally:
        reap(tmp_path, engine_port)
    assert ours(tmp_path, engine_port) == []
    print(f"JupyterLab browser test: {time.monotonic() - started:.1f} s")
