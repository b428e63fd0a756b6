#!/usr/bin/env bash
# demo.sh — the heterogeneous 4-node cluster (0.8, 0.4, 0.4, 0.2 CPUs), 12
# equal CPU jobs typed on the slowest node, the cluster view every few
# seconds while the balance policy spreads them, then a summary: makespan
# against the ideal and the migrations with their reasons. Tears the cluster
# down, also on failure or Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."
ROAM=bin/roam
export ROAM_CLUSTER=demo
SUBNET=198.18.200.0/24
WORK=6   # CPU-seconds per job

runpid=
stage=
cleanup() {
  [ -n "$runpid" ] && kill "$runpid" 2>/dev/null || true
  $ROAM cluster down >/dev/null 2>&1 || true
  [ -n "$stage" ] && rm -rf "$stage"
  return 0
}
trap cleanup EXIT INT TERM

# A job's /tmp and /var/tmp are its own, and start empty: a project cloned
# under them (/tmp/roam) has its program and working directory staged
# where every job sees them, as the tests' are.
PROG="$PWD/bin/burn"
JOBDIR="$PWD"
case "$PWD/" in
/tmp/* | /var/tmp/*)
  stage=$(mktemp -d /var/lib/roam-demo.XXXXXX)
  chmod 755 "$stage"
  cp bin/burn "$stage/"
  PROG="$stage/burn" JOBDIR="$stage"
  ;;
esac

$ROAM cluster down >/dev/null 2>&1 || true
echo "== roam cluster up --nodes 4 --cpu 0.8,0.4,0.4,0.2 --scheduler balance"
$ROAM cluster up --nodes 4 --cpu 0.8,0.4,0.4,0.2 --subnet $SUBNET --scheduler balance
# Every node must know every other's load before the jobs come.
for i in $(seq 1 60); do
  if $ROAM --node 4 nodes --json | python3 -c '
import json, sys
n = json.load(sys.stdin)
sys.exit(0 if len(n) == 4 and all(x["alive"] and (x.get("self") or x["load"] is not None) for x in n) else 1)'; then break; fi
  sleep 0.25
done
echo
echo "== roam --node 4 run -n 12 --on 4 bin/burn $WORK   (typed on node 4, 0.2 CPUs)"
start=$(date +%s.%N)
(cd "$JOBDIR" && "$OLDPWD/$ROAM" --node 4 run -n 12 --on 4 "$PROG" $WORK) >/tmp/roam-demo-run.$$ 2>&1 &
runpid=$!
view() {
  echo
  echo "-- $(printf '%5.1f' "$(echo "$(date +%s.%N) - $start" | bc)") s --"
  $ROAM --node 1 nodes
  $ROAM --node 1 ps -a | awk 'NR==1 || $5=="running"' | awk '{n[$4]++} END {printf "running jobs per node:"; for (k in n) if (k!="NODE") printf "  node %s: %d", k, n[k]; print ""}'
}
while kill -0 "$runpid" 2>/dev/null; do
  view
  sleep 4
done
wait "$runpid"; status=$?
runpid=
end=$(date +%s.%N)
makespan=$(echo "$end - $start" | bc)
ideal=$(echo "12 * $WORK / 1.8" | bc -l)
echo
echo "== roam run returned $status; its output ends:"
tail -n 3 /tmp/roam-demo-run.$$; rm -f /tmp/roam-demo-run.$$
echo
echo "== roam events   (every decision, with its reason)"
$ROAM --node 1 events | grep -v ' place ' | cut -c1-160
echo
printf "makespan %.1f s; ideal (total work / total capacity) %.1f s; ratio %.2f\n" "$makespan" "$ideal" "$(echo "$makespan / $ideal" | bc -l)"
printf "static placement would leave 3 jobs on the 0.2-CPU node: %.1f s\n" "$(echo "3 * $WORK / 0.2" | bc -l)"
echo
echo "== roam cluster down"
cleanup
trap - EXIT
echo "left behind: $(ip netns list | grep -c roam-demo- || true) namespaces"
exit "$status"
