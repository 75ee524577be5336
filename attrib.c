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

/*
 * Dates after 2038 need a 64-bit time_t, which the Makefile asks for on
 * 32-bit systems (_TIME_BITS=64).  Only glibc before 2.34 cannot give one.
 */
#if !defined(__GLIBC__) || __GLIBC__ > 2 || \
    (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34)
_Static_assert(sizeof(time_t) == 8, "time_t must be 64-bit: build with "
    "-D_FILE_OFFSET_BITS=64 -D_TIME_BITS=64");
#endif

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
/*
 * Within attrs_lookup_budget(): the distinct ids looked up so far, so that
 * ids that evict each other from the cache are still looked up only once.
 */
#define MEMO_MAX	256
static struct {
	int is_group;
	struct name_entry e;
} memo[MEMO_MAX];
static unsigned long nmemo, memo_limit = ATTRS_LOOKUPS_UNLIMITED;

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

	static struct name_entry unknown;
	int limited = memo_limit != ATTRS_LOOKUPS_UNLIMITED;

	if (e->valid && e->id == id)
		return e;
	for (unsigned long i = 0; limited && i < nmemo; i++)
		if (memo[i].is_group == is_group && memo[i].e.id == id)
			return &memo[i].e;
	if (limited && nmemo >= memo_limit) {
		/* Not looked up, and not cached as unknown either. */
		unknown.known = 0;
		unknown.id = id;
		(void)snprintf(unknown.name, sizeof unknown.name, "%lu", id);
		return &unknown;
	}
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
	if (limited) {
		memo[nmemo].is_group = is_group;
		memo[nmemo].e = *e;
		nmemo++;
	}
	return e;
}

void
attrs_lookup_budget(unsigned long n)
{
	memo_limit = n < MEMO_MAX || n == ATTRS_LOOKUPS_UNLIMITED ? n :
	    MEMO_MAX;
	nmemo = 0;
}

/* The name of a user or group, or its number when it has none.  Cached. */
static const char *
attrs_user_name(uid_t uid)
{
	return lookup(user_cache, (unsigned long)uid, 0)->name;
}

static const char *
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

/* The permissions string of BSD strmode(3): 10 characters and a space. */
static void
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

/* Appends s (len bytes), padded with spaces to width on the left or right. */
static size_t
put_field(char *buf, size_t o, const char *s, size_t len, size_t width,
    int left)
{
	size_t pad = len < width ? width - len : 0;
	size_t room = LONGNAME_MAX - 1 - o;

	if (!left) {
		pad = pad < room ? pad : room;
		memset(buf + o, ' ', pad);
		o += pad;
		room -= pad;
		pad = 0;
	}
	len = len < room ? len : room;
	memcpy(buf + o, s, len);
	o += len;
	room -= len;
	pad = pad < room ? pad : room;
	memset(buf + o, ' ', pad);
	return o + pad;
}

/* Appends the decimal v right-aligned in width. */
static size_t
put_number(char *buf, size_t o, unsigned long long v, size_t width)
{
	char tmp[24];
	size_t n = sizeof tmp;

	do {
		tmp[--n] = (char)('0' + v % 10);
		v /= 10;
	} while (v > 0);
	return put_field(buf, o, tmp + n, sizeof tmp - n, width, 0);
}

/*
 * The date column: "%b %e %H:%M" for the last half year, "%b %e  %Y"
 * otherwise, in the C locale, as strftime(3) would write them.  Entries of
 * a listing often share an mtime, so the last one is kept.
 */
static const char *
date_column(time_t mtime, time_t now)
{
	static const char months[] = "JanFebMarAprMayJunJulAugSepOctNovDec";
	static time_t last_mtime;
	static int last_recent = -1;
	static char date[32];
	int recent = now - (365 * 24 * 60 * 60) / 2 < mtime && now >= mtime;
	struct tm tm;

	if (recent == last_recent && mtime == last_mtime)
		return date;
	last_recent = recent;
	last_mtime = mtime;
	date[0] = '\0';
	/* tzset() ran at start; localtime_r() does not read TZ again. */
	if (localtime_r(&mtime, &tm) == NULL || tm.tm_mon < 0 ||
	    tm.tm_mon > 11)
		return date;
	if (recent)
		(void)snprintf(date, sizeof date, "%.3s %2d %02d:%02d",
		    months + 3 * tm.tm_mon, tm.tm_mday, tm.tm_hour, tm.tm_min);
	else
		(void)snprintf(date, sizeof date, "%.3s %2d  %d",
		    months + 3 * tm.tm_mon, tm.tm_mday, tm.tm_year + 1900);
	return date;
}

void
attrs_longname(char *buf, const char *name, const struct stat *st, time_t now)
{
	const char *user, *group, *date;
	size_t o, len;

	/* "%s %3u %-*s %-*s %8llu %s %s", by hand: this is per entry. */
	attrs_strmode(st->st_mode, buf);
	o = 11;
	buf[o++] = ' ';
	o = put_number(buf, o, (unsigned long long)st->st_nlink, 3);
	buf[o++] = ' ';
	user = attrs_user_name(st->st_uid);
	len = strlen(user);
	o = put_field(buf, o, user, len, 8, 1);
	o = put_field(buf, o, " ", 1, 0, 1);
	group = attrs_group_name(st->st_gid);
	len = strlen(group);
	o = put_field(buf, o, group, len, 8, 1);
	o = put_field(buf, o, " ", 1, 0, 1);
	o = put_number(buf, o, (unsigned long long)st->st_size, 8);
	o = put_field(buf, o, " ", 1, 0, 1);
	date = date_column(st->st_mtime, now);
	o = put_field(buf, o, date, strlen(date), 0, 1);
	o = put_field(buf, o, " ", 1, 0, 1);
	o = put_field(buf, o, name, strlen(name), 0, 1);
	buf[o] = '\0';
}
