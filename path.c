/*
 * Path handling.  path_resolve() works on the file system as the client
 * sees it (fs.h), and follows the algorithm of the BSD realpath
 * that OpenSSH bundles as sftp_realpath(), so REALPATH answers as OpenSSH's
 * server does, including for a missing last component.
 */
#include <sys/types.h>
#include <sys/stat.h>

#include <errno.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "fs.h"
#include "path.h"

#define SFTP_SYMLOOP_MAX	32	/* as OpenSSH's sftp_realpath() */

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

int
path_resolve(const char *path, char *resolved)
{
	char left[PATH_MAX], next[PATH_MAX], link[PATH_MAX];
	size_t rlen, llen, n;
	struct stat st;
	const char *slash;
	int hops = 0, more;
	ssize_t len;

	if (path[0] == '/') {
		memcpy(resolved, "/", 2);
		path++;
	} else if (fs_getcwd(resolved, PATH_MAX) == NULL) {
		return -1;
	}
	rlen = strlen(resolved);
	if ((llen = strlen(path)) >= sizeof left)
		goto toolong;
	memcpy(left, path, llen + 1);

	while (llen > 0) {
		/* Take the next component off the front of left. */
		slash = strchr(left, '/');
		n = slash != NULL ? (size_t)(slash - left) : llen;
		memcpy(next, left, n);
		next[n] = '\0';
		more = slash != NULL;
		if (more) {
			memmove(left, slash + 1, llen - n);
			llen -= n + 1;
		} else {
			left[0] = '\0';
			llen = 0;
		}
		if (resolved[rlen - 1] != '/') {
			if (rlen + 1 >= PATH_MAX)
				goto toolong;
			resolved[rlen++] = '/';
			resolved[rlen] = '\0';
		}
		if (next[0] == '\0' || strcmp(next, ".") == 0)
			continue;
		if (strcmp(next, "..") == 0) {
			rlen = strip_last(resolved, rlen);
			continue;
		}
		if (rlen + n >= PATH_MAX)
			goto toolong;
		memcpy(resolved + rlen, next, n + 1);
		rlen += n;
		if (fs_stat(resolved, &st, 0) == -1) {
			/* The last component may be missing. */
			if (errno == ENOENT && !more)
				return 0;
			return -1;
		}
		if (S_ISLNK(st.st_mode)) {
			if (hops++ > SFTP_SYMLOOP_MAX) {
				errno = ELOOP;
				return -1;
			}
			if ((len = fs_readlink(resolved, link, sizeof link - 1)) == -1)
				return -1;
			if (len == 0) {
				errno = ENOENT;
				return -1;
			}
			link[len] = '\0';
			if (link[0] == '/') {
				memcpy(resolved, "/", 2);
				rlen = 1;
			} else {
				rlen = strip_last(resolved, rlen);
			}
			/* The rest of the path goes behind the link's text. */
			if (more) {
				if (link[len - 1] != '/') {
					if ((size_t)len + 1 >= sizeof link)
						goto toolong;
					link[len++] = '/';
					link[len] = '\0';
				}
				if ((size_t)len + llen >= sizeof link)
					goto toolong;
				memcpy(link + len, left, llen + 1);
				len += (ssize_t)llen;
			}
			memcpy(left, link, (size_t)len + 1);
			llen = (size_t)len;
		}
		/*
		 * As OpenSSH's sftp_realpath(), a regular file followed by a
		 * slash, "." or ".." is accepted; "file/x" fails in lstat().
		 */
	}
	/* No trailing slash, but for "/" itself. */
	if (rlen > 1 && resolved[rlen - 1] == '/')
		resolved[rlen - 1] = '\0';
	return 0;
toolong:
	errno = ENAMETOOLONG;
	return -1;
}

int
path_tilde(const char *in, const char *home, char *out, size_t size)
{
	char user[PATH_MAX];
	const char *rest, *dir, *slash;
	struct passwd *pw;
	size_t len;
	int n;

	if (in[0] != '~') {
		if ((size_t)snprintf(out, size, "%s", in) >= size)
			goto toolong;
		return 0;
	}
	in++;
	if (in[0] == '/' || in[0] == '\0') {
		dir = home;
		rest = in + strspn(in, "/");
	} else {
		slash = strchr(in, '/');
		len = slash != NULL ? (size_t)(slash - in) : strlen(in);
		if (len >= sizeof user)
			goto toolong;
		memcpy(user, in, len);
		user[len] = '\0';
		rest = slash != NULL ? slash + strspn(slash, "/") : "";
		if ((pw = getpwnam(user)) == NULL) {
			errno = ENOENT;
			return -1;
		}
		dir = pw->pw_dir;
	}
	len = strlen(dir);
	n = snprintf(out, size, "%s%s%s", dir,
	    (len == 0 || dir[len - 1] != '/') ? "/" : "", rest);
	if (n < 0 || (size_t)n >= size || (size_t)n >= PATH_MAX)
		goto toolong;
	return 0;
toolong:
	errno = ENAMETOOLONG;
	return -1;
}

int
path_percent(const char *in, const char *home, const char *user,
    unsigned long uid, char *out, size_t size)
{
	char num[32];
	const char *add;
	size_t o = 0, n;

	(void)snprintf(num, sizeof num, "%lu", uid);
	for (; *in != '\0'; in++) {
		if (*in != '%') {
			if (o + 1 >= size)
				goto toolong;
			out[o++] = *in;
			continue;
		}
		switch (*++in) {
		case '%':
			add = "%";
			break;
		case 'd':
			add = home;
			break;
		case 'u':
			add = user;
			break;
		case 'U':
			add = num;
			break;
		default:
			errno = EINVAL;
			return -1;
		}
		n = strlen(add);
		if (n >= size - o)
			goto toolong;
		memcpy(out + o, add, n);
		o += n;
	}
	out[o] = '\0';
	return 0;
toolong:
	errno = ENAMETOOLONG;
	return -1;
}
