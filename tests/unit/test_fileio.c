/*
 * Unit tests of the file I/O engines (fileio.c): whole reads and writes, the
 * copy (in the kernel, and by hand for an O_APPEND target), the digest over
 * a range, end of file, counts on failure, and the stop check between
 * chunks.  Files live in a temporary directory made per test.
 */
#define _GNU_SOURCE	/* sys-gnu.c, included below, needs it first */

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

#include "unit.h"
#include "../../fileio.c"
#include "../../digest.c"
#include "../../sys-gnu.c"

struct fixture {
	char dir[64];
	uint8_t *data;		/* DATA_LEN bytes of a known pattern */
};

/* Longer than a chunk, and not a multiple of one. */
#define DATA_LEN	(3 * FILEIO_CHUNK + 12345)

static int stop_after;	/* the stop check says stop at this call (0: never) */
static int stop_calls;

static int
stop_counting(void)
{
	stop_calls++;
	return stop_after != 0 && stop_calls >= stop_after;
}

static int
setup(void **state)
{
	struct fixture *f = calloc(1, sizeof *f);

	if (f == NULL)
		return -1;
	snprintf(f->dir, sizeof f->dir, "/tmp/test_fileio.XXXXXX");
	if (mkdtemp(f->dir) == NULL || (f->data = malloc(DATA_LEN)) == NULL)
		return -1;
	for (size_t i = 0; i < DATA_LEN; i++)
		f->data[i] = (uint8_t)(i * 7 + i / 251);
	stop_after = stop_calls = 0;
	fileio_set_stop(NULL);
	*state = f;
	return 0;
}

static int
teardown(void **state)
{
	struct fixture *f = *state;
	char cmd[128];

	snprintf(cmd, sizeof cmd, "rm -rf %s", f->dir);
	if (system(cmd) != 0)
		return -1;
	free(f->data);
	free(f);
	return 0;
}

