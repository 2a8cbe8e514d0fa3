"""The pages of the outputs folder: an executed notebook as HTML, and ``outputs/index.html``.

Every page written here works offline: it loads no script, style or font from the network, and
its figures are files beside it or embedded in it.
"""

from __future__ import annotations

import datetime as dt
import html
import re
from pathlib import Path
from typing import Any

from ..core.display import Html, html_page, html_table, html_text, image, join, link
from ..core.durations import span
from ..core.errors import StoreError
from ..core.paths import outputs_dir, project_root
from ..core.tables import details, headline
from ..runs.attempts import attempt_labels
from ..runs.manifest import Manifest
from ..runs.run import RunDir, list_runs

HIDE_INPUT_TAG = "hide-input"
# the parameters cell and the values papermill injected: at the end of the page, collapsed
PARAMETER_TAGS = ("parameters", "injected-parameters")


# The lab template, less what it fetches from a CDN: require.js, MathJax, Mermaid and the widget
# manager. Inline CSS and embedded images stay, so the page reads the same offline.
_OFFLINE_TEMPLATE = """{%- extends 'index.html.j2' -%}
{%- block html_head_js_requirejs -%}{%- endblock html_head_js_requirejs -%}
{%- block jupyter_widgets -%}{%- endblock jupyter_widgets -%}
{%- block html_head_js_mathjax -%}{%- endblock html_head_js_mathjax -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
"""
_WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def render_html(notebook: Path) -> Path:
    """Render an executed notebook to HTML beside it (inputs of ``hide-input`` cells hidden).

    The page is self-contained: styles inline, images embedded as ``data:`` URIs, and none of the
    scripts the stock template loads from a CDN (require.js, MathJax, Mermaid, the widget
    manager); a widget's output shows its text form (a saved widget has no state to draw).
    """
    import jinja2
    import nbformat
    from nbconvert import HTMLExporter
    from nbconvert.preprocessors import TagRemovePreprocessor

    exporter = HTMLExporter(template_name="lab", embed_images=True,
                            extra_loaders=[jinja2.DictLoader({"specbench.html.j2":
                                                              _OFFLINE_TEMPLATE})],
                            template_file="specbench.html.j2")
    exporter.register_preprocessor(TagRemovePreprocessor(remove_input_tags={HIDE_INPUT_TAG},
                                                         remove_cell_tags=set(PARAMETER_TAGS)),
                                   enabled=True)
    nb = nbformat.read(notebook, as_version=4)
    nb.metadata.pop("widgets", None)
    section = parameters_section(nb.cells)
    if section:  # one HTML block in a markdown cell: the page's last cell, collapsed
        nb.cells.append(nbformat.v4.new_markdown_cell(section))
    for cell in nb.cells:
        tidied = (tidy_output(o) for o in cell.get("outputs", []))
        cell["outputs"] = [o for o in tidied if o is not None]
        for output in cell["outputs"]:
            data = output.get("data")
            if data is not None and _WIDGET_VIEW in data:
                del data[_WIDGET_VIEW]
                data.setdefault("text/plain", "(an interactive widget: not kept in a saved page)")
    body, _ = exporter.from_notebook_node(nb)
    target = notebook.with_suffix(".html")
    target.write_text(body)
    return target


def parameters_section(cells: list[Any]) -> str:
    """The notebook's parameters (its defaults, then the values this run was given) as one
    collapsed section, with this machine's folders written relative (``outputs/…``)."""
    parts = []
    for tag, title in zip(PARAMETER_TAGS, ("defaults", "this run's values"), strict=True):
        for cell in cells:
            if tag in cell.get("metadata", {}).get("tags", []):
                source = relative_paths(cell.get("source", ""))
                lines = html.escape(source).replace("\n", "&#10;")  # no blank line: one block
                parts.append(f"<p>{title}</p><pre style='white-space:pre-wrap'>{lines}</pre>")
    return str(details("The notebook's parameters", "".join(parts))) if parts else ""


def relative_paths(text: str) -> str:
    """``text`` with this machine's folders written as a reader's: the outputs folder as
    ``outputs``, the project as ``.``, the home folder as ``~``."""
    shown = text
    for folder, name in ((outputs_dir().resolve(), "outputs"), (project_root(), "."),
                         (Path.home(), "~")):
        if str(folder) not in ("", "/"):
            shown = shown.replace(f"{folder}/", f"{name}/").replace(str(folder), name)
    return shown


_WARNING = re.compile(r"^\S*\.py:\d+: \w*Warning: ")


def without_warnings(text: str) -> str:
    """``text`` less library warnings (``…/site-packages/x.py:12: UserWarning: …`` and the
    indented source line Python prints under each): not the reader's business."""
    kept, after = [], False
    for line in text.splitlines(keepends=True):
        if _WARNING.match(line):
            after = True
        elif not (after and line.startswith("  ")):
            kept.append(line)
            after = False
    return "".join(kept)


