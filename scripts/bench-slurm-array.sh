#!/usr/bin/env bash
# bench-slurm-array.sh — issue 46's line 3: one sweep of CPU-bound jobs of
# heavy-tailed lengths, run by a user of an emulated cluster with Slurm
# (A) as a Slurm job array, one task a job, each placed by Slurm where a
# CPU is free, and (B) as one sbatch allocation of the same nodes running
# `roam run --args-from` of the same jobs (3 at once for each CPU the
# allocation holds, the rest pending in the home's queue, moved among the
# allocation's nodes by the policy); node 2 carries a background load
# that comes and goes, the same in both. A and B alternate in rounds (each
# round the other first). It prints each side's makespan and mean slowdown,
# their means over the rounds and the ratios roam / array.
#
# A job's slowdown is (its end − the sweep's submission) / its CPU-seconds,
# as roam bench sweep counts it; its end is when its last line (burn's
# "done") reached its output file (the file's mtime), on either side. The
# makespan is the last end − the submission.
#
# Fairness: every node has a CPU quota of CPU cores and is one CPU to Slurm
# (ceil), so the array runs one task a node at a time, each with the whole
# node, and the allocation (--nodes=NODES, one CPU a node) holds the same
# CPUs; roam runs 3 of its jobs at once for each of them. The background
# load (bgload, seed 002's: a process busy and idle in turn for random
# times of BG_MIN to BG_MAX s, default 0 to 5, the same seed for both
# sides of a round) runs in a group of its own under node 2 with the highest CPU
# weight and BG_SHARE (default 0.5) of the node's quota: while busy it
# takes that share of node 2, whatever runs beside it (its CPU time is
# printed for each side), and leaves the rest to the jobs and Slurm's and
# roam's daemons (with the whole node, it held slurmstepd there for
# seconds). The cluster's groups get the highest CPU
# weight on this machine (cgroup v1 cpu.shares) while the benchmark runs,
# so each node gets its quota whatever else this machine runs (real nodes
# do not share CPUs), and so do the agents, each served first in a group
# of the cluster's.
#
# usage (as root, from the repository, after make build):
#   scripts/bench-slurm-array.sh [ROUNDS] [JOBS] [SEED]
# ROUNDS (default 5) of each side, each round its own sweep of JOBS
# (default 48) jobs of lengths drawn as roam bench sweep draws them (Pareto
# of shape 1.1 truncated to 0.2 to 8 CPU-s) with seed SEED+ROUND (SEED
# default 46), the same for both sides: the array runs its tasks in index
# order, so one sweep's order alone would favour or hurt it by chance.
# NODES (default 4) nodes of CPU (default 0.25) cores. With OUT set, each
# side's jobs (index, CPU-s, end, slowdown) go to OUT/ROUND.SIDE. The
# cluster (sarray, 198.18.108.0/24), its user (roamsw, uid 70821) and its
# files are removed at the end.
set -euo pipefail
rounds=${1:-5}
jobs=${2:-48}
seed=${3:-46}
nodes=${NODES:-4}
cpu=${CPU:-0.25}
bgshare=${BG_SHARE:-0.5}
bgmin=${BG_MIN:-0}
bgmax=${BG_MAX:-5}
name=sarray
repo=$(cd "$(dirname "$0")/.." && pwd)
roam="$repo/bin/roam"
[ "$(id -u)" = 0 ] || { echo "bench-slurm-array: run as root" >&2; exit 2; }
for p in roam burn bgload; do
	[ -x "$repo/bin/$p" ] || { echo "bench-slurm-array: make build first" >&2; exit 2; }
done
# The background's settings, checked before anything starts: bgload
# refuses spells it cannot run, and a share outside (0, 1] is no quota.
"$repo/bin/bgload" 1 "$bgmin-$bgmax" 0.01 >/dev/null || { echo "bench-slurm-array: BG_MIN=$bgmin BG_MAX=$bgmax: not spells bgload runs" >&2; exit 2; }
awk -v s="$bgshare" 'BEGIN { exit !(s ~ /^[0-9.]+$/ && s > 0 && s <= 1) }' || { echo "bench-slurm-array: BG_SHARE=$bgshare: want a share of node 2 above 0 and at most 1" >&2; exit 2; }
cg=/sys/fs/cgroup
[ -f "$cg/cpu/cpu.shares" ] || { echo "bench-slurm-array: needs cgroup v1's cpu controller at $cg/cpu" >&2; exit 2; }

dir=$(mktemp -d /var/lib/roam-array.XXXXXX)
chmod 755 "$dir"
user=roamsw
made=
oldshares=$(cat "$cg/cpu/roam/cpu.shares" 2>/dev/null || echo 1024)
cleanup() {
	stopbg || true
	"$roam" --cluster "$name" cluster down >/dev/null 2>&1 || true
	[ -z "$made" ] || userdel "$user" >/dev/null 2>&1 || true
	[ -d "$cg/cpu/roam" ] && echo "$oldshares" >"$cg/cpu/roam/cpu.shares" 2>/dev/null || true
	rm -rf "$dir"
}
trap cleanup EXIT
if ! id "$user" >/dev/null 2>&1; then
	useradd -M -d "$dir" -s /bin/sh -u 70821 "$user"
	made=1
