/*
 * File attributes: ATTRS from a struct stat, the "ls -l" long name of a
 * directory entry, and the cached user and group names both use.
 */
#ifndef ATTRIB_H
#define ATTRIB_H

#include <sys/types.h>
#include <sys/stat.h>

#include <stddef.h>
#include <time.h>

#include "packet.h"

/* As OpenSSH's buffer for ls_file(): a longer long name is cut. */
#define LONGNAME_MAX	1024

/* ATTRS flags 0x0F: size, uid and gid, full st_mode, atime and mtime. */
void	attrs_from_stat(const struct stat *, struct sftp_attrs *);
/*
 * Writes into buf (LONGNAME_MAX bytes) the long name of OpenSSH's
 * ls_file(): mode, links, user, group, size, mtime in local time (year form
 * when older than half a year or in the future) and name.  now is the time
 * the listing is made.
 */
void	attrs_longname(char *buf, const char *name, const struct stat *,
	    time_t now);
/* The name, or NULL when the system knows none.  Cached. */
const char	*attrs_user_known(uid_t);
const char	*attrs_group_known(gid_t);
/*
 * From now on, at most n distinct ids (256 at most) are looked up in the
 * system's databases, each once; past that, an id not in the cache is
 * answered as unknown.  ATTRS_LOOKUPS_UNLIMITED lifts the limit.
 */
#define ATTRS_LOOKUPS_UNLIMITED	((unsigned long)-1)
void	attrs_lookup_budget(unsigned long n);

#endif /* ATTRIB_H */
