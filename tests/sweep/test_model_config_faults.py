"""Issue 49: a model ``config.json`` whose rope scaling factor is not a number is named (file,
key, value, fix) by the doctor's and the sweep's ``model fit`` check; before, ``float()``
raised a bare ValueError out of both (a traceback from ``specbench doctor``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from paramsfiles import write_params
from ports import free_port

import specbench_lib as sb
from specbench_lib.sweep.preflight import doctor, require

TINY = Path(__file__).resolve().parents[1] / "data" / "tiny.yaml"


@pytest.mark.parametrize("factor", ["four", [4], True])
def test_a_rope_factor_that_is_no_number_is_named_by_doctor_and_preflight(
        tmp_path: Path, outputs: Path, factor: object) -> None:
    binary = tmp_path / "engine" / "python"
    binary.parent.mkdir()
    binary.write_text("#!/bin/sh\nprintf 'version: 0.0-test\\n'\n")
    binary.chmod(0o755)
    model = tmp_path / "models" / "m"
    model.mkdir(parents=True)
    (model / "weights.bin").write_bytes(b"w" * 2048)
    (model / "config.json").write_text(json.dumps({
        "max_position_embeddings": 4096, "rope_scaling": {"rope_type": "yarn", "factor": factor}}))
    params = write_params(tmp_path, TINY, engine={"kind": "sglang", "binary": str(binary),
                                                  "model": str(model), "port": free_port()})
    plan = sb.load_plan(params)
    (fit,) = [c for c in doctor(plan) if c.name == "model fit"]
    said = (f"{model / 'config.json'}: rope_scaling.factor {factor!r} is not a positive number; "
            f"fix the model's config.json")
    assert not fit.ok and said in fit.detail, fit.detail
    with pytest.raises(sb.PreflightError, match="model fit") as err:
        require(plan)
    assert said in str(err.value)
