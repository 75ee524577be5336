/*
 * An LD_PRELOAD shim for tests/protocol/test_fs_faults.py: it makes the
 * server meet the file systems and kernels it cannot be sure of, where a
 * call it relies on is missing or a file system fails late.  Test-only code:
 * it is never linked into the server.
 *
 * Built by the test with "cc -shared -fPIC -o shim.so shim_fs_faults.c -ldl"
 * and preloaded into the server (ours or OpenSSH's, the same faults for
 * both).  Controlled by the environment; an errno is given by name (ENOSYS,
 * EXDEV, EINVAL, EPERM, EOPNOTSUPP, EIO, ESTALE) or by number:
 *
 *   FAULT_CFR=errno         copy_file_range() fails with errno, as on a
 *                           kernel or file system without it.
 *   FAULT_CFR_AFTER=n       ... but only after n calls went through.
 *   FAULT_CFR_MAX=n         the calls that go through move at most n bytes.
 *   FAULT_RENAMEAT2=errno   renameat2() with flags fails with errno, as on
 *                           a file system without RENAME_NOREPLACE.
 *   FAULT_LINK_EMPTY=errno  linkat() with AT_EMPTY_PATH fails with errno
 *                           (ENOENT: as before Linux 6.10 without
 *                           CAP_DAC_READ_SEARCH).
 *   FAULT_NO_PROC=1         access() and linkat() of a path in /proc fail
 *                           with ENOENT, as in a jail without /proc.
 *   FAULT_TMPFILE=errno     openat() with O_TMPFILE fails with errno
 *                           (EOPNOTSUPP: a file system without it).
 *   FAULT_LINK=errno        link() and linkat() fail with errno, as on a
 *                           file system without hard links.
 *   FAULT_OPENAT2_EAGAIN=n  syscall(SYS_openat2, ...) of a path with ".."
 *                           in it fails with EAGAIN n times in a row in a
 *                           thread, then goes through once, and so on
 *                           (counted per thread: a worker's OPEN meets the
 *                           same run as the loop's): as when renames
 *                           elsewhere on the system keep interrupting its
 *                           walk over "..".
 *   FAULT_FCHMODAT2=errno   syscall(SYS_fchmodat2, ...) fails with errno,
 *                           as on kernels before 6.6.
 *   FAULT_FCHMOD=errno      fchmod() fails with errno, as on a file system
 *                           whose modes are fixed at mount (vfat, some
 *                           FUSE ones).
 *   FAULT_EIO_PREFIX=path   close(), fsync() and fdatasync() of a file
 *                           whose path starts with path make the real call,
 *                           then fail with EIO: a write-back error.
 *   FAULT_ESTALE_PREFIX=p   read(), write(), pread(), pwrite(), preadv(),
 *                           pwritev(), preadv2(), pwritev2(), splice(),
 *                           sendfile() and copy_file_range() on a file whose
 *                           path starts with p fail with ESTALE, as on NFS
 *                           after the file went away on the server.
 *   FAULT_SWAP=a:b          the first lookup of the name a (stat(),
 *                           lstat(), fstatat(), open() or openat() of a path
 *                           whose last name is a) is followed, once, by an
 *                           exchange of the names a and b in its directory
 *                           (three renames): as another program that swaps
 *                           them between a request's look and its act.
 *   FAULT_LOG=path          each fault made appends a line "CALL ERRNO" to
 *                           path, so that a test knows it was reached.  The
 *                           file is opened at start: a server under -r may
 *                           open nothing outside its root once it serves.
 *
 * Everything else is passed on unchanged, errno included.
 */
#define _GNU_SOURCE

#include <sys/types.h>
#include <sys/sendfile.h>
#include <sys/syscall.h>
#include <sys/uio.h>

#include <sys/stat.h>

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef SYS_fchmodat2
#define SYS_fchmodat2	452
#endif
#ifndef SYS_openat2
#define SYS_openat2	437
#endif

static int cfr_errno, renameat2_errno, link_errno, fchmodat2_errno;
static int fchmod_errno;
static int link_empty_errno, tmpfile_errno, no_proc;
static long openat2_eagain;
/*
 * Counted in each thread: a worker's OPEN meets its own run of EAGAIN,
 * whatever other threads open meanwhile.
 */
static __thread unsigned long openat2_calls;
static long cfr_after = -1, cfr_calls;
static size_t cfr_max;
static const char *eio_prefix, *estale_prefix;
static int log_fd = -1;
static char swap_a[256], swap_b[256];
static _Atomic int swap_armed;

