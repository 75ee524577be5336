/*
 * The file system as the client sees it, in one of three modes, each with
 * its predicate:
 *   - plain(): the plain system calls on the client's path;
 *   - fs_confined() (-r): the same calls confined beneath one directory;
 *   - guarded() (a transfer log open, with or without -r): every call that
 *     could open or change a file first checks that it is not the log.
 * A guarded call that is not confined resolves paths as plain calls do,
 * through the same descriptor-based code as confinement (client_open(),
 * jail_parent()), so that what is checked is what is acted on.
 *
 * Confinement rests on Linux's openat2(2) with RESOLVE_IN_ROOT, called
 * through syscall(2) so that no library beyond libc is needed, and on O_PATH
 * descriptors and the *at() calls: the kernel resolves every path from the
 * descriptor of the confining directory, treating it as "/", and no string
 * path is ever handed to a call that would resolve it from the real root.
 * A call that must not follow a final symlink resolves the parent directory
 * that way and acts on the last component, a single name, relative to it.
 *
 * The rule under -r: no name is resolved a second time after it was
 * checked, since a concurrent session can swap a symlink in between, and a
 * symlink followed by a plain *at() call resolves from the real "/".  Every
 * call below therefore either
 *   - resolves a whole path once, with openat2() (client_open()), and then
 *     acts on that descriptor alone (fstat, fstatvfs, ftruncate,
 *     utimensat and fchownat with AT_EMPTY_PATH, fchmodat2, fdopendir);
 *   - or acts on one name, without a slash, in a directory descriptor from
 *     openat2(), with a call that never follows that name: fstatat,
 *     utimensat and fchownat with AT_SYMLINK_NOFOLLOW, openat with
 *     O_NOFOLLOW, readlinkat, unlinkat, mkdirat, symlinkat, linkat without
 *     AT_SYMLINK_FOLLOW, renameat and renameat2.
 * A check (fstatat) followed by an act is then at worst an answer about an
 * entry that has changed since, never an act outside the root.
 *
 * The rule of the guard (fs_protect()): no call opens, truncates, renames,
 * links, removes or changes the attributes of the transfer log as
 * configured, which is
 *   - the file the session opened as its log;
 *   - the file the log's path names at the time of the call (the name
 *     looked up again, not followed, in the log's directory held open), so
 *     that a rotation made after the session started is seen;
 *   - every file of the log's family: an entry of the log's directory whose
 *     name is the log's name, or begins with it and then '.' or '-'
 *     ("xfer.log.1", "xfer.log.2.gz", "xfer.log-20260101"), which is what
 *     rotations make of it.
 * A file is compared by device and inode, on the descriptor the call
 * opened or the entry it is about to act on, however the client's path
 * named it (a symlink, another hard link, ".."); an entry of the family in
 * the log's directory is also refused by name, existing or not, so that no
 * request makes, replaces or removes one.  The family's inodes come from a
 * scan of the directory, redone whenever its ctime changes.
 *
 * O_PATH and AT_EMPTY_PATH are GNU names in glibc, hence _GNU_SOURCE for
 * this file; sys-gnu.c is the only other file that sets it.
 */
#define _GNU_SOURCE

#include <sys/types.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/xattr.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fs.h"
#include "log.h"
#include "sys-gnu.h"

#if defined(__linux__) && defined(SYS_openat2)
#define HAVE_OPENAT2 1
/* As <linux/openat2.h>, which older systems lack. */
struct fs_open_how {
	uint64_t flags;
	uint64_t mode;
	uint64_t resolve;
};
#define FS_RESOLVE_NO_MAGICLINKS	0x02
#define FS_RESOLVE_IN_ROOT		0x10
#endif

/*
 * fchmodat2(2), Linux 6.6, where the C library's headers are older.  System
 * call numbers from 424 on are shared by these architectures; others (alpha,
 * mips, ia64, x32) number them apart, and go without.
 */
#if !defined(SYS_fchmodat2) && defined(__linux__) && \
    ((defined(__x86_64__) && !defined(__ILP32__)) || defined(__i386__) || \
    defined(__aarch64__) || defined(__arm__) || defined(__riscv) || \
    defined(__powerpc__) || defined(__s390__) || defined(__loongarch__))
#define SYS_fchmodat2	452
#endif

/* statfs(2)'s f_type of procfs, as <linux/magic.h>. */
#define PROC_FS_MAGIC	0x9fa0

/*
 * Retries of openat2() when a concurrent rename makes it answer EAGAIN:
 * OPENAT2_TRIES at once (a quarter of them yielding the CPU), then up to
 * OPENAT2_WAITS more after waits of 1, 2, 4, ... ms (255 ms in all), so
 * that a burst of renames elsewhere on the system, on a file system whose
 * lookups are slow (FUSE), passes.
 */
#define OPENAT2_TRIES	64
#define OPENAT2_WAITS	8

static char *fs_getcwd(char *, size_t);

static int root_fd = -1;
static struct stat root_st;
static char root_path[PATH_MAX];	/* canonical, as the system sees it */
static char vcwd[PATH_MAX];	/* "/" once confined (fs_confine()) */

int
fs_confined(void)
{
	return root_fd != -1;
}

/*
 * The client's path from the root: relative paths go behind vcwd.  Not
 * confined, the path as it is.
 */
static int
virtual_path(const char *path, char *out)
{
	int n;

	if (path[0] == '\0') {
		errno = ENOENT;	/* as the kernel has it */
		return -1;
	}
	if (path[0] == '/' || !fs_confined())
		n = snprintf(out, PATH_MAX, "%s", path);
	else
		n = snprintf(out, PATH_MAX, "%s%s%s", vcwd,
		    strcmp(vcwd, "/") == 0 ? "" : "/", path);
	if (n < 0 || n >= PATH_MAX) {
		errno = ENAMETOOLONG;
		return -1;
	}
	return 0;
}

/*
 * Drops the ".." names at the front of an absolute path: beneath the root,
 * "/.." is "/".  The kernel would find the same, but a ".." lookup fails
 * with EAGAIN whenever a rename happens anywhere on the system meanwhile.
 */
static void
drop_leading_dotdot(char *vp)
{
	char *p = vp;

	for (;;) {
		while (p[1] == '/')
			p++;
		if (p[1] != '.' || p[2] != '.' || (p[3] != '/' && p[3] != '\0'))
			break;
		p += 3;
		if (*p == '\0') {
			memcpy(vp, "/", 2);
			return;
		}
	}
	if (p != vp)
		memmove(vp, p, strlen(p) + 1);
}

/*
 * Opens the client's path, in every mode: under -r with openat2() beneath
 * the root (mode only with O_CREAT, as openat2 demands); otherwise with
 * open(2) of the path, which the guarded calls take as well.
 */
static int
client_open(const char *path, int flags, mode_t mode)
{
#ifdef HAVE_OPENAT2
	struct fs_open_how how;
	char vp[PATH_MAX];
	long r;

	if (!fs_confined())
		return open(path, flags | O_CLOEXEC, mode);
	if (virtual_path(path, vp) == -1)
		return -1;
	memset(&how, 0, sizeof how);
	how.flags = (uint64_t)(flags | O_CLOEXEC);
	how.mode = (flags & O_CREAT) ? (uint64_t)(mode & 07777) : 0;
	how.resolve = FS_RESOLVE_IN_ROOT | FS_RESOLVE_NO_MAGICLINKS;
	drop_leading_dotdot(vp);
	for (int i = 0; i < OPENAT2_TRIES + OPENAT2_WAITS; i++) {
		r = syscall(SYS_openat2, root_fd, vp, &how, sizeof how);
		if (r != -1 || (errno != EAGAIN && errno != EINTR))
			break;
		/* Renames anywhere on the system: let them pass. */
		if (i >= OPENAT2_TRIES)
			(void)sys_ppoll(NULL, 0, 1 << (i - OPENAT2_TRIES),
			    NULL);
		else if (i >= OPENAT2_TRIES / 4)
			(void)sched_yield();
		errno = EAGAIN;	/* what openat2() answered, not the wait */
	}
	return (int)r;
#else
	if (!fs_confined())
		return open(path, flags | O_CLOEXEC, mode);
	errno = ENOSYS;
	return -1;
#endif
}

