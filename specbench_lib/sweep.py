"""The orchestration: for each server config, start it, run its cells, judge, store, stop."""

from __future__ import annotations

import os
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import httpx
import yaml

from . import notebook_link
from .dispatch import dispatch_cell
from .engines import Adapter, Launch, get_adapter, server_launch
from .errors import EngineError, ServerError, StoreError
from .metrics import cell_metrics
from .params import CellSpec, Plan, ServerConfig
from .preflight import (
    bind_warnings,
    check_attached,
    check_draft_models,
    check_port_free,
    engine_files,
    launches_servers,
)
from .preview import PlanPreview
from .results import SweepResult
from .server import AttachedServer, Server, ServerProcess
from .store import (
    SCHEMA_VERSION,
    SPECBENCH_VERSION,
    RunDir,
    environment_info,
    file_identity,
    fingerprint,
    new_run_id,
    redact,
    utc_now,
)
from .validate import Verdict, context_guard, judge_cell, judge_counters
from .workload import build_prompts, documents


def run_sweep(plan: Plan, *, run_id: str | None = None, resume: str | None = None,
              retry_known_bad: bool = False, reuse: bool = False, dry_run: bool = False,
              outputs: Path | None = None, progress: bool = True) -> SweepResult | PlanPreview:
    """Run the cells of ``plan`` in a run directory and return its result.

    Args:
        plan: from :func:`specbench_lib.load_plan`.
        run_id: the new run directory's name; a new ``<UTC time>_<phase>_<id>`` when empty.
        resume: the id of an earlier run to continue: its ok cells whose fingerprint matches
            the plan are kept; missing, invalid, crashed and stale cells run again (the old
            files move to ``cells/history/``).
        retry_known_bad: run configs listed under ``known_bad`` instead of skipping them.
        reuse: copy ok cells with a matching fingerprint from earlier runs instead of measuring
            them again (the manifest's attempt lists which cell came from which run).
        dry_run: start nothing; return a :class:`PlanPreview` of the cells, the argv per config
            and the context guard's outcome.
        outputs: the outputs folder (default: ``outputs/`` of the project or $SPECBENCH_OUTPUTS).
        progress: show a progress bar over cells.
    """
    if dry_run:
        return PlanPreview(plan)
    if run_id and resume:
        raise StoreError("give run_id or resume, not both", path=str(run_id))
    params = plan.params
    adapter = get_adapter(params.engine)
    binary, model = engine_files(params.engine)
    check_draft_models(plan)
    if launches_servers(plan):
        check_port_free(params.engine.host, params.engine.port)
    for workload in params.workloads:
        documents(workload)
    engine = {"kind": adapter.name, "binary": str(binary), "version": adapter.version(binary)}
    model_id = file_identity(model)
    launches = {s.label: server_launch(adapter, s, params.engine, parallel=max(params.concurrency),
                                       model=model, binary=binary) for s in plan.servers}
    attached = check_attached(plan, adapter)
    fingerprints = cell_fingerprints(plan, launches, engine["version"], model_id["fingerprint"],
                                     attached)
    run, kept = _open_run(plan, fingerprints, run_id=run_id, resume=resume, outputs=outputs)
    reused = _reuse_cells(run, fingerprints, kept) if reuse else {}
    kept |= set(reused)
    env = environment_info()
    warnings = bind_warnings(params.engine)
    for warning in warnings:
        print(f"WARNING: {warning}", file=sys.stderr, flush=True)
    started = time.monotonic()
    attempt = {"started": utc_now(), "pid": os.getpid(), "params_file": str(plan.source),
               "budget": plan.budget, "kept_cells": sorted(kept), "reused_from": reused,
               "notebook": notebook_link.adopt(run.path)}
    attempts = _start_manifest(plan, run, attempt, engine=engine, model=model_id, environment=env,
                               plan_fingerprints=fingerprints, warnings=warnings)
    print(f"run {run.run_id}: {len(plan.cells) - len(kept)} cells to measure"
          f"{f', {len(kept)} kept' if kept else ''} → {run.path}", flush=True)
    bar = _progress(len(plan.cells), initial=len(kept), enabled=progress)
    status = "failed"
    try:
        for server in plan.servers:
            todo = [c for c in plan.cells_for(server) if c.cell_id not in kept]
            if not todo:
                continue
            bad = None if retry_known_bad else next(
                (kb for kb in params.known_bad
                 if kb.applies(server, engine_version=engine["version"], gpus=env["gpus"])), None)
            if bad is not None:  # known to fail here: skipped with the reason, never started
                for cell in todo:
                    _write_cell(run, cell, server, launches[server.label].argv,
                                fingerprints[cell.cell_id],
                                Verdict("skipped", (f"known_bad: {bad.reason}",)), {}, None)
                    bar.update(1)
                continue
            _run_server(plan, server, todo, launches[server.label], run, adapter, fingerprints,
                        bar)
        status = "complete"
    except KeyboardInterrupt:
        status = "interrupted"
        raise
    finally:
        bar.close()
        result = SweepResult(run.path)
        attempt.update(ended=utc_now(), status=status)
        try:
            result.write_results()
            run.update_manifest(status=status, ended=utc_now(), attempts=attempts,
                                elapsed_s=round(time.monotonic() - started, 1),
                                verdict_counts=result.counts())
        except OSError as exc:
            print(f"run {run.run_id}: could not write results or manifest ({exc}); the cell "
                  f"files are intact", file=sys.stderr, flush=True)
        run.release()
        counts = ", ".join(f"{k} {v}" for k, v in result.counts().items())
        print(f"run {run.run_id}: {status}, {counts} in {time.monotonic() - started:.0f} s\n"
              f"run directory: {run.path}", flush=True)
    return result


