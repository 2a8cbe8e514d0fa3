"""What an SGLang server runs, read from its argv and ``/server_info``: the speculative flags
against their resolved fields, the attention backend a tree config is verified with, the
scheduler a speculative config forces, and the KV pool a cell's concurrency must fit in.

Sources, with file and line, in tests/PROTOCOLS.md ("DFlash and DDTree on SGLang").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ...core.errors import ParamsError, SpecMismatch, TreeMaskIgnored
from ...model.cellspec import ServerConfig
from .base import ServerInfo, opt_int

# the backends whose target-verify pass applies the tree's ``spec_info.custom_mask`` with
# top-k 1: FlashInfer and Triton (the fork's DDTree test runs flashinfer, PR #29907 triton);
# FA3 applies it only for top-k > 1 (flashattention_backend.py:490-515), and DFLASH forces 1
TREE_MASK_BACKENDS = ("flashinfer", "triton")
_BACKEND_FIELDS = ("attention_backend", "prefill_attention_backend", "decode_attention_backend")
# option ``scheduler: dflash``: the scheduler DFLASH forces on the fork (speculative_hook.py:
# 236-246: overlap off, 48 running requests), for a baseline that differs from dflash only in
# its drafting
SCHEDULERS = {"dflash": ("--disable-overlap-schedule", "--max-running-requests", "48")}
# resolved names of aliased algorithms (speculative/spec_info.py: NEXTN is EAGLE)
_ALIASES = {"NEXTN": "EAGLE"}


def spec_args(argv: Sequence[str]) -> list[tuple[str, str | bool]]:
    """The ``--speculative-*`` flags of an argv with their values (True for a bare switch)."""
    return [(flag, value) for flag, value in flags(argv) if flag.startswith("--speculative-")]


def flags(argv: Sequence[str]) -> list[tuple[str, str | bool]]:
    """Every ``--flag`` of an argv with its value (True for a bare switch)."""
    found: list[tuple[str, str | bool]] = []
    for i, arg in enumerate(argv):
        if arg.startswith("--"):
            flag, eq, value = arg.partition("=")
            nxt = argv[i + 1] if i + 1 < len(argv) else None
            if eq:
                found.append((flag, value))
            elif nxt is not None and not nxt.startswith("--"):
                found.append((flag, nxt))
            else:
                found.append((flag, True))
    return found


def is_tree(argv: Sequence[str]) -> bool:
    """Whether ``argv`` verifies a tree: PR #29907's ``DDTREE`` or the fork's DFLASH with
    ``--speculative-dflash-enable-ddtree``."""
    asked = dict(spec_args(argv))
    algorithm = str(asked.get("--speculative-algorithm", "")).upper()
    return algorithm == "DDTREE" or asked.get("--speculative-dflash-enable-ddtree") is True


def tree_mask_refusal(label: str, argv: Sequence[str]) -> str | None:
    """Why a tree config cannot be verified with its tree mask as launched (None: it can).

    Without ``--attention-backend`` SGLang picks FA3 on Hopper for top-k 1 (the fork's
    server_args.py:2775-2780), whose verify pass ignores the mask: every node would attend to
    every earlier node of the flattened tree, acceptance is wrong and greedy output lossy."""
    if not is_tree(argv):
        return None
    chosen = {k: v for k, v in flags(argv) if k == "--attention-backend"}.get("--attention-backend")
    if isinstance(chosen, str) and chosen in TREE_MASK_BACKENDS:
        return None
    said = f"runs on {chosen!r}" if isinstance(chosen, str) else (
        "names no --attention-backend (SGLang then picks FA3 on Hopper for top-k 1)")
    return (f"{label}: a tree config that {said}, whose verify pass ignores the tree mask: set "
            f"engine.attention_backend to {' or '.join(TREE_MASK_BACKENDS)}")


def check_tree_mask(server: ServerConfig, argv: Sequence[str], raw: Mapping[str, Any]) -> None:
    """:class:`TreeMaskIgnored` when a started tree server resolved a backend that ignores
    the tree mask (its ``/server_info``: ``attention_backend`` and the prefill and decode ones)."""
    tree = (str(raw.get("speculative_algorithm") or "").upper() == "DDTREE"
            or raw.get("speculative_dflash_enable_ddtree") is True or is_tree(argv))
    if not tree:
        return
    resolved = {k: raw.get(k) for k in _BACKEND_FIELDS if raw.get(k)}
    wrong = {k: v for k, v in resolved.items() if v not in TREE_MASK_BACKENDS}
    if wrong:  # a server that reports no backend: the argv's check before start stands
        said = ", ".join(f"{k} {v!r}" for k, v in wrong.items())
        raise TreeMaskIgnored(
            f"config {server.label!r} verifies a tree, but the server resolved {said}, whose "
            f"verify pass ignores the tree mask (acceptance wrong, greedy output lossy): set "
            f"engine.attention_backend to {' or '.join(TREE_MASK_BACKENDS)}",
            url="/server_info", status=200)


def scheduler(raw: Mapping[str, Any]) -> dict[str, Any]:
    """The scheduler settings a speculative algorithm may force (DFLASH on the fork: overlap
    off and 48 running requests, speculative_hook.py:236-246), as the server resolved them."""
    return {k: raw[k] for k in ("disable_overlap_schedule", "max_running_requests", "page_size")
            if k in raw}


def scheduler_flags(server: ServerConfig) -> list[str]:
    """The flags of option ``scheduler`` (:data:`SCHEDULERS`; none without it)."""
    chosen = server.options.get("scheduler")
    if chosen is None:
        return []
    if chosen not in SCHEDULERS:
        raise ParamsError(f"option scheduler of config {server.name!r} is one of "
                          f"{sorted(SCHEDULERS)}, not {chosen!r}",
                          key=f"configs.{server.name}.options.scheduler", value=chosen)
    return list(SCHEDULERS[str(chosen)])


def kv_tokens(info: ServerInfo) -> int | None:
    """The tokens the server's KV pool holds (``max_total_num_tokens``; None: not reported)."""
    raw = info.raw
    states = raw.get("internal_states")
    state = states[0] if isinstance(states, list) and states and isinstance(states[0], dict) else {}
    found = opt_int(raw.get("max_total_num_tokens")) or opt_int(state.get("max_total_num_tokens"))
    return found if found and found > 0 else None


def same(asked: str | bool, got: Any) -> bool:
    """An asked flag value against the resolved field's."""
    if isinstance(asked, bool):
        return got is True
    if isinstance(got, str):
        return _ALIASES.get(asked.upper(), asked.upper()) == _ALIASES.get(got.upper(), got.upper())
    return str(asked) == str(got)


def mismatch(server: ServerConfig, wrong: list[str]) -> None:
    if wrong:
        raise SpecMismatch(f"config {server.label!r} asked for other speculative settings than "
                           f"the server runs: {'; '.join(wrong)}", url="/server_info", status=200)


SPEC_MAX_RUNNING = 48  # speculation's running requests unless --max-running-requests is given


def running_cap(method: str, argv: Sequence[str]) -> int | None:
    """The most requests a server runs at once: ``--max-running-requests`` where the argv gives
    it, else 48 for a speculative config (0.5.23 ``arg_groups/speculative_hook.py:438-446``,
    DFLASH's resolution; EAGLE's and NGRAM's alike), else None (its KV pool's bound)."""
    args = list(argv)
    if "--max-running-requests" in args[:-1]:
        given = args[args.index("--max-running-requests") + 1]
        return int(given) if given.isdigit() else None
    return None if method == "auto" else SPEC_MAX_RUNNING
