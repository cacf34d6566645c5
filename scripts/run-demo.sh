#!/usr/bin/env bash
# `make run`: the SuccessFactors sandbox on :8081, then Midtier on config/ (:8080).
set -euo pipefail
bin="${1:-.build/debug/midtier}"
"$bin" check-config --config config
"$(dirname "$bin")/midtier-sandbox" --port 8081 &
sandbox=$!
trap 'kill $sandbox 2>/dev/null; wait $sandbox 2>/dev/null || true' EXIT
for _ in $(seq 1 50); do
  curl -s -o /dev/null http://127.0.0.1:8081/sandbox/stats && break
  sleep 0.1
done
cat <<'MSG'

Midtier is starting on http://localhost:8080 (sandbox on :8081). Try, in another terminal:

  curl -si -u alice:alice-demo-password -X POST -H 'Content-Type: application/json' \
       -d '{"DeviceType":"iOS","DeviceModel":"iPhone15,2"}' \
       http://localhost:8080/odata/applications/v1/demo/Connections

then, with the X-SMP-APPCID it returned:

  curl -s -u alice:alice-demo-password -H "X-SMP-APPCID: <id>" -G \
       --data-urlencode "\$filter=userId eq '100001'" \
       --data-urlencode '$expand=employeePayrollRunResultsItems,userIdNav/empInfo/paymentInformationNav/toPaymentInformationDetailV3/bankNav' \
       --data-urlencode '$top=3' --data-urlencode '$orderby=payDate desc' \
       http://localhost:8080/sf/odata/v2/EmployeePayrollRunResults

In a browser: alice's devices at http://localhost:8080/mobileservices/me/ (alice /
alice-demo-password), and the admin console at http://localhost:9090/console/ (admin token
midtier-demo-admin-token).

MSG
"$bin" serve --config config
