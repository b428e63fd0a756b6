/*
 * roam-init — PID 1 of a roam job's own PID and mount namespaces.
 *
 * The agent starts it as root with CLONE_NEWPID|CLONE_NEWNS (or
 * CLONE_NEWPID alone with -M, below). It
 *   0. blocks every signal and closes fd 4, which tells the agent it is
 *      ready for signals,
 *   1. joins the job's cgroups (writes "0" to each cgroup.procs given; one
 *      marked with a leading '+', its CPU group, only once it is set up),
 *   2. makes its mounts private, keeps only the mounts that hold files
 *      (see minimal_mounts) and mounts its own /proc, so CRIU can dump the
 *      job and restore it on any node without PID clashes and without
 *      having to rebuild the host's sysfs, cgroup or namespace mounts; and
 *      a /tmp and /var/tmp of the job's own (see mount_job_tmp). With -M
 *      the dropping is done already: it takes a copy of the node's
 *      template (fd 6, a mount namespace that -T left as this step leaves
 *      a job's) rather than of the agent's mounts. Each unmount waits for
 *      an RCU grace period of the kernel's, and a job unmounted some 30 of
 *      the host's: the template pays for them once a node, not once a job,
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
 * With -U (a user's job, where the host allows user namespaces), steps 3
 * and 4 change, so that root's CRIU holds inside the job what it needs to
 * dump it (CAP_SYS_RESOURCE to read a user's rlimits, where the host's
 * root may lack it), and nothing more than root already has outside:
 *   3a. once the mounts of step 2 are made (as the host's root: inside a
 *       namespace owned by a new user namespace the host's mounts are
 *       locked and could not be dropped), it unshares the user, mount and
 *       IPC namespaces in one call (CRIU wants the mount and IPC namespaces
 *       owned by the job's user namespace), and a child it forked before
 *       maps every uid and gid to itself ("0 0 4294967295"): ids, file
 *       ownership and groups read the same numbers inside as outside;
 *   3b. it executes itself again (-R), so that its program file and memory
 *       belong to the job's namespaces (CRIU cannot dump a task whose
 *       memory belongs to a namespace it has no capability in), and
 *       reopens its stdout, stderr and status through JOB_DIR there;
 *   4a. it stays uid 0 of the job's user namespace, which the user's
 *       processes cannot signal or ptrace (another uid, no capability in
 *       it), and only the program drops to the user. So it stays dumpable
 *       for CRIU after a restore, when its memory is CRIU's again.
 *
 * usage: roam-init [-U] [-M] UID GID GROUPS CWD CGROUPS SPOOL TMP -- PROG [ARGS...]
 *        roam-init -T
 *   -M      fd 6 is the node's template mount namespace (see -T)
 *   -T      make the template: started with CLONE_NEWNS, it leaves its
 *           mount namespace as step 2 leaves a job's, writes one byte to
 *           stdout and waits for the end of stdin, meanwhile the agent
 *           opens the namespace (/proc/PID/ns/mnt) and keeps it
 *   GROUPS  comma-separated supplementary gids, or "-"
 *   CGROUPS colon-separated cgroup.procs paths ('+' first: join late), or "-"
 *   SPOOL   the job's spool directory, bound at JOB_DIR, or "-"
 *   TMP     the size in bytes of each of the job's own /tmp and /var/tmp
 * The program's environment is not roam-init's: roam-init runs with none,
 * so that nothing of the user's is read by its C library's start-up as
 * root (glibc's GLIBC_TUNABLES, say, were it built with glibc), and reads
 * the program's from fd 5, NUL-terminated strings, in the program's
 * process only, right before executing it.
 * Errors before the program runs go to stderr as one line; exit 126 when
 * the program cannot be executed, 127 when it is not found, 125 otherwise.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

/* The job's own scratch directories: a tmpfs of the job's own is mounted
 * on each (see mount_job_tmp), hiding the node's. */
static const char *job_tmp_dirs[] = {"/tmp", "/var/tmp", NULL};