static ssize_t (*real_read)(int, void *, size_t);
static ssize_t (*real_write)(int, const void *, size_t);
static ssize_t (*real_pread)(int, void *, size_t, off_t);
static ssize_t (*real_pwrite)(int, const void *, size_t, off_t);
static ssize_t (*real_preadv)(int, const struct iovec *, int, off_t);
static ssize_t (*real_pwritev)(int, const struct iovec *, int, off_t);
static ssize_t (*real_preadv2)(int, const struct iovec *, int, off_t, int);
static ssize_t (*real_pwritev2)(int, const struct iovec *, int, off_t, int);
static ssize_t (*real_splice)(int, loff_t *, int, loff_t *, size_t,
    unsigned int);
static ssize_t (*real_sendfile)(int, int, off_t *, size_t);
static ssize_t (*real_cfr)(int, loff_t *, int, loff_t *, size_t,
    unsigned int);
static int (*real_renameat2)(int, const char *, int, const char *,
    unsigned int);
static int (*real_link)(const char *, const char *);
static int (*real_linkat)(int, const char *, int, const char *, int);
static int (*real_fchmod)(int, mode_t);
static int (*real_access)(const char *, int);
static int (*real_openat)(int, const char *, int, ...);
static int (*real_open)(const char *, int, ...);
static int (*real_stat)(const char *, struct stat *);
static int (*real_lstat)(const char *, struct stat *);
static int (*real_fstatat)(int, const char *, struct stat *, int);
#ifdef __GLIBC__
static int (*real_stat64)(const char *, struct stat64 *);
static int (*real_lstat64)(const char *, struct stat64 *);
static int (*real_fstatat64)(int, const char *, struct stat64 *, int);
#endif
static long (*real_syscall)(long, ...);
static int (*real_close)(int);
static int (*real_fsync)(int);
static int (*real_fdatasync)(int);

static const struct {
	const char *name;
	int value;
} errno_names[] = {
	{ "ENOSYS", ENOSYS }, { "EXDEV", EXDEV }, { "EINVAL", EINVAL },
	{ "EPERM", EPERM }, { "EOPNOTSUPP", EOPNOTSUPP }, { "EIO", EIO },
	{ "ESTALE", ESTALE }, { "EACCES", EACCES }, { "ENOSPC", ENOSPC },
	{ "EAGAIN", EAGAIN }, { "ENOENT", ENOENT },
};

static void *
next_symbol(const char *name)
{
	void *p = dlsym(RTLD_NEXT, name);

	if (p == NULL) {
		fprintf(stderr, "shim_fs_faults: no symbol %s\n", name);
		abort();
	}
	return p;
}

static void
resolve(void)
{
	if (real_syscall != NULL)
		return;
	real_read = next_symbol("read");
	real_write = next_symbol("write");
	real_pread = next_symbol("pread");
	real_pwrite = next_symbol("pwrite");
	real_preadv = next_symbol("preadv");
	real_pwritev = next_symbol("pwritev");
	real_preadv2 = next_symbol("preadv2");
	real_pwritev2 = next_symbol("pwritev2");
	real_splice = next_symbol("splice");
	real_sendfile = next_symbol("sendfile");
	real_cfr = next_symbol("copy_file_range");
	real_renameat2 = next_symbol("renameat2");
	real_link = next_symbol("link");
	real_linkat = next_symbol("linkat");
	real_fchmod = next_symbol("fchmod");
	real_access = next_symbol("access");
	real_openat = next_symbol("openat");
	real_open = next_symbol("open");
	real_stat = next_symbol("stat");
	real_lstat = next_symbol("lstat");
	real_fstatat = next_symbol("fstatat");
#ifdef __GLIBC__
	real_stat64 = next_symbol("stat64");
	real_lstat64 = next_symbol("lstat64");
	real_fstatat64 = next_symbol("fstatat64");
#endif
	real_close = next_symbol("close");
	real_fsync = next_symbol("fsync");
	real_fdatasync = next_symbol("fdatasync");
	real_syscall = next_symbol("syscall");
}

/* An errno from its name or number; 0 when unset. */
static int
env_errno(const char *var)
{
	const char *s = getenv(var);

	if (s == NULL || *s == '\0')
		return 0;
	for (size_t i = 0; i < sizeof errno_names / sizeof errno_names[0]; i++)
		if (strcmp(s, errno_names[i].name) == 0)
			return errno_names[i].value;
	return (int)strtol(s, NULL, 10);
}

static const char *
errno_name(int e)
{
	for (size_t i = 0; i < sizeof errno_names / sizeof errno_names[0]; i++)
		if (errno_names[i].value == e)
			return errno_names[i].name;
	return "E?";
}

