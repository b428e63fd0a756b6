/*
 * bgload — the background load of seed 002 §4.3: N processes, each
 * cycling between busy (spinning) and idle (sleeping) for random
 * durations between 0 and MAXSEC seconds, until SECONDS have passed.
 * Deterministic given SEED: process i draws from SEED+i.
 *
 * usage: bgload N MAXSEC SECONDS [SEED]
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void cycle(unsigned seed, double maxsec, double until) {
	uint64_t x = 88172645463325252ull;
	int busy = seed % 2;
	while (now() < until) {
		double d = maxsec * (rand_r(&seed) / (double)RAND_MAX);
		double end = now() + d;
		if (end > until)
			end = until;
		if (busy) {
			while (now() < end)
				for (int i = 0; i < 10000; i++) {
					x ^= x << 13;
					x ^= x >> 7;
					x ^= x << 17;
				}
		} else {
			double s = end - now();
			if (s > 0) {
				struct timespec ts = {(time_t)s, (long)((s - (time_t)s) * 1e9)};
				nanosleep(&ts, NULL);
			}
		}
		busy = !busy;
	}
	if (x == 42)
		puts("");
}

int main(int argc, char **argv) {
	if (argc < 4 || argc > 5) {
		fprintf(stderr, "usage: bgload N MAXSEC SECONDS [SEED]\n");
		return 2;
	}
	int n = atoi(argv[1]);
	double maxsec = atof(argv[2]), secs = atof(argv[3]);
	unsigned seed = argc == 5 ? (unsigned)atoi(argv[4]) : 1;
	if (n < 1 || maxsec <= 0 || secs <= 0) {
		fprintf(stderr, "bgload: N, MAXSEC and SECONDS must be > 0\n");
		return 2;
	}
	double until = now() + secs;
	for (int i = 0; i < n; i++) {
		pid_t p = fork();
		if (p == 0) {
			cycle(seed + i, maxsec, until);
			_exit(0);
		}
		if (p < 0) {
			perror("bgload: fork");
			return 1;
		}
	}
	int st, bad = 0;
	while (wait(&st) > 0)
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
			bad++;
	printf("bgload: %d processes, %.1f s\n", n, secs);
	return bad ? 1 : 0;
}
