/*
 * Attributes and long names.  User and group names are looked up once per
 * id and kept in small direct-mapped caches, so a listing of a large
 * directory costs one passwd lookup per owner, not per entry.  Without
 * /etc/passwd (a chroot jail) the numeric id is used.
 */
#include <sys/types.h>
#include <sys/stat.h>

#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "attrib.h"

#define NAME_CACHE	64
#define NAME_LEN	64

struct name_entry {
	int valid;
	int known;
	unsigned long id;
	char name[NAME_LEN];
};

static struct name_entry user_cache[NAME_CACHE];
static struct name_entry group_cache[NAME_CACHE];

void
attrs_from_stat(const struct stat *st, struct sftp_attrs *a)
{
	memset(a, 0, sizeof *a);
	a->flags = SSH_FILEXFER_ATTR_SIZE | SSH_FILEXFER_ATTR_UIDGID |
	    SSH_FILEXFER_ATTR_PERMISSIONS | SSH_FILEXFER_ATTR_ACMODTIME;
	a->size = (uint64_t)st->st_size;
	a->uid = (uint32_t)st->st_uid;
	a->gid = (uint32_t)st->st_gid;
	a->perm = (uint32_t)st->st_mode;
	/* As OpenSSH: times are cut to 32 bits. */
	a->atime = (uint32_t)st->st_atime;
	a->mtime = (uint32_t)st->st_mtime;
}

static struct name_entry *
lookup(struct name_entry *cache, unsigned long id, int is_group)
{
	struct name_entry *e = &cache[id % NAME_CACHE];
	struct passwd *pw;
	struct group *gr;
	const char *name = NULL;
	size_t len;

	if (e->valid && e->id == id)
		return e;
	if (is_group) {
		if ((gr = getgrgid((gid_t)id)) != NULL)
			name = gr->gr_name;
	} else {
		if ((pw = getpwuid((uid_t)id)) != NULL)
			name = pw->pw_name;
	}
	e->valid = 1;
	e->id = id;
	e->known = name != NULL && (len = strlen(name)) < sizeof e->name;
	if (e->known)
		memcpy(e->name, name, len + 1);
	else
		(void)snprintf(e->name, sizeof e->name, "%lu", id);
	return e;
}

const char *
attrs_user_name(uid_t uid)
{
	return lookup(user_cache, (unsigned long)uid, 0)->name;
}

const char *
attrs_group_name(gid_t gid)
{
	return lookup(group_cache, (unsigned long)gid, 1)->name;
}

const char *
attrs_user_known(uid_t uid)
{
	struct name_entry *e = lookup(user_cache, (unsigned long)uid, 0);

	return e->known ? e->name : NULL;
}

const char *
attrs_group_known(gid_t gid)
{
	struct name_entry *e = lookup(group_cache, (unsigned long)gid, 1);

	return e->known ? e->name : NULL;
}

void
attrs_strmode(mode_t mode, char buf[12])
{
	switch (mode & S_IFMT) {
	case S_IFDIR:
		buf[0] = 'd';
		break;
	case S_IFCHR:
		buf[0] = 'c';
		break;
	case S_IFBLK:
		buf[0] = 'b';
		break;
	case S_IFREG:
		buf[0] = '-';
		break;
	case S_IFLNK:
		buf[0] = 'l';
		break;
	case S_IFSOCK:
		buf[0] = 's';
		break;
	case S_IFIFO:
		buf[0] = 'p';
		break;
	default:
		buf[0] = '?';
		break;
	}
	buf[1] = (mode & S_IRUSR) ? 'r' : '-';
	buf[2] = (mode & S_IWUSR) ? 'w' : '-';
	switch (mode & (S_IXUSR | S_ISUID)) {
	case 0:
		buf[3] = '-';
		break;
	case S_IXUSR:
		buf[3] = 'x';
		break;
	case S_ISUID:
		buf[3] = 'S';
		break;
	default:
		buf[3] = 's';
		break;
	}
	buf[4] = (mode & S_IRGRP) ? 'r' : '-';
	buf[5] = (mode & S_IWGRP) ? 'w' : '-';
	switch (mode & (S_IXGRP | S_ISGID)) {
	case 0:
		buf[6] = '-';
		break;
	case S_IXGRP:
		buf[6] = 'x';
		break;
	case S_ISGID:
		buf[6] = 'S';
		break;
	default:
		buf[6] = 's';
		break;
	}
	buf[7] = (mode & S_IROTH) ? 'r' : '-';
	buf[8] = (mode & S_IWOTH) ? 'w' : '-';
	switch (mode & (S_IXOTH | S_ISVTX)) {
	case 0:
		buf[9] = '-';
		break;
	case S_IXOTH:
		buf[9] = 'x';
		break;
	case S_ISVTX:
		buf[9] = 'T';
		break;
	default:
		buf[9] = 't';
		break;
	}
	buf[10] = ' ';
	buf[11] = '\0';
}

void
attrs_longname(char *buf, const char *name, const struct stat *st, time_t now)
{
	char mode[12], date[32];
	const char *user, *group;
	struct tm tm;
	int ulen, glen;
	size_t n = 0;

	attrs_strmode(st->st_mode, mode);
	user = attrs_user_name(st->st_uid);
	group = attrs_group_name(st->st_gid);
	/* tzset() ran at start; localtime_r() does not read TZ again. */
	if (localtime_r(&st->st_mtime, &tm) != NULL) {
		if (now - (365 * 24 * 60 * 60) / 2 < st->st_mtime &&
		    now >= st->st_mtime)
			n = strftime(date, sizeof date, "%b %e %H:%M", &tm);
		else
			n = strftime(date, sizeof date, "%b %e  %Y", &tm);
	}
	if (n == 0)
		date[0] = '\0';
	ulen = (int)strlen(user);
	glen = (int)strlen(group);
	(void)snprintf(buf, LONGNAME_MAX, "%s %3u %-*s %-*s %8llu %s %s", mode,
	    (unsigned)st->st_nlink, ulen > 8 ? ulen : 8, user,
	    glen > 8 ? glen : 8, group, (unsigned long long)st->st_size, date,
	    name);
}