__attribute__((constructor)) static void
shim_init(void)
{
	const char *s;

	resolve();
	cfr_errno = env_errno("FAULT_CFR");
	renameat2_errno = env_errno("FAULT_RENAMEAT2");
	link_errno = env_errno("FAULT_LINK");
	link_empty_errno = env_errno("FAULT_LINK_EMPTY");
	tmpfile_errno = env_errno("FAULT_TMPFILE");
	no_proc = getenv("FAULT_NO_PROC") != NULL;
	fchmodat2_errno = env_errno("FAULT_FCHMODAT2");
	fchmod_errno = env_errno("FAULT_FCHMOD");
	if ((s = getenv("FAULT_OPENAT2_EAGAIN")) != NULL)
		openat2_eagain = strtol(s, NULL, 10);
	if ((s = getenv("FAULT_CFR_AFTER")) != NULL)
		cfr_after = strtol(s, NULL, 10);
	if ((s = getenv("FAULT_CFR_MAX")) != NULL)
		cfr_max = (size_t)strtoul(s, NULL, 10);
	eio_prefix = getenv("FAULT_EIO_PREFIX");
	estale_prefix = getenv("FAULT_ESTALE_PREFIX");
	if ((s = getenv("FAULT_SWAP")) != NULL && strchr(s, ':') != NULL &&
	    strlen(s) < sizeof swap_a) {
		(void)snprintf(swap_a, sizeof swap_a, "%.*s",
		    (int)(strchr(s, ':') - s), s);
		(void)snprintf(swap_b, sizeof swap_b, "%s", strchr(s, ':') + 1);
		swap_armed = 1;
	}
	if ((s = getenv("FAULT_LOG")) != NULL)
		log_fd = open(s, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC,
		    0644);
}

/* Appends "CALL ERRNO" to the log, keeping errno. */
static void
note(const char *call, int e)
{
	char line[128];
	int n, saved = errno;

	if (log_fd != -1) {
		n = snprintf(line, sizeof line, "%s %s\n", call, errno_name(e));
		if (n > 0 && (size_t)n < sizeof line)
			(void)real_write(log_fd, line, (size_t)n);
	}
	errno = saved;
}

/*
 * After a lookup of path in dir: when its last name is FAULT_SWAP's a, the
 * first time, a and b change places in its directory.  errno is kept.
 */
static void
looked_up(int dir, const char *path)
{
	char a[4096], b[4096], t[4096];
	const char *base = strrchr(path, '/');
	int plen, saved = errno;

	base = base != NULL ? base + 1 : path;
	if (strcmp(base, swap_a) != 0 || !atomic_exchange(&swap_armed, 0))
		return;
	plen = (int)(base - path);
	(void)snprintf(a, sizeof a, "%.*s%s", plen, path, swap_a);
	(void)snprintf(b, sizeof b, "%.*s%s", plen, path, swap_b);
	(void)snprintf(t, sizeof t, "%.*s.shim-swap", plen, path);
	if (renameat(dir, a, dir, t) == 0 && renameat(dir, b, dir, a) == 0 &&
	    renameat(dir, t, dir, b) == 0)
		note("swap", 0);
	errno = saved;
}

/*
 * The lookups FAULT_SWAP watches: each as the real call, then the swap.
 * PATH_LOOKUP wraps a call by path, AT_LOOKUP one relative to a directory.
 */
#define PATH_LOOKUP(name, st_type)					\
int									\
name(const char *path, st_type *st)					\
{									\
	int r;								\
									\
	resolve();							\
	r = real_##name(path, st);					\
	looked_up(AT_FDCWD, path);					\
	return r;							\
}
#define AT_LOOKUP(name, st_type)					\
int									\
name(int dir, const char *path, st_type *st, int flags)			\
{									\
	int r;								\
									\
	resolve();							\
	r = real_##name(dir, path, st, flags);				\
	looked_up(dir, path);						\
	return r;							\
}

PATH_LOOKUP(stat, struct stat)
PATH_LOOKUP(lstat, struct stat)
AT_LOOKUP(fstatat, struct stat)
#ifdef __GLIBC__
/* The same, as glibc names them for a 64-bit off_t. */
PATH_LOOKUP(stat64, struct stat64)
PATH_LOOKUP(lstat64, struct stat64)
AT_LOOKUP(fstatat64, struct stat64)
#endif

int
open(const char *path, int flags, ...)
{
	mode_t mode = 0;
	va_list ap;
	int r;

	resolve();
	if (flags & (O_CREAT | O_TMPFILE)) {
		va_start(ap, flags);
		mode = va_arg(ap, mode_t);
		va_end(ap);
	}
	r = real_open(path, flags, mode);
	looked_up(AT_FDCWD, path);
	return r;
}

