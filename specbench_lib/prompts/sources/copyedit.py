"""``source: copyedit``: "rewrite the following ..." with the material in the prompt, the case
n-gram drafting is made for (the answer copies the prompt)."""

from __future__ import annotations

from . import humaneval, sharegpt
from .framed import Frame, FrameSource

COPYEDIT: tuple[Frame, Frame] = (
    ("code", "Rewrite the following Python code with descriptive names and type hints, keeping "
             "its behaviour. Return the complete code.\n\n```python\n",
     "\n```\n\nRewritten code:\n```python\n"),
    ("text", "Rewrite the following conversation, correcting spelling and grammar and keeping "
             "everything else. Return the complete text.\n\n<<<\n",
     "\n>>>\n\nCorrected text:\n<<<\n"),
)

SOURCE = FrameSource("copyedit", COPYEDIT, code=humaneval.SOURCE, text=sharegpt.SOURCE)