fi
mkdir "$dir/$user"
chown "$user:" "$dir/$user"

# sweep writes round $1's sweep: line i+1 is index i's CPU-seconds.
sweep() {
	awk -v n="$jobs" -v s="$((seed + $1))" 'BEGIN { srand(s); for (i = 0; i < n; i++) {
		x = 0.2 / (1 - rand() * (1 - (0.2 / 8) ^ 1.1)) ^ (1 / 1.1); printf "%.2f\n", (x > 8 ? 8 : x < 0.2 ? 0.2 : x) } }' >"$dir/lens.$1"
	chmod 644 "$dir/lens.$1"
}

"$roam" --cluster "$name" cluster up --nodes "$nodes" --cpu "$cpu" --subnet 198.18.108.0/24 --slurm >/dev/null
export SLURM_CONF=/run/roam/clusters/$name/slurm/slurm.conf
as() { runuser -u "$user" -- env SLURM_CONF="$SLURM_CONF" PATH="$repo/bin:/usr/bin:/bin" "$@"; }
for g in "$cg/cpu/roam" "$cg/cpu/roam/$name"; do echo 262144 >"$g/cpu.shares"; done
# The agents run outside their nodes' groups (emu starts them in this
# machine's root group, which the weight above would starve): here they
# go to a group of the cluster's own with the highest weight and no quota.
for c in cpu cpuacct; do
	mkdir -p "$cg/$c/roam/$name/agents"
	for p in $("$roam" --cluster "$name" --json cluster status | jq -r '.nodes[].pid'); do
		echo "$p" >"$cg/$c/roam/$name/agents/cgroup.procs"
	done
done
echo 262144 >"$cg/cpu/roam/$name/agents/cpu.shares"

# The background load's group, under node 2 in cpu and cpuacct.
bgcpu=$cg/cpu/roam/$name/n2/bg
bgacct=$cg/cpuacct/roam/$name/n2/bg
mkdir -p "$bgcpu" "$bgacct"
echo 262144 >"$bgcpu/cpu.shares"
echo 100000 >"$bgcpu/cpu.cfs_period_us"
awk -v c="$cpu" -v s="$bgshare" 'BEGIN { printf "%d\n", c * s * 100000 }' >"$bgcpu/cpu.cfs_quota_us"
startbg() {
	"$roam" --cluster "$name" cluster exec 2 -- sh -c \
		"echo \$\$ >$bgcpu/cgroup.procs && echo \$\$ >$bgacct/cgroup.procs && exec $repo/bin/bgload 1 $bgmin-$bgmax 3600 $1" >/dev/null &
	for _ in $(seq 100); do [ -s "$bgcpu/cgroup.procs" ] && break; sleep 0.05; done
}
stopbg() {
	local p
	for p in $(cat "$bgcpu/cgroup.procs" 2>/dev/null); do kill "$p" 2>/dev/null || true; done
	for _ in $(seq 100); do [ -s "$bgcpu/cgroup.procs" ] || break; sleep 0.05; done
	wait 2>/dev/null || true
}

# quiet waits until no job of the user's runs and every Slurm node is idle.
quiet() {
	for _ in $(seq 600); do
		if ! pgrep -u "$user" -x burn >/dev/null && [ -z "$(sinfo -h -o %t | grep -v '^idle$')" ]; then
			return 0
		fi
		sleep 0.1
	done
	echo "bench-slurm-array: the cluster did not become idle" >&2
	exit 1
}