/* Closes fd keeping errno: the result of the call before it is what counts. */
static void
close_keep_errno(int fd)
{
	int e = errno;

	(void)close(fd);
	errno = e;
}

/* Whether the directory fd is on a procfs. */
static int
on_procfs(int fd)
{
	struct statfs sf;

	return fstatfs(fd, &sf) == 0 && sf.f_type == PROC_FS_MAGIC;
}

/* The transfer log as configured: the guard's rule at the top of the file. */
static int log_guarded;		/* fs_protect() was called */
static struct stat log_st;	/* the log as this session opened it */
static int logdir_fd = -1;	/* its directory, held open */
static struct stat logdir_st;
static DIR *logdir;		/* the same, for the family's scan */
static char log_name[NAME_MAX + 1];	/* its name in that directory */
static size_t log_name_len;

/*
 * The inodes of the family, as the last scan of the directory found them;
 * trusted while the directory's ctime is the one seen then, and only when
 * that was FAMILY_SETTLE seconds before the scan, so that a change in the
 * same tick of the file system's clock cannot go unseen.
 */
#define FAMILY_SETTLE	2
static ino_t *family;
static size_t family_len, family_size;
static struct timespec family_ctime;
static int family_valid;

/* Whether a transfer log is guarded: the calls check what they act on. */
static int
guarded(void)
{
	return log_guarded;
}

int
fs_guarded(void)
{
	return guarded();
}

/* Whether the server runs unconfined and guards nothing: the plain calls. */
static int
plain(void)
{
	return !fs_confined() && !guarded();
}

static int
same_file(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

/* Whether name is of the log's family, in whichever directory. */
static int
family_name(const char *name)
{
	return strncmp(name, log_name, log_name_len) == 0 &&
	    (name[log_name_len] == '\0' || name[log_name_len] == '.' ||
	    name[log_name_len] == '-');
}

/* Reads the family's inodes from the log's directory into family[]. */
static int
family_scan(void)
{
	struct dirent *de;
	struct stat st;
	ino_t *grown;
	size_t n;

	family_len = 0;
	rewinddir(logdir);
	errno = 0;
	while ((de = readdir(logdir)) != NULL) {
		if (!family_name(de->d_name))
			continue;
		if (fstatat(logdir_fd, de->d_name, &st,
		    AT_SYMLINK_NOFOLLOW) == -1 || !S_ISREG(st.st_mode))
			continue;	/* gone meanwhile; a link is no log */
		if (family_len == family_size) {
			n = family_size ? family_size * 2 : 16;
			if ((grown = realloc(family, n * sizeof *family)) ==
			    NULL)
				return -1;
			family = grown;
			family_size = n;
		}
		family[family_len++] = st.st_ino;
		errno = 0;
	}
	return errno == 0 ? 0 : -1;
}

/*
 * Whether the regular file st, on the log directory's device, is of the
 * family.  On any error, it is taken to be: a guard that cannot look refuses.
 */
static int
in_family(const struct stat *st)
{
	struct stat dst;
	struct timespec now;

	if (logdir == NULL)
		return 0;	/* the directory cannot be read: by name only */
	if (fstat(logdir_fd, &dst) == -1)
		return 1;
	if (!family_valid || dst.st_ctim.tv_sec != family_ctime.tv_sec ||
	    dst.st_ctim.tv_nsec != family_ctime.tv_nsec) {
		if (clock_gettime(CLOCK_REALTIME, &now) == -1 ||
		    family_scan() == -1) {
			family_valid = 0;
			return 1;
		}
		family_ctime = dst.st_ctim;
		family_valid = now.tv_sec - dst.st_ctim.tv_sec >= FAMILY_SETTLE;
	}
	for (size_t i = 0; i < family_len; i++)
		if (family[i] == st->st_ino)
			return 1;
	return 0;
}

/*
 * The guard's rule for a file a call has opened or is about to act on:
 * the log as opened, the file at the log's path now, or one of the family.
 */
static int
is_log(const struct stat *st)
{
	struct stat now;

	if (!guarded())
		return 0;
	if (same_file(st, &log_st))
		return 1;
	if (!S_ISREG(st->st_mode) || st->st_dev != logdir_st.st_dev)
		return 0;	/* a log is a regular file in its directory */
	if (fstatat(logdir_fd, log_name, &now, AT_SYMLINK_NOFOLLOW) == 0 &&
	    same_file(st, &now))
		return 1;
	return in_family(st);
}

/* Refuses a request on the log: -1 with EACCES. */
static int
refuse(const char *path)
{
	error("refusing \"%s\": it is the transfer log", path);
	errno = EACCES;
	return -1;
}

/* 0 unless fd is the log (then -1 with EACCES). */
static int
guard_fd(int fd, const char *path)
{
	struct stat st;

	if (!guarded())
		return 0;
	if (fstat(fd, &st) == -1)
		return -1;
	return is_log(&st) ? refuse(path) : 0;
}

/*
 * The same for the entry name of the directory dirfd, not followed, and
 * whether it exists or not: a name of the family in the log's directory
 * is refused by name, so that no request makes, replaces or removes one.
 */
static int
guard_entry(int dirfd, const char *name, const char *path)
{
	struct stat st;

	if (!guarded())
		return 0;
	if (family_name(name)) {
		if (fstat(dirfd, &st) == -1)
			return -1;
		if (same_file(&st, &logdir_st))
			return refuse(path);
	}
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == -1)
		return errno == ENOENT ? 0 : -1;
	return is_log(&st) ? refuse(path) : 0;
}

int
fs_protect(const char *path, int fd)
{
	char dir[PATH_MAX];
	const char *slash = strrchr(path, '/'), *base;
	int dfd;

	base = slash != NULL ? slash + 1 : path;
	if (strlen(base) == 0 || strlen(base) > NAME_MAX ||
	    strlen(path) >= sizeof dir) {
		errno = EINVAL;
		return -1;
	}
	if (slash == NULL)
		memcpy(dir, ".", 2);
	else if (slash == path)
		memcpy(dir, "/", 2);
	else
		(void)snprintf(dir, sizeof dir, "%.*s", (int)(slash - path),
		    path);
	if (fstat(fd, &log_st) == -1)
		return -1;
	/*
	 * Read to list the family; a directory the user may not read is
	 * guarded by the names and the file at the path alone.
	 */
	if ((dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) != -1) {
		if ((logdir = fdopendir(dfd)) == NULL) {
			close_keep_errno(dfd);
			return -1;
		}
	} else if (errno != EACCES ||
	    (dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC)) == -1) {
		return -1;
	}
	if (fstat(dfd, &logdir_st) == -1)
		return -1;
	logdir_fd = dfd;
	memcpy(log_name, base, strlen(base) + 1);
	log_name_len = strlen(base);
	log_guarded = 1;
	return 0;
}

/* jail_parent(): the entry may be missing even when the path ends in "/". */
#define JP_MAY_CREATE	0x1

/*
 * A path that ends in "/" names a directory: its entry must be one, or be
 * missing when the call is about to make one.  A symlink is refused rather
 * than followed, since following it is what the *at() calls must not do.
 */
static int
check_dir_entry(int dirfd, const char *name, int flags)
{
	struct stat st;

	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == -1)
		return errno == ENOENT && (flags & JP_MAY_CREATE) ? 0 : -1;
	if (S_ISDIR(st.st_mode))
		return 0;
	errno = ENOTDIR;
	return -1;
}

/*
 * The directory that holds the last component of path, opened beneath the
 * root, and that component.  When the last component is "/", "." or "..",
 * *basep is NULL and the descriptor is the directory the whole path names;
 * buf then ends in that component.  Trailing slashes are dropped after
 * check_dir_entry().  Returns the descriptor or -1.
 */
