/*
 * bgload — the background load of seed 002 §4.3: N processes, each
 * cycling between busy (spinning) and idle (sleeping) for random
 * durations between 0 (or MINSEC) and MAXSEC seconds, until SECONDS have
 * passed. Deterministic given SEED: process i draws from SEED+i.
 *
 * usage: bgload N [MINSEC-]MAXSEC SECONDS [SEED]
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void cycle(unsigned seed, double minsec, double maxsec, double until) {
	uint64_t x = 88172645463325252ull;
	int busy = seed % 2;
	while (now() < until) {
		double d = minsec + (maxsec - minsec) * (rand_r(&seed) / (double)RAND_MAX);
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
		fprintf(stderr, "usage: bgload N [MINSEC-]MAXSEC SECONDS [SEED]\n");
		return 2;
	}
	int n = atoi(argv[1]);
	double minsec = 0, maxsec, secs = atof(argv[3]);
	char *dash = strchr(argv[2], '-');
	if (dash) {
		minsec = atof(argv[2]);
		maxsec = atof(dash + 1);
	} else {
		maxsec = atof(argv[2]);
	}
	unsigned seed = argc == 5 ? (unsigned)atoi(argv[4]) : 1;
	if (n < 1 || maxsec <= 0 || secs <= 0 || minsec < 0 || minsec > maxsec) {
		fprintf(stderr, "bgload: N, MAXSEC and SECONDS must be > 0, and MINSEC between 0 and MAXSEC: %s\n", argv[2]);
		return 2;
	}
	double until = now() + secs;
	for (int i = 0; i < n; i++) {
		pid_t p = fork();
		if (p == 0) {
			cycle(seed + i, minsec, maxsec, until);
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
