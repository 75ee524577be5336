/*
 * copy_file_range(2), renameat2(2), ppoll(2), F_SETPIPE_SZ and O_PATH are
 * GNU extensions in glibc, hence _GNU_SOURCE for this file; fs.c is the
 * only other file that sets it (for O_PATH).  Where the C library has no
 * wrapper (musl has no renameat2(), and glibc's wrapper is the one a test
 * shim replaces), the system call is made through syscall(2); where Linux
 * lacks it, callers get ENOSYS and take their portable path.
 */
#define _GNU_SOURCE

#include <sys/types.h>
#ifdef __linux__
#include <sys/syscall.h>
#endif

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "sys-gnu.h"

/*
 * Offsets reach 2^63 on every system: the Makefile asks for a 64-bit off_t
 * (_FILE_OFFSET_BITS=64), which copy_file_range() also takes.
 */
_Static_assert(sizeof(off_t) == 8, "off_t must be 64-bit: build with "
    "-D_FILE_OFFSET_BITS=64");

ssize_t
sys_copy_range(int in, off_t *inoff, int out, off_t *outoff, size_t len)
{
#if defined(__linux__) && (defined(__GLIBC__) || defined(SYS_copy_file_range))
	if (outoff == NULL) {
		/* copy_file_range() refuses O_APPEND targets. */
		errno = EINVAL;
		return -1;
	}
#ifdef __GLIBC__
	return copy_file_range(in, inoff, out, outoff, len, 0);
#else
	return syscall(SYS_copy_file_range, in, inoff, out, outoff, len, 0);
#endif
#else
	(void)in;
	(void)inoff;
	(void)out;
	(void)outoff;
	(void)len;
	errno = ENOSYS;
	return -1;
#endif
}

int
sys_rename_noreplace(int olddir, const char *old, int newdir, const char *new)
{
#if defined(__linux__) && defined(__GLIBC__) && defined(RENAME_NOREPLACE)
	return renameat2(olddir, old, newdir, new, RENAME_NOREPLACE);
#elif defined(__linux__) && defined(SYS_renameat2)
	/* RENAME_NOREPLACE, as <linux/fs.h>. */
	return (int)syscall(SYS_renameat2, olddir, old, newdir, new, 1);
#else
	(void)olddir;
	(void)old;
	(void)newdir;
	(void)new;
	errno = ENOSYS;
	return -1;
#endif
}

int
sys_pipe_size(int fd, int size)
{
#if defined(__linux__) && defined(F_SETPIPE_SZ)
	if (size > 0)
		(void)fcntl(fd, F_SETPIPE_SZ, size);
	return fcntl(fd, F_GETPIPE_SZ);
#else
	(void)fd;
	(void)size;
	errno = EINVAL;
	return -1;
#endif
}

int
sys_ppoll(struct pollfd *fds, nfds_t n, int timeout_ms, const sigset_t *mask)
{
#if defined(__linux__)
	struct timespec ts;

	if (timeout_ms < 0)
		return ppoll(fds, n, NULL, mask);
	ts.tv_sec = timeout_ms / 1000;
	ts.tv_nsec = (long)(timeout_ms % 1000) * 1000000L;
	return ppoll(fds, n, &ts, mask);
#else
	sigset_t old;
	int r, e;

	/* Not atomic: a signal just before poll() waits for the timeout. */
	(void)sigprocmask(SIG_SETMASK, mask, &old);
	r = poll(fds, n, timeout_ms);
	e = errno;
	(void)sigprocmask(SIG_SETMASK, &old, NULL);
	errno = e;
	return r;
#endif
}

int
sys_open_path(const char *path)
{
#ifdef O_PATH
	return open(path, O_PATH | O_CLOEXEC);
#else
	return open(path, O_RDONLY | O_CLOEXEC);
#endif
}

int
sys_open_dir_path(int dirfd, const char *name)
{
#ifdef O_PATH
	return openat(dirfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW |
	    O_CLOEXEC);
#else
	return openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
	    O_CLOEXEC);
#endif
}
