"""Convert the SmolLM2-135M GGUF to a Hugging Face folder that vLLM serves.

Run with the vLLM venv's Python (scripts/setup_vllm.sh does): transformers, ``gguf`` and
``accelerate`` load the GGUF (dequantized to float32); transformers 5 refuses ``save_pretrained``
on a GGUF-loaded model, so the state dict goes to ``model.safetensors`` and the config to
``config.json`` (``architectures: [LlamaForCausalLM]``) directly; the tokenizer is saved by
transformers. Usage: ``python convert_smollm2.py MODEL.gguf OUT_DIR``.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path


def convert(gguf: Path, out: Path) -> None:
    import torch
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM, AutoTokenizer

    began = time.perf_counter()
    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name,
                                                 dtype=torch.float32)
    print(f"[specbench] loaded {gguf.name} in {time.perf_counter() - began:.0f} s", flush=True)
    out.mkdir(parents=True, exist_ok=True)
    config = model.config.to_dict()
    config["architectures"] = ["LlamaForCausalLM"]
    config["torch_dtype"] = config["dtype"] = "float32"
    config.pop("quantization_config", None)  # the GGUF's, not this folder's
    state = {name: t.detach().to(torch.float32).contiguous() for name, t in model.state_dict().items()}
    if config.get("tie_word_embeddings") and "lm_head.weight" in state:
        del state["lm_head.weight"]  # shared with the embedding; safetensors refuses shared tensors
    save_file(state, str(out / "model.safetensors"), metadata={"format": "pt"})
    (out / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    if model.generation_config is not None:
        (out / "generation_config.json").write_text(model.generation_config.to_json_string())
    tokenizer.save_pretrained(str(out))
    size = sum(p.stat().st_size for p in out.iterdir()) / 1e6
    print(f"[specbench] wrote {len(state)} tensors, config and tokenizer to {out} ({size:.0f} MB)",
          flush=True)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    convert(Path(argv[0]), Path(argv[1]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
