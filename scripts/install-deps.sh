#!/usr/bin/env bash
# Installs the Debian packages Midtier builds and tests with, when they are missing.
# Idempotent and quiet when everything is there already.
set -euo pipefail

packages=(
  libssl-dev      # OpenSSL libcrypto: keys, certificates, RSA-SHA256
  libxml2-dev     # libxml2: parsing, exclusive c14n, $metadata patching
  libsqlite3-dev  # SQLite, for GRDB
  xmlsec1         # independent XML-DSig verifier used by the tests
  openssl         # generates the demo keys
  curl            # a real HTTP client for the end-to-end tests
  ca-certificates
  python3
)

missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done

if [ ${#missing[@]} -gt 0 ]; then
  echo "Installing missing packages: ${missing[*]}"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Python packages the end-to-end tests use (a real OData client), from PyPI, when missing.
if ! python3 -c "import pyodata, requests" 2>/dev/null; then
  echo "Installing pyodata from PyPI"
  python3 -m pip install --quiet --disable-pip-version-check "pyodata==1.12.1" requests
fi
