/*
 * startloop — the local baseline of `roam bench job-start`: N jobs, one
 * after another, each with the kernel work a roam job gets and nothing
 * of roam's own: its cgroups made and its limits written (as the agent
 * writes them: the benchmark passes the same files and values), a clone
 * into new PID and mount namespaces (and an IPC namespace), the job's
 * groups joined, its mounts made private and a fresh /proc mounted; for a
 * user's job (-U) a user namespace of its own with every id mapped to
 * itself, made with new mount and IPC namespaces, as roam-init does; the
 * drop to the job's user and the exec of the program. The loop waits for
 * each job and removes its groups before the next one starts.
 *
 * usage: startloop [-U] -n N -u UID -g GID [-G GIDS] [-m DIR]... [-w FILE=VALUE]...
 *                  [-j PROCS]... -- PROG [ARGS...]
 *   -m DIR    a group made for each job (and removed after it)
 *   -w F=V    V written to the file F of each job's group
 *   -j PROCS  a cgroup.procs file each job joins
 * In DIR, F and PROCS an '@' stands for the job's number (0 to N-1), so
 * each job has groups of its own. It prints the closing line of the
 * workloads: result=OK/N, with OK the jobs that exited with status 0.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"

#define MAXN 64

static const char *made[MAXN], *writes[MAXN], *joins[MAXN];
static int n_made, n_writes, n_joins;

/* subst is s with each '@' replaced by job i's number. */
static char *subst(const char *s, long i, char *buf, size_t size) {
	size_t o = 0;
	for (; *s && o + 24 < size; s++) {
		if (*s == '@')
			o += snprintf(buf + o, size - o, "%ld", i);
		else
			buf[o++] = *s;
	}
	buf[o] = 0;
	return buf;
}

static void die(const char *what, const char *arg) {
	fprintf(stderr, "startloop: %s %s: %s\n", what, arg, strerror(errno));
	_exit(125);
}

static void put(const char *path, const char *v) {
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, v, strlen(v)) != (ssize_t)strlen(v))
		die("write", path);
	close(fd);
}

static void add(const char **list, int *n, const char *v) {
	if (*n == MAXN) {
		fprintf(stderr, "startloop: more than %d -m, -w or -j\n", MAXN);
		exit(2);
	}
	list[(*n)++] = v;
}

/* job is the child: PID 1 of its namespaces. ready is the pipe to the
 * parent (written once the user namespace is made, for its id maps), go
 * the pipe it waits on before it uses its ids. */
static void job(long i, int userns, uid_t uid, gid_t gid, gid_t *gs, int ng, char **prog, int ready, int go) {
	char b[4096];
	for (int k = 0; k < n_joins; k++)
		put(subst(joins[k], i, b, sizeof b), "0");
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		die("make mounts private", "/");
	if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
		die("mount", "/proc");
	if (userns) {
		char c;
		if (unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWIPC) < 0)
			die("unshare", "user namespace");
		if (write(ready, "u", 1) != 1 || read(go, &c, 1) != 1)
			die("wait for", "the id maps");
	}
	if (setgroups(ng, gs) < 0 || setgid(gid) < 0 || setuid(uid) < 0)
		die("drop to", "the job's user");
	execv(prog[0], prog);
	die("execute", prog[0]);
}

/* mapIDs maps every id to itself in pid's user namespace. */
static void mapIDs(pid_t pid) {
	char p[64];
	static const char *maps[] = {"uid_map", "gid_map"};
	for (int k = 0; k < 2; k++) {
		snprintf(p, sizeof p, "/proc/%d/%s", (int)pid, maps[k]);
		put(p, "0 0 4294967295\n");
	}
}

/* rmdirRetry removes a group: EBUSY right after its last process died
 * is the kernel tearing it down, for a few milliseconds. */
