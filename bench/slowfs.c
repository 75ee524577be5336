/*
 * slowfs: run a command as if its storage were slow.  Every system call of
 * the command that waits on storage (reads and writes of regular files,
 * opens, stats, directory reads, renames, syncs and the like) is held for a
 * given time before the kernel runs it; calls on pipes, sockets, terminals
 * and other non-files run at once.  Any program can be slowed alike: a C
 * server under its own seccomp filter, or a Go binary making raw system
 * calls from many threads.
 *
 *	slowfs [-v] [-d MS] [-D KIND=MS,...] [-j MS] [-o FILE] [-p DIR]
 *	    [-s SEED] -- command [arg ...]
 *
 * With -p, only calls on paths and descriptors under DIR are held: the
 * storage under test, not the command's libraries or /etc.
 *
 * The means is seccomp user notification.  The child installs a filter
 * that sends the chosen system calls to a listener (which it passes to
 * this process over a socketpair), then runs the command: the filter holds
 * for every thread and every process the command starts, and a filter the
 * command installs itself adds to it (the kernel runs both; an ERRNO or
 * KILL of either wins over ours, ours wins over an ALLOW).  This process
 * receives each call, decides whether it touches storage, and answers it
 * "continue" (run it as asked) once its delay has passed.  Held calls wait
 * in a heap ordered by deadline, so calls of different threads wait at the
 * same time: N threads each held 1 ms make N calls per millisecond.  One
 * thread receives the calls and holds them, another lets them go as they
 * fall due: each answer wakes a thread of the command, and a batch of
 * answers that fell due at once would otherwise keep the calls that come
 * meanwhile waiting to be received, their delay not yet begun (with one
 * thread, the workers of a server with 64 READs in flight saw calls held
 * 1 ms take 1.34 ms, median, and 1.89 ms at the 90th percentile; with
 * two, 1.19 and 1.41).  The receiver blocks in the kernel's receive, with
 * no poll before each call; the main thread only waits for the command.
 * The harness's CPU is taken from the machine it measures, so each call
 * costs one receive, one answer and a look at /proc or the caller's
 * memory (callrate's 64 threads at 1 ms: 16 to 18 us of CPU per held
 * call, against 22 to 24 with a poll before each receive, a condition
 * variable for the releaser and each call checked to be still waiting).
 *
 * What a call on a descriptor works on is read from /proc/TID/fd: the
 * directory /proc/TID of each thread is kept open, so that each call
 * looks up fd/N (or cwd) there, and a path once found to be a regular
 * file or a directory is remembered, so that calls on it need no
 * stat(2).  A path whose type changes (a regular file replaced by a FIFO
 * of the same name) thus keeps its first type: its calls are held all the
 * same, which changes their timing only.  The report (-v, -o) gives this
 * process's own CPU time, what the harness took from the machine, how late
 * held calls were let go, and how many of each kind the command's first
 * thread made (a server's loop, as against its workers).
 *
 * A statx() with AT_STATX_DONT_SYNC runs at once: it asks for what the
 * kernel holds, and a network or FUSE file system answers it without a
 * round trip (statx(2)).  The filter lets it through without asking: a
 * round trip to this process, which such a call never makes to storage,
 * would cost the command two context switches and this process a receive
 * and an answer.
 *
 * A preadv2() or pwritev2() with RWF_NOWAIT on a file whose calls are held
 * is answered EAGAIN at once, as a file system answers when the data is not
 * in memory.  io_uring_setup() and io_setup() are refused with ENOSYS, since
 * their operations would run in the kernel unseen; programs fall back to
 * plain calls.  The descriptors 0, 1 and 2 are never held (the filter lets
 * them through without asking).  Memory-mapped file access is not slowed.
 */

#define _GNU_SOURCE

#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/wait.h>

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/futex.h>
#include <linux/seccomp.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__)
#define SLOWFS_ARCH	AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define SLOWFS_ARCH	AUDIT_ARCH_AARCH64
#else
#error "slowfs knows the system call numbers of x86_64 and aarch64 only"
#endif

#ifndef RWF_NOWAIT
#define RWF_NOWAIT	0x00000008
#endif
#ifndef AT_STATX_DONT_SYNC
#define AT_STATX_DONT_SYNC	0x4000
#endif
#ifndef AT_EMPTY_PATH
#define AT_EMPTY_PATH	0x1000
#endif

/* The kinds of storage call, each with its own delay. */
enum kind {
	K_READ, K_WRITE, K_OPEN, K_CLOSE, K_STAT, K_DIR, K_META, K_SYNC,
	K_NKINDS
};

static const char *const kind_names[K_NKINDS] = {
	"read", "write", "open", "close", "stat", "dir", "meta", "sync"
};

/*
 * How a call names what it works on.  FD: argument fd1 (and fd2 if not
 * -1) are descriptors, held only when one is a regular file or directory.
 * PATH: a path in argument patharg, relative to the descriptor in argument
 * dirarg (-1: to the working directory), always held unless -p says
 * otherwise.  ATFD: the same, but when the flags in argument flagarg hold
 * AT_EMPTY_PATH, dirarg is a descriptor of its own (fstat() is
 * newfstatat(fd, "", AT_EMPTY_PATH) in glibc).  A NULL path (utimensat's)
 * stands for the descriptor dirarg too.
 */
enum how { H_PATH, H_FD, H_ATFD };

