/*
 * burn — fixed CPU work, the "dummy cycle" of seed 000: it spends SECONDS
 * of CPU time and exits. The work is counted in CPU time this process
 * received, so it is the same whether the process ran on a fast node, a
 * slow one, or several (a restored process starts its CPU clock again at
 * zero; burn adds up what each stretch gave it, so a migration neither
 * loses nor repeats work).
 *
 * usage: burn SECONDS [LINES]
 * It prints LINES progress lines (default 4), evenly through the work,
 * and at the end its CPU seconds and its elapsed seconds. Its output
 * lines, but for the times, are the same on every run.
 */
#include "common.h"

volatile uint64_t sink;

int main(int argc, char **argv) {
	if (argc < 2 || argc > 3) {
		fprintf(stderr, "usage: burn SECONDS [LINES]\n");
		return 2;
	}
	double want = atof(argv[1]);
	int lines = argc == 3 ? atoi(argv[2]) : 4;
	if (want <= 0 || lines < 0) {
		fprintf(stderr, "burn: SECONDS must be > 0 and LINES >= 0\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	double start = wl_now();
	double got = 0, last = wl_burn_clock();
	uint64_t x = 88172645463325252ull, rounds = 0;
	int printed = 0;
	while (got < want) {
		got += wl_burn_round(&x, &last);
		rounds++;
		while (lines > 0 && printed < lines && got >= want * (printed + 1) / (lines + 1)) {
			printed++;
			printf("burn: %d/%d\n", printed, lines + 1);
		}
	}
	printf("burn: done cpu=%.2f elapsed=%.2f\n", got, wl_now() - start);
	sink = x + rounds;
	return 0;
}
