/*
 * LD_PRELOAD shim for tests/protocol/test_inflight.py: storage that waits,
 * as the server sees it.
 *
 *   SHIM_NOWAIT=1        preadv2() with RWF_NOWAIT fails with EAGAIN, as on
 *                        storage whose data is not in the page cache.
 *   SHIM_NOWAIT_LOG=path the number of those calls so far, written there
 *                        at each.
 *   SHIM_EVENTS=path     a line appended there for each of those calls
 *                        ("P offset") and for each write to stdout ("W
 *                        bytes"): both are the loop's, in its order.
 *   SHIM_SLOW_READ_US=N  pread() at offset 0 takes N microseconds more;
 *   SHIM_SLOW_WRITE_US=N pwrite() at offset 0 the same; SHIM_SLOW_STAT_US=N
 *                        stat() and lstat() of a name that holds "slow":
 *                        a later request would finish first if the server
 *                        let it start.
 *   SHIM_MEET=N          each pread() and pwrite() waits (at most
 *                        SHIM_MEET_MS, default 2000) until N of them are in
 *                        flight at once, so that a server that runs them
 *                        one at a time is seen to.
 *   SHIM_LOG=path        the most pread()/pwrite() calls seen in flight at
 *                        once, written there whenever it grows.
 *   SHIM_OPEN_MEET=N     the same as SHIM_MEET for open() of a path that
 *   SHIM_OPEN_LOG=path   holds "MEET", counted apart, in SHIM_OPEN_LOG.
 *   SHIM_CLOSE_GATE=fifo close() of a descriptor of a file whose name holds
 *                        "GATE" waits until the other end of the FIFO fifo
 *                        is opened and closed (the test releases it); it
 *                        first writes "worker" or "loop" (which thread
 *                        waits) to SHIM_GATE_LOG=path.
 *
 * Built by the test with cc -shared -fPIC; not part of the server.
 */
#define _GNU_SOURCE
#include <sys/types.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;

static long
env_long(const char *name)
{
	const char *v = getenv(name);

	return v != NULL ? atol(v) : 0;
}

static void
pause_us(long us)
{
	struct timespec ts;

	if (us <= 0)
		return;
	ts.tv_sec = us / 1000000;
	ts.tv_nsec = (us % 1000000) * 1000;
	while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
		;
}

static void
note_most(const char *log, int n)
{
	const char *path = getenv(log);
	char buf[32];
	int fd, len;

	if (path == NULL)
		return;
	len = snprintf(buf, sizeof buf, "%d\n", n);
	if ((fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644)) == -1)
		return;
	(void)write(fd, buf, (size_t)len);
	(void)close(fd);
}

/* Calls of one kind in flight, the most seen, and where that is logged. */
struct count {
	int in_flight;
	int most;
	const char *meet;	/* the variable of SHIM_MEET's role */
	const char *log;
};
static struct count data_calls = { 0, 0, "SHIM_MEET", "SHIM_LOG" };
static struct count opens = { 0, 0, "SHIM_OPEN_MEET", "SHIM_OPEN_LOG" };

/* A call starts: count it, and wait for company (SHIM_MEET). */
static void
enter_count(struct count *c, off_t off, const char *slow)
{
	long meet = env_long(c->meet), ms = env_long("SHIM_MEET_MS");
	struct timespec until;
	int e = errno;

	pthread_mutex_lock(&lock);
	c->in_flight++;
	if (c->in_flight > c->most) {
		c->most = c->in_flight;
		note_most(c->log, c->most);
	}
	pthread_cond_broadcast(&cond);
	if (meet > 1) {
		if (ms <= 0)
			ms = 2000;
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += ms / 1000;
		until.tv_nsec += (ms % 1000) * 1000000;
		if (until.tv_nsec >= 1000000000) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000;
		}
		while (c->in_flight < meet && c->most < meet &&
		    pthread_cond_timedwait(&cond, &lock, &until) == 0)
			;
	}
	pthread_mutex_unlock(&lock);
	if (off == 0 && slow != NULL)
		pause_us(env_long(slow));
	errno = e;
}

/* A data call starts (SHIM_MEET, SHIM_LOG). */
static void
enter(off_t off, const char *slow)
{
	enter_count(&data_calls, off, slow);
}

static void
leave_count(struct count *c)
{
	int e = errno;

	pthread_mutex_lock(&lock);
	c->in_flight--;
	pthread_mutex_unlock(&lock);
	errno = e;
}

static void
leave(void)
{
	leave_count(&data_calls);
}

