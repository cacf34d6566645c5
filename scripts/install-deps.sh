#!/usr/bin/env bash
# Installs the Debian packages Midtier builds and tests with, when they are missing.
# Idempotent and quiet when everything is there already.
set -euo pipefail

packages=(
  libssl-dev      # OpenSSL libcrypto: keys, certificates, RSA-SHA256
  libxml2-dev     # libxml2: parsing, exclusive c14n, $metadata patching
  libsqlite3-dev  # SQLite, for GRDB
  libarchive-dev  # libarchive: the zip reader for uploaded client logs (built for hostile input)
  xmlsec1         # independent XML-DSig verifier used by the tests
  openssl         # generates the demo keys
  curl            # a real HTTP client for the end-to-end tests
  postgresql      # the shared store; tests start throwaway servers (Tests/e2e/postgres.py)
  pgbouncer       # a pooler in transaction mode in front of it (Tests/e2e/pgbouncer.py)
  nginx           # the load balancer in front of two instances (Tests/e2e/instances.py), a benchmark peer
  chromium        # a real browser for the web console and self-service page tests (Tests/e2e/pages.py)
  chromium-driver # WebDriver for it, which selenium drives
  ca-certificates
  python3
  systemd         # systemd-analyze: the unit in deploy/systemd is verified and scored (Tests/e2e/deploy.py)
  strace          # every system call Midtier makes is checked against that unit's filter; make bench-syscalls
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

# Python packages the end-to-end tests use, from PyPI, when missing: a real OData client
# (pyodata), what the admin API contract test validates with, selenium for the browser
# tests, and for the push stand-ins (Tests/e2e/standins) hypercorn (HTTP/2 over TLS), PyJWT and
# cryptography (JWTs, test keys) and httpx with h2 (their selftest's HTTP/2 client), and the
# OpenTelemetry protocol's messages for the stand-in trace collector (Tests/e2e/tracing.py),
# and the Kubernetes schemas deploy/kubernetes is validated against (Tests/e2e/deploy.py)
# (module:pip package).
for pair in "pyodata:pyodata==1.12.1" "requests:requests" "yaml:PyYAML" "jsonschema:jsonschema" "referencing:jsonschema>=4.18" \
            "rfc3339_validator:rfc3339-validator" "openapi_spec_validator:openapi-spec-validator" \
            "selenium:selenium" \
            "hypercorn:hypercorn" "jwt:PyJWT" "cryptography:cryptography" "httpx:httpx" "h2:h2" \
            "opentelemetry.proto.collector.trace.v1.trace_service_pb2:opentelemetry-proto" \
            "kubernetes_validate:kubernetes-validate"; do
  python3 -c "import ${pair%%:*}" 2>/dev/null || python3 -m pip install --quiet --disable-pip-version-check "${pair#*:}"
done
# schemathesis fuzzes the admin API (Tests/e2e/admin_fuzz.py); pinned, because its run is the
# same every time only with the same version.
python3 -c 'import sys, schemathesis; sys.exit(schemathesis.__version__ != "4.32.5")' 2>/dev/null \
  || python3 -m pip install --quiet --disable-pip-version-check "schemathesis==4.32.5"
