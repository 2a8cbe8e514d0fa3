"""Cell fingerprints: a cell is read into a table only while everything that decides what it
measured is unchanged.

A fingerprint covers, per cell: the cell spec (its output tokens, temperature and load point
too); the measured params (requests, seed, timeouts, warmup, top-p and top-k…; an open-loop
cell's arrival process) and its workload (its template and stop too); one request's body as the
adapter builds it; the server argv (port normalised) or, for an attached server, its URL and
effective settings; the engine's identity (binary sha256, or the Python package, version and
fork commit); the model's fingerprint; and the hash of the code that builds, sends and times
requests. Changing any one of them makes the cell stale.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from typing import Any

from .plan import Plan

# analysis settings and plan shape, not what a cell measures (host: how the host is watched)
# retries: how often a cell the client host spoiled is measured again, not what a cell measures
# placement: where a config ran is not what it measured (a placed cell is the same measurement
# as a sequential one); who shared its node is recorded in the cell (CellFacts.placement)
# output tokens, temperatures and load points are axes: each cell's spec carries its own (and
# an open-loop cell its arrival process); thresholds: the cell rules' own thresholds
# (analysis/rules/), stored in each cell and applied on read, like host's
_NOT_MEASURED = {"phase", "description", "engine", "configs", "workloads", "contexts",
                 "concurrency", "known_bad", "unstable_cv", "host", "slo", "output_tokens",
                 "request_rate", "placement", "retries", "temperature",
                 "thresholds", "groups"}
# keys added after cells were first fingerprinted, left out at their default (off) values, so
# a greedy raw plan's cells keep the fingerprints they had
_NEW_DEFAULTS = {"temperature": 0.0, "temperatures": 1, "top_p": 1.0, "top_k": 0,
                 "template": "raw", "chat_template_kwargs": {}, "vocab_size": None,
                 "special_ids": [], "stages": []}  # stages: a stage's params have none


def _lean(found: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in found.items() if k not in _NEW_DEFAULTS or v != _NEW_DEFAULTS[k]}


@dataclass(frozen=True)
class Components:
    """The plan-wide parts of every cell's fingerprint."""

    engine: dict[str, Any]  # EngineIdentity.to_dict()
    model: str  # the model file's fingerprint
    code: str  # provenance.measurement_code_hash()
    request: dict[str, Any]  # the body of one generation request

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def digest(*parts: Any) -> str:
    blob = json.dumps(parts, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:20]


def cell_fingerprints(plan: Plan, argv: dict[str, list[str]], components: Components,
                      attached: dict[str, dict[str, Any]] | None = None, *,
                      isolation: dict[str, str] | None = None) -> dict[str, str]:
    """The fingerprint each cell of ``plan`` must carry to be read into a table.

    Args:
        argv: the launch argv per server label (empty for an attached config).
        components: engine identity, model, measurement code and request body.
        attached: per attached server label, its URL and effective settings (from preflight).
        isolation: per server label, its planned isolation mode (:mod:`~specbench_lib.sweep.lifetimes`:
            one server for all its cells, or a restart or flush before each) when it is known.
    """
    params = plan.params.model_dump(mode="json")
    measured = _lean({k: v for k, v in params.items() if k not in _NOT_MEASURED})
    measured["prefix_cache"] = plan.params.engine.prefix_cache
    if plan.params.engine.env:  # a server's environment changes what it runs
        measured["engine_env"] = dict(plan.params.engine.env)
    workloads = {w["name"]: w for w in params["workloads"]}
    port = str(plan.params.engine.port)
    prints = {}
    for cell in plan.cells:
        server = (attached or {}).get(cell.config) or ["{port}" if a == port else a
                                                       for a in argv[cell.config]]
        arrival = ({"arrival": plan.params.request_rate.arrival}
                   if plan.params.request_rate is not None and cell.load else {})
        kept = {"isolation": isolation[cell.config]} if isolation else {}
        spec = {k: v for k, v in asdict(cell).items() if k != "turn" or v != 1}  # added later
        prints[cell.cell_id] = digest(_lean(spec), {**measured, **arrival, **kept},
                                      _lean(workloads[cell.workload]), server,
                                      components.to_dict())
    return prints