struct call {
	int		 nr;
	enum kind	 kind;
	enum how	 how;
	int		 fd1;
	int		 fd2;
	int		 flagarg;	/* AT_EMPTY_PATH or RWF_ flags, or -1 */
	int		 dirarg;	/* -1: relative to the cwd */
	int		 patharg;
};

#define FD1(n, k)	{ (n), (k), H_FD, 0, -1, -1, -1, -1 }
#define CWD(n, k, p)	{ (n), (k), H_PATH, -1, -1, -1, -1, (p) }
#define AT(n, k, d, p)	{ (n), (k), H_PATH, -1, -1, -1, (d), (p) }

static const struct call calls[] = {
	FD1(__NR_read, K_READ),
	FD1(__NR_pread64, K_READ),
	FD1(__NR_readv, K_READ),
	FD1(__NR_preadv, K_READ),
	{ __NR_preadv2, K_READ, H_FD, 0, -1, 5, -1, -1 },
	{ __NR_sendfile, K_READ, H_FD, 1, 0, -1, -1, -1 },
	{ __NR_splice, K_READ, H_FD, 0, 2, -1, -1, -1 },
	{ __NR_copy_file_range, K_READ, H_FD, 0, 2, -1, -1, -1 },
	FD1(__NR_readahead, K_READ),
	FD1(__NR_write, K_WRITE),
	FD1(__NR_pwrite64, K_WRITE),
	FD1(__NR_writev, K_WRITE),
	FD1(__NR_pwritev, K_WRITE),
	{ __NR_pwritev2, K_WRITE, H_FD, 0, -1, 5, -1, -1 },
	FD1(__NR_fallocate, K_WRITE),
	FD1(__NR_ftruncate, K_WRITE),
	CWD(__NR_truncate, K_WRITE, 0),
#ifdef __NR_open
	CWD(__NR_open, K_OPEN, 0),
	CWD(__NR_creat, K_OPEN, 0),
#endif
	AT(__NR_openat, K_OPEN, 0, 1),
	AT(__NR_openat2, K_OPEN, 0, 1),
	FD1(__NR_close, K_CLOSE),
#ifdef __NR_stat
	CWD(__NR_stat, K_STAT, 0),
	CWD(__NR_lstat, K_STAT, 0),
	CWD(__NR_access, K_STAT, 0),
	CWD(__NR_readlink, K_STAT, 0),
#endif
	FD1(__NR_fstat, K_STAT),
	{ __NR_newfstatat, K_STAT, H_ATFD, -1, -1, 3, 0, 1 },
	{ __NR_statx, K_STAT, H_ATFD, -1, -1, 2, 0, 1 },
	CWD(__NR_statfs, K_STAT, 0),
	FD1(__NR_fstatfs, K_STAT),
	AT(__NR_faccessat, K_STAT, 0, 1),
	AT(__NR_faccessat2, K_STAT, 0, 1),
	AT(__NR_readlinkat, K_STAT, 0, 1),
	CWD(__NR_getxattr, K_STAT, 0),
	CWD(__NR_lgetxattr, K_STAT, 0),
	FD1(__NR_fgetxattr, K_STAT),
	CWD(__NR_listxattr, K_STAT, 0),
	CWD(__NR_llistxattr, K_STAT, 0),
	FD1(__NR_flistxattr, K_STAT),
#ifdef __NR_getdents
	FD1(__NR_getdents, K_DIR),
#endif
	FD1(__NR_getdents64, K_DIR),
#ifdef __NR_unlink
	CWD(__NR_unlink, K_META, 0),
	CWD(__NR_rename, K_META, 0),
	CWD(__NR_mkdir, K_META, 0),
	CWD(__NR_rmdir, K_META, 0),
	CWD(__NR_link, K_META, 1),
	CWD(__NR_symlink, K_META, 1),
	CWD(__NR_chmod, K_META, 0),
	CWD(__NR_chown, K_META, 0),
	CWD(__NR_lchown, K_META, 0),
	CWD(__NR_utimes, K_META, 0),
	CWD(__NR_mknod, K_META, 0),
#endif
	AT(__NR_unlinkat, K_META, 0, 1),
	AT(__NR_renameat, K_META, 0, 1),
	AT(__NR_renameat2, K_META, 0, 1),
	AT(__NR_mkdirat, K_META, 0, 1),
	AT(__NR_linkat, K_META, 2, 3),
	AT(__NR_symlinkat, K_META, 1, 2),
	AT(__NR_mknodat, K_META, 0, 1),
	FD1(__NR_fchmod, K_META),
	AT(__NR_fchmodat, K_META, 0, 1),
	FD1(__NR_fchown, K_META),
	AT(__NR_fchownat, K_META, 0, 1),
	AT(__NR_utimensat, K_META, 0, 1),
	CWD(__NR_setxattr, K_META, 0),
	CWD(__NR_lsetxattr, K_META, 0),
	FD1(__NR_fsetxattr, K_META),
	CWD(__NR_removexattr, K_META, 0),
	CWD(__NR_lremovexattr, K_META, 0),
	FD1(__NR_fremovexattr, K_META),
	FD1(__NR_fsync, K_SYNC),
	FD1(__NR_fdatasync, K_SYNC),
	FD1(__NR_sync_file_range, K_SYNC),
	FD1(__NR_syncfs, K_SYNC),
};