def tidy_output(output: Any) -> Any:
    """An output with this machine's folders written as a reader's (:func:`relative_paths`),
    a stderr stream less library warnings; None when nothing is left of it."""
    if output.get("output_type") == "stream":
        text = str(output.get("text", ""))
        text = without_warnings(text) if output.get("name") == "stderr" else text
        if not text.strip():
            return None
        output["text"] = relative_paths(text)
    for kind, value in (output.get("data") or {}).items():
        if kind.startswith("text/") and isinstance(value, str):
            output["data"][kind] = relative_paths(value)
    return output


def build_index(root: Path | None = None) -> Path:
    """Write ``outputs/index.html``: every run, newest first, with what tells runs apart (its
    plan: cells planned, a one-budget filter, a time budget; its status and time taken), its
    counts (numbers, 0 included), commit and links (the notebook's pages; the figures behind
    a click), then the report's files (its pages first, each figure with a thumbnail) and the
    ``specbench compare`` pages. Every address is relative: the folder can be shared; the
    page fits a 1280 px window."""
    out = root or outputs_dir()
    rows = []
    for run in reversed(run_summaries(out)):
        run_dir = RunDir(Path(run["path"]))
        commit = f"{run['commit']}{' (dirty)' if run['dirty'] else ''}"
        rows.append([run["run_id"], run["phase"], run["status"], run["plan"],
                     run["elapsed"], *_counts(run["counts"]), commit, _files(run_dir, out)])
    stamp = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    table = html_table(["run", "phase", "status", "plan", "took", "ok", "invalid", "crashed",
                        "skipped", "commit", "files"], rows)
    shared = [("report", sorted((p for p in (out / "report").glob("*") if p.is_file()),
                                key=lambda p: (p.suffix != ".html", p.name))),
              ("comparisons", sorted((out / "compare").glob("*.html")))]
    extra = "".join(html_text(title, bold=True) + html_table(
        ["file", "figure"] if title == "report" else ["file"],
        [[link(str(p.relative_to(out)), p.name),
          *([image(str(p.relative_to(out)), p.stem, width=240) if p.suffix == ".png" else None]
            if title == "report" else [])] for p in files])
        for title, files in shared if files)
    lead = headline(f"{len(rows)} runs, newest first · written {stamp}")
    page = html_page("specbench runs", lead + table + extra)
    out.mkdir(parents=True, exist_ok=True)
    index = out / "index.html"
    index.write_text(page)
    return index


def run_summaries(root: Path | None = None) -> list[dict[str, Any]]:
    """:func:`~specbench_lib.runs.rundir.list_runs`, oldest first, each with ``plan`` (cells planned, the
    budget filter of a one-budget run, a time budget: "24 cells", "8 cells · budget 16 only",
    "≤ 120 cells in rounds · 7 m 30 s budget"), ``planned`` (cells) and ``elapsed`` ("9 m 38 s";
    "running 2 m 10 s" while it runs; "?" when it recorded none)."""
    found = []
    for run in list_runs(root):
        try:
            manifest = RunDir(Path(run["path"])).read_manifest()
        except StoreError:
            manifest = Manifest()
        planned = len(manifest.plan_fingerprints or {}) or None
        time_budget = manifest.params.get("time_budget_s")
        plan = "? cells" if planned is None else (
            f"≤ {planned} cells in rounds" if time_budget else f"{planned} cells")
        if manifest.budget is not None:
            plan += f" · budget {manifest.budget} only"
        if time_budget:
            plan += f" · {span(float(time_budget))} budget"
        found.append({**run, "planned": planned, "plan": plan,
                      "elapsed": _elapsed(manifest, run["status"])})
    return found


def _elapsed(manifest: Manifest, status: str | None) -> str:
    if manifest.elapsed_s is not None and status != "running":
        return span(manifest.elapsed_s)
    started = _when(manifest.started)
    if status == "running" and started is not None:
        return f"running {span((dt.datetime.now(dt.UTC) - started).total_seconds())}"
    last = manifest.attempts[-1] if manifest.attempts else None
    begun, ended = (_when(last.started), _when(last.ended)) if last else (None, None)
    return span((ended - begun).total_seconds()) if begun and ended else "?"


def _when(stamp: str | None) -> dt.datetime | None:
    try:
        return dt.datetime.fromisoformat(stamp) if stamp else None
    except ValueError:
        return None


def _files(run_dir: RunDir, out: Path) -> Html:
    """A run's pages and notebooks as links (each labelled with its attempt when there are
    several), and its figures behind a click."""
    labels = attempt_labels(run_dir)  # which attempt a notebook shows, when there are several
    files = run_dir.shared_files()
    pages = [link(str(p.relative_to(out)), f"{p.name}: {labels[p.name]}" if p.name in labels
                  else p.name) for p in files if p.suffix != ".png"]
    figures = [link(str(p.relative_to(out)), p.stem) for p in files if p.suffix == ".png"]
    shown = join(pages)
    if figures:
        shown = Html(shown + details(f"{len(figures)} figures", join(figures)))
    return shown


def _counts(counts: dict[str, int] | None) -> list[int | str]:
    """A run's cells per verdict for the index: a number each (0, never a blank); ``?`` while
    the run has recorded no counts (running, or stopped before it finished)."""
    if counts is None:
        return ["?"] * 4
    return [int(counts.get(k) or 0) for k in ("ok", "invalid", "crashed", "skipped")]
