"""``source: grounded``: input-grounded tasks, the material in the prompt and the answer drawn
from it (a summary of the code, an answer from the conversations)."""

from __future__ import annotations

from . import humaneval, sharegpt
from .framed import Frame, FrameSource

GROUNDED: tuple[Frame, Frame] = (
    ("code", "Summarise what the following Python code does: the purpose, inputs and result of "
             "each function, using only the code given.\n\n```python\n",
     "\n```\n\nSummary of the code above:\n"),
    ("text", "Answer the question after the following conversations from their text alone.\n\n"
             "<<<\n",
     "\n>>>\n\nQuestion: what did the users ask for, and what did the assistant answer them? "
     "Answer from the conversations above.\n\nAnswer:"),
)

SOURCE = FrameSource("grounded", GROUNDED, code=humaneval.SOURCE, text=sharegpt.SOURCE)