#define NCALLS	(sizeof(calls) / sizeof(calls[0]))

/* Calls refused outright: their work would bypass the filter. */
static const int refused[] = { __NR_io_uring_setup, __NR_io_setup };

/* One held call: its deadline on CLOCK_MONOTONIC and its notification id. */
struct held {
	uint64_t	 due;
	uint64_t	 id;
};

/*
 * A binary min-heap of held calls, by deadline, under hlock: the receiver
 * thread receives calls and pushes them, the releaser thread lets them go
 * when due.  The releaser sleeps on the futex hwake until the first
 * deadline (rel_until; UINT64_MAX: none, 0: awake): a call due before it,
 * or the end (hstop), adds to hwake and wakes it.  A futex rather than a
 * condition variable: glibc's takes the lock back marked as waited for, and
 * its next unlock made a system call for no one, once per sleep.
 */
static struct held *heap;
static size_t heap_len, heap_cap;
static pthread_mutex_t hlock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic uint32_t hwake;
static uint64_t rel_until;
static int hstop;

static uint64_t delay_ns[K_NKINDS];	/* per kind; 0: not held */
static uint64_t jitter_ns;
static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;

/* What was seen, for -v and -o. */
static unsigned long long n_calls[K_NKINDS], n_held[K_NKINDS];
static unsigned long long n_nowait, n_blind;
static _Atomic unsigned long long n_gone;	/* both threads answer */
/* Calls held of the command's first thread (a server's loop), by kind. */
static unsigned long long n_first[K_NKINDS];
/* How late held calls were let go, past their deadlines: sum and most. */
static uint64_t late_sum_ns, late_max_ns;
static unsigned long long n_released;

/* -p: only paths under these directories are storage. */
#define MAX_PREFIX	8
static char *prefixes[MAX_PREFIX];
static size_t nprefix;
static size_t held_max;
/*
 * The calls held, integrated over time (held_ns: calls x ns) from the
 * first call held to the last let go (held_t0, held_t1): their mean.
 */
static long double held_ns;
static uint64_t held_t0, held_t1;

static _Atomic pid_t child_pid;	/* read by the receiver too */

static void usage(void) __attribute__((noreturn));
static void die(const char *) __attribute__((noreturn));

static void
usage(void)
{
	fprintf(stderr, "usage: slowfs [-v] [-d MS] [-D KIND=MS,...] [-j MS] "
	    "[-o FILE] [-p DIR] [-s SEED]\n"
	    "           -- command [arg ...]\n"
	    "kinds: read write open close stat dir meta sync "
	    "(-d sets all but close)\n");
	exit(2);
}

static void
die(const char *what)
{
	fprintf(stderr, "slowfs: %s: %s\n", what, strerror(errno));
	exit(125);
}

/* A number of milliseconds (fractional) as nanoseconds; exits if bad. */
static uint64_t
parse_ms(const char *s)
{
	char *end;
	double ms;

	errno = 0;
	ms = strtod(s, &end);
	if (errno != 0 || end == s || *end != '\0' || ms < 0 || ms > 60000) {
		fprintf(stderr, "slowfs: bad delay \"%s\" (milliseconds, "
		    "0 to 60000)\n", s);
		exit(2);
	}
	return (uint64_t)(ms * 1e6 + 0.5);
}

/* -D read=3,write=0.1,... */
static void
parse_kinds(char *s)
{
	char *tok, *eq, *save = NULL;
	int k;

	for (tok = strtok_r(s, ",", &save); tok != NULL;
	    tok = strtok_r(NULL, ",", &save)) {
		if ((eq = strchr(tok, '=')) == NULL)
			usage();
		*eq = '\0';
		for (k = 0; k < K_NKINDS; k++)
			if (strcmp(tok, kind_names[k]) == 0)
				break;
		if (k == K_NKINDS) {
			fprintf(stderr, "slowfs: unknown kind \"%s\"\n", tok);
			usage();
		}
		delay_ns[k] = parse_ms(eq + 1);
	}
}

static uint64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* xorshift64*: a seeded sequence, the same for the same seed. */
static uint64_t
rng_next(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dULL;
}

/* Whether calls of kind k are held at all, and so go to the listener. */
static int
kind_held(int k)
{
	return delay_ns[k] > 0 || (jitter_ns > 0 && k != K_CLOSE);
}

/*
 * The filter: for each call of a held kind, send it to the listener; for
 * calls on a descriptor, let 0, 1 and 2 through first (the standard
 * streams, which a server talks over), and a statx() with
 * AT_STATX_DONT_SYNC (the kernel's copy: never held).  Everything else is
 * allowed; a foreign architecture (a 32-bit call on a 64-bit kernel) is
 * allowed too.
 */
