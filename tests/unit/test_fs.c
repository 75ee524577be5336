/*
 * Unit tests of fs.c unconfined, as the server runs without -r:
 * fs_realpath() against OpenSSH's sftp_realpath(), and the guard of the
 * transfer log (fs_protect()), each test in a fresh temporary directory
 * that it creates and removes.
 */

/* fs.c and sys-gnu.c are built with _GNU_SOURCE: before the first header. */
#define _GNU_SOURCE

#include <sys/types.h>
#include <sys/stat.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* cmocka 1.1.5 needs the four headers above it. */
#include <cmocka.h>

#include "../../fs.c"
#include "../../log.c"
#include "../../sys-gnu.c"
#include "unit.h"

/* fs_realpath(in) must succeed with dir + "/" + rel (or dir if rel is ""). */
static void
assert_resolves(const struct tmpdir *t, const char *in, const char *rel)
{
	char want[PATH_MAX], *got;

	got = malloc(PATH_MAX);
	assert_non_null(got);
	join(want, sizeof want, t->path, *rel == '\0' ? "" : "/");
	join(want + strlen(want), sizeof want - strlen(want), rel, "");
	if (fs_realpath(in, got) != 0) {
		print_error("\"%s\": %s, want \"%s\"\n", in, strerror(errno),
		    want);
		fail();
	}
	if (strcmp(got, want) != 0) {
		print_error("\"%s\": \"%s\", want \"%s\"\n", in, got, want);
		fail();
	}
	free(got);
}

static void
assert_resolve_fails(const char *in, int want)
{
	char *got;
	int r, e;

	got = malloc(PATH_MAX);
	assert_non_null(got);
	errno = 0;
	r = fs_realpath(in, got);
	e = errno;
	if (r != -1 || e != want) {
		print_error("\"%s\": %d (%s), want -1 (%s)\n", in, r,
		    strerror(e), strerror(want));
		fail();
	}
	free(got);
}

static void
test_fs_realpath_root(void **state)
{
	static const char *const in[] = { "/", "//", "/.", "/..", "/../..",
		"/./.././/" };
	char *got;

	(void)state;
	got = malloc(PATH_MAX);
	assert_non_null(got);
	for (size_t i = 0; i < sizeof in / sizeof in[0]; i++) {
		assert_int_equal(fs_realpath(in[i], got), 0);
		assert_string_equal(got, "/");
	}
	free(got);
}

static void
test_fs_realpath_dotdot_with_trailing_slash(void **state)
{
	struct tmpdir *t = *state;
	char in[PATH_MAX], *got;
	struct stat st;

	got = malloc(PATH_MAX);
	assert_non_null(got);
	/* "/tmp/../", where /tmp is a directory and not a link. */
	if (lstat("/tmp", &st) == 0 && S_ISDIR(st.st_mode)) {
		assert_int_equal(fs_realpath("/tmp/../", got), 0);
		assert_string_equal(got, "/");
	}
	assert_int_equal(mkdir("sub", 0755), 0);
	join(in, sizeof in, t->path, "/sub/../");
	assert_resolves(t, in, "");
	free(got);
}

static void
test_fs_realpath_relative_against_cwd(void **state)
{
	struct tmpdir *t = *state;

	make_file("file");
	assert_int_equal(mkdir("sub", 0755), 0);
	assert_resolves(t, "file", "file");
	assert_resolves(t, ".", "");
	assert_resolves(t, "./", "");
	assert_resolves(t, "sub", "sub");
	assert_resolves(t, "./sub/", "sub");
	assert_resolves(t, "sub//./", "sub");
	assert_resolves(t, "sub/./../file", "file");
	assert_resolves(t, "sub/..", "");
}

static void
test_fs_realpath_missing_last_component(void **state)
{
	struct tmpdir *t = *state;
	char in[PATH_MAX];

	assert_int_equal(mkdir("sub", 0755), 0);
	assert_resolves(t, "missing", "missing");
	assert_resolves(t, "sub/missing", "sub/missing");
	join(in, sizeof in, t->path, "/missing");
	assert_resolves(t, in, "missing");
}

static void
test_fs_realpath_missing_middle_is_enoent(void **state)
{
	(void)state;
	assert_resolve_fails("missing/x", ENOENT);
	assert_resolve_fails("missing/x/y", ENOENT);
	assert_resolve_fails("missing/..", ENOENT);
}