def _start_manifest(plan: Plan, run: RunDir, attempt: dict[str, Any],
                    **fields: Any) -> list[dict[str, Any]]:
    """Write the resolved params and the manifest of a (new or resumed) run; returns its attempts."""
    params = plan.params
    previous = run.manifest()
    attempts = [*previous.get("attempts", []), attempt]
    resolved = redact(params.model_dump(mode="json"))
    (run.path / "params.yaml").write_text(yaml.safe_dump(resolved, sort_keys=False))
    run.update_manifest(
        schema_version=SCHEMA_VERSION, specbench_version=SPECBENCH_VERSION, run_id=run.run_id,
        phase=params.phase, status="running", started=previous.get("started", attempt["started"]),
        ended=None, params_file=str(plan.source), budget=plan.budget, params=resolved,
        planned_cells=len(plan.cells), servers=previous.get("servers", {}), attempts=attempts,
        notebook=previous.get("notebook") or attempt["notebook"], **fields)
    return attempts


def cell_fingerprints(plan: Plan, launches: dict[str, Launch], engine_version: str,
                      model_fingerprint: str,
                      attached: dict[str, dict[str, Any]] | None = None) -> dict[str, str]:
    """The fingerprint each cell of the plan must carry to be read into a table.

    It covers the cell spec, what is measured (output tokens, requests, seed, the workload…),
    the server argv (port normalised) or, for an attached server, its URL and effective settings
    (``attached``, from :func:`~specbench_lib.preflight.check_attached`), the engine version, the
    model and specbench's version.
    """
    params = plan.params.model_dump(mode="json")
    measured = {k: v for k, v in params.items() if k not in _NOT_MEASURED}
    measured["prefix_cache"] = plan.params.engine.prefix_cache  # llama.cpp: a request field
    workloads = {w["name"]: w for w in params["workloads"]}
    port = str(plan.params.engine.port)
    prints = {}
    for cell in plan.cells:
        argv = ["{port}" if a == port else a for a in launches[cell.config].argv]
        server = (attached or {}).get(cell.config, argv)
        prints[cell.cell_id] = fingerprint(asdict(cell), measured, workloads[cell.workload], server,
                                           engine_version, model_fingerprint, SPECBENCH_VERSION)
    return prints


_NOT_MEASURED = {"phase", "description", "engine", "configs", "workloads", "contexts",
                 "concurrency", "known_bad", "unstable_cv"}  # analysis settings, not measurement


def _open_run(plan: Plan, fingerprints: dict[str, str], *, run_id: str | None,
              resume: str | None, outputs: Path | None) -> tuple[RunDir, set[str]]:
    if not resume:
        return RunDir.create(run_id or new_run_id(plan.params.phase), root=outputs), set()
    run = RunDir.open(resume, root=outputs)
    phase = run.manifest().get("phase")
    if phase != plan.params.phase:
        run.release()
        raise StoreError(f"run {resume} is of phase {phase!r}, not {plan.params.phase!r}; resume it "
                         f"with its own params file", path=run.path)
    kept = {c["cell_id"] for c in run.read_cells()
            if c["verdict"]["status"] == "ok" and fingerprints.get(c["cell_id"]) == c.get("fingerprint")}
    return run, kept


