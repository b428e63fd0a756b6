// kinds: one small program for each kind of kernel state a job may hold,
// to show what a migration keeps (the migration kinds test, test/e2e).
//
// Usage: kinds KIND [DIR]
//
// It sets up KIND's state (files in DIR, default ".", where one is
// needed), prints "ready", and waits. Each SIGUSR1 makes it check the
// state and print "ok N" (the Nth good check), or print "FAIL: why" and
// exit 1. SIGUSR2 says that the job was sent SIGCONT on purpose: the
// "stopped" kind's child must run from then on. SIGTERM ends it with
// status 0.
//
// Each check compares the state with what the program set up: a file's
// bytes, a lock that another process is still refused, the bytes
// buffered in a FIFO, a pipe or a socket, a SysV segment's content and a
// semaphore's value, timers that went on firing, a stopped child that
// stayed stopped.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <mqueue.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t want_check, want_running, want_end;
static const char *kind;
static char dir[PATH_MAX];
static int checks;

// The state a kind keeps between checks.
static int fd1 = -1, fd2 = -1;
static char path1[PATH_MAX + 64], path2[PATH_MAX + 64];
static unsigned char *mem;
static pid_t child = -1;
static volatile uint64_t *shared_counter;
static uint64_t last_count;
static int shmid = -1, semid = -1;
static mqd_t mq = (mqd_t)-1;
static char mqname[64];
static long token;
static timer_t ptimer;
static volatile sig_atomic_t alarms, ptimer_hits;

#define PATTERN_LEN 4096
static unsigned char pattern[PATTERN_LEN];

// cleanup removes what outlives the process: its files, and its SysV
// objects (in an IPC namespace of its own they would go with it).
static void cleanup(void) {
	if (shmid >= 0)
		shmctl(shmid, IPC_RMID, NULL);
	if (semid >= 0)
		semctl(semid, 0, IPC_RMID);
	unlink(path1);
	if (mqname[0])
		mq_unlink(mqname);
}

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void fail(const char *fmt, ...) {
	va_list ap;
	va_start(ap, fmt);
	printf("FAIL: %s: ", kind);
	vprintf(fmt, ap);
	printf("\n");
	va_end(ap);
	fflush(stdout);
	if (child > 0)
		kill(child, SIGKILL);
	cleanup();
	exit(1);
}

static void die(const char *what) {
	printf("setup failed: %s: %s\n", what, strerror(errno));
	fflush(stdout);
	cleanup();
	exit(2);
}

static void on_usr1(int s) { (void)s; want_check = 1; }
static void on_usr2(int s) { (void)s; want_running = 1; want_check = 1; }
static void on_term(int s) { (void)s; want_end = 1; }
static void on_alarm(int s) { (void)s; alarms++; }
static void on_ptimer(int s) { (void)s; ptimer_hits++; }

static void fill_pattern(void) {
	for (int i = 0; i < PATTERN_LEN; i++)
		pattern[i] = (unsigned char)(i * 7 + 13);
}

static void check_fd_content(int fd, const char *what) {
	unsigned char buf[PATTERN_LEN];
	ssize_t n = pread(fd, buf, sizeof buf, 0);
	if (n != PATTERN_LEN || memcmp(buf, pattern, PATTERN_LEN) != 0)
		fail("%s holds %zd bytes, not the %d written", what, n, PATTERN_LEN);
}

static void check_mem(const char *what) {
	if (memcmp(mem, pattern, PATTERN_LEN) != 0)
		fail("%s differs from what was written", what);
}

// A child process that counts in shared memory while it runs.
static void start_counter_child(void) {
	shared_counter = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (shared_counter == MAP_FAILED)
		die("mmap");
	child = fork();
	if (child < 0)
		die("fork");
	if (child == 0) {
		struct timespec ms = {0, 1000000};
		for (;;) {
			(*shared_counter)++;
			nanosleep(&ms, NULL);
		}
	}
}

// queued is how many bytes a pipe, FIFO or socket holds unread.
static int queued(int fd) {
	int n = -1;
	if (ioctl(fd, FIONREAD, &n) < 0)
		fail("FIONREAD: %s", strerror(errno));
	return n;
}

