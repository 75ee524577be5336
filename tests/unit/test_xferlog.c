/*
 * Unit tests of the transfer log's JSON strings (xferlog.c): any bytes of a
 * name become one valid JSON string, on one line, from which the bytes come
 * back exactly.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <string.h>

#include <cmocka.h>

#include "../../xferlog.c"
#include "../../log.c"
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
test_invalid_utf8_bytes_as_surrogate_escapes(void **state)
{
	(void)state;
	/* A lone continuation byte, a Latin-1 byte, a cut sequence. */
	assert_json("\x80", "\"\\udc80\"");
	assert_json("caf\xe9", "\"caf\\udce9\"");
	assert_json("\xe2\x82", "\"\\udce2\\udc82\"");
	/* Overlong "/" and an encoded surrogate are not valid UTF-8 either. */
	assert_json("\xc0\xaf", "\"\\udcc0\\udcaf\"");
	assert_json("\xed\xa0\x80", "\"\\udced\\udca0\\udc80\"");
	/* Past U+10FFFF. */
	assert_json("\xf4\x90\x80\x80", "\"\\udcf4\\udc90\\udc80\\udc80\"");
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
		cmocka_unit_test(test_invalid_utf8_bytes_as_surrogate_escapes),
		cmocka_unit_test(test_too_small_a_buffer_fails),
	};

	if (unit_args(argc, argv) != 0)
		return 2;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
