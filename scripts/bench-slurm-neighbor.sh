#!/usr/bin/env bash
# bench-slurm-neighbor.sh — issue 46's fourth node: another user's Slurm job
# on node 4 of an emulated cluster with Slurm, timed alone, beside a plain
# Slurm job keeping nodes 1 to 3 busy (the same CPU-bound load, no roam),
# and beside a roam run inside a Slurm allocation keeping them busy, in
# interleaved rounds (the three in a rotating order). It prints each
# run's time (burn's own elapsed seconds), the means and the ratios.
#
# The emulated nodes share this machine's CPUs, which real nodes do not:
# while it runs, the cluster's groups get the highest CPU weight on this
# machine (cgroup v1 cpu.shares of roam/ and roam/sneigh), so each node
# gets its CPU quota whatever else this machine runs, and n4's job time
# depends on what runs on n4 alone: its slurmd, and its roamd, which this
# script moves into n4's groups (roam's agent beside the neighbor's job
# is the effect measured). It prints each
# round's ratios and their mean with a 95 % interval (Student's t).
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

cg=/sys/fs/cgroup/cpu
[ -f "$cg/cpu.shares" ] || { echo "bench-slurm-neighbor: needs cgroup v1's cpu controller at $cg" >&2; exit 2; }
dir=$(mktemp -d /var/lib/roam-neighbor.XXXXXX)
chmod 755 "$dir"
users=()
oldshares=$(cat "$cg/roam/cpu.shares" 2>/dev/null || echo 1024)
cleanup() {
	"$roam" --cluster "$name" cluster down >/dev/null 2>&1 || true
	[ -d "$cg/roam" ] && echo "$oldshares" >"$cg/roam/cpu.shares" 2>/dev/null || true
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
for g in "$cg/roam" "$cg/roam/$name"; do echo 262144 >"$g/cpu.shares"; done
# The agents run outside their nodes' groups (emu starts them in this
# machine's root group, which the weight above would starve): n4's goes
# into n4's groups, where its CPU is the node's, as on a real node; the
# others' to a group of the cluster's own with the highest weight.
acct=/sys/fs/cgroup/cpuacct
mkdir -p "$cg/roam/$name/agents" "$acct/roam/$name/agents"
echo 262144 >"$cg/roam/$name/agents/cpu.shares"
"$roam" --cluster "$name" --json cluster status | jq -r '.nodes[] | "\(.id) \(.pid)"' |
	while read -r id pid; do
		g=agents
		[ "$id" = 4 ] && g=n4
		echo "$pid" >"$cg/roam/$name/$g/cgroup.procs"
		echo "$pid" >"$acct/roam/$name/$g/cgroup.procs"
	done
as() { local u=$1; shift; runuser -u "$u" -- env SLURM_CONF="$SLURM_CONF" PATH="$repo/bin:/usr/bin:/bin" "$@"; }

# burning: how many of the allocation user's burns run on this machine.
burning() { pgrep -c -u roamnba -x burn || true; }

# neighbor: the other user's job on n4, alone on its node; prints its time.
neighbor() {
	local out="$dir/roamnbb/out.$1"
	(cd "$dir/roamnbb" && as roamnbb sbatch --wait -w n4 -o "$out" --wrap "burn $work 0" >/dev/null)
	sed -n 's/.*elapsed=\([0-9.]*\).*/\1/p' "$out"
}

# beside: the neighbor's job while the allocation user's job on n1-n3
# keeps their CPUs busy (3 burns a node, each longer than the neighbor's):
# a roam run inside the allocation (roam), or Slurm's own step (slurm).
beside() {
	local job wrap
	if [ "$2" = roam ]; then
		wrap="export ROAM_CLUSTER=$name ROAM_NODE=\${SLURMD_NODENAME#n}; roam run -n 9 -- burn 600 0"
	else
		wrap="srun -n 3 --ntasks-per-node=1 sh -c 'burn 600 0 & burn 600 0 & burn 600 0; wait'"
	fi
	job=$(cd "$dir/roamnba" && as roamnba sbatch --parsable -w n1,n2,n3 -o "$dir/roamnba/out.$1.$2" --wrap "$wrap")
	for _ in $(seq 600); do [ "$(burning)" -ge 9 ] && break; sleep 0.1; done
	[ "$(burning)" -ge 9 ] || { echo "bench-slurm-neighbor: the $2 load did not start" >&2; exit 1; }
	neighbor "$1.$2"
	as roamnba scancel "$job"
	for _ in $(seq 600); do [ "$(burning)" -eq 0 ] && break; sleep 0.1; done
}

one() {
	case $2 in
	alone) neighbor "$1.alone" ;;
	*) beside "$1" "$2" ;;
	esac
}

declare -A times
kinds=(alone slurm roam)
for r in $(seq "$rounds"); do
	line="round $r:"
	for i in 0 1 2; do
		k=${kinds[$(((r + i) % 3))]}
		t=$(one "$r" "$k")
		times[$k]="${times[$k]:-} $t"
		line="$line $k $t s,"
	done
	echo "${line%,}"
done
awk -v a="${times[alone]}" -v s="${times[slurm]}" -v w="${times[roam]}" '
# ci prints the mean of v[1..n] and its 95 % interval (Student t).
function ci(v, n, what,   i, m, d, t) {
	split("12.71 4.30 3.18 2.78 2.57 2.45 2.36 2.31 2.26 2.23 2.20 2.18 2.16 2.14 2.13 2.12 2.11 2.10 2.09 2.09", t, " ")
	for (i = 1; i <= n; i++) m += v[i]
	m /= n
	for (i = 1; i <= n; i++) d += (v[i] - m) ^ 2
	d = n > 1 ? t[n > 21 ? 20 : n - 1] * sqrt(d / (n - 1) / n) : 0
	printf "%s: %.3f ± %.3f (95 %%, %d rounds)\n", what, m, d, n
}
BEGIN {
	n = split(a, x, " "); split(s, y, " "); split(w, z, " ")
	for (i = 1; i <= n; i++) { sa += x[i]; ss += y[i]; sw += z[i]; ra[i] = z[i] / x[i]; rs[i] = z[i] / y[i]; rx[i] = y[i] / x[i] }
	printf "mean of %d: alone %.2f s, beside Slurm'"'"'s load %.2f s, beside roam %.2f s\n", n, sa / n, ss / n, sw / n
	ci(ra, n, "beside roam / alone, by round")
	ci(rs, n, "beside roam / beside Slurm'"'"'s load, by round")
	ci(rx, n, "beside Slurm'"'"'s load / alone, by round")
}'
