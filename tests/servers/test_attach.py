"""Attach mode without a GPU or systemd: protocol test servers, fake systemctl and journalctl."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import httpx
import pytest
import yaml
from paramsfiles import write_params
from protocol_servers import _SGLangHandler, sglang_server

import specbench_lib as sb
from specbench_lib.core.errors import ParamsError, PreflightError
from specbench_lib.model.fingerprint import Components, cell_fingerprints
from specbench_lib.model.params import ConfigParams
from specbench_lib.model.plan import build_plan
from specbench_lib.model.sections import AttachParams
from specbench_lib.servers.attached import AttachedServer
from specbench_lib.servers.engines import get_adapter, server_launch
from specbench_lib.sweep.preflightchecks import check_attached

SECRET = "sk-planted-7f3a9c1e5b"
CUDA = "RuntimeError: CUDA error: an illegal instruction was encountered"

SYSTEMCTL = """#!/bin/sh
# fake systemctl: `is-active UNIT` prints the unit's state from $FAKE_SYSTEMD/state/UNIT
[ "$1" = is-active ] || exit 2
state=$(cat "$FAKE_SYSTEMD/state/$2" 2>/dev/null || echo inactive)
echo "$state"
[ "$state" = active ]
"""
JOURNALCTL = """#!/bin/sh
# fake journalctl: records its argv, prints $FAKE_SYSTEMD/journal/UNIT.log (`-u UNIT` first)
printf '%s\\n' "$*" >> "$FAKE_SYSTEMD/journalctl.calls"
cat "$FAKE_SYSTEMD/journal/$2.log" 2>/dev/null
exit 0
"""


@pytest.fixture
def systemd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fake systemctl and journalctl first on PATH; units' states and journals under the folder."""
    root = tmp_path / "systemd"
    bin_dir = root / "bin"
    for folder in (bin_dir, root / "state", root / "journal"):
        folder.mkdir(parents=True)
    for name, text in (("systemctl", SYSTEMCTL), ("journalctl", JOURNALCTL)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755 | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_SYSTEMD", str(root))
    return root


def attach_params(tmp_path: Path, configs: str, *, port: int = 30000) -> Path:
    """An SGLang plan whose ``configs`` (YAML list items) attach to running servers."""
    model = tmp_path / "model"
    model.mkdir(exist_ok=True)
    (model / "config.json").write_text("{}")
    return write_params(tmp_path, "minimal", name="attach.yaml", phase="attach",
                        engine={"kind": "sglang", "binary": sys.executable, "model": str(model),
                                "tokenizer": "server", "port": port},
                        configs=yaml.safe_load(configs), contexts=[128], output_tokens=16,
                        requests_per_cell=3, warmup_requests=1)


def test_attached_unit_journal_crash_signature_and_unit_state(
        systemd: Path, tmp_path: Path, outputs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    journal = systemd / "journal" / "sglang-ddtree.service.log"
    journal.write_text("2026-01-01T00:00:00+0000 host python[1]: The server is fired up and ready to roll!\n")
    (systemd / "state" / "sglang-ddtree.service").write_text("active")
    (systemd / "state" / "sglang-ok.service").write_text("active")
    (systemd / "state" / "sglang-down.service").write_text("failed")
    monkeypatch.setenv("SGLANG_KEY", SECRET)
    generate = _SGLangHandler.do_POST

    def do_post(handler: _SGLangHandler) -> None:
        generate(handler)
        served = sum(path == "/generate" for path, _ in handler.server.bodies)
        if served == 2:  # the first measured request of the first config (after 1 warmup)
            with open(journal, "a") as fh:
                fh.write(f"2026-01-01T00:00:01+0000 host python[1]: [TP0] {CUDA}\n")

    monkeypatch.setattr(_SGLangHandler, "do_POST", do_post)
    with sglang_server("ok") as srv:
        attach = f"url: '{srv.url}/', api_key_env: SGLANG_KEY"
        params = attach_params(tmp_path, f"""
  - {{name: auto, method: auto, attach: {{{attach}, unit: sglang-ddtree.service}}}}
  - {{name: ok, method: auto, attach: {{{attach}, unit: sglang-ok.service}}}}
  - {{name: down, method: auto, attach: {{{attach}, unit: sglang-down.service}}}}
""")
        plan = sb.load_plan(params)
        result = sb.run_sweep(plan, progress=False)
        still_up = httpx.get(f"{srv.url}/health").status_code

    assert still_up == 200  # an attached server is never stopped
    cells = {c.spec.config: c for c in result.cells}
    crashed = cells["auto"]
    assert crashed.status == "crashed"
    assert crashed.verdict.reasons[0].startswith("crash_signature:")
    assert CUDA in crashed.verdict.reasons[0]
    assert CUDA in crashed.facts.log_excerpt and crashed.facts.returncode is None
    assert cells["ok"].status == "ok", cells["ok"].verdict
    down = cells["down"].verdict
    assert down.status == "crashed"
    assert "unit sglang-down.service of attached server down is failed" in down.reasons[0]

    manifest = result.manifest
    for label, unit in (("auto", "sglang-ddtree.service"), ("ok", "sglang-ok.service")):
        record = manifest["servers"][label]
        assert record["controlled"] is False and record["url"] == srv.url and record["unit"] == unit
        assert "argv" not in record and record["pid"] is None
        assert record["effective"]["version"] == "0.5.23"
    log = (result.run_dir / "logs" / "auto.log").read_text()
    assert log.startswith(f"# attached: {srv.url} unit sglang-ddtree.service") and CUDA in log
    calls = (systemd / "journalctl.calls").read_text().splitlines()
    assert calls and all(c.startswith("-u sglang-") and c.endswith("--no-pager -o short-iso")
                         for c in calls)
    assert "--since 20" in calls[0]

    leaked = [str(p) for p in result.run_dir.rglob("*") if p.is_file() and SECRET.encode() in p.read_bytes()]
    assert leaked == []
    assert SECRET not in json.dumps(manifest)


def test_port_preflight_skips_attached_configs_and_fingerprints_follow_settings(
        tmp_path: Path, outputs: Path) -> None:
    with sglang_server("ok") as busy, sglang_server("ok", context=2048) as other:
        port = int(busy.url.rsplit(":", 1)[1])
        params = attach_params(tmp_path, f"  - {{name: auto, method: auto, attach: {{url: '{busy.url}'}}}}",
                               port=port)
        plan = sb.load_plan(params)
        result = sb.run_sweep(plan, progress=False)  # the engine port is the attached one: no error
        assert result.counts()["ok"] == 1

        adapter = get_adapter(plan.params.engine)
        launches = {"auto": server_launch(adapter, plan.servers[0], plan.params.engine, parallel=1,
                                          model=tmp_path, binary=tmp_path)}
        assert launches["auto"].argv == [] and launches["auto"].base_url == busy.url
        prints = []
        for srv in (busy, busy, other):
            config = ConfigParams(name="auto", method="auto", attach=AttachParams(url=srv.url))
            other_plan = build_plan(plan.params.model_copy(update={"configs": (config,)}), source=params)
            attached = check_attached(other_plan, adapter)
            components = Components(engine={"version": "v"}, model="m", code="c", request={})
            prints.append(cell_fingerprints(plan, {"auto": []}, components, attached))
    assert prints[0] == prints[1] != prints[2]
    assert result.cells[0].fingerprint == result.manifest["plan_fingerprints"]["auto__code__ctx128__c1"]


def test_attached_preflight_errors_before_any_run_dir(tmp_path: Path, outputs: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_SUCH_KEY_VAR", raising=False)
    with sglang_server("ok") as srv:
        params = attach_params(tmp_path, f"  - {{name: auto, method: auto, attach: {{url: '{srv.url}', "
                                        f"api_key_env: NO_SUCH_KEY_VAR}}}}")
        with pytest.raises(PreflightError, match="NO_SUCH_KEY_VAR") as err:
            sb.run_sweep(sb.load_plan(params), progress=False)
    assert err.value.what == "api_key"
    params = attach_params(tmp_path, "  - {name: auto, method: auto, attach: {url: 'http://127.0.0.1:9'}}")
    with pytest.raises(PreflightError, match="attached server at http://127.0.0.1:9 does not answer"):
        sb.run_sweep(sb.load_plan(params), progress=False)
    assert not (outputs / "runs").exists()


@pytest.mark.parametrize(("config", "needle"), [
    ("{name: t, method: tree, budgets: [8, 16], attach: {url: 'http://h:1'}}", "runs one budget"),
    ("{name: a, method: auto, argv: [x], attach: {url: 'http://h:1'}}", "['argv'] cannot apply"),
    ("{name: a, method: auto, attach: {url: 'h:1'}}", "attach.url"),
    ("{name: a, method: auto, attach: {url: 'http://h:1', unit: '--now'}}", "attach.unit"),
    ("{name: a, method: auto, attach: {url: 'http://h:1', token: x}}", "unknown key"),
])
def test_attach_params_are_validated(tmp_path: Path, config: str, needle: str) -> None:
    params = attach_params(tmp_path, f"  - {config}")
    with pytest.raises(ParamsError, match=r"(?s)" + needle.replace("[", r"\[").replace("]", r"\]")):
        sb.load_params(params)


def test_attached_server_without_unit_is_alive_by_health_only(tmp_path: Path) -> None:
    with sglang_server("ok", loading_s=0.5) as srv:
        proc = AttachedServer(name="x", attach=AttachParams(url=srv.url), health_path="/health",
                              log_path=tmp_path / "x.log")
        with proc:
            assert not proc.alive()  # loading: 503
            assert proc.wait_ready(5) > 0.2
            assert proc.alive() and proc.healthy() and proc.headers == {}
        assert proc.alive()  # leaving the context stops nothing
    assert not proc.alive()
    assert proc.log_tail() == f"# attached: {srv.url} (no unit: no log)"
