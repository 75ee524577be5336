/*
 * The ~ and % expansions of -d, -r and expand-path@openssh.com.  Strings
 * only: nothing here touches the file system but getpwnam(3).
 */
#ifndef PATH_H
#define PATH_H

#include <stddef.h>

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
