#!/usr/bin/env bash
# fuzz.sh — runs every Go fuzz target of roam for a short while, one after
# the other, and prints how many inputs each executed and the total. It
# exits non-zero when a target fails (a crash, a hang or a broken
# invariant); Go then keeps the failing input under the package's
# testdata/fuzz/FuzzXxx/, where plain `go test` runs it from then on.
#
# The targets are the decoders of what roam takes from outside its
# process: the config, policy and secret files, what memberlist hands the
# agent, every peer request, every request on the CLI's socket, the
# migration stream, checkpoint files, and what it reads of /proc.
#
# Usage: scripts/fuzz.sh [REGEXP]   runs the targets whose "PKG NAME"
#                                   matches REGEXP (all without one)
#        scripts/fuzz.sh -l         lists the targets
#        scripts/fuzz.sh -s         sums FUZZLOG: each target's executions
#                                   in the runs logged there since its
#                                   last failure
#        scripts/fuzz.sh -u N [RE]  runs each target in runs of FUZZCHUNK
#                                   (go's -fuzztime, default 5m) until
#                                   FUZZLOG holds N executions for it
#
# Environment:
#   FUZZTIME   how long each target runs (go's -fuzztime: 5s, 30s, 1000x);
#              default 5s
#   FUZZFLAGS  more test flags, as go test spells them (e.g. "-parallel
#              1" on a busy machine; each -X becomes the binary's -test.X;
#              go test's build flags, -race or -tags, are not taken). Go
#              minimizes each new interesting input for up to
#              a minute and does not count those executions, so a short
#              run of a slow target (the agent's peer routes) shows a few
#              dozen; "-fuzzminimizetime 10x" keeps them counted.
#   FUZZLOG    a file each run appends to: date, commit, package, target,
#              executions, and "ok", "stopped" (ended by a signal, with
#              the executions of its last progress line) or "FAIL";
#              `make fuzz` logs to docs/results/fuzz-execs.tsv. A line
#              written by hand with "changed" (and 0 executions) says the
#              code under that target changed: like a failure, it starts
#              the target's count again
#   TMPDIR     the agent's targets keep a job table there (bbolt, an
#              fsync per write): a tmpfs (TMPDIR=/dev/shm) runs them
#              about three times faster than a disk
#
# Coverage guidance counts roam's own packages and the decoders roam
# hands outside bytes to (COVERED below), not every package linked.
# `go test -fuzz` instruments all but a few (runtime, reflect, sync, time
# and the like): net/http, bbolt, memberlist, crypto, most of the
# standard library, 109 KB of counters in the agent's test binary, 23 KB
# here, and each worker scans every counter after every input: over half
# of an agent target's time (measured with perf). So this script
# builds each package's test binary once per run with `go test -c` and
# the compiler flag Go's fuzzing uses (-d=libfuzzer) for those packages
# only, and runs it with -test.fuzz: the same engine, mutator, corpus and
# cache, and 3.6 times the inputs a second on FuzzPeerNote (measured side
# by side). Protobuf's decoder is left out: only FuzzParseStats
# reaches it, and its counters cost a fifth of the rate of every agent
# target.
COVERED="encoding/... go.yaml.in/yaml/v3 archive/tar net/url strconv"

# Go 1.26's fuzzing coordinator may end a run that found nothing with
# "context deadline exceeded" when -fuzztime runs out under load
# (go.dev/issue/75804, fixed in Go 1.27). Such a run, with no failing
# input kept, is reported as "ok (deadline race)", not as a failure; and
# a worker lost while minimizing, whose input then passes, as "ok
# (minimizer lost its worker ...)" (see run below).
set -uo pipefail

cd "$(dirname "$0")/.."

