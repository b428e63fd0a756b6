/*
 * dkg — seed 000's distributed key generator: K RSA key pairs of BITS bits
 * (OpenSSL libcrypto), shared among N children that a parent forks; the
 * parent waits for them. Key k is made from a generator seeded with
 * (SEED, k), so the keys, and the result, are the same however the work is
 * split and wherever it runs.
 *
 * usage: dkg [-k KEYS] [-n CHILDREN] [-b BITS] [-s SEED] [-i INDEX]
 *   defaults: -k 4000 -n 4 -b 1024 -s 1
 *   -i INDEX  be child INDEX of N only (keys k with k mod N = INDEX), no fork.
 *             Without -i, the environment's ROAM_INDEX and ROAM_COUNT (set
 *             by `roam run -n N`) do the same, so `roam run -n 8 dkg -k 400`
 *             runs the 8 children as 8 jobs that roam places and moves.
 * It prints the sum of a hash of every key's modulus (the same for every
 * split) and its CPU and elapsed time.
 */
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/bn.h>
#include <openssl/rand.h>
#include <openssl/rsa.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "common.h"

static uint64_t state;

static int det_bytes(unsigned char *buf, int num) {
	for (int i = 0; i < num; i++)
		buf[i] = (unsigned char)wl_next(&state);
	return 1;
}
static int det_status(void) { return 1; }
static int det_seed(const void *buf, int num) { (void)buf; (void)num; return 1; }
static int det_add(const void *buf, int num, double e) { (void)buf; (void)num; (void)e; return 1; }

static RAND_METHOD det = {det_seed, det_bytes, NULL, det_add, det_bytes, det_status};

/* keyhash makes key k and returns a hash of its modulus. */
static uint64_t keyhash(uint64_t seed, long long k, int bits) {
	state = seed * 1000003ull + (uint64_t)k;
	RSA *rsa = RSA_new();
	BIGNUM *e = BN_new();
	BN_set_word(e, RSA_F4);
	if (!RSA_generate_key_ex(rsa, bits, e, NULL)) {
		fprintf(stderr, "dkg: key %lld: RSA key generation failed\n", k);
		exit(1);
	}
	const BIGNUM *n;
	RSA_get0_key(rsa, &n, NULL, NULL);
	unsigned char buf[2048];
	int len = BN_bn2bin(n, buf);
	uint64_t h = 1469598103934665603ull;
	for (int i = 0; i < len; i++)
		h = (h ^ buf[i]) * 1099511628211ull;
	BN_free(e);
	RSA_free(rsa);
	return h;
}

/* share makes the keys of child index of count and returns their sum. */
static uint64_t share(uint64_t seed, long long keys, int bits, long long index, long long count) {
	uint64_t sum = 0;
	for (long long k = index; k < keys; k += count)
		sum += keyhash(seed, k, bits);
	return sum;
}

int main(int argc, char **argv) {
	long long keys = 4000, children = 4, bits = 1024, seed = 1, index = -1;
	int opt;
	while ((opt = getopt(argc, argv, "k:n:b:s:i:")) != -1) {
		switch (opt) {
		case 'k': keys = wl_arg("dkg", "-k", optarg); break;
		case 'n': children = wl_arg("dkg", "-n", optarg); break;
		case 'b': bits = wl_arg("dkg", "-b", optarg); break;
		case 's': seed = wl_arg("dkg", "-s", optarg); break;
		case 'i':
			index = strcmp(optarg, "0") == 0 ? 0 : wl_arg("dkg", "-i", optarg);
			break;
		default:
			fprintf(stderr, "usage: dkg [-k KEYS] [-n CHILDREN] [-b BITS] [-s SEED] [-i INDEX]\n");
			return 2;
		}
	}
	if (bits < 512 || bits > 8192) {
		fprintf(stderr, "dkg: -b: %lld is out of range (512 to 8192)\n", bits);
		return 2;
	}
	if (index < 0 && getenv("ROAM_INDEX") && getenv("ROAM_COUNT")) {
		index = atoll(getenv("ROAM_INDEX"));
		children = atoll(getenv("ROAM_COUNT"));
	}
	if (index >= children) {
		fprintf(stderr, "dkg: -i: %lld is not a child of %lld\n", index, children);
		return 2;
	}
	RAND_set_rand_method(&det);
	setvbuf(stdout, NULL, _IOLBF, 0);
	double start = wl_now();
	char res[96];
	if (index >= 0) {
		uint64_t sum = share((uint64_t)seed, keys, (int)bits, index, children);
		snprintf(res, sizeof res, "%016llx/child%lld-of-%lld", (unsigned long long)sum, index, children);
		wl_done("dkg", res, start);
		return 0;
	}
	/* Fork mode: each child sends its sum back through a pipe. */
	int fds[2];
	if (pipe(fds) != 0) {
		perror("dkg: pipe");
		return 1;
	}
	for (long long c = 0; c < children; c++) {
		pid_t p = fork();
		if (p < 0) {
			perror("dkg: fork");
			return 1;
		}
		if (p == 0) {
			close(fds[0]);
			uint64_t sum = share((uint64_t)seed, keys, (int)bits, c, children);
			if (write(fds[1], &sum, sizeof sum) != sizeof sum)
				_exit(1);
			_exit(0);
		}
	}
	close(fds[1]);
	uint64_t total = 0, part;
	long long got = 0;
	while (read(fds[0], &part, sizeof part) == sizeof part) {
		total += part;
		got++;
	}
	int status, failed = 0;
	while (wait(&status) > 0)
		failed |= !WIFEXITED(status) || WEXITSTATUS(status) != 0;
	if (failed || got != children) {
		fprintf(stderr, "dkg: %lld of %lld children reported\n", got, children);
		return 1;
	}
	snprintf(res, sizeof res, "%016llx", (unsigned long long)total);
	wl_done("dkg", res, start);
	return 0;
}
