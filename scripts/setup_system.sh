#!/usr/bin/env bash
# Debian packages the test suite needs beyond Python: a real TeX engine for the report's LaTeX
# table, headless Chromium for the offline-HTML screenshots and the JupyterLab browser test.
# Installed with apt-get when missing and run as root; elsewhere it says what to install.
set -euo pipefail
packages=(chromium texlive-latex-base texlive-latex-recommended poppler-utils)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ "${#missing[@]}" -eq 0 ] && exit 0
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null; then
  echo "[specbench] installing ${missing[*]} with apt-get"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  echo "[specbench] the tests need Debian's ${missing[*]}: apt-get install ${missing[*]}" >&2
  exit 1
fi