# Every target: package, then name. A new FuzzXxx must be added here (the
# check below fails the run when one is missing).
TARGETS=(
  "./internal/agent/config FuzzParseConfig"
  "./internal/agent FuzzGossipMeta"
  "./internal/agent FuzzGossipState"
  "./internal/agent FuzzLoadMessage"
  "./internal/agent FuzzPeerStart"
  "./internal/agent FuzzPeerUpdates"
  "./internal/agent FuzzPeerSignal"
  "./internal/agent FuzzPeerCancel"
  "./internal/agent FuzzPeerSweep"
  "./internal/agent FuzzPeerNote"
  "./internal/agent FuzzPeerMigrateCheck"
  "./internal/agent FuzzPeerMigrateStream"
  "./internal/agent FuzzPeerQuery"
  "./internal/agent FuzzPeerAdmit"
  "./internal/agent FuzzPeerPolicy"
  "./internal/agent FuzzPeerRestart"
  "./internal/agent FuzzPeerControl"
  "./internal/agent FuzzPeerFiles"
  "./internal/agent FuzzAPI"
  "./internal/migrate FuzzReadHeader"
  "./internal/migrate FuzzReadCheckpoint"
  "./internal/migrate FuzzHeaderValidate"
  "./internal/migrate FuzzReadArchive"
  "./internal/migrate FuzzStreamRoundTrip"
  "./internal/migrate FuzzEstablishedTCP"
  "./internal/migrate FuzzJudge"
  "./internal/migrate FuzzFileMappings"
  "./internal/sched FuzzParsePolicy"
  "./internal/sched FuzzLedgerAdmit"
  "./internal/load FuzzDecodeMessage"
  "./internal/load FuzzMessageRoundTrip"
  "./internal/procfs FuzzParseStat"
  "./internal/ckpt FuzzUnescape"
  "./internal/ckpt FuzzNetworkMounts"
  "./internal/ckpt FuzzParseStats"
  "./internal/secret FuzzParse"
  "./internal/resources FuzzParse"
)

# logged_total PKG NAME: the executions FUZZLOG holds for a target since
# its last failure (a failure is fixed in the code, and counting starts
# again from there) or since a "changed" line.
logged_total() {
  [[ -n ${FUZZLOG:-} && -f $FUZZLOG ]] || { echo 0; return; }
  awk -F'\t' -v p="$1" -v n="$2" '$3 == p && $4 == n { s = ($6 == "FAIL" || $6 == "changed") ? 0 : s + $5 } END { print s + 0 }' "$FUZZLOG"
}

until=0
case ${1:-} in
-l)
  printf '%s\n' "${TARGETS[@]}"
  exit 0
  ;;
-s)
  [[ -n ${FUZZLOG:-} && -f $FUZZLOG ]] || { echo "fuzz: -s needs FUZZLOG, a log file" >&2; exit 2; }
  for t in "${TARGETS[@]}"; do
    read -r pkg name <<<"$t"
    printf '%-20s %-24s %12d execs\n' "$pkg" "$name" "$(logged_total "$pkg" "$name")"
  done
  awk -F'\t' '$6 == "FAIL" { f++ } END { printf "runs that failed: %d\n", f + 0 }' "$FUZZLOG"
  exit 0
  ;;
-u)
  until=${2:-}
  [[ $until =~ ^[0-9]+$ && -n ${FUZZLOG:-} ]] || { echo "fuzz: -u N needs a count and FUZZLOG" >&2; exit 2; }
  shift 2
  ;;
esac
filter=${1:-}
stopped=0
trap 'stopped=1' INT TERM
# A run's output and its workers' logs go, however the script ends.
out= wlogs=
bins=$(mktemp -d)
trap 'rm -rf "$out" "$wlogs" "$bins"' EXIT
trap 'exit 129' HUP

# The list must name every fuzz target in the tree.
missing=0
while IFS= read -r line; do
  file=${line%%:*}
  name=$(sed -E 's/^func (Fuzz[A-Za-z0-9_]*)\(.*/\1/' <<<"${line#*:}")
  pkg="./$(dirname "$file")"
  if ! printf '%s\n' "${TARGETS[@]}" | grep -qxF "$pkg $name"; then
    echo "fuzz: $pkg $name is not in scripts/fuzz.sh's list" >&2
    missing=1
  fi
