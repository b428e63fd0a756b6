#!/usr/bin/env bash
# demo.sh — brings up a heterogeneous 4-node emulated cluster, puts CPU load
# on the slowest node, shows what every node's agent knows, and tears the
# cluster down (also on failure or Ctrl-C).
set -euo pipefail
cd "$(dirname "$0")/.."
ROAM=bin/roam
export ROAM_CLUSTER=demo
SUBNET=198.18.200.0/24

pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  $ROAM cluster down >/dev/null 2>&1 || true
}
trap cleanup EXIT INT TERM

$ROAM cluster down >/dev/null 2>&1 || true
echo "== roam cluster up --nodes 4 --cpu 0.8,0.4,0.4,0.2"
$ROAM cluster up --nodes 4 --cpu 0.8,0.4,0.4,0.2 --subnet $SUBNET
$ROAM cluster status
echo
echo "== two CPU-bound loops on node 4 (0.2 cores) and one on node 1 (0.8 cores)"
for n in 4 4 1; do
  $ROAM cluster exec $n -- sh -c 'while :; do :; done' & pids+=($!)
done
# Let the load settle and spread through the load vectors (1 s interval).
for i in $(seq 1 30); do
  sleep 0.5
  if $ROAM --node 2 nodes --json | python3 -c '
import json, sys
n = {x["id"]: x for x in json.load(sys.stdin)}
sys.exit(0 if all(n[i]["load"] is not None for i in "14") and n["4"]["load"] > 8.5 else 1)'; then break; fi
done
for n in 1 2 3 4; do
  echo
  echo "== roam --node $n nodes   (what node $n knows; * marks itself)"
  $ROAM --node $n nodes
done
echo
echo "Node 4 runs 2 loops on 0.2 cores (load ~10); node 1 runs 1 on 0.8 cores (load ~1.25)."
echo
echo "== roam --node 4 run -n 6 -- sh -c 'echo started; sleep 2; exit 0'   (typed on node 4)"
$ROAM --node 4 run -n 6 -- sh -c 'echo started; sleep 2; exit 0'
echo "exit status: $?"
echo
echo "== roam --node 4 ps -a   (where they ran: the least-loaded nodes per unit of capacity)"
$ROAM --node 4 ps -a
echo
echo "== roam cluster down"
cleanup
pids=()
trap - EXIT
echo "left behind: $(ip netns list | grep -c roam-demo- || true) namespaces"
