#!/usr/bin/env bash
# Generates the demo signing key pair used by config/destinations/sf.json and the sandbox.
# The key never enters git (see .gitignore); every machine makes its own.
#   certs/demo-signing.key  RSA 2048 private key (PKCS#8 PEM)
#   certs/demo-signing.crt  self-signed X.509 certificate for it, valid 10 years
set -euo pipefail
cd "$(dirname "$0")"
if [ -s demo-signing.key ] && [ -s demo-signing.crt ]; then exit 0; fi
umask 077
openssl req -x509 -newkey rsa:2048 -nodes -sha256 -days 3650 \
  -subj "/CN=Midtier demo SAML signing" \
  -keyout demo-signing.key -out demo-signing.crt 2>/dev/null
chmod 644 demo-signing.crt
echo "Generated certs/demo-signing.key and certs/demo-signing.crt"
