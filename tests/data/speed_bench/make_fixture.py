"""Writes this folder's SPEED-Bench fixture: ``<config>/test.parquet`` as Model-Optimizer's
``examples/specdec_bench/prepare_data.py`` writes them (``SPEEDBench.prepare_data``: the
Hugging Face dataset's ``to_parquet``, with its ``huggingface`` schema metadata), the columns
and types of ``nvidia/SPEED-Bench``'s dataset card; a few rows of made-up text a config:
``qualitative`` two categories (one two-turn row), ``throughput_1k`` the three entropy tiers.
Run it from anywhere: ``python tests/data/speed_bench/make_fixture.py``."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

HERE = Path(__file__).resolve().parent
FEATURES = {"question_id": {"dtype": "string", "_type": "Value"},
            "category": {"dtype": "string", "_type": "Value"},
            "sub_category": {"dtype": "string", "_type": "Value"},
            "turns": {"feature": {"dtype": "string", "_type": "Value"}, "_type": "List"},
            "source": {"dtype": "string", "_type": "Value"},
            "src_id": {"dtype": "string", "_type": "Value"},
            "difficulty": {"dtype": "string", "_type": "Value"},
            "multiturn": {"dtype": "bool", "_type": "Value"}}
SCHEMA = pa.schema([("question_id", pa.string()), ("category", pa.string()),
                    ("sub_category", pa.string()), ("turns", pa.list_(pa.string())),
                    ("source", pa.string()), ("src_id", pa.string()),
                    ("difficulty", pa.string()), ("multiturn", pa.bool_())],
                   metadata={b"huggingface": json.dumps({"info": {"features": FEATURES}}).encode()})


def row(qid: str, category: str, turns: list[str], source: str) -> dict[str, object]:
    return {"question_id": qid, "category": category, "sub_category": category,
            "turns": turns, "source": source, "src_id": qid, "difficulty": "medium",
            "multiturn": len(turns) > 1}


def filler(tier: str, n: int, rng: random.Random) -> str:
    """About ``n`` words: one sentence over and over (low entropy), made-up words (high), or
    both in turn (mixed)."""
    words = ["alpha", "river", "stone", "market", "seven", "quiet", "vector", "lantern", "copper",
             "meadow", "signal", "harbor", "winter", "ledger", "orbit", "canvas"]
    if tier == "low_entropy":
        return " ".join(["The report lists the same figures again."] * (n // 7))
    if tier == "high_entropy":
        return " ".join("".join(rng.choice("bcdfghjklmnpqrstvwxz") for _ in range(5)) for _ in range(n))
    return " ".join(rng.choice(words) for _ in range(n))


def main() -> None:
    rng = random.Random(0)
    qualitative = [
        row("q1", "coding", ["Write a Python function that returns the n-th Fibonacci number."],
            "specbench"),
        row("q2", "coding", ["Explain what a Python generator is, with a short example."],
            "specbench"),
        row("q3", "writing", ["Write a four-line poem about a lighthouse.",
                              "Now rewrite it for a children's book."], "writingbench"),
        row("q4", "writing", ["Draft a two-sentence apology for a late delivery."],
            "writingbench")]
    throughput = [row(f"t{tier[0]}{i}", tier, [f"Summarize the following text.\n\n"
                                               f"{filler(tier, 150, rng)}"], "bamboo")
                  for tier in ("low_entropy", "mixed", "high_entropy") for i in range(2)]
    for config, rows in (("qualitative", qualitative), ("throughput_1k", throughput)):
        (HERE / config).mkdir(exist_ok=True)
        table = pa.Table.from_pylist(rows, schema=SCHEMA)
        pq.write_table(table, HERE / config / "test.parquet")


if __name__ == "__main__":
    main()
