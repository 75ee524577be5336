/*
 * Unit tests of the transfer log's JSON strings (xferlog.c): any bytes of a
 * name become one valid JSON string, on one line, from which the bytes come
 * back exactly.
 */
/* sys-gnu.c is built with _GNU_SOURCE: before the first header. */
#define _GNU_SOURCE

#include <sys/types.h>
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../xferlog.c"
#include "../../log.c"
#include "../../sys-gnu.c"
#include "unit.h"

/* name as a JSON string must be want. */
static void
assert_json(const char *name, const char *want)
{
	char buf[256];
	size_t off = 0;

	assert_int_equal(xferlog_json_string(buf, sizeof buf, &off, name), 0);
	assert_int_equal(off, strlen(want));
	assert_memory_equal(buf, want, off);
}

static void
test_plain_ascii_is_quoted(void **state)
{
	(void)state;
	assert_json("upload/a b.txt", "\"upload/a b.txt\"");
	assert_json("", "\"\"");
}

static void
test_quote_and_backslash_are_escaped(void **state)
{
	(void)state;
	assert_json("a\"b\\c", "\"a\\\"b\\\\c\"");
}

static void
test_newline_cr_tab_cannot_break_the_line(void **state)
{
	(void)state;
	assert_json("x\n{\"event\":\"forged\"}\r\t",
	    "\"x\\n{\\\"event\\\":\\\"forged\\\"}\\r\\t\"");
}

static void
test_other_controls_and_del_as_u00xx(void **state)
{
	(void)state;
	assert_json("\x01\x1f\x7f", "\"\\u0001\\u001f\\u007f\"");
}

