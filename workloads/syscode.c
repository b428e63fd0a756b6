/*
 * syscode — seed 001's system-call-heavy workload: each iteration stats a
 * file, opens, reads and closes it, asks for its pid and writes a few bytes
 * to /dev/null. Nearly all its time is in the kernel.
 *
 * usage: syscode [ITERATIONS [FILE]]   (defaults 1000000 /etc/passwd)
 * It prints a checksum of what it read and of the sizes it saw.
 */
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include "common.h"

int main(int argc, char **argv) {
	if (argc > 3) {
		fprintf(stderr, "usage: syscode [ITERATIONS [FILE]]\n");
		return 2;
	}
	long long iters = argc > 1 ? wl_arg("syscode", "ITERATIONS", argv[1]) : 1000000;
	const char *path = argc > 2 ? argv[2] : "/etc/passwd";
	int null = open("/dev/null", O_WRONLY);
	if (null < 0) {
		perror("syscode: /dev/null");
		return 1;
	}
	double start = wl_now();
	uint64_t sum = 0;
	char buf[64];
	for (long long it = 0; it < iters; it++) {
		struct stat st;
		if (stat(path, &st) != 0) {
			fprintf(stderr, "syscode: %s: cannot stat\n", path);
			return 1;
		}
		int fd = open(path, O_RDONLY);
		if (fd < 0) {
			fprintf(stderr, "syscode: %s: cannot open\n", path);
			return 1;
		}
		ssize_t n = read(fd, buf, sizeof buf);
		close(fd);
		for (ssize_t i = 0; i < n; i++)
			sum = sum * 31 + (unsigned char)buf[i];
		sum += (uint64_t)st.st_size + (getpid() > 0);
		if (write(null, buf, 16) != 16) {
			fprintf(stderr, "syscode: /dev/null: short write\n");
			return 1;
		}
	}
	char res[32];
	snprintf(res, sizeof res, "%016llx", (unsigned long long)sum);
	wl_done("syscode", res, start);
	return 0;
}