# side runs one side of round $1 ($2: array or roam) and prints its
# makespan, mean slowdown, jobs done, the background's CPU-s and (roam)
# the moves of its jobs.
side() {
	local d="$dir/$user/$1.$2" t0 bg0 bg1 moves=- lens="$dir/lens.$1"
	mkdir "$d"
	chown "$user:" "$d"
	quiet
	bg0=$(cat "$bgacct/cpuacct.usage")
	startbg "$((seed + $1))"
	t0=$(date +%s.%N)
	if [ "$2" = array ]; then
		(cd "$d" && as sbatch --wait --array=0-$((jobs - 1)) --mem=64M -o "$d/out-%a" \
			--wrap "burn \$(sed -n \"\$((SLURM_ARRAY_TASK_ID + 1))p\" $lens) 0" >/dev/null) ||
			echo "bench-slurm-array: round $1's array: sbatch exited $?" >&2
	else
		(cd "$d" && as sbatch --wait --nodes="$nodes" --mem=256M -o "$d/batch.out" \
			--wrap "export ROAM_CLUSTER=$name ROAM_NODE=\${SLURMD_NODENAME#n}; roam run --no-prefix --args-from $lens --output $d/out-%a -- burn {} 0" >/dev/null) ||
			echo "bench-slurm-array: round $1's allocation: sbatch exited $?" >&2
		moves=$(as env ROAM_CLUSTER="$name" ROAM_NODE=1 roam --json ps |
			jq --arg t "$(date -u -d "@${t0%.*}" +%Y-%m-%dT%H:%M:%S)" '[.[] | select(.started >= $t) | .migrations] | add // 0')
	fi
	bg1=$(cat "$bgacct/cpuacct.usage")
	stopbg
	local ends
	ends=$(cd "$d" && for f in out-*; do
		if grep -q 'burn: done' "$f"; then echo "${f#out-} $(stat -c %.9Y "$f")"; fi
	done)
	if [ -n "${OUT:-}" ]; then
		mkdir -p "$OUT"
		echo "$ends" | awk -v t0="$t0" -v lens="$lens" 'BEGIN { i = 0; while ((getline l < lens) > 0) len[i++] = l }
			NF == 2 { printf "%d %s %.2f %.2f\n", $1, len[$1], $2 - t0, ($2 - t0) / len[$1] }' | sort -n >"$OUT/$1.$2"
		[ "$2" = array ] || cp "$d/batch.out" "$OUT/$1.$2.batch"
	fi
	echo "$ends" | awk -v t0="$t0" -v lens="$lens" -v n="$jobs" -v bg="$(((bg1 - bg0) / 1000000))" -v moves="$moves" '
		BEGIN { i = 0; while ((getline l < lens) > 0) len[i++] = l }
		NF == 2 { e = $2 - t0; if (e > m) m = e; s += e / len[$1]; k++ }
		END { printf "%.1f %.1f %d/%d %.1f %s\n", m, (k ? s / k : 0), k, n, bg / 1000, moves }'
}

echo "$jobs jobs a round; $nodes nodes of $cpu CPU, background on node 2 ($bgshare of it while busy, busy and idle $bgmin to $bgmax s); load average $(cut -d' ' -f1-3 /proc/loadavg)"
declare -A ms sl
kinds=(array roam)
for r in $(seq "$rounds"); do
	sweep "$r"
	echo "round $r's sweep: $(awk '{ s += $1 } END { printf "%.1f", s }' "$dir/lens.$r") CPU-s, lengths $(sort -n "$dir/lens.$r" | head -1) to $(sort -n "$dir/lens.$r" | tail -1)"
	for i in 0 1; do
		k=${kinds[$(((r + i) % 2))]}
		read -r m s done bg moves < <(side "$r" "$k")
		ms[$k]="${ms[$k]:-} $m"
		sl[$k]="${sl[$k]:-} $s"
		echo "round $r $k: makespan $m s, mean slowdown $s, done $done, background $bg CPU-s, moves $moves"
	done
done
awk -v am="${ms[array]}" -v rm="${ms[roam]}" -v as="${sl[array]}" -v rs="${sl[roam]}" 'BEGIN {
	n = split(am, a, " "); split(rm, b, " "); split(as, c, " "); split(rs, d, " ")
	for (i = 1; i <= n; i++) { sa += a[i]; sb += b[i]; sc += c[i]; sd += d[i]; if (b[i] < a[i]) wm++; if (d[i] < c[i]) ws++ }
	printf "mean of %d: array makespan %.1f s, mean slowdown %.1f; roam makespan %.1f s, mean slowdown %.1f\n", n, sa / n, sc / n, sb / n, sd / n
	printf "ratio roam / array: makespan %.3f, mean slowdown %.3f; roam lower in %d/%d rounds (makespan), %d/%d (slowdown)\n", sb / sa, sd / sc, wm, n, ws, n
	if (n < 2) exit
	# the rounds ratios geometric means, with 95 % intervals (Student t)
	split("12.71 4.30 3.18 2.78 2.57 2.45 2.36 2.31 2.26 2.23 2.20 2.18 2.16 2.14 2.13 2.12 2.11 2.10 2.09 2.09 2.08 2.07 2.07 2.06 2.06 2.06 2.05 2.05 2.05 2.04", tq, " ")
	t = n - 1 <= 30 ? tq[n - 1] : 2.0
	for (i = 1; i <= n; i++) { lm[i] = log(b[i] / a[i]); ls[i] = log(d[i] / c[i]); mm += lm[i] / n; msl += ls[i] / n }
	for (i = 1; i <= n; i++) { vm += (lm[i] - mm) ^ 2 / (n - 1); vs += (ls[i] - msl) ^ 2 / (n - 1) }
	em = t * sqrt(vm / n); es = t * sqrt(vs / n)
	printf "geometric mean of the rounds ratios [95 %%]: makespan %.3f [%.3f, %.3f], mean slowdown %.3f [%.3f, %.3f]\n", exp(mm), exp(mm - em), exp(mm + em), exp(msl), exp(msl - es), exp(msl + es)
}'
echo "load average at the end $(cut -d' ' -f1-3 /proc/loadavg)"