static void rmdirRetry(const char *dir) {
	for (int k = 0; k < 500; k++) {
		if (rmdir(dir) == 0 || errno == ENOENT)
			return;
		if (errno != EBUSY)
			break;
		usleep(2000);
	}
	fprintf(stderr, "startloop: rmdir %s: %s\n", dir, strerror(errno));
}

/* one runs job i and returns its exit status (-1: it did not start). */
static int one(long i, int userns, uid_t uid, gid_t gid, gid_t *gs, int ng, char **prog) {
	char b[4096];
	for (int k = 0; k < n_made; k++)
		if (mkdir(subst(made[k], i, b, sizeof b), 0755) < 0 && errno != EEXIST)
			die("make group", b);
	for (int k = 0; k < n_writes; k++) {
		char *eq = strchr(writes[k], '=');
		char path[4096];
		size_t len = eq - writes[k];
		memcpy(path, writes[k], len);
		path[len] = 0;
		put(subst(path, i, b, sizeof b), eq + 1);
	}
	int up[2], down[2];
	if (pipe2(up, O_CLOEXEC) < 0 || pipe2(down, O_CLOEXEC) < 0)
		die("pipe", "");
	int flags = CLONE_NEWPID | CLONE_NEWNS | (userns ? 0 : CLONE_NEWIPC);
	pid_t pid = syscall(SYS_clone, flags | SIGCHLD, NULL, NULL, NULL, NULL);
	if (pid < 0)
		die("clone", prog[0]);
	if (pid == 0)
		job(i, userns, uid, gid, gs, ng, prog, up[1], down[0]);
	close(up[1]);
	close(down[0]);
	if (userns) {
		char c;
		if (read(up[0], &c, 1) == 1) {
			mapIDs(pid);
			if (write(down[1], "g", 1) != 1)
				die("write", "pipe");
		}
	}
	close(up[0]);
	close(down[1]);
	int st;
	if (waitpid(pid, &st, 0) != pid)
		die("wait", prog[0]);
	for (int k = n_made - 1; k >= 0; k--)
		rmdirRetry(subst(made[k], i, b, sizeof b));
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int main(int argc, char **argv) {
	long n = 0;
	int userns = 0, opt;
	uid_t uid = 0;
	gid_t gid = 0, gs[256];
	int ng = 0;
	while ((opt = getopt(argc, argv, "Un:u:g:G:m:w:j:")) != -1) {
		switch (opt) {
		case 'U':
			userns = 1;
			break;
		case 'n':
			n = wl_arg("startloop", "-n", optarg);
			break;
		case 'u':
			uid = strtoul(optarg, NULL, 10);
			break;
		case 'g':
			gid = strtoul(optarg, NULL, 10);
			break;
		case 'G':
			for (char *p = strtok(optarg, ","); p && ng < 256; p = strtok(NULL, ","))
				gs[ng++] = strtoul(p, NULL, 10);
			break;
		case 'm':
			add(made, &n_made, optarg);
			break;
		case 'w':
			if (!strchr(optarg, '=')) {
				fprintf(stderr, "startloop: -w %s: want FILE=VALUE\n", optarg);
				return 2;
			}
			add(writes, &n_writes, optarg);
			break;
		case 'j':
			add(joins, &n_joins, optarg);
			break;
		default:
			goto usage;
		}
	}
	if (n <= 0 || optind >= argc)
		goto usage;
	double start = wl_now();
	long ok = 0;
	for (long i = 0; i < n; i++)
		ok += one(i, userns, uid, gid, gs, ng, argv + optind) == 0;
	char res[64];
	snprintf(res, sizeof res, "%ld/%ld", ok, n);
	wl_done("startloop", res, start);
	return ok == n ? 0 : 1;
usage:
	fprintf(stderr, "usage: startloop [-U] -n N -u UID -g GID [-G GIDS] [-m DIR]... [-w FILE=VALUE]... [-j PROCS]... -- PROG [ARGS...]\n");
	return 2;
}
