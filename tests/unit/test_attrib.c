/*
 * Unit tests of attrib.c: ATTRS from stat, strmode, long names.
 *
 * Times are taken in UTC and "now" is fixed, so long names do not depend on
 * the machine's zone or clock.
 */
#include <sys/types.h>
#include <sys/stat.h>

#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* cmocka 1.1.5 needs the four headers above it. */
#include <cmocka.h>

#include "../../attrib.c"
#include "unit.h"

/* 2024-11-29 20:53:00 UTC. */
#define NOW		((time_t)1732913580)
/* OpenSSH's "half a year" for the date form of ls. */
#define HALF_YEAR	((time_t)(365 * 24 * 60 * 60) / 2)

static int
setup_utc(void **state)
{
	(void)state;
	if (setenv("TZ", "UTC", 1) != 0)
		return -1;
	tzset();
	return 0;
}

/* A struct stat of a regular file, as in the example of a long name. */
static void
file_stat(struct stat *st)
{
	memset(st, 0, sizeof *st);
	st->st_mode = S_IFREG | 0644;
	st->st_nlink = 1;
	st->st_uid = 0;
	st->st_gid = 0;
	st->st_size = 6;
	st->st_mtime = NOW;
}

/* The long name in an exact-size heap buffer, so an overrun is caught. */
static void
assert_longname(const char *name, const struct stat *st, time_t now,
    const char *want)
{
	char *buf = malloc(LONGNAME_MAX);

	assert_non_null(buf);
	attrs_longname(buf, name, st, now);
	assert_string_equal(buf, want);
	free(buf);
}

static void
test_attrs_from_stat_all_fields(void **state)
{
	struct sftp_attrs a;
	struct stat st;

	(void)state;
	memset(&st, 0, sizeof st);
	st.st_mode = S_IFDIR | 02755;
	st.st_size = 0x123456789LL;
	st.st_uid = 1000;
	st.st_gid = 1001;
	st.st_atime = 1700000000;
	st.st_mtime = 1700000001;
	memset(&a, 0xA5, sizeof a);
	attrs_from_stat(&st, &a);
	assert_int_equal(a.flags, 0x0F);
	assert_true(a.size == 0x123456789ULL);
	assert_int_equal(a.uid, 1000);
	assert_int_equal(a.gid, 1001);
	assert_int_equal(a.perm, S_IFDIR | 02755);
	assert_int_equal(a.atime, 1700000000);
	assert_int_equal(a.mtime, 1700000001);
}

static void
test_attrs_strmode_file_types(void **state)
{
	/* clang-format off */
	static const struct {
		mode_t mode;
		const char *want;
	} cases[] = {
		{ S_IFREG | 0644, "-rw-r--r-- " },
		{ S_IFDIR | 0755, "drwxr-xr-x " },
		{ S_IFLNK | 0777, "lrwxrwxrwx " },
		{ S_IFCHR | 0620, "crw--w---- " },
		{ S_IFBLK | 0660, "brw-rw---- " },
		{ S_IFIFO | 0600, "prw------- " },
		{ S_IFSOCK | 0755, "srwxr-xr-x " },
		{ 0, "?--------- " },
		{ 0644, "?rw-r--r-- " },
	};
	/* clang-format on */
	char *buf;

	(void)state;
	buf = malloc(12);
	assert_non_null(buf);
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		attrs_strmode(cases[i].mode, buf);
		assert_string_equal(buf, cases[i].want);
	}
	free(buf);
}

static void
test_attrs_strmode_setid_and_sticky(void **state)
{
	/* clang-format off */
	static const struct {
		mode_t mode;
		const char *want;
	} cases[] = {
		{ S_IFREG | 04755, "-rwsr-xr-x " },
		{ S_IFREG | 04644, "-rwSr--r-- " },
		{ S_IFREG | 02755, "-rwxr-sr-x " },
		{ S_IFREG | 02644, "-rw-r-Sr-- " },
		{ S_IFDIR | 01777, "drwxrwxrwt " },
		{ S_IFDIR | 01776, "drwxrwxrwT " },
		{ S_IFREG | 07777, "-rwsrwsrwt " },
		{ S_IFREG | 07000, "---S--S--T " },
		{ S_IFREG | 06111, "---s--s--x " },
	};
	/* clang-format on */
	char *buf;

	(void)state;
	buf = malloc(12);
	assert_non_null(buf);
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		attrs_strmode(cases[i].mode, buf);
		assert_string_equal(buf, cases[i].want);
	}
	free(buf);
}

/* One triplet's execute column as BSD strmode writes it. */
static char
exec_char(mode_t mode, mode_t x, mode_t special, char set, char unset)
{
	if (mode & special)
		return (mode & x) ? set : unset;
	return (mode & x) ? 'x' : '-';
}

