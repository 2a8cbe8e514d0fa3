"""The orchestration: for each server config, start it, run its cells, judge, store, stop."""

from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import httpx
import yaml

from . import notebook_link
from .dispatch import dispatch_cell
from .engines import Adapter, get_adapter
from .errors import EngineError, ServerError
from .metrics import cell_metrics
from .params import CellSpec, Plan, ServerConfig
from .preflight import check_port_free, engine_files
from .results import SweepResult
from .server import ServerProcess
from .store import (
    SCHEMA_VERSION,
    RunDir,
    environment_info,
    file_identity,
    fingerprint,
    new_run_id,
    utc_now,
)
from .validate import Verdict, context_guard, judge_cell
from .workload import build_prompts, documents


def run_sweep(plan: Plan, *, run_id: str | None = None, outputs: Path | None = None,
              progress: bool = True) -> SweepResult:
    """Run every cell of ``plan`` in a new run directory and return its result.

    Args:
        plan: from :func:`specbench_lib.load_plan`.
        run_id: the run directory's name; a new ``<UTC time>_<phase>_<id>`` when empty.
        outputs: the outputs folder (default: ``outputs/`` of the project or $SPECBENCH_OUTPUTS).
        progress: show a progress bar over cells.
    """
    params = plan.params
    adapter = get_adapter(params.engine.kind)
    binary, model = engine_files(params.engine)
    check_port_free(params.engine.host, params.engine.port)
    for workload in params.workloads:
        documents(workload)
    run = RunDir.create(run_id or new_run_id(params.phase), root=outputs)
    started = time.monotonic()
    engine = {"kind": adapter.name, "binary": str(binary), "version": adapter.version(binary)}
    model_id = file_identity(model)
    (run.path / "params.yaml").write_text(yaml.safe_dump(params.model_dump(mode="json"),
                                                         sort_keys=False))
    run.update_manifest(
        schema_version=SCHEMA_VERSION, run_id=run.run_id, phase=params.phase,
        status="running", started=utc_now(), ended=None, params_file=str(plan.source),
        budget=plan.budget, params=params.model_dump(mode="json"), engine=engine, model=model_id,
        environment=environment_info(), planned_cells=len(plan.cells), servers={},
        notebook=notebook_link.adopt(run.path),
    )
    bar = _progress(len(plan.cells), enabled=progress)
    status = "failed"
    try:
        for server in plan.servers:
            _run_server(plan, server, run, adapter, binary, model, engine, model_id, bar)
        status = "complete"
    except KeyboardInterrupt:
        status = "interrupted"
        raise
    finally:
        bar.close()
        result = SweepResult(run.path)
        result.write_results_csv()
        run.update_manifest(status=status, ended=utc_now(),
                            elapsed_s=round(time.monotonic() - started, 1),
                            verdict_counts=result.counts())
        run.release()
        counts = ", ".join(f"{k} {v}" for k, v in result.counts().items())
        print(f"{run.run_id}: {status}, {counts} in {time.monotonic() - started:.0f} s\n"
              f"run directory: {run.path}", flush=True)
    return result


def _run_server(plan: Plan, server: ServerConfig, run: RunDir, adapter: Adapter, binary: Path,
                model: Path, engine: dict[str, Any], model_id: dict[str, Any], bar: Any) -> None:
    params = plan.params
    launch = adapter.launch(server, params.engine, parallel=max(params.concurrency), model=model,
                            binary=binary)
    cells = plan.cells_for(server)
    base_fp = (launch.argv[1:], engine["version"], model_id["fingerprint"], SCHEMA_VERSION)
    proc = ServerProcess(name=server.label, argv=launch.argv, base_url=launch.base_url,
                         health_path=launch.health_path, log_path=run.logs_dir / f"{server.label}.log",
                         signatures=adapter.crash_signatures)
    record: dict[str, Any] = {"argv": launch.argv, "log": str(proc.log_path.relative_to(run.path))}
    try:
        proc.start()
        record["pid"] = proc.pid
        record["ready_s"] = round(proc.wait_ready(params.engine.ready_timeout_s), 2)
        with httpx.Client(base_url=launch.base_url, timeout=params.request_timeout_s) as client:
            info = adapter.server_info(client)
            record["context_per_request"] = info.context_per_request
            record["effective"] = info.raw
            record["warmup"] = _warmup(plan, proc, client, adapter)
            _store_server(run, server.label, record)
            dead: Verdict | None = None
            for cell in cells:
                if dead is None:
                    verdict, payload = _run_cell(plan, server, cell, proc, client, adapter,
                                                 info.context_per_request)
                    if verdict.status == "crashed":
                        dead = verdict
                else:
                    verdict = Verdict("crashed", ("server_died_earlier: the server crashed in an "
                                                  "earlier cell of this config", *dead.reasons))
                    payload = {}
                _write_cell(run, cell, server, launch.argv, base_fp, verdict, payload, proc)
                bar.update(1)
    except (ServerError, EngineError, httpx.TransportError) as exc:
        record["error"] = f"{type(exc).__name__}: {exc}"
        _store_server(run, server.label, record)
        done = {p.stem for p in run.cells_dir.glob("*.json")}
        verdict = Verdict("crashed", (f"server_failed: {exc}",))
        for cell in cells:
            if cell.cell_id not in done:
                _write_cell(run, cell, server, launch.argv, base_fp, verdict, {}, proc)
                bar.update(1)
    finally:
        proc.stop()


