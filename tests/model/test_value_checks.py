"""Issue 49: params values that validate as their type but that what receives them refuses are
refused when the params file loads, before any server starts, naming the file, the key, the
value and the fix: ``engine.env`` the OS will not set, ``chat_template_kwargs`` of the wrong
type, a random workload's vocabulary and special ids, and a claim quantity its output length
cannot measure."""

from __future__ import annotations

import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from paramsfiles import write_params

from specbench_lib.core.errors import ParamsError
from specbench_lib.model.layering import load_params
from specbench_lib.model.workloadparams import WorkloadParams
from specbench_lib.prompts.randomtokens import random_ids


def refused(tmp_path: Path, **overrides: Any) -> str:
    path = write_params(tmp_path, "minimal", **overrides)
    with pytest.raises(ParamsError) as err:
        load_params(path)
    text = str(err.value)
    assert text.startswith(f"{path}: invalid params:"), text
    return text


@pytest.mark.parametrize(("env", "named"), [
    ({"A=B": "1"}, "'A=B' is not a name the OS takes"),
    ({"": "1"}, "'' is not a name the OS takes"),
    ({"BAD\0NAME": "1"}, "is not a name the OS takes"),
    ({"GOOD": "a\0b"}, "engine.env GOOD: its value has a NUL byte")])
def test_engine_env_the_os_refuses_is_refused_at_load(tmp_path: Path, env: dict[str, str],
                                                      named: str) -> None:
    """Before, the notebook failed at cell 5 with "ValueError: illegal environment variable
    name", a failed run folder and no word of engine.env."""
    text = refused(tmp_path, engine={"env": env})
    assert "engine.env" in text and named in text


def test_a_template_option_of_the_wrong_type_is_refused(tmp_path: Path) -> None:
    """``enable_thinking: "false"`` (a string): a jinja render reads it as true and llama-server
    answers 400 after two server starts."""
    chat = {"name": "code", "source": "humaneval", "template": "chat"}
    text = refused(tmp_path, workloads=[{**chat, "chat_template_kwargs": {"enable_thinking": "false"}}])
    assert "workloads.0: Value error, chat_template_kwargs enable_thinking: 'false' is not a bool; " \
           "write enable_thinking: true or enable_thinking: false (no quotes)" in text
    path = write_params(tmp_path, "minimal", name="ok.yaml", workloads=[
        {**chat, "chat_template_kwargs": {"enable_thinking": False, "custom": "x"}}])
    assert load_params(path).workloads[0].chat_template_kwargs["enable_thinking"] is False


RANDOM = {"name": "r", "source": "random"}


@pytest.mark.parametrize(("workload", "named"), [
    ({**RANDOM, "vocab_size": 3, "special_ids": [0, 1, 2]}, "special_ids leave no id of the 3"),
    ({**RANDOM, "vocab_size": 100, "special_ids": [5, 100, -1]},
     "special_ids [-1, 100] are outside the vocabulary (ids 0 to 99)"),
    ({**RANDOM, "vocab_size": 2_000_000_000}, "vocab_size 2000000000 is no model's vocabulary "
                                              "(at most 10000000)")])
def test_a_random_vocabulary_that_cannot_be_sent_is_refused(tmp_path: Path, workload: dict[str, Any],
                                                            named: str) -> None:
    """Before: ``% len(allowed)`` with no id left (ZeroDivisionError in the sweep), ids outside
    the vocabulary sent, and a tuple of 2e9 ids built (MemoryError after 16 s)."""
    assert named in refused(tmp_path, workloads=[workload])


def test_random_ids_never_list_the_vocabulary() -> None:
    """The k-th allowed id is counted past the special ids, not read from a list of every id:
    the same ids as vLLM's ``allowed`` array, in a few kilobytes for a vocabulary of 3 million
    (before: a tuple of every id, over 100 MB)."""
    special = (0, 3, 4, 49)
    small = WorkloadParams(name="r", source="random", vocab_size=50, special_ids=special)
    allowed = np.array(sorted(set(range(50)) - set(special)))
    offset = int(np.random.default_rng(0).integers(0, 50, size=8)[5])
    assert random_ids(small, 5, 120, 0) == allowed[(offset + 5 + np.arange(120)) % 46].tolist()
    big = WorkloadParams(name="r", source="random", vocab_size=3_000_000, special_ids=(7,))
    tracemalloc.start()
    try:
        ids = random_ids(big, 0, 64, 0)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(ids) == 64 and 7 not in ids and peak < 5_000_000, peak


@pytest.mark.parametrize("quantity", ["decode_rate", "acceptance"])
def test_a_claim_quantity_an_output_length_cannot_measure_is_refused(tmp_path: Path,
                                                                      quantity: str) -> None:
    """``decode_rate`` with ``output_tokens: 1`` has no decoding phase: before, it ran and said
    "no config measured ok" of ok cells."""
    text = refused(tmp_path, claim_quantity=quantity, output_tokens=[1, 64])
    assert (f"claim_quantity {quantity} needs answers of 2 tokens or more (a token after the "
            f"first: the decoding phase), but output_tokens has [1]") in text
    for fine in ("output_rate", "ttft"):
        path = write_params(tmp_path, "minimal", name="ok.yaml", claim_quantity=fine,
                            output_tokens=1)
        assert load_params(path).claim_quantity == fine