#define REAL(name) \
	static __typeof__(name) *real_##name; \
	if (real_##name == NULL) \
		real_##name = (__typeof__(name) *)dlsym(RTLD_NEXT, #name)

ssize_t
pread64(int fd, void *buf, size_t n, off_t off)
{
	ssize_t r;

	REAL(pread64);
	enter(off, "SHIM_SLOW_READ_US");
	r = real_pread64(fd, buf, n, off);
	leave();
	return r;
}

ssize_t
pwrite64(int fd, const void *buf, size_t n, off_t off)
{
	ssize_t r;

	REAL(pwrite64);
	enter(off, "SHIM_SLOW_WRITE_US");
	r = real_pwrite64(fd, buf, n, off);
	leave();
	return r;
}

/* Appends a line to SHIM_EVENTS, if set. */
static void
event(char what, long long n)
{
	const char *path = getenv("SHIM_EVENTS");
	char buf[48];
	int fd, len, e = errno;

	if (path == NULL)
		return;
	len = snprintf(buf, sizeof buf, "%c %lld\n", what, n);
	pthread_mutex_lock(&lock);
	if ((fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644)) != -1) {
		(void)write(fd, buf, (size_t)len);
		(void)close(fd);
	}
	pthread_mutex_unlock(&lock);
	errno = e;
}

/* A read with RWF_NOWAIT at off: whether it fails (SHIM_NOWAIT), counted. */
static int
nowait_fails(off_t off)
{
	static int tries;

	if (!env_long("SHIM_NOWAIT"))
		return 0;
	pthread_mutex_lock(&lock);
	note_most("SHIM_NOWAIT_LOG", ++tries);
	pthread_mutex_unlock(&lock);
	event('P', (long long)off);
	errno = EAGAIN;
	return 1;
}

ssize_t
write(int fd, const void *buf, size_t n)
{
	ssize_t r;

	REAL(write);
	r = real_write(fd, buf, n);
	if (fd == STDOUT_FILENO && r > 0)
		event('W', (long long)r);
	return r;
}

ssize_t
writev(int fd, const struct iovec *iov, int cnt)
{
	ssize_t r;

	REAL(writev);
	r = real_writev(fd, iov, cnt);
	if (fd == STDOUT_FILENO && r > 0)
		event('W', (long long)r);
	return r;
}

ssize_t
preadv2(int fd, const struct iovec *iov, int cnt, off_t off, int flags)
{
	REAL(preadv2);
	if ((flags & RWF_NOWAIT) && nowait_fails(off))
		return -1;
	return real_preadv2(fd, iov, cnt, off, flags);
}

ssize_t
preadv64v2(int fd, const struct iovec *iov, int cnt, off_t off, int flags)
{
	REAL(preadv64v2);
	if ((flags & RWF_NOWAIT) && nowait_fails(off))
		return -1;
	return real_preadv64v2(fd, iov, cnt, off, flags);
}

static void
slow_name(const char *path)
{
	if (strstr(path, "slow") != NULL)
		pause_us(env_long("SHIM_SLOW_STAT_US"));
}

int
stat64(const char *path, struct stat64 *st)
{
	REAL(stat64);
	slow_name(path);
	return real_stat64(path, st);
}

int
lstat64(const char *path, struct stat64 *st)
{
	REAL(lstat64);
	slow_name(path);
	return real_lstat64(path, st);
}

/* open() of a path that holds "MEET" (SHIM_OPEN_MEET, SHIM_OPEN_LOG). */
static int
open_counted(const char *path, int flags, mode_t mode,
    int (*real)(const char *, int, ...))
{
	int r;

	if (strstr(path, "MEET") == NULL)
		return real(path, flags, mode);
	enter_count(&opens, 1, NULL);
	r = real(path, flags, mode);
	leave_count(&opens);
	return r;
}

int
open(const char *path, int flags, ...)
{
	va_list ap;
	mode_t mode = 0;

	REAL(open);
	if (flags & (O_CREAT | O_TMPFILE)) {
		va_start(ap, flags);
		mode = (mode_t)va_arg(ap, int);
		va_end(ap);
	}
	return open_counted(path, flags, mode, real_open);
}

int
open64(const char *path, int flags, ...)
{
	va_list ap;
	mode_t mode = 0;

	REAL(open64);
	if (flags & (O_CREAT | O_TMPFILE)) {
		va_start(ap, flags);
		mode = (mode_t)va_arg(ap, int);
		va_end(ap);
	}
	return open_counted(path, flags, mode, real_open64);
}

/* close() held at the gate (SHIM_CLOSE_GATE, SHIM_GATE_LOG). */
static void
close_gate(int fd)
{
	const char *gate = getenv("SHIM_CLOSE_GATE"), *log;
	char link[64], target[4096], buf[64];
	ssize_t n;
	int g, e = errno;

	if (gate == NULL)
		return;
	(void)snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
	if ((n = readlink(link, target, sizeof target - 1)) <= 0)
		return;
	target[n] = '\0';
	if (strstr(target, "GATE") == NULL)
		return;
	if ((log = getenv("SHIM_GATE_LOG")) != NULL &&
	    (g = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644)) != -1) {
		n = syscall(SYS_gettid) == getpid() ? 4 : 6;
		(void)write(g, n == 4 ? "loop" : "worker", (size_t)n);
		(void)close(g);
	}
	/* Blocks until the test opens the other end; EOF when it closes. */
	if ((g = open(gate, O_RDONLY)) != -1) {
		while (read(g, buf, sizeof buf) > 0)
			;
		(void)close(g);
	}
	errno = e;
}

int
close(int fd)
{
	REAL(close);
	close_gate(fd);
	return real_close(fd);
}