// fdinfo_value reads "key: value" of /proc/self/fdinfo/fd.
static long long fdinfo_value(int fd, const char *key) {
	char p[64], line[512];
	snprintf(p, sizeof p, "/proc/self/fdinfo/%d", fd);
	FILE *f = fopen(p, "r");
	if (!f)
		fail("open %s: %s", p, strerror(errno));
	size_t kl = strlen(key);
	long long v = -1;
	while (fgets(line, sizeof line, f))
		if (strncmp(line, key, kl) == 0 && line[kl] == ':') {
			v = strtoll(line + kl + 1, NULL, 0);
			break;
		}
	fclose(f);
	return v;
}

// other_refused says whether another process is refused the lock kind
// takes on path1.
static void check_lock_refused(void) {
	pid_t p = fork();
	if (p < 0)
		fail("fork: %s", strerror(errno));
	if (p == 0) {
		int fd = open(path1, O_RDWR);
		if (fd < 0)
			_exit(3);
		if (strcmp(kind, "flock") == 0 || strcmp(kind, "flock-shared") == 0)
			_exit(flock(fd, LOCK_EX | LOCK_NB) < 0 && errno == EWOULDBLOCK ? 0 : 1);
		struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0};
		int cmd = strcmp(kind, "ofdlock") == 0 ? F_OFD_SETLK : F_SETLK;
		_exit(fcntl(fd, cmd, &fl) < 0 && (errno == EAGAIN || errno == EACCES) ? 0 : 1);
	}
	int st;
	if (waitpid(p, &st, 0) != p || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		fail("another process could take the lock on %s (status %d)", path1, st);
}

static void *spin_thread(void *arg) {
	volatile uint64_t *c = arg;
	struct timespec ms = {0, 2000000};
	for (;;) {
		(*c)++;
		nanosleep(&ms, NULL);
	}
	return NULL;
}

#define NTHREADS 32
static uint64_t thread_counts[NTHREADS], thread_last[NTHREADS];

