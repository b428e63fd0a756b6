/*
 * matmul — dense matrix multiplication C = A x B, A of ROWS x INNER and B
 * of INNER x COLS, filled from a seed (seed 002 §4.4: 500x500, and
 * 5000x200, i.e. `matmul 5000 200 200`).
 *
 * usage: matmul ROWS INNER COLS [REPEAT [SEED]]
 * It prints the sum of C's elements and a hash of their bits.
 */
#include <string.h>
#include "common.h"

int main(int argc, char **argv) {
	if (argc < 4 || argc > 6) {
		fprintf(stderr, "usage: matmul ROWS INNER COLS [REPEAT [SEED]]\n");
		return 2;
	}
	long long m = wl_arg("matmul", "ROWS", argv[1]), k = wl_arg("matmul", "INNER", argv[2]),
		  n = wl_arg("matmul", "COLS", argv[3]);
	long long rep = argc > 4 ? wl_arg("matmul", "REPEAT", argv[4]) : 1;
	uint64_t s = argc > 5 ? (uint64_t)wl_arg("matmul", "SEED", argv[5]) : 1;
	double *a = malloc(sizeof(double) * m * k), *b = malloc(sizeof(double) * k * n), *c = malloc(sizeof(double) * m * n);
	if (!a || !b || !c) {
		fprintf(stderr, "matmul: out of memory\n");
		return 1;
	}
	for (long long i = 0; i < m * k; i++)
		a[i] = wl_unit(&s) - 0.5;
	for (long long i = 0; i < k * n; i++)
		b[i] = wl_unit(&s) - 0.5;
	double start = wl_now();
	for (long long r = 0; r < rep; r++) {
		memset(c, 0, sizeof(double) * m * n);
		for (long long i = 0; i < m; i++)
			for (long long p = 0; p < k; p++) {
				double x = a[i * k + p];
				for (long long j = 0; j < n; j++)
					c[i * n + j] += x * b[p * n + j];
			}
	}
	double sum = 0;
	uint64_t h = 1469598103934665603ull;
	for (long long i = 0; i < m * n; i++) {
		uint64_t bits;
		memcpy(&bits, &c[i], sizeof bits);
		h = (h ^ bits) * 1099511628211ull;
		sum += c[i];
	}
	char res[64];
	snprintf(res, sizeof res, "%.6f/%016llx", sum, (unsigned long long)h);
	wl_done("matmul", res, start);
	return 0;
}