/* Opens name in the fixture's directory. */
static int
open_in(struct fixture *f, const char *name, int flags)
{
	char path[128];
	int fd;

	snprintf(path, sizeof path, "%s/%s", f->dir, name);
	fd = open(path, flags | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	return fd;
}

/* A file holding the first len bytes of the pattern, open for reading. */
static int
make_data_file(struct fixture *f, const char *name, size_t len)
{
	uint64_t written = 0;
	int fd = open_in(f, name, O_RDWR | O_CREAT | O_TRUNC);

	assert_int_equal(fileio_write_full(fd, f->data, len, 0, &written), 0);
	assert_int_equal(written, len);
	return fd;
}

/* The whole content of fd must be want[0, len). */
static void
assert_content(int fd, const uint8_t *want, size_t len)
{
	struct stat st;
	uint8_t *got = malloc(len + 1);

	assert_non_null(got);
	assert_int_equal(fstat(fd, &st), 0);
	assert_int_equal(st.st_size, (off_t)len);
	assert_int_equal(fileio_read_full(fd, got, len + 1, 0), (ssize_t)len);
	assert_memory_equal(got, want, len);
	free(got);
}

static void
test_read_full_fills_the_buffer_up_to_eof(void **state)
{
	struct fixture *f = *state;
	uint8_t buf[1000];
	int fd = make_data_file(f, "a", 1500);

	assert_int_equal(fileio_read_full(fd, buf, sizeof buf, 0), 1000);
	assert_memory_equal(buf, f->data, 1000);
	/* Across end of file: what there is. */
	assert_int_equal(fileio_read_full(fd, buf, sizeof buf, 1000), 500);
	assert_memory_equal(buf, f->data + 1000, 500);
	assert_int_equal(fileio_read_full(fd, buf, sizeof buf, 1500), 0);
	assert_int_equal(fileio_read_full(fd, buf, sizeof buf, 9999), 0);
	close(fd);
}

static void
test_read_full_error_is_minus_one_with_errno(void **state)
{
	uint8_t buf[16];

	(void)state;
	errno = 0;
	assert_int_equal(fileio_read_full(-1, buf, sizeof buf, 0), -1);
	assert_int_equal(errno, EBADF);
}

static void
test_write_full_at_offset_and_appended(void **state)
{
	struct fixture *f = *state;
	uint64_t written = 0;
	uint8_t want[400];
	int fd = open_in(f, "w", O_RDWR | O_CREAT | O_TRUNC);
	int afd = open_in(f, "w", O_WRONLY | O_APPEND);

	assert_int_equal(fileio_write_full(fd, f->data, 100, 200, &written),
	    0);
	/* Appended: the offset is ignored, the bytes go to the end. */
	assert_int_equal(fileio_write_full(afd, f->data + 100, 100,
	    FILEIO_APPEND, &written), 0);
	assert_int_equal(written, 200);
	memset(want, 0, 200);
	memcpy(want + 200, f->data, 100);
	memcpy(want + 300, f->data + 100, 100);
	assert_content(fd, want, 400);
	close(afd);
	close(fd);
}

static void
test_write_full_failure_counts_nothing_it_did_not_write(void **state)
{
	struct fixture *f = *state;
	uint64_t written = 5;
	int fd = open_in(f, "r", O_RDONLY | O_CREAT);

	errno = 0;
	assert_int_equal(fileio_write_full(fd, f->data, 10, 0, &written), -1);
	assert_int_equal(errno, EBADF);
	assert_int_equal(written, 5);
	close(fd);
}

static void
test_copy_whole_file_to_eof(void **state)
{
	struct fixture *f = *state;
	struct fileio_copied c;
	int in = make_data_file(f, "in", DATA_LEN);
	int out = open_in(f, "out", O_RDWR | O_CREAT | O_TRUNC);

	assert_int_equal(fileio_copy(in, 0, out, 0, 0, &c), 0);
	assert_int_equal(c.read, DATA_LEN);
	assert_int_equal(c.written, DATA_LEN);
	assert_content(out, f->data, DATA_LEN);
	close(in);
	close(out);
}

static void
test_copy_range_at_offsets(void **state)
{
	struct fixture *f = *state;
	struct fileio_copied c;
	uint8_t *want = calloc(1, 5000 + FILEIO_CHUNK);
	int in = make_data_file(f, "in", DATA_LEN);
	int out = open_in(f, "out", O_RDWR | O_CREAT | O_TRUNC);

	assert_non_null(want);
	assert_int_equal(fileio_copy(in, 777, out, 5000, FILEIO_CHUNK, &c),
	    0);
	assert_int_equal(c.read, FILEIO_CHUNK);
	memcpy(want + 5000, f->data + 777, FILEIO_CHUNK);
	assert_content(out, want, 5000 + FILEIO_CHUNK);
	free(want);
	close(in);
	close(out);
}

static void
test_copy_past_eof_is_fileio_eof_with_what_there_was(void **state)
{
	struct fixture *f = *state;
	struct fileio_copied c;
	int in = make_data_file(f, "in", 1000);
	int out = open_in(f, "out", O_RDWR | O_CREAT | O_TRUNC);

	assert_int_equal(fileio_copy(in, 400, out, 0, 5000, &c), FILEIO_EOF);
	assert_int_equal(c.read, 600);
	assert_int_equal(c.written, 600);
	assert_content(out, f->data + 400, 600);
	close(in);
	close(out);
}

/* copy_file_range() refuses an O_APPEND target: the copy goes by hand. */
static void
test_copy_to_append_target_goes_by_hand(void **state)
{
	struct fixture *f = *state;
	struct fileio_copied c;
	uint64_t written = 0;
	uint8_t *want = malloc(100 + DATA_LEN);
	int in = make_data_file(f, "in", DATA_LEN);
	int out = open_in(f, "out", O_RDWR | O_CREAT | O_TRUNC);
	int aout = open_in(f, "out", O_WRONLY | O_APPEND);

	assert_non_null(want);
	assert_int_equal(fileio_write_full(out, "x", 1, 99, &written), 0);
	assert_int_equal(fileio_copy(in, 0, aout, FILEIO_APPEND, 0, &c), 0);
	assert_int_equal(c.written, DATA_LEN);
	memset(want, 0, 99);
	want[99] = 'x';
	memcpy(want + 100, f->data, DATA_LEN);
	assert_content(out, want, 100 + DATA_LEN);
	free(want);
	close(in);
	close(out);
	close(aout);
}

static void
test_copy_write_error_keeps_counts(void **state)
{
	struct fixture *f = *state;
	struct fileio_copied c;
	int in = make_data_file(f, "in", 1000);
	int out = open_in(f, "out", O_RDONLY | O_CREAT);

	/* By hand (FILEIO_APPEND): the read succeeds, the write fails. */
	errno = 0;
	assert_int_equal(fileio_copy(in, 0, out, FILEIO_APPEND, 0, &c), -1);
	assert_int_equal(errno, EBADF);
	assert_int_equal(c.read, 1000);
	assert_int_equal(c.written, 0);
	close(in);
	close(out);
}

static void
test_copy_stops_when_told_between_chunks(void **state)
{
	struct fixture *f = *state;
	struct fileio_copied c;
	int in = make_data_file(f, "in", DATA_LEN);
	int out = open_in(f, "out", O_RDWR | O_CREAT | O_TRUNC);

	fileio_set_stop(stop_counting);
	stop_after = 2;		/* the first chunk goes, the second not */
	assert_int_equal(fileio_copy(in, 0, out, FILEIO_APPEND, 0, &c),
	    FILEIO_STOP);
	assert_int_equal(c.written, FILEIO_CHUNK);
	assert_int_equal(stop_calls, 2);
	/* The kernel's copy asks too, before its first call. */
	stop_calls = 0;
	stop_after = 1;
	assert_int_equal(fileio_copy(in, 0, out, 0, 0, &c), FILEIO_STOP);
	assert_int_equal(c.written, 0);
	close(in);
	close(out);
}

/* The digest of f->data[off, off + len) computed in one go. */
static void
expected_digest(struct fixture *f, const char *name, size_t off, size_t len,
    uint8_t *md)
{
	const struct digest_algo *algo = digest_by_name(name, strlen(name));
	struct digest_ctx ctx;

	assert_non_null(algo);
	digest_init(&ctx, algo);
	digest_update(&ctx, f->data + off, len);
	digest_final(&ctx, md);
}

static void
test_digest_of_ranges_matches_one_pass(void **state)
{
	static const char *names[] = { "md5", "sha256", "sha512", "crc32" };
	static const size_t ranges[][2] = {
		{ 0, DATA_LEN }, { 1, FILEIO_CHUNK }, { 100, 0 },
		{ FILEIO_CHUNK - 1, FILEIO_CHUNK + 2 }, { DATA_LEN - 1, 1 },
	};
	struct fixture *f = *state;
	uint8_t md[DIGEST_MAX_LEN], want[DIGEST_MAX_LEN];
	const struct digest_algo *algo;
	uint64_t hashed;
	int fd = make_data_file(f, "in", DATA_LEN);

	for (size_t a = 0; a < sizeof names / sizeof names[0]; a++) {
		algo = digest_by_name(names[a], strlen(names[a]));
		for (size_t i = 0; i < sizeof ranges / sizeof ranges[0]; i++) {
			hashed = 0;
			assert_int_equal(fileio_digest(fd, (off_t)ranges[i][0],
			    ranges[i][1], algo, md, &hashed), 0);
			assert_int_equal(hashed, ranges[i][1]);
			expected_digest(f, names[a], ranges[i][0],
			    ranges[i][1], want);
			assert_memory_equal(md, want, digest_len(algo));
		}
	}
	close(fd);
}

static void
test_digest_past_eof_is_fileio_eof(void **state)
{
	struct fixture *f = *state;
	const struct digest_algo *algo = digest_by_name("sha1", 4);
	uint8_t md[DIGEST_MAX_LEN];
	uint64_t hashed = 0;
	int fd = make_data_file(f, "in", 1000);

	assert_int_equal(fileio_digest(fd, 10, 2000, algo, md, &hashed),
	    FILEIO_EOF);
	assert_int_equal(hashed, 990);
	close(fd);
}

static void
test_digest_stops_when_told_and_counts_what_it_read(void **state)
{
	struct fixture *f = *state;
	const struct digest_algo *algo = digest_by_name("md5", 3);
	uint8_t md[DIGEST_MAX_LEN];
	uint64_t hashed = 0;
	int fd = make_data_file(f, "in", DATA_LEN);

	fileio_set_stop(stop_counting);
	stop_after = 3;
	assert_int_equal(fileio_digest(fd, 0, DATA_LEN, algo, md, &hashed),
	    FILEIO_STOP);
	assert_int_equal(hashed, 2 * FILEIO_CHUNK);
	close(fd);
}

/* Given back while idle, the scratch buffer serves again. */
static void
test_release_then_use_again(void **state)
{
	struct fixture *f = *state;
	const struct digest_algo *algo = digest_by_name("sha256", 6);
	uint8_t md[DIGEST_MAX_LEN], want[DIGEST_MAX_LEN];
	uint64_t hashed = 0;
	int fd = make_data_file(f, "in", DATA_LEN);

	fileio_release();	/* before any use: nothing to give back */
	assert_int_equal(fileio_digest(fd, 0, DATA_LEN, algo, md, &hashed), 0);
	fileio_release();
	assert_int_equal(fileio_digest(fd, 0, DATA_LEN, algo, md, &hashed), 0);
	expected_digest(f, "sha256", 0, DATA_LEN, want);
	assert_memory_equal(md, want, 32);
	close(fd);
}

int
main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
#define T(t) cmocka_unit_test_setup_teardown(t, setup, teardown)
		T(test_read_full_fills_the_buffer_up_to_eof),
		T(test_read_full_error_is_minus_one_with_errno),
		T(test_write_full_at_offset_and_appended),
		T(test_write_full_failure_counts_nothing_it_did_not_write),
		T(test_copy_whole_file_to_eof),
		T(test_copy_range_at_offsets),
		T(test_copy_past_eof_is_fileio_eof_with_what_there_was),
		T(test_copy_to_append_target_goes_by_hand),
		T(test_copy_write_error_keeps_counts),
		T(test_copy_stops_when_told_between_chunks),
		T(test_digest_of_ranges_matches_one_pass),
		T(test_digest_past_eof_is_fileio_eof),
		T(test_digest_stops_when_told_and_counts_what_it_read),
		T(test_release_then_use_again),
#undef T
	};

	if (unit_args(argc, argv) != 0)
		return 2;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