static void
test_attrs_strmode_every_permission(void **state)
{
	char want[12], *buf;

	(void)state;
	buf = malloc(12);
	assert_non_null(buf);
	for (mode_t m = 0; m <= 07777; m++) {
		want[0] = '-';
		want[1] = (m & S_IRUSR) ? 'r' : '-';
		want[2] = (m & S_IWUSR) ? 'w' : '-';
		want[3] = exec_char(m, S_IXUSR, S_ISUID, 's', 'S');
		want[4] = (m & S_IRGRP) ? 'r' : '-';
		want[5] = (m & S_IWGRP) ? 'w' : '-';
		want[6] = exec_char(m, S_IXGRP, S_ISGID, 's', 'S');
		want[7] = (m & S_IROTH) ? 'r' : '-';
		want[8] = (m & S_IWOTH) ? 'w' : '-';
		want[9] = exec_char(m, S_IXOTH, S_ISVTX, 't', 'T');
		want[10] = ' ';
		want[11] = '\0';
		attrs_strmode(S_IFREG | m, buf);
		if (strcmp(buf, want) != 0) {
			print_error("mode %04o: \"%s\", want \"%s\"\n",
			    (unsigned)m, buf, want);
			fail();
		}
	}
	free(buf);
}

static void
test_attrs_longname_recent_file(void **state)
{
	struct stat st;

	(void)state;
	file_stat(&st);
	assert_longname("a.txt", &st, NOW,
	    "-rw-r--r--    1 root     root            6 Nov 29 20:53 a.txt");
	assert_longname("a.txt", &st, NOW + 3600,
	    "-rw-r--r--    1 root     root            6 Nov 29 20:53 a.txt");
}

static void
test_attrs_longname_day_below_ten_is_padded(void **state)
{
	struct stat st;

	(void)state;
	file_stat(&st);
	st.st_mtime = 1709626020;	/* 2024-03-05 08:07 */
	assert_longname("b", &st, st.st_mtime + 60,
	    "-rw-r--r--    1 root     root            6 Mar  5 08:07 b");
	assert_longname("b", &st, NOW,
	    "-rw-r--r--    1 root     root            6 Mar  5  2024 b");
}

static void
test_attrs_longname_half_year_boundary(void **state)
{
	struct stat st;

	(void)state;
	file_stat(&st);
	/* Exactly half a year old: the year form. */
	st.st_mtime = NOW - HALF_YEAR;
	assert_longname("old", &st, NOW,
	    "-rw-r--r--    1 root     root            6 May 31  2024 old");
	/* One second younger: the time form. */
	st.st_mtime = NOW - HALF_YEAR + 1;
	assert_longname("new", &st, NOW,
	    "-rw-r--r--    1 root     root            6 May 31 08:53 new");
}

static void
test_attrs_longname_future_uses_year(void **state)
{
	struct stat st;

	(void)state;
	file_stat(&st);
	st.st_mtime = NOW + 1;
	assert_longname("f", &st, NOW,
	    "-rw-r--r--    1 root     root            6 Nov 29  2024 f");
}

static void
test_attrs_longname_unknown_ids_are_numbers(void **state)
{
	struct stat st;

	(void)state;
	file_stat(&st);
	st.st_uid = 4000000000U;
	st.st_gid = 4000000001U;
	/* Ten digits: wider than the 8 columns, which widen with them. */
	assert_longname("a.txt", &st, NOW,
	    "-rw-r--r--    1 4000000000 4000000001        6 Nov 29 20:53 "
	    "a.txt");
	st.st_uid = 12345;
	assert_longname("a.txt", &st, NOW,
	    "-rw-r--r--    1 12345    4000000001        6 Nov 29 20:53 "
	    "a.txt");
	assert_null(attrs_user_known(4000000000U));
	assert_null(attrs_group_known(4000000001U));
	assert_string_equal(attrs_user_name(4000000000U), "4000000000");
}

static void
test_attrs_longname_long_user_name_widens_column(void **state)
{
	char want[LONGNAME_MAX], name[NAME_LEN];
	struct passwd *pw;
	struct stat st;
	uid_t uid = 0;
	int found = 0;

	(void)state;
	/* Set up: any user of this system with a name over 8 characters. */
	setpwent();
	while ((pw = getpwent()) != NULL) {
		if (strlen(pw->pw_name) > 8 &&
		    strlen(pw->pw_name) < sizeof name) {
			uid = pw->pw_uid;
			found = 1;
			break;
		}
	}
	endpwent();
	if (!found)
		skip();
	/* The name the system gives for the uid, which may be another's. */
	pw = getpwuid(uid);
	assert_non_null(pw);
	(void)snprintf(name, sizeof name, "%s", pw->pw_name);
	if (strlen(name) <= 8)
		skip();
	file_stat(&st);
	st.st_uid = uid;
	(void)snprintf(want, sizeof want,
	    "-rw-r--r--    1 %s root            6 Nov 29 20:53 a.txt", name);
	assert_longname("a.txt", &st, NOW, want);
	assert_string_equal(attrs_user_known(uid), name);
}

