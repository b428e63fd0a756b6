#!/usr/bin/env python3
"""Fluid model of the lvm run on 6 nodes: 8 jobs of 0.7 CPU-seconds on
nodes of 0.2 CPU, spread at 0.57 s (as measured) to 2,2,1,1,1,1 jobs.
Rounds every `period` s and at each job's end (+50 ms); a move freezes
its job for `f` s. Without rotation, a round only moves a job of a
doubled node to an idle node (roam's balance). With rotation, a doubled
node also hands its most advanced job to the node whose single job is
furthest ahead, when that job leads the doubled node's laggard by more
than `margin` CPU-seconds (least attained service). Prints the makespan
and the efficiency T(1)/(6 T(6)), T(1) = 8 x 3.5 s.

    python3 docs/results/lvm-ended/rotation-model.py
"""


def sim(nodes=6, jobs=8, W=0.7, c=0.2, t0=0.57, period=1.0, margin=0.05, f=0.1, rotate=True, dt=0.001):
    assign = [i % nodes for i in range(jobs)]
    att = [0.0] * jobs
    frozen = [0.0] * jobs
    done = [False] * jobs
    t, nextround, moves = t0, t0 + 0.5, 0

    def live(n):
        return [j for j in range(jobs) if assign[j] == n and not done[j]]

    while True:
        for n in range(nodes):
            js = [j for j in live(n) if frozen[j] <= t]
            for j in js:
                att[j] += c / len(js) * dt
        for j in range(jobs):
            if not done[j] and att[j] >= W:
                done[j] = True
                nextround = min(nextround, t + 0.05)
        if all(done):
            return t, moves
        t += dt
        if t < nextround:
            continue
        nextround = t + period
        for n in range(nodes):
            while len(live(n)) >= 2:
                idle = [m for m in range(nodes) if not live(m)]
                if not idle:
                    break
                j = min(live(n), key=lambda j: att[j])
                assign[j], frozen[j] = idle[0], t + f
                moves += 1
        if not rotate:
            continue
        for n in range(nodes):
            L = live(n)
            singles = [m for m in range(nodes) if len(live(m)) == len(L) - 1]
            if len(L) < 2 or not singles:
                continue
            lag = min(att[j] for j in L)
            d = max(singles, key=lambda m: max(att[j] for j in live(m)))
            if max(att[j] for j in live(d)) - lag > margin:
                j = max(L, key=lambda j: att[j])
                assign[j], frozen[j] = d, t + f
                moves += 1


if __name__ == "__main__":
    print("rotation margin(CPU-s) period(s) makespan(s) moves efficiency(%)")
    for rot in (False, True):
        for margin in (0.02, 0.05, 0.1):
            for period in (1.0, 0.5):
                T, m = sim(rotate=rot, margin=margin, period=period)
                print(f"{str(rot):8} {margin:6} {period:9} {T:11.2f} {m:5} {8 * 3.5 / 6 / T * 100:13.1f}")