/* The source name of those tmpfs mounts in mountinfo, by which the agent
 * tells them from the node's mounts (ckpt.JobTmpSource): CRIU dumps their
 * content into the images and mounts them again on restore, rather than
 * taking them as external mounts to bind from the node. */
#define JOB_TMP_SOURCE "roam-job-tmp"

/* Filesystems a job never needs and CRIU could not carry to another node:
 * they describe the host (sysfs, cgroups, namespaces, terminals) rather
 * than hold the user's files. */
static const char *dropped_fs[] = {
	"proc", "sysfs", "cgroup", "cgroup2", "nsfs", "devpts", "mqueue",
	"securityfs", "debugfs", "tracefs", "bpf", "fusectl", "configfs",
	"pstore", "autofs", "binfmt_misc", "hugetlbfs", "efivarfs", "selinuxfs",
	"rpc_pipefs", "nfsd", NULL,
};

/* fail ends roam-init before the program ran. As PID 1 of the job it
 * writes the status itself (fd 3): without one, the agent takes the job
 * for killed (137) and the user never learns it did not start. The
 * forked child exits only: PID 1 writes the status it reaps. */
static void fail(void) {
	if (getpid() == 1) {
		dprintf(3, "125\n");
		fsync(3);
	}
	exit(125);
}

static void die(const char *what, const char *arg) {
	fprintf(stderr, "roam: %s %s: %s\n", what, arg, strerror(errno));
	fail();
}

struct mnt {
	char path[4096];
	int depth, drop;
};

/* under says whether path is dir or below it. */
static int under(const char *path, const char *dir) {
	size_t n = strlen(dir);
	return strncmp(path, dir, n) == 0 && (path[n] == 0 || path[n] == '/');
}

/* minimal_mounts leaves the job a mount tree that can be rebuilt on any
 * node: the root, and the other mounts that hold files (block devices,
 * tmpfs, network filesystems), each of which the agent declares to CRIU as
 * external. Host-describing filesystems go, and so does any mount point
 * mounted twice (an overmount CRIU cannot restore), and so do the mounts
 * at or below the job's scratch directories. A fresh /proc and the job's
 * own /tmp and /var/tmp are mounted afterwards. */
static void minimal_mounts(void) {
	FILE *f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		die("read", "/proc/self/mountinfo");
	static struct mnt m[1024];
	int n = 0;
	char line[8192];
	while (n < 1024 && fgets(line, sizeof line, f)) {
		char path[4096], fstype[256];
		char *dash = strstr(line, " - ");
		if (!dash || sscanf(line, "%*d %*d %*s %*s %4095s", path) != 1 ||
		    sscanf(dash + 3, "%255s", fstype) != 1)
			continue;
		if (strcmp(path, "/") == 0)
			continue;
		struct mnt *e = &m[n++];
		strcpy(e->path, path);
		e->depth = 0;
		for (char *p = path; *p; p++)
			e->depth += *p == '/';
		e->drop = 0;
		for (const char **d = dropped_fs; *d; d++)
			if (strcmp(fstype, *d) == 0)
				e->drop = 1;
		/* The node's own /tmp and whatever is mounted in it: the job's
		 * tmpfs goes there instead, and would otherwise sit on top of
		 * them (an overmount). */
		for (const char **d = job_tmp_dirs; *d; d++)
			if (under(path, *d))
				e->drop = 1;
	}
	fclose(f);
	for (int i = 0; i < n; i++)
		for (int j = 0; j < n; j++)
			if (i != j && strcmp(m[i].path, m[j].path) == 0)
				m[i].drop = 1;
	/* Deepest first, so a mount goes before the one it sits on. */
	for (int d = 4096; d > 0; d--)
		for (int i = n - 1; i >= 0; i--)
			if (m[i].drop && m[i].depth == d)
				umount2(m[i].path, MNT_DETACH);
}

/* The job's spool directory (stdout, stderr, status) is bind-mounted at
 * JOB_DIR inside the job's mount namespace, and those three descriptors are
 * reopened through it. CRIU then sees them on a mount of the job's own,
 * which the agent declares external: on another node the same path is bound
 * to that node's spool directory, and the files reopen there. */
