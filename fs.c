/*
 * The file system as the client sees it: plain system calls, or, with -r,
 * the same calls confined beneath one directory.
 *
 * Confinement rests on Linux's openat2(2) with RESOLVE_IN_ROOT, called
 * through syscall(2) so that no library beyond libc is needed, and on O_PATH
 * descriptors and the *at() calls: the kernel resolves every path from the
 * descriptor of the confining directory, treating it as "/", and no string
 * path is ever handed to a call that would resolve it from the real root.
 * A call that must not follow a final symlink resolves the parent directory
 * that way and acts on the last component, a single name, relative to it.
 * O_PATH, AT_EMPTY_PATH and renameat2() are GNU names in glibc, hence
 * _GNU_SOURCE for this file.
 */
#define _GNU_SOURCE

#include <sys/types.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fs.h"
#include "path.h"
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

#ifndef SYS_fchmodat2
#define SYS_fchmodat2	452
#endif

/* statfs(2)'s f_type of procfs, as <linux/magic.h>. */
#define PROC_FS_MAGIC	0x9fa0

/* Retries of openat2() when a concurrent rename makes it answer EAGAIN. */
#define OPENAT2_TRIES	64

static int root_fd = -1;
static struct stat root_st;
static char root_path[PATH_MAX];	/* canonical, as the system sees it */
static char vcwd[PATH_MAX] = "/";

int
fs_confined(void)
{
	return root_fd != -1;
}

