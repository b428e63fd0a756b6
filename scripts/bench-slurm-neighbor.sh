#!/usr/bin/env bash
# bench-slurm-neighbor.sh — issue 46's fourth node: another user's Slurm job
# on node 4 of an emulated cluster with Slurm, timed alone and while a roam
# run inside a Slurm allocation keeps nodes 1 to 3 busy, in interleaved
# rounds (alone first in odd rounds, beside roam first in even ones). It
# prints each run's time (burn's own elapsed seconds) and the ratio of the
# means, beside roam over alone.
#
# usage (as root, from the repository, after make build):
#   scripts/bench-slurm-neighbor.sh [ROUNDS] [CPU_SECONDS]
# ROUNDS (default 5) of each kind; the neighbor's job burns CPU_SECONDS
# (default 2) on a node of 0.4 CPU. The cluster (sneigh, 198.18.95.0/24),
# its two users (roamnba, roamnbb; uids 70811, 70812) and its files are
# removed at the end.
set -euo pipefail
rounds=${1:-5}
work=${2:-2}
name=sneigh
repo=$(cd "$(dirname "$0")/.." && pwd)
roam="$repo/bin/roam"
[ "$(id -u)" = 0 ] || { echo "bench-slurm-neighbor: run as root" >&2; exit 2; }
[ -x "$roam" ] && [ -x "$repo/bin/burn" ] || { echo "bench-slurm-neighbor: make build first" >&2; exit 2; }

dir=$(mktemp -d /var/lib/roam-neighbor.XXXXXX)
chmod 755 "$dir"
users=()
cleanup() {
	"$roam" --cluster "$name" cluster down >/dev/null 2>&1 || true
	for u in "${users[@]}"; do userdel "$u" >/dev/null 2>&1 || true; done
	rm -rf "$dir"
}
trap cleanup EXIT
for u in roamnba:70811 roamnbb:70812; do
	if ! id "${u%:*}" >/dev/null 2>&1; then
		useradd -M -d "$dir" -s /bin/sh -u "${u#*:}" "${u%:*}"
		users+=("${u%:*}")
	fi
	mkdir "$dir/${u%:*}"
	chown "${u%:*}:" "$dir/${u%:*}"
done

"$roam" --cluster "$name" cluster up --nodes 4 --cpu 0.4 --subnet 198.18.95.0/24 --slurm >/dev/null
export SLURM_CONF=/run/roam/clusters/$name/slurm/slurm.conf
as() { local u=$1; shift; runuser -u "$u" -- env SLURM_CONF="$SLURM_CONF" PATH="$repo/bin:/usr/bin:/bin" "$@"; }

# running: how many of roam's jobs run (root sees every user's).
running() { "$roam" --cluster "$name" --node 1 ps -a --json | grep -o '"state": *"running"' | wc -l; }

# neighbor: the other user's job on n4, alone on its node; prints its time.
neighbor() {
	local out="$dir/roamnbb/out.$1"
	(cd "$dir/roamnbb" && as roamnbb sbatch --wait -w n4 -o "$out" --wrap "burn $work 0" >/dev/null)
	sed -n 's/.*elapsed=\([0-9.]*\).*/\1/p' "$out"
}

# beside: the neighbor's job while roam's run in an allocation on n1-n3
# keeps their CPUs busy (3 jobs a node, each longer than the neighbor's).
beside() {
	local job
	job=$(cd "$dir/roamnba" && as roamnba sbatch --parsable -w n1,n2,n3 -o "$dir/roamnba/out.$1" \
		--wrap "export ROAM_CLUSTER=$name ROAM_NODE=\${SLURMD_NODENAME#n}; roam run -n 9 -- burn 600 0")
	for _ in $(seq 600); do [ "$(running)" -ge 9 ] && break; sleep 0.1; done
	[ "$(running)" -ge 9 ] || { echo "bench-slurm-neighbor: roam's run did not start" >&2; exit 1; }
	neighbor "$1.beside"
	as roamnba scancel "$job"
	for _ in $(seq 600); do [ "$(running)" -eq 0 ] && break; sleep 0.1; done
}

alone=() with=()
for r in $(seq "$rounds"); do
	if [ $((r % 2)) = 1 ]; then
		alone+=("$(neighbor "$r.alone")"); with+=("$(beside "$r")")
	else
		with+=("$(beside "$r")"); alone+=("$(neighbor "$r.alone")")
	fi
	echo "round $r: alone ${alone[-1]} s, beside roam ${with[-1]} s"
done
awk -v a="${alone[*]}" -v w="${with[*]}" 'BEGIN {
	n = split(a, x, " "); split(w, y, " ")
	for (i = 1; i <= n; i++) { sa += x[i]; sw += y[i] }
	printf "mean: alone %.3f s, beside roam %.3f s, ratio %.3f (%d rounds each)\n", sa / n, sw / n, sw / sa, n
}'