static void
test_fs_realpath_missing_with_slash_is_enoent(void **state)
{
	(void)state;
	assert_resolve_fails("missing/", ENOENT);
}

static void
test_fs_realpath_file_as_directory_is_enotdir(void **state)
{
	(void)state;
	make_file("file");
	assert_resolve_fails("file/x", ENOTDIR);
	assert_resolve_fails("file/x/y", ENOTDIR);
}

static void
test_fs_realpath_file_then_slash_dot_dotdot_accepted(void **state)
{
	struct tmpdir *t = *state;

	/* As OpenSSH's sftp_realpath(), which never checks for a directory. */
	make_file("file");
	assert_resolves(t, "file/", "file");
	assert_resolves(t, "file/.", "file");
	assert_resolves(t, "file/..", "");
	assert_resolves(t, "file/../x", "x");
}

static void
test_fs_realpath_symlink_loop_is_eloop(void **state)
{
	(void)state;
	make_link("loop2", "loop1");
	make_link("loop1", "loop2");
	make_link("self", "self");
	assert_resolve_fails("loop1", ELOOP);
	assert_resolve_fails("loop2/x", ELOOP);
	assert_resolve_fails("self", ELOOP);
}

static void
test_fs_realpath_chain_of_links(void **state)
{
	struct tmpdir *t = *state;
	char target[PATH_MAX];

	/* Set up: l1 -> l2 -> l3 -> sub, relative and absolute links. */
	assert_int_equal(mkdir("sub", 0755), 0);
	make_file("sub/file");
	make_file("file");
	make_link("l2", "l1");
	make_link("./l3", "l2");
	make_link("sub", "l3");
	join(target, sizeof target, t->path, "/sub");
	make_link(target, "abs");
	make_link("sub/../file", "up");
	make_link("nothere", "dangling");
	make_link("../l1", "sub/back");
	/* Check. */
	assert_resolves(t, "l1", "sub");
	assert_resolves(t, "l1/", "sub");
	assert_resolves(t, "l1/file", "sub/file");
	assert_resolves(t, "l1/missing", "sub/missing");
	assert_resolves(t, "l1/..", "");
	assert_resolves(t, "abs", "sub");
	assert_resolves(t, "abs/file", "sub/file");
	assert_resolves(t, "up", "file");
	assert_resolves(t, "sub/back/file", "sub/file");
	/* A dangling link is fine last, not in the middle. */
	assert_resolves(t, "dangling", "nothere");
	assert_resolve_fails("dangling/x", ENOENT);
}

/* A chain c0 -> c1 -> ... -> c<n-1> -> sub of n links. */
static void
make_chain(int n)
{
	char name[32], target[32];

	for (int i = 0; i < n; i++) {
		(void)snprintf(name, sizeof name, "c%d", i);
		if (i == n - 1)
			(void)snprintf(target, sizeof target, "sub");
		else
			(void)snprintf(target, sizeof target, "c%d", i + 1);
		make_link(target, name);
	}
}

static void
test_fs_realpath_33_links_resolve(void **state)
{
	struct tmpdir *t = *state;

	/* As OpenSSH's sftp_realpath(): SYMLOOP_MAX (32) + 1 links. */
	assert_int_equal(mkdir("sub", 0755), 0);
	make_chain(33);
	assert_resolves(t, "c0", "sub");
	assert_resolves(t, "c0/x", "sub/x");
}

static void
test_fs_realpath_34_links_is_eloop(void **state)
{
	(void)state;
	assert_int_equal(mkdir("sub", 0755), 0);
	make_chain(34);
	assert_resolve_fails("c0", ELOOP);
	assert_resolve_fails("c0/x", ELOOP);
}

static void
test_fs_realpath_too_long_is_enametoolong(void **state)
{
	char *in;

	(void)state;
	in = malloc(PATH_MAX + 1);
	assert_non_null(in);
	/* The input itself does not fit. */
	memset(in, 'a', PATH_MAX);
	in[PATH_MAX] = '\0';
	assert_resolve_fails(in, ENAMETOOLONG);
	/* One component that does not fit behind "/". */
	in[0] = '/';
	in[PATH_MAX - 1] = '\0';
	assert_resolve_fails(in, ENAMETOOLONG);
	free(in);
}

