"""A run's notebooks, one per attempt: ``<stem>.ipynb`` is the latest complete attempt's, an
earlier attempt's ``<stem>.attempt<n>.ipynb``.

``<stem>.ipynb`` (and its HTML) is the first attempt's while none is complete. Each attempt in
the manifest names its notebook (``notebook``), so a page can say which attempt a file shows and
how it ended."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from ..core.errors import StoreError
from .run import RunDir

_ATTEMPT = re.compile(r"^(?P<stem>.+)\.attempt(?P<n>\d+)$")


def stem_of(notebook: Path) -> str:
    """The phase notebook's stem of an attempt's notebook (``tp1.attempt2.ipynb`` → ``tp1``)."""
    found = _ATTEMPT.match(notebook.stem)
    return found["stem"] if found else notebook.stem


def keep_attempt(run: RunDir, notebook: Path, *, attempts_before: int) -> Path:
    """Record ``notebook`` (an execution's notebook in ``run``) as the notebook of the attempt
    it recorded, and when the run is now complete make it ``<stem>.ipynb``: the notebook there
    (and its HTML) is renamed after its own attempt first (``<stem>.attempt<n>.ipynb``).

    ``attempts_before``: the manifest's attempts before the execution; none more means the
    execution recorded no attempt (it stopped before the sweep began) and nothing changes.
    Returns where the notebook is now.
    """
    manifest = run.read_manifest()
    attempts: list[dict[str, Any]] = [dict(a) for a in manifest.raw.get("attempts") or []]
    if len(attempts) <= attempts_before or not notebook.is_file():
        return notebook
    main = run.path / f"{stem_of(notebook)}{notebook.suffix}"
    if manifest.status == "complete" and notebook != main:
        if main.exists():
            owner = next((i for i, a in enumerate(manifest.attempts[:-1])
                          if a.notebook == main.name), None)
            # an older run: the first attempt's
            number = manifest.attempts[owner].n if owner is not None else 1
            earlier = run.path / f"{main.stem}.attempt{number}{main.suffix}"
            if earlier.exists():
                earlier = run.next_notebook(main.stem)
            _move(main, earlier)
            if owner is not None:
                attempts[owner]["notebook"] = earlier.name
        _move(notebook, main)
        notebook = main
    attempts[-1]["notebook"] = notebook.name
    run.update_manifest(attempts=attempts, notebook=notebook.name)
    return notebook


def _move(notebook: Path, target: Path) -> None:
    """Rename a notebook and the HTML rendered from it."""
    os.replace(notebook, target)
    page = notebook.with_suffix(".html")
    if page.is_file():
        os.replace(page, target.with_suffix(".html"))


def attempt_labels(run: RunDir) -> dict[str, str]:
    """For a run of more than one attempt: each notebook file's name (``.ipynb`` and ``.html``)
    → which attempt it shows and how that attempt ended (``attempt 1 (interrupted)``).

    An attempt that names no notebook (a run from before attempts did) is matched by file name:
    ``<stem>.attempt<n>`` is attempt n, ``<stem>`` the first."""
    try:
        attempts = run.read_manifest().attempts
    except StoreError:  # an unreadable manifest: the index says so in its row
        return {}
    if len(attempts) < 2:
        return {}
    status = {a.n: a.status or "running" for a in attempts}
    named = {a.notebook: a.n for a in attempts if a.notebook}
    labels = {}
    for notebook in run.notebooks():
        found = _ATTEMPT.match(notebook.stem)
        number = named.get(notebook.name)
        if number is None and not named:
            number = int(found["n"]) if found else 1
        if number in status:
            label = f"attempt {number} ({status[number]})"
            labels[notebook.name] = labels[notebook.with_suffix(".html").name] = label
    return labels
