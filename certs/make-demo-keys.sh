#!/usr/bin/env bash
# Generates the demo keys of config/: none enters git (see .gitignore); every machine makes its own.
#   certs/demo-signing.key  RSA 2048 private key (PKCS#8 PEM), signs SAML assertions (config/destinations/sf.json)
#   certs/demo-signing.crt  self-signed X.509 certificate for it, valid 10 years
#   certs/demo-session.key  32 random bytes in base64, seals back-end sessions in the store (config/midtier.json)
set -euo pipefail
cd "$(dirname "$0")"
umask 077
if ! [ -s demo-signing.key ] || ! [ -s demo-signing.crt ]; then
  openssl req -x509 -newkey rsa:2048 -nodes -sha256 -days 3650 \
    -subj "/CN=Midtier demo SAML signing" \
    -keyout demo-signing.key -out demo-signing.crt 2>/dev/null
  chmod 644 demo-signing.crt
  echo "Generated certs/demo-signing.key and certs/demo-signing.crt"
fi
if ! [ -s demo-session.key ]; then
  openssl rand -base64 32 > demo-session.key
  echo "Generated certs/demo-session.key"
fi
