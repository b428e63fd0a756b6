/*
 * usercode — seed 001's CPU-bound workload: a Monte Carlo random search
 * for the minimum of f(x) = 1/40 sum x_i^2 + 1 - prod cos(x_i / i), x_i in
 * (-20, 20), i = 1..DIM. Pure user-mode work: no system call in the loop.
 *
 * usage: usercode [ITERATIONS [SEED [DIM]]]   (defaults 50000000 1 10)
 * It prints the smallest f found (as its bits, so runs compare exactly).
 */
#include <math.h>
#include <string.h>
#include "common.h"

int main(int argc, char **argv) {
	if (argc > 4) {
		fprintf(stderr, "usage: usercode [ITERATIONS [SEED [DIM]]]\n");
		return 2;
	}
	long long iters = argc > 1 ? wl_arg("usercode", "ITERATIONS", argv[1]) : 50000000;
	uint64_t s = argc > 2 ? (uint64_t)wl_arg("usercode", "SEED", argv[2]) : 1;
	int dim = argc > 3 ? (int)wl_arg("usercode", "DIM", argv[3]) : 10;
	if (dim > 64) {
		fprintf(stderr, "usercode: DIM: at most 64\n");
		return 2;
	}
	double start = wl_now(), best = INFINITY, x[64];
	for (long long it = 0; it < iters; it++) {
		double sq = 0, prod = 1;
		for (int i = 0; i < dim; i++) {
			x[i] = wl_unit(&s) * 40 - 20;
			sq += x[i] * x[i];
			prod *= cos(x[i] / (i + 1));
		}
		double f = sq / 40 + 1 - prod;
		if (f < best)
			best = f;
	}
	uint64_t bits;
	memcpy(&bits, &best, sizeof bits);
	char res[64];
	snprintf(res, sizeof res, "%.9f/%016llx", best, (unsigned long long)bits);
	wl_done("usercode", res, start);
	return 0;
}
