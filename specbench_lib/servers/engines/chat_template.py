"""A model's own chat template applied here, for an engine without an endpoint that returns a
templated prompt (SGLang): the ``chat_template`` of the model's ``tokenizer_config.json`` (or
its ``chat_template.jinja``), rendered with jinja2 as Hugging Face ``transformers`` renders it
(``apply_chat_template``: a sandboxed environment with ``trim_blocks`` and ``lstrip_blocks``,
the loop-controls extension, ``raise_exception`` and the special tokens of the config)."""

from __future__ import annotations

import importlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...core.errors import PreflightError


def template_of(folder: str | Path | None) -> tuple[str, dict[str, Any]]:
    """The chat template of the model at ``folder`` and its tokenizer config (for its special
    tokens); a :class:`PreflightError` when the model has none."""
    if folder is None:
        raise PreflightError("a chat template needs the model's folder (engine.model, or "
                             "engine.tokenizer naming the folder with its tokenizer_config.json)",
                             what="template")
    given = Path(folder).expanduser()
    base = given.parent if given.is_file() else given
    config_file = base / "tokenizer_config.json"
    config: dict[str, Any] = {}
    if config_file.is_file():
        try:
            config = json.loads(config_file.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise PreflightError(f"cannot read {config_file}: {exc}", what="template",
                                 path=config_file) from None
    found = config.get("chat_template") if isinstance(config, dict) else None
    if isinstance(found, list):  # named templates: the default one
        found = next((t.get("template") for t in found
                      if isinstance(t, dict) and t.get("name") == "default"), None)
    jinja_file = base / "chat_template.jinja"
    if not isinstance(found, str) and jinja_file.is_file():
        found = jinja_file.read_text(encoding="utf-8")
    if not isinstance(found, str):
        raise PreflightError(f"the model at {base} has no chat template (no chat_template in "
                             f"tokenizer_config.json, no chat_template.jinja): use template: raw",
                             what="template", path=base)
    return found, config


def _token(config: dict[str, Any], key: str) -> str:
    value = config.get(key)
    if isinstance(value, dict):  # an AddedToken written out
        value = value.get("content")
    return value if isinstance(value, str) else ""


def render_local(folder: str | Path | None, messages: list[dict[str, str]],
                 options: Mapping[str, Any] | None = None) -> str:
    """``messages`` in the model's chat template, the generation prompt added; ``options`` are
    the template's own variables (a workload's ``chat_template_kwargs``, e.g.
    ``enable_thinking``), given as ``transformers`` gives its ``**kwargs``."""
    template, config = template_of(folder)
    try:
        sandbox = importlib.import_module("jinja2.sandbox")
    except ImportError:
        raise PreflightError("applying a chat template here needs jinja2: pip install jinja2",
                             what="template") from None

    def raise_exception(message: str) -> None:
        raise PreflightError(f"the model's chat template refused the messages: {message}",
                             what="template")

    env = sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                                extensions=["jinja2.ext.loopcontrols"])
    env.globals["raise_exception"] = raise_exception
    try:
        return str(env.from_string(template).render(
            messages=messages, add_generation_prompt=True,
            bos_token=_token(config, "bos_token"), eos_token=_token(config, "eos_token"),
            **dict(options or {})))
    except PreflightError:
        raise
    except Exception as exc:  # jinja2's own errors: a template that does not render
        raise PreflightError(f"the model's chat template does not render: {exc}",
                             what="template") from None


# the conversations a sweep sends (a question; turn 2: a question, its answer, the next one)
SAMPLES = ([{"role": "user", "content": "What is 2 + 2?"}],
           [{"role": "user", "content": "What is 2 + 2?"},
            {"role": "assistant", "content": "4."},
            {"role": "user", "content": "And 3 + 3?"}])


def check_renders(folder: str | Path | None) -> str:
    """Render the model's template on the conversations a sweep sends (:data:`SAMPLES`), before
    any server starts (the doctor, preflight): a template with a syntax error, or one that calls
    ``raise_exception`` on them, is a :class:`PreflightError` naming the folder."""
    for messages in SAMPLES:
        try:
            render_local(folder, messages)
        except PreflightError as exc:
            if "no chat template" in str(exc) or "needs" in str(exc):
                raise
            roles = ", ".join(m["role"] for m in messages)
            raise PreflightError(f"{exc} (the model's template at {folder}, on a conversation "
                                 f"of {roles}); fix the template or use template: raw",
                                 what="template", path=Path(str(folder))) from None
    return f"the model's own, from {folder}, rendered here (jinja2) on {len(SAMPLES)} conversations"