def _run_cell(plan: Plan, server: ServerConfig, cell: CellSpec, proc: ServerProcess,
              client: httpx.Client, adapter: Adapter, context: int) -> tuple[Verdict, dict[str, Any]]:
    params = plan.params
    refused = context_guard(prompt_tokens=cell.context, output_tokens=params.output_tokens,
                            reserve=adapter.speculative_reserve(server), context=context)
    if refused is not None:
        return refused, {}
    workload = next(w for w in params.workloads if w.name == cell.workload)
    prompts = build_prompts(workload, n=params.requests_per_cell, tokens=cell.context,
                            seed=params.seed, tokenize=lambda text: adapter.tokenize(client, text))
    offset = proc.log_size()
    started = utc_now()
    dispatch = dispatch_cell(adapter, proc.base_url, [p.tokens for p in prompts], warmup=0,
                             concurrency=cell.concurrency, max_tokens=params.output_tokens,
                             timeout_s=params.request_timeout_s)
    verdict = judge_cell(dispatch.records, server_alive=proc.healthy(),
                         crash_line=proc.crash_signature(offset))
    payload: dict[str, Any] = {
        "started": started,
        "prompts": [{"sha": p.sha, "tokens": len(p.tokens), "sources": p.sources} for p in prompts],
        "requests": [r.to_dict() for r in dispatch.records],
    }
    if verdict.ok:
        payload["metrics"] = cell_metrics(dispatch)
    return verdict, payload


def _warmup(plan: Plan, proc: ServerProcess, client: httpx.Client,
            adapter: Adapter) -> dict[str, Any]:
    """Requests sent once per server before its first cell, excluded from every statistic."""
    params = plan.params
    if params.warmup_requests == 0:
        return {"requests": 0}
    prompts = build_prompts(params.workloads[0], n=params.warmup_requests,
                            tokens=min(params.contexts), seed=params.seed, salt="warmup",
                            tokenize=lambda text: adapter.tokenize(client, text))
    dispatch = dispatch_cell(adapter, proc.base_url, [p.tokens for p in prompts],
                             warmup=len(prompts), concurrency=1, max_tokens=params.output_tokens,
                             timeout_s=params.request_timeout_s)
    errors = [r.error for r in dispatch.records if r.error]
    return {"requests": len(prompts), "seconds": round(dispatch.window_start, 2), "errors": errors}


def _write_cell(run: RunDir, cell: CellSpec, server: ServerConfig, argv: list[str],
                base_fp: tuple[Any, ...], verdict: Verdict, payload: dict[str, Any],
                proc: ServerProcess) -> None:
    data = {
        "schema_version": SCHEMA_VERSION, "run_id": run.run_id, "cell_id": cell.cell_id,
        "fingerprint": fingerprint(asdict(cell), *base_fp), "spec": asdict(cell),
        "server": {"label": server.label, "argv": argv},
        "verdict": {"status": verdict.status, "reasons": list(verdict.reasons)},
        "metrics": None, "ended": utc_now(), **payload,
    }
    if verdict.status == "crashed":
        data["log_excerpt"] = proc.log_tail(40)
    run.write_cell(cell.cell_id, data)


def _store_server(run: RunDir, label: str, record: dict[str, Any]) -> None:
    servers = run.manifest().get("servers", {})
    servers[label] = record
    run.update_manifest(servers=servers)


def _progress(total: int, *, enabled: bool) -> Any:
    from tqdm.auto import tqdm

    return tqdm(total=total, desc="cells", unit="cell", disable=not enabled)
