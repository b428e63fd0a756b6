#!/usr/bin/env bash
# bench-ab.sh — runs `roam bench EXPERIMENT` with an old and a new build of
# roam, interleaved (old, new, old, new, ... one pair per round), on the same
# machine in the same run, and prints per metric the old and the new mean,
# their ratio and each side's spread across the rounds, with a verdict.
#
#   scripts/bench-ab.sh [--rounds N] [--quick] [--reps N] [--new COMMIT]
#                       [--out DIR] OLD_COMMIT EXPERIMENT...
#
#   --rounds N    old/new pairs per experiment (default 3)
#   --quick       small runs: the framework experiments' --quick (migrate:
#                 16 MiB, one repetition); balance: --work 2 --short 0
#   --reps N      --reps of the framework experiments (not balance)
#   --new COMMIT  the new build (default HEAD, resolved once at the start)
#   --out DIR     where the runs go (default bench-results/ab-OLD-NEW-TIME)
#
#   scripts/bench-ab.sh --summary DIR EXPERIMENT...
#
#   prints the summary of the runs already in DIR again (no build, no run).
#
# Both builds are made by `make build` in temporary git worktrees (detached
# at each commit), so that neither is the work tree's uncommitted state and
# the repository's bin/ is left alone; the trap removes them, and takes down
# the emulated cluster of a benchmark it interrupted. Each run's results go
# to OUT/rK/{old,new}/EXPERIMENT/ (results.json of `roam bench EXPERIMENT
# --out`) or OUT/rK/{old,new}/balance.json (`roam --json bench balance`,
# which has no --out), its terminal output beside it as *.log; the summary
# is printed and written to OUT/summary.txt.
#
# A metric is "within spread" when the new build's mean lies inside the
# range of the old build's own values (every repetition of every round); a
# new mean above that range is a regression beyond spread, one below it an
# improvement beyond spread. Every metric here is a time: lower is better.
# The medians are printed beside the means: one repetition slowed by the
# machine moves a mean of a few values, not a median.
#
# Needs root (emulated clusters) and a machine not running another
# benchmark: experiments use fixed cluster names and subnets, so two at
# once clash; the script waits while a cluster of the experiment's name is up.
set -euo pipefail

usage() { sed -n '7,19p' "$0" | sed 's/^# \{0,1\}//' >&2; }
die() { echo "bench-ab.sh: $*" >&2; exit 2; }

ROUNDS=3 QUICK=0 REPS="" NEW=HEAD OUT="" SUMMARY=""
ARGS=()
while [ $# -gt 0 ]; do
	case "$1" in
	--rounds) [ $# -ge 2 ] || die "--rounds needs a number"
		[[ "$2" =~ ^[1-9][0-9]*$ ]] || die "--rounds: '$2' is not a positive integer"
		ROUNDS=$2; shift 2 ;;
	--reps) [ $# -ge 2 ] || die "--reps needs a number"
		[[ "$2" =~ ^[1-9][0-9]*$ ]] || die "--reps: '$2' is not a positive integer"
		REPS=$2; shift 2 ;;
	--quick) QUICK=1; shift ;;
	--new) [ $# -ge 2 ] || die "--new needs a commit"; NEW=$2; shift 2 ;;
	--out) [ $# -ge 2 ] || die "--out needs a directory"; OUT=$2; shift 2 ;;
	--summary) [ $# -ge 2 ] || die "--summary needs a directory"
		[ -d "$2" ] || die "--summary: '$2' is not a directory"; SUMMARY=$2; shift 2 ;;
	-h|--help) usage; exit 0 ;;
	--) shift; ARGS+=("$@"); break ;;
	-*) die "unknown option '$1' (usage: scripts/bench-ab.sh [--rounds N] [--quick] OLD_COMMIT EXPERIMENT...)" ;;
	*) ARGS+=("$1"); shift ;;
	esac
