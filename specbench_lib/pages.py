"""The pages of the outputs folder: an executed notebook as HTML, and ``outputs/index.html``.

Every page written here works offline: it loads no script, style or font from the network, and
its figures are files beside it or embedded in it.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from .attempts import attempt_labels
from .display import html_page, html_table, html_text, image, join, link
from .paths import outputs_dir
from .runs import RunDir, list_runs

HIDE_INPUT_TAG = "hide-input"


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
    exporter.register_preprocessor(TagRemovePreprocessor(remove_input_tags={HIDE_INPUT_TAG}),
                                   enabled=True)
    nb = nbformat.read(notebook, as_version=4)
    nb.metadata.pop("widgets", None)
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            data = output.get("data")
            if data is not None and _WIDGET_VIEW in data:
                del data[_WIDGET_VIEW]
                data.setdefault("text/plain", "(an interactive widget: not kept in a saved page)")
    body, _ = exporter.from_notebook_node(nb)
    target = notebook.with_suffix(".html")
    target.write_text(body)
    return target


def build_index(root: Path | None = None) -> Path:
    """Write ``outputs/index.html``: every run with its status, counts (numbers, 0 included),
    commit and links, then the report's files (its pages first, each figure with a thumbnail)
    and the ``specbench compare`` pages. Every address is relative: the folder can be shared."""
    out = root or outputs_dir()
    rows = []
    for run in reversed(list_runs(out)):
        run_dir = RunDir(Path(run["path"]))
        labels = attempt_labels(run_dir)  # which attempt a notebook shows, when there are several
        commit = f"{run['commit']}{' (dirty)' if run['dirty'] else ''}"
        rows.append([run["run_id"], run["phase"], run["started"], run["status"],
                     *_counts(run["counts"]), commit,
                     join(link(str(p.relative_to(out)),
                               f"{p.name}: {labels[p.name]}" if p.name in labels else p.name)
                          for p in run_dir.shared_files())])
    stamp = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    table = html_table(["run", "phase", "started", "status", "ok", "invalid", "crashed", "skipped",
                        "commit", "files"], rows)
    shared = [("report", sorted((p for p in (out / "report").glob("*") if p.is_file()),
                                key=lambda p: (p.suffix != ".html", p.name))),
              ("comparisons", sorted((out / "compare").glob("*.html")))]
    extra = "".join(html_text(title, bold=True) + html_table(
        ["file", "figure"] if title == "report" else ["file"],
        [[link(str(p.relative_to(out)), p.name),
          *([image(str(p.relative_to(out)), p.stem, width=240) if p.suffix == ".png" else None]
            if title == "report" else [])] for p in files])
        for title, files in shared if files)
    page = html_page("specbench runs", html_text(f"{len(rows)} runs · written {stamp}") + table
                     + extra)
    out.mkdir(parents=True, exist_ok=True)
    index = out / "index.html"
    index.write_text(page)
    return index


def _counts(counts: dict[str, int] | None) -> list[int | str]:
    """A run's cells per verdict for the index: a number each (0, never a blank); ``?`` while
    the run has recorded no counts (running, or stopped before it finished)."""
    if counts is None:
        return ["?"] * 4
    return [int(counts.get(k) or 0) for k in ("ok", "invalid", "crashed", "skipped")]
