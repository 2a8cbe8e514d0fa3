"""A sweep's progress in a notebook: one output that updates while the sweep runs, kept whole.

In a kernel, :func:`~specbench_lib.notebook.run_sweep` sends the sweep's lines (:mod:`~.sweep.progress`: a
line per server start and per finished cell, the run's first and last lines) to a :class:`LiveLog`
instead of printing them: one display output (``display(..., display_id=True)``), updated as
each line comes, shows the latest cell's line and the last few before it; when the sweep ends
it shows one line (how the run ended) and keeps every line as its plain text, and the notebook's
last cell shows the whole log collapsed (:func:`log_section`). nbclient (papermill) applies the
updates to the saved notebook, so its HTML holds one output where there were a hundred lines.

A kernel's stdout reaches no terminal: ``specbench run`` names a file in ``SPECBENCH_ECHO``
(:mod:`~specbench_lib.kernelrun`) and prints what the sweep appends to it, so the terminal still shows every
line as it comes. Machine paths are shown relative (``outputs/runs/<id>``) in the notebook; the
echoed lines are as printed.
"""

from __future__ import annotations

import html
import io
import os
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from .core.display import Rendered
from .report.pages import relative_paths

ECHO_ENV = "SPECBENCH_ECHO"
TAIL = 8  # the lines shown under the latest one while the sweep runs


class LogView(Rendered):
    """What the live output shows: while running, the latest cell's line in bold over the last
    lines; when done, how the run ended. Its plain text is always the whole log."""

    def __init__(self, lines: Sequence[str], *, done: bool = False,
                 ended: str | None = None) -> None:
        self.lines, self.done, self.ended = list(lines), done, ended

    def text(self) -> str:
        return "\n".join(self.lines)

    def html(self) -> str:
        if self.done:
            last = self.ended or _ending(self.lines)
            return (f"<p>{html.escape(last)} · the whole progress log ({len(self.lines)} lines) "
                    f"is at the end of this notebook</p>")
        latest = next((s for s in reversed(self.lines) if s.startswith("[")),
                      self.lines[-1] if self.lines else "starting")
        tail = html.escape("\n".join(self.lines[-TAIL:]))
        return (f"<div class='sb-progress'><b>{html.escape(latest)}</b>"
                f"<pre style='margin:4px 0;font-size:85%'>{tail}</pre></div>")


class LiveLog(io.TextIOBase):
    """A text stream whose lines update one notebook output (``show``: IPython's ``display``)
    and, when ``echo`` is set, are appended to it as written."""

    def __init__(self, show: Callable[..., Any], *, echo: TextIO | None = None,
                 tidy: Callable[[str], str] = lambda s: s) -> None:
        super().__init__()
        self.lines: list[str] = []
        self._partial = ""
        self._echo, self._tidy = echo, tidy
        self._handle = show(LogView([]), display_id=True)

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if self._echo is not None:
            self._echo.write(text)
            self._echo.flush()
        self._partial += text
        if "\n" in self._partial:
            *whole, self._partial = self._partial.split("\n")
            self.lines += [self._tidy(line) for line in whole]
            self._handle.update(LogView(self.lines))
        return len(text)

    def finish(self, *, failed: BaseException | None = None) -> list[str]:
        """The sweep ended (``failed``: what stopped it): the output shows how, and holds the
        whole log as text; the lines are returned."""
        if self._partial:
            self.lines.append(self._tidy(self._partial))
            self._partial = ""
        ended = None if failed is None else \
            f"the sweep stopped: {type(failed).__name__}{f': {failed}' if str(failed) else ''}"
        self._handle.update(LogView(self.lines, done=True, ended=ended))
        if self._echo is not None:
            self._echo.close()
        return self.lines


def start_live_log() -> LiveLog | None:
    """A :class:`LiveLog` when this process is a notebook's kernel (else None: lines print)."""
    try:
        from IPython import get_ipython
        from IPython.display import display
    except ImportError:
        return None
    shell = get_ipython()
    if shell is None or getattr(shell, "kernel", None) is None:
        return None
    target = os.environ.get(ECHO_ENV)
    echo = open(target, "a", encoding="utf-8") if target else None  # noqa: SIM115 (closed by finish)
    return LiveLog(display, echo=echo, tidy=relative_paths)


def _ending(lines: Sequence[str]) -> str:
    """How the sweep ended: its last ``run …:`` line (the count of verdicts and the time)."""
    return next((s for s in reversed(lines) if s.startswith("run ") and ": " in s
                 and not s.startswith("run directory")),
                lines[-1] if lines else "the sweep wrote no line")


def log_section(lines: Sequence[str] | None) -> str:
    """The whole progress log as a collapsed section (empty when there is none)."""
    if not lines:
        return ""
    body = html.escape("\n".join(lines))
    return (f"<details><summary>The progress log ({len(lines)} lines): {html.escape(_ending(lines))}"
            f"</summary><pre style='font-size:85%;white-space:pre-wrap'>{body}</pre></details>")
