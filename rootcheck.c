/*
 * The start-up check of the -r root: the path is walked one name at a time
 * from "/", each name looked up without following it in the directory
 * descriptor reached so far, so that what is checked is what is walked; a
 * symlink on the way (root's, or the walk stops) is read and its text put
 * in front of what is left, as the kernel would.
 */
#include <sys/types.h>
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "rootcheck.h"
#include "sys-gnu.h"

/* Symlinks followed in one path before ELOOP, as the kernel's limit. */
#define SYMLINK_HOPS_MAX	40

/*
 * Whether the entry est in the directory dst can be replaced by root alone:
 * the directory is root's and no one else may write it, or it is sticky
 * (as /tmp) and the entry is root's.
 */
static int
entry_safe(const struct stat *dst, const struct stat *est)
{
	if (dst->st_uid != 0)
		return 0;
	if ((dst->st_mode & 022) == 0)
		return 1;
	return (dst->st_mode & S_ISVTX) != 0 && est->st_uid == 0;
}

/* Appends "/name" to the path walked so far, for the message. */
static void
walked_add(char *walked, const char *name)
{
	size_t len = strlen(walked);

	if (len > 1 && len + 1 < PATH_MAX)
		walked[len++] = '/';
	(void)snprintf(walked + len, PATH_MAX - len, "%s", name);
}

/* Drops the last name of the path walked so far. */
static void
walked_drop(char *walked)
{
	char *slash = strrchr(walked, '/');

	if (slash == walked)
		slash[1] = '\0';
	else
		*slash = '\0';
}

int
root_check(const char *dir, char *bad, size_t size)
{
	char left[PATH_MAX], next[PATH_MAX], link[PATH_MAX];
	char walked[PATH_MAX];
	struct stat dst, est;
	const char *p;
	size_t n;
	ssize_t len;
	int dfd, nfd, hops = 0, r = -1, e;

	bad[0] = '\0';
	if (dir[0] == '/') {
		n = (size_t)snprintf(left, sizeof left, "%s", dir);
	} else {
		if (getcwd(walked, sizeof walked) == NULL)
			return -1;
		n = (size_t)snprintf(left, sizeof left, "%s/%s", walked, dir);
	}
	if (n >= sizeof left) {
		errno = ENAMETOOLONG;
		return -1;
	}
	if ((dfd = sys_open_dir_path(AT_FDCWD, "/")) == -1)
		return -1;
	memcpy(walked, "/", 2);
	while (left[0] != '\0') {
		/* Take the next name off the front of left. */
		p = left + strspn(left, "/");
		n = strcspn(p, "/");
		memcpy(next, p, n);
		next[n] = '\0';
		memmove(left, p + n, strlen(p + n) + 1);
		if (n == 0 || strcmp(next, ".") == 0)
			continue;
		if (strcmp(next, "..") == 0) {
			nfd = sys_open_dir_path(dfd, "..");
			walked_drop(walked);
		} else {
			walked_add(walked, next);
			if (fstat(dfd, &dst) == -1 ||
			    fstatat(dfd, next, &est, AT_SYMLINK_NOFOLLOW) == -1)
				goto out;
			if (!entry_safe(&dst, &est)) {
				(void)snprintf(bad, size, "%s", walked);
				errno = EPERM;
				goto out;
			}
			if (S_ISLNK(est.st_mode)) {
				/* The link is root's: check where it leads. */
				if (++hops > SYMLINK_HOPS_MAX) {
					errno = ELOOP;
					goto out;
				}
				if ((len = readlinkat(dfd, next, link,
				    sizeof link - 1)) == -1)
					goto out;
				link[len] = '\0';
				if (snprintf(next, sizeof next, "%s/%s", link,
				    left) >= (int)sizeof next) {
					errno = ENAMETOOLONG;
					goto out;
				}
				memcpy(left, next, strlen(next) + 1);
				if (link[0] != '/') {
					walked_drop(walked);
					continue;
				}
				nfd = sys_open_dir_path(AT_FDCWD, "/");
				memcpy(walked, "/", 2);
			} else {
				nfd = sys_open_dir_path(dfd, next);
			}
		}
		if (nfd == -1)
			goto out;
		(void)close(dfd);
		dfd = nfd;
	}
	r = 0;
out:
	e = errno;
	(void)close(dfd);
	errno = e;
	return r;
}
