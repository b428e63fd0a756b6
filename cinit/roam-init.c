/*
 * roam-init — PID 1 of a roam job's own PID and mount namespaces.
 *
 * The agent starts it as root with CLONE_NEWPID|CLONE_NEWNS. It
 *   1. joins the node's cgroups (writes "0" to each cgroup.procs given),
 *   2. makes its mounts private and mounts its own /proc (so CRIU can dump
 *      the job and restore it anywhere without PID clashes),
 *   3. becomes a session leader (CRIU wants the session inside the
 *      namespace), drops to the caller's uid, gid and groups, and enters
 *      the working directory,
 *   4. forks the program into a process group of its own, forwards every
 *      signal it gets to that group (PID 1 of a namespace ignores signals it
 *      has no handler for, so without this a `sleep` could not be
 *      interrupted), reaps orphans,
 *   5. when the program ends, writes its status to fd 3 — the exit code, or
 *      128+S for a death by signal S, as a shell reports it — and exits with
 *      that code. The kernel then ends whatever else is left in the
 *      namespace.
 *
 * usage: roam-init UID GID GROUPS CWD CGROUPS -- PROG [ARGS...]
 *   GROUPS  comma-separated supplementary gids, or "-"
 *   CGROUPS colon-separated cgroup.procs paths, or "-"
 * Errors before the program runs go to stderr as one line; exit 126 when
 * the program cannot be executed, 127 when it is not found, 125 otherwise.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

static void die(const char *what, const char *arg) {
	fprintf(stderr, "roam: %s %s: %s\n", what, arg, strerror(errno));
	exit(125);
}

static void join_cgroups(char *list) {
	if (strcmp(list, "-") == 0)
		return;
	for (char *p = strtok(list, ":"); p; p = strtok(NULL, ":")) {
		int fd = open(p, O_WRONLY | O_CLOEXEC);
		if (fd < 0 || write(fd, "0", 1) != 1)
			die("join cgroup", p);
		close(fd);
	}
}

static void drop_privileges(uid_t uid, gid_t gid, char *groups) {
	gid_t gs[256];
	int n = 0;
	if (strcmp(groups, "-") != 0)
		for (char *p = strtok(groups, ","); p && n < 256; p = strtok(NULL, ","))
			gs[n++] = (gid_t)strtoul(p, NULL, 10);
	if (setgroups(n, gs) < 0)
		die("setgroups", groups);
	if (setgid(gid) < 0)
		die("setgid", "");
	if (setuid(uid) < 0)
		die("setuid", "");
}

int main(int argc, char **argv) {
	if (argc < 8 || strcmp(argv[6], "--") != 0) {
		fprintf(stderr, "usage: roam-init UID GID GROUPS CWD CGROUPS -- PROG [ARGS...]\n");
		return 125;
	}
	uid_t uid = (uid_t)strtoul(argv[1], NULL, 10);
	gid_t gid = (gid_t)strtoul(argv[2], NULL, 10);
	char *cwd = argv[4];
	char **prog = argv + 7;

	join_cgroups(argv[5]);
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		die("make mounts private", "/");
	if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
		die("mount", "/proc");
	if (getsid(0) != getpid() && setsid() < 0)
		die("setsid", "");
	drop_privileges(uid, gid, argv[3]);
	if (chdir(cwd) < 0)
		die("working directory", cwd);

	sigset_t all, old;
	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, &old);

	pid_t child = fork();
	if (child < 0)
		die("fork", prog[0]);
	if (child == 0) {
		setpgid(0, 0);
		for (int s = 1; s < NSIG; s++)
			signal(s, SIG_DFL);
		sigprocmask(SIG_SETMASK, &old, NULL);
		close(3);
		execvp(prog[0], prog);
		int code = errno == ENOENT ? 127 : 126;
		fprintf(stderr, "roam: %s: %s\n", prog[0], strerror(errno));
		_exit(code);
	}
	setpgid(child, child);

	int code = -1;
	while (code < 0) {
		siginfo_t si;
		int sig = sigwaitinfo(&all, &si);
		if (sig < 0)
			continue;
		if (sig != SIGCHLD) {
			/* Forward to the program's process group, as a terminal
			 * delivers Ctrl-C to the foreground group. */
			if (kill(-child, sig) < 0)
				kill(child, sig);
			continue;
		}
		int st;
		pid_t p;
		while ((p = waitpid(-1, &st, WNOHANG)) > 0) {
			if (p != child)
				continue; /* an orphan reparented to us */
			if (WIFEXITED(st))
				code = WEXITSTATUS(st);
			else if (WIFSIGNALED(st))
				code = 128 + WTERMSIG(st);
		}
	}
	dprintf(3, "%d\n", code);
	fsync(3);
	return code;
}