#define JOB_DIR "/run/roam/job"
/* The value the agent queues with every signal it sends (job.SignalMark). */
#define ROAM_SIGNAL_MARK 0x726f616d
/* The value of the SIGTSTP by which the agent asks for SIGSTOP
 * (job.StopMark): SIGSTOP itself, which roam-init cannot catch, would stop
 * roam-init and not the program. */
#define ROAM_STOP_MARK 0x726f5354

static void reopen_spool(void) {
	static const char *names[] = {"stdout", "stderr", "status"};
	for (int fd = 1; fd <= 3; fd++) {
		char p[256];
		snprintf(p, sizeof p, JOB_DIR "/%s", names[fd - 1]);
		int nfd = open(p, O_WRONLY | O_APPEND | O_CLOEXEC);
		if (nfd < 0 || dup2(nfd, fd) < 0)
			die("reopen", p);
		close(nfd);
	}
}

static void bind_spool(const char *spool) {
	if (strcmp(spool, "-") == 0)
		return;
	mkdir("/run/roam", 0755);
	mkdir(JOB_DIR, 0755);
	if (mount(spool, JOB_DIR, NULL, MS_BIND, NULL) < 0)
		die("bind spool", spool);
	reopen_spool();
}

/* mount_job_tmp gives the job a /tmp and a /var/tmp of its own: a tmpfs
 * of at most size bytes on each, empty, with /tmp's usual mode. Compilers,
 * sort and most programs keep their temporary files there, and the node's
 * are each node's own: a job holding one could not move. A tmpfs the job
 * owns moves with it instead, its content in the images, and its pages
 * count against the job's memory, as they would in its processes. A
 * directory that is missing or a symbolic link (/var/tmp -> /tmp on some
 * hosts) gets none: a mount would follow the link onto the other.
 * With -U they are made before the unshare, by the host's root, as the
 * rest of the tree: in the job's namespace they are then locked, and
 * nothing in the job can unmount them or remount them larger (the tmpfs
 * CRIU mounts on a restore is the job's namespace's own, and bounded by
 * the job's memory cgroup as this one is). */
static void mount_job_tmp(const char *size) {
	char opts[64];
	snprintf(opts, sizeof opts, "mode=1777,size=%s", size);
	for (const char **d = job_tmp_dirs; *d; d++) {
		struct stat st;
		if (lstat(*d, &st) < 0 || !S_ISDIR(st.st_mode))
			continue;
		if (mount(JOB_TMP_SOURCE, *d, "tmpfs", MS_NOSUID | MS_NODEV, opts) < 0)
			die("mount the job's own", *d);
	}
}

/* enter_cwd enters the job's working directory. One in the node's /tmp
 * is not the job's: its /tmp is its own, and starts empty. */
static void enter_cwd(const char *cwd) {
	if (chdir(cwd) == 0)
		return;
	for (const char **d = job_tmp_dirs; *d; d++)
		if (under(cwd, *d)) {
			fprintf(stderr, "roam: working directory %s: the job's %s is its own, and starts empty\n", cwd, *d);
			fail();
		}
	die("working directory", cwd);
}

/* enter_userns is step 3a: the job's own user, mount and IPC namespaces,
 * with every id mapped to itself. The map must be written from the
 * parent user namespace, by a process with CAP_SETUID and CAP_SETGID
 * there: a child forked before the unshare, which waits until it is done. */
static void enter_userns(void) {
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		die("pipe", "user namespace");
	pid_t helper = fork();
	if (helper < 0)
		die("fork", "user namespace");
	if (helper == 0) {
		char c;
		close(p[1]);
		if (read(p[0], &c, 1) != 1)
			_exit(1);
		static const char *maps[] = {"/proc/1/uid_map", "/proc/1/gid_map"};
		for (int i = 0; i < 2; i++) {
			int fd = open(maps[i], O_WRONLY | O_CLOEXEC);
			if (fd < 0 || write(fd, "0 0 4294967295\n", 15) != 15) {
				fprintf(stderr, "roam: write %s: %s\n", maps[i], strerror(errno));
				_exit(1);
			}
			close(fd);
		}
		_exit(0);
	}
	close(p[0]);
	if (unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWIPC) < 0)
		die("unshare", "user namespace");
	int st;
	if (write(p[1], "x", 1) != 1 || waitpid(helper, &st, 0) != helper || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		errno = EPERM;
		die("map ids of", "user namespace");
	}
	close(p[1]);
}

