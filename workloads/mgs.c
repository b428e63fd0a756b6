/*
 * mgs — modified Gram-Schmidt QR factorisation of an N x N matrix filled
 * from a seed, repeated REPEAT times (seed 004 §5 migrates one MGS process
 * once during its run, N from 150 to 1000).
 *
 * usage: mgs N [REPEAT [SEED]]
 * It prints a hash of the bits of R, so runs compare exactly.
 */
#include <math.h>
#include <string.h>
#include "common.h"

int main(int argc, char **argv) {
	if (argc < 2 || argc > 4) {
		fprintf(stderr, "usage: mgs N [REPEAT [SEED]]\n");
		return 2;
	}
	long long n = wl_arg("mgs", "N", argv[1]);
	long long rep = argc > 2 ? wl_arg("mgs", "REPEAT", argv[2]) : 1;
	uint64_t seed = argc > 3 ? (uint64_t)wl_arg("mgs", "SEED", argv[3]) : 1;
	/* Column-major: column j of Q is q[j*n .. j*n+n). */
	double *q = malloc(sizeof(double) * n * n), *r = malloc(sizeof(double) * n * n);
	if (!q || !r) {
		fprintf(stderr, "mgs: out of memory\n");
		return 1;
	}
	double start = wl_now();
	uint64_t h = 1469598103934665603ull;
	for (long long t = 0; t < rep; t++) {
		uint64_t s = seed + (uint64_t)t;
		for (long long i = 0; i < n * n; i++)
			q[i] = wl_unit(&s) - 0.5;
		memset(r, 0, sizeof(double) * n * n);
		for (long long k = 0; k < n; k++) {
			double *qk = q + k * n, norm = 0;
			for (long long i = 0; i < n; i++)
				norm += qk[i] * qk[i];
			norm = sqrt(norm);
			r[k * n + k] = norm;
			for (long long i = 0; i < n; i++)
				qk[i] /= norm;
			for (long long j = k + 1; j < n; j++) {
				double *qj = q + j * n, d = 0;
				for (long long i = 0; i < n; i++)
					d += qk[i] * qj[i];
				r[j * n + k] = d;
				for (long long i = 0; i < n; i++)
					qj[i] -= d * qk[i];
			}
		}
		for (long long i = 0; i < n * n; i++) {
			uint64_t bits;
			memcpy(&bits, &r[i], sizeof bits);
			h = (h ^ bits) * 1099511628211ull;
		}
	}
	char res[32];
	snprintf(res, sizeof res, "%016llx", (unsigned long long)h);
	wl_done("mgs", res, start);
	return 0;
}
