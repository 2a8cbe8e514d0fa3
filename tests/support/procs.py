"""The processes a test started and must not leave behind, found by their command line."""

from __future__ import annotations

from pathlib import Path


def pids_with(*needles: str) -> list[int]:
    """Pids whose command line holds every one of ``needles`` (as argv elements or within one)."""
    found = []
    wanted = [n.encode() for n in needles]
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if cmdline and all(n in cmdline for n in wanted):
            found.append(int(proc.name))
    return found
