#!/usr/bin/env bash
# fuzz.sh — runs every Go fuzz target of roam for a short while, one after
# the other, and prints how many inputs each executed and the total. It
# exits non-zero when a target fails (a crash, a hang or a broken
# invariant); Go then keeps the failing input under the package's
# testdata/fuzz/FuzzXxx/, where plain `go test` runs it from then on.
#
# The targets are the decoders of what roam takes from outside its
# process: the config, policy and secret files, what memberlist hands the
# agent, every peer request, the migration stream, and what it reads of
# /proc.
#
# Usage: scripts/fuzz.sh [REGEXP]   runs the targets whose "PKG NAME"
#                                   matches REGEXP (all without one)
#        scripts/fuzz.sh -l         lists the targets
#
# Environment:
#   FUZZTIME   how long each target runs (go's -fuzztime: 5s, 30s, 1000x);
#              default 5s
#   FUZZFLAGS  more flags for go test, e.g. "-parallel 1" on a busy
#              machine. Go minimizes each new interesting input for up to
#              a minute and does not count those executions, so a short
#              run of a slow target (the agent's peer routes) shows a few
#              dozen; "-fuzzminimizetime 10x" keeps them counted.
#   TMPDIR     the agent's targets keep a job table there (bbolt, an
#              fsync per write): a tmpfs (TMPDIR=/dev/shm) runs them
#              about three times faster than a disk
#
# Go 1.26's fuzzing coordinator may end a run that found nothing with
# "context deadline exceeded" when -fuzztime runs out under load
# (go.dev/issue/75804, fixed in Go 1.27). Such a run, with no failing
# input kept, is reported as "ok (deadline race)", not as a failure.
set -uo pipefail

cd "$(dirname "$0")/.."

# Every target: package, then name. A new FuzzXxx must be added here (the
# check below fails the run when one is missing).
TARGETS=(
  "./internal/agent FuzzParseConfig"
  "./internal/agent FuzzGossipMeta"
  "./internal/agent FuzzGossipState"
  "./internal/agent FuzzLoadMessage"
  "./internal/agent FuzzPeerStart"
  "./internal/agent FuzzPeerUpdates"
  "./internal/agent FuzzPeerSignal"
  "./internal/agent FuzzPeerNote"
  "./internal/agent FuzzPeerMigrateCheck"
  "./internal/agent FuzzPeerMigrateStream"
  "./internal/agent FuzzPeerQuery"
  "./internal/agent FuzzPeerAdmit"
  "./internal/agent FuzzPeerPolicy"
  "./internal/migrate FuzzReadHeader"
  "./internal/migrate FuzzHeaderValidate"
  "./internal/migrate FuzzReadArchive"
  "./internal/migrate FuzzStreamRoundTrip"
  "./internal/migrate FuzzEstablishedTCP"
  "./internal/migrate FuzzPins"
  "./internal/migrate FuzzFileMappings"
  "./internal/sched FuzzParsePolicy"
  "./internal/sched FuzzLedgerAdmit"
  "./internal/load FuzzDecodeMessage"
  "./internal/load FuzzMessageRoundTrip"
  "./internal/procfs FuzzParseStat"
  "./internal/ckpt FuzzUnescape"
  "./internal/ckpt FuzzNetworkMounts"
  "./internal/secret FuzzParse"
)

if [[ ${1:-} == -l ]]; then
  printf '%s\n' "${TARGETS[@]}"
  exit 0
fi
filter=${1:-}

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
for t in "${TARGETS[@]}"; do
  [[ -n $filter ]] && ! grep -qE -- "$filter" <<<"$t" && continue
  read -r pkg name <<<"$t"
  out=$(mktemp)
  corpus="$pkg/testdata/fuzz/$name"
  before=$(find "$corpus" -type f 2>/dev/null | wc -l)
  # shellcheck disable=SC2086 # FUZZFLAGS is a list of flags
  go test -run '^$' -fuzz "^${name}\$" -fuzztime "${FUZZTIME:-5s}" ${FUZZFLAGS:-} "$pkg" >"$out" 2>&1
  rc=$?
  after=$(find "$corpus" -type f 2>/dev/null | wc -l)
  note=ok
  if [[ $rc -ne 0 && $after -eq $before ]] && grep -q '^    context deadline exceeded$' "$out" &&
    ! grep -qE 'failure while testing seed corpus|Failing input written|panic:' "$out"; then
    rc=0
    note="ok (deadline race)"
  fi
  # The last progress line has the final count.
  execs=$(sed -nE 's/^fuzz: elapsed: [^,]*, execs: ([0-9]+) .*/\1/p' "$out" | tail -n 1)
  execs=${execs:-0}
  total=$((total + execs))
  ran=$((ran + 1))
  if [[ $rc -eq 0 ]]; then
    printf '%-20s %-24s %12d execs  %s\n' "$pkg" "$name" "$execs" "$note"
  else
    printf '%-20s %-24s %12d execs  FAIL\n' "$pkg" "$name" "$execs"
    # What go said: the failure, and where it kept the input.
    grep -vE '^fuzz: elapsed: ' "$out" | sed 's/^/    /' | head -n 40
    failed+=("$pkg $name")
  fi
  rm -f "$out"
done

printf '%-45s %12d execs  (%d targets)\n' "total" "$total" "$ran"
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "fuzz: ${#failed[@]} target(s) failed:" >&2
  printf '  %s\n' "${failed[@]}" >&2
  exit 1
fi
exit $missing
