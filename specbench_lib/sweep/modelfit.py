"""The models against the plan, before any server starts (the doctor's ``model fit`` check):
the plan's context against the context the engine derives from the target's and every
drafter's ``config.json`` (``max_position_embeddings``, rope scaling), and each DFlash
drafter's block as the argv sets it against the block it was trained at."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from ..core.errors import PreflightError
from ..model.plan import Plan
from ..servers.engines import Adapter, ServerInfo
from ..servers.engines.modelconfig import (
    DEFAULT_BLOCK,
    derived_context,
    read_config,
    rope_text,
    trained_block,
)


def model_fit(plan: Plan, adapter: Adapter, argvs: Mapping[str, list[str]]) -> tuple[str, str]:
    """The check's detail and warning; a :class:`PreflightError` naming the model, both
    contexts and the fix when a server would refuse to start."""
    engine = plan.params.engine
    env = {**os.environ, **engine.env}
    override = getattr(adapter, "context_override_env", None)
    drafts = {d for d in (engine.draft_model, *(s.draft_model for s in plan.servers)) if d}
    models = [("target", engine.model), *(("draft", d) for d in sorted(drafts))]
    problems, warnings, read = [], [], []
    for role, path in models:
        config = read_config(path)
        if config is None:
            continue
        limit = derived_context(config, path) if override else None
        read.append(f"{role} {Path(str(path)).name}: {limit or '?'} positions ({rope_text(config)})")
        if limit is None or engine.context <= limit:
            continue
        said = (f"engine.context {engine.context} is more than the {limit} tokens the engine "
                f"derives from the {role} model's config ({path}: {rope_text(config)})")
        if env.get(str(override), "").lower() in ("1", "true"):
            warnings.append(f"{said}; {override} lets it start: rope scaling must cover it "
                            f"(e.g. YaRN in --json-model-override-args)")
        else:
            problems.append(f"{said}: the server refuses to start; set engine.env: "
                            f"{{{override}: \"1\"}} (with rope scaling that covers the context)")
    if problems:
        raise PreflightError("; ".join(problems), what="model fit")
    warnings += block_warnings(plan, adapter, argvs)
    return "; ".join(read) or "no config.json to read (a GGUF file or a hub id)", "; ".join(warnings)


def seed_pairing(plan: Plan, adapter: Adapter, argvs: Mapping[str, list[str]]) -> tuple[str, str]:
    """Whether the plan's sampled cells will pair their draws across configs (the servers draw
    by a request's seed: :meth:`pairs_seeds`), as the check's detail and warning."""
    if all(t == 0 for t in plan.params.temperatures):
        return "greedy only: nothing to pair", ""
    unpaired = [s.label for s in plan.servers if s.attach is None and not adapter.pairs_seeds(
        ServerInfo(context_per_request=1), argvs.get(s.label, []))]
    if not unpaired:
        return "sampled cells paired: every server draws by a request's seed", ""
    return (f"sampled cells unpaired on {len(unpaired)} servers", (
        f"{', '.join(unpaired)} ignore a request's seed (SGLang without "
        f"--enable-deterministic-inference): their sampled cells are compared unpaired"))


def config_refusals(plan: Plan, adapter: Adapter, argvs: Mapping[str, list[str]]) -> str:
    """Every config the engine would run unfairly as launched, refused before any server starts
    (:meth:`config_refusal`: a tree verified without its mask), one :class:`PreflightError`
    naming each config and the fix."""
    refused = [why for s in plan.servers if s.attach is None
               if (why := adapter.config_refusal(s, argvs.get(s.label, []))) is not None]
    if refused:
        raise PreflightError("; ".join(refused), what="configs")
    return "no config refused (a tree config runs on a backend that applies its tree mask)"


def block_warnings(plan: Plan, adapter: Adapter, argvs: Mapping[str, list[str]]) -> list[str]:
    """A warning per server whose DFlash drafter runs at another block than it was trained
    at (DB-Guo's DDTree fork sets the block from the tree budget)."""
    engine, found = plan.params.engine, []
    for server in plan.servers:
        block = adapter.drafter_block(argvs.get(server.label, []))
        if block is None:
            continue
        draft = server.draft_model or engine.draft_model
        trained = trained_block(read_config(draft)) or DEFAULT_BLOCK
        if block != trained:
            found.append(f"{server.label}: the drafter runs at block {block}, trained at "
                         f"{trained} ({draft}): its budget changes the drafter, not only the "
                         f"tree (docs/engines.md, Budgets)")
    return found