static int
install_filter(void)
{
	struct sock_filter *f;
	struct sock_fprog prog;
	size_t n = 0, i, cap;
	int fd;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	const uint32_t arg0 = offsetof(struct seccomp_data, args[0]);
#else
	const uint32_t arg0 = offsetof(struct seccomp_data, args[0]) + 4;
#endif

	cap = 8 + 5 + 5 * NCALLS + 2 * (sizeof(refused) / sizeof(refused[0]));
	if ((f = calloc(cap, sizeof(*f))) == NULL)
		die("calloc");
	f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
	    offsetof(struct seccomp_data, arch));
	f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K,
	    SLOWFS_ARCH, 1, 0);
	f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K,
	    SECCOMP_RET_ALLOW);
	for (i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
		    offsetof(struct seccomp_data, nr));
		f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ |
		    BPF_K, (uint32_t)refused[i], 0, 1);
		f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K,
		    SECCOMP_RET_ERRNO | ENOSYS);
	}
	if (kind_held(K_STAT)) {
		f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
		    offsetof(struct seccomp_data, nr));
		f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K,
		    __NR_statx, 0, 3);
		f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
		    arg0 + 8 * 2);
		f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JSET |
		    BPF_K, AT_STATX_DONT_SYNC, 0, 1);
		f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K,
		    SECCOMP_RET_ALLOW);
	}
	for (i = 0; i < NCALLS; i++) {
		if (!kind_held(calls[i].kind))
			continue;
		/* The accumulator may hold an argument: load nr again. */
		f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
		    offsetof(struct seccomp_data, nr));
		if (calls[i].how == H_FD && calls[i].fd2 < 0) {
			f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP |
			    BPF_JEQ | BPF_K, (uint32_t)calls[i].nr, 0, 4);
			f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W |
			    BPF_ABS, arg0 + 8 * (uint32_t)calls[i].fd1);
			f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP |
			    BPF_JGE | BPF_K, 3, 0, 1);
		} else
			f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP |
			    BPF_JEQ | BPF_K, (uint32_t)calls[i].nr, 0, 1);
		f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K,
		    SECCOMP_RET_USER_NOTIF);
		if (calls[i].how == H_FD && calls[i].fd2 < 0)
			f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K,
			    SECCOMP_RET_ALLOW);
	}
	f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K,
	    SECCOMP_RET_ALLOW);
	prog.len = (unsigned short)n;
	prog.filter = f;
	fd = (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
	    SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
	free(f);
	return fd;
}

/* Pass fd over the socket s. */
static int
send_fd(int s, int fd)
{
	char byte = 0, cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { &byte, 1 };
	struct msghdr msg;
	struct cmsghdr *cm;

	memset(&msg, 0, sizeof(msg));
	memset(cbuf, 0, sizeof(cbuf));
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	msg.msg_control = cbuf;
	msg.msg_controllen = sizeof(cbuf);
	cm = CMSG_FIRSTHDR(&msg);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	return sendmsg(s, &msg, 0) == 1 ? 0 : -1;
}