static void setup(void) {
	fill_pattern();
	snprintf(path1, sizeof path1, "%s/kinds-%s-%d.1", dir, kind, getpid());
	snprintf(path2, sizeof path2, "%s/kinds-%s-%d.2", dir, kind, getpid());
	if (strcmp(kind, "ghost") == 0 || strcmp(kind, "ghost-big") == 0) {
		// A temporary file deleted right after it was opened.
		fd1 = open(path1, O_RDWR | O_CREAT | O_EXCL, 0600);
		if (fd1 < 0)
			die("open");
		if (pwrite(fd1, pattern, PATTERN_LEN, 0) != PATTERN_LEN)
			die("write");
		if (strcmp(kind, "ghost-big") == 0) {
			// Past any sensible ghost limit: 256 MiB on disk.
			static char zero[1 << 20];
			memset(zero, 1, sizeof zero);
			for (int i = 1; i <= 256; i++)
				if (pwrite(fd1, zero, sizeof zero, (off_t)i << 20) != sizeof zero)
					die("write");
		}
		unlink(path1);
	} else if (strcmp(kind, "memfd") == 0) {
		fd1 = memfd_create("kinds", 0);
		if (fd1 < 0 || write(fd1, pattern, PATTERN_LEN) != PATTERN_LEN)
			die("memfd");
		mem = mmap(NULL, PATTERN_LEN, PROT_READ | PROT_WRITE, MAP_SHARED, fd1, 0);
		if (mem == MAP_FAILED)
			die("mmap");
	} else if (strcmp(kind, "shmanon") == 0 || strcmp(kind, "devzero") == 0) {
		int fd = -1;
		int flags = MAP_SHARED;
		if (strcmp(kind, "devzero") == 0) {
			fd = open("/dev/zero", O_RDWR);
			if (fd < 0)
				die("open /dev/zero");
		} else {
			flags |= MAP_ANONYMOUS;
		}
		mem = mmap(NULL, PATTERN_LEN, PROT_READ | PROT_WRITE, flags, fd, 0);
		if (mem == MAP_FAILED)
			die("mmap");
		if (fd >= 0)
			close(fd);
		// A child shares it: what one writes the other reads.
		child = fork();
		if (child < 0)
			die("fork");
		if (child == 0) {
			memcpy(mem, pattern, PATTERN_LEN);
			for (;;)
				pause();
		}
		for (int i = 0; i < 1000 && memcmp(mem, pattern, PATTERN_LEN) != 0; i++)
			usleep(1000);
	} else if (strcmp(kind, "flock") == 0 || strcmp(kind, "flock-shared") == 0 || strcmp(kind, "posixlock") == 0 ||
		   strcmp(kind, "ofdlock") == 0) {
		// flock, posixlock, ofdlock: in the job's own directory (dir);
		// flock-shared: in a directory other nodes share.
		fd1 = open(path1, O_RDWR | O_CREAT, 0600);
		if (fd1 < 0)
			die("open");
		struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0};
		if (strncmp(kind, "flock", 5) == 0 ? flock(fd1, LOCK_EX) < 0
		    : fcntl(fd1, strcmp(kind, "ofdlock") == 0 ? F_OFD_SETLK : F_SETLK, &fl) < 0)
			die("lock");
	} else if (strcmp(kind, "fifo") == 0 || strcmp(kind, "fifo-shared") == 0) {
		if (mkfifo(path1, 0600) < 0)
			die("mkfifo");
		fd1 = open(path1, O_RDWR | O_NONBLOCK);
		if (fd1 < 0 || write(fd1, "0123456789", 10) != 10)
			die("fifo");
	} else if (strcmp(kind, "sysvshm") == 0) {
		// The same key in every job: each must see its own segment.
		shmid = shmget(0x524f414d, PATTERN_LEN, IPC_CREAT | IPC_EXCL | 0600);
		if (shmid < 0)
			die("shmget (another job's segment with this key is visible?)");
		mem = shmat(shmid, NULL, 0);
		if (mem == (void *)-1)
			die("shmat");
		token = (long)getpid() * 7919 + time(NULL);
		memcpy(mem, pattern, PATTERN_LEN);
		memcpy(mem, &token, sizeof token);
		memcpy(pattern, &token, sizeof token);
	} else if (strcmp(kind, "sysvsem") == 0) {
		semid = semget(0x524f414d, 1, IPC_CREAT | IPC_EXCL | 0600);
		if (semid < 0)
			die("semget (another job's set with this key is visible?)");
		if (semctl(semid, 0, SETVAL, 7) < 0)
			die("semctl");
	} else if (strcmp(kind, "mqueue") == 0 || strcmp(kind, "mqueue-unlinked") == 0) {
		struct mq_attr a = {.mq_maxmsg = 4, .mq_msgsize = 16};
		snprintf(mqname, sizeof mqname, "/roam-kinds-%d", (int)getpid());
		mq = mq_open(mqname, O_CREAT | O_EXCL | O_RDWR | O_NONBLOCK, 0600, &a);
		if (mq == (mqd_t)-1 || mq_send(mq, "0123456789", 10, 1) < 0)
			die("mq_open");
		if (strcmp(kind, "mqueue-unlinked") == 0) {
			mq_unlink(mqname);
			mqname[0] = 0;
		}
	} else if (strcmp(kind, "lease") == 0) {
		// A read lease (F_SETLEASE) on a file in the job's directory.
		fd1 = open(path1, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		if (fd1 < 0 || write(fd1, "lease", 5) != 5 || close(fd1) < 0)
			die("lease file");
		fd1 = open(path1, O_RDONLY);
		if (fd1 < 0 || fcntl(fd1, F_SETLEASE, F_RDLCK) < 0)
			die("F_SETLEASE");
	} else if (strcmp(kind, "setuid") == 0) {
		// A child that changed its credentials, as a set-user-id
		// program would (started as root, now nobody); ready once it has.
		int p[2];
		char c;
		if (pipe(p) < 0)
			die("pipe");
		child = fork();
		if (child == 0) {
			if (setresgid(65534, 65534, 65534) < 0 || setresuid(65534, 65534, 65534) < 0)
				_exit(1);
			close(p[0]);
			if (write(p[1], "x", 1) != 1)
				_exit(1);
			close(p[1]);
			for (;;)
				pause();
		}
		if (child < 0)
			die("fork");
		close(p[1]);
		if (read(p[0], &c, 1) != 1)
			die("the child could not change its credentials");
		close(p[0]);
	} else if (strcmp(kind, "stopped-job") == 0) {
		// Nothing: the test stops the whole job with roam kill -s STOP.
	} else if (strcmp(kind, "stopped") == 0) {
		start_counter_child();
		kill(child, SIGSTOP);
		int st;
		if (waitpid(child, &st, WUNTRACED) != child || !WIFSTOPPED(st))
			die("stop");
		last_count = *shared_counter;
	} else if (strcmp(kind, "timerfd") == 0) {
		fd1 = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK);
		struct itimerspec its = {{0, 10000000}, {0, 10000000}};
		if (fd1 < 0 || timerfd_settime(fd1, 0, &its, NULL) < 0)
			die("timerfd");
	} else if (strcmp(kind, "posixtimer") == 0) {
		signal(SIGRTMIN, on_ptimer);
		struct sigevent sev = {.sigev_notify = SIGEV_SIGNAL, .sigev_signo = SIGRTMIN};
		struct itimerspec its = {{0, 10000000}, {0, 10000000}};
		if (timer_create(CLOCK_MONOTONIC, &sev, &ptimer) < 0 || timer_settime(ptimer, 0, &its, NULL) < 0)
			die("timer_create");
	} else if (strcmp(kind, "itimer") == 0) {
		signal(SIGALRM, on_alarm);
		struct itimerval it = {{0, 10000}, {0, 10000}};
		if (setitimer(ITIMER_REAL, &it, NULL) < 0)
			die("setitimer");
	} else if (strcmp(kind, "procself") == 0) {
		// A file of its own /proc, held open: read again after each
		// move, it is this process's maps there.
		fd1 = open("/proc/self/maps", O_RDONLY);
		if (fd1 < 0)
			die("open /proc/self/maps");
	} else if (strcmp(kind, "eventfd") == 0) {
		fd1 = eventfd(5, 0);
		if (fd1 < 0)
			die("eventfd");
	} else if (strcmp(kind, "signalfd") == 0) {
		sigset_t m;
		sigemptyset(&m);
		sigaddset(&m, SIGWINCH);
		sigprocmask(SIG_BLOCK, &m, NULL);
		fd1 = signalfd(-1, &m, SFD_NONBLOCK);
		if (fd1 < 0)
			die("signalfd");
		raise(SIGWINCH); // pending until read
	} else if (strcmp(kind, "epoll") == 0) {
		fd1 = epoll_create1(0);
		fd2 = eventfd(1, 0);
		struct epoll_event ev = {.events = EPOLLIN, .data.u64 = 0x524f414d};
		if (fd1 < 0 || fd2 < 0 || epoll_ctl(fd1, EPOLL_CTL_ADD, fd2, &ev) < 0)
			die("epoll");
	} else if (strcmp(kind, "socketpair") == 0 || strcmp(kind, "pipe") == 0) {
		int p[2];
		if ((strcmp(kind, "pipe") == 0 ? pipe(p) : socketpair(AF_UNIX, SOCK_STREAM, 0, p)) < 0)
			die("pipe");
		// The other end in a child: data in flight between processes.
		child = fork();
		if (child == 0) {
			close(p[0]);
			if (write(p[1], "0123456789", 10) != 10)
				_exit(1);
			for (;;)
				pause();
		}
		close(p[1]);
		fd1 = p[0];
		for (int i = 0; i < 1000 && queued(fd1) < 10; i++)
			usleep(1000);
	} else if (strcmp(kind, "threads") == 0) {
		for (int i = 0; i < NTHREADS; i++) {
			pthread_t t;
			if (pthread_create(&t, NULL, spin_thread, &thread_counts[i]) != 0)
				die("pthread_create");
		}
	} else if (strcmp(kind, "process") == 0) {
		// rlimits, the process's name, its environment and cwd.
		struct rlimit rl = {100, 200};
		if (setrlimit(RLIMIT_NOFILE, &rl) < 0 || prctl(PR_SET_NAME, "kinds-name") < 0)
			die("setrlimit/prctl");
		if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0)
			die("prctl");
		setenv("KINDS_TOKEN", "roam", 1);
		if (!getcwd(path2, PATH_MAX))
			die("getcwd");
	} else if (strcmp(kind, "inotify-removed") == 0) {
		// A watched directory that was then removed.
		if (mkdir(path1, 0700) < 0)
			die("mkdir");
		fd1 = inotify_init1(IN_NONBLOCK);
		if (fd1 < 0 || inotify_add_watch(fd1, path1, IN_ALL_EVENTS) < 0)
			die("inotify");
		if (rmdir(path1) < 0)
			die("rmdir");
	} else if (strcmp(kind, "removed-cwd") == 0) {
		if (mkdir(path1, 0700) < 0 || chdir(path1) < 0 || rmdir(path1) < 0)
			die("removed cwd");
	} else if (strcmp(kind, "sleep") == 0) {
		// A child in the middle of a long nanosleep.
		start_counter_child();
		kill(child, SIGKILL);
		waitpid(child, NULL, 0);
		child = fork();
		if (child == 0) {
			struct timespec t = {3, 0};
			for (;;) {
				nanosleep(&t, NULL);
				(*shared_counter)++;
			}
		}
	} else {
		fprintf(stderr, "kinds: unknown kind %s\n", kind);
		exit(2);
	}
}