done
summarize() { # dir: the table of every experiment of EXPS
	python3 - "$1" "${EXPS[@]}" <<'EOF'
import json, os, statistics, sys

out, exps = sys.argv[1], sys.argv[2:]
rounds = 0
while os.path.isdir(os.path.join(out, f"r{rounds + 1}")):
    rounds += 1
# The metrics compared, per experiment: migrate's times of the migration
# (and its same-run baselines, which no agent change touches: they show
# what the machine alone moved), balance's makespan per run.
MIGRATE = ["eager freeze", "eager total", "lazy freeze", "lazy window",
           "raw copy", "local dump + restore"]

def framework(side, exp):
    """{(label, unit): [values]} over every repetition of every round."""
    vals, warn = {}, []
    for r in range(1, rounds + 1):
        p = os.path.join(out, f"r{r}", side, exp, "results.json")
        try:
            res = json.load(open(p))
        except (OSError, ValueError) as e:
            warn.append(f"{side} round {r}: no results ({e})")
            continue
        for x in res:
            for c in x.get("checks") or []:
                if not c["ok"]:
                    warn.append(f"{side} round {r}: check failed: {c['name']}: {c['detail']}")
            for n in x.get("notes") or []:
                if n.startswith("failed"):
                    warn.append(f"{side} round {r}: {n}")
            pivot = set(x.get("pivot") or [])
            for m in x.get("measures") or []:
                if exp == "migrate":
                    if m["series"] not in MIGRATE or m["metric"] != "time":
                        continue
                    label = f"{m['series']}, {m['x']:g} MiB"
                else:
                    if m["metric"] in pivot:
                        continue
                    label = f"{m['series']} {m['metric']}, {x['x_label'] or 'x'} {m['x']:g}"
                vals.setdefault((label, m["unit"]), []).extend(m["values"])
    return vals, warn

def balance(side):
    vals, warn = {}, []
    for r in range(1, rounds + 1):
        p = os.path.join(out, f"r{r}", side, "balance.json")
        try:
            ps = json.load(open(p))
        except (OSError, ValueError) as e:
            warn.append(f"{side} round {r}: no results ({e})")
            continue
        for pt in ps or []:
            bg = ", background" if pt["background"] else ""
            label = f"{pt['policy']} makespan, {pt['work_s']:g} CPU-s jobs{bg}"
            vals.setdefault((label, "s"), []).append(pt["makespan_s"])
            vals.setdefault((f"{pt['policy']} migrations, {pt['work_s']:g} CPU-s jobs{bg}", "count"), []).append(pt["migrations"])
            if not pt["all_ok"]:
                warn.append(f"{side} round {r}: {pt['policy']} {pt['work_s']:g} CPU-s: a job did not exit with 0")
    return vals, warn

def fmt(v, unit):
    if unit == "count":
        return f"{v:.1f}"
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.1f}"

def spread(v, unit):
    cv = statistics.stdev(v) / statistics.mean(v) * 100 if len(v) > 1 and statistics.mean(v) else 0
    return f"{fmt(min(v), unit)}–{fmt(max(v), unit)} ({cv:.0f}%)"

bad = 0
for exp in exps:
    if exp == "balance":
        (old, wo), (new, wn) = balance("old"), balance("new")
    else:
        (old, wo), (new, wn) = framework("old", exp), framework("new", exp)
    print(f"\n{exp}: old and new mean over {rounds} round(s); spread: min–max of each side's values (coefficient of variation)")
    rows = [("metric", "unit", "n", "old mean", "new mean", "new/old", "median old→new", "old spread", "new spread", "verdict")]
    for key in old:
        if key not in new:
            continue
        (label, unit), o, n = key, old[key], new[key]
        mo, mn = statistics.mean(o), statistics.mean(n)
        ratio = f"{mn / mo:.2f}" if mo else "-"
        if unit == "count":
            verdict = "(information)"
        elif mn > max(o):
            verdict, bad = "SLOWER beyond spread", bad + 1
        elif mn < min(o):
            verdict = "faster beyond spread"
        else:
            verdict = "within spread"
        med = f"{fmt(statistics.median(o), unit)}→{fmt(statistics.median(n), unit)}"
        rows.append((label, unit or "-", f"{len(o)}/{len(n)}", fmt(mo, unit), fmt(mn, unit), ratio, med, spread(o, unit), spread(n, unit), verdict))
    w = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(c.ljust(w[i]) if i == 0 or i == len(r) - 1 else c.rjust(w[i]) for i, c in enumerate(r)))
    for m in wo + wn:
        print("warning: " + m)
