/*
 * Path handling: OpenSSH's realpath semantics, and the ~ and % expansions
 * of -d and expand-path@openssh.com.
 */
#ifndef PATH_H
#define PATH_H

#include <stddef.h>

/*
 * Makes path absolute and canonical into resolved (PATH_MAX bytes),
 * following symlinks (at most 32 hops) as OpenSSH's sftp_realpath() does:
 * the last component may be missing, any other must exist.  Returns 0, or -1 with errno set.
 */
int	path_resolve(const char *path, char *resolved);
/*
 * Expands a leading "~", "~/", "~user" or "~user/" against home (the
 * session user's) or the passwd home of user.  Returns 0, or -1 with errno
 * ENOENT (unknown user) or ENAMETOOLONG.
 */
int	path_tilde(const char *in, const char *home, char *out, size_t size);
/*
 * Expands %d (home), %u (user name), %U (numeric uid) and %% in in.
 * Returns 0, or -1 with errno EINVAL (unknown or lone %) or ENAMETOOLONG.
 */
int	path_percent(const char *in, const char *home, const char *user,
	    unsigned long uid, char *out, size_t size);

#endif /* PATH_H */