/* A call on a guarded file: -1 with EACCES. */
#define assert_refused(call) do {					\
	errno = 0;							\
	assert_int_equal((call), -1);					\
	assert_int_equal(errno, EACCES);				\
} while (0)

/* fs_open() for writing must succeed: the file is not the log's. */
static void
assert_opens(const char *path)
{
	int fd = fs_open(path, O_WRONLY | O_APPEND, 0);

	if (fd == -1) {
		print_error("\"%s\": %s, want it opened\n", path,
		    strerror(errno));
		fail();
	}
	close(fd);
}

/*
 * The guard's rule, exactly: the log as opened, the file at its path now,
 * and the family (the log's name, or it and then '.' or '-', in its
 * directory), by name and by inode; nothing else.  Run last: the guard
 * stays for the rest of the process.
 */
static void
test_fs_protect_guards_the_log_family_and_nothing_else(void **state)
{
	int fd;

	(void)state;
	assert_int_equal(mkdir("logs", 0755), 0);
	make_file("logs/x.log");
	fd = open("logs/x.log", O_WRONLY | O_APPEND);
	assert_true(fd >= 0);
	assert_int_equal(fs_protect("logs/x.log", fd), 0);
	/* A rotation: the opened file renamed, a new one at the path. */
	assert_int_equal(rename("logs/x.log", "logs/x.log.1"), 0);
	make_file("logs/x.log");
	make_file("logs/x.log-20260101");
	make_file("logs/x.logs");
	make_file("logs/x_log");
	make_file("logs/y.log");
	make_file("x.log");	/* the same name in another directory */
	assert_int_equal(link("logs/x.log-20260101", "hl"), 0);
	make_link("logs/x.log", "sl");
	assert_refused(fs_open("logs/x.log", O_WRONLY | O_APPEND, 0));
	assert_refused(fs_open("logs/x.log.1", O_RDONLY, 0));
	assert_refused(fs_open("logs/x.log-20260101", O_WRONLY, 0));
	assert_refused(fs_open("hl", O_WRONLY | O_TRUNC, 0));
	assert_refused(fs_open("sl", O_WRONLY | O_APPEND, 0));
	assert_refused(fs_truncate("hl", 0));
	assert_refused(fs_chmod("sl", 0666, 1));
	assert_refused(fs_unlink("logs/x.log.1"));
	assert_refused(fs_unlink("hl"));
	assert_refused(fs_rename("x.log", "logs/x.log.2", 0));
	assert_refused(fs_link("x.log", "logs/x.log-new"));
	assert_refused(fs_mkdir("logs/x.log.3", 0755));
	assert_refused(fs_symlink("/", "logs/x.log-link"));
	/* Not of the family: served as ever. */
	assert_opens("logs/x.logs");
	assert_opens("logs/x_log");
	assert_opens("logs/y.log");
	assert_opens("x.log");
	assert_int_equal(fs_mkdir("logs/x.logd", 0755), 0);
	assert_int_equal(fs_rename("logs/y.log", "logs/x.log_y", 0), 0);
	assert_int_equal(fs_unlink("sl"), 0);	/* the link itself */
	close(fd);
}

int
main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fs_realpath_root),
		unit_test_in_tmpdir(
		    test_fs_realpath_dotdot_with_trailing_slash),
		unit_test_in_tmpdir(test_fs_realpath_relative_against_cwd),
		unit_test_in_tmpdir(test_fs_realpath_missing_last_component),
		unit_test_in_tmpdir(test_fs_realpath_missing_middle_is_enoent),
		unit_test_in_tmpdir(
		    test_fs_realpath_missing_with_slash_is_enoent),
		unit_test_in_tmpdir(
		    test_fs_realpath_file_as_directory_is_enotdir),
		unit_test_in_tmpdir(
		    test_fs_realpath_file_then_slash_dot_dotdot_accepted),
		unit_test_in_tmpdir(test_fs_realpath_symlink_loop_is_eloop),
		unit_test_in_tmpdir(test_fs_realpath_chain_of_links),
		unit_test_in_tmpdir(test_fs_realpath_33_links_resolve),
		unit_test_in_tmpdir(test_fs_realpath_34_links_is_eloop),
		cmocka_unit_test(test_fs_realpath_too_long_is_enametoolong),
		unit_test_in_tmpdir(
		    test_fs_protect_guards_the_log_family_and_nothing_else),
	};

	if (unit_args(argc, argv) != 0)
		return 2;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