static int
jail_parent(const char *path, char *buf, const char **basep, int flags)
{
	char *slash, *base;
	size_t len;
	int fd, trailing = 0;

	*basep = NULL;
	if (virtual_path(path, buf) == -1)
		return -1;
	len = strlen(buf);
	while (len > 1 && buf[len - 1] == '/') {
		buf[--len] = '\0';
		trailing = 1;
	}
	/* Not confined, a relative path may be one name, in the cwd. */
	slash = strrchr(buf, '/');
	base = slash != NULL ? slash + 1 : buf;
	if (strcmp(base, "") == 0 || strcmp(base, ".") == 0 ||
	    strcmp(base, "..") == 0)
		return client_open(buf, O_PATH | O_DIRECTORY, 0);
	*basep = base;
	if (slash == NULL) {
		fd = client_open(".", O_PATH | O_DIRECTORY, 0);
	} else if (slash == buf) {
		fd = client_open("/", O_PATH | O_DIRECTORY, 0);
	} else {
		*slash = '\0';
		fd = client_open(buf, O_PATH | O_DIRECTORY, 0);
		*slash = '/';
	}
	if (fd != -1 && trailing && check_dir_entry(fd, *basep, flags) == -1) {
		close_keep_errno(fd);
		return -1;
	}
	return fd;
}

/*
 * The errno of a call on a path that ends in "/", "." or "..", which has
 * no last name to act on: what rmdir(2) and the others give for them.
 */
static int
dots_errno(const char *buf, int for_rmdir)
{
	const char *last = strrchr(buf, '/');

	last = last != NULL ? last + 1 : buf;
	if (!for_rmdir)
		return EEXIST;
	if (strcmp(last, ".") == 0)
		return EINVAL;
	return strcmp(last, "..") == 0 ? ENOTEMPTY : EBUSY;
}

int
fs_confine(const char *dir)
{
	int fd;

#ifdef HAVE_OPENAT2
	if (realpath(dir, root_path) == NULL)
		return -1;
	if ((fd = open(root_path, O_PATH | O_DIRECTORY | O_CLOEXEC)) == -1)
		return -1;
	if (fstat(fd, &root_st) == -1) {
		close_keep_errno(fd);
		return -1;
	}
	root_fd = fd;
	/* Prove the kernel has openat2() before relying on it. */
	if ((fd = client_open("/", O_PATH | O_DIRECTORY, 0)) == -1) {
		close_keep_errno(root_fd);
		root_fd = -1;
		if (errno == EINVAL || errno == EPERM)
			errno = ENOSYS;
		return -1;
	}
	(void)close(fd);
	memcpy(vcwd, "/", 2);
	/* Nothing should resolve from the real cwd; make it the root too. */
	if (fchdir(root_fd) == -1)
		return -1;
	return 0;
#else
	(void)dir;
	(void)fd;
	errno = ENOSYS;
	return -1;
#endif
}

int
fs_visible(const char *host, char *out, size_t size)
{
	size_t len = strlen(root_path);
	const char *rest;

	if (!fs_confined()) {
		rest = host;
	} else if (strcmp(root_path, "/") == 0) {
		rest = host;
	} else if (strncmp(host, root_path, len) == 0 &&
	    (host[len] == '/' || host[len] == '\0')) {
		rest = host[len] == '\0' ? "/" : host + len;
	} else {
		errno = ENOENT;
		return -1;
	}
	if (strlen(rest) >= size) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memmove(out, rest, strlen(rest) + 1);	/* out may be host */
	return 0;
}

/*
 * REALPATH, with the algorithm of the BSD realpath that OpenSSH bundles as
 * sftp_realpath(), so that it answers as OpenSSH's server does: symlinks
 * followed (at most REALPATH_HOPS + 1), the last name may be missing, a
 * regular file may be followed by "/", "." or "..".  The walk holds an O_PATH
 * descriptor of the directory reached so far and looks up each name in it,
 * one name at a time, so a name costs the same at any depth.  ".." takes the
 * directory's parent when it is the one passed on the way down, and opens the
 * path again otherwise (a concurrent rename).
 */
#define REALPATH_HOPS	32	/* as OpenSSH's SYMLOOP_MAX */

struct walk {
	char *resolved;		/* the answer so far, PATH_MAX bytes */
	size_t rlen;
	int fd;			/* O_PATH descriptor of resolved */
	size_t depth;		/* names in resolved */
	struct dir_id {
		dev_t dev;
		ino_t ino;	/* 0: not known */
	} ids[PATH_MAX / 2];	/* the directory at each depth */
};

/* Drops the last component of resolved, keeping its slash. */
static size_t
strip_last(char *resolved, size_t rlen)
{
	char *q;

	if (rlen <= 1)
		return rlen;
	if (resolved[rlen - 1] == '/')
		resolved[rlen - 1] = '\0';
	q = strrchr(resolved, '/') + 1;
	*q = '\0';
	return (size_t)(q - resolved);
}

/* An O_PATH descriptor of a path as the client sees it. */
static int
open_resolved(const char *path)
{
	if (fs_confined())
		return client_open(path, O_PATH, 0);
	return open(path, O_PATH | O_CLOEXEC);
}

/* Starts the walk at "/" (path absolute) or at the current directory. */
static int
walk_start(struct walk *w, const char *path)
{
	if (path[0] == '/')
		memcpy(w->resolved, "/", 2);
	else if (fs_getcwd(w->resolved, PATH_MAX) == NULL)
		return -1;
	w->rlen = strlen(w->resolved);
	w->depth = 0;
	w->ids[0].ino = 0;	/* "/": always opened again by name */
	for (size_t i = 0; i < w->rlen; i++)
		if (w->resolved[i] == '/' && w->resolved[i + 1] != '/' &&
		    w->resolved[i + 1] != '\0')
			w->ids[++w->depth].ino = 0;
	return (w->fd = open_resolved(w->resolved)) == -1 ? -1 : 0;
}

/* Moves the walk to fd, a descriptor of what resolved names now. */
static void
walk_move(struct walk *w, int fd)
{
	(void)close(w->fd);
	w->fd = fd;
}

/* "..": the parent of what the walk holds. */
static int
walk_up(struct walk *w)
{
	const struct dir_id *want;
	struct stat st;
	int fd;

	w->rlen = strip_last(w->resolved, w->rlen);
	if (w->depth == 0)
		return 0;	/* "/.." is "/" */
	want = &w->ids[--w->depth];
	fd = openat(w->fd, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd != -1 && (fstat(fd, &st) == -1 || want->ino == 0 ||
	    st.st_dev != want->dev || st.st_ino != want->ino)) {
		(void)close(fd);
		fd = -1;
	}
	if (fd == -1 && (fd = open_resolved(w->resolved)) == -1)
		return -1;
	walk_move(w, fd);
	return 0;
}

/*
 * A name that is not a symlink (st, from its lookup): the walk goes into
 * it.  Were it swapped since, the descriptor is of the new entry, never
 * followed, and a later ".." finds a parent it did not expect.
 */
static int
walk_down(struct walk *w, const char *name, size_t n, const struct stat *st)
{
	int fd;

	if ((fd = openat(w->fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC)) == -1)
		return -1;
	memcpy(w->resolved + w->rlen, name, n + 1);
	w->rlen += n;
	w->ids[++w->depth].dev = st->st_dev;
	w->ids[w->depth].ino = st->st_ino;
	walk_move(w, fd);
	return 0;
}

/*
 * The symlink name in the walk's directory: its text goes in front of what
 * is left of the path (left, *llenp), behind a slash when more followed the
 * link, and an absolute one restarts the walk at "/".
 */
