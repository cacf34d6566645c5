#!/usr/bin/env bash
# make fuzz (docs/reliability.md, "Fuzzing"): builds midtier-fuzz with libFuzzer and
# AddressSanitizer (in .build-fuzz; the first build takes minutes, it rebuilds the
# dependencies), then runs every fuzz target for FUZZ_SECONDS (default 60) from a copy of its
# seed corpus (Tests/Fuzz/corpus/<target>/; the committed corpus stays small), after replaying
# the target's committed crashers (Tests/Fuzz/crashers/<target>/) once each. Inputs that
# crash, trap, trip a sanitizer, time out (10 s) or take more than 2 GB land in
# $FUZZ_FINDINGS/<target>/ (default .build-fuzz/findings). Prints per target the executions,
# the coverage (cov:/ft: of libFuzzer's last status line) and the findings; exits 1 if a
# target found something.
#
#   FUZZ_SECONDS=300 make fuzz
#   FUZZ_TARGETS="json client-log" make fuzz
#   FUZZ_FLAGS=-detect_leaks=0 …   (more libFuzzer flags, for every target)
#   FUZZ_SKIP_BUILD=1 …   (use the binary already built)
set -euo pipefail
cd "$(dirname "$0")/.."

SWIFT=${SWIFT:-swift}
SECONDS_EACH=${FUZZ_SECONDS:-60}
ALL_TARGETS="json client-log client-log-lines proxy-path atom discovery push-message push-bulk push-capability jwt saml token-response set-cookie metadata config storage subject-pattern"
TARGETS=${FUZZ_TARGETS:-$ALL_TARGETS}
SCRATCH=.build-fuzz
FINDINGS=${FUZZ_FINDINGS:-$SCRATCH/findings}
BIN=$SCRATCH/debug/midtier-fuzz
# The Swift runtime's crash handler and ASan get in each other's way (ASan reports the handler's
# own memory reads); without it, a Swift trap is reported by libFuzzer with the whole stack.
export SWIFT_BACKTRACE=enable=no

# The longest input worth trying, per target.
max_len() {
  case "$1" in
    client-log|metadata|saml|atom) echo 65536 ;;
    json|push-message|push-bulk|push-capability|token-response|config|client-log-lines) echo 16384 ;;
    jwt) echo 8192 ;;
    *) echo 4096 ;;
  esac
}

for target in $TARGETS; do
  case " $ALL_TARGETS " in *" $target "*) ;; *) echo "fuzz: unknown target $target (targets: $ALL_TARGETS)" >&2; exit 2 ;; esac
done

if [ -z "${FUZZ_SKIP_BUILD:-}" ]; then
  echo "fuzz: building $BIN (libFuzzer + AddressSanitizer)"
  # grep hides ld.gold's harmless "Cannot export local symbol '__asan_…'" warnings.
  if ! "$SWIFT" build --scratch-path "$SCRATCH" --product midtier-fuzz \
    -Xswiftc -sanitize=fuzzer,address -Xswiftc -parse-as-library -Xswiftc -DFUZZING 2>&1 \
    | { grep -v "Cannot export local symbol" || true; }; then
    echo "fuzz: the build failed" >&2
    exit 1
  fi
fi
[ -x "$BIN" ] || { echo "fuzz: $BIN is missing" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$FINDINGS"
summary=()
failed=0
for target in $TARGETS; do
  mkdir -p "$work/$target" "$FINDINGS/$target"
  # First the committed crashers, once each, under the sanitizer: a finding that only the
  # sanitized build shows (a leak) comes back here, not only in a run that happens on it again.
  crashers=$(find "Tests/Fuzz/crashers/$target" -type f ! -name '.*' | sort)
  if [ -n "$crashers" ]; then
    replay="$FINDINGS/$target/crashers.log"
    # shellcheck disable=SC2086
    if ! MIDTIER_FUZZ_TARGET=$target "$BIN" -timeout=10 -rss_limit_mb=2048 ${FUZZ_FLAGS:-} $crashers >"$replay" 2>&1; then
      failed=1
      summary+=("$(printf '%-17s committed crashers: FINDING (log: %s)' "$target" "$replay")")
      grep -m1 -E 'ERROR: (libFuzzer|AddressSanitizer|LeakSanitizer)|Fatal error|SUMMARY' "$replay" >&2 || true
    else
      summary+=("$(printf '%-17s committed crashers: %s replayed, none found anything' "$target" "$(echo "$crashers" | wc -l)")")
    fi
  fi
  cp -R "Tests/Fuzz/corpus/$target" "$work/$target/corpus"
  log="$FINDINGS/$target/fuzz.log"
  before=$(ls "$FINDINGS/$target" | grep -E '^(crash|leak|timeout|oom|slow-unit)-' | sort || true)
  echo "fuzz: $target for ${SECONDS_EACH}s (log: $log)"
  status=0
  MIDTIER_FUZZ_TARGET=$target "$BIN" "$work/$target/corpus" \
    -max_total_time="$SECONDS_EACH" -max_len="$(max_len "$target")" -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="$FINDINGS/$target/" -print_final_stats=1 ${FUZZ_FLAGS:-} >"$log" 2>&1 || status=$?
  last=$(grep -E '^#[0-9]+' "$log" | tail -1 || true)
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  cov=$(echo "$last" | grep -oE 'cov: [0-9]+' | awk '{print $2}' || true)
  ft=$(echo "$last" | grep -oE 'ft: [0-9]+' | awk '{print $2}' || true)
  corpus=$(ls "$work/$target/corpus" | wc -l)
  after=$(ls "$FINDINGS/$target" | grep -E '^(crash|leak|timeout|oom|slow-unit)-' | sort || true)
  new=$(comm -13 <(echo "$before") <(echo "$after") | grep -v '^$' | grep -v '^slow-unit-' || true)
  line=$(printf '%-17s %5ss  execs %-9s cov %-6s ft %-6s corpus %-5s' "$target" "$SECONDS_EACH" "${execs:-?}" "${cov:-?}" "${ft:-?}" "$corpus")
  if [ -n "$new" ] || [ "$status" -ne 0 ]; then
    failed=1
    line+="  FINDING (exit $status):"
    for file in $new; do line+=" $FINDINGS/$target/$file"; done
    grep -m1 -E 'ERROR: (libFuzzer|AddressSanitizer)|Fatal error|SUMMARY' "$log" >&2 || true
  else
    line+="  no finding"
  fi
  summary+=("$line")
done

echo
echo "fuzz: results (findings in $FINDINGS; replay one: $BIN <file> with MIDTIER_FUZZ_TARGET=<target>)"
printf '%s\n' "${summary[@]}"
exit $failed
