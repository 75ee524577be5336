/*
 * Unit tests of path.c: the ~ and % expansions of -d, -r and
 * expand-path@openssh.com.
 */
#include <sys/types.h>

#include <errno.h>
#include <limits.h>
#include <pwd.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* cmocka 1.1.5 needs the four headers above it. */
#include <cmocka.h>

#include "../../path.c"
#include "unit.h"

/* path_tilde() */

static void
assert_tilde(const char *in, const char *home, const char *want)
{
	char out[PATH_MAX];

	if (path_tilde(in, home, out, sizeof out) != 0) {
		print_error("\"%s\": %s\n", in, strerror(errno));
		fail();
	}
	assert_string_equal(out, want);
}

static void
test_path_tilde_home(void **state)
{
	(void)state;
	/* As OpenSSH's tilde_expand(): the home directory with a slash. */
	assert_tilde("~", "/home/u", "/home/u/");
	assert_tilde("~/", "/home/u", "/home/u/");
	assert_tilde("~/x", "/home/u", "/home/u/x");
	assert_tilde("~//x/y", "/home/u", "/home/u/x/y");
	assert_tilde("~/x", "/home/u/", "/home/u/x");
	assert_tilde("~/x", "/", "/x");
}

static void
test_path_tilde_other_user(void **state)
{
	char want[PATH_MAX], home[PATH_MAX];
	struct passwd *pw;

	(void)state;
	/* root's home, "/root" on Linux. */
	pw = getpwnam("root");
	assert_non_null(pw);
	join(home, sizeof home, pw->pw_dir, "");
	join(want, sizeof want, home, "/x");
	assert_tilde("~root/x", "/home/u", want);
	assert_tilde("~root//x", "/home/u", want);
	join(want, sizeof want, home, "/");
	assert_tilde("~root", "/home/u", want);
	assert_tilde("~root/", "/home/u", want);
}

static void
test_path_tilde_unknown_user_is_enoent(void **state)
{
	char out[PATH_MAX];

	(void)state;
	errno = 0;
	assert_int_equal(path_tilde("~nosuchuser/x", "/home/u", out,
	    sizeof out), -1);
	assert_int_equal(errno, ENOENT);
	errno = 0;
	assert_int_equal(path_tilde("~nosuchuser", "/home/u", out,
	    sizeof out), -1);
	assert_int_equal(errno, ENOENT);
}

static void
test_path_tilde_no_tilde_is_copied(void **state)
{
	(void)state;
	assert_tilde("/a/~b", "/home/u", "/a/~b");
	assert_tilde("x~", "/home/u", "x~");
	assert_tilde("", "/home/u", "");
}

static void
test_path_tilde_too_long_is_enametoolong(void **state)
{
	char out[9];

	(void)state;
	/* "/home/u/" takes 8 bytes and the NUL: it just fits. */
	assert_int_equal(path_tilde("~", "/home/u", out, sizeof out), 0);
	assert_string_equal(out, "/home/u/");
	errno = 0;
	assert_int_equal(path_tilde("~/x", "/home/u", out, sizeof out), -1);
	assert_int_equal(errno, ENAMETOOLONG);
	assert_int_equal(path_tilde("12345678", "/h", out, sizeof out), 0);
	errno = 0;
	assert_int_equal(path_tilde("123456789", "/h", out, sizeof out), -1);
	assert_int_equal(errno, ENAMETOOLONG);
}

/* path_percent() */

static void
test_path_percent_every_escape(void **state)
{
	char out[PATH_MAX];

	(void)state;
	assert_int_equal(path_percent("%d/%u/%U/%%", "/home/u", "u", 1000,
	    out, sizeof out), 0);
	assert_string_equal(out, "/home/u/u/1000/%");
	assert_int_equal(path_percent("/srv/%u%%%U", "/h", "bob", 0, out,
	    sizeof out), 0);
	assert_string_equal(out, "/srv/bob%0");
	assert_int_equal(path_percent("plain", "/h", "u", 1, out, sizeof out),
	    0);
	assert_string_equal(out, "plain");
	assert_int_equal(path_percent("", "/h", "u", 1, out, sizeof out), 0);
	assert_string_equal(out, "");
	assert_int_equal(path_percent("%U", "/h", "u", 4294967295UL, out,
	    sizeof out), 0);
	assert_string_equal(out, "4294967295");
}

static void
test_path_percent_unknown_escape_is_einval(void **state)
{
	static const char *const in[] = { "%x", "/a/%x/b", "%D", "%-", "%/" };
	char out[PATH_MAX];

	(void)state;
	for (size_t i = 0; i < sizeof in / sizeof in[0]; i++) {
		errno = 0;
		assert_int_equal(path_percent(in[i], "/h", "u", 1, out,
		    sizeof out), -1);
		assert_int_equal(errno, EINVAL);
	}
}

static void
test_path_percent_lone_percent_at_end_is_einval(void **state)
{
	static const char *const in[] = { "%", "/a/%", "%%%" };
	char out[PATH_MAX];

	(void)state;
	for (size_t i = 0; i < sizeof in / sizeof in[0]; i++) {
		errno = 0;
		assert_int_equal(path_percent(in[i], "/h", "u", 1, out,
		    sizeof out), -1);
		assert_int_equal(errno, EINVAL);
	}
}

static void
test_path_percent_too_long_is_enametoolong(void **state)
{
	char *out;

	(void)state;
	/* Exact-size buffers: n - 1 characters fit, n do not. */
	out = malloc(4);
	assert_non_null(out);
	assert_int_equal(path_percent("abc", "/h", "u", 1, out, 4), 0);
	assert_string_equal(out, "abc");
	errno = 0;
	assert_int_equal(path_percent("abcd", "/h", "u", 1, out, 4), -1);
	assert_int_equal(errno, ENAMETOOLONG);
	free(out);
	out = malloc(8);
	assert_non_null(out);
	assert_int_equal(path_percent("%d", "/home/u", "u", 1, out, 8), 0);
	assert_string_equal(out, "/home/u");
	errno = 0;
	assert_int_equal(path_percent("%dx", "/home/u", "u", 1, out, 8), -1);
	assert_int_equal(errno, ENAMETOOLONG);
	errno = 0;
	assert_int_equal(path_percent("x%d", "/home/u", "u", 1, out, 8), -1);
	assert_int_equal(errno, ENAMETOOLONG);
	errno = 0;
	assert_int_equal(path_percent("%U", "/h", "u", 123456789, out, 8), -1);
	assert_int_equal(errno, ENAMETOOLONG);
	free(out);
}

int
main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_path_tilde_home),
		cmocka_unit_test(test_path_tilde_other_user),
		cmocka_unit_test(test_path_tilde_unknown_user_is_enoent),
		cmocka_unit_test(test_path_tilde_no_tilde_is_copied),
		cmocka_unit_test(test_path_tilde_too_long_is_enametoolong),
		cmocka_unit_test(test_path_percent_every_escape),
		cmocka_unit_test(test_path_percent_unknown_escape_is_einval),
		cmocka_unit_test(
		    test_path_percent_lone_percent_at_end_is_einval),
		cmocka_unit_test(test_path_percent_too_long_is_enametoolong),
	};

	if (unit_args(argc, argv) != 0)
		return 2;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