def _reuse_cells(run: RunDir, fingerprints: dict[str, str], kept: set[str]) -> dict[str, str]:
    """Copy ok cells whose fingerprint matches from other runs; returns {cell id: source run}."""
    wanted = {fp: cell_id for cell_id, fp in fingerprints.items() if cell_id not in kept}
    reused: dict[str, str] = {}
    for other in sorted(run.path.parent.iterdir(), reverse=True):
        if other == run.path or not (other / "cells").is_dir():
            continue
        for cell in RunDir(other).read_cells():
            cell_id = wanted.get(cell.get("fingerprint", ""))
            if cell_id and cell_id not in reused and cell["verdict"]["status"] == "ok":
                run.write_cell(cell_id, {**cell, "reused_from": other.name})
                reused[cell_id] = other.name
    return reused


def _run_server(plan: Plan, server: ServerConfig, cells: list[CellSpec], launch: Launch, run: RunDir,
                adapter: Adapter, fingerprints: dict[str, str], bar: Any) -> None:
    params = plan.params
    log_path = run.logs_dir / f"{server.label}.log"
    proc: Server
    if server.attach is None:
        check_port_free(params.engine.host, params.engine.port)
        proc = ServerProcess(name=server.label, argv=launch.argv, base_url=launch.base_url,
                             health_path=launch.health_path, log_path=log_path,
                             signatures=adapter.crash_signatures)
        record: dict[str, Any] = {"controlled": True, "argv": redact(launch.argv)}
    else:
        proc = AttachedServer(name=server.label, attach=server.attach, health_path=launch.health_path,
                              log_path=log_path, signatures=adapter.crash_signatures)
        record = {"controlled": False, "url": server.attach.url, "unit": server.attach.unit}
    record["log"] = str(log_path.relative_to(run.path))
    written: set[str] = set()

    timing: dict[str, Any] = {"cells": {}}  # seconds: where the sweep's wall time goes
    record["timing"] = timing

    def write(cell: CellSpec, verdict: Verdict, payload: dict[str, Any]) -> None:
        began = time.perf_counter()
        _write_cell(run, cell, server, launch.argv, fingerprints[cell.cell_id], verdict, payload, proc)
        timing["cells"][cell.cell_id] = {**payload.get("timing", {}),
                                         "store_s": round(time.perf_counter() - began, 4)}
        written.add(cell.cell_id)
        bar.update(1)

    try:
        began = time.perf_counter()
        bar.set_postfix_str(f"starting {server.label} (ready within {params.engine.ready_timeout_s:.0f} s)")
        proc.start()
        record["pid"] = proc.pid
        record["ready_s"] = round(proc.wait_ready(params.engine.ready_timeout_s), 2)
        timing["start_s"] = round(time.perf_counter() - began, 4)
        with httpx.Client(base_url=launch.base_url, timeout=params.request_timeout_s,
                          headers=proc.headers) as client:
            info = adapter.server_info(client)
            record["context_per_request"] = info.context_per_request
            record["effective"] = redact(info.raw)
            began = time.perf_counter()
            record["warmup"] = _warmup(plan, proc, client, adapter)
            timing["warmup_s"] = round(time.perf_counter() - began, 4)
            _store_server(run, server.label, record)
            dead: Verdict | None = None
            for cell in cells:
                bar.set_postfix_str(cell.cell_id, refresh=False)
                if dead is None:
                    verdict, payload = _run_cell(plan, server, cell, proc, client, adapter,
                                                 info.context_per_request)
                    if verdict.status == "crashed":
                        dead = verdict
                else:
                    verdict = Verdict("crashed", ("server_died_earlier: the server crashed in an "
                                                  "earlier cell of this config", *dead.reasons))
                    payload = {}
                write(cell, verdict, payload)
            _store_server(run, server.label, record)
    except (ServerError, EngineError, httpx.TransportError) as exc:
        record["error"] = f"{type(exc).__name__}: {exc}"
        record["returncode"] = proc.returncode
        _store_server(run, server.label, record)
        signature = proc.crash_signature()
        verdict = Verdict("crashed", (f"server_failed: {exc}", f"returncode: {proc.returncode}",
                                      *((f"log: {signature}",) if signature else ())))
        for cell in cells:
            if cell.cell_id not in written:
                write(cell, verdict, {})
    finally:
        began = time.perf_counter()
        proc.stop()
        timing["stop_s"] = round(time.perf_counter() - began, 4)


