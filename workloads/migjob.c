/*
 * migjob — the programs the migration tests move around. Each is
 * deterministic: its output, and the file it writes, depend only on its
 * arguments, so a migrated run can be compared with an unmigrated one.
 *
 * usage: migjob MODE ROUNDS MARKER [ARG]
 *   cpu      single-threaded CPU work, one line per round
 *   threads  4 threads, each with its own CPU work, joined every round
 *   file     appends to ARG and rewrites records in place (lseek + write)
 *   mem      touches ARG MiB, then reads and rewrites some of it each round
 *   fork     touches ARG MiB, forks 3 children that share its pages (copy
 *            on write) and sleep, then does CPU work, one line per round
 * MARKER is not used; it names the job in the process list, so a test can
 * count the copies of exactly this job.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

static uint64_t xs(uint64_t x, long n) {
	for (long i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
	}
	return x;
}

static void nap(long ms) {
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) != 0)
		;
}

enum { NT = 4, WORK = 20000000 };
static pthread_barrier_t start, done;
static uint64_t state[NT];
static int rounds;

static void *worker(void *arg) {
	long k = (long)arg;
	for (int r = 0; r < rounds; r++) {
		pthread_barrier_wait(&start);
		state[k] = xs(state[k], WORK / NT);
		pthread_barrier_wait(&done);
	}
	return NULL;
}

int main(int argc, char **argv) {
	if (argc < 4) {
		fprintf(stderr, "usage: migjob MODE ROUNDS MARKER [ARG]\n");
		return 2;
	}
	const char *mode = argv[1];
	rounds = atoi(argv[2]);
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (strcmp(mode, "cpu") == 0) {
		uint64_t x = 88172645463325252ULL;
		for (int r = 0; r < rounds; r++) {
			x = xs(x, WORK);
			printf("round %d %016llx\n", r, (unsigned long long)x);
		}
		return 0;
	}
	if (strcmp(mode, "threads") == 0) {
		pthread_t t[NT];
		pthread_barrier_init(&start, NULL, NT + 1);
		pthread_barrier_init(&done, NULL, NT + 1);
		for (long k = 0; k < NT; k++) {
			state[k] = 0x9E3779B97F4A7C15ULL * (uint64_t)(k + 1);
			pthread_create(&t[k], NULL, worker, (void *)k);
		}
		for (int r = 0; r < rounds; r++) {
			pthread_barrier_wait(&start);
			pthread_barrier_wait(&done);
			uint64_t s = 0;
			for (int k = 0; k < NT; k++)
				s ^= state[k];
			printf("round %d %016llx\n", r, (unsigned long long)s);
		}
		for (int k = 0; k < NT; k++)
			pthread_join(t[k], NULL);
		return 0;
	}
	if (strcmp(mode, "file") == 0 && argc > 4) {
		int app = open(argv[4], O_WRONLY | O_CREAT | O_APPEND, 0644);
		int rw = open(argv[4], O_RDWR);
		if (app < 0 || rw < 0) {
			perror(argv[4]);
			return 1;
		}
		for (int r = 0; r < rounds; r++) {
			char line[64];
			int n = snprintf(line, sizeof line, "round %04d appended\n", r);
			if (write(app, line, n) != n)
				return 1;
			/* Overwrite an earlier record in place. */
			off_t at = (off_t)((r * 7919) % (r + 1)) * n;
			char rec[64];
			int m = snprintf(rec, sizeof rec, "round %04d rewrote", r);
			if (lseek(rw, at, SEEK_SET) < 0 || write(rw, rec, m) != m)
				return 1;
			printf("round %d at %lld\n", r, (long long)at);
			nap(50);
		}
		return 0;
	}
	if (strcmp(mode, "mem") == 0 && argc > 4) {
		size_t size = (size_t)atol(argv[4]) << 20;
		uint64_t *m = malloc(size);
		if (!m) {
			perror("malloc");
			return 1;
		}
		size_t n = size / sizeof *m;
		for (size_t i = 0; i < n; i++)
			m[i] = i * 0x9E3779B97F4A7C15ULL;
		for (int r = 0; r < rounds; r++) {
			uint64_t s = 0;
			/* Read one word of every page, and change a few of them. */
			for (size_t i = (size_t)r; i < n; i += 512)
				s += m[i];
			for (size_t i = (size_t)r * 4099 % n; i < n; i += n / 64 + 1)
				m[i] ^= s;
			printf("round %d %016llx\n", r, (unsigned long long)s);
			nap(100);
		}
		uint64_t s = 0;
		for (size_t i = 0; i < n; i++)
			s = s * 31 + m[i];
		printf("sum %016llx\n", (unsigned long long)s);
		return 0;
	}
	if (strcmp(mode, "fork") == 0 && argc > 4) {
		size_t size = (size_t)atol(argv[4]) << 20;
		char *m = malloc(size);
		if (!m) {
			perror("malloc");
			return 1;
		}
		memset(m, 7, size);
		pid_t parent = getpid(), kids[3];
		for (int k = 0; k < 3; k++) {
			kids[k] = fork();
			if (kids[k] == 0) {
				while (getppid() == parent)
					nap(100);
				_exit(0);
			}
		}
		uint64_t x = 88172645463325252ULL;
		for (int r = 0; r < rounds; r++) {
			x = xs(x, WORK / 4) + (uint64_t)m[(size_t)r * 4096 % size];
			printf("round %d %016llx\n", r, (unsigned long long)x);
		}
		for (int k = 0; k < 3; k++)
			kill(kids[k], SIGKILL);
		while (wait(NULL) > 0)
			;
		return 0;
	}
	fprintf(stderr, "migjob: unknown mode %s\n", mode);
	return 2;
}
