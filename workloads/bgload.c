/*
 * bgload — the background load of seed 002 §4.3: N processes, each
 * cycling between busy (spinning) and idle (sleeping) for random
 * durations between 0 (or MINSEC) and MAXSEC seconds, until SECONDS have
 * passed. Deterministic given SEED: process i draws from SEED+i.
 *
 * usage: bgload N [MINSEC-]MAXSEC SECONDS [SEED]
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
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

/* number parses all of s as a finite number of at least lo, or says
 * which argument is wrong and exits. */
static double number(const char *what, const char *s, double lo) {
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (end == s || *end != '\0' || errno != 0 || !isfinite(v) || v < lo) {
		fprintf(stderr, "bgload: %s %s: want a number of at least %g\n", what, s, lo);
		exit(2);
	}
	return v;
}

int main(int argc, char **argv) {
	if (argc < 4 || argc > 5) {
		fprintf(stderr, "usage: bgload N [MINSEC-]MAXSEC SECONDS [SEED]\n");
		return 2;
	}
	int n = (int)number("N", argv[1], 1);
	double minsec = 0, maxsec;
	/* MINSEC-MAXSEC: the dash after the first character (a number
	 * cannot hold one there but in an exponent, which a spell needs not) */
	char spell[64];
	if (snprintf(spell, sizeof spell, "%s", argv[2]) >= (int)sizeof spell) {
		fprintf(stderr, "bgload: spells %s: too long\n", argv[2]);
		return 2;
	}
	char *dash = strchr(spell + 1, '-');
	if (dash) {
		*dash = '\0';
		minsec = number("MINSEC", spell, 0);
		maxsec = number("MAXSEC", dash + 1, 0);
	} else {
		maxsec = number("MAXSEC", spell, 0);
	}
	if (maxsec <= 0 || minsec > maxsec) {
		fprintf(stderr, "bgload: spells %s: want MAXSEC above 0 and MINSEC at most MAXSEC\n", argv[2]);
		return 2;
	}
	double secs = number("SECONDS", argv[3], 0);
	if (secs <= 0) {
		fprintf(stderr, "bgload: SECONDS %s: want more than 0\n", argv[3]);
		return 2;
	}
	unsigned seed = argc == 5 ? (unsigned)number("SEED", argv[4], 0) : 1;
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
