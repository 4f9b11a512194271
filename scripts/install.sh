#!/usr/bin/env bash
# Install everything the project needs on a fresh Debian/Ubuntu box (run as root or with sudo):
# ffmpeg (pydub's decoder), espeak-ng (test voice notes) and fonts-noto-core (the Noto Sans
# Devanagari, Gujarati and Telugu files the web page serves: bot/web/assets.py) from apt,
# CPU-only torch, then the project with its dev and hub extras. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null; then SUDO="sudo"; fi
NOTO=/usr/share/fonts/truetype/noto
if ! command -v ffmpeg >/dev/null || ! command -v espeak-ng >/dev/null \
    || [ ! -f "$NOTO/NotoSansDevanagari-Regular.ttf" ] || [ ! -f "$NOTO/NotoSansGujarati-Bold.ttf" ] \
    || [ ! -f "$NOTO/NotoSansTelugu-Regular.ttf" ]; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq ffmpeg espeak-ng fonts-noto-core \
    >/dev/null
fi

PY=${PYTHON:-python3}
# Pin torch first (on the project's machines this version is a local CPU build); an unpinned
# `torch` pulled in by sentence-transformers would download a multi-GB CUDA build.
PIP=("$PY" -m pip install -q --root-user-action=ignore)
"${PIP[@]}" torch==2.13.0
"${PIP[@]}" -e '.[dev,hub]'
echo "install: ok ($("$PY" --version), ffmpeg $(ffmpeg -version | head -1 | cut -d' ' -f3))"