/* join_cgroups joins the groups of list (colon-separated cgroup.procs
 * paths), but for those marked with a leading '+': it opens them, for
 * join_late to join once the job is set up (the cgroup mounts are gone by
 * then, see minimal_mounts). */
static int late_fds[8], n_late;

static void join_cgroups(const char *list) {
	if (strcmp(list, "-") == 0)
		return;
	char buf[4096];
	if (strlen(list) >= sizeof buf)
		die("join cgroup", "list too long");
	strcpy(buf, list);
	for (char *p = strtok(buf, ":"); p; p = strtok(NULL, ":")) {
		int late = *p == '+';
		if (late)
			p++;
		int fd = open(p, O_WRONLY | O_CLOEXEC);
		if (fd < 0)
			die("join cgroup", p);
		if (late && n_late < (int)(sizeof late_fds / sizeof late_fds[0])) {
			late_fds[n_late++] = fd;
			continue;
		}
		if (write(fd, "0", 1) != 1)
			die("join cgroup", p);
		close(fd);
	}
}

static void join_late(void) {
	for (int i = 0; i < n_late; i++) {
		if (write(late_fds[i], "0", 1) != 1)
			die("join cgroup", "(CPU group)");
		close(late_fds[i]);
	}
}

/* A user's job starts with no capability in any set. Changing every uid
 * from root to the user empties the permitted, effective and ambient sets,
 * but not the inheritable one, which the agent may have (a unit's
 * AmbientCapabilities gives it some): with a program's file capabilities,
 * an exec would make those permitted again. The agent refuses to move a
 * user's job that holds any (migrate.CheckCreds). */
static void drop_inheritable(void) {
	/* capget(2) and capset(2) as <linux/capability.h> declares them (musl's
	 * headers, which roam-init is built with, leave the kernel's out). */
	struct {
		uint32_t version;
		int pid;
	} h = {0x20080522 /* _LINUX_CAPABILITY_VERSION_3 */, 0};
	struct {
		uint32_t effective, permitted, inheritable;
	} d[2];
	if (syscall(SYS_capget, &h, d) < 0)
		die("capget", "");
	d[0].inheritable = d[1].inheritable = 0;
	if (syscall(SYS_capset, &h, d) < 0)
		die("capset", "inheritable");
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
		die("prctl", "PR_CAP_AMBIENT_CLEAR_ALL");
}

/* MAX_GROUPS is the kernel's NGROUPS_MAX, as many as the agent passes. */
#define MAX_GROUPS 65536

/* parse_groups reads groups ("-", or gids joined by commas) into a list
 * it allocates, every one of them, and says how many in n. */
static gid_t *parse_groups(const char *groups, size_t *n) {
	*n = 0;
	if (strcmp(groups, "-") == 0)
		return NULL;
	size_t cap = 1;
	for (const char *p = groups; *p; p++)
		cap += *p == ',';
	if (cap > MAX_GROUPS)
		die("groups", "more than 65536");
	gid_t *gs = calloc(cap, sizeof *gs);
	if (gs == NULL)
		die("calloc", "groups");
	for (const char *p = groups;; p++) {
		char *end;
		errno = 0;
		unsigned long g = strtoul(p, &end, 10);
		if (end == p || *p < '0' || *p > '9' || errno != 0 || g >= UINT32_MAX ||
		    (*end != ',' && *end != '\0'))
			die("groups", "not a list of gids");
		gs[(*n)++] = (gid_t)g;
		if (*end == '\0')
			return gs;
		p = end;
	}
}

static void drop_privileges(uid_t uid, gid_t gid, char *groups) {
	size_t n;
	gid_t *gs = parse_groups(groups, &n);
	if (uid != 0)
		drop_inheritable();
	if (setgroups(n, gs) < 0)
		die("setgroups", "");
	free(gs);
	if (setgid(gid) < 0)
		die("setgid", "");
	if (setuid(uid) < 0)
		die("setuid", "");
}

