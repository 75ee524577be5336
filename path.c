/*
 * The ~ and % expansions of -d, -r and expand-path@openssh.com: strings
 * only, no file system (realpath is fs_realpath(), in fs.c).
 */
#include <sys/types.h>
#include <sys/stat.h>

#include <errno.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "path.h"

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
