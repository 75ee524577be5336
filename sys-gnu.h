/*
 * The few Linux calls that need _GNU_SOURCE, each with a portable answer
 * where the system lacks them.
 */
#ifndef SYS_GNU_H
#define SYS_GNU_H

#include <sys/types.h>
#include <sys/stat.h>

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

/*
 * pread(2) that does not wait for the storage: only what the page cache
 * holds (preadv2(2) with RWF_NOWAIT).  Returns bytes read (short when the
 * rest is not cached, 0 at end of file), or -1 with errno: EAGAIN when the
 * read would wait; EOPNOTSUPP (or ENOSYS, EINVAL) when the file system or
 * the kernel cannot tell, and a plain read is the answer.
 */
ssize_t	sys_pread_nowait(int fd, void *buf, size_t len, off_t off);

/*
 * Which file fd is: its device, inode and type (the S_IFMT bits), into st;
 * the other fields of st are left as they were.  Asked of what the kernel
 * holds for the open file, never of the storage (statx(2) with
 * AT_STATX_DONT_SYNC): a network or FUSE file system answers without a
 * round trip, and what it answers cannot be stale, since none of the three
 * changes while the file is open.  Where statx(2) is missing (or refused),
 * fstat(2).  Returns 0, or -1 with errno.
 */
int	sys_file_id(int fd, struct stat *st);

/*
 * How many times the calling thread has gone to sleep in the kernel (its
 * voluntary context switches: getrusage(2) RUSAGE_THREAD), or -1 where
 * that cannot be known.  A call that waited for storage slept; one that
 * was only preempted did not.
 */
long	sys_thread_sleeps(void);

/*
 * The calling thread takes the SCHED_BATCH policy: woken, it does not
 * preempt the thread that runs, but waits for its turn (sched(7)).
 * Returns 0, or -1 where there is no such policy.
 */
int	sys_sched_batch(void);

/*
 * How many objects (the program, its libraries, those loaded later) the
 * process has loaded (dl_iterate_phdr(3)), or -1 where that cannot be
 * known.
 */
int	sys_objects_loaded(void);
/*
 * Gives back the pages of the read-only parts of the objects loaded after
 * the first count, where each page is still the file's own (no text
 * relocations): their mappings stay, and a later use faults in what it
 * touches again.
 */
void	sys_objects_release(int count);

#endif /* SYS_GNU_H */