static int
walk_link(struct walk *w, const char *name, int more, char *left,
    size_t *llenp)
{
	char link[PATH_MAX];
	ssize_t len;
	size_t llen = *llenp;
	int fd;

	/* Links in a /proc mounted inside would tell host paths. */
	if (fs_confined() && on_procfs(w->fd)) {
		errno = EINVAL;
		return -1;
	}
	if ((len = readlinkat(w->fd, name, link, sizeof link - 1)) == -1)
		return -1;
	if (len == 0) {
		errno = ENOENT;
		return -1;
	}
	link[len] = '\0';
	if (link[0] == '/') {
		if ((fd = open_resolved("/")) == -1)
			return -1;
		walk_move(w, fd);
		memcpy(w->resolved, "/", 2);
		w->rlen = 1;
		w->depth = 0;
	}
	if (more && link[len - 1] != '/')
		link[len++] = '/';	/* room: len < sizeof link - 1 */
	if ((size_t)len + llen >= PATH_MAX) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memmove(left + len, left, llen + 1);
	memcpy(left, link, (size_t)len);
	*llenp = (size_t)len + llen;
	return 0;
}

int
fs_realpath(const char *path, char *resolved)
{
	char left[PATH_MAX], next[PATH_MAX];
	struct walk w;
	struct stat st;
	size_t llen, n;
	int hops = 0, more, r = -1;

	if ((llen = strlen(path)) >= sizeof left) {
		errno = ENAMETOOLONG;
		return -1;
	}
	w.resolved = resolved;
	if (walk_start(&w, path) == -1)
		return -1;
	if (path[0] == '/')
		llen--;
	memcpy(left, path + (path[0] == '/'), llen + 1);
	while (llen > 0) {
		/* Take the next component off the front of left. */
		n = strcspn(left, "/");
		memcpy(next, left, n);
		next[n] = '\0';
		more = left[n] == '/';
		llen -= n + (size_t)more;
		memmove(left, left + n + (size_t)more, llen + 1);
		if (resolved[w.rlen - 1] != '/') {
			if (w.rlen + 1 >= PATH_MAX)
				goto toolong;
			resolved[w.rlen++] = '/';
			resolved[w.rlen] = '\0';
		}
		if (n == 0 || strcmp(next, ".") == 0)
			continue;
		if (strcmp(next, "..") == 0) {
			if (walk_up(&w) == -1)
				goto out;
			continue;
		}
		if (w.rlen + n >= PATH_MAX)
			goto toolong;
		if (fstatat(w.fd, next, &st, AT_SYMLINK_NOFOLLOW) == -1) {
			/* The last component may be missing. */
			if (errno == ENOENT && !more) {
				memcpy(resolved + w.rlen, next, n + 1);
				w.rlen += n;
				r = 0;
			}
			goto out;
		}
		if (!S_ISLNK(st.st_mode)) {
			if (walk_down(&w, next, n, &st) == -1)
				goto out;
			continue;
		}
		if (hops++ > REALPATH_HOPS) {
			errno = ELOOP;
			goto out;
		}
		if (walk_link(&w, next, more, left, &llen) == -1)
			goto out;
	}
	/* No trailing slash, but for "/" itself. */
	if (w.rlen > 1 && resolved[w.rlen - 1] == '/')
		resolved[w.rlen - 1] = '\0';
	r = 0;
	goto out;
toolong:
	errno = ENAMETOOLONG;
out:
	close_keep_errno(w.fd);
	return r;
}

int
fs_chdir(const char *path)
{
	char resolved[PATH_MAX];
	int fd;

	if (!fs_confined())
		return chdir(path);
	if (fs_realpath(path, resolved) == -1)
		return -1;
	if ((fd = client_open(resolved, O_PATH | O_DIRECTORY, 0)) == -1)
		return -1;
	(void)close(fd);
	memcpy(vcwd, resolved, strlen(resolved) + 1);
	return 0;
}

/* The client's current directory, as the client sees it. */
static char *
fs_getcwd(char *buf, size_t size)
{
	if (!fs_confined())
		return getcwd(buf, size);
	if (strlen(vcwd) >= size) {
		errno = ERANGE;
		return NULL;
	}
	memcpy(buf, vcwd, strlen(vcwd) + 1);
	return buf;
}

/*
 * open(2) of anything but the protected file.  The file is opened without
 * O_TRUNC and checked on the descriptor; a regular file is then truncated
 * through that descriptor, so the check and the truncation act on the same
 * file.  O_RDONLY with O_TRUNC truncates too: the file is opened read-write
 * for the check and the truncation (it needs read and write permission
 * either way), then again read-only, and must still be the same file.
 */
static int
open_guarded(const char *path, int flags, mode_t mode)
{
	struct stat st, again;
	int fd, oflags = flags & ~O_TRUNC, reopen = 0;

	if ((flags & O_TRUNC) && (flags & O_ACCMODE) == O_RDONLY) {
		oflags = (oflags & ~O_ACCMODE) | O_RDWR;
		reopen = 1;
	}
	if ((fd = client_open(path, oflags, mode)) == -1)
		return -1;
	if (fstat(fd, &st) == -1)
		goto fail;
	if (is_log(&st)) {
		(void)refuse(path);
		goto fail;
	}
	if ((flags & O_TRUNC) && S_ISREG(st.st_mode) && ftruncate(fd, 0) == -1)
		goto fail;
	if (!reopen)
		return fd;
	(void)close(fd);
	if ((fd = client_open(path, flags & ~(O_TRUNC | O_CREAT), 0)) == -1)
		return -1;
	if (fstat(fd, &again) == -1)
		goto fail;
	if (again.st_dev != st.st_dev || again.st_ino != st.st_ino) {
		errno = EAGAIN;	/* replaced in between: FAILURE */
		goto fail;
	}
	return fd;
fail:
	close_keep_errno(fd);
	return -1;
}

int
fs_open(const char *path, int flags, mode_t mode)
{
	if (guarded())
		return open_guarded(path, flags, mode);
	if (!fs_confined())
		return open(path, flags | O_CLOEXEC, mode);
	return client_open(path, flags, mode);
}

int
fs_open_made(const char *path, int flags, mode_t mode, int *made)
{
	int fd;

	*made = 0;
	if ((flags & (O_CREAT | O_EXCL)) != O_CREAT) {
		fd = fs_open(path, flags, mode);
		*made = fd != -1 && (flags & O_CREAT);
		return fd;
	}
	if ((fd = fs_open(path, flags | O_EXCL, mode)) != -1) {
		*made = 1;
		return fd;
	}
	if (errno != EEXIST)
		return -1;
	/* The name is there: the file it names, or a dangling symlink's. */
	if ((fd = fs_open(path, flags & ~O_CREAT, mode)) != -1 ||
	    errno != ENOENT)
		return fd;
	if ((fd = fs_open(path, flags, mode)) != -1)
		*made = 1;	/* a symlink's target, made through it */
	return fd;
}

DIR *
fs_opendir(const char *path)
{
	DIR *d;
	int fd;

	if (!fs_confined())
		return opendir(path);
	if ((fd = client_open(path, O_RDONLY | O_DIRECTORY, 0)) == -1)
		return NULL;
	if ((d = fdopendir(fd)) == NULL)
		close_keep_errno(fd);
	return d;
}

int
fs_stat(const char *path, struct stat *st, int follow)
{
	char buf[PATH_MAX];
	const char *base;
	size_t len = strlen(path);
	int fd, r;

	if (!fs_confined())
		return follow ? stat(path, st) : lstat(path, st);
	/* A trailing slash makes even lstat(2) follow. */
	if (follow || (len > 0 && path[len - 1] == '/')) {
		if ((fd = client_open(path, O_PATH, 0)) == -1)
			return -1;
		r = fstat(fd, st);
	} else {
		if ((fd = jail_parent(path, buf, &base, 0)) == -1)
			return -1;
		if (base == NULL)
			r = fstat(fd, st);
		else	/* the name itself, never followed */
			r = fstatat(fd, base, st, AT_SYMLINK_NOFOLLOW);
	}
	close_keep_errno(fd);
	return r;
}