static void check(void) {
	if (strcmp(kind, "ghost") == 0 || strcmp(kind, "ghost-big") == 0) {
		check_fd_content(fd1, "the deleted file");
	} else if (strcmp(kind, "memfd") == 0) {
		check_fd_content(fd1, "the memfd");
		check_mem("the memfd's mapping");
	} else if (strcmp(kind, "shmanon") == 0 || strcmp(kind, "devzero") == 0) {
		check_mem("the shared mapping");
		// Still shared with the child: what this one writes, the child's
		// mapping shows (the child's pid is in the last bytes it reads).
		mem[PATTERN_LEN - 1] ^= 0xff;
		pattern[PATTERN_LEN - 1] ^= 0xff;
	} else if (strcmp(kind, "flock") == 0 || strcmp(kind, "flock-shared") == 0 || strcmp(kind, "posixlock") == 0 ||
		   strcmp(kind, "ofdlock") == 0) {
		check_lock_refused();
	} else if (strcmp(kind, "fifo") == 0 || strcmp(kind, "fifo-shared") == 0) {
		int n = queued(fd1);
		if (n != 10)
			fail("the FIFO holds %d bytes, not the 10 written", n);
	} else if (strcmp(kind, "sysvshm") == 0) {
		check_mem("the SysV segment");
		struct shmid_ds ds;
		if (shmctl(shmid, IPC_STAT, &ds) < 0 || ds.shm_segsz != PATTERN_LEN)
			fail("the SysV segment is gone or resized");
	} else if (strcmp(kind, "sysvsem") == 0) {
		int v = semctl(semid, 0, GETVAL);
		if (v != 7)
			fail("the semaphore's value is %d, not 7", v);
	} else if (strcmp(kind, "lease") == 0) {
		int l = fcntl(fd1, F_GETLEASE);
		if (l != F_RDLCK)
			fail("the lease is %d, not a read lease (%d)", l, F_RDLCK);
	} else if (strcmp(kind, "setuid") == 0) {
		if (kill(child, 0) < 0)
			fail("the child is gone");
	} else if (strcmp(kind, "mqueue") == 0 || strcmp(kind, "mqueue-unlinked") == 0) {
		struct mq_attr a;
		if (mq_getattr(mq, &a) < 0 || a.mq_curmsgs != 1)
			fail("the message queue holds %ld messages, not 1", mq_getattr(mq, &a) < 0 ? -1L : (long)a.mq_curmsgs);
	} else if (strcmp(kind, "stopped") == 0) {
		uint64_t c = *shared_counter;
		if (!want_running) {
			usleep(50000);
			if (*shared_counter != c || c != last_count)
				fail("the stopped child ran (%llu -> %llu)", (unsigned long long)last_count,
				     (unsigned long long)*shared_counter);
		} else {
			for (int i = 0; i < 1000 && *shared_counter == c; i++)
				usleep(1000);
			if (*shared_counter == c)
				fail("the child did not run after SIGCONT");
		}
	} else if (strcmp(kind, "timerfd") == 0) {
		uint64_t n = 0;
		for (int i = 0; i < 100 && read(fd1, &n, sizeof n) != sizeof n; i++)
			usleep(1000);
		if (n == 0) {
			char p[64], info[512] = "";
			snprintf(p, sizeof p, "/proc/self/fdinfo/%d", fd1);
			FILE *f = fopen(p, "r");
			if (f) {
				size_t r = fread(info, 1, sizeof info - 1, f);
				info[r] = 0;
				fclose(f);
			}
			fail("the timerfd did not fire in 100 ms; fdinfo: %s", info);
		}
	} else if (strcmp(kind, "posixtimer") == 0 || strcmp(kind, "itimer") == 0) {
		volatile sig_atomic_t *hits = strcmp(kind, "itimer") == 0 ? &alarms : &ptimer_hits;
		int before = *hits;
		for (int i = 0; i < 100 && *hits == before; i++)
			usleep(1000);
		if (*hits == before)
			fail("the timer did not fire in 100 ms");
	} else if (strcmp(kind, "procself") == 0) {
		static char maps[1 << 16];
		ssize_t n = pread(fd1, maps, sizeof maps - 1, 0);
		if (n <= 0)
			fail("/proc/self/maps held open reads nothing");
		maps[n] = 0;
		if (!strstr(maps, "[stack]"))
			fail("/proc/self/maps held open is not a process's maps");
	} else if (strcmp(kind, "eventfd") == 0) {
		long long v = fdinfo_value(fd1, "eventfd-count");
		if (v != 5)
			fail("the eventfd counts %lld, not 5", v);
	} else if (strcmp(kind, "signalfd") == 0) {
		sigset_t p;
		sigpending(&p);
		if (!sigismember(&p, SIGWINCH))
			fail("SIGWINCH is no longer pending");
	} else if (strcmp(kind, "epoll") == 0) {
		struct epoll_event ev;
		int n = epoll_wait(fd1, &ev, 1, 0);
		if (n != 1 || ev.data.u64 != 0x524f414d)
			fail("the epoll set reports %d events", n);
	} else if (strcmp(kind, "socketpair") == 0 || strcmp(kind, "pipe") == 0) {
		int n = queued(fd1);
		if (n != 10)
			fail("%d bytes in flight, not 10", n);
	} else if (strcmp(kind, "threads") == 0) {
		usleep(30000);
		for (int i = 0; i < NTHREADS; i++) {
			if (thread_counts[i] == thread_last[i])
				fail("thread %d stopped counting", i);
			thread_last[i] = thread_counts[i];
		}
	} else if (strcmp(kind, "process") == 0) {
		struct rlimit rl;
		char name[32] = "", cwd[PATH_MAX + 64];
		getrlimit(RLIMIT_NOFILE, &rl);
		prctl(PR_GET_NAME, name);
		int sub = 0;
		prctl(PR_GET_CHILD_SUBREAPER, &sub);
		const char *tok = getenv("KINDS_TOKEN");
		if (rl.rlim_cur != 100 || rl.rlim_max != 200)
			fail("RLIMIT_NOFILE is %llu/%llu", (unsigned long long)rl.rlim_cur, (unsigned long long)rl.rlim_max);
		if (strcmp(name, "kinds-name") != 0 || sub != 1)
			fail("name %s, subreaper %d", name, sub);
		if (!tok || strcmp(tok, "roam") != 0 || !getcwd(cwd, sizeof cwd) || strcmp(cwd, path2) != 0)
			fail("environment or working directory changed");
	} else if (strcmp(kind, "inotify-removed") == 0) {
		char buf[4096];
		ssize_t n = read(fd1, buf, sizeof buf);
		if (n < 0 && errno != EAGAIN)
			fail("inotify read: %s", strerror(errno));
	} else if (strcmp(kind, "sleep") == 0) {
		// The child sleeps 3 s at a time: its count goes on.
		uint64_t c = *shared_counter;
		if (checks > 0 && c == last_count) {
			for (int i = 0; i < 4000 && *shared_counter == c; i++)
				usleep(1000);
			if (*shared_counter == c)
				fail("the sleeping child never woke");
		}
		last_count = *shared_counter;
	}
	printf("ok %d\n", ++checks);
	fflush(stdout);
}

int main(int argc, char **argv) {
	if (argc < 2) {
		fprintf(stderr, "usage: kinds KIND [DIR]\n");
		return 2;
	}
	kind = argv[1];
	if (!realpath(argc > 2 ? argv[2] : ".", dir))
		die("realpath");
	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGUSR1, on_usr1);
	signal(SIGUSR2, on_usr2);
	signal(SIGTERM, on_term);
	setup();
	printf("ready\n");
	fflush(stdout);
	while (!want_end) {
		struct timespec t = {0, 20000000};
		nanosleep(&t, NULL);
		if (want_check) {
			want_check = 0;
			check();
		}
	}
	if (child > 0)
		kill(child, SIGKILL);
	cleanup();
	return 0;
}
