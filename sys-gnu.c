/*
 * copy_file_range(2), renameat2(2) and F_SETPIPE_SZ are GNU extensions in
 * glibc, hence _GNU_SOURCE for this file; fs.c is the only other file that
 * sets it (for O_PATH).  Where they are missing, callers get
 * ENOSYS and take their portable path.
 */
#define _GNU_SOURCE

#include <sys/types.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
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
#if defined(__linux__) && defined(__GLIBC__)
	if (outoff == NULL) {
		/* copy_file_range() refuses O_APPEND targets. */
		errno = EINVAL;
		return -1;
	}
	return copy_file_range(in, inoff, out, outoff, len, 0);
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
#if defined(__linux__) && defined(RENAME_NOREPLACE)
	return renameat2(olddir, old, newdir, new, RENAME_NOREPLACE);
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