int
fs_stat_entry(int dirfd, const char *name, struct stat *st)
{
	if (fs_confined() && strcmp(name, "..") == 0) {
		if (fstat(dirfd, st) == -1)
			return -1;
		if (st->st_dev == root_st.st_dev &&
		    st->st_ino == root_st.st_ino)
			return 0;
	}
	return fstatat(dirfd, name, st, AT_SYMLINK_NOFOLLOW);
}

int
fs_fstatvfs(int fd, struct statvfs *st, uint64_t *fsid)
{
	struct statfs sf;
	uint32_t word[2];

	_Static_assert(sizeof sf.f_fsid == sizeof word,
	    "statfs(2)'s f_fsid is two 32-bit words");
	if (fstatvfs(fd, st) == -1 || fstatfs(fd, &sf) == -1)
		return -1;
	memcpy(word, &sf.f_fsid, sizeof word);
	*fsid = (uint64_t)word[0] | (uint64_t)word[1] << 32;
	return 0;
}

int
fs_statvfs(const char *path, struct statvfs *st, uint64_t *fsid)
{
	int fd, r;

	/* One lookup, so that both calls describe the same file system. */
	if ((fd = client_open(path, O_PATH, 0)) == -1)
		return -1;
	r = fs_fstatvfs(fd, st, fsid);
	close_keep_errno(fd);
	return r;
}

ssize_t
fs_readlink(const char *path, char *out, size_t size)
{
	char buf[PATH_MAX];
	const char *base;
	ssize_t r;
	int fd;

	if (!fs_confined())
		return readlink(path, out, size);
	if ((fd = jail_parent(path, buf, &base, 0)) == -1)
		return -1;
	if (base == NULL || on_procfs(fd)) {
		/* Links in a /proc mounted inside would tell host paths. */
		errno = EINVAL;
		r = -1;
	} else {
		r = readlinkat(fd, base, out, size);	/* never follows base */
	}
	close_keep_errno(fd);
	return r;
}

/*
 * The calls that act on a last component.  A path that ends in "/", "." or
 * ".." has none: the errno is then what the plain call would give.
 */
enum entry_op { OP_UNLINK, OP_MKDIR, OP_RMDIR, OP_SYMLINK };

static int
entry_op(enum entry_op op, const char *path, mode_t mode, const char *target)
{
	char buf[PATH_MAX];
	const char *base;
	int fd, r = -1;

	if ((fd = jail_parent(path, buf, &base,
	    op == OP_MKDIR ? JP_MAY_CREATE : 0)) == -1)
		return -1;
	if (base == NULL) {
		errno = op == OP_UNLINK ? EISDIR : dots_errno(buf,
		    op == OP_RMDIR);
	} else if (guard_entry(fd, base, path) == 0) {
		/* None of these follows base, the last name. */
		switch (op) {
		case OP_UNLINK:
			r = unlinkat(fd, base, 0);
			break;
		case OP_MKDIR:
			r = mkdirat(fd, base, mode);
			break;
		case OP_RMDIR:
			r = unlinkat(fd, base, AT_REMOVEDIR);
			break;
		case OP_SYMLINK:
			r = symlinkat(target, fd, base);
			break;
		}
	}
	close_keep_errno(fd);
	return r;
}

int
fs_unlink(const char *path)
{
	return plain() ? unlink(path) : entry_op(OP_UNLINK, path, 0, NULL);
}

int
fs_mkdir(const char *path, mode_t mode)
{
	return plain() ? mkdir(path, mode) :
	    entry_op(OP_MKDIR, path, mode, NULL);
}

int
fs_rmdir(const char *path)
{
	return plain() ? rmdir(path) : entry_op(OP_RMDIR, path, 0, NULL);
}

int
fs_symlink(const char *target, const char *linkpath)
{
	if (plain())
		return symlink(target, linkpath);
	return entry_op(OP_SYMLINK, linkpath, 0, target);
}

/* link(2) and rename(2): two last components, each in its own directory. */
static int
pair_op(int is_link, int noreplace, const char *oldpath, const char *newpath)
{
	char obuf[PATH_MAX], nbuf[PATH_MAX];
	const char *obase, *nbase;
	struct stat st;
	int ofd, nfd, r = -1, nflags = 0;

	if ((ofd = jail_parent(oldpath, obuf, &obase, 0)) == -1)
		return -1;
	/* "new/" may be missing when a directory is renamed to it. */
	if (!is_link && obase != NULL &&
	    fstatat(ofd, obase, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	    S_ISDIR(st.st_mode))
		nflags = JP_MAY_CREATE;
	if ((nfd = jail_parent(newpath, nbuf, &nbase, nflags)) == -1) {
		close_keep_errno(ofd);
		return -1;
	}
	if (obase == NULL || nbase == NULL)
		errno = is_link ? EEXIST : EBUSY;
	else if (guard_entry(ofd, obase, oldpath) == -1 ||
	    guard_entry(nfd, nbase, newpath) == -1)
		;	/* the log, renamed, replaced or linked */
	else if (is_link)	/* without AT_SYMLINK_FOLLOW: the link itself */
		r = linkat(ofd, obase, nfd, nbase, 0);
	else if (noreplace)
		r = sys_rename_noreplace(ofd, obase, nfd, nbase);
	else
		r = renameat(ofd, obase, nfd, nbase);
	close_keep_errno(nfd);
	close_keep_errno(ofd);
	return r;
}

int
fs_link(const char *oldpath, const char *newpath)
{
	if (plain())
		return link(oldpath, newpath);
	return pair_op(1, 0, oldpath, newpath);
}

int
fs_rename(const char *oldpath, const char *newpath, int noreplace)
{
	if (plain()) {
		if (noreplace)
			return sys_rename_noreplace(AT_FDCWD, oldpath,
			    AT_FDCWD, newpath);
		return rename(oldpath, newpath);
	}
	return pair_op(0, noreplace, oldpath, newpath);
}

/*
 * truncate(2) beneath the root: the path is opened once for writing, without
 * blocking (a FIFO or a device is never waited on), and only a regular file
 * is truncated through that descriptor.
 */
int
fs_truncate(const char *path, off_t size)
{
	struct stat st;
	int fd, r = -1;

	if (plain())
		return truncate(path, size);
	if ((fd = client_open(path, O_WRONLY | O_NONBLOCK | O_NOCTTY, 0)) == -1)
		return -1;
	if (fstat(fd, &st) == 0) {
		if (is_log(&st))
			(void)refuse(path);
		else if (S_ISREG(st.st_mode))
			r = ftruncate(fd, size);
		else
			errno = EINVAL;
	}
	close_keep_errno(fd);
	return r;
}

/*
 * What an attribute change acts on: with follow, the file the whole path
 * names, and *basep NULL; without, the last component in its directory
 * (jail_parent()).  Returns the descriptor or -1.
 */
static int
jail_target(const char *path, int follow, char *buf, const char **basep)
{
	if (!follow)
		return jail_parent(path, buf, basep, 0);
	*basep = NULL;
	return client_open(path, O_PATH, 0);
}

/*
 * chmod(2) of what the O_PATH descriptor fd names; st is its fstat().  No
 * name is resolved again to decide what changes: fchmodat2(2) acts on the
 * descriptor itself, and /proc/self/fd/N is the kernel's own link to the
 * object fd holds.  Where neither exists (before Linux 6.6, in a jail
 * without /proc), a regular file or a directory is opened again, by base in
 * dirfd without following a link or by path beneath the root, and changed
 * only when that is still the same object; anything else fails with
 * EOPNOTSUPP rather than be opened.
 */
static int
chmod_fd(int fd, const struct stat *st, int dirfd, const char *base,
    const char *path, mode_t mode)
{
	char proc[64];
	struct stat again;
	int e, rfd;

#ifdef SYS_fchmodat2
	if (syscall(SYS_fchmodat2, fd, "", mode, AT_EMPTY_PATH) == 0)
		return 0;
	if (errno != ENOSYS && errno != EINVAL)
		return -1;
#endif
	/*
	 * fchmodat(2) rather than chmod(2), which the sandbox refuses under -r
	 * (sandbox.c, not_under_r[]).
	 */
	(void)snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
	if (fchmodat(AT_FDCWD, proc, mode, 0) == 0)
		return 0;
	if (errno != ENOENT)
		return -1;
	if (!S_ISREG(st->st_mode) && !S_ISDIR(st->st_mode)) {
		errno = EOPNOTSUPP;
		return -1;
	}
	if (base != NULL)
		rfd = openat(dirfd, base, O_RDONLY | O_NOFOLLOW | O_NONBLOCK |
		    O_NOCTTY | O_CLOEXEC);
	else
		rfd = client_open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY, 0);
	if (rfd == -1)
		return -1;
	if (fstat(rfd, &again) == -1 || again.st_dev != st->st_dev ||
	    again.st_ino != st->st_ino) {
		close_keep_errno(rfd);
		errno = EAGAIN;	/* it was replaced in between: FAILURE */
		return -1;
	}
	e = fchmod(rfd, mode);
	close_keep_errno(rfd);
	return e;
}