/* The same, as glibc names it for a 64-bit off_t. */
int
open64(const char *path, int flags, ...)
{
	mode_t mode = 0;
	va_list ap;

	if (flags & (O_CREAT | O_TMPFILE)) {
		va_start(ap, flags);
		mode = va_arg(ap, mode_t);
		va_end(ap);
	}
	return open(path, flags, mode);
}

/* Fails a call: notes it, sets errno and returns -1. */
static int
fault(const char *call, int e)
{
	note(call, e);
	errno = e;
	return -1;
}

/* Whether fd is a file whose path starts with prefix. */
static int
under(int fd, const char *prefix)
{
	char link[64], target[4096];
	ssize_t n;
	int saved = errno;

	if (prefix == NULL || *prefix == '\0' || fd < 0)
		return 0;
	(void)snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
	n = readlink(link, target, sizeof target - 1);
	errno = saved;
	if (n <= 0)
		return 0;
	target[n] = '\0';
	return strncmp(target, prefix, strlen(prefix)) == 0;
}

#define STALE(fd)	under((fd), estale_prefix)

ssize_t
read(int fd, void *buf, size_t n)
{
	resolve();
	if (STALE(fd))
		return fault("read", ESTALE);
	return real_read(fd, buf, n);
}

ssize_t
write(int fd, const void *buf, size_t n)
{
	resolve();
	if (STALE(fd))
		return fault("write", ESTALE);
	return real_write(fd, buf, n);
}

ssize_t
pread(int fd, void *buf, size_t n, off_t off)
{
	resolve();
	if (STALE(fd))
		return fault("pread", ESTALE);
	return real_pread(fd, buf, n, off);
}

ssize_t
pread64(int fd, void *buf, size_t n, off_t off)
{
	return pread(fd, buf, n, off);
}

ssize_t
pwrite(int fd, const void *buf, size_t n, off_t off)
{
	resolve();
	if (STALE(fd))
		return fault("pwrite", ESTALE);
	return real_pwrite(fd, buf, n, off);
}

ssize_t
pwrite64(int fd, const void *buf, size_t n, off_t off)
{
	return pwrite(fd, buf, n, off);
}

ssize_t
preadv(int fd, const struct iovec *iov, int n, off_t off)
{
	resolve();
	if (STALE(fd))
		return fault("preadv", ESTALE);
	return real_preadv(fd, iov, n, off);
}

ssize_t
preadv64(int fd, const struct iovec *iov, int n, off_t off)
{
	return preadv(fd, iov, n, off);
}

ssize_t
pwritev(int fd, const struct iovec *iov, int n, off_t off)
{
	resolve();
	if (STALE(fd))
		return fault("pwritev", ESTALE);
	return real_pwritev(fd, iov, n, off);
}

ssize_t
pwritev64(int fd, const struct iovec *iov, int n, off_t off)
{
	return pwritev(fd, iov, n, off);
}

/*
 * preadv2() and pwritev2(): a concurrent server reads with RWF_NOWAIT
 * first, and a fault must reach that call as well.
 */
ssize_t
preadv2(int fd, const struct iovec *iov, int n, off_t off, int flags)
{
	resolve();
	if (STALE(fd))
		return fault("preadv2", ESTALE);
	return real_preadv2(fd, iov, n, off, flags);
}

ssize_t
preadv64v2(int fd, const struct iovec *iov, int n, off_t off, int flags)
{
	return preadv2(fd, iov, n, off, flags);
}

ssize_t
pwritev2(int fd, const struct iovec *iov, int n, off_t off, int flags)
{
	resolve();
	if (STALE(fd))
		return fault("pwritev2", ESTALE);
	return real_pwritev2(fd, iov, n, off, flags);
}

ssize_t
pwritev64v2(int fd, const struct iovec *iov, int n, off_t off, int flags)
{
	return pwritev2(fd, iov, n, off, flags);
}

ssize_t
splice(int in, loff_t *inoff, int out, loff_t *outoff, size_t n,
    unsigned int flags)
{
	resolve();
	if (STALE(in) || STALE(out))
		return fault("splice", ESTALE);
	return real_splice(in, inoff, out, outoff, n, flags);
}

ssize_t
sendfile(int out, int in, off_t *off, size_t n)
{
	resolve();
	if (STALE(in) || STALE(out))
		return fault("sendfile", ESTALE);
	return real_sendfile(out, in, off, n);
}

