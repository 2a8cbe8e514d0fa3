#!/usr/bin/env bash
# Look at a rendered notebook the way a reader does: headless Chromium takes a full-page screenshot.
#   scripts/screenshot.sh outputs/runs/<run>/tp1.html [out.png] [height]
# Needs Debian's chromium (apt-get install chromium; installed here when missing and run as root).
set -euo pipefail
html="$(realpath "$1")"
out="${2:-${html%.html}.png}"
height="${3:-4000}"
if ! command -v chromium >/dev/null; then
  if [ "$(id -u)" = "0" ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    echo "chromium is not installed: apt-get install chromium" >&2; exit 1
  fi
fi
profile="$(mktemp -d)"
trap 'rm -rf "$profile"' EXIT
chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
  --disable-background-networking --disable-component-update --disable-sync \
  --user-data-dir="$profile" --hide-scrollbars --window-size=1280,"$height" \
  --screenshot="$out" "file://$html" 2>/dev/null
echo "$out"