/*
 * chmod(2) of the last component of base in dirfd itself, never of what a
 * symlink there names (Linux cannot change a link's mode: EOPNOTSUPP).  The
 * name is opened once, O_PATH | O_NOFOLLOW, and everything after acts on
 * that descriptor: a link swapped in after the check is never followed.
 */
static int
chmod_nofollow(int dirfd, const char *base, mode_t mode)
{
	struct stat st;
	int fd, r = -1;

	if ((fd = openat(dirfd, base, O_PATH | O_NOFOLLOW | O_CLOEXEC)) == -1)
		return -1;
	if (fstat(fd, &st) == 0) {
		if (is_log(&st))
			(void)refuse(base);
		else if (S_ISLNK(st.st_mode))
			errno = EOPNOTSUPP;
		else
			r = chmod_fd(fd, &st, dirfd, base, NULL, mode);
	}
	close_keep_errno(fd);
	return r;
}

int
fs_chmod(const char *path, mode_t mode, int follow)
{
	char buf[PATH_MAX];
	const char *base;
	struct stat st;
	int fd, r;

	if (plain()) {
		if (follow)
			return chmod(path, mode);
		return chmod_nofollow(AT_FDCWD, path, mode);
	}
	if ((fd = jail_target(path, follow, buf, &base)) == -1)
		return -1;
	if (base != NULL)
		r = chmod_nofollow(fd, base, mode);
	else if ((r = fstat(fd, &st)) == 0)
		r = is_log(&st) ? refuse(path) :
		    chmod_fd(fd, &st, -1, NULL, path, mode);
	close_keep_errno(fd);
	return r;
}

