/*
 * The few Linux calls that need _GNU_SOURCE, each with a portable answer
 * where the system lacks them.
 */
#ifndef SYS_GNU_H
#define SYS_GNU_H

#include <sys/types.h>

#include <poll.h>
#include <signal.h>
#include <stddef.h>

/*
 * Copies up to len bytes from in at *inoff to out at *outoff (or at the end
 * when outoff is NULL, for O_APPEND) inside the kernel, advancing the
 * offsets.  Returns bytes copied, 0 at end of input, or -1 with errno; errno
 * ENOSYS, EXDEV, EINVAL or EOPNOTSUPP means "copy by hand instead".
 */
ssize_t	sys_copy_range(int in, off_t *inoff, int out, off_t *outoff,
	    size_t len);
/*
 * renameat(2), failing with EEXIST when new exists.  Returns 0, or -1 with
 * errno; ENOSYS or EINVAL means the file system cannot do it atomically.
 */
int	sys_rename_noreplace(int olddir, const char *old, int newdir,
	    const char *new);

/*
 * Asks for a pipe buffer of size bytes on fd, larger or smaller, when size
 * is above 0 and fd is a pipe; a refusal (the user's pipe quota, data that
 * would not fit) leaves it as it was.  Returns the size the pipe has then,
 * or -1 when fd is not a pipe.
 */
int	sys_pipe_size(int fd, int size);

/*
 * poll(2) with the signal mask set to mask for the wait alone, atomically
 * (ppoll(2)): a signal blocked before the wait is taken by it, so that a
 * flag its handler sets cannot be missed between a look at it and the wait.
 * timeout_ms < 0 waits without a limit.
 */
int	sys_ppoll(struct pollfd *fds, nfds_t n, int timeout_ms,
	    const sigset_t *mask);

/*
 * A descriptor that names path without opening it for reading or writing
 * (O_PATH, close-on-exec), as the kernel's Landlock rules take them; where
 * O_PATH is missing, path opened read-only.  Returns it, or -1 with errno.
 */
int	sys_open_path(const char *path);
/*
 * The same for the directory name in dirfd (AT_FDCWD, or a descriptor from
 * here), never through a symlink in its place: O_PATH | O_DIRECTORY |
 * O_NOFOLLOW.  Returns it, or -1 with errno (ENOTDIR for a symlink).
 */
int	sys_open_dir_path(int dirfd, const char *name);

#endif /* SYS_GNU_H */
