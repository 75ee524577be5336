/*
 * copy_file_range(2), renameat2(2), ppoll(2), preadv2(2), statx(2),
 * SCHED_BATCH, F_SETPIPE_SZ, O_PATH and dl_iterate_phdr(3) are GNU
 * extensions in glibc, hence _GNU_SOURCE for this file; fs.c is the only
 * other file that sets it (for O_PATH).  Where the C library has no wrapper
 * (musl has no renameat2(), its sched_setscheduler() fails with ENOSYS,
 * and glibc's wrapper is the one a test shim replaces), the system call is
 * made through syscall(2); where Linux lacks it, callers get ENOSYS and
 * take their portable path.
 */
#define _GNU_SOURCE

#include <sys/types.h>
#ifdef __linux__
#include <sys/syscall.h>
#endif
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>

#include <errno.h>
#include <fcntl.h>
#ifdef __linux__
#include <link.h>
#include <sched.h>
#endif
#include <poll.h>
#include <signal.h>
#include <stdint.h>
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

ssize_t
sys_pread_nowait(int fd, void *buf, size_t len, off_t off)
{
#if defined(__linux__) && defined(RWF_NOWAIT)
	struct iovec iov;

	iov.iov_base = buf;
	iov.iov_len = len;
	return preadv2(fd, &iov, 1, off, RWF_NOWAIT);
#else
	(void)fd;
	(void)buf;
	(void)len;
	(void)off;
	errno = EOPNOTSUPP;
	return -1;
#endif
}

int
sys_file_id(int fd, struct stat *st)
{
	struct stat full;
#if defined(__linux__) && defined(SYS_statx) && defined(STATX_TYPE)
	struct statx sx;

	if (syscall(SYS_statx, fd, "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC,
	    STATX_TYPE | STATX_INO, &sx) == 0 &&
	    (sx.stx_mask & (STATX_TYPE | STATX_INO)) ==
	    (STATX_TYPE | STATX_INO)) {
		st->st_dev = makedev(sx.stx_dev_major, sx.stx_dev_minor);
		st->st_ino = (ino_t)sx.stx_ino;
		st->st_mode = (mode_t)(sx.stx_mode & S_IFMT);
		return 0;
	}
#endif
	if (fstat(fd, &full) == -1)
		return -1;
	st->st_dev = full.st_dev;
	st->st_ino = full.st_ino;
	st->st_mode = full.st_mode & S_IFMT;
	return 0;
}

int
sys_sched_batch(void)
{
#if defined(__linux__) && defined(SCHED_BATCH)
	struct sched_param sp = { .sched_priority = 0 };

	/* The system call: musl's sched_setscheduler() is ENOSYS. */
	return (int)syscall(SYS_sched_setscheduler, 0, SCHED_BATCH, &sp);
#else
	errno = ENOSYS;
	return -1;
#endif
}

long
sys_thread_sleeps(void)
{
#if defined(__linux__) && defined(RUSAGE_THREAD)
	struct rusage ru;

	if (getrusage(RUSAGE_THREAD, &ru) == -1)
		return -1;
	return ru.ru_nvcsw;
#else
	return -1;
#endif
}

#ifdef __linux__
static int
count_object(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)info;
	(void)size;
	++*(int *)arg;
	return 0;
}

int
sys_objects_loaded(void)
{
	int n = 0;

	(void)dl_iterate_phdr(count_object, &n);
	return n;
}

/* Whether the object's text was written by the loader (DT_TEXTREL). */
static int
has_text_relocations(const struct dl_phdr_info *info)
{
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		const ElfW(Dyn) *d;

		if (ph->p_type != PT_DYNAMIC)
			continue;
		d = (const ElfW(Dyn) *)(info->dlpi_addr + ph->p_vaddr);
		for (; d->d_tag != DT_NULL; d++)
			if (d->d_tag == DT_TEXTREL || (d->d_tag == DT_FLAGS &&
			    (d->d_un.d_val & DF_TEXTREL) != 0))
				return 1;
	}
	return 0;
}

#define RELEASE_MAX	32
struct release {
	int		 seen, skip, count;
	uintptr_t	 page;
	uintptr_t	 beg[RELEASE_MAX], end[RELEASE_MAX];
};

/*
 * A segment the loader never writes: not writable (the relocated data,
 * RELRO included, is in writable ones), all from the file (no zeroed
 * tail), and no text relocations in the object.  Only its whole pages.
 */
static int
release_object(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct release *r = arg;

	(void)size;
	if (r->seen++ < r->skip || has_text_relocations(info))
		return 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t beg, end;

		if (ph->p_type != PT_LOAD || (ph->p_flags & PF_W) != 0 ||
		    ph->p_memsz != ph->p_filesz)
			continue;
		beg = info->dlpi_addr + ph->p_vaddr;
		end = beg + ph->p_memsz;
		beg = (beg + r->page - 1) & ~(r->page - 1);
		end &= ~(r->page - 1);
		if (beg < end && r->count < RELEASE_MAX) {
			r->beg[r->count] = beg;
			r->end[r->count++] = end;
		}
	}
	return 0;
}

void
sys_objects_release(int count)
{
	struct release r;
	long page = sysconf(_SC_PAGESIZE);

	if (page <= 0)
		return;
	r.seen = 0;
	r.skip = count;
	r.count = 0;
	r.page = (uintptr_t)page;
	(void)dl_iterate_phdr(release_object, &r);
	/* After the walk, which reads the headers in the first pages. */
	for (int i = 0; i < r.count; i++)
		(void)madvise((void *)r.beg[i], r.end[i] - r.beg[i],
		    MADV_DONTNEED);
}
#else
int
sys_objects_loaded(void)
{
	return -1;
}

void
sys_objects_release(int count)
{
	(void)count;
}
#endif
