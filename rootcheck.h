/*
 * The -r root as sshd's ChrootDirectory wants it, checked once at start,
 * before the server confines paths beneath it.
 */
#ifndef ROOTCHECK_H
#define ROOTCHECK_H

#include <stddef.h>

/*
 * Checks a root directory for -r as sshd checks ChrootDirectory: no one but
 * root can replace any name on the way to it, symlinks followed.  Each
 * directory that holds a name of the path is root's and writable by no one
 * else, or sticky (as /tmp) with that name root's.  Returns 0; or -1 with
 * errno EPERM and bad set to the first name that fails, or another errno
 * when the path cannot be walked.
 */
int	root_check(const char *dir, char *bad, size_t size);

#endif /* ROOTCHECK_H */