def _run_cell(plan: Plan, server: ServerConfig, cell: CellSpec, proc: Server,
              client: httpx.Client, adapter: Adapter, context: int) -> tuple[Verdict, dict[str, Any]]:
    params = plan.params
    refused = context_guard(prompt_tokens=cell.context, output_tokens=params.output_tokens,
                            reserve=adapter.speculative_reserve(server), context=context)
    if refused is not None:
        return refused, {}
    workload = next(w for w in params.workloads if w.name == cell.workload)
    began = time.perf_counter()
    prompts = build_prompts(workload, n=params.requests_per_cell, tokens=cell.context,
                            seed=params.seed, salt=f"r{cell.repeat}" if cell.repeat else "",
                            tokenize=lambda text: adapter.tokenize(client, text))
    offset = proc.log_size()
    started = utc_now()
    counters = adapter.metrics_snapshot(client)
    timing = {"prompts_s": round(time.perf_counter() - began, 4)}
    began = time.perf_counter()
    dispatch = dispatch_cell(adapter, proc.base_url, [p.tokens for p in prompts], warmup=0,
                             concurrency=cell.concurrency, max_tokens=params.output_tokens,
                             timeouts=params.request_timeouts(), request_rate=params.request_rate,
                             seed=params.seed, headers=proc.headers)
    timing["dispatch_s"] = round(time.perf_counter() - began, 4)
    timing["window_s"] = round(dispatch.window_end - dispatch.window_start, 4)
    began = time.perf_counter()
    speculative = cell.method != "auto"
    verdict = judge_cell(dispatch.records, server_alive=proc.healthy(),
                         crash_line=proc.crash_signature(offset), planned=params.requests_per_cell,
                         speculative=speculative and adapter.spec_stats_per_request,
                         max_failed_fraction=params.max_failed_fraction,
                         prefix_cache=params.engine.prefix_cache)
    spec_counters = adapter.cell_spec_stats(counters, adapter.metrics_snapshot(client))
    if verdict.ok and speculative and not adapter.spec_stats_per_request:
        verdict = judge_counters(verdict, spec_counters)
    payload: dict[str, Any] = {
        "started": started,
        "prompts": [{"sha": p.sha, "tokens": len(p.tokens), "sources": p.sources} for p in prompts],
        "requests": [r.to_dict() for r in dispatch.records],
        "spec_counters": spec_counters,
    }
    if verdict.ok:
        metrics = cell_metrics(dispatch, exclude=verdict.failed)
        if metrics.get("acceptance_length") is None and spec_counters.get("acceptance_length"):
            metrics["acceptance_length"] = spec_counters["acceptance_length"]
        payload["metrics"] = metrics
    timing["validate_s"] = round(time.perf_counter() - began, 4)
    payload["timing"] = timing
    return verdict, payload


def _warmup(plan: Plan, proc: Server, client: httpx.Client,
            adapter: Adapter) -> dict[str, Any]:
    """Requests sent once per server before its first cell, excluded from every statistic."""
    params = plan.params
    if params.warmup_requests == 0:
        return {"requests": 0}
    prompts = build_prompts(params.workloads[0], n=params.warmup_requests,
                            tokens=min(params.contexts), seed=params.seed, salt="warmup",
                            tokenize=lambda text: adapter.tokenize(client, text))
    dispatch = dispatch_cell(adapter, proc.base_url, [p.tokens for p in prompts],
                             warmup=len(prompts), concurrency=1,
                             max_tokens=params.warmup_output_tokens or params.output_tokens,
                             timeouts=params.request_timeouts(), headers=proc.headers)
    errors = [r.error for r in dispatch.records if r.error]
    return {"requests": len(prompts), "seconds": round(dispatch.window_start, 2), "errors": errors}


def _write_cell(run: RunDir, cell: CellSpec, server: ServerConfig, argv: list[str],
                cell_fingerprint: str, verdict: Verdict, payload: dict[str, Any],
                proc: Server | None) -> None:
    run.archive_cell(cell.cell_id)
    data = {
        "schema_version": SCHEMA_VERSION, "run_id": run.run_id, "cell_id": cell.cell_id,
        "fingerprint": cell_fingerprint, "spec": asdict(cell),
        "server": {"label": server.label, "argv": redact(argv)},
        "verdict": {"status": verdict.status, "reasons": list(verdict.reasons)},
        "metrics": None, "ended": utc_now(), **payload,
    }
    if verdict.status == "crashed" and proc is not None:
        data["returncode"] = proc.returncode
        data["log_excerpt"] = proc.log_tail(40)
    run.write_cell(cell.cell_id, data)


def _store_server(run: RunDir, label: str, record: dict[str, Any]) -> None:
    servers = run.manifest().get("servers", {})
    servers[label] = record
    run.update_manifest(servers=servers)


def _progress(total: int, *, initial: int, enabled: bool) -> Any:
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=initial, desc="cells", unit="cell", disable=not enabled)