/* Receive one descriptor from the socket s, or -1. */
static int
recv_fd(int s)
{
	char byte, cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { &byte, 1 };
	struct msghdr msg;
	struct cmsghdr *cm;
	ssize_t r;
	int fd;

	memset(&msg, 0, sizeof(msg));
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	msg.msg_control = cbuf;
	msg.msg_controllen = sizeof(cbuf);
	while ((r = recvmsg(s, &msg, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR)
		;
	if (r != 1 || (cm = CMSG_FIRSTHDR(&msg)) == NULL ||
	    cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS ||
	    cm->cmsg_len != CMSG_LEN(sizeof(int)))
		return -1;
	memcpy(&fd, CMSG_DATA(cm), sizeof(int));
	return fd;
}

/*
 * A look into the command's /proc entries or memory was refused: the
 * command made itself undumpable (as OpenSSH's sftp-server does), and only
 * root (CAP_SYS_PTRACE) may look.  Said once; counted.
 */
static void
blind(void)
{
	if (n_blind++ == 0)
		fprintf(stderr, "slowfs: the command's descriptors and memory "
		    "cannot be read (%s): run slowfs as root; calls it cannot "
		    "tell are not held\n", strerror(errno));
}

/*
 * Whether the absolute path p is under one of the -p directories (any is
 * when there are none).  The test is on the text of the path: a ".." that
 * leaves the directory is not seen.
 */
static int
under_prefix(const char *p)
{
	size_t i, n;

	if (nprefix == 0)
		return 1;
	for (i = 0; i < nprefix; i++) {
		n = strlen(prefixes[i]);
		if (strncmp(p, prefixes[i], n) == 0 &&
		    (p[n] == '/' || p[n] == '\0' || n == 1))
			return 1;
	}
	return 0;
}

/*
 * /proc/TID of the threads seen, held open (O_PATH), one slot per tid
 * modulo TID_SLOTS; a thread that takes a slot closes its last holder's
 * directory.  A call's descriptor is then the link fd/N and its working
 * directory cwd, looked up from there rather than from / (a third of the
 * lookup's time, with the pid's).  The directory of a thread that has gone
 * finds no name, even when its tid has been given to a new thread: the
 * slot is then opened again.
 */
#define TID_SLOTS	256
static struct {
	uint32_t tid;
	int	 dir;		/* held when above 0 (slowfs's 0 is /dev/null) */
} tid_dirs[TID_SLOTS];

static int
tid_dir(uint32_t tid, int fresh)
{
	char path[64];
	size_t i = tid % TID_SLOTS;

	if (tid_dirs[i].dir > 0 && tid_dirs[i].tid == tid && !fresh)
		return tid_dirs[i].dir;
	if (tid_dirs[i].dir > 0)
		close(tid_dirs[i].dir);
	tid_dirs[i].dir = -1;
	(void)snprintf(path, sizeof(path), "/proc/%u", tid);
	if ((tid_dirs[i].dir = open(path, O_PATH | O_DIRECTORY |
	    O_CLOEXEC)) < 0) {
		if (errno == EACCES || errno == EPERM)
			blind();
		return -1;
	}
	tid_dirs[i].tid = tid;
	return tid_dirs[i].dir;
}

/*
 * The link name of thread tid ("fd/N", "cwd"), NUL-terminated in buf, and
 * the directory it was read in (*dirp); -1 if unreadable.
 */
static int
fd_link(uint32_t tid, const char *name, char *buf, size_t size, int *dirp)
{
	ssize_t n = -1;
	int fresh;

	for (fresh = 0; fresh < 2; fresh++) {
		if ((*dirp = tid_dir(tid, fresh)) < 0)
			return -1;
		if ((n = readlinkat(*dirp, name, buf, size - 1)) >= 0)
			break;
		if (errno == EACCES || errno == EPERM) {
			blind();
			return -1;
		}
	}
	if (n < 0)
		return -1;
	buf[n] = '\0';
	return 0;
}

/*
 * The paths found to be regular files or directories: an open-addressed
 * set of their texts, emptied when it is half full.
 */
#define KNOWN_SLOTS	4096
static struct {
	uint64_t hash;
	char	*path;
} known[KNOWN_SLOTS];
static size_t known_len;

static uint64_t
path_hash(const char *p)
{
	uint64_t h = 0xcbf29ce484222325ULL;	/* FNV-1a */

	for (; *p != '\0'; p++)
		h = (h ^ (uint8_t)*p) * 0x100000001b3ULL;
	return h;
}

/* The slot of path p: where it is, or the empty one where it would go. */
static size_t
known_slot(const char *p, uint64_t h)
{
	size_t i = (size_t)h % KNOWN_SLOTS;

	while (known[i].path != NULL &&
	    (known[i].hash != h || strcmp(known[i].path, p) != 0))
		i = (i + 1) % KNOWN_SLOTS;
	return i;
}

static int
known_storage(const char *p)
{
	return known[known_slot(p, path_hash(p))].path != NULL;
}

static void
remember_storage(const char *p)
{
	uint64_t h = path_hash(p);
	size_t i;

	if (known_len >= KNOWN_SLOTS / 2) {
		for (i = 0; i < KNOWN_SLOTS; i++) {
			free(known[i].path);
			known[i].path = NULL;
		}
		known_len = 0;
	}
	i = known_slot(p, h);
	if (known[i].path != NULL || (known[i].path = strdup(p)) == NULL)
		return;
	known[i].hash = h;
	known_len++;
}

/*
 * Whether descriptor fd of thread tid is storage: a regular file or a
 * directory (under the -p directories, if any).  Pipes, sockets,
 * terminals, /dev/null and anonymous inodes (epoll, eventfd) are not.  The
 * link's text tells anonymous inodes apart ("anon_inode:[eventpoll]",
 * "pipe:[...]"): only a path starts with '/'.  AT_FDCWD stands for the
 * working directory.
 */
static int
fd_is_storage(uint32_t tid, int64_t fd)
{
	char name[32], link[PATH_MAX];
	struct stat st;
	int dir;

	if (fd == AT_FDCWD)
		return nprefix == 0 ||
		    (fd_link(tid, "cwd", link, sizeof(link), &dir) == 0 &&
		    under_prefix(link));
	if (fd < 0 || fd > INT_MAX)
		return 0;
	(void)snprintf(name, sizeof(name), "fd/%lld", (long long)fd);
	if (fd_link(tid, name, link, sizeof(link), &dir) != 0 ||
	    link[0] != '/' || !under_prefix(link))
		return 0;
	if (known_storage(link))
		return 1;
	if (fstatat(dir, name, &st, 0) != 0 ||
	    !(S_ISREG(st.st_mode) || S_ISDIR(st.st_mode)))
		return 0;
	remember_storage(link);
	return 1;
}

/*
 * The NUL-terminated string at addr in thread tid's memory, into buf
 * (cut to size - 1 bytes); -1 if it cannot be read.  Read a page at a
 * time, so that a string near the end of a mapping reads.
 */
static int
read_string(uint32_t tid, uint64_t addr, char *buf, size_t size)
{
	struct iovec l, r;
	size_t got = 0, chunk;
	ssize_t n;

	while (got < size - 1) {
		chunk = 4096 - (size_t)((addr + got) & 4095);
		if (chunk > size - 1 - got)
			chunk = size - 1 - got;
		l.iov_base = buf + got;
		l.iov_len = chunk;
		r.iov_base = (void *)(uintptr_t)(addr + got);
		r.iov_len = chunk;
		if ((n = process_vm_readv((pid_t)tid, &l, 1, &r, 1, 0)) <= 0) {
			if (n < 0 && (errno == EACCES || errno == EPERM))
				blind();
			return -1;
		}
		if (memchr(buf + got, '\0', (size_t)n) != NULL)
			return 0;
		got += (size_t)n;
	}
	buf[size - 1] = '\0';
	return 0;
}

/*
 * Whether the path of call c names storage: any path when there is no -p;
 * else one under a -p directory, a relative path being taken from the
 * directory descriptor or the working directory.  A NULL path stands for
 * the directory descriptor itself (utimensat).
 */
static int
path_is_storage(uint32_t tid, const struct seccomp_data *d,
    const struct call *c)
{
	char path[PATH_MAX], base[PATH_MAX], full[2 * PATH_MAX + 2];
	char name[32];
	int64_t dfd;
	int dir;

	dfd = c->dirarg < 0 ? AT_FDCWD : (int)d->args[c->dirarg];
	if (d->args[c->patharg] == 0)
		return c->dirarg >= 0 && fd_is_storage(tid, dfd);
	if (nprefix == 0)
		return 1;
	if (read_string(tid, d->args[c->patharg], path, sizeof(path)) != 0)
		return 0;
	if (path[0] == '/')
		return under_prefix(path);
	if (dfd == AT_FDCWD) {
		if (fd_link(tid, "cwd", base, sizeof(base), &dir) != 0)
			return 0;
	} else {
		(void)snprintf(name, sizeof(name), "fd/%lld", (long long)dfd);
		if (fd_link(tid, name, base, sizeof(base), &dir) != 0)
			return 0;
	}
	if (base[0] != '/')
		return 0;
	(void)snprintf(full, sizeof(full), "%s/%s", base, path);
	return under_prefix(full);
}

static const struct call *
find_call(int nr)
{
	size_t i;

	for (i = 0; i < NCALLS; i++)
		if (calls[i].nr == nr)
			return &calls[i];
	return NULL;
}

/* The heap is about to change, at now: count the time it held heap_len. */
static void
held_tick(uint64_t now)
{
	if (held_t0 == 0)
		held_t0 = now;
	else
		held_ns += (long double)heap_len * (long double)(now - held_t1);
	held_t1 = now;
}

static void
heap_push(uint64_t due, uint64_t id)
{
	size_t i, p;
	struct held h;

	if (heap_len == heap_cap) {
		heap_cap = heap_cap == 0 ? 256 : heap_cap * 2;
		if ((heap = reallocarray(heap, heap_cap, sizeof(*heap))) ==
		    NULL)
			die("reallocarray");
	}
	held_tick(now_ns());
	h.due = due;
	h.id = id;
	for (i = heap_len++; i > 0; i = p) {
		p = (i - 1) / 2;
		if (heap[p].due <= due)
			break;
		heap[i] = heap[p];
	}
	heap[i] = h;
	if (heap_len > held_max)
		held_max = heap_len;
}

static void
heap_pop(void)
{
	struct held last;
	size_t i, c;

	held_tick(now_ns());
	last = heap[--heap_len];
	for (i = 0; (c = 2 * i + 1) < heap_len; i = c) {
		if (c + 1 < heap_len && heap[c + 1].due < heap[c].due)
			c++;
		if (heap[c].due >= last.due)
			break;
		heap[i] = heap[c];
	}
	heap[i] = last;
}

/*
 * Answer notification id: continue the call, or fail it with -err.  A
 * call whose thread was interrupted by a signal or has died is no longer
 * waiting (ENOENT): the kernel restarts an interrupted call, which comes
 * back as a new notification.
 */
static void
respond(int lfd, uint64_t id, int err)
{
	struct seccomp_notif_resp resp;

	memset(&resp, 0, sizeof(resp));
	resp.id = id;
	if (err == 0)
		resp.flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
	else
		resp.error = -err;
	while (ioctl(lfd, SECCOMP_IOCTL_NOTIF_SEND, &resp) != 0) {
		if (errno == EINTR)
			continue;
		if (errno == ENOENT) {
			n_gone++;
			return;
		}
		die("SECCOMP_IOCTL_NOTIF_SEND");
	}
}

/* Wakes the releaser from its futex (hwake was added to). */
static void
releaser_wake(void)
{
	(void)syscall(SYS_futex, &hwake, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

/* Take one notification and hold it, or answer it at once. */
static void
receive(int lfd)
{
	struct seccomp_notif req;
	const struct call *c;
	uint64_t d, flags;
	int held, wake;

	memset(&req, 0, sizeof(req));
	if (ioctl(lfd, SECCOMP_IOCTL_NOTIF_RECV, &req) != 0) {
		/* Interrupted, or the caller went away before we took it. */
		if (errno == EINTR || errno == ENOENT)
			return;
		die("SECCOMP_IOCTL_NOTIF_RECV");
	}
	if ((c = find_call(req.data.nr)) == NULL) {
		respond(lfd, req.id, 0);
		return;
	}
	n_calls[c->kind]++;
	switch (c->how) {
	case H_PATH:
		held = path_is_storage(req.pid, &req.data, c);
		break;
	case H_ATFD:
		if (req.data.args[c->flagarg] & AT_EMPTY_PATH)
			held = fd_is_storage(req.pid,
			    (int)req.data.args[c->dirarg]);
		else
			held = path_is_storage(req.pid, &req.data, c);
		break;
	default:
		held = fd_is_storage(req.pid, (int)req.data.args[c->fd1]) ||
		    (c->fd2 >= 0 &&
		    fd_is_storage(req.pid, (int)req.data.args[c->fd2]));
		break;
	}
	/*
	 * The thread may have gone and its id been reused while we read its
	 * /proc entries or its memory: what we read may then be another's,
	 * but there is no one to answer, and the answer finds no call (ENOENT,
	 * counted as gone).  No call's outcome depends on what was read, only
	 * its delay, so the kernel is not asked first whether the call still
	 * waits (SECCOMP_IOCTL_NOTIF_ID_VALID: a third of the ioctls, each
	 * walking every held call).
	 */
	d = delay_ns[c->kind];
	if (jitter_ns > 0 && c->kind != K_CLOSE)
		d += rng_next() % jitter_ns;
	if (!held || d == 0) {
		respond(lfd, req.id, 0);
		return;
	}
	n_held[c->kind]++;
	if (child_pid > 0 && (pid_t)req.pid == (pid_t)child_pid)
		n_first[c->kind]++;
	flags = c->flagarg >= 0 && c->how == H_FD ?
	    req.data.args[c->flagarg] : 0;
	if (flags & RWF_NOWAIT) {
		n_nowait++;
		respond(lfd, req.id, EAGAIN);
		return;
	}
	d += now_ns();
	(void)pthread_mutex_lock(&hlock);
	heap_push(d, req.id);
	/* The releaser sleeps until a later deadline, or for none. */
	wake = rel_until != 0 && d < rel_until;
	if (wake) {
		rel_until = 0;
		atomic_fetch_add(&hwake, 1);
	}
	(void)pthread_mutex_unlock(&hlock);
	if (wake)
		releaser_wake();
}

/* Print what was seen on one line, to f. */
static void
report(FILE *f)
{
	struct rusage ru;
	int k;

	fprintf(f, "slowfs:");
	for (k = 0; k < K_NKINDS; k++)
		fprintf(f, " %s=%llu/%llu", kind_names[k], n_held[k],
		    n_calls[k]);
	fprintf(f, " nowait_eagain=%llu gone=%llu blind=%llu "
	    "held_max=%zu held_mean=%.1f", n_nowait, n_gone,
	    n_blind, held_max, held_t1 > held_t0 ?
	    (double)(held_ns / (long double)(held_t1 - held_t0)) : 0.0);
	for (k = 0; k < K_NKINDS; k++)
		if (n_first[k] > 0)
			fprintf(f, " first_%s=%llu", kind_names[k], n_first[k]);
	(void)getrusage(RUSAGE_SELF, &ru);
	fprintf(f, " cpu_s=%.3f late_mean_us=%.1f late_max_us=%.1f\n",
	    (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
	    (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6,
	    n_released > 0 ? (double)late_sum_ns / (double)n_released / 1e3 :
	    0.0, (double)late_max_ns / 1e3);
}

/*
 * The releaser: lets each held call go once due, in deadline order,
 * answering outside the lock, so that receiving calls never waits for
 * the answers (each wakes a thread) of a batch that fell due at once.
 */
static int releaser_lfd;

static void *
releaser(void *arg)
{
	uint64_t ids[64], now;
	struct timespec ts;
	const struct timespec *tp;
	uint32_t seq;
	size_t n, i;
	int stop;

	(void)arg;
	/* Deadlines of a fraction of a millisecond want no timer slack. */
	prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
	(void)pthread_mutex_lock(&hlock);
	for (;;) {
		if (heap_len == 0 && hstop)
			break;
		now = heap_len > 0 ? now_ns() : 0;
		/*
		 * At the end no process is left to wait: what is held goes at
		 * once (its answers find no call), not at its deadline.
		 */
		stop = hstop;
		if (heap_len == 0 || (heap[0].due > now && !stop)) {
			/* Until the first deadline (CLOCK_MONOTONIC), or woken. */
			rel_until = heap_len == 0 ? UINT64_MAX : heap[0].due;
			ts.tv_sec = (time_t)(rel_until / 1000000000ULL);
			ts.tv_nsec = (long)(rel_until % 1000000000ULL);
			tp = heap_len == 0 ? NULL : &ts;
			seq = atomic_load(&hwake);
			(void)pthread_mutex_unlock(&hlock);
			(void)syscall(SYS_futex, &hwake, FUTEX_WAIT_BITSET_PRIVATE,
			    seq, tp, NULL, FUTEX_BITSET_MATCH_ANY);
			(void)pthread_mutex_lock(&hlock);
			rel_until = 0;
			continue;
		}
		for (n = 0; n < 64 && heap_len > 0 &&
		    (heap[0].due <= now || stop); n++) {
			if (heap[0].due <= now) {
				late_sum_ns += now - heap[0].due;
				if (now - heap[0].due > late_max_ns)
					late_max_ns = now - heap[0].due;
				n_released++;
			}
			ids[n] = heap[0].id;
			heap_pop();
		}
		(void)pthread_mutex_unlock(&hlock);
		for (i = 0; i < n; i++)
			respond(releaser_lfd, ids[i], 0);
		(void)pthread_mutex_lock(&hlock);
	}
	(void)pthread_mutex_unlock(&hlock);
	return NULL;
}

/*
 * The receiver: takes each notification as it comes, blocked in the
 * kernel's receive until one does (no poll before each).  It ends when
 * told to (rstop), woken from the receive by SIGURG.
 */
static _Atomic int rstop, rdone;

static void
interrupt(int sig)
{
	(void)sig;
}

static void *
receiver(void *arg)
{
	int lfd = *(int *)arg;

	while (!atomic_load(&rstop))
		receive(lfd);
	atomic_store(&rdone, 1);
	return NULL;
}

/*
 * Starts a thread with every signal blocked but unblocked (the main thread
 * takes the rest).
 */
static void
start_thread(pthread_t *t, void *(*fn)(void *), void *arg, int unblocked)
{
	sigset_t all, old;

	sigfillset(&all);
	if (unblocked != 0)
		sigdelset(&all, unblocked);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	if ((errno = pthread_create(t, NULL, fn, arg)) != 0)
		die("pthread_create");
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

static void
forward(int sig)
{
	if (child_pid > 0)
		kill(child_pid, sig);
}

int
main(int argc, char *argv[])
{
	const char *out = NULL;
	int sv[2], lfd, ch, k, status = 0, reaped = 0, verbose = 0, pfd;
	struct pollfd p[1];
	struct sigaction sa;
	uint64_t d_all = 0, set_all = 0;
	pthread_t rel, rcv;
	pid_t pid;
	char *end;
	FILE *f;

	while ((ch = getopt(argc, argv, "+D:d:hj:o:p:s:v")) != -1) {
		switch (ch) {
		case 'D':
			parse_kinds(optarg);
			break;
		case 'd':
			d_all = parse_ms(optarg);
			set_all = 1;
			break;
		case 'j':
			jitter_ns = parse_ms(optarg);
			break;
		case 'o':
			out = optarg;
			break;
		case 'p':
			if (nprefix == MAX_PREFIX)
				usage();
			if ((prefixes[nprefix++] = realpath(optarg, NULL)) ==
			    NULL)
				die(optarg);
			break;
		case 's':
			errno = 0;
			rng_state = strtoull(optarg, &end, 0);
			if (errno != 0 || *end != '\0' || end == optarg)
				usage();
			rng_state ^= 0x9e3779b97f4a7c15ULL;
			if (rng_state == 0)
				rng_state = 1;
			break;
		case 'v':
			verbose = 1;
			break;
		default:
			usage();
		}
	}
	argc -= optind;
	argv += optind;
	if (argc < 1)
		usage();
	/* -d sets every kind that -D did not, close excepted. */
	if (set_all)
		for (k = 0; k < K_NKINDS; k++)
			if (k != K_CLOSE && delay_ns[k] == 0)
				delay_ns[k] = d_all;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
		die("socketpair");
	if ((pid = fork()) < 0)
		die("fork");
	if (pid == 0) {
		close(sv[0]);
		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
			die("PR_SET_NO_NEW_PRIVS");
		if ((lfd = install_filter()) < 0)
			die("seccomp");
		if (send_fd(sv[1], lfd) != 0)
			die("sendmsg");
		close(lfd);
		close(sv[1]);
		execvp(argv[0], argv);
		fprintf(stderr, "slowfs: %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	child_pid = pid;
	close(sv[1]);
	lfd = recv_fd(sv[0]);
	close(sv[0]);
	if (lfd < 0) {
		/* The child could not install the filter; it said why. */
		waitpid(pid, &status, 0);
		exit(125);
	}

	/*
	 * Let go of the standard streams, so that the command's peer sees
	 * their end when the command closes them; stderr stays for messages.
	 */
	if ((k = open("/dev/null", O_RDWR)) < 0)
		die("/dev/null");
	dup2(k, 0);
	dup2(k, 1);
	if (k > 2)
		close(k);

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = forward;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	sigaction(SIGQUIT, &sa, NULL);
	sigaction(SIGUSR1, &sa, NULL);
	sigaction(SIGUSR2, &sa, NULL);
	/* Deadlines of a fraction of a millisecond want no timer slack. */
	prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);

	if ((pfd = (int)syscall(SYS_pidfd_open, pid, 0)) < 0)
		die("pidfd_open");
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = interrupt;	/* no SA_RESTART: the receive ends */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGURG, &sa, NULL);
	releaser_lfd = lfd;
	start_thread(&rel, releaser, NULL, 0);
	start_thread(&rcv, receiver, &lfd, SIGURG);
	/*
	 * Serve until the command has exited and no process is left under
	 * the filter (the listener then reports POLLHUP, asked for once the
	 * command is reaped): anything the command started and left behind
	 * is still served.
	 */
	for (;;) {
		p[0].fd = reaped ? lfd : pfd;
		p[0].events = reaped ? 0 : POLLIN;
		p[0].revents = 0;
		if (ppoll(p, 1, NULL, NULL) < 0) {
			if (errno == EINTR)
				continue;
			die("ppoll");
		}
		if (!reaped && (p[0].revents & POLLIN)) {
			if (waitpid(pid, &status, 0) == pid) {
				reaped = 1;
				child_pid = 0;
			}
		} else if (reaped && (p[0].revents & (POLLHUP | POLLERR))) {
			break;
		}
	}
	/* No process is left to make calls: the receiver ends. */
	atomic_store(&rstop, 1);
	while (!atomic_load(&rdone)) {
		pthread_kill(rcv, SIGURG);
		(void)poll(NULL, 0, 1);
	}
	(void)pthread_join(rcv, NULL);
	/* Let the held ones go, and end. */
	(void)pthread_mutex_lock(&hlock);
	hstop = 1;
	atomic_fetch_add(&hwake, 1);
	(void)pthread_mutex_unlock(&hlock);
	releaser_wake();
	(void)pthread_join(rel, NULL);
	if (verbose)
		report(stderr);
	if (out != NULL) {
		if ((f = fopen(out, "a")) == NULL)
			die(out);
		report(f);
		fclose(f);
	}
	if (WIFSIGNALED(status)) {
		signal(WTERMSIG(status), SIG_DFL);
		raise(WTERMSIG(status));
		exit(128 + WTERMSIG(status));
	}
	return WEXITSTATUS(status);
}