done < <(grep -rEH --include='*_test.go' '^func Fuzz[A-Za-z0-9_]*\(f \*testing\.F\)' internal cmd test 2>/dev/null)

failed=()
total=0
ran=0
module=$(go list -m)
# The flags of FUZZFLAGS, as the test binary spells them.
binflags=()
# shellcheck disable=SC2086 # FUZZFLAGS is a list of flags
for f in ${FUZZFLAGS:-}; do
  [[ $f == -* && $f != -test.* ]] && f=-test.${f#-}
  binflags+=("$f")
done

# Go's flag for each package whose coverage guides the fuzzing (see
# above); of several -gcflags, each package takes the one it matches.
covflags=()
for p in "$module/..." $COVERED; do
  covflags+=("-gcflags=$p=-d=libfuzzer")
done

fuzzcache=$(go env GOCACHE)/fuzz/$module
# The log credits the commit the binaries are built from.
commit=$(git rev-parse --short HEAD 2>/dev/null)

# testbin PKG: where the package's test binary is.
testbin() { echo "$bins/${1//\//_}.test"; }

# The targets the REGEXP argument selects (all without one).
selected=()
for t in "${TARGETS[@]}"; do
  [[ -n $filter ]] && ! grep -qE -- "$filter" <<<"$t" && continue
  selected+=("$t")
done

# Each package's test binary, built before any run: a build that fails,
# or a stop while building, logs nothing.
for t in "${selected[@]}"; do
  read -r pkg name <<<"$t"
  [[ -x $(testbin "$pkg") ]] && continue
  if ! go test -c "${covflags[@]}" -o "$(testbin "$pkg")" "$pkg" || [[ $stopped -eq 1 ]]; then
    [[ $stopped -eq 1 ]] && exit 130
    echo "fuzz: $pkg: the test binary does not build" >&2
    exit 2
  fi
done

# run PKG NAME FUZZTIME: one run of a target; sets rc and execs.
run() {
  local pkg=$1 name=$2 fuzztime=$3
  out=$(mktemp)
  corpus="$pkg/testdata/fuzz/$name"
  before=$(find "$corpus" -type f 2>/dev/null | wc -l)
  # In a process group of its own, so that a signal to this script can
  # reach the test binary and its workers, which then stop and print
  # their count.
  # Go sends its fuzzing workers' standard error nowhere; the agent's
  # targets write it to a file per worker there (fuzz_stderr_test.go).
  wlogs=$(mktemp -d)
  # The binary runs in the package's directory, as go test runs it, and
  # keeps its corpus where go test keeps it.
  (cd "$pkg" && ROAM_FUZZ_STDERR=$wlogs exec setsid "$(testbin "$pkg")" -test.paniconexit0 -test.timeout=10m0s \
    -test.fuzzcachedir="$fuzzcache/${pkg#./}" -test.run='^$' -test.fuzz="^${name}\$" \
    -test.fuzztime="$fuzztime" "${binflags[@]}") >"$out" 2>&1 &
  wait $! # a signal ends the wait (the trap sets stopped)
  rc=$?
  if [[ $stopped -eq 1 ]]; then
    kill -INT -- -$! 2>/dev/null
    wait $!
    rc=0
  fi
  # A binary without coverage counters would fuzz blind: not a run to
  # count, nor a failure of the target.
  if grep -q 'not built with coverage instrumentation' "$out"; then
    echo "fuzz: $pkg: the test binary has no coverage counters" >&2
    exit 2
  fi
  [[ $rc -ne 0 && $stopped -eq 0 ]] && echo "exit status $rc" >>"$out"
  after=$(find "$corpus" -type f 2>/dev/null | wc -l)
  note=ok
  # A worker that died of a panic or a fatal error failed, whatever Go
  # made of it: its input may pass alone (a goroutine an earlier input
  # started killed it), so neither excuse below applies.
  died=$(grep -lsE '^(panic|fatal error):' "$wlogs"/*)
  if [[ $rc -ne 0 && -z $died && $after -eq $before ]] && grep -q '^    context deadline exceeded$' "$out" &&
    ! grep -qE 'failure while testing seed corpus|Failing input written|panic:' "$out"; then
    rc=0
    note="ok (deadline race)"
  fi
  # Go's fuzzer can lose a worker while it minimizes a new input and
  # then calls that input a failure (go.dev/issue/52569, open), although
  # it passes when run. It is run again, 20 times: a real failure fails
  # there; one that passes is not kept, and the run counts as ok.
  if [[ $rc -ne 0 && -z $died && $stopped -eq 0 ]] && grep -q 'terminated unexpectedly while minimizing: EOF' "$out" &&
    ! grep -q 'panic:' "$out"; then
    kept=$(sed -nE 's#^ *Failing input written to testdata/fuzz/[^/]+/([0-9a-f]+)$#\1#p' "$out" | head -n 1)
    if [[ -n $kept && -f $corpus/$kept ]] && go test -count 20 -run "^${name}\$/^${kept}\$" "$pkg" >>"$out" 2>&1; then
      rm -f "$corpus/$kept"
      rc=0
      note="ok (minimizer lost its worker, go.dev/issue/52569; the input passes 20 runs)"
    fi
  fi
  # The last progress line has the final count.
  execs=$(sed -nE 's/^fuzz: elapsed: [^,]*, execs: ([0-9]+) .*/\1/p' "$out" | tail -n 1)
  execs=${execs:-0}
  total=$((total + execs))
  ran=$((ran + 1))
  result=ok
  [[ $stopped -eq 1 ]] && result=stopped note=stopped
  [[ $rc -ne 0 ]] && result=FAIL
  if [[ -n ${FUZZLOG:-} ]]; then
    printf '%s\t%s\t%s\t%s\t%d\t%s\n' "$(date -u +%FT%TZ)" "$commit" \
      "$pkg" "$name" "$execs" "$result" >>"$FUZZLOG"
  fi
  if [[ $rc -eq 0 ]]; then
    printf '%-20s %-24s %12d execs  %s\n' "$pkg" "$name" "$execs" "$note"
  else
    printf '%-20s %-24s %12d execs  FAIL\n' "$pkg" "$name" "$execs"
    # What go said: the failure, and where it kept the input.
    grep -vE '^fuzz: elapsed: ' "$out" | sed 's/^/    /' | head -n 40
    # A worker that died of a fatal error or a panic: its trace.
    [[ -n $died ]] && while IFS= read -r w; do
      echo "    worker's standard error ($(basename "$w")):"
      grep -vE '^fuzz: elapsed: ' "$w" | sed 's/^/      /' | head -n 40
    done <<<"$died"
    failed+=("$pkg $name")
  fi
  rm -rf "$out" "$wlogs"
}

for t in "${selected[@]}"; do
  read -r pkg name <<<"$t"
  if [[ $until -eq 0 ]]; then
    run "$pkg" "$name" "${FUZZTIME:-5s}"
  else
    while [[ $stopped -eq 0 ]]; do
      left=$((until - $(logged_total "$pkg" "$name")))
      [[ $left -le 0 ]] && break
      # Runs of a time, not of a count: with -fuzztime Nx the
      # coordinator gives each call to a worker the worker's share of
      # what is left (internal/fuzz's peekInput), although the call ends
      # after 100 ms; past half the count one worker's share is all that
      # is left, and the other worker waits. Both cores then did half the
      # inputs a second (FuzzPeerNote: 19,000, then 9,000 from halfway).
      run "$pkg" "$name" "${FUZZCHUNK:-5m}"
      [[ $rc -ne 0 ]] && break
    done
  fi
  [[ $stopped -eq 1 || ${#failed[@]} -gt 0 && $until -gt 0 ]] && break
done

printf '%-45s %12d execs  (%d runs)\n' "total" "$total" "$ran"
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "fuzz: ${#failed[@]} target(s) failed:" >&2
  printf '  %s\n' "${failed[@]}" >&2
  exit 1
fi
exit $missing
