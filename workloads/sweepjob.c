/*
 * sweepjob — one job of roam bench sweep: it holds MIB MiB, touched so
 * that they are resident for its whole run, and spends SECONDS of CPU time
 * in all, the touching included, then exits. Its CPU time is counted as
 * burn counts it: a restored process starts its CPU clock again at zero,
 * and sweepjob adds up what each stretch gave it, so a migration neither
 * loses nor repeats work.
 *
 * usage: sweepjob SECONDS MIB, or the two in one argument ("SECONDS MIB"),
 * as roam run --args-from hands a job its line.
 * Its last line: "sweepjob: done cpu=SECONDS elapsed=SECONDS mib=MIB".
 */
#include "common.h"

#include <string.h>

volatile uint64_t sink;

int main(int argc, char **argv) {
	double want = 0;
	long mib = -1;
	char *end = NULL;
	if (argc == 3) {
		want = strtod(argv[1], &end);
		if (end != argv[1] && *end == 0)
			mib = strtol(argv[2], &end, 10);
	} else if (argc == 2) {
		want = strtod(argv[1], &end);
		char *m = end;
		if (end != argv[1])
			mib = strtol(m, &end, 10);
		if (end == m)
			mib = -1;
	}
	if (want <= 0 || want > 1e6 || mib < 0 || mib > (1 << 20) || end == NULL || *end != 0) {
		fprintf(stderr, "usage: sweepjob SECONDS MIB (or \"SECONDS MIB\" in one argument)\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	double start = wl_now();
	size_t bytes = (size_t)mib << 20;
	unsigned char *mem = bytes ? malloc(bytes) : NULL;
	if (bytes && !mem) {
		fprintf(stderr, "sweepjob: cannot allocate %ld MiB\n", mib);
		return 1;
	}
	for (size_t i = 0; i < bytes; i += 4096)
		mem[i] = (unsigned char)i;
	/* The process's CPU clock counts from its start: the touching is
	 * part of the job's length. */
	double got = 0, last = 0;
	uint64_t x = 88172645463325252ull, rounds = 0;
	while (got < want) {
		got += wl_burn_round(&x, &last);
		rounds++;
	}
	printf("sweepjob: done cpu=%.2f elapsed=%.2f mib=%ld\n", got, wl_now() - start, mib);
	sink = x + rounds + (bytes ? mem[bytes - 1] : 0);
	return 0;
}