static void
test_attrs_longname_wide_links_and_size(void **state)
{
	struct stat st;

	(void)state;
	file_stat(&st);
	st.st_mode = S_IFDIR | 0755;
	st.st_nlink = 12345;
	st.st_size = 1234567890123LL;
	assert_longname("d", &st, NOW,
	    "drwxr-xr-x  12345 root     root     1234567890123 Nov 29 20:53 d");
}

static void
test_attrs_longname_unrepresentable_time_is_empty(void **state)
{
	struct stat st;

	(void)state;
	file_stat(&st);
	/* localtime_r() fails: the date is left out, as OpenSSH. */
	st.st_mtime = (time_t)INT64_MAX;
	assert_longname("x", &st, NOW,
	    "-rw-r--r--    1 root     root            6  x");
}

static void
test_attrs_longname_long_name_is_cut(void **state)
{
	struct stat st;
	char *name, *buf;

	(void)state;
	file_stat(&st);
	name = malloc(2 * LONGNAME_MAX);
	buf = malloc(LONGNAME_MAX);
	assert_non_null(name);
	assert_non_null(buf);
	memset(name, 'n', 2 * LONGNAME_MAX - 1);
	name[2 * LONGNAME_MAX - 1] = '\0';
	attrs_longname(buf, name, &st, NOW);
	assert_int_equal(strlen(buf), LONGNAME_MAX - 1);
	assert_int_equal(strncmp(buf, "-rw-r--r--    1 root", 20), 0);
	free(name);
	free(buf);
}

static void
test_attrs_longname_date_cache_follows_mtime_and_now(void **state)
{
	struct stat a, b;

	(void)state;
	file_stat(&a);
	file_stat(&b);
	b.st_mtime = 1709626020;	/* 2024-03-05 08:07 */
	/* Alternate entries, and the same entry with another "now". */
	assert_longname("a", &a, NOW,
	    "-rw-r--r--    1 root     root            6 Nov 29 20:53 a");
	assert_longname("b", &b, NOW,
	    "-rw-r--r--    1 root     root            6 Mar  5  2024 b");
	assert_longname("a", &a, NOW,
	    "-rw-r--r--    1 root     root            6 Nov 29 20:53 a");
	assert_longname("a", &a, NOW + HALF_YEAR,
	    "-rw-r--r--    1 root     root            6 Nov 29  2024 a");
	assert_longname("a", &a, NOW,
	    "-rw-r--r--    1 root     root            6 Nov 29 20:53 a");
	assert_longname("b", &b, b.st_mtime,
	    "-rw-r--r--    1 root     root            6 Mar  5 08:07 b");
}

/* The name of an id as OpenSSH's ls_file() finds it, or its number. */
static void
ref_name(char *out, size_t size, uid_t id, int is_group)
{
	struct passwd *pw;
	struct group *gr;
	int n;

	if (is_group && (gr = getgrgid((gid_t)id)) != NULL)
		n = snprintf(out, size, "%s", gr->gr_name);
	else if (!is_group && (pw = getpwuid(id)) != NULL)
		n = snprintf(out, size, "%s", pw->pw_name);
	else
		n = snprintf(out, size, "%u", (unsigned)id);
	assert_true(n >= 0 && (size_t)n < size);
}

/*
 * The long name exactly as OpenSSH's ls_file() makes it, with snprintf(3)
 * and strftime(3): the reference for the hand-made one.
 */
static void
ref_longname(char *buf, const char *name, const struct stat *st, time_t now,
    const char *user, const char *group)
{
	char mode[12], tbuf[64];
	struct tm tm;
	size_t sz = 0;
	int ulen, glen;

	attrs_strmode(st->st_mode, mode);
	if (localtime_r(&st->st_mtime, &tm) != NULL) {
		if (now - HALF_YEAR < st->st_mtime && now >= st->st_mtime)
			sz = strftime(tbuf, sizeof tbuf, "%b %e %H:%M", &tm);
		else
			sz = strftime(tbuf, sizeof tbuf, "%b %e  %Y", &tm);
	}
	if (sz == 0)
		tbuf[0] = '\0';
	ulen = strlen(user) > 8 ? (int)strlen(user) : 8;
	glen = strlen(group) > 8 ? (int)strlen(group) : 8;
	(void)snprintf(buf, LONGNAME_MAX, "%s %3u %-*s %-*s %8llu %s %s", mode,
	    (unsigned)st->st_nlink, ulen, user, glen, group,
	    (unsigned long long)st->st_size, tbuf, name);
}