print(f"\n{bad} metric(s) slower beyond the old runs' spread" if bad else "\nno metric slower beyond the old runs' spread")
EOF
}
if [ -n "$SUMMARY" ]; then
	[ ${#ARGS[@]} -ge 1 ] || die "--summary needs the EXPERIMENTs run"
	EXPS=("${ARGS[@]}")
	summarize "$SUMMARY"
	exit 0
fi
[ ${#ARGS[@]} -ge 2 ] || die "need OLD_COMMIT and at least one EXPERIMENT (usage: scripts/bench-ab.sh [--rounds N] [--quick] OLD_COMMIT EXPERIMENT...)"
[ "$(id -u)" = 0 ] || die "needs root (the benchmarks bring up emulated clusters)"
command -v python3 >/dev/null || die "python3 is missing (it reads the results)"

REPO=$(git -C "$(dirname "$0")/.." rev-parse --show-toplevel)
cd "$REPO"
OLD_SHA=$(git rev-parse --verify --quiet "${ARGS[0]}^{commit}") || die "OLD_COMMIT: '${ARGS[0]}' is not a commit"
NEW_SHA=$(git rev-parse --verify --quiet "$NEW^{commit}") || die "--new: '$NEW' is not a commit"
EXPS=("${ARGS[@]:1}")
OLD_ABBR=$(git rev-parse --short "$OLD_SHA") NEW_ABBR=$(git rev-parse --short "$NEW_SHA")
[ -n "$OUT" ] || OUT="bench-results/ab-$OLD_ABBR-$NEW_ABBR-$(date +%Y%m%d-%H%M%S)"
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

# The cluster each experiment brings up (internal/bench): the script waits
# while one of that name is up, and takes down the one it interrupted.
cluster_of() {
	case "$1" in
	migrate) echo bmig ;; balance) echo bbal ;; checkpoint) echo bckpt ;;
	speedup) echo bspeed ;; lvm) echo blvm ;; dynamic-vs-static) echo bdvs ;;
	migration-cost) echo bmcost ;; syscall-cost) echo bsys ;; traffic) echo btraf ;;
	web-delay) echo e2eobsb ;; burst) echo bburst ;; *) echo "" ;;
	esac
}
cluster_up() { ip netns list 2>/dev/null | grep -q "^roam-$1-"; }

# Not under /tmp or /var/tmp: each job has its own, which would hide the
# builds' roam-init from the jobs (and CRIU).
WORK=$(mktemp -d /var/lib/roam-bench-ab.XXXXXX)
BENCH_PID="" BENCH_ROAM="" BENCH_CLUSTER="" BUILD_PID=""
cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	if [ -n "$BUILD_PID" ]; then
		kill -TERM -- "-$BUILD_PID" 2>/dev/null || true
		wait "$BUILD_PID" 2>/dev/null || true
	fi
	if [ -n "$BENCH_PID" ] && kill -0 "$BENCH_PID" 2>/dev/null; then
		# roam bench takes its clusters down on SIGTERM.
		kill -TERM "$BENCH_PID" 2>/dev/null || true
		wait "$BENCH_PID" 2>/dev/null || true
	fi
	if [ -n "$BENCH_CLUSTER" ] && cluster_up "$BENCH_CLUSTER"; then
		"$BENCH_ROAM" --cluster "$BENCH_CLUSTER" cluster down >/dev/null 2>&1 || true
	fi
	for side in old new; do
		if [ -d "$WORK/$side" ]; then
			git -C "$REPO" worktree remove --force "$WORK/$side" >/dev/null 2>&1 || true
		fi
	done
	git -C "$REPO" worktree prune >/dev/null 2>&1 || true
	rm -rf "$WORK"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

