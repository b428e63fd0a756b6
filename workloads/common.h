/*
 * common.h — what the benchmark workloads share: a seeded generator (so
 * that every run given a seed computes the same thing) and the closing
 * line every workload prints, with its result, its CPU time and its
 * elapsed time. The CPU time is this process's and its children's since
 * it last started or was restored (a restored process starts its CPU
 * clock again); the elapsed time is wall time from its start.
 */
#ifndef ROAM_WORKLOADS_COMMON_H
#define ROAM_WORKLOADS_COMMON_H
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

static inline double wl_now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* wl_cpu is the CPU time of this process and its waited-for children. */
static inline double wl_cpu(void) {
	struct rusage s, c;
	getrusage(RUSAGE_SELF, &s);
	getrusage(RUSAGE_CHILDREN, &c);
	return s.ru_utime.tv_sec + s.ru_stime.tv_sec + c.ru_utime.tv_sec + c.ru_stime.tv_sec +
	       (s.ru_utime.tv_usec + s.ru_stime.tv_usec + c.ru_utime.tv_usec + c.ru_stime.tv_usec) / 1e6;
}

/* wl_burn_clock is this process's CPU clock, since it started or was
 * restored. */
static inline double wl_burn_clock(void) {
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* wl_burn_round does one round of CPU work on *x and says how much CPU
 * time this process had since *last, by wl_burn_clock, which it moves
 * *last to: a restored process starts that clock again at zero, so a
 * reading below *last is all new. Adding up the rounds counts the work
 * the same across migrations, neither lost nor repeated. */
static inline double wl_burn_round(uint64_t *x, double *last) {
	for (int i = 0; i < 200000; i++) {
		*x ^= *x << 13;
		*x ^= *x >> 7;
		*x ^= *x << 17;
	}
	double c = wl_burn_clock();
	double got = c >= *last ? c - *last : c;
	*last = c;
	return got;
}

/* splitmix64: a small generator whose whole state is one word. */
static inline uint64_t wl_next(uint64_t *s) {
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* wl_unit is uniform in [0, 1). */
static inline double wl_unit(uint64_t *s) { return (wl_next(s) >> 11) * 0x1.0p-53; }

/* wl_arg parses a positive integer argument or exits with a usage error. */
static inline long long wl_arg(const char *name, const char *what, const char *s) {
	char *end;
	long long v = strtoll(s, &end, 10);
	if (*s == 0 || *end != 0 || v <= 0) {
		fprintf(stderr, "%s: %s: %s is not a positive integer\n", name, what, s);
		exit(2);
	}
	return v;
}

/* wl_done prints the closing line: NAME: result=RESULT cpu=S elapsed=S. */
static inline void wl_done(const char *name, const char *result, double start) {
	printf("%s: result=%s cpu=%.3f elapsed=%.3f\n", name, result, wl_cpu(), wl_now() - start);
	fflush(stdout);
}
#endif