static uint64_t rng_state = 1;

static uint64_t
rng_next(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dULL;
}

static void
test_attrs_longname_matches_snprintf_strftime(void **state)
{
	/* Ids in distinct slots of the name caches. */
	static const uid_t ids[] = { 0, 1, 12345, 4000000002U };
	static const time_t edges[] = { 0, -1, NOW, NOW + 1, NOW - HALF_YEAR,
		NOW - HALF_YEAR + 1, 253402300799LL, 253402300800LL,
		-62135596800LL, -62135596801LL, -100000000000LL };
	char want[LONGNAME_MAX], *got, name[64];
	char users[4][256], groups[4][256];
	struct stat st;
	size_t u, g;
	time_t now;

	(void)state;
	got = malloc(LONGNAME_MAX);
	assert_non_null(got);
	for (size_t i = 0; i < 4; i++) {
		ref_name(users[i], sizeof users[i], ids[i], 0);
		ref_name(groups[i], sizeof groups[i], ids[i], 1);
	}
	for (int i = 0; i < 20000; i++) {
		/* Set up: a random entry; times around now, or anywhere. */
		memset(&st, 0, sizeof st);
		st.st_mode = (mode_t)(rng_next() & (S_IFMT | 07777));
		st.st_nlink = (nlink_t)(rng_next() % (i % 2 ? 5 : 100000000));
		u = rng_next() % 4;
		g = rng_next() % 4;
		st.st_uid = ids[u];
		st.st_gid = (gid_t)ids[g];
		st.st_size = (off_t)(rng_next() >> (rng_next() % 64));
		now = NOW + (time_t)(rng_next() % 100000000) - 50000000;
		if (i < (int)(sizeof edges / sizeof edges[0]))
			st.st_mtime = edges[i];
		else if (i % 3 == 0)
			st.st_mtime = (time_t)((int64_t)rng_next() >> 24);
		else
			st.st_mtime = now + (time_t)(rng_next() % 40000000) -
			    30000000;
		(void)snprintf(name, sizeof name, "f%d", i);
		/* Act. */
		ref_longname(want, name, &st, now, users[u], groups[g]);
		attrs_longname(got, name, &st, now);
		/* Check. */
		if (strcmp(got, want) != 0) {
			print_error("mtime %lld now %lld:\n\"%s\", want\n"
			    "\"%s\"\n", (long long)st.st_mtime, (long long)now,
			    got, want);
			fail();
		}
	}
	free(got);
}

static void
test_attrs_user_name_root(void **state)
{
	(void)state;
	assert_string_equal(attrs_user_name(0), "root");
	assert_string_equal(attrs_user_known(0), "root");
	assert_string_equal(attrs_group_name(0), "root");
	assert_string_equal(attrs_group_known(0), "root");
	/* A uid sharing root's cache slot does not take its name. */
	assert_int_equal(4000000000U % NAME_CACHE, 0);
	assert_string_equal(attrs_user_name(4000000000U), "4000000000");
	assert_string_equal(attrs_user_name(0), "root");
	assert_string_equal(attrs_user_name(4000000000U), "4000000000");
}

int
main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_attrs_from_stat_all_fields),
		cmocka_unit_test(test_attrs_strmode_file_types),
		cmocka_unit_test(test_attrs_strmode_setid_and_sticky),
		cmocka_unit_test(test_attrs_strmode_every_permission),
		cmocka_unit_test(test_attrs_longname_recent_file),
		cmocka_unit_test(test_attrs_longname_day_below_ten_is_padded),
		cmocka_unit_test(test_attrs_longname_half_year_boundary),
		cmocka_unit_test(test_attrs_longname_future_uses_year),
		cmocka_unit_test(test_attrs_longname_unknown_ids_are_numbers),
		cmocka_unit_test(
		    test_attrs_longname_long_user_name_widens_column),
		cmocka_unit_test(test_attrs_longname_wide_links_and_size),
		cmocka_unit_test(
		    test_attrs_longname_unrepresentable_time_is_empty),
		cmocka_unit_test(test_attrs_longname_long_name_is_cut),
		cmocka_unit_test(
		    test_attrs_longname_date_cache_follows_mtime_and_now),
		cmocka_unit_test(test_attrs_longname_matches_snprintf_strftime),
		cmocka_unit_test(test_attrs_user_name_root),
	};

	if (unit_args(argc, argv) != 0)
		return 2;
	return cmocka_run_group_tests(tests, setup_utc, NULL);
}
