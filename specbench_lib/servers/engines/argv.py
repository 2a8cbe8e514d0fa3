"""Argv templates: ``{name}`` placeholders filled literally, for any engine and any fork.

A template is a list of strings, never a shell line. ``{budget}``, ``{budget+1}`` and
``{budget-1}`` take integer arithmetic; an element that is exactly ``{spec_args}`` expands to the
config's rendered speculative flags (zero or more elements). Inserted values are not scanned
again, so a value holding ``$(...)``, ``;`` or even ``{port}`` stays exactly as given.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from ...core.errors import ParamsError
from ...model.cellspec import ServerConfig
from ...model.sections import EngineParams
from .base import Launch
from .modelconfig import DEFAULT_BLOCK, read_config, trained_block

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)(?:([+-])(\d+))?\}")
Value = int | float | str | None


def render(template: Sequence[str], values: Mapping[str, Value], *, key: str,
           lists: Mapping[str, Sequence[str]] | None = None) -> list[str]:
    """Fill a template's placeholders; ``lists`` are whole-element expansions such as ``spec_args``.

    Args:
        template: the argv elements, e.g. ``["--speculative-num-draft-tokens", "{budget+1}"]``.
        values: placeholder values; a None value may not be used (the config has none).
        key: the params key the template came from, named in errors.
        lists: names whose element ``{name}`` is replaced by several elements.

    >>> render(["-n", "{budget+1}", "{model}"], {"budget": 15, "model": "/m; rm"}, key="k")
    ['-n', '16', '/m; rm']
    """
    out: list[str] = []
    lists = lists or {}
    for element in template:
        whole = _PLACEHOLDER.fullmatch(element)
        if whole and whole.group(2) is None and whole.group(1) in lists:
            out.extend(lists[whole.group(1)])
            continue
        out.append(_PLACEHOLDER.sub(functools.partial(_fill, values=values, key=key,
                                                      element=element), element))
    return out


def _fill(match: re.Match[str], values: Mapping[str, Value], key: str, element: str) -> str:
    name, sign, number = match.groups()
    if name not in values:
        raise ParamsError(f"unknown placeholder {{{name}}} in {element!r}; known: "
                          f"{', '.join(sorted(values))}", key=key, value=element)
    value = values[name]
    if value is None:
        raise ParamsError(f"placeholder {{{name}}} in {element!r} has no value for this config "
                          f"(a baseline has no budget: put budget flags in spec_args)",
                          key=key, value=element)
    if sign is None:
        return str(value)
    if not isinstance(value, int) or isinstance(value, bool):
        raise ParamsError(f"{{{name}{sign}{number}}} needs an integer, {name} is {value!r}",
                          key=key, value=element)
    return str(value + int(number) if sign == "+" else value - int(number))


def template_values(server: ServerConfig, engine: EngineParams, *, model: Path, binary: Path,
                    parallel: int) -> dict[str, Value]:
    """The placeholder values of one server start (a config's options are placeholders too)."""
    values: dict[str, Value] = dict(server.options)
    values.update(
        port=engine.port, host=engine.host, model=str(model), binary=str(binary),
        budget=server.budget, tp=engine.tp, context=engine.context, parallel=parallel,
        draft_model=server.draft_model or engine.draft_model,
    )
    if "block" not in values:  # a DFlash drafter's trained block (option block overrides it)
        draft = values["draft_model"]
        values["block"] = trained_block(read_config(None if draft is None else str(draft))) \
            or DEFAULT_BLOCK
    return values


def spec_override(server: ServerConfig, engine: EngineParams,
                  values: Mapping[str, Value]) -> list[str] | None:
    """The config's ``spec_args`` or the engine's template for its method, rendered; else None."""
    if server.spec_args:
        return render(server.spec_args, values, key=f"configs.{server.name}.spec_args")
    template = engine.spec_templates.get(server.method)
    if template is not None and server.method != "auto":
        return render(template, values, key=f"engine.spec_templates.{server.method}")
    return None


def whole_argv(server: ServerConfig, engine: EngineParams, values: Mapping[str, Value],
               spec_args: Sequence[str]) -> list[str] | None:
    """A config's ``argv`` or the engine's ``argv_template`` rendered with extra args; else None."""
    if server.argv:
        template, key = server.argv, f"configs.{server.name}.argv"
    elif engine.argv_template:
        template, key = engine.argv_template, "engine.argv_template"
    else:
        return None
    argv = render(template, values, key=key, lists={"spec_args": spec_args})
    if "{spec_args}" not in template and spec_args:
        argv += list(spec_args)
    return [*argv, *engine.extra_args, *server.extra_args]


def template_launch(server: ServerConfig, engine: EngineParams, *, model: Path, binary: Path,
                    parallel: int, health_path: str,
                    builtin: Callable[[], list[str]] | None = None) -> Launch | None:
    """The launch of a config whose argv comes from a template, or None when it has none.

    The speculative flags are the config's or engine's template, else ``builtin()`` (the
    adapter's own mapping, not used for kind ``template``); with neither, a speculative config
    whose argv never mentions its budget is refused, since it would silently start the same
    server as the baseline.
    """
    values = template_values(server, engine, model=model, binary=binary, parallel=parallel)
    spec = spec_override(server, engine, values)
    if engine.kind == "template":
        builtin = None  # a template server speaks an engine's API, not necessarily its flags
    if spec is None and server.method != "auto" and builtin is not None:
        spec = builtin()
    argv = whole_argv(server, engine, values, spec or [])
    if argv is None:
        return None
    template = server.argv or engine.argv_template
    if server.method != "auto" and not spec and not any("{budget" in t for t in template):
        raise ParamsError(f"config {server.name!r} (method {server.method}) would start the same "
                          f"server as the baseline: give it spec_args, a spec_templates entry for "
                          f"its method, or use {{budget}} in its argv", key=f"configs.{server.name}")
    return Launch(argv, f"http://{engine.host}:{engine.port}", health_path)