static void
test_valid_utf8_passes(void **state)
{
	(void)state;
	/* é, €, and U+1F600 (four bytes). */
	assert_json("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80",
	    "\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"");
}

static void
test_invalid_utf8_bytes_as_replacement_characters(void **state)
{
	(void)state;
	/* A lone continuation byte, a Latin-1 byte, a cut sequence. */
	assert_json("\x80", "\"\\ufffd\"");
	assert_json("caf\xe9", "\"caf\\ufffd\"");
	assert_json("\xe2\x82", "\"\\ufffd\\ufffd\"");
	/* Overlong "/" and an encoded surrogate are not valid UTF-8 either. */
	assert_json("\xc0\xaf", "\"\\ufffd\\ufffd\"");
	assert_json("\xed\xa0\x80", "\"\\ufffd\\ufffd\\ufffd\"");
	/* Past U+10FFFF. */
	assert_json("\xf4\x90\x80\x80",
	    "\"\\ufffd\\ufffd\\ufffd\\ufffd\"");
}

/* A temporary directory for the log tests, and a path in it. */
static char logdir[64];

static const char *
in_logdir(const char *name)
{
	static char paths[2][128];
	static int next;

	next = !next;	/* two at a time, for symlink() */
	snprintf(paths[next], sizeof paths[next], "%s/%s", logdir, name);
	return paths[next];
}

static int
make_logdir(void **state)
{
	(void)state;
	snprintf(logdir, sizeof logdir, "/tmp/test_xferlog.XXXXXX");
	return mkdtemp(logdir) == NULL ? -1 : 0;
}

static int
remove_logdir(void **state)
{
	char cmd[128];

	(void)state;
	if (log_fd != -1)
		(void)close(log_fd);
	log_fd = -1;
	snprintf(cmd, sizeof cmd, "rm -rf %s", logdir);
	return system(cmd) == 0 ? 0 : -1;
}

/* The whole log file, NUL-terminated. */
static char *
read_log(void)
{
	static char buf[8192];
	ssize_t n;
	int fd = open(in_logdir("log"), O_RDONLY);

	assert_true(fd >= 0);
	n = read(fd, buf, sizeof buf - 1);
	assert_true(n >= 0);
	buf[n] = '\0';
	close(fd);
	return buf;
}

static void
test_name_not_utf8_keeps_its_bytes_in_hex(void **state)
{
	struct xfer_event ev = XFER_EVENT("rename");
	char *line;
	int fd;

	(void)state;
	fd = open(in_logdir("log"), O_WRONLY | O_CREAT | O_EXCL, 0600);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(xferlog_open(in_logdir("log")), 0);
	xferlog_session("alice", "192.0.2.7 50022 192.0.2.1 22");
	ev.path = "caf\xe9\n.txt";
	ev.target = "caf\xc3\xa9.txt";
	ev.result = "ok";
	xferlog_write(&ev);
	line = read_log();
	/* Readable with U+FFFD; the exact bytes beside; the valid one alone. */
	assert_non_null(strstr(line, ",\"path\":\"caf\\ufffd\\n.txt\","
	    "\"path_hex\":\"636166e90a2e747874\",\"target\":\"caf\xc3\xa9.txt\","));
	assert_null(strstr(line, "target_hex"));
	assert_non_null(strstr(line, "\"user\":\"alice\",\"client\":"
	    "\"192.0.2.7\",\"port\":50022,\"event\":\"rename\""));
	assert_int_equal(strchr(line, '\n') - line, (long)strlen(line) - 1);
}

static void
test_open_refuses_missing_symlink_and_non_regular(void **state)
{
	struct stat st;
	int fd;

	(void)state;
	/* Missing: refused, and not created. */
	errno = 0;
	assert_int_equal(xferlog_open(in_logdir("missing")), -1);
	assert_int_equal(errno, ENOENT);
	assert_int_equal(lstat(in_logdir("missing"), &st), -1);
	/* A symlink to a file someone else owns: refused, never followed. */
	fd = open(in_logdir("theirs"), O_WRONLY | O_CREAT | O_EXCL, 0666);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(symlink(in_logdir("theirs"), in_logdir("link")), 0);
	errno = 0;
	assert_int_equal(xferlog_open(in_logdir("link")), -1);
	assert_int_equal(errno, ELOOP);
	/* A directory and a FIFO with a reader: not regular files. */
	errno = 0;
	assert_int_equal(xferlog_open(logdir), -1);
	assert_true(errno == EINVAL || errno == EISDIR);
	assert_int_equal(mkfifo(in_logdir("fifo"), 0600), 0);
	fd = open(in_logdir("fifo"), O_RDONLY | O_NONBLOCK);
	assert_true(fd >= 0);
	errno = 0;
	assert_int_equal(xferlog_open(in_logdir("fifo")), -1);
	assert_int_equal(errno, EINVAL);
	close(fd);
	assert_int_equal(xferlog_fd(), -1);
	assert_int_equal(stat(in_logdir("theirs"), &st), 0);
	assert_int_equal(st.st_size, 0);
}

static void
test_too_small_a_buffer_fails(void **state)
{
	char buf[8];
	size_t off = 0;

	(void)state;
	assert_int_equal(xferlog_json_string(buf, sizeof buf, &off, "abcdef"),
	    0);
	off = 0;
	assert_int_equal(xferlog_json_string(buf, sizeof buf, &off,
	    "abcdefg"), -1);
	off = 0;
	assert_int_equal(xferlog_json_string(buf, sizeof buf, &off, "\x01"),
	    0);
	assert_int_equal(off, 8);
}

int
main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_plain_ascii_is_quoted),
		cmocka_unit_test(test_quote_and_backslash_are_escaped),
		cmocka_unit_test(test_newline_cr_tab_cannot_break_the_line),
		cmocka_unit_test(test_other_controls_and_del_as_u00xx),
		cmocka_unit_test(test_valid_utf8_passes),
		cmocka_unit_test(test_invalid_utf8_bytes_as_replacement_characters),
		cmocka_unit_test_setup_teardown(
		    test_name_not_utf8_keeps_its_bytes_in_hex, make_logdir,
		    remove_logdir),
		cmocka_unit_test_setup_teardown(
		    test_open_refuses_missing_symlink_and_non_regular, make_logdir,
		    remove_logdir),
		cmocka_unit_test(test_too_small_a_buffer_fails),
	};

	if (unit_args(argc, argv) != 0)
		return 2;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
