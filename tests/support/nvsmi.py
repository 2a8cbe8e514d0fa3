"""A stand-in ``nvidia-smi`` the tests control: put its folder first on PATH. It answers
``-L``, ``--query-gpu=<fields>`` and ``--query-compute-apps=<fields>`` with ``--format=csv,noheader,
nounits`` as nvidia-smi does (one row a GPU or process, the fields in the order asked, ``[N/A]``
for one it lacks), from a JSON file it reads at every call, so a test can change what the GPUs
do mid-run (``set``): ``{"gpus": [{"index": 0, "uuid": "GPU-a", "power.draw": 250, ...}],
"apps": [{"pid": 1, "gpu_uuid": "GPU-a", "process_name": "x", "used_memory": 512}]}``."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

SCRIPT = """#!{python}
import json, sys
state = json.load(open({state!r}))
if state.get("fail"):
    sys.exit(9)
with open({calls!r}, "a") as fh:
    fh.write(" ".join(sys.argv[1:]) + "\\n")
if sys.argv[1:] == ["-L"]:
    for row in state["gpus"]:
        print(f"GPU {{row['index']}}: Stand-in GPU (UUID: {{row['uuid']}})")
for arg in sys.argv[1:]:
    for flag, rows in (("--query-gpu=", state["gpus"]), ("--query-compute-apps=", state["apps"])):
        if arg.startswith(flag):
            fields = arg[len(flag):].split(",")
            for row in rows:
                print(", ".join(str(row.get(f, "[N/A]")) for f in fields))
"""


def gpu(index: int, *, power: float, util: float, memory: float = 1000.0, temp: float = 60.0,
        sm: float = 1800.0) -> dict[str, Any]:
    """One GPU's row, by nvidia-smi's field names."""
    return {"index": index, "uuid": f"GPU-{index}", "utilization.gpu": util,
            "memory.used": memory, "power.draw": power, "temperature.gpu": temp, "clocks.sm": sm}


def app(pid: int, index: int, name: str, memory: float) -> dict[str, Any]:
    return {"pid": pid, "gpu_uuid": f"GPU-{index}", "process_name": name, "used_memory": memory}


class StandIn:
    """The stand-in in ``folder`` (``folder`` goes first on PATH); ``calls`` lists its argv."""

    def __init__(self, folder: Path, gpus: list[dict[str, Any]],
                 apps: list[dict[str, Any]] | None = None) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.folder, self.state, self.calls = folder, folder / "state.json", folder / "calls.log"
        self.set(gpus=gpus, apps=apps or [])
        script = folder / "nvidia-smi"
        script.write_text(SCRIPT.format(python=sys.executable, state=str(self.state),
                                        calls=str(self.calls)))
        script.chmod(0o755)

    def set(self, **state: Any) -> None:
        current = json.loads(self.state.read_text()) if self.state.exists() else {}
        tmp = self.state.with_suffix(".tmp")
        tmp.write_text(json.dumps({**current, **state}))
        tmp.replace(self.state)  # atomically: a call mid-write reads the old or the new

    def called(self) -> list[str]:
        return self.calls.read_text().splitlines() if self.calls.exists() else []