ssize_t
sendfile64(int out, int in, off_t *off, size_t n)
{
	return sendfile(out, in, off, n);
}

ssize_t
copy_file_range(int in, loff_t *inoff, int out, loff_t *outoff, size_t n,
    unsigned int flags)
{
	resolve();
	if (STALE(in) || STALE(out))
		return fault("copy_file_range", ESTALE);
	cfr_calls++;
	if (cfr_errno != 0 && (cfr_after < 0 || cfr_calls > cfr_after))
		return fault("copy_file_range", cfr_errno);
	if (cfr_max > 0 && n > cfr_max)
		n = cfr_max;
	return real_cfr(in, inoff, out, outoff, n, flags);
}

int
renameat2(int olddir, const char *old, int newdir, const char *new,
    unsigned int flags)
{
	resolve();
	if (flags != 0 && renameat2_errno != 0)
		return fault("renameat2", renameat2_errno);
	return real_renameat2(olddir, old, newdir, new, flags);
}

int
link(const char *old, const char *new)
{
	resolve();
	if (link_errno != 0)
		return fault("link", link_errno);
	return real_link(old, new);
}

int
linkat(int olddir, const char *old, int newdir, const char *new, int flags)
{
	resolve();
	if (link_errno != 0)
		return fault("linkat", link_errno);
	if ((flags & AT_EMPTY_PATH) && link_empty_errno != 0)
		return fault("linkat", link_empty_errno);
	if (no_proc && strncmp(old, "/proc/", 6) == 0)
		return fault("linkat", ENOENT);
	return real_linkat(olddir, old, newdir, new, flags);
}

int
fchmod(int fd, mode_t mode)
{
	resolve();
	if (fchmod_errno != 0)
		return fault("fchmod", fchmod_errno);
	return real_fchmod(fd, mode);
}

int
access(const char *path, int mode)
{
	resolve();
	if (no_proc && strncmp(path, "/proc/", 6) == 0)
		return fault("access", ENOENT);
	return real_access(path, mode);
}

int
openat(int dir, const char *path, int flags, ...)
{
	mode_t mode = 0;
	va_list ap;
	int r;

	resolve();
	if (flags & (O_CREAT | O_TMPFILE)) {
		va_start(ap, flags);
		mode = va_arg(ap, mode_t);
		va_end(ap);
	}
	if ((flags & O_TMPFILE) == O_TMPFILE && tmpfile_errno != 0)
		return fault("openat", tmpfile_errno);
	r = real_openat(dir, path, flags, mode);
	looked_up(dir, path);
	return r;
}

/* The same, as glibc names it for a 64-bit off_t. */
int
openat64(int dir, const char *path, int flags, ...)
{
	mode_t mode = 0;
	va_list ap;

	if (flags & (O_CREAT | O_TMPFILE)) {
		va_start(ap, flags);
		mode = va_arg(ap, mode_t);
		va_end(ap);
	}
	return openat(dir, path, flags, mode);
}

/*
 * syscall(2) is variadic: six words are passed on, as the kernel takes at
 * most six arguments; the ones the caller did not give are never read by
 * the system call.
 */
long
syscall(long number, ...)
{
	va_list ap;
	long a[6];

	resolve();
	va_start(ap, number);
	for (int i = 0; i < 6; i++)
		a[i] = va_arg(ap, long);
	va_end(ap);
	if (number == SYS_fchmodat2 && fchmodat2_errno != 0)
		return fault("fchmodat2", fchmodat2_errno);
	if (number == SYS_openat2 && openat2_eagain > 0 &&
	    strstr((const char *)a[1], "..") != NULL &&
	    __atomic_fetch_add(&openat2_calls, 1, __ATOMIC_RELAXED) %
	    (unsigned long)(openat2_eagain + 1) != (unsigned long)openat2_eagain)
		return fault("openat2", EAGAIN);
	return real_syscall(number, a[0], a[1], a[2], a[3], a[4], a[5]);
}

int
close(int fd)
{
	int wb;

	resolve();
	wb = under(fd, eio_prefix);
	if (real_close(fd) == -1)
		return -1;
	if (wb)
		return fault("close", EIO);
	return 0;
}

int
fsync(int fd)
{
	resolve();
	if (real_fsync(fd) == -1)
		return -1;
	if (under(fd, eio_prefix))
		return fault("fsync", EIO);
	return 0;
}

int
fdatasync(int fd)
{
	resolve();
	if (real_fdatasync(fd) == -1)
		return -1;
	if (under(fd, eio_prefix))
		return fault("fdatasync", EIO);
	return 0;
}
