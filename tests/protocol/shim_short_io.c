/*
 * An LD_PRELOAD shim for the fault tests of test_hostile.py.
 *
 * Built by the test with "cc -shared -fPIC -o shim.so shim_short_io.c -ldl"
 * and preloaded into the server.  Controlled by the environment:
 *
 *   SHIM_IO_MAX=n      read, write (writev), pread (preadv2) and pwrite move
 *                      at most
 *                      n bytes per call (short, but never 0 for n > 0).
 *   SHIM_IO_RANDOM=s   each such call is cut to a random length (seed s):
 *                      sometimes whole, sometimes a few bytes.
 *   SHIM_NOWAIT=1      preadv2() with RWF_NOWAIT fails with EAGAIN, as on
 *                      storage whose data is not in the page cache: the
 *                      server hands its READs to workers.
 *   SHIM_EIO_NAME=s    read and pread (preadv2) fail with EIO on a file
 *                      whose name contains s (a disk that cannot be read).
 *   SHIM_SIGUSR1=1     installs a no-op SIGUSR1 handler without SA_RESTART
 *                      at start, so that a SIGUSR1 interrupts any blocking
 *                      system call with EINTR.
 *   SHIM_STATS=path    at _exit(), writes one line of counters to path:
 *                      "read=N write=N pread=N pwrite=N eintr=N
 *                      eintr_read=N ..." (calls made shorter than asked,
 *                      calls that failed with EINTR, in all and by call).
 *
 * The calls are passed on, only with a smaller count: the kernel's answer
 * (a short count, end of file, an error) is returned as it is.  Calls on
 * an eventfd are passed on whole: the kernel never cuts them.
 */
#define _GNU_SOURCE

#include <sys/types.h>
#include <sys/stat.h>
#include <sys/uio.h>

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum {
	C_READ, C_WRITE, C_PREAD, C_PWRITE,		/* made short */
	C_EINTR,					/* EINTR, all calls */
	C_EINTR_READ, C_EINTR_WRITE, C_EINTR_PREAD, C_EINTR_PWRITE,
	C_EIO,						/* EIO made up */
	C_N
};

static const char *const counter_names[C_N] = {
	"read", "write", "pread", "pwrite", "eintr",
	"eintr_read", "eintr_write", "eintr_pread", "eintr_pwrite", "eio",
};

static unsigned long counters[C_N];
static size_t io_max;
static int io_random;
static unsigned long long rng_state;
static const char *stats_path;
static const char *eio_name;
static int nowait;

static ssize_t (*real_read)(int, void *, size_t);
static ssize_t (*real_write)(int, const void *, size_t);
static ssize_t (*real_writev)(int, const struct iovec *, int);
static ssize_t (*real_pread)(int, void *, size_t, off_t);
static ssize_t (*real_preadv2)(int, const struct iovec *, int, off_t, int);
static ssize_t (*real_pwrite)(int, const void *, size_t, off_t);
static void (*real_exit)(int) __attribute__((noreturn));

static void *
next_symbol(const char *name)
{
	void *p = dlsym(RTLD_NEXT, name);

	if (p == NULL) {
		fprintf(stderr, "shim_short_io: no symbol %s\n", name);
		abort();
	}
	return p;
}

static void
resolve(void)
{
	if (real_read != NULL)
		return;
	real_write = next_symbol("write");
	real_writev = next_symbol("writev");
	real_pread = next_symbol("pread");
	real_preadv2 = next_symbol("preadv2");
	real_pwrite = next_symbol("pwrite");
	real_exit = next_symbol("_exit");
	real_read = next_symbol("read");
}

static void
on_sigusr1(int sig)
{
	(void)sig;
}

__attribute__((constructor)) static void
shim_init(void)
{
	const char *s;
	struct sigaction sa;

	resolve();
	if ((s = getenv("SHIM_IO_MAX")) != NULL)
		io_max = (size_t)strtoul(s, NULL, 10);
	if ((s = getenv("SHIM_IO_RANDOM")) != NULL) {
		io_random = 1;
		rng_state = strtoull(s, NULL, 10) * 2654435761ULL + 1;
	}
	stats_path = getenv("SHIM_STATS");
	eio_name = getenv("SHIM_EIO_NAME");
	nowait = (s = getenv("SHIM_NOWAIT")) != NULL && strcmp(s, "1") == 0;
	if ((s = getenv("SHIM_SIGUSR1")) != NULL && strcmp(s, "1") == 0) {
		memset(&sa, 0, sizeof sa);
		sa.sa_handler = on_sigusr1;
		sigemptyset(&sa.sa_mask);
		sa.sa_flags = 0;	/* no SA_RESTART: blocking calls fail */
		if (sigaction(SIGUSR1, &sa, NULL) == -1)
			abort();
	}
}

static unsigned long long
rng(void)
{
	/* xorshift64* */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 2685821657736338717ULL;
}

/* The count actually passed on for a call asking for n bytes. */
static size_t
shorten(size_t n, int which)
{
	size_t m = n;
	unsigned long long r;

	if (n <= 1)
		return n;
	if (io_max > 0 && m > io_max)
		m = io_max;
	if (io_random) {
		r = rng();
		switch (r % 4) {
		case 0:		/* whole */
			break;
		case 1:		/* a few bytes */
			m = 1 + (size_t)((r >> 8) % (m < 16 ? m : 16));
			break;
		default:	/* anywhere */
			m = 1 + (size_t)((r >> 8) % m);
			break;
		}
	}
	if (m < n)
		counters[which]++;
	return m;
}

