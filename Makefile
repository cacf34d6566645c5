# Midtier — see README.md. `make run` and `make test` work on a fresh Debian machine with Swift.
SWIFT ?= swift
BIN := .build/debug/midtier

.PHONY: run test lint deps certs build check-config image bench bench-instances bench-scale bench-syscalls bench-allocations bench-ab soak clean format fuzz

## Start the SuccessFactors sandbox and Midtier on config/ (Ctrl-C stops both).
run: deps certs build
	@scripts/run-demo.sh $(BIN)

## Run every test: unit and in-process socket tests (swift test; the store tests on SQLite and
## on a throwaway PostgreSQL), then end-to-end tests of the real binary (curl, xmlsec1; SIGKILL
## durability, restarts, reload; pyodata; the hostile-input corpus; slow and idle clients;
## isolation and identity;
## the admin API fuzzed with schemathesis against docs/admin-api.yaml;
## the web console and self-service page in headless Chromium (screenshots in test-output/);
## two instances on one PostgreSQL; PostgreSQL over TLS and through PgBouncer; push notifications through stand-in
## APNs and FCM; traces to a stand-in OpenTelemetry collector; principal propagation behind
## nginx as the ICM, the token services, the back end's own users; what deploy/ ships: the
## systemd unit, its readiness protocol and system call filter, the Kubernetes manifests). Lint first.
test: deps certs lint
	$(SWIFT) build --build-tests
	python3 Tests/e2e/postgres.py run -- $(SWIFT) test --skip-build
	$(SWIFT) build --product midtier
	$(SWIFT) build --product midtier-sandbox
	Tests/e2e/run.sh $(BIN)
	python3 Tests/e2e/lifecycle.py $(BIN)
	python3 Tests/e2e/pyodata_client.py $(BIN)
	python3 Tests/e2e/hostile.py $(BIN)
	python3 Tests/e2e/crash_proofing.py $(BIN)
	python3 Tests/e2e/slow_clients.py $(BIN)
	python3 Tests/e2e/admin_fuzz.py $(BIN)
	python3 Tests/e2e/isolation.py $(BIN)
	python3 Tests/e2e/isolation.py $(BIN) --instances 2
	python3 Tests/e2e/identity.py $(BIN)
	python3 Tests/e2e/sdk_onboarding.py $(BIN)
	python3 Tests/e2e/standins/selftest.py
	python3 Tests/e2e/push.py $(BIN)
	python3 Tests/e2e/pages.py $(BIN)
	python3 Tests/e2e/instances.py $(BIN)
	python3 Tests/e2e/postgres_tls.py $(BIN)
	python3 Tests/e2e/pgbouncer.py $(BIN)
	python3 Tests/e2e/tracing.py $(BIN)
	python3 Tests/e2e/principal_propagation.py $(BIN)
	python3 Tests/e2e/token_services.py $(BIN)
	python3 Tests/e2e/backend_signin.py $(BIN)
	python3 Tests/e2e/deploy.py $(BIN)

## Install the Debian packages the build and the tests need, when missing.
deps:
	@scripts/install-deps.sh

## Generate the demo signing key pair (never committed).
certs:
	@certs/make-demo-keys.sh

## The conventions (docs/architecture.md): swift-format finds nothing (`make format` fixes
## most), and every target imports exactly the modules Package.swift gives it.
lint:
	$(SWIFT) format lint --strict --configuration .swift-format --recursive --parallel Package.swift Sources Tests Benchmarks/MidtierBench
	python3 scripts/check-imports.py

## Format the Swift sources and tests in place with the toolchain's swift-format (.swift-format).
format:
	$(SWIFT) format format --configuration .swift-format --in-place --recursive --parallel Package.swift Sources Tests Benchmarks/MidtierBench

## The OCI image from Debian packages (scripts/build-image.sh; docs/operations.md, "The container
## image"), then run from its archive in namespaces with the README's calls (Tests/e2e/image.py).
image: deps certs
	$(SWIFT) build --product midtier-sandbox
	scripts/build-image.sh
	python3 Tests/e2e/image.py .build-image/midtier-image.tar $(BIN)

## Benchmarks: Midtier's hot path against nginx proxy_pass, signing, bursts, memory (see docs/benchmarks.md).
bench: deps certs
	Benchmarks/run.sh

## Several instances on PostgreSQL: hot path against SQLite, block-to-refused p50/p99, the block storm
## (USERS blocks over BLOCK_SECONDS, default 10 000 in 60 s; STORM_ONLY=1 runs only it) (docs/benchmarks.md).
bench-instances: deps certs
	Benchmarks/instances.sh

## At enterprise size: 1 000 / 100 000 / 1 000 000 registrations (SIZES=...) on SQLite and a throwaway PostgreSQL (STORES=...), hot path while the cache fills and warm, admin list pages, store size;
## then one push to a whole app of PUSH_REGISTRATIONS (default 200 000) and the outbox's drain, and one of 20 000 by two
## instances on a throwaway PostgreSQL; both time an admin's block every half second meanwhile (docs/benchmarks.md).
PUSH_REGISTRATIONS ?= 200000
bench-scale: deps certs
	Benchmarks/scale.sh
	python3 Benchmarks/push_scale.py "$$(swift build -c release --show-bin-path)/midtier" "$$(swift build -c release --show-bin-path)/midtier-bench" $(PUSH_REGISTRATIONS)
	STORE=postgres INSTANCES=2 python3 Benchmarks/push_scale.py "$$(swift build -c release --show-bin-path)/midtier" "$$(swift build -c release --show-bin-path)/midtier-bench" 20000

## System calls per proxied call: nginx, Caddy, Midtier and the bare SwiftNIO proxy, counted with strace.
bench-syscalls: deps certs
	Benchmarks/syscalls.sh

## Heap allocations per proxied call: Midtier and the two bare proxies, counted by a preloaded malloc counter.
bench-allocations: deps certs
	Benchmarks/allocations.sh

## One step A/B: BEFORE=<saved release binary> against the current build, alternating rounds (docs/benchmarks.md).
bench-ab: deps certs
	Benchmarks/ab.sh

## Fuzz every parser of device and back-end bytes with libFuzzer + ASan, FUZZ_SECONDS each (default 60;
## FUZZ_TARGETS="json client-log" picks targets); crashers go to Tests/Fuzz/crashers/ (docs/reliability.md).
fuzz:
	scripts/fuzz.sh

# 30 minutes at half the measured maximum rate; fails on RSS or fd drift over 10 % (not in CI).
soak: deps certs
	Benchmarks/soak.sh

build:
	$(SWIFT) build --product midtier
	$(SWIFT) build --product midtier-sandbox

check-config: build
	$(BIN) check-config --config config

clean:
	rm -rf .build data
