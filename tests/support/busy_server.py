"""A slow llama.cpp-protocol server for the host-load sweeps (tests only).

``python tests/support/busy_server.py --port P [--token-delay-s S] [--burn]``: tests/support/fake_server.py's
``ok`` mode, each stream event ``S`` seconds after the one before (so a cell lasts long enough
to judge its host); ``--burn`` makes the server busy itself, as llama-server's spinning threads
are: a spinning thread in its process and a spinning child process in its process group.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fake_server import FakeLlamaServer, _Handler  # noqa: E402
from hogs import SPIN  # noqa: E402


def _spin() -> None:
    while True:
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description="a slow (and maybe busy) llama.cpp-protocol server")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--token-delay-s", type=float, default=0.1)
    parser.add_argument("--burn", action="store_true")
    args = parser.parse_args()

    class Slow(_Handler):
        def _event(self, data: dict[str, Any]) -> None:
            time.sleep(args.token_delay_s)
            super()._event(data)

    if args.burn:
        subprocess.Popen([sys.executable, "-c", SPIN, "", f"server-burner-{args.port}"],
                         stdin=subprocess.DEVNULL)
        threading.Thread(target=_spin, daemon=True).start()
    server = FakeLlamaServer("ok", port=args.port)
    server.RequestHandlerClass = Slow
    print(f"busy server on {args.port}, token delay {args.token_delay_s} s, burn {args.burn}",
          flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