int
fs_chmod_unless(const char *path, mode_t mode, int follow, int keep)
{
	char buf[PATH_MAX];
	const char *base = NULL;
	struct stat st;
	int dfd = -1, fd, r = -1;

	if (plain())
		fd = client_open(path, O_PATH | (follow ? 0 : O_NOFOLLOW), 0);
	else if ((dfd = jail_target(path, follow, buf, &base)) == -1)
		return -1;
	else if (base == NULL)	/* the descriptor itself */
		fd = dfd, dfd = -1;
	else	/* the name itself, never followed */
		fd = openat(dfd, base, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (fd != -1 && fstat(fd, &st) == 0) {
		/* The transfer log is refused whether -m would keep it. */
		if (is_log(&st))
			(void)refuse(path);
		else if (S_ISREG(st.st_mode) && (keep & FS_KEEP_FILE))
			r = FS_KEEP_FILE;
		else if (S_ISDIR(st.st_mode) && (keep & FS_KEEP_DIR))
			r = FS_KEEP_DIR;
		else if (S_ISLNK(st.st_mode))
			errno = EOPNOTSUPP;
		else
			r = chmod_fd(fd, &st, dfd, base, path, mode);
	}
	if (fd != -1)
		close_keep_errno(fd);
	if (dfd != -1)
		close_keep_errno(dfd);
	return r;
}

int
fs_utimes(const char *path, const struct timespec ts[2], int follow)
{
	char buf[PATH_MAX];
	const char *base;
	int fd, r;

	if (plain())
		return utimensat(AT_FDCWD, path, ts,
		    follow ? 0 : AT_SYMLINK_NOFOLLOW);
	if ((fd = jail_target(path, follow, buf, &base)) == -1)
		return -1;
	if (base == NULL)	/* the descriptor itself */
		r = guard_fd(fd, path) == -1 ? -1 :
		    utimensat(fd, "", ts, AT_EMPTY_PATH);
	else	/* the name itself, never followed */
		r = guard_entry(fd, base, path) == -1 ? -1 :
		    utimensat(fd, base, ts, AT_SYMLINK_NOFOLLOW);
	close_keep_errno(fd);
	return r;
}

int
fs_chown(const char *path, uid_t uid, gid_t gid, int follow)
{
	char buf[PATH_MAX];
	const char *base;
	int fd, r;

	if (plain())
		return follow ? chown(path, uid, gid) :
		    fchownat(AT_FDCWD, path, uid, gid, AT_SYMLINK_NOFOLLOW);
	if ((fd = jail_target(path, follow, buf, &base)) == -1)
		return -1;
	if (base == NULL)	/* the descriptor itself */
		r = guard_fd(fd, path) == -1 ? -1 :
		    fchownat(fd, "", uid, gid, AT_EMPTY_PATH);
	else	/* the name itself, never followed */
		r = guard_entry(fd, base, path) == -1 ? -1 :
		    fchownat(fd, base, uid, gid, AT_SYMLINK_NOFOLLOW);
	close_keep_errno(fd);
	return r;
}

/* Atomic uploads (-A). */

/* How an unnamed file gets its name (fs_upload_init()). */
enum { LINK_NONE, LINK_EMPTY, LINK_PROC };
static int upload_link = LINK_NONE;
/* The session's user and group, whose files an upload may replace. */
static uid_t upload_uid;
static gid_t upload_gid;

const char *
fs_upload_init(void)
{
	/*
	 * Where linkat(2) takes AT_EMPTY_PATH from any process, the empty
	 * path is looked up, and a bad descriptor says so (EBADF); before
	 * Linux 6.10, without CAP_DAC_READ_SEARCH, it is refused first
	 * (ENOENT).
	 */
	upload_uid = geteuid();
	upload_gid = getegid();
	if (linkat(-1, "", AT_FDCWD, "", AT_EMPTY_PATH) == -1 &&
	    errno == EBADF)
		upload_link = LINK_EMPTY;
	else if (access("/proc/self/fd", X_OK) == 0)
		upload_link = LINK_PROC;
	else
		upload_link = LINK_NONE;
	switch (upload_link) {
	case LINK_EMPTY:
		return "unnamed files, linked by descriptor";
	case LINK_PROC:
		return "unnamed files, linked through /proc";
	default:
		return "hidden names";
	}
}

/* A new hidden name for an upload of name into out (NAME_MAX + 1 bytes). */
static void
upload_tmp_name(char *out, const char *name)
{
	static _Atomic unsigned long count;
	const int room = NAME_MAX - (int)strlen(FS_UPLOAD_PREFIX) - 13;
	struct timespec ts;
	uint64_t x;

	(void)clock_gettime(CLOCK_REALTIME, &ts);
	x = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^
	    ((uint64_t)getpid() << 40) ^ (uint64_t)(uintptr_t)out ^
	    (uint64_t)atomic_fetch_add(&count, 1) * 0x9e3779b97f4a7c15ULL;
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	(void)snprintf(out, NAME_MAX + 1, "%s%012llx.%.*s", FS_UPLOAD_PREFIX,
	    (unsigned long long)(x & 0xffffffffffffULL), room, name);
}

/* Hidden names tried before an upload fails with EEXIST. */
#define UPLOAD_NAME_TRIES	8

/*
 * The target of an upload of path: its directory (returned) and its name
 * (u->name), a symlink in the last name followed as open(2) would, and
 * the file there opened with acc, not truncated, in *old (-1: none).
 * Opening it asks the kernel what an open in place would: write
 * permission, a directory (EISDIR), a FIFO without a reader (ENXIO).
 * Returns -1 with errno on failure.
 */
static int
upload_target(const char *path, int flags, struct fs_upload *u, int *old)
{
	char buf[PATH_MAX], link[PATH_MAX], next[PATH_MAX], cur[PATH_MAX];
	const char *base;
	ssize_t n;
	int dfd, fd, len;

	for (int hop = 0;; hop++) {
		if ((dfd = jail_parent(path, buf, &base, 0)) == -1)
			return -1;
		if (base == NULL) {
			errno = EISDIR;
			goto fail;
		}
		fd = openat(dfd, base, (flags & O_ACCMODE) | O_NOFOLLOW |
		    O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
		if (fd != -1 || errno == ENOENT) {
			*old = fd;
			memcpy(u->name, base, strlen(base) + 1);
			return dfd;
		}
		if (errno != ELOOP)
			goto fail;
		/* A symlink: O_EXCL fails on it, else it is followed. */
		if (flags & O_EXCL) {
			errno = EEXIST;
			goto fail;
		}
		if (hop >= REALPATH_HOPS) {
			errno = ELOOP;
			goto fail;
		}
		if ((n = readlinkat(dfd, base, link, sizeof link - 1)) == -1)
			goto fail;
		link[n] = '\0';
		if (link[0] == '/')
			len = snprintf(next, sizeof next, "%s", link);
		else
			len = snprintf(next, sizeof next, "%.*s%s",
			    (int)(base - buf), buf, link);
		if (len < 0 || (size_t)len >= sizeof next) {
			errno = ENAMETOOLONG;
			goto fail;
		}
		(void)close(dfd);
		memcpy(cur, next, (size_t)len + 1);
		path = cur;
	}
fail:
	close_keep_errno(dfd);
	return -1;
}

/*
 * Notes which file u's hidden name gives: the client may rename the upload
 * away and another file onto that name, which must then be neither
 * removed (a REMOVE -P may deny) nor renamed onto the target.
 */
static int
known_by(struct fs_upload *u, int fd)
{
	struct stat st;

	if (fstat(fd, &st) == -1)
		return -1;
	u->dev = st.st_dev;
	u->ino = st.st_ino;
	return 0;
}

/*
 * Whether u's hidden name gives its file still.  Another process can change
 * that between this look and the call that acts on the name: the
 * directory's writers, who could remove or rename the file themselves.
 */
static int
hidden_is_ours(const struct fs_upload *u)
{
	struct stat st;

	return fstatat(u->dirfd, u->tmp, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	    st.st_dev == u->dev && st.st_ino == u->ino;
}

/*
 * The new file of an upload in dfd, opened with flags (less the creating
 * ones) and mode: unnamed where it can be, else under a hidden name.
 */
static int
upload_file(int dfd, int flags, mode_t mode, struct fs_upload *u)
{
	int fd, f = (flags & ~(O_CREAT | O_TRUNC | O_EXCL)) | O_CLOEXEC;

	if (upload_link != LINK_NONE) {
		fd = openat(dfd, ".", f | O_TMPFILE, mode);
		if (fd != -1) {
			u->unnamed = 1;
			return fd;
		}
		/* No O_TMPFILE: the kernel (EISDIR) or the file system. */
		if (errno != EOPNOTSUPP && errno != EISDIR &&
		    errno != EINVAL && errno != ENOSYS)
			return -1;
	}
	u->unnamed = 0;
	for (int i = 0; i < UPLOAD_NAME_TRIES; i++) {
		upload_tmp_name(u->tmp, u->name);
		fd = openat(dfd, u->tmp, f | O_CREAT | O_EXCL, mode);
		if (fd != -1 && known_by(u, fd) == -1) {
			close_keep_errno(fd);
			(void)unlinkat(dfd, u->tmp, 0);
			return -1;
		}
		if (fd != -1 || errno != EEXIST)
			return fd;
	}
	return -1;
}

/*
 * Whether the file st may be replaced by a new one that keeps its owner:
 * the session's own, or any when the session runs as root.  Another user's
 * file is written in place: a new one would be the session user's, who
 * could then change its mode (and in a sticky directory the kernel would
 * refuse the rename).
 */
static int
replaceable(const struct stat *st)
{
	return upload_uid == 0 || st->st_uid == upload_uid;
}

/*
 * Whether the new file fd of an upload may take the group of the file st
 * it replaces: it has the session's group, else the session is a member of
 * that one (or root).
 */
static int
keeps_group(int fd, const struct stat *st)
{
	return st->st_gid == upload_gid || upload_uid == 0 ||
	    fchown(fd, (uid_t)-1, st->st_gid) == 0;
}

int
fs_upload_open(const char *path, int flags, mode_t mode, struct fs_upload *u)
{
	struct stat st;
	int dfd, fd, old = -1;

	u->atomic = 0;
	u->placed = 0;
	u->broken = 0;
	u->dirfd = -1;
	u->oldfd = -1;
	u->mode_set = 0;
	u->owner_set = 0;
	/* A name that ends in "/" is no file's: open(2) says why. */
	if ((flags & O_ACCMODE) == O_RDONLY ||
	    !(flags & (O_CREAT | O_TRUNC)) ||
	    (*path != '\0' && path[strlen(path) - 1] == '/'))
		return fs_open(path, flags, mode);
	if ((dfd = upload_target(path, flags, u, &old)) == -1)
		return -1;
	if (old != -1) {
		if (fstat(old, &st) == -1)
			goto fail;
		if ((flags & (O_CREAT | O_EXCL)) == (O_CREAT | O_EXCL)) {
			errno = EEXIST;
			goto fail;
		}
		if (!S_ISREG(st.st_mode) || !(flags & O_TRUNC) ||
		    !replaceable(&st)) {
			/* A file that is there and stays: written in place. */
			(void)close(old);
			(void)close(dfd);
			return fs_open(path, flags, mode);
		}
	} else if (!(flags & O_CREAT)) {
		errno = ENOENT;
		goto fail;
	}
	if (guard_entry(dfd, u->name, path) == -1 ||
	    (fd = upload_file(dfd, flags, mode, u)) == -1)
		goto fail;
	if (old != -1 && !keeps_group(fd, &st)) {
		/* Its group would be lost: written in place. */
		(void)close(fd);
		if (!u->unnamed)
			(void)unlinkat(dfd, u->tmp, 0);
		(void)close(old);
		(void)close(dfd);
		return fs_open(path, flags, mode);
	}
	/* The old file lends the new its attributes at the CLOSE. */
	u->atomic = 1;
	u->replaced = old != -1;
	u->oldfd = old;
	u->dirfd = dfd;
	u->excl = (flags & O_EXCL) != 0;
	return fd;
fail:
	if (old != -1)
		close_keep_errno(old);
	close_keep_errno(dfd);
	return -1;
}

/* Gives the unnamed file open on fd the name name in dfd. */
static int
link_unnamed(int fd, int dfd, const char *name)
{
	char proc[32];

	if (upload_link == LINK_EMPTY)
		return linkat(fd, "", dfd, name, AT_EMPTY_PATH);
	(void)snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
	return linkat(AT_FDCWD, proc, dfd, name, AT_SYMLINK_FOLLOW);
}

/*
 * An unnamed upload over a file that is there: a hidden name first, then
 * a rename over the target.
 */
static int
replace_unnamed(int fd, struct fs_upload *u)
{
	int r = -1;

	for (int i = 0; i < UPLOAD_NAME_TRIES; i++) {
		upload_tmp_name(u->tmp, u->name);
		if ((r = link_unnamed(fd, u->dirfd, u->tmp)) == 0 ||
		    errno != EEXIST)
			break;
	}
	if (r == -1)
		return -1;
	u->unnamed = 0;	/* named now: a failure removes the name */
	if (known_by(u, fd) == -1)
		return -1;
	return renameat(u->dirfd, u->tmp, u->dirfd, u->name);
}

/* A hidden name onto the target, which must not be there (O_EXCL). */
static int
rename_excl(struct fs_upload *u)
{
	if (sys_rename_noreplace(u->dirfd, u->tmp, u->dirfd, u->name) == 0)
		return 0;
	if (errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP)
		return -1;
	/* No RENAME_NOREPLACE here: a link fails the same way. */
	if (linkat(u->dirfd, u->tmp, u->dirfd, u->name, 0) == -1)
		return -1;
	(void)unlinkat(u->dirfd, u->tmp, 0);
	return 0;
}

/*
 * Attributes bound to a file's content, which the kernel removes when the
 * content is written (file capabilities) or which vouch for the old bytes
 * (IMA and EVM): the new content of an upload never takes them, as a file
 * written in place would not keep them.
 */
static int
content_bound(const char *name)
{
	return strcmp(name, "security.capability") == 0 ||
	    strcmp(name, "security.ima") == 0 ||
	    strcmp(name, "security.evm") == 0;
}

#define ACL_ACCESS	"system.posix_acl_access"

/*
 * The extended attributes of from given to to, the access ACL among them
 * (ACL_ACCESS), as cp -a does, but for content_bound() ones; and an access
 * ACL that to has and from has not (a default ACL of the directory gives
 * one to every new file) taken away.  Returns -1 with errno only when the
 * ACL could not be made the same: the new file would let in whom the old
 * one kept out.  Others that cannot be set (a security label, trusted.*
 * for an unprivileged session) are left.
 */
static int
copy_xattrs(int from, int to)
{
	char *names = NULL, *value = NULL, *grown;
	ssize_t len, n;
	size_t size = 0;
	int r = 0;

	if (fgetxattr(from, ACL_ACCESS, NULL, 0) == -1 &&
	    (errno == ENODATA || errno == ENOTSUP) &&
	    fremovexattr(to, ACL_ACCESS) == -1 && errno != ENODATA &&
	    errno != ENOTSUP)
		return -1;
	if ((len = flistxattr(from, NULL, 0)) <= 0)
		return 0;	/* none, or none here (ENOTSUP) */
	if ((names = malloc((size_t)len)) == NULL ||
	    (len = flistxattr(from, names, (size_t)len)) < 0)
		goto fail;
	for (char *p = names; r == 0 && p < names + len; p += strlen(p) + 1) {
		if (content_bound(p) ||
		    (n = fgetxattr(from, p, NULL, 0)) < 0)
			continue;	/* gone, or not ours to read */
		if ((size_t)n > size) {
			if ((grown = realloc(value, (size_t)n)) == NULL)
				goto fail;
			value = grown;
			size = (size_t)n;
		}
		if ((n = fgetxattr(from, p, value, size)) < 0)
			continue;
		if (fsetxattr(to, p, value, (size_t)n, 0) == -1 &&
		    strcmp(p, ACL_ACCESS) == 0)
			r = -1;
	}
	free(names);
	free(value);
	return r;
fail:
	r = errno;
	free(names);
	free(value);
	errno = r;
	return -1;
}

/*
 * The mode st's file would have once written in place: a process without
 * CAP_FSETID (a session not run as root) that truncates or writes a file
 * loses its set-user-ID bit, and its set-group-ID bit where group members
 * may execute it (the kernel's file_remove_privs()).
 */
static mode_t
written_mode(const struct stat *st)
{
	mode_t m = st->st_mode & 07777;

	if (upload_uid != 0) {
		m &= ~(mode_t)S_ISUID;
		if (m & S_IXGRP)
			m &= ~(mode_t)S_ISGID;
	}
	return m;
}

/*
 * The file an upload replaces lends it what it has as the CLOSE comes: its
 * extended attributes, then its owner and group where the session may set
 * them, then its mode (as install(1) does the last two), each as a file
 * written in place would keep it; but an owner or a mode the client gave
 * the upload through its handle (FSETSTAT, as put -p does) stays.
 */
static int
take_attrs(int fd, const struct fs_upload *u)
{
	struct stat st, own, now;
	mode_t mode;
	int e;

	if (fstat(u->oldfd, &st) == -1 ||
	    (u->mode_set && fstat(fd, &own) == -1) ||
	    copy_xattrs(u->oldfd, fd) == -1)
		return -1;
	if (!u->owner_set && fchown(fd, st.st_uid, st.st_gid) == -1 &&
	    fchown(fd, (uid_t)-1, st.st_gid) == -1) {
		/* Root's new file keeps its own where none can be set. */
	}
	/*
	 * Changed since the OPEN to an owner or a group the new file of a
	 * session not run as root cannot take (replaceable(), keeps_group()):
	 * the file is no longer the session's to replace.
	 */
	if (!u->owner_set && upload_uid != 0) {
		if (fstat(fd, &now) == -1)
			return -1;
		if (now.st_uid != st.st_uid || now.st_gid != st.st_gid) {
			errno = EPERM;
			return -1;
		}
	}
	/* After the ACL, which sets the group's bits. */
	mode = u->mode_set ? own.st_mode & 07777 : written_mode(&st);
	if (fchmod(fd, mode) == -1) {
		/*
		 * Refused (a file system whose modes are fixed): the file
		 * goes in place only if that lets no one in whom the mode
		 * kept out.
		 */
		e = errno;
		if (fstat(fd, &now) == -1 ||
		    (now.st_mode & 07777 & ~mode) != 0) {
			errno = e;
			return -1;
		}
	}
	return 0;
}

int
fs_upload_commit(int fd, struct fs_upload *u)
{
	int r;

	if (u->broken != 0) {
		errno = u->broken;	/* partial: never under the name */
		r = -1;
	} else if (guard_entry(u->dirfd, u->name, u->name) == -1)
		r = -1;
	else if (u->oldfd != -1 && take_attrs(fd, u) == -1)
		r = -1;
	else if (u->unnamed) {
		r = link_unnamed(fd, u->dirfd, u->name);
		if (r == -1 && errno == EEXIST && !u->excl)
			r = replace_unnamed(fd, u);
	} else if (!hidden_is_ours(u)) {
		errno = ENOENT;		/* renamed away by the client */
		r = -1;
	} else if (u->excl) {
		r = rename_excl(u);
	} else {
		r = renameat(u->dirfd, u->tmp, u->dirfd, u->name);
	}
	if (r == -1) {
		fs_upload_discard(u);
		return -1;
	}
	(void)close(u->dirfd);
	u->dirfd = -1;
	if (u->oldfd != -1)
		(void)close(u->oldfd);
	u->oldfd = -1;
	u->placed = 1;
	return 0;
}

void
fs_upload_discard(struct fs_upload *u)
{
	int e = errno;

	if (u->dirfd == -1)
		return;
	if (!u->unnamed && hidden_is_ours(u))
		(void)unlinkat(u->dirfd, u->tmp, 0);
	(void)close(u->dirfd);
	u->dirfd = -1;
	if (u->oldfd != -1)
		(void)close(u->oldfd);
	u->oldfd = -1;
	errno = e;
}

#ifdef SFTP_FUZZ
void
fs_reset(void)
{
	if (root_fd != -1)
		(void)close(root_fd);
	root_fd = -1;
	if (logdir != NULL)
		(void)closedir(logdir);
	else if (logdir_fd != -1)
		(void)close(logdir_fd);
	logdir = NULL;
	logdir_fd = -1;
	family_valid = 0;
	log_guarded = 0;
	root_path[0] = '\0';
	memcpy(vcwd, "/", 2);
}
#endif
