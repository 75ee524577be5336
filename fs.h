/*
 * The file system as the client sees it.  Every request reaches files
 * through these calls.  Normally they are the plain system calls on the
 * client's path.  With -r (fs_confine()) every path is resolved beneath one
 * directory by the kernel itself, with openat2(2) and RESOLVE_IN_ROOT:
 * "..", absolute paths and symlinks, absolute ones included, all stay
 * inside, and the paths the client sees start at that directory.
 *
 * Each call returns what its system call returns, with errno set.
 *
 * Threads: each declaration says whether a storage worker (jobs.h) may
 * call it.  "Any thread": it reads only what start-up set (the root, the
 * current directory of -d) and keeps no state, so workers may run it at
 * once.  "The loop's": only the loop's thread; it changes state of this
 * file (the root, the current directory, the transfer log's guard) or
 * calls a function that does.
 */
#ifndef FS_H
#define FS_H

#include <sys/types.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include <dirent.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

/*
 * Confines every later call beneath dir.  Returns 0, or -1 with errno
 * (ENOSYS: the kernel has no openat2(2), and nothing is confined).  The
 * loop's, at start.
 */
int	fs_confine(const char *dir);
/*
 * Guards the transfer log, open on fd, that path names (as the log was
 * opened; a relative path from the current directory), across any number
 * of rotations: from then on no call below opens, truncates, renames,
 * links, removes or changes the attributes of the file open on fd, of the
 * file that path names at the time of the call, or of a file of the log's
 * family: an entry of the log's directory whose name is the log's name, or
 * begins with it and then '.' or '-'.  Such files are known by device and
 * inode, however the path of a request names them (a symlink, another
 * hard link, ".."), and no request makes, replaces or removes an entry of
 * the family by name.  A refused call fails with EACCES and logs why.
 * The directory is held open; when the user may not read it, rotated files
 * are guarded by their names only.  Returns 0, or -1 with errno.  The
 * loop's, at start.
 */
int	fs_protect(const char *path, int fd);
/* Whether fs_confine() is in force.  Any thread. */
int	fs_confined(void);
/*
 * Whether fs_protect() is in force.  Its guard keeps state of its own (the
 * log family's inodes): fs_open() is then for one thread only.  Otherwise
 * fs_open() and fs_stat() may run in several threads at once.  Any thread.
 */
int	fs_guarded(void);
/*
 * The path the client sees for a path of the system (a home directory):
 * itself, or under -r its part beneath the root.  Returns 0, or -1 with
 * errno ENOENT when the client cannot see it.  The loop's.
 */
int	fs_visible(const char *host, char *out, size_t size);
/*
 * Makes path absolute and canonical into resolved (PATH_MAX bytes) as
 * OpenSSH's sftp_realpath() does: symlinks followed (33 at most, then
 * ELOOP), the last component may be missing, any other must exist.
 * Returns 0, or -1 with errno set.  The loop's.
 */
int	fs_realpath(const char *path, char *resolved);
/* Changes the client's current directory.  The loop's, at start. */
int	fs_chdir(const char *);

/*
 * open(2); mode is used only with O_CREAT.  Any thread while fs_guarded()
 * is false; the loop's otherwise (the guard's state).
 */
int	fs_open(const char *, int flags, mode_t mode);
/*
 * fs_open() that says whether it made the file (*made): with O_CREAT, the
 * file is opened with O_EXCL first.  A name that is there is then opened
 * without O_CREAT and counts as not made; a dangling symlink (ENOENT then)
 * is opened as fs_open() would, making its target, which counts as made.
 * As fs_open() for threads.
 */
int	fs_open_made(const char *, int flags, mode_t mode, int *made);
/* The loop's. */
DIR	*fs_opendir(const char *);
/* stat(2) when follow, lstat(2) otherwise.  Any thread. */
int	fs_stat(const char *, struct stat *, int follow);
/*
 * The attributes of the entry name of an open directory; for ".." of the
 * confining directory, its own, since its parent is not the client's to see.
 * Any thread.
 */
int	fs_stat_entry(int dirfd, const char *name, struct stat *);
/*
 * statvfs(3) of a path, or of an open file, and the file system's id in
 * full: statfs(2)'s two 32-bit words, the first in the low half, which is
 * what statvfs(3)'s f_fsid holds with glibc on 64-bit systems and what
 * OpenSSH's server sends there.  f_fsid itself keeps only the first word
 * on 32-bit systems and with musl.  The loop's, as every call below: they
 * go through the transfer log's guard, or change what it guards.
 */
