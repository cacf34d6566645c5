#!/usr/bin/env bash
# Makes the pictures of docs/console.md: runs the browser test (Tests/e2e/pages.py), which
# saves a screenshot of every page, and stores them in docs/images/ as small palette PNGs
# (pngquant, installed from Debian when missing). Usage: scripts/docs-screenshots.sh [BIN]
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${1:-.build/debug/midtier}"
command -v pngquant >/dev/null || { SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo; $SUDO apt-get install -y -qq --no-install-recommends pngquant >/dev/null; }
shots="$(mktemp -d)"
trap 'rm -rf "$shots"' EXIT
python3 Tests/e2e/pages.py "$bin" --screenshots "$shots"
mkdir -p docs/images
for picture in "$shots"/*.png; do
  pngquant --quality=60-85 --speed 1 --force --output "docs/images/$(basename "$picture")" "$picture"
done
ls -l docs/images
