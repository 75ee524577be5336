/*
 * Unit tests of the start-up check of the -r root (rootcheck.c): every
 * name on the way to the root, symlinks followed, must be one that only
 * root can replace, as sshd demands of ChrootDirectory.  The trees are made
 * in a temporary directory; what needs files of another owner runs as root
 * only, and is skipped otherwise.
 */
/* sys-gnu.c is built with _GNU_SOURCE: before the first header. */
#define _GNU_SOURCE

#include <sys/types.h>
#include <sys/stat.h>

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

#include <cmocka.h>

#include "../../rootcheck.c"
#include "../../sys-gnu.c"
#include "unit.h"

#define NOBODY	65534

/* root_check(path) must pass. */
static void
assert_safe(const char *path)
{
	char bad[PATH_MAX];

	if (root_check(path, bad, sizeof bad) != 0) {
		print_error("\"%s\": %s at \"%s\", want it safe\n", path,
		    strerror(errno), bad);
		fail();
	}
	assert_string_equal(bad, "");
}

/* root_check(path) must fail with EPERM naming t->path + "/" + rel. */
static void
assert_unsafe(const struct tmpdir *t, const char *path, const char *rel)
{
	char bad[PATH_MAX], want[PATH_MAX];

	join(want, sizeof want, t->path, "/");
	join(want + strlen(want), sizeof want - strlen(want), rel, "");
	errno = 0;
	assert_int_equal(root_check(path, bad, sizeof bad), -1);
	assert_int_equal(errno, EPERM);
	assert_string_equal(bad, want);
}

/* The trees below need the temporary directory to be root's. */
static void
need_root(void)
{
	if (geteuid() != 0)
		skip();
}

static void
test_root_check_slash_is_safe(void **state)
{
	(void)state;
	assert_safe("/");
	assert_safe("//.");
}

static void
test_root_check_root_owned_tree_is_safe(void **state)
{
	const struct tmpdir *t = *state;
	char p[PATH_MAX];

	need_root();
	assert_int_equal(mkdir("a", 0755), 0);
	assert_int_equal(mkdir("a/b", 0700), 0);
	join(p, sizeof p, t->path, "/a/b");
	assert_safe(p);
	/* Relative to the current directory, with "." and "..". */
	assert_safe("a/./b/../b");
}

static void
test_root_check_name_in_a_writable_directory_is_unsafe(void **state)
{
	const struct tmpdir *t = *state;
	char p[PATH_MAX];

	need_root();
	assert_int_equal(mkdir("w", 0755), 0);
	assert_int_equal(chmod("w", 0777), 0);
	assert_int_equal(mkdir("w/x", 0755), 0);
	join(p, sizeof p, t->path, "/w/x");
	/* w itself is root's in a safe directory; x, in w, is not safe. */
	assert_unsafe(t, p, "w/x");
	assert_int_equal(chmod("w", 0775), 0);
	assert_unsafe(t, p, "w/x");	/* the group may write */
	assert_int_equal(chmod("w", 0755), 0);
	assert_safe(p);
}

static void
test_root_check_sticky_directory_wants_root_owned_names(void **state)
{
	const struct tmpdir *t = *state;
	char p[PATH_MAX];

	need_root();
	assert_int_equal(mkdir("s", 0755), 0);
	assert_int_equal(chmod("s", 01777), 0);
	assert_int_equal(mkdir("s/r", 0755), 0);
	assert_int_equal(mkdir("s/u", 0755), 0);
	assert_int_equal(chown("s/u", NOBODY, NOBODY), 0);
	join(p, sizeof p, t->path, "/s/r");
	assert_safe(p);
	join(p, sizeof p, t->path, "/s/u");
	assert_unsafe(t, p, "s/u");
}

static void
test_root_check_directory_of_another_owner_is_unsafe(void **state)
{
	const struct tmpdir *t = *state;
	char p[PATH_MAX];

	need_root();
	assert_int_equal(mkdir("n", 0755), 0);
	assert_int_equal(mkdir("n/y", 0755), 0);
	assert_int_equal(chown("n", NOBODY, NOBODY), 0);
	join(p, sizeof p, t->path, "/n/y");
	assert_unsafe(t, p, "n/y");
	/* The root itself may be anyone's: only names in it are checked. */
	join(p, sizeof p, t->path, "/n");
	assert_safe(p);
}

static void
test_root_check_follows_symlinks_to_where_they_lead(void **state)
{
	const struct tmpdir *t = *state;
	char p[PATH_MAX];

	need_root();
	assert_int_equal(mkdir("a", 0755), 0);
	assert_int_equal(mkdir("w", 0777), 0);
	assert_int_equal(chmod("w", 0777), 0);
	assert_int_equal(mkdir("w/x", 0755), 0);
	make_link("a", "to-a");
	make_link("w/x", "to-x");
	join(p, sizeof p, t->path, "/to-a");
	assert_safe(p);
	join(p, sizeof p, t->path, "/to-x");
	assert_unsafe(t, p, "w/x");
	/* An absolute link starts again from "/". */
	join(p, sizeof p, t->path, "/w/x");
	make_link(p, "abs-x");
	join(p, sizeof p, t->path, "/abs-x");
	assert_unsafe(t, p, "w/x");
	/* A link of another owner is a name that owner can change. */
	assert_int_equal(lchown("to-a", NOBODY, NOBODY), 0);
	assert_int_equal(chmod(".", 01777), 0);
	join(p, sizeof p, t->path, "/to-a");
	assert_unsafe(t, p, "to-a");
}

static void
test_root_check_path_that_cannot_be_walked(void **state)
{
	const struct tmpdir *t = *state;
	char p[PATH_MAX], bad[PATH_MAX];

	need_root();
	join(p, sizeof p, t->path, "/missing/x");
	assert_int_equal(root_check(p, bad, sizeof bad), -1);
	assert_int_equal(errno, ENOENT);
	make_link("loop", "loop");
	join(p, sizeof p, t->path, "/loop");
	assert_int_equal(root_check(p, bad, sizeof bad), -1);
	assert_int_equal(errno, ELOOP);
	make_file("f");
	join(p, sizeof p, t->path, "/f/x");
	assert_int_equal(root_check(p, bad, sizeof bad), -1);
	assert_int_equal(errno, ENOTDIR);
}

int
main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_root_check_slash_is_safe),
		unit_test_in_tmpdir(test_root_check_root_owned_tree_is_safe),
		unit_test_in_tmpdir(
		    test_root_check_name_in_a_writable_directory_is_unsafe),
		unit_test_in_tmpdir(
		    test_root_check_sticky_directory_wants_root_owned_names),
		unit_test_in_tmpdir(
		    test_root_check_directory_of_another_owner_is_unsafe),
		unit_test_in_tmpdir(
		    test_root_check_follows_symlinks_to_where_they_lead),
		unit_test_in_tmpdir(test_root_check_path_that_cannot_be_walked),
	};

	if (unit_args(argc, argv) == -1)
		return 2;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