/* The client's path from the root: relative paths go behind vcwd. */
static int
virtual_path(const char *path, char *out)
{
	int n;

	if (path[0] == '\0') {
		errno = ENOENT;	/* as the kernel has it */
		return -1;
	}
	if (path[0] == '/')
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

/* openat2() beneath the root; mode only with O_CREAT, as openat2 demands. */
static int
jail_open(const char *path, int flags, mode_t mode)
{
#ifdef HAVE_OPENAT2
	struct fs_open_how how;
	char vp[PATH_MAX];
	long r;

	if (virtual_path(path, vp) == -1)
		return -1;
	memset(&how, 0, sizeof how);
	how.flags = (uint64_t)(flags | O_CLOEXEC);
	how.mode = (flags & O_CREAT) ? (uint64_t)(mode & 07777) : 0;
	how.resolve = FS_RESOLVE_IN_ROOT | FS_RESOLVE_NO_MAGICLINKS;
	for (int i = 0; i < OPENAT2_TRIES; i++) {
		r = syscall(SYS_openat2, root_fd, vp, &how, sizeof how);
		if (r != -1 || (errno != EAGAIN && errno != EINTR))
			break;
	}
	return (int)r;
#else
	(void)path;
	(void)flags;
	(void)mode;
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
	char *slash;
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
	slash = strrchr(buf, '/');
	if (strcmp(slash + 1, "") == 0 || strcmp(slash + 1, ".") == 0 ||
	    strcmp(slash + 1, "..") == 0)
		return jail_open(buf, O_PATH | O_DIRECTORY, 0);
	*basep = slash + 1;
	if (slash == buf) {
		fd = jail_open("/", O_PATH | O_DIRECTORY, 0);
	} else {
		*slash = '\0';
		fd = jail_open(buf, O_PATH | O_DIRECTORY, 0);
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
	const char *last = strrchr(buf, '/') + 1;

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
	if ((fd = jail_open("/", O_PATH | O_DIRECTORY, 0)) == -1) {
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

int
fs_chdir(const char *path)
{
	char resolved[PATH_MAX];
	int fd;

	if (!fs_confined())
		return chdir(path);
	if (path_resolve(path, resolved) == -1)
		return -1;
	if ((fd = jail_open(resolved, O_PATH | O_DIRECTORY, 0)) == -1)
		return -1;
	(void)close(fd);
	memcpy(vcwd, resolved, strlen(resolved) + 1);
	return 0;
}

char *
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

int
fs_open(const char *path, int flags, mode_t mode)
{
	if (!fs_confined())
		return open(path, flags | O_CLOEXEC, mode);
	return jail_open(path, flags, mode);
}

DIR *
fs_opendir(const char *path)
{
	DIR *d;
	int fd;

	if (!fs_confined())
		return opendir(path);
	if ((fd = jail_open(path, O_RDONLY | O_DIRECTORY, 0)) == -1)
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
		if ((fd = jail_open(path, O_PATH, 0)) == -1)
			return -1;
		r = fstat(fd, st);
	} else {
		if ((fd = jail_parent(path, buf, &base, 0)) == -1)
			return -1;
		if (base == NULL)
			r = fstat(fd, st);
		else
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
		if (st->st_dev == root_st.st_dev && st->st_ino == root_st.st_ino)
			return 0;
	}
	return fstatat(dirfd, name, st, AT_SYMLINK_NOFOLLOW);
}

int
fs_statvfs(const char *path, struct statvfs *st)
{
	int fd, r;

	if (!fs_confined())
		return statvfs(path, st);
	if ((fd = jail_open(path, O_PATH, 0)) == -1)
		return -1;
	r = fstatvfs(fd, st);
	close_keep_errno(fd);
	return r;
}

/* Whether the directory fd is on a procfs. */
static int
on_procfs(int fd)
{
	struct statfs sf;

	return fstatfs(fd, &sf) == 0 && sf.f_type == PROC_FS_MAGIC;
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
		r = readlinkat(fd, base, out, size);
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
	} else {
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
	if (!fs_confined())
		return unlink(path);
	return entry_op(OP_UNLINK, path, 0, NULL);
}

int
fs_mkdir(const char *path, mode_t mode)
{
	if (!fs_confined())
		return mkdir(path, mode);
	return entry_op(OP_MKDIR, path, mode, NULL);
}

int
fs_rmdir(const char *path)
{
	if (!fs_confined())
		return rmdir(path);
	return entry_op(OP_RMDIR, path, 0, NULL);
}

int
fs_symlink(const char *target, const char *linkpath)
{
	if (!fs_confined())
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
	else if (is_link)
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
	if (!fs_confined())
		return link(oldpath, newpath);
	return pair_op(1, 0, oldpath, newpath);
}

int
fs_rename(const char *oldpath, const char *newpath, int noreplace)
{
	if (!fs_confined()) {
		if (noreplace)
			return sys_rename_noreplace(AT_FDCWD, oldpath,
			    AT_FDCWD, newpath);
		return rename(oldpath, newpath);
	}
	return pair_op(0, noreplace, oldpath, newpath);
}

int
fs_truncate(const char *path, off_t size)
{
	struct stat st;
	int fd, r;

	if (!fs_confined())
		return truncate(path, size);
	/* Never open a device or a FIFO for writing just to truncate it. */
	if (fs_stat(path, &st, 1) == -1)
		return -1;
	if (!S_ISREG(st.st_mode)) {
		errno = S_ISDIR(st.st_mode) ? EISDIR : EINVAL;
		return -1;
	}
	if ((fd = jail_open(path, O_WRONLY | O_NONBLOCK, 0)) == -1)
		return -1;
	r = ftruncate(fd, size);
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
	return jail_open(path, O_PATH, 0);
}

/* chmod(2) of what an O_PATH descriptor names. */
static int
chmod_fd(int fd, mode_t mode)
{
	char proc[64];

	if (syscall(SYS_fchmodat2, fd, "", mode, AT_EMPTY_PATH) == 0)
		return 0;
	if (errno != ENOSYS && errno != EINVAL)
		return -1;
	/* Kernels before 6.6: through /proc, where there is one. */
	(void)snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
	return chmod(proc, mode);
}

int
fs_chmod(const char *path, mode_t mode, int follow)
{
	char buf[PATH_MAX];
	const char *base;
	struct stat st;
	int fd, r;

	if (!fs_confined()) {
		if (follow)
			return chmod(path, mode);
		/* Linux cannot change the mode of a symlink itself. */
		if (lstat(path, &st) == -1)
			return -1;
		if (S_ISLNK(st.st_mode)) {
			errno = EOPNOTSUPP;
			return -1;
		}
		return chmod(path, mode);
	}
	if ((fd = jail_target(path, follow, buf, &base)) == -1)
		return -1;
	if (base == NULL) {
		r = chmod_fd(fd, mode);
	} else if ((r = fstatat(fd, base, &st, AT_SYMLINK_NOFOLLOW)) == 0) {
		if (S_ISLNK(st.st_mode)) {
			errno = EOPNOTSUPP;
			r = -1;
		} else {
			r = fchmodat(fd, base, mode, 0);
		}
	}
	close_keep_errno(fd);
	return r;
}

int
fs_utimes(const char *path, const struct timespec ts[2], int follow)
{
	char buf[PATH_MAX];
	const char *base;
	int fd, r;

	if (!fs_confined())
		return utimensat(AT_FDCWD, path, ts,
		    follow ? 0 : AT_SYMLINK_NOFOLLOW);
	if ((fd = jail_target(path, follow, buf, &base)) == -1)
		return -1;
	if (base == NULL)
		r = utimensat(fd, "", ts, AT_EMPTY_PATH);
	else
		r = utimensat(fd, base, ts, AT_SYMLINK_NOFOLLOW);
	close_keep_errno(fd);
	return r;
}

int
fs_chown(const char *path, uid_t uid, gid_t gid, int follow)
{
	char buf[PATH_MAX];
	const char *base;
	int fd, r;

	if (!fs_confined())
		return follow ? chown(path, uid, gid) :
		    fchownat(AT_FDCWD, path, uid, gid, AT_SYMLINK_NOFOLLOW);
	if ((fd = jail_target(path, follow, buf, &base)) == -1)
		return -1;
	if (base == NULL)
		r = fchownat(fd, "", uid, gid, AT_EMPTY_PATH);
	else
		r = fchownat(fd, base, uid, gid, AT_SYMLINK_NOFOLLOW);
	close_keep_errno(fd);
	return r;
}

#ifdef SFTP_FUZZ
void
fs_reset(void)
{
	if (root_fd != -1)
		(void)close(root_fd);
	root_fd = -1;
	root_path[0] = '\0';
	memcpy(vcwd, "/", 2);
}
#endif