build() { # side sha
	echo "== building $1 ($2) in $WORK/$1" >&2
	git -C "$REPO" worktree add --detach "$WORK/$1" "$2" >/dev/null 2>&1 || die "git worktree add $2 failed"
	# In a session of its own and in the background: a signal reaches the
	# trap at once, which ends the build's whole process group.
	local rc=0
	setsid make -C "$WORK/$1" --no-print-directory build >"$OUT/build-$1.log" 2>&1 &
	BUILD_PID=$!
	wait "$BUILD_PID" || rc=$?
	BUILD_PID=""
	[ $rc = 0 ] || die "make build of $1 ($2) failed: $OUT/build-$1.log"
}
build new "$NEW_SHA"
# The experiments the new build knows, and balance (a command of its own).
KNOWN=$("$WORK/new/bin/roam" --json bench list | python3 -c 'import json,sys; print(" ".join(e["name"] for e in json.load(sys.stdin)))')
for e in "${EXPS[@]}"; do
	[[ " $KNOWN balance " == *" $e "* ]] || die "EXPERIMENT: '$e' is not one of: $KNOWN balance"
done
build old "$OLD_SHA"

load() { cut -d' ' -f1-3 /proc/loadavg; }
{
	echo "old: $OLD_SHA"
	echo "new: $NEW_SHA"
	echo "experiments: ${EXPS[*]}; rounds: $ROUNDS; quick: $QUICK; reps: ${REPS:-default}"
	echo "cores: $(nproc); load average (1, 5, 15 min) before: $(load)"
} | tee "$OUT/setup.txt" >&2

# run_one side round experiment: one benchmark run, in the background so
# that a signal reaches the trap, which stops it. A run that fails is made
# once more, 30 s later (a failed run measured nothing; a test running
# beside it can make it fail: roam-ckpt finds a job by its id among all the
# host's processes, and another cluster may have a job of the same id).
FAILED=()
run_one() {
	local try
	for try in 1 2; do
		attempt "$@" && return 0
		[ $try = 2 ] || { echo "   failed; once more in 30 s" >&2; sleep 30; }
	done
	FAILED+=("$3 $1 round $2 ($OUT/r$2/$1)")
}
attempt() {
	local side=$1 round=$2 exp=$3 dir="$OUT/r$2/$1" roam="$WORK/$1/bin/roam" rc=0
	local cluster waited=0
	cluster=$(cluster_of "$exp")
	mkdir -p "$dir"; rm -rf "${dir:?}/$exp" "$dir/$exp.json" "$dir/$exp.log"
	while [ -n "$cluster" ] && cluster_up "$cluster"; do
		[ $waited = 1 ] || echo "   cluster $cluster is up (another benchmark?): waiting" >&2
		waited=1
		sleep 10
	done
	echo "== round $round/$ROUNDS $exp $side (load $(load))" >&2
	BENCH_ROAM=$roam BENCH_CLUSTER=$cluster
	local t0=$SECONDS
	if [ "$exp" = balance ]; then
		local q=()
		[ $QUICK = 0 ] || q=(--work 2 --short 0)
		"$roam" --json bench balance "${q[@]}" >"$dir/balance.json" 2>"$dir/balance.log" &
	else
		local f=(--out "$dir/$exp")
		[ $QUICK = 0 ] || f+=(--quick)
		[ -z "$REPS" ] || f+=(--reps "$REPS")
		"$roam" bench "$exp" "${f[@]}" >"$dir/$exp.log" 2>&1 &
	fi
	BENCH_PID=$!
	wait "$BENCH_PID" || rc=$?
	BENCH_PID="" BENCH_CLUSTER=""
	echo "   $((SECONDS - t0)) s, exit status $rc" >&2
	echo "$exp $side r$round $((SECONDS - t0))s rc=$rc load-after=$(load)" >>"$OUT/runs.txt"
	return $rc
}

for r in $(seq 1 "$ROUNDS"); do
	for e in "${EXPS[@]}"; do
		run_one old "$r" "$e"
		run_one new "$r" "$e"
	done
done
echo "load average (1, 5, 15 min) after: $(load)" | tee -a "$OUT/setup.txt" >&2

summarize "$OUT" | tee "$OUT/summary.txt"

if [ ${#FAILED[@]} -gt 0 ]; then
	printf 'failed run: %s\n' "${FAILED[@]}" >&2
	exit 1
fi
echo "results: $OUT" >&2