/* MAX_ENV bounds the program's environment, above what the agent lets a
 * job have (limits.arg_bytes). */
#define MAX_ENV (64 << 20)

/* read_env reads the program's environment from fd, NUL-terminated
 * strings, and closes fd. */
static char **read_env(int fd) {
	size_t len = 0, cap = 1 << 16;
	char *buf = malloc(cap);
	if (buf == NULL)
		die("malloc", "environment");
	for (;;) {
		if (len == cap) {
			if (cap >= MAX_ENV)
				die("environment", "too large");
			cap *= 2;
			if ((buf = realloc(buf, cap)) == NULL)
				die("malloc", "environment");
		}
		ssize_t n = read(fd, buf + len, cap - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			die("read", "environment");
		if (n == 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	if (len > 0 && buf[len - 1] != '\0')
		die("environment", "not NUL-terminated");
	size_t count = 0;
	for (size_t i = 0; i < len; i++)
		count += buf[i] == '\0';
	char **env = calloc(count + 1, sizeof *env);
	if (env == NULL)
		die("malloc", "environment");
	for (size_t i = 0, k = 0; i < len; i += strlen(buf + i) + 1)
		env[k++] = buf + i;
	return env;
}

/* exec_stage2 is step 3b: roam-init again, with -R, from the same path,
 * which now names the file in the job's own mount namespace. */
static void exec_stage2(char **argv) {
	argv[1] = "-R";
	execv(argv[0], argv);
	die("execute", argv[0]);
}

/* make_template is -T: the mount namespace it was started in becomes the
 * node's template, which each job's roam-init copies (-M). */
static int make_template(void) {
	char c;
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		die("make mounts private", "/");
	minimal_mounts();
	if (write(1, "t", 1) != 1)
		die("write", "stdout");
	while (read(0, &c, 1) > 0)
		;
	return 0;
}

/* enter_template takes a copy of the template at fd 6 as the job's mount
 * namespace, the template itself left as it is for the next job. */
static void enter_template(void) {
	if (setns(6, CLONE_NEWNS) < 0)
		die("enter", "the node's template mount namespace");
	close(6);
	if (unshare(CLONE_NEWNS) < 0)
		die("unshare", "mount namespace");
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		die("make mounts private", "/");
}

int main(int argc, char **argv) {
	/* 0: as root's job always and a user's where user namespaces are
	 * forbidden; 'U': a user's job, before the re-exec; 'R': after it. */
	int mode = 0, template = 0;
	char **args = argv;
	if (argc == 2 && strcmp(argv[1], "-T") == 0)
		return make_template();
	if (argc > 1 && (strcmp(argv[1], "-U") == 0 || strcmp(argv[1], "-R") == 0)) {
		mode = argv[1][1];
		args++;
		argc--;
	}
	/* -M stays in the arguments of the re-exec (-R), which ignores it. */
	if (argc > 1 && strcmp(args[1], "-M") == 0) {
		template = mode != 'R';
		args++;
		argc--;
	}
	if (argc < 10 || strcmp(args[8], "--") != 0 || strspn(args[7], "0123456789") != strlen(args[7]) || atoll(args[7]) <= 0) {
		fprintf(stderr, "usage: roam-init [-U] [-M] UID GID GROUPS CWD CGROUPS SPOOL TMP -- PROG [ARGS...]\n");
		return 125;
	}
	uid_t uid = (uid_t)strtoul(args[1], NULL, 10);
	gid_t gid = (gid_t)strtoul(args[2], NULL, 10);
	char *cwd = args[4];
	char **prog = args + 9;

	/* Block every signal first. PID 1 of a namespace drops a signal it has
	 * no handler for unless the signal is blocked, so a Ctrl-C that came
	 * before this line would be lost; once blocked, it waits in the queue
	 * for the loop below, which forwards it to the program. (Blocked
	 * signals stay blocked, and pending ones pending, across the re-exec
	 * of -U; the program then starts with none blocked.) */
	sigset_t all, old;
	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, &old);
	if (mode == 'R') {
		sigemptyset(&old);
		reopen_spool();
	} else {
		/* Whatever the agent's own parent leaked to it must not reach the
		 * job (nor CRIU: a descriptor of the host's mounts cannot be
		 * dumped). Fd 4 is the ready pipe, closed below; fd 5 the
		 * program's environment, closed once read; fd 6 the template,
		 * closed once entered. */
		syscall(SYS_close_range, template ? 7 : 6, ~0U, 0);
		/* The agent runs ahead of jobs (nice -10); the job starts at 0. */
		setpriority(PRIO_PROCESS, 0, 0);
		/* Before the template, which has no cgroup mounts. */
		join_cgroups(args[5]);
		if (template) {
			enter_template();
		} else {
			if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
				die("make mounts private", "/");
			minimal_mounts();
		}
		bind_spool(args[6]);
		if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
			die("mount", "/proc");
		mount_job_tmp(args[7]);
	}
	if (mode == 'U') {
		enter_userns();
		/* The CPU group is joined before the re-exec: its descriptor does
		 * not survive it. */
		join_late();
		exec_stage2(argv);
	}
	/* Closing fd 4 tells the agent the job is set up: signals are safe to
	 * send (they wait, blocked, for the loop below) and its spool is bound
	 * at JOB_DIR, so it can be migrated. The agent reports the job started
	 * only then. A failure above closes it by exiting. */
	close(4);
	/* The CPU group last: under a slow node's quota, shared with the jobs
	 * already running, the setup above took seconds. */
	join_late();
	if (getsid(0) != getpid() && setsid() < 0)
		die("setsid", "");
	if (mode == 'R') {
		/* Step 4a: roam-init stays root of the job's namespace, and works
		 * in JOB_DIR, which every node has (its own working directory is
		 * one more directory a move must find on the other node). */
		if (chdir(JOB_DIR) < 0)
			die("working directory", JOB_DIR);
	} else {
		drop_privileges(uid, gid, args[3]);
		/* The user must not ptrace us or read our /proc files: fd 3
		 * carries the job's status to the agent. Changing uid from root
		 * made us undumpable already where fs.suid_dumpable is 0 (or 2),
		 * not where it is 1; this holds either way, and CRIU keeps it
		 * across a move. The program is dumpable again once it execs, as
		 * any program is. */
		if (prctl(PR_SET_DUMPABLE, 0) < 0)
			die("prctl", "PR_SET_DUMPABLE");
		enter_cwd(cwd);
	}

	pid_t child = fork();
	if (child < 0)
		die("fork", prog[0]);
	if (child == 0) {
		setpgid(0, 0);
		if (mode == 'R') {
			drop_privileges(uid, gid, args[3]);
			enter_cwd(cwd);
		}
		for (int s = 1; s < NSIG; s++)
			signal(s, SIG_DFL);
		sigprocmask(SIG_SETMASK, &old, NULL);
		close(3);
		environ = read_env(5);
		execvp(prog[0], prog);
		int code = errno == ENOENT ? 127 : 126;
		fprintf(stderr, "roam: %s: %s\n", prog[0], strerror(errno));
		_exit(code);
	}
	setpgid(child, child);
	close(5);

	int code = -1;
	while (code < 0) {
		siginfo_t si;
		int sig = sigwaitinfo(&all, &si);
		if (sig < 0)
			continue;
		if (sig == SIGCONT && !(si.si_code == SI_QUEUE && si.si_value.sival_int == ROAM_SIGNAL_MARK))
			/* The SIGCONT that thaws the whole tree after a
			 * migration: it continued us; the processes that were
			 * stopped before stay stopped. `roam kill -s CONT`
			 * comes marked, and is forwarded. */
			continue;
		if (sig == SIGTSTP && si.si_code == SI_QUEUE && si.si_value.sival_int == ROAM_STOP_MARK) {
			/* roam kill -s STOP: the program's group, as ^Z; once the
			 * program has ended, every process left in the job. */
			if (kill(-child, SIGSTOP) < 0)
				kill(-1, SIGSTOP);
			continue;
		}
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