int	fs_statvfs(const char *, struct statvfs *, uint64_t *fsid);
int	fs_fstatvfs(int fd, struct statvfs *, uint64_t *fsid);
ssize_t	fs_readlink(const char *, char *, size_t);

int	fs_unlink(const char *);
int	fs_mkdir(const char *, mode_t);
int	fs_rmdir(const char *);
/* symlink(2): target is stored as given. */
int	fs_symlink(const char *target, const char *linkpath);
int	fs_link(const char *oldpath, const char *newpath);
/* rename(2), or with noreplace renameat2(2)'s RENAME_NOREPLACE. */
int	fs_rename(const char *oldpath, const char *newpath, int noreplace);

int	fs_truncate(const char *, off_t);
/* Attribute changes; follow chooses between the file a link names and it. */
int	fs_chmod(const char *, mode_t, int follow);
/*
 * As fs_chmod(), but a regular file (keep has FS_KEEP_FILE) or a directory
 * (FS_KEEP_DIR) keeps its mode: returns that flag then, 0 when the mode
 * changed.  The type is read through the descriptor the mode would be
 * changed through: no name swapped in meanwhile is changed instead (-m, -M).
 */
#define FS_KEEP_FILE	1
#define FS_KEEP_DIR	2
int	fs_chmod_unless(const char *, mode_t, int follow, int keep);
int	fs_utimes(const char *, const struct timespec[2], int follow);
int	fs_chown(const char *, uid_t, gid_t, int follow);

/*
 * Atomic uploads (-A).  An OPEN for writing that truncates, or creates a
 * file that is not there, writes to a new file of its own in the target's
 * directory: unnamed (O_TMPFILE) where the kernel can later give it a name
 * and the file system makes one, else under a hidden name in that
 * directory, FS_UPLOAD_PREFIX, 12 hex digits, '.' and the target's name
 * (cut to fit).  fs_upload_commit() puts it in place in one step;
 * fs_upload_discard() leaves the target as it was.  The target is the file
 * the path names, a symlink in its last name followed (beneath the root
 * under -r); replacing one, the new file takes its mode, and its owner and
 * group where the session may set them.
 */
#define FS_UPLOAD_PREFIX	".sftp-upload."

struct fs_upload {
	int atomic;		/* 0: opened in place, as fs_open() */
	int dirfd;		/* the target's directory (O_PATH) */
	int oldfd;		/* the file it replaces, or -1 */
	dev_t dev;		/* the new file, known by its hidden name */
	ino_t ino;
	int unnamed;		/* O_TMPFILE; else named tmp */
	int excl;		/* O_EXCL: never replaces a file */
	int placed;		/* fs_upload_commit() put it in place */
	int replaced;		/* a file was there: it takes its mode */
	int mode_set;		/* FSETSTAT gave it a mode: kept */
	int owner_set;		/* FSETSTAT gave it an owner: kept */
	int broken;		/* a write into it failed (its errno) */
	char name[NAME_MAX + 1];	/* the target's name in dirfd */
	char tmp[NAME_MAX + 1];		/* the hidden name, when named */
};

/*
 * How this session names unnamed files, looked at once before the sandbox:
 * linkat(2) with AT_EMPTY_PATH (Linux 6.10, or CAP_DAC_READ_SEARCH), else
 * through /proc/self/fd, else not at all (hidden names only).  Returns
 * what it found, as a word for the log.  The loop's, at start.
 */
const char	*fs_upload_init(void);
/*
 * open(2) of path for an upload with flags and mode: an atomic upload
 * when flags write and create or truncate (u->atomic), else in place, as
 * fs_open().  Returns the descriptor, or -1 with errno.  Any thread while
 * fs_guarded() is false; the loop's otherwise.
 */
int	fs_upload_open(const char *path, int flags, mode_t mode,
	    struct fs_upload *u);
/*
 * Puts the upload open on fd in place under its target's name (replacing
 * a file there unless u->excl) and closes u's directory.  On failure, or
 * when a write into it failed (u->broken, its errno then), the upload is
 * discarded (fs_upload_discard()).  fd stays open.  Returns 0, or -1 with
 * errno.  As fs_upload_open().
 */
int	fs_upload_commit(int fd, struct fs_upload *u);
/* Removes a hidden name, closes u's directory: the target is untouched. */
void	fs_upload_discard(struct fs_upload *u);

#ifdef SFTP_FUZZ
/* Ends confinement: the fuzz harness runs many sessions in one process. */
void	fs_reset(void);
#endif

#endif /* FS_H */