/*
 * Whether fd is a stream whose calls may move fewer bytes than asked: a
 * file, a pipe, a socket, a terminal.  An eventfd (an anonymous inode,
 * with no file type) is a counter whose reads and writes move 8 bytes or
 * fail with EINVAL: the kernel never cuts them, so neither does the shim.
 */
static int
cuttable(int fd)
{
	struct stat st;

	return fstat(fd, &st) == -1 || (st.st_mode & S_IFMT) != 0;
}

/* Whether reads of fd are to fail with EIO (SHIM_EIO_NAME). */
static int
unreadable(int fd)
{
	char link[64], target[4096];
	ssize_t n;

	if (eio_name == NULL)
		return 0;
	(void)snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
	if ((n = readlink(link, target, sizeof target - 1)) <= 0)
		return 0;
	target[n] = '\0';
	if (strstr(target, eio_name) == NULL)
		return 0;
	counters[C_EIO]++;
	errno = EIO;
	return 1;
}

static void
count_eintr(ssize_t r, int which)
{
	if (r == -1 && errno == EINTR) {
		counters[C_EINTR]++;
		counters[C_EINTR_READ + which]++;
	}
}

ssize_t
read(int fd, void *buf, size_t n)
{
	ssize_t r;
	int e;

	resolve();
	if (unreadable(fd))
		return -1;
	r = real_read(fd, buf, cuttable(fd) ? shorten(n, C_READ) : n);
	e = errno;
	count_eintr(r, C_READ);
	errno = e;
	return r;
}

ssize_t
write(int fd, const void *buf, size_t n)
{
	ssize_t r;
	int e;

	resolve();
	/* stderr (the log) is left whole, to keep its lines readable. */
	r = real_write(fd, buf, fd == STDERR_FILENO || !cuttable(fd) ? n :
	    shorten(n, C_WRITE));
	e = errno;
	count_eintr(r, C_WRITE);
	errno = e;
	return r;
}

/* As write(): the vector is cut where the shortened count ends. */
ssize_t
writev(int fd, const struct iovec *iov, int cnt)
{
	struct iovec cut[1024];
	size_t total = 0, want;
	ssize_t r;
	int e, n = 0;

	resolve();
	if (cnt < 0 || cnt > 1024 || fd == STDERR_FILENO || !cuttable(fd))
		return real_writev(fd, iov, cnt);
	for (int i = 0; i < cnt; i++)
		total += iov[i].iov_len;
	want = shorten(total, C_WRITE);
	for (int i = 0; i < cnt && want > 0; i++) {
		cut[n] = iov[i];
		if (cut[n].iov_len > want)
			cut[n].iov_len = want;
		want -= cut[n++].iov_len;
	}
	r = real_writev(fd, cut, n > 0 ? n : cnt);
	e = errno;
	count_eintr(r, C_WRITE);
	errno = e;
	return r;
}

ssize_t
pread(int fd, void *buf, size_t n, off_t off)
{
	ssize_t r;
	int e;

	resolve();
	if (unreadable(fd))
		return -1;
	r = real_pread(fd, buf, shorten(n, C_PREAD), off);
	e = errno;
	count_eintr(r, C_PREAD);
	errno = e;
	return r;
}

ssize_t
pread64(int fd, void *buf, size_t n, off_t off)
{
	return pread(fd, buf, n, off);
}

/*
 * preadv2(): the server reads what the page cache holds with RWF_NOWAIT
 * first, so it is cut and failed as pread() is.  Only its first buffer is
 * passed on, shortened: the server asks with one.
 */
ssize_t
preadv2(int fd, const struct iovec *iov, int cnt, off_t off, int flags)
{
	struct iovec one;
	ssize_t r;
	int e;

	resolve();
	if (unreadable(fd))
		return -1;
	if (nowait && (flags & RWF_NOWAIT)) {
		errno = EAGAIN;
		return -1;
	}
	if (cnt < 1)
		return real_preadv2(fd, iov, cnt, off, flags);
	one.iov_base = iov[0].iov_base;
	one.iov_len = shorten(iov[0].iov_len, C_PREAD);
	r = real_preadv2(fd, &one, 1, off, flags);
	e = errno;
	count_eintr(r, C_PREAD);
	errno = e;
	return r;
}

ssize_t
preadv64v2(int fd, const struct iovec *iov, int cnt, off_t off, int flags)
{
	return preadv2(fd, iov, cnt, off, flags);
}

ssize_t
pwrite(int fd, const void *buf, size_t n, off_t off)
{
	ssize_t r;
	int e;

	resolve();
	r = real_pwrite(fd, buf, shorten(n, C_PWRITE), off);
	e = errno;
	count_eintr(r, C_PWRITE);
	errno = e;
	return r;
}

ssize_t
pwrite64(int fd, const void *buf, size_t n, off_t off)
{
	return pwrite(fd, buf, n, off);
}

static void
write_stats(void)
{
	char line[512];
	size_t o = 0;
	int fd;

	if (stats_path == NULL)
		return;
	for (int i = 0; i < C_N; i++)
		o += (size_t)snprintf(line + o, sizeof line - o, "%s%s=%lu",
		    i > 0 ? " " : "", counter_names[i], counters[i]);
	o += (size_t)snprintf(line + o, sizeof line - o, "\n");
	if ((fd = open(stats_path, O_WRONLY | O_CREAT | O_TRUNC, 0644)) == -1)
		return;
	for (size_t done = 0; done < o;) {
		ssize_t w = real_write(fd, line + done, o - done);

		if (w <= 0)
			break;
		done += (size_t)w;
	}
	(void)close(fd);
	stats_path = NULL;
}

void
_exit(int status)
{
	resolve();
	write_stats();
	real_exit(status);
}

__attribute__((destructor)) static void
shim_fini(void)
{
	write_stats();
}
