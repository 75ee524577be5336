/*
 * Unit tests of packet.c: the framing of the input buffer, the field cursor
 * and the reply queue.
 *
 * Every input a getter sees is copied into a malloc'ed buffer of exactly its
 * size, so that AddressSanitizer reports a read past the end of a packet.
 */
#include <sys/types.h>
#include <sys/ioctl.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* cmocka 1.1.5 needs the four headers above it. */
#include <cmocka.h>

#include "../../packet.c"
#include "../lib/packet_test.h"

#include "unit.h"

/* The fields of the request shapes below, in wire order. */
enum field {
	F_END = 0,
	F_TYPE,		/* byte type */
	F_ID,		/* uint32 id (or version) */
	F_EXT,		/* string extension name */
	F_U32,
	F_U64,
	F_HANDLE,	/* string handle */
	F_IDS,		/* string of packed uint32 */
	F_PATH,
	F_ATTRS,
};

/* A request body as its handler parses it. */
struct shape {
	const char *name;
	uint8_t type;
	const char *ext;
	enum field fields[10];
};

/* clang-format off */
static const struct shape shapes[] = {
	{ "init", SSH_FXP_INIT, NULL, { F_TYPE, F_ID } },
	{ "open", SSH_FXP_OPEN, NULL,
	    { F_TYPE, F_ID, F_PATH, F_U32, F_ATTRS } },
	{ "close", SSH_FXP_CLOSE, NULL, { F_TYPE, F_ID, F_HANDLE } },
	{ "read", SSH_FXP_READ, NULL,
	    { F_TYPE, F_ID, F_HANDLE, F_U64, F_U32 } },
	{ "write", SSH_FXP_WRITE, NULL,
	    { F_TYPE, F_ID, F_HANDLE, F_U64, F_IDS } },
	{ "lstat", SSH_FXP_LSTAT, NULL, { F_TYPE, F_ID, F_PATH } },
	{ "fstat", SSH_FXP_FSTAT, NULL, { F_TYPE, F_ID, F_HANDLE } },
	{ "setstat", SSH_FXP_SETSTAT, NULL,
	    { F_TYPE, F_ID, F_PATH, F_ATTRS } },
	{ "fsetstat", SSH_FXP_FSETSTAT, NULL,
	    { F_TYPE, F_ID, F_HANDLE, F_ATTRS } },
	{ "opendir", SSH_FXP_OPENDIR, NULL, { F_TYPE, F_ID, F_PATH } },
	{ "readdir", SSH_FXP_READDIR, NULL, { F_TYPE, F_ID, F_HANDLE } },
	{ "remove", SSH_FXP_REMOVE, NULL, { F_TYPE, F_ID, F_PATH } },
	{ "mkdir", SSH_FXP_MKDIR, NULL, { F_TYPE, F_ID, F_PATH, F_ATTRS } },
	{ "rmdir", SSH_FXP_RMDIR, NULL, { F_TYPE, F_ID, F_PATH } },
	{ "realpath", SSH_FXP_REALPATH, NULL, { F_TYPE, F_ID, F_PATH } },
	{ "stat", SSH_FXP_STAT, NULL, { F_TYPE, F_ID, F_PATH } },
	{ "rename", SSH_FXP_RENAME, NULL, { F_TYPE, F_ID, F_PATH, F_PATH } },
	{ "readlink", SSH_FXP_READLINK, NULL, { F_TYPE, F_ID, F_PATH } },
	{ "symlink", SSH_FXP_SYMLINK, NULL,
	    { F_TYPE, F_ID, F_PATH, F_PATH } },
	{ "posix-rename", SSH_FXP_EXTENDED, "posix-rename@openssh.com",
	    { F_TYPE, F_ID, F_EXT, F_PATH, F_PATH } },
	{ "statvfs", SSH_FXP_EXTENDED, "statvfs@openssh.com",
	    { F_TYPE, F_ID, F_EXT, F_PATH } },
	{ "fstatvfs", SSH_FXP_EXTENDED, "fstatvfs@openssh.com",
	    { F_TYPE, F_ID, F_EXT, F_HANDLE } },
	{ "hardlink", SSH_FXP_EXTENDED, "hardlink@openssh.com",
	    { F_TYPE, F_ID, F_EXT, F_PATH, F_PATH } },
	{ "fsync", SSH_FXP_EXTENDED, "fsync@openssh.com",
	    { F_TYPE, F_ID, F_EXT, F_HANDLE } },
	{ "lsetstat", SSH_FXP_EXTENDED, "lsetstat@openssh.com",
	    { F_TYPE, F_ID, F_EXT, F_PATH, F_ATTRS } },
	{ "limits", SSH_FXP_EXTENDED, "limits@openssh.com",
	    { F_TYPE, F_ID, F_EXT } },
	{ "expand-path", SSH_FXP_EXTENDED, "expand-path@openssh.com",
	    { F_TYPE, F_ID, F_EXT, F_PATH } },
	{ "copy-data", SSH_FXP_EXTENDED, "copy-data",
	    { F_TYPE, F_ID, F_EXT, F_HANDLE, F_U64, F_U64, F_HANDLE,
	    F_U64 } },
	{ "home-directory", SSH_FXP_EXTENDED, "home-directory",
	    { F_TYPE, F_ID, F_EXT, F_PATH } },
	{ "users-groups-by-id", SSH_FXP_EXTENDED,
	    "users-groups-by-id@openssh.com",
	    { F_TYPE, F_ID, F_EXT, F_IDS, F_IDS } },
};
/* clang-format on */

static uint64_t rng_state;

/* xorshift64*: a fixed sequence per seed, so that a failure repeats. */
static void
rng_seed(uint64_t seed)
{
	rng_state = seed * 0x9e3779b97f4a7c15ULL + 1;
}

static uint64_t
rng_next(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dULL;
}

/* A number in [lo, hi]. */
static size_t
rng_range(size_t lo, size_t hi)
{
	return lo + (size_t)(rng_next() % (hi - lo + 1));
}

static void
assert_cursor_at(const struct cursor *c, const uint8_t *p, size_t left)
{
	assert_ptr_equal(c->p, p);
	assert_int_equal(c->left, left);
}

/* Replies. */

static int
setup_queue(void **state)
{
	struct oqueue *q = malloc(sizeof *q);

	if (q == NULL || oq_init(q, OQ_SIZE) != 0) {
		free(q);
		return -1;
	}
	*state = q;
	return 0;
}

static int
teardown_queue(void **state)
{
	struct oqueue *q = *state;

	oq_free(q);
	free(q);
	return 0;
}

static void
assert_queue(const struct oqueue *q, const void *want, size_t len)
{
	assert_int_equal(q->len, len);
	assert_memory_equal(q->buf, want, len);
}

/*
 * Runs fn(arg) in a child and expects it to die of SIGABRT: a broken
 * invariant is a bug, and the code aborts.
 */
static void
expect_abort(void (*fn)(void *), void *arg)
{
	pid_t pid;
	int status;

	pid = fork();
	assert_true(pid != -1);
	if (pid == 0) {
		(void)signal(SIGABRT, SIG_DFL);
		fn(arg);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status));
	assert_int_equal(WTERMSIG(status), SIGABRT);
}

/* Framing. */

/* A stream of packets, and where each one's length word starts. */
struct stream {
	struct wbuf w;
	size_t npkts;
	size_t *off;
	uint32_t *plen;
	uint8_t **body;		/* where each body was written, by feed() */
};

static void
stream_add(struct stream *s, uint32_t len)
{
	size_t *noff;
	uint32_t *nlen;
	uint8_t b;

	noff = realloc(s->off, (s->npkts + 1) * sizeof *s->off);
	assert_non_null(noff);
	s->off = noff;
	nlen = realloc(s->plen, (s->npkts + 1) * sizeof *s->plen);
	assert_non_null(nlen);
	s->plen = nlen;
	s->off[s->npkts] = s->w.len;
	s->plen[s->npkts] = len;
	s->npkts++;
	wb_u32(&s->w, len);
	for (uint32_t i = 0; i < len; i++) {
		b = (uint8_t)rng_next();
		wb_put(&s->w, &b, 1);
	}
}

static void
stream_done(struct stream *s)
{
	s->body = calloc(s->npkts, sizeof *s->body);
	assert_non_null(s->body);
}

static void
stream_free(struct stream *s)
{
	wb_free(&s->w);
	free(s->off);
	free(s->plen);
	free(s->body);
	memset(s, 0, sizeof *s);
}

/*
 * Feeds s through ib, which holds nothing, as reads of at most what
 * chunk() allows, each also capped by the room.  Every complete packet is
 * taken out before the next read, as the server does.  Checks that each
 * packet comes out whole, at the address its body was copied to (no byte
 * is moved), that the room is never 0 nor outside the buffer, and that
 * nothing is pending at the end.  chunk() says how many bytes the next read
 * may take when pos of total were delivered.  Returns how many reads went
 * past soft, to complete a packet that started before it.
 */
static size_t
feed(struct ibuf *ib, struct stream *s,
    size_t (*chunk)(void *, size_t pos, size_t total), void *arg)
{
	struct cursor c;
	size_t pos = 0, next = 0, rec = 0, room, n, tails = 0;
	uint32_t len;
	uint8_t *p;
	int r, ready;

	assert_int_equal(ibuf_pending(ib), 0);
	for (;;) {
		for (;;) {
			ready = ibuf_ready(ib);
			r = ibuf_next(ib, &c, &len);
			assert_int_equal(ready, r != 0);
			if (r != 1)
				break;
			assert_true(next < s->npkts);
			assert_int_equal(len, s->plen[next]);
			assert_int_equal(c.left, s->plen[next]);
			if (c.p != s->body[next]) {
				print_error("packet %zu moved\n", next);
				fail();
			}
			if (memcmp(c.p, s->w.p + s->off[next] + 4,
			    s->plen[next]) != 0) {
				print_error("packet %zu differs\n", next);
				fail();
			}
			next++;
		}
		assert_int_equal(r, 0);
		if (next == s->npkts)
			break;
		assert_true(pos < s->w.len);
		ibuf_room(ib, &p, &room);
		assert_true(room > 0);
		assert_true(p >= ib->buf && p <= ib->buf + ib->size);
		assert_true(room <= (size_t)(ib->buf + ib->size - p));
		if ((size_t)(p - ib->buf) >= ib->soft)
			tails++;
		n = chunk(arg, pos, s->w.len);
		if (n > room)
			n = room;
		if (n > s->w.len - pos)
			n = s->w.len - pos;
		assert_true(n > 0);
		memcpy(p, s->w.p + pos, n);
		for (; rec < s->npkts && s->off[rec] + 4 < pos + n; rec++)
			s->body[rec] = p + (s->off[rec] + 4 - pos);
		ibuf_fill(ib, n);
		pos += n;
	}
	assert_int_equal(pos, s->w.len);
	assert_int_equal(ibuf_pending(ib), 0);
	return tails;
}

static size_t
chunk_split(void *arg, size_t pos, size_t total)
{
	size_t split = *(size_t *)arg;

	return pos < split ? split - pos : total - pos;
}

static size_t
chunk_one(void *arg, size_t pos, size_t total)
{
	(void)arg;
	(void)pos;
	(void)total;
	return 1;
}

static size_t
chunk_random(void *arg, size_t pos, size_t total)
{
	(void)arg;
	(void)pos;
	(void)total;
	switch (rng_next() % 4) {
	case 0:
		return rng_range(1, 16);
	case 1:
		return rng_range(1, 4096);
	case 2:
		return rng_range(1, 70000);
	default:
		return rng_range(1, SFTP_MAX_MSG + 100);
	}
}

static size_t
chunk_all(void *arg, size_t pos, size_t total)
{
	(void)arg;
	return total - pos;
}

/*
 * Several packets, one of exactly SFTP_MAX_MSG; lengths below 4 make a
 * length word and a body fit in one short read.
 */
static void
stream_mixed(struct stream *s)
{
	static const uint32_t lens[] = { 1, 5, 4, 3, 2, 13, 255, 256, 4096,
		SFTP_MAX_MSG, 1, 100, 9 };

	memset(s, 0, sizeof *s);
	rng_seed(1);
	for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++)
		stream_add(s, lens[i]);
	stream_done(s);
}

static void
test_ibuf_next_every_split_in_two_reads(void **state)
{
	struct stream s;
	struct ibuf ib;

	(void)state;
	/* Set up: a stream with packets of all kinds of length. */
	stream_mixed(&s);
	assert_true(s.w.len < IBUF_SOFT);
	assert_int_equal(ibuf_init(&ib, IBUF_SOFT), 0);
	/* Act and check: two reads, split at every byte. */
	for (size_t split = 0; split <= s.w.len; split++)
		feed(&ib, &s, chunk_split, &split);
	ibuf_free(&ib);
	stream_free(&s);
}

static void
test_ibuf_next_byte_by_byte(void **state)
{
	struct stream s;
	struct ibuf ib;

	(void)state;
	stream_mixed(&s);
	assert_int_equal(ibuf_init(&ib, IBUF_SOFT), 0);
	feed(&ib, &s, chunk_one, NULL);
	ibuf_free(&ib);
	assert_int_equal(ibuf_init(&ib, 1000), 0);
	feed(&ib, &s, chunk_one, NULL);
	ibuf_free(&ib);
	stream_free(&s);
}

static void
test_ibuf_next_random_chunks(void **state)
{
	struct stream s;
	struct ibuf big, small;

	(void)state;
	stream_mixed(&s);
	assert_int_equal(ibuf_init(&big, IBUF_SOFT), 0);
	assert_int_equal(ibuf_init(&small, 1000), 0);
	for (uint64_t seed = 1; seed <= 200; seed++) {
		rng_seed(seed);
		feed(&big, &s, chunk_random, NULL);
		feed(&small, &s, chunk_random, NULL);
	}
	ibuf_free(&big);
	ibuf_free(&small);
	stream_free(&s);
}

/* Several MiB of mixed sizes with a small soft, so reads stop at soft often. */
static void
stream_long(struct stream *s)
{
	uint32_t len;

	memset(s, 0, sizeof *s);
	rng_seed(7);
	while (s->w.len < 6 * 1024 * 1024) {
		switch (rng_next() % 16) {
		case 0:
			len = rng_next() % 2 ? SFTP_MAX_MSG : SFTP_MAX_MSG - 1;
			break;
		case 1:
		case 2:
			len = (uint32_t)rng_range(1000, 70000);
			break;
		case 3:
		case 4:
		case 5:
			len = (uint32_t)rng_range(200, 2000);
			break;
		default:
			len = (uint32_t)rng_range(1, 64);
			break;
		}
		stream_add(s, len);
	}
	stream_done(s);
}

static void
test_ibuf_next_long_stream_small_soft(void **state)
{
	static const size_t softs[] = { 1000, 4, 1, 0, IBUF_SOFT };
	struct stream s;
	struct ibuf ib;
	size_t tails;

	(void)state;
	stream_long(&s);
	for (size_t i = 0; i < sizeof softs / sizeof softs[0]; i++) {
		assert_int_equal(ibuf_init(&ib, softs[i]), 0);
		/* Reads as large as the room allows, and random ones. */
		tails = feed(&ib, &s, chunk_all, NULL);
		rng_seed(99);
		tails += feed(&ib, &s, chunk_random, NULL);
		/* Check: the reads behind soft did happen, many times. */
		if (softs[i] < 1024 && tails < 100) {
			print_error("soft %zu: only %zu reads behind it\n",
			    softs[i], tails);
			fail();
		}
		ibuf_free(&ib);
	}
	stream_free(&s);
}

/*
 * Puts bytes into an ibuf through the room, as a read would.  Returns how
 * many were taken.
 */
static size_t
put_input(struct ibuf *ib, const void *src, size_t n)
{
	uint8_t *p;
	size_t room;

	ibuf_room(ib, &p, &room);
	assert_true(room > 0);
	if (n > room)
		n = room;
	memcpy(p, src, n);
	ibuf_fill(ib, n);
	return n;
}

static void
test_ibuf_room_past_soft_takes_rest_of_packet(void **state)
{
	struct ibuf ib;
	struct cursor c;
	struct wbuf w = { 0 };
	uint32_t len;
	uint8_t *p;
	size_t room;

	(void)state;
	/* Set up: a packet of 994 bytes, then one of 5004. */
	wb_u32(&w, 990);
	for (size_t i = 0; i < 990; i++)
		wb_u8(&w, 'a');
	wb_u32(&w, 5000);
	for (size_t i = 0; i < 5000; i++)
		wb_u8(&w, (uint8_t)i);
	assert_int_equal(ibuf_init(&ib, 1000), 0);
	/* Act: the first read stops at soft. */
	assert_int_equal(put_input(&ib, w.p, w.len), 1000);
	assert_int_equal(ibuf_next(&ib, &c, &len), 1);
	assert_int_equal(len, 990);
	assert_int_equal(ibuf_next(&ib, &c, &len), 0);
	/* Check: the room is the rest of the second packet, right behind. */
	ibuf_room(&ib, &p, &room);
	assert_ptr_equal(p, ib.buf + 1000);
	assert_int_equal(room, 994 + 5004 - 1000);
	assert_int_equal(put_input(&ib, w.p + 1000, w.len - 1000),
	    w.len - 1000);
	assert_int_equal(ibuf_next(&ib, &c, &len), 1);
	assert_int_equal(len, 5000);
	assert_ptr_equal(c.p, ib.buf + 998);
	assert_memory_equal(c.p, w.p + 998, 5000);
	/* Check: with everything parsed, reads start at the front again. */
	ibuf_room(&ib, &p, &room);
	assert_ptr_equal(p, ib.buf);
	assert_int_equal(room, 1000);
	ibuf_free(&ib);
	wb_free(&w);
}

static void
test_ibuf_room_past_soft_completes_length_word(void **state)
{
	struct ibuf ib;
	struct cursor c;
	struct wbuf w = { 0 };
	uint32_t len;
	uint8_t *p;
	size_t room;

	(void)state;
	/* Set up: 998 bytes of packet, then a length word across soft. */
	wb_u32(&w, 994);
	for (size_t i = 0; i < 994; i++)
		wb_u8(&w, 'a');
	wb_u32(&w, 3);
	wb_put(&w, "xyz", 3);
	assert_int_equal(ibuf_init(&ib, 1000), 0);
	assert_int_equal(put_input(&ib, w.p, w.len), 1000);
	assert_int_equal(ibuf_next(&ib, &c, &len), 1);
	assert_int_equal(ibuf_next(&ib, &c, &len), 0);
	/* Check: first the two missing bytes of the length word. */
	ibuf_room(&ib, &p, &room);
	assert_ptr_equal(p, ib.buf + 1000);
	assert_int_equal(room, 2);
	assert_int_equal(put_input(&ib, w.p + 1000, 2), 2);
	assert_int_equal(ibuf_next(&ib, &c, &len), 0);
	/* Check: then its body. */
	ibuf_room(&ib, &p, &room);
	assert_ptr_equal(p, ib.buf + 1002);
	assert_int_equal(room, 3);
	assert_int_equal(put_input(&ib, w.p + 1002, 3), 3);
	assert_int_equal(ibuf_next(&ib, &c, &len), 1);
	assert_int_equal(len, 3);
	assert_memory_equal(c.p, "xyz", 3);
	assert_int_equal(ibuf_pending(&ib), 0);
	ibuf_free(&ib);
	wb_free(&w);
}

/* The frame error of a length word, returned as soon as it is complete. */
static void
check_frame_error(uint32_t badlen)
{
	struct ibuf ib;
	struct cursor c;
	uint8_t hdr[4] = { badlen >> 24, badlen >> 16, badlen >> 8, badlen };
	uint32_t len;

	assert_int_equal(ibuf_init(&ib, IBUF_SOFT), 0);
	for (size_t i = 0; i < 3; i++) {
		assert_int_equal(put_input(&ib, hdr + i, 1), 1);
		assert_int_equal(ibuf_ready(&ib), 0);
		assert_int_equal(ibuf_next(&ib, &c, &len), 0);
	}
	assert_int_equal(put_input(&ib, hdr + 3, 1), 1);
	assert_int_equal(ibuf_ready(&ib), 1);
	len = 12345;
	c.p = hdr;
	c.left = 99;
	assert_int_equal(ibuf_next(&ib, &c, &len), PKT_EFRAME);
	assert_int_equal(len, badlen);
	assert_null(c.p);
	assert_int_equal(c.left, 0);
	/* The error stays: nothing was consumed. */
	assert_int_equal(ibuf_ready(&ib), 1);
	assert_int_equal(ibuf_next(&ib, &c, &len), PKT_EFRAME);
	assert_int_equal(ibuf_pending(&ib), 4);
	ibuf_free(&ib);
}

static void
test_ibuf_next_length_zero_is_frame_error(void **state)
{
	(void)state;
	check_frame_error(0);
}

static void
test_ibuf_next_length_max_plus_one_is_frame_error(void **state)
{
	(void)state;
	check_frame_error(SFTP_MAX_MSG + 1);
}

static void
test_ibuf_next_length_all_ones_is_frame_error(void **state)
{
	(void)state;
	check_frame_error(0xFFFFFFFF);
}

static void
test_ibuf_next_length_max_waits_for_body(void **state)
{
	struct ibuf ib;
	struct cursor c;
	struct wbuf w = { 0 };
	uint32_t len;
	size_t off = 0;

	(void)state;
	/* Set up: a packet of exactly SFTP_MAX_MSG bytes. */
	wb_u32(&w, SFTP_MAX_MSG);
	for (size_t i = 0; i < SFTP_MAX_MSG; i++)
		wb_u8(&w, (uint8_t)i);
	assert_int_equal(ibuf_init(&ib, IBUF_SOFT), 0);
	/* Act: all but its last byte. */
	off += put_input(&ib, w.p, w.len - 1);
	assert_int_equal(off, w.len - 1);
	/* Check: not ready, no error. */
	assert_int_equal(ibuf_ready(&ib), 0);
	assert_int_equal(ibuf_next(&ib, &c, &len), 0);
	assert_int_equal(len, SFTP_MAX_MSG);
	/* Act and check: the last byte completes it. */
	assert_int_equal(put_input(&ib, w.p + off, 1), 1);
	assert_int_equal(ibuf_ready(&ib), 1);
	assert_int_equal(ibuf_next(&ib, &c, &len), 1);
	assert_int_equal(len, SFTP_MAX_MSG);
	assert_int_equal(c.left, SFTP_MAX_MSG);
	assert_memory_equal(c.p, w.p + 4, SFTP_MAX_MSG);
	assert_int_equal(ibuf_pending(&ib), 0);
	ibuf_free(&ib);
	wb_free(&w);
}

static void
test_ibuf_next_frame_error_after_good_packet(void **state)
{
	struct ibuf ib;
	struct cursor c;
	static const uint8_t in[] = { 0, 0, 0, 1, 0x42, 0, 4, 0, 1 };
	uint32_t len;

	(void)state;
	assert_int_equal(ibuf_init(&ib, IBUF_SOFT), 0);
	assert_int_equal(put_input(&ib, in, sizeof in), sizeof in);
	assert_int_equal(ibuf_next(&ib, &c, &len), 1);
	assert_int_equal(c.left, 1);
	assert_int_equal(c.p[0], 0x42);
	assert_int_equal(ibuf_ready(&ib), 1);
	assert_int_equal(ibuf_next(&ib, &c, &len), PKT_EFRAME);
	assert_int_equal(len, SFTP_MAX_MSG + 1);
	ibuf_free(&ib);
}

static void
test_ibuf_next_empty_buffer_wants_input(void **state)
{
	struct ibuf ib;
	struct cursor c;
	uint32_t len = 7;
	uint8_t *p;
	size_t room;

	(void)state;
	assert_int_equal(ibuf_init(&ib, IBUF_SOFT), 0);
	assert_int_equal(ibuf_ready(&ib), 0);
	assert_int_equal(ibuf_next(&ib, &c, &len), 0);
	assert_int_equal(len, 0);
	assert_int_equal(ibuf_pending(&ib), 0);
	ibuf_room(&ib, &p, &room);
	assert_ptr_equal(p, ib.buf);
	assert_int_equal(room, IBUF_SOFT);
	ibuf_free(&ib);
}

static void
test_ibuf_read_pipe_delivers_packets(void **state)
{
	struct ibuf ib;
	struct cursor c;
	static const uint8_t in[] = { 0, 0, 0, 2, 1, 2, 0, 0, 0, 1, 3 };
	uint32_t len;
	int fds[2];

	(void)state;
	assert_int_equal(pipe(fds), 0);
	assert_int_equal(write(fds[1], in, sizeof in), sizeof in);
	assert_int_equal(close(fds[1]), 0);
	assert_int_equal(ibuf_init(&ib, IBUF_SOFT), 0);
	assert_int_equal(ibuf_read(&ib, fds[0]), sizeof in);
	assert_int_equal(ibuf_next(&ib, &c, &len), 1);
	assert_int_equal(len, 2);
	assert_int_equal(c.p[0], 1);
	assert_int_equal(c.p[1], 2);
	assert_int_equal(ibuf_next(&ib, &c, &len), 1);
	assert_int_equal(len, 1);
	assert_int_equal(c.p[0], 3);
	assert_int_equal(ibuf_next(&ib, &c, &len), 0);
	/* End of file. */
	assert_int_equal(ibuf_read(&ib, fds[0]), 0);
	assert_int_equal(close(fds[0]), 0);
	ibuf_free(&ib);
}

static void
fill_past_size(void *arg)
{
	struct ibuf *ib = arg;

	ibuf_fill(ib, ib->size + 1);
}

static void
test_ibuf_fill_past_buffer_aborts(void **state)
{
	struct ibuf ib;

	(void)state;
	assert_int_equal(ibuf_init(&ib, 1000), 0);
	expect_abort(fill_past_size, &ib);
	ibuf_free(&ib);
}

/*
 * Pins.  A model of the loop and its workers: a generated stream of
 * packets (each byte a function of its packet's number and place, so a
 * byte overwritten shows), read as the room allows, parsed in order, some
 * pinned as WRITEs are and let go in any order.  No read may land on a
 * pinned byte, and every pinned packet must still be whole when let go.
 */
struct gen {
	uint64_t seq;		/* the packet being generated */
	uint32_t len;		/* its body's length */
	size_t at;		/* bytes of it (length word and body) given */
};

/* The byte of every place in packet seq's body. */
static uint8_t
gen_byte(uint64_t seq)
{
	return (uint8_t)(seq * 131 + (seq >> 8) + 1);
}

static void
gen_packet(struct gen *g, uint32_t (*len)(void))
{
	g->len = len();
	g->at = 0;
}

/* Writes the next n bytes of the stream to p. */
static void
gen_bytes(struct gen *g, uint8_t *p, size_t n, uint32_t (*len)(void))
{
	size_t k;

	while (n > 0) {
		if (g->at < 4) {
			*p++ = (uint8_t)(g->len >> (8 * (3 - g->at)));
			g->at++;
			n--;
		} else {
			k = 4 + (size_t)g->len - g->at;
			if (k > n)
				k = n;
			memset(p, gen_byte(g->seq), k);
			p += k;
			g->at += k;
			n -= k;
		}
		if (g->at == 4 + (size_t)g->len) {
			g->seq++;
			gen_packet(g, len);
		}
	}
}

static int
body_intact(const uint8_t *p, uint32_t len, uint64_t seq)
{
	return p[0] == gen_byte(seq) && memcmp(p, p + 1, len - 1) == 0;
}

struct held {
	unsigned pin;
	const uint8_t *p;
	uint32_t len;
	uint64_t seq;
};

/* Mostly small bodies, some of WRITE sizes, a few of the largest. */
static uint32_t
len_mixed(void)
{
	unsigned r = (unsigned)(rng_next() % 64);

	if (r < 36)
		return (uint32_t)rng_range(1, 200);
	if (r < 52)
		return (uint32_t)rng_range(1, 4096);
	if (r < 60)
		return (uint32_t)rng_range(32768, 32768 + 40);
	if (r < 62)
		return (uint32_t)rng_range(261120, 261120 + 40);
	return (uint32_t)rng_range(200000, SFTP_MAX_MSG);
}

/* A read's size: often small, at times all the room. */
static size_t
read_size(size_t room)
{
	size_t n;

	switch (rng_next() % 4) {
	case 0:
		n = rng_range(1, 16);
		break;
	case 1:
		n = rng_range(1, 4096);
		break;
	case 2:
		n = rng_range(1, 70000);
		break;
	default:
		n = room;
	}
	return n < room ? n : room;
}

static void
let_go(struct ibuf *ib, struct held *h, size_t *nheld, size_t i)
{
	if (!body_intact(h[i].p, h[i].len, h[i].seq)) {
		print_error("packet %llu was overwritten while pinned\n",
		    (unsigned long long)h[i].seq);
		fail();
	}
	ibuf_unpin(ib, h[i].pin);
	h[i] = h[--*nheld];
}

/*
 * Millions of steps (IBUF_MODEL_STEPS a window, a million unless told):
 * reads, parses, pins and unpins at random.  Checks
 * that no read lands on pinned bytes (at once, by range, and when let go,
 * by content), that packets come out whole and in order, that reading
 * stops only while pins hold the room, and that laps started while pins
 * were held (the wrap) are many.
 */
static void
test_ibuf_pins_model(void **state)
{
	static const size_t windows[][2] = {
		{ IBUF_SOFT, IBUF_HARD }, { 1000, IBUF_TAIL + 70000 },
		{ 4096, 3 * IBUF_TAIL },
	};
	const char *e = getenv("IBUF_MODEL_STEPS");
	size_t nsteps = e != NULL ? strtoul(e, NULL, 10) : 1000000;
	struct held h[IBUF_PINS];
	struct gen g;
	struct ibuf ib;
	struct cursor c;
	uint64_t next;
	size_t nheld, room, n, steps, wraps;
	uint32_t len;
	unsigned lap;
	uint8_t *p;
	int r;

	(void)state;
	for (size_t w = 0; w < sizeof windows / sizeof windows[0]; w++) {
		rng_seed(100 + w);
		assert_int_equal(ibuf_init_pinned(&ib, windows[w][0],
		    windows[w][1]), 0);
		memset(&g, 0, sizeof g);
		gen_packet(&g, len_mixed);
		next = 0;
		nheld = wraps = 0;
		for (steps = 0; steps < nsteps; steps++) {
			/* Workers end in any order. */
			if (nheld > 0 && rng_next() % 3 == 0) {
				let_go(&ib, h, &nheld,
				    rng_range(0, nheld - 1));
				continue;
			}
			r = ibuf_next(&ib, &c, &len);
			assert_true(r >= 0);
			if (r == 1) {
				assert_int_equal(c.left, len);
				if (!body_intact(c.p, len, next)) {
					print_error("packet %llu differs\n",
					    (unsigned long long)next);
					fail();
				}
				if (nheld < IBUF_PINS && rng_next() % 2 == 0) {
					h[nheld].pin = ibuf_pin(&ib, c.p);
					h[nheld].p = c.p;
					h[nheld].len = len;
					h[nheld].seq = next;
					nheld++;
				}
				next++;
				continue;
			}
			assert_int_equal(ib.pins, nheld);
			if (!ibuf_can_read(&ib)) {
				/* Only pins stop reading. */
				assert_true(nheld > 0);
				let_go(&ib, h, &nheld,
				    rng_range(0, nheld - 1));
				continue;
			}
			lap = ib.lap;
			ibuf_room(&ib, &p, &room);
			assert_true(room > 0);
			if (ib.lap != lap && nheld > 0)
				wraps++;
			assert_true(p >= ib.buf &&
			    room <= (size_t)(ib.buf + ib.size - p));
			n = read_size(room);
			for (size_t i = 0; i < nheld; i++)
				if (p < h[i].p + h[i].len && h[i].p < p + n) {
					print_error("a read of [%zu, +%zu) "
					    "lands on pinned [%zu, +%u)\n",
					    (size_t)(p - ib.buf), n,
					    (size_t)(h[i].p - ib.buf),
					    h[i].len);
					fail();
				}
			gen_bytes(&g, p, n, len_mixed);
			ibuf_fill(&ib, n);
		}
		while (nheld > 0)
			let_go(&ib, h, &nheld, 0);
		assert_int_equal(ib.pins, 0);
		assert_int_equal(ib.old, 0);
		/* The wrap with pins held is the case under test. */
		if (wraps <= nsteps / 10000 || next <= nsteps / 100) {
			print_error("window %zu: %zu laps begun with pins "
			    "held, %llu packets\n", w, wraps,
			    (unsigned long long)next);
			fail();
		}
		ibuf_free(&ib);
	}
}

static uint32_t
len_write(void)
{
	return 261120 + 29;	/* a WRITE of 255 KiB, as sftp sends */
}

/*
 * A pipeline of 255 KiB WRITEs on storage that waits: each one parsed is
 * pinned, and the oldest ends once 12 are held (the client's window), or
 * when reading cannot go on.  Reading must go on as the oldest ones end:
 * with fewer than 12 held, never more than two let go in a row before the
 * next read (IBUF_TAIL keeps a packet of room below the oldest pin), where
 * a buffer that waited for its last pin would let them all go.
 */
static void
test_ibuf_pinned_stream_never_drains(void **state)
{
	struct held h[IBUF_PINS];
	struct gen g;
	struct ibuf ib;
	struct cursor c;
	uint64_t next = 0;
	size_t nheld = 0, room, row = 0, most = 0, laps = 0;
	uint32_t len;
	unsigned lap;
	uint8_t *p;

	(void)state;
	assert_int_equal(ibuf_init_pinned(&ib, IBUF_SOFT, IBUF_HARD), 0);
	memset(&g, 0, sizeof g);
	gen_packet(&g, len_write);
	while (next < 4000) {
		while (ibuf_next(&ib, &c, &len) == 1) {
			assert_true(nheld < IBUF_PINS);
			h[nheld].pin = ibuf_pin(&ib, c.p);
			h[nheld].p = c.p;
			h[nheld].len = len;
			h[nheld].seq = next++;
			nheld++;
		}
		if (nheld >= 12 || !ibuf_can_read(&ib)) {
			/* Reading stopped: only pins can stop it. */
			if (nheld < 12 && ++row > most)
				most = row;
			assert_true(nheld > 0);
			let_go(&ib, h, &nheld, 0);	/* the oldest */
			/* let_go() moved the newest to 0: put it back. */
			if (nheld > 1) {
				struct held t = h[0];

				memmove(&h[0], &h[1], (nheld - 1) * sizeof *h);
				h[nheld - 1] = t;
			}
			continue;
		}
		row = 0;
		lap = ib.lap;
		ibuf_room(&ib, &p, &room);
		assert_true(room > 0);
		if (ib.lap != lap)
			laps++;
		gen_bytes(&g, p, room, len_write);
		ibuf_fill(&ib, room);
	}
	while (nheld > 0)
		let_go(&ib, h, &nheld, 0);
	assert_true(laps > 100);
	if (most > 2) {
		print_error("%zu pins let go in a row before a read\n", most);
		fail();
	}
	ibuf_free(&ib);
}

static void
pin_too_many(void *arg)
{
	struct ibuf *ib = arg;

	for (unsigned i = 0; i <= IBUF_PINS; i++)
		(void)ibuf_pin(ib, ib->buf);
}

static void
unpin_twice(void *arg)
{
	struct ibuf *ib = arg;
	unsigned pin = ibuf_pin(ib, ib->buf);

	ibuf_unpin(ib, pin);
	ibuf_unpin(ib, pin);
}

/*
 * With WRITEs pinned, a read first makes present as many bytes of its room
 * as the last read returned; without pins, none.  The reads come from a
 * file of 4 pages: the second is at its end and writes nothing, so a page
 * past the first 4 is in memory only if it was made so.
 */
static void
test_ibuf_pinned_read_makes_room_present(void **state)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	unsigned char vec[8];
	struct ibuf ib;
	uint8_t *data;
	FILE *f;
	int fd;

	(void)state;
	if (!unit_populate_works())
		skip();		/* the pages fault, as without it */
	assert_non_null(f = tmpfile());
	fd = fileno(f);
	assert_non_null(data = calloc(4, page));
	assert_int_equal(write(fd, data, 4 * page), (ssize_t)(4 * page));
	free(data);
	assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
	assert_int_equal(ibuf_init_pinned(&ib, 16 * page, 64 * page), 0);
	assert_int_equal(ibuf_read(&ib, fd), (ssize_t)(4 * page));
	assert_int_equal(ib.present, 0);	/* no pins: nothing ahead */
	(void)ibuf_pin(&ib, ib.buf);
	assert_int_equal(ibuf_read(&ib, fd), 0);
	assert_int_equal(ib.present, 8 * page);
	assert_int_equal(mincore(ib.buf, 8 * page, vec), 0);
	for (unsigned i = 0; i < 8; i++)
		assert_true(vec[i] & 1);
	/* The pages past the last read's worth are left to fault. */
	assert_int_equal(mincore(ib.buf + 8 * page, page, vec), 0);
	assert_false(vec[0] & 1);
	ibuf_free(&ib);
	(void)fclose(f);
}

/*
 * The pinned window past the reach of an unpinned read lies on whole huge
 * pages, advised against them; ibuf_bulk() advises for them those that no
 * read has reached, once, and a release with nothing buffered there
 * advises against them again.  The window without pins never does.
 */
static void
test_ibuf_bulk_window_on_huge_pages(void **state)
{
	struct ibuf ib;
	size_t h;

	(void)state;
	if (buf_huge_size() == 0 || !unit_huge_advice_works())
		skip();		/* no huge pages here, or none that show */
	assert_int_equal(ibuf_init_pinned(&ib, IBUF_SOFT, IBUF_HARD), 0);
	if ((h = ib.huge) == 0) {
		ibuf_free(&ib);
		skip();		/* larger than the window */
	}
	assert_true(ib.huge_from >= IBUF_SOFT + IBUF_TAIL);
	assert_int_equal((uintptr_t)(ib.buf + ib.huge_from) % h, 0);
	assert_true(ib.huge_to >= ib.huge_from + h);
	assert_true(ib.pin_size + ib.huge_to <= ib.map_size);
	assert_true(ib.pin_size + ib.size <= ib.map_size);
	assert_int_equal(unit_vm_flag(ib.buf, "nh"), 1);
	assert_int_equal(unit_vm_flag(ib.buf + ib.huge_from, "nh"), 1);
	ibuf_bulk(&ib);
	assert_true(ib.huge_on);
	assert_int_equal(ib.huge_lo, ib.huge_from);
	assert_int_equal(unit_vm_flag(ib.buf + ib.huge_from, "hg"), 1);
	assert_int_equal(unit_vm_flag(ib.buf + ib.huge_to - 1, "hg"), 1);
	assert_int_equal(unit_vm_flag(ib.buf + ib.huge_from - 1, "hg"), 0);
	ibuf_bulk(&ib);		/* once per burst */
	assert_int_equal(ib.huge_lo, ib.huge_from);
	ibuf_release(&ib);
	assert_false(ib.huge_on);
	assert_int_equal(unit_vm_flag(ib.buf + ib.huge_from, "nh"), 1);
	/* Bytes still buffered on a huge page: advised against all the same. */
	ibuf_bulk(&ib);
	assert_true(ib.huge_on);
	ib.end = ib.huge_lo + 100;
	ibuf_release(&ib);
	assert_false(ib.huge_on);
	assert_int_equal(unit_vm_flag(ib.buf + ib.huge_lo, "nh"), 1);
	ib.start = ib.end = ib.reached = 0;
	/* A read reached into the first huge page: the next ones only. */
	ib.reached = ib.huge_from + 1;
	ibuf_bulk(&ib);
	if (ib.huge_to > ib.huge_from + h) {
		assert_true(ib.huge_on);
		assert_int_equal(ib.huge_lo, ib.huge_from + h);
		assert_int_equal(unit_vm_flag(ib.buf + ib.huge_from, "hg"), 0);
		assert_int_equal(unit_vm_flag(ib.buf + ib.huge_lo, "hg"), 1);
	} else {
		assert_false(ib.huge_on);
	}
	ibuf_free(&ib);
	assert_int_equal(ibuf_init(&ib, IBUF_SOFT), 0);
	assert_int_equal(ib.huge, 0);
	ibuf_bulk(&ib);
	assert_false(ib.huge_on);
	ibuf_free(&ib);
}

static void
test_ibuf_pin_misuse_aborts(void **state)
{
	struct ibuf ib;

	(void)state;
	assert_int_equal(ibuf_init_pinned(&ib, 1000, 2000), 0);
	expect_abort(pin_too_many, &ib);
	expect_abort(unpin_twice, &ib);
	ibuf_free(&ib);
}

/* The cursor. */

static void
test_get_u8_empty_is_short(void **state)
{
	struct cursor c;
	uint8_t *b, v = 0xA5;

	(void)state;
	b = exact_copy("", 0, &c);
	assert_int_equal(pkt_get_u8(&c, &v), PKT_ESHORT);
	assert_int_equal(v, 0);
	assert_cursor_at(&c, b, 0);
	free(b);
}

static void
test_get_u8_one_byte(void **state)
{
	struct cursor c;
	uint8_t *b, v = 0;

	(void)state;
	b = exact_copy("\xfe", 1, &c);
	assert_int_equal(pkt_get_u8(&c, &v), 0);
	assert_int_equal(v, 0xfe);
	assert_cursor_at(&c, b + 1, 0);
	assert_int_equal(pkt_get_u8(&c, &v), PKT_ESHORT);
	assert_cursor_at(&c, b + 1, 0);
	free(b);
}

static void
test_get_u8_two_bytes_leaves_one(void **state)
{
	struct cursor c;
	uint8_t *b, v = 0;

	(void)state;
	b = exact_copy("\x01\x02", 2, &c);
	assert_int_equal(pkt_get_u8(&c, &v), 0);
	assert_int_equal(v, 1);
	assert_cursor_at(&c, b + 1, 1);
	free(b);
}

static void
test_get_u32_three_bytes_is_short(void **state)
{
	struct cursor c;
	uint32_t v = 0xA5A5A5A5;
	uint8_t *b;

	(void)state;
	for (size_t n = 0; n < 4; n++) {
		b = exact_copy("\x01\x02\x03", n, &c);
		v = 0xA5A5A5A5;
		assert_int_equal(pkt_get_u32(&c, &v), PKT_ESHORT);
		assert_int_equal(v, 0);
		assert_cursor_at(&c, b, n);
		free(b);
	}
}

static void
test_get_u32_four_bytes(void **state)
{
	struct cursor c;
	uint32_t v = 0;
	uint8_t *b;

	(void)state;
	b = exact_copy("\x81\x02\x03\x04", 4, &c);
	assert_int_equal(pkt_get_u32(&c, &v), 0);
	assert_int_equal(v, 0x81020304);
	assert_cursor_at(&c, b + 4, 0);
	free(b);
}

static void
test_get_u32_five_bytes_leaves_one(void **state)
{
	struct cursor c;
	uint32_t v = 0;
	uint8_t *b;

	(void)state;
	b = exact_copy("\xff\xff\xff\xfe\x09", 5, &c);
	assert_int_equal(pkt_get_u32(&c, &v), 0);
	assert_int_equal(v, 0xfffffffe);
	assert_cursor_at(&c, b + 4, 1);
	free(b);
}

static void
test_get_u64_seven_bytes_is_short(void **state)
{
	struct cursor c;
	uint64_t v;
	uint8_t *b;

	(void)state;
	for (size_t n = 0; n < 8; n++) {
		b = exact_copy("\x01\x02\x03\x04\x05\x06\x07", n, &c);
		v = 0xA5A5A5A5A5A5A5A5ULL;
		assert_int_equal(pkt_get_u64(&c, &v), PKT_ESHORT);
		assert_int_equal(v, 0);
		assert_cursor_at(&c, b, n);
		free(b);
	}
}

static void
test_get_u64_eight_bytes(void **state)
{
	struct cursor c;
	uint64_t v = 0;
	uint8_t *b;

	(void)state;
	b = exact_copy("\x81\x02\x03\x04\x05\x06\x07\x08", 8, &c);
	assert_int_equal(pkt_get_u64(&c, &v), 0);
	assert_true(v == 0x8102030405060708ULL);
	assert_cursor_at(&c, b + 8, 0);
	free(b);
}

static void
test_get_u64_nine_bytes_leaves_one(void **state)
{
	struct cursor c;
	uint64_t v = 0;
	uint8_t *b;

	(void)state;
	b = exact_copy("\xff\xff\xff\xff\xff\xff\xff\xff\x01", 9, &c);
	assert_int_equal(pkt_get_u64(&c, &v), 0);
	assert_true(v == UINT64_MAX);
	assert_cursor_at(&c, b + 8, 1);
	free(b);
}

/* "\0\0\0\5hello" and one byte more. */
static const uint8_t str5[] = "\0\0\0\5hello!";

static void
test_get_string_header_short(void **state)
{
	struct cursor c;
	const uint8_t *d;
	uint32_t len;
	uint8_t *b;

	(void)state;
	for (size_t n = 0; n < 4; n++) {
		b = exact_copy(str5, n, &c);
		d = str5;
		len = 77;
		assert_int_equal(pkt_get_string(&c, &d, &len), PKT_ESHORT);
		assert_null(d);
		assert_int_equal(len, 0);
		assert_cursor_at(&c, b, n);
		free(b);
	}
}

static void
test_get_string_one_byte_short(void **state)
{
	struct cursor c;
	const uint8_t *d = str5;
	uint32_t len = 77;
	uint8_t *b;

	(void)state;
	b = exact_copy(str5, 8, &c);
	assert_int_equal(pkt_get_string(&c, &d, &len), PKT_ESHORT);
	assert_null(d);
	assert_int_equal(len, 0);
	assert_cursor_at(&c, b, 8);
	free(b);
}

static void
test_get_string_exact(void **state)
{
	struct cursor c;
	const uint8_t *d = NULL;
	uint32_t len = 0;
	uint8_t *b;

	(void)state;
	b = exact_copy(str5, 9, &c);
	assert_int_equal(pkt_get_string(&c, &d, &len), 0);
	assert_int_equal(len, 5);
	assert_ptr_equal(d, b + 4);
	assert_memory_equal(d, "hello", 5);
	assert_cursor_at(&c, b + 9, 0);
	free(b);
}

static void
test_get_string_one_byte_more_leaves_one(void **state)
{
	struct cursor c;
	const uint8_t *d = NULL;
	uint32_t len = 0;
	uint8_t *b;

	(void)state;
	b = exact_copy(str5, 10, &c);
	assert_int_equal(pkt_get_string(&c, &d, &len), 0);
	assert_int_equal(len, 5);
	assert_cursor_at(&c, b + 9, 1);
	free(b);
}

static void
test_get_string_empty(void **state)
{
	struct cursor c;
	const uint8_t *d = NULL;
	uint32_t len = 9;
	uint8_t *b;

	(void)state;
	b = exact_copy("\0\0\0\0", 4, &c);
	assert_int_equal(pkt_get_string(&c, &d, &len), 0);
	assert_int_equal(len, 0);
	assert_cursor_at(&c, b + 4, 0);
	free(b);
}

static void
test_get_string_length_all_ones_is_short(void **state)
{
	struct cursor c;
	const uint8_t *d = str5;
	uint32_t len = 77;
	uint8_t *b;

	(void)state;
	b = exact_copy("\xff\xff\xff\xff" "abcdefgh", 12, &c);
	assert_int_equal(pkt_get_string(&c, &d, &len), PKT_ESHORT);
	assert_null(d);
	assert_int_equal(len, 0);
	assert_cursor_at(&c, b, 12);
	free(b);
}

static void
test_get_handle_slot_and_generation(void **state)
{
	struct cursor c;
	uint32_t slot = 77, gen = 77;
	uint8_t *b;

	(void)state;
	b = exact_copy("\0\0\0\x08" "\x01\x02\x03\x04" "\xff\0\0\x01" "z",
	    13, &c);
	assert_int_equal(pkt_get_handle(&c, &slot, &gen), 0);
	assert_int_equal(slot, 0x01020304);
	assert_int_equal(gen, 0xff000001);
	assert_cursor_at(&c, b + 12, 1);
	free(b);
}

static void
test_get_handle_wrong_length_names_no_slot(void **state)
{
	static const uint32_t lens[] = { 0, 1, 4, 7, 9, 16, 256 };
	struct wbuf w = { 0 };
	uint8_t bytes[256];
	struct cursor c;
	uint32_t slot, gen;
	uint8_t *b;

	(void)state;
	/* A valid handle's bytes in front, but not its length. */
	memset(bytes, 0, sizeof bytes);
	bytes[7] = 1;
	for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
		w.len = 0;
		wb_string(&w, bytes, lens[i]);
		wb_u8(&w, 'z');
		b = exact_copy(w.p, w.len, &c);
		slot = gen = 77;
		assert_int_equal(pkt_get_handle(&c, &slot, &gen), 0);
		assert_int_equal(slot, PKT_HANDLE_NONE);
		assert_int_equal(gen, 0);
		assert_cursor_at(&c, b + 4 + lens[i], 1);
		free(b);
	}
	wb_free(&w);
}

static void
test_get_handle_short_leaves_cursor(void **state)
{
	static const uint8_t h[] = { 0, 0, 0, 8, 0, 0, 0, 3, 0, 0, 0, 1 };
	struct cursor c;
	uint32_t slot, gen;
	uint8_t *b;

	(void)state;
	for (size_t n = 0; n < sizeof h; n++) {
		b = exact_copy(h, n, &c);
		slot = gen = 77;
		assert_int_equal(pkt_get_handle(&c, &slot, &gen), PKT_ESHORT);
		assert_int_equal(slot, PKT_HANDLE_NONE);
		assert_int_equal(gen, 0);
		assert_cursor_at(&c, b, n);
		free(b);
	}
}

static void
test_get_path_short(void **state)
{
	char buf[64];
	struct cursor c;
	uint8_t *b;

	(void)state;
	for (size_t n = 0; n < 9; n++) {
		b = exact_copy(str5, n, &c);
		memset(buf, 'x', sizeof buf);
		assert_int_equal(pkt_get_path(&c, buf, sizeof buf),
		    PKT_ESHORT);
		assert_int_equal(buf[0], '\0');
		assert_cursor_at(&c, b, n);
		free(b);
	}
}

static void
test_get_path_exact(void **state)
{
	char buf[64];
	struct cursor c;
	uint8_t *b;

	(void)state;
	b = exact_copy(str5, 9, &c);
	assert_int_equal(pkt_get_path(&c, buf, sizeof buf), 0);
	assert_string_equal(buf, "hello");
	assert_cursor_at(&c, b + 9, 0);
	free(b);
}

static void
test_get_path_one_byte_more_leaves_one(void **state)
{
	char buf[64];
	struct cursor c;
	uint8_t *b;

	(void)state;
	b = exact_copy(str5, 10, &c);
	assert_int_equal(pkt_get_path(&c, buf, sizeof buf), 0);
	assert_string_equal(buf, "hello");
	assert_cursor_at(&c, b + 9, 1);
	free(b);
}

static void
test_get_path_embedded_nul_is_enul(void **state)
{
	static const char *const in[] = { "\0\0\0\5\0ello", "\0\0\0\5he\0lo",
		"\0\0\0\5hell\0" };
	char buf[64];
	struct cursor c;
	uint8_t *b;

	(void)state;
	for (size_t i = 0; i < sizeof in / sizeof in[0]; i++) {
		b = exact_copy(in[i], 9, &c);
		memset(buf, 'x', sizeof buf);
		assert_int_equal(pkt_get_path(&c, buf, sizeof buf), PKT_ENUL);
		assert_int_equal(buf[0], '\0');
		assert_cursor_at(&c, b, 9);
		free(b);
	}
}

static void
test_get_path_size_equal_to_length_is_too_long(void **state)
{
	char buf[5];
	struct cursor c;
	uint8_t *b;

	(void)state;
	b = exact_copy(str5, 9, &c);
	memset(buf, 'x', sizeof buf);
	assert_int_equal(pkt_get_path(&c, buf, 5), PKT_ETOOLONG);
	assert_int_equal(buf[0], '\0');
	assert_cursor_at(&c, b, 9);
	/* A smaller buffer, and none at all. */
	assert_int_equal(pkt_get_path(&c, buf, 1), PKT_ETOOLONG);
	assert_int_equal(pkt_get_path(&c, NULL, 0), PKT_ETOOLONG);
	assert_cursor_at(&c, b, 9);
	free(b);
}

static void
test_get_path_size_length_plus_one_fits(void **state)
{
	char *buf;
	struct cursor c;
	uint8_t *b;

	(void)state;
	/* An exact-size buffer: a write past the NUL would be caught. */
	buf = malloc(6);
	assert_non_null(buf);
	b = exact_copy(str5, 9, &c);
	assert_int_equal(pkt_get_path(&c, buf, 6), 0);
	assert_string_equal(buf, "hello");
	assert_cursor_at(&c, b + 9, 0);
	free(b);
	free(buf);
}

static void
test_get_path_empty_string(void **state)
{
	char buf[1] = { 'x' };
	struct cursor c;
	uint8_t *b;

	(void)state;
	b = exact_copy("\0\0\0\0", 4, &c);
	assert_int_equal(pkt_get_path(&c, buf, 1), 0);
	assert_int_equal(buf[0], '\0');
	assert_cursor_at(&c, b + 4, 0);
	free(b);
}

static void
test_get_path_length_all_ones_is_short(void **state)
{
	char buf[64];
	struct cursor c;
	uint8_t *b;

	(void)state;
	b = exact_copy("\xff\xff\xff\xff/etc", 8, &c);
	assert_int_equal(pkt_get_path(&c, buf, sizeof buf), PKT_ESHORT);
	assert_cursor_at(&c, b, 8);
	free(b);
}

/*
 * Encodes ATTRS with the given flags, distinct values in each field and
 * npairs extended pairs.  Fills want with what a parse must give.
 */
static void
encode_attrs(struct wbuf *w, uint32_t flags, uint32_t npairs,
    struct sftp_attrs *want)
{
	memset(want, 0, sizeof *want);
	want->flags = flags;
	if (flags & SSH_FILEXFER_ATTR_SIZE)
		want->size = 0x0102030405060708ULL;
	if (flags & SSH_FILEXFER_ATTR_UIDGID) {
		want->uid = 0x11121314;
		want->gid = 0x21222324;
	}
	if (flags & SSH_FILEXFER_ATTR_PERMISSIONS)
		want->perm = 0100644;
	if (flags & SSH_FILEXFER_ATTR_ACMODTIME) {
		want->atime = 0x31323334;
		want->mtime = 0x41424344;
	}
	wb_attrs(w, want);
	if (flags & SSH_FILEXFER_ATTR_EXTENDED) {
		wb_u32(w, npairs);
		for (uint32_t i = 0; i < npairs; i++) {
			wb_cstring(w, "name@example.com");
			wb_cstring(w, i % 2 ? "" : "value");
		}
	}
}

static void
check_attrs_bounds(uint32_t flags, uint32_t npairs)
{
	struct sftp_attrs a, want, zero;
	struct wbuf w = { 0 };
	struct cursor c;
	uint8_t *b;

	memset(&zero, 0, sizeof zero);
	encode_attrs(&w, flags, npairs, &want);
	/* Every shorter prefix: short, cleared, cursor unchanged. */
	for (size_t n = 0; n < w.len; n++) {
		b = exact_copy(w.p, n, &c);
		memset(&a, 0xA5, sizeof a);
		if (pkt_get_attrs(&c, &a) != PKT_ESHORT) {
			print_error("flags 0x%x pairs %u: prefix %zu of %zu "
			    "not short\n", flags, npairs, n, w.len);
			fail();
		}
		assert_memory_equal(&a, &zero, sizeof a);
		assert_cursor_at(&c, b, n);
		free(b);
	}
	/* Exactly n. */
	b = exact_copy(w.p, w.len, &c);
	memset(&a, 0xA5, sizeof a);
	assert_int_equal(pkt_get_attrs(&c, &a), 0);
	assert_memory_equal(&a, &want, sizeof a);
	assert_cursor_at(&c, b + w.len, 0);
	free(b);
	/* n + 1: one byte left over. */
	wb_u8(&w, 0xEE);
	b = exact_copy(w.p, w.len, &c);
	assert_int_equal(pkt_get_attrs(&c, &a), 0);
	assert_memory_equal(&a, &want, sizeof a);
	assert_cursor_at(&c, b + w.len - 1, 1);
	free(b);
	wb_free(&w);
}

static void
test_get_attrs_every_flag_combination(void **state)
{
	(void)state;
	for (uint32_t f = 0; f < 16; f++) {
		check_attrs_bounds(f, 0);
		for (uint32_t npairs = 0; npairs < 3; npairs++)
			check_attrs_bounds(f | SSH_FILEXFER_ATTR_EXTENDED,
			    npairs);
	}
}

static void
test_get_attrs_extended_count_over_limit_is_bad(void **state)
{
	static const uint32_t counts[] = { SFTP_MAX_EXTENDED + 1, 0x7fffffff,
		0xffffffff };
	struct sftp_attrs a, zero;
	struct wbuf w = { 0 };
	struct cursor c;
	uint8_t *b;

	(void)state;
	memset(&zero, 0, sizeof zero);
	for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
		w.len = 0;
		wb_u32(&w, SSH_FILEXFER_ATTR_EXTENDED | SSH_FILEXFER_ATTR_SIZE);
		wb_u64(&w, 42);
		wb_u32(&w, counts[i]);
		wb_cstring(&w, "a");
		wb_cstring(&w, "b");
		b = exact_copy(w.p, w.len, &c);
		memset(&a, 0xA5, sizeof a);
		assert_int_equal(pkt_get_attrs(&c, &a), PKT_EBADATTR);
		assert_memory_equal(&a, &zero, sizeof a);
		assert_cursor_at(&c, b, w.len);
		free(b);
	}
	wb_free(&w);
}

static void
test_get_attrs_extended_count_at_limit_is_accepted(void **state)
{
	struct sftp_attrs a;
	struct wbuf w = { 0 };
	struct cursor c;
	uint8_t *b;

	(void)state;
	/* Set up: SFTP_MAX_EXTENDED pairs of empty strings. */
	wb_u32(&w, SSH_FILEXFER_ATTR_EXTENDED);
	wb_u32(&w, SFTP_MAX_EXTENDED);
	for (uint32_t i = 0; i < SFTP_MAX_EXTENDED; i++)
		wb_u64(&w, 0);
	/* Check: all of them parse. */
	b = exact_copy(w.p, w.len, &c);
	assert_int_equal(pkt_get_attrs(&c, &a), 0);
	assert_int_equal(a.flags, SSH_FILEXFER_ATTR_EXTENDED);
	assert_cursor_at(&c, b + w.len, 0);
	free(b);
	/* Check: one pair short, not a bad count. */
	b = exact_copy(w.p, w.len - 8, &c);
	assert_int_equal(pkt_get_attrs(&c, &a), PKT_ESHORT);
	assert_cursor_at(&c, b, w.len - 8);
	free(b);
	wb_free(&w);
}

static void
test_get_attrs_extended_pairs_truncated_is_short(void **state)
{
	struct sftp_attrs a;
	struct wbuf w = { 0 };
	struct cursor c;
	uint8_t *b;

	(void)state;
	/* Two pairs announced; one and a name given. */
	wb_u32(&w, SSH_FILEXFER_ATTR_EXTENDED);
	wb_u32(&w, 2);
	wb_cstring(&w, "n1");
	wb_cstring(&w, "v1");
	wb_cstring(&w, "n2");
	b = exact_copy(w.p, w.len, &c);
	assert_int_equal(pkt_get_attrs(&c, &a), PKT_ESHORT);
	assert_int_equal(a.flags, 0);
	assert_cursor_at(&c, b, w.len);
	free(b);
	/* A value whose length runs past the end. */
	wb_u32(&w, 100);
	wb_put(&w, "xyz", 3);
	b = exact_copy(w.p, w.len, &c);
	assert_int_equal(pkt_get_attrs(&c, &a), PKT_ESHORT);
	assert_cursor_at(&c, b, w.len);
	free(b);
	wb_free(&w);
}

/* Request bodies. */

static const uint8_t handle8[8] = { 0, 0, 0, 3, 0, 0, 0, 1 };
static const uint8_t ids8[8] = { 0, 0, 0, 0, 0, 0, 3, 0xe8 };

static void
encode_request(struct wbuf *w, const struct shape *sh)
{
	struct sftp_attrs want;

	for (const enum field *f = sh->fields; *f != F_END; f++) {
		switch (*f) {
		case F_TYPE:
			wb_u8(w, sh->type);
			break;
		case F_ID:
			wb_u32(w, 0x01020304);
			break;
		case F_EXT:
			wb_cstring(w, sh->ext);
			break;
		case F_U32:
			wb_u32(w, SSH_FXF_READ | SSH_FXF_WRITE);
			break;
		case F_U64:
			wb_u64(w, 0x0000000100000002ULL);
			break;
		case F_HANDLE:
			wb_string(w, handle8, sizeof handle8);
			break;
		case F_IDS:
			wb_string(w, ids8, sizeof ids8);
			break;
		case F_PATH:
			wb_cstring(w, "/some/dir/file.txt");
			break;
		case F_ATTRS:
			encode_attrs(w, 0x8000000F, 1, &want);
			break;
		default:
			fail();
		}
	}
}

/*
 * Parses a body with the getters in the order of the handler, as process()
 * and the handler together do.  Returns 0 or the first error.
 */
static int
parse_request(struct cursor *c, const struct shape *sh)
{
	char path[PATH_MAX];
	struct sftp_attrs a;
	const uint8_t *s;
	uint32_t u32, len, slot, gen;
	uint64_t u64;
	uint8_t u8;
	int r;

	for (const enum field *f = sh->fields; *f != F_END; f++) {
		switch (*f) {
		case F_TYPE:
			if ((r = pkt_get_u8(c, &u8)) != 0)
				return r;
			assert_int_equal(u8, sh->type);
			break;
		case F_ID:
		case F_U32:
			if ((r = pkt_get_u32(c, &u32)) != 0)
				return r;
			break;
		case F_EXT:
			if ((r = pkt_get_string(c, &s, &len)) != 0)
				return r;
			assert_int_equal(len, strlen(sh->ext));
			assert_memory_equal(s, sh->ext, len);
			break;
		case F_U64:
			if ((r = pkt_get_u64(c, &u64)) != 0)
				return r;
			break;
		case F_HANDLE:
			if ((r = pkt_get_handle(c, &slot, &gen)) != 0)
				return r;
			assert_int_equal(slot, 3);
			assert_int_equal(gen, 1);
			break;
		case F_IDS:
			if ((r = pkt_get_string(c, &s, &len)) != 0)
				return r;
			assert_int_equal(len, 8);
			break;
		case F_PATH:
			if ((r = pkt_get_path(c, path, sizeof path)) != 0)
				return r;
			assert_string_equal(path, "/some/dir/file.txt");
			break;
		case F_ATTRS:
			if ((r = pkt_get_attrs(c, &a)) != 0)
				return r;
			assert_int_equal(a.flags, 0x8000000F);
			break;
		default:
			fail();
		}
	}
	return 0;
}

static void
test_getters_request_bodies_parse_whole(void **state)
{
	struct wbuf w = { 0 };
	struct cursor c;
	uint8_t *b;

	(void)state;
	for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
		w.len = 0;
		encode_request(&w, &shapes[i]);
		b = exact_copy(w.p, w.len, &c);
		if (parse_request(&c, &shapes[i]) != 0) {
			print_error("%s: whole body does not parse\n",
			    shapes[i].name);
			fail();
		}
		assert_cursor_at(&c, b + w.len, 0);
		free(b);
	}
	wb_free(&w);
}

static void
test_getters_request_prefixes_are_short(void **state)
{
	struct wbuf w = { 0 };
	struct cursor c;
	uint8_t *b;
	int r;

	(void)state;
	for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
		w.len = 0;
		encode_request(&w, &shapes[i]);
		for (size_t n = 0; n < w.len; n++) {
			/* Exactly n bytes on the heap: ASan sees over-reads. */
			b = exact_copy(w.p, n, &c);
			if ((r = parse_request(&c, &shapes[i])) != PKT_ESHORT) {
				print_error("%s: prefix %zu of %zu gives %d, "
				    "want %d\n", shapes[i].name, n, w.len, r,
				    PKT_ESHORT);
				fail();
			}
			assert_true(c.left <= n);
			free(b);
		}
	}
	wb_free(&w);
}

/* Replies. */

static void
test_pkt_reply_status_fixed_message(void **state)
{
	struct oqueue *q = *state;
	/* clang-format off */
	static const uint8_t want[] = {
		0, 0, 0, 29,			/* length */
		SSH_FXP_STATUS,
		0, 0, 0, 7,			/* id */
		0, 0, 0, SSH_FX_NO_SUCH_FILE,
		0, 0, 0, 12, 'N', 'o', ' ', 's', 'u', 'c', 'h', ' ', 'f',
		'i', 'l', 'e',
		0, 0, 0, 0,			/* language tag */
	};
	/* clang-format on */

	assert_int_equal(pkt_reply_status(q, 7, SSH_FX_NO_SUCH_FILE, NULL),
	    0);
	assert_queue(q, want, sizeof want);
	assert_int_equal(q->nreplies, 1);
	assert_int_equal(oq_pending(q), sizeof want);
}

static void
test_pkt_reply_status_own_message(void **state)
{
	struct oqueue *q = *state;
	/* clang-format off */
	static const uint8_t want[] = {
		0, 0, 0, 19, SSH_FXP_STATUS, 0xff, 0xff, 0xff, 0xff,
		0, 0, 0, SSH_FX_FAILURE, 0, 0, 0, 2, 'n', 'o', 0, 0, 0, 0,
	};
	/* clang-format on */

	assert_int_equal(pkt_reply_status(q, 0xffffffff, SSH_FX_FAILURE,
	    "no"), 0);
	assert_queue(q, want, sizeof want);
}

static void
test_pkt_reply_status_unknown_code(void **state)
{
	struct oqueue *q = *state;
	/* clang-format off */
	static const uint8_t want[] = {
		0, 0, 0, 30, SSH_FXP_STATUS, 0, 0, 0, 1, 0, 0, 0, 99,
		0, 0, 0, 13, 'U', 'n', 'k', 'n', 'o', 'w', 'n', ' ', 'e', 'r',
		'r', 'o', 'r', 0, 0, 0, 0,
	};
	/* clang-format on */

	assert_int_equal(pkt_reply_status(q, 1, 99, NULL), 0);
	assert_queue(q, want, sizeof want);
}

static void
test_pkt_reply_handle_bytes(void **state)
{
	struct oqueue *q = *state;
	/* clang-format off */
	static const uint8_t want[] = {
		0, 0, 0, 17, SSH_FXP_HANDLE, 0, 0, 0, 9,
		0, 0, 0, 8, 0, 0, 0, 3, 0, 0, 0, 1,
	};
	/* clang-format on */

	assert_int_equal(pkt_reply_handle(q, 9, 3, 1), 0);
	assert_queue(q, want, sizeof want);
}

static void
test_pkt_reply_attrs_all_flags(void **state)
{
	struct oqueue *q = *state;
	struct sftp_attrs a = {
		.flags = 0x0F,
		.size = 0x0102030405060708ULL,
		.uid = 1000,
		.gid = 1001,
		.perm = 0100644,
		.atime = 0x5f000000,
		.mtime = 0x60000001,
	};
	/* clang-format off */
	static const uint8_t want[] = {
		0, 0, 0, 37, SSH_FXP_ATTRS, 0, 0, 0, 5,
		0, 0, 0, 0x0f,				/* flags */
		1, 2, 3, 4, 5, 6, 7, 8,			/* size */
		0, 0, 0x03, 0xe8, 0, 0, 0x03, 0xe9,	/* uid gid */
		0, 0, 0x81, 0xa4,			/* 0100644 */
		0x5f, 0, 0, 0, 0x60, 0, 0, 1,		/* atime mtime */
	};
	/* clang-format on */

	assert_int_equal(pkt_reply_attrs(q, 5, &a), 0);
	assert_queue(q, want, sizeof want);
}

static void
test_pkt_reply_attrs_extended_flag_dropped(void **state)
{
	struct oqueue *q = *state;
	struct sftp_attrs a = {
		.flags = SSH_FILEXFER_ATTR_EXTENDED |
		    SSH_FILEXFER_ATTR_PERMISSIONS,
		.perm = 0755,
	};
	/* clang-format off */
	static const uint8_t want[] = {
		0, 0, 0, 13, SSH_FXP_ATTRS, 0, 0, 0, 5,
		0, 0, 0, 0x04, 0, 0, 0x01, 0xed,
	};
	/* clang-format on */

	assert_int_equal(pkt_reply_attrs(q, 5, &a), 0);
	assert_queue(q, want, sizeof want);
}

static void
test_pkt_name_add_several_entries(void **state)
{
	struct oqueue *q = *state;
	struct sftp_attrs none = { 0 };
	struct sftp_attrs sz = { .flags = SSH_FILEXFER_ATTR_SIZE, .size = 6 };
	struct reply r;
	/* clang-format off */
	static const uint8_t want[] = {
		0, 0, 0, 49, SSH_FXP_NAME, 0, 0, 0, 3,
		0, 0, 0, 2,				/* count */
		0, 0, 0, 1, 'a', 0, 0, 0, 2, 'l', 'a',
		0, 0, 0, 0,
		0, 0, 0, 2, 'b', 'b', 0, 0, 0, 3, 'l', 'b', 'b',
		0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 6,
	};
	/* clang-format on */

	assert_int_equal(pkt_name_begin(q, &r, 3), 0);
	assert_int_equal(pkt_name_add(q, &r, "a", "la", &none), 0);
	assert_int_equal(pkt_name_add(q, &r, "bb", "lbb", &sz), 0);
	assert_int_equal(r.count, 2);
	pkt_name_end(q, &r);
	assert_queue(q, want, sizeof want);
	assert_int_equal(q->nreplies, 1);
}

static void
test_pkt_name_end_no_entries(void **state)
{
	struct oqueue *q = *state;
	struct reply r;
	/* clang-format off */
	static const uint8_t want[] = {
		0, 0, 0, 9, SSH_FXP_NAME, 0, 0, 0, 3, 0, 0, 0, 0,
	};
	/* clang-format on */

	assert_int_equal(pkt_name_begin(q, &r, 3), 0);
	pkt_name_end(q, &r);
	assert_queue(q, want, sizeof want);
}

static void
test_pkt_reply_name1_bytes(void **state)
{
	struct oqueue *q = *state;
	/* clang-format off */
	static const uint8_t want[] = {
		0, 0, 0, 25, SSH_FXP_NAME, 0, 0, 0, 5, 0, 0, 0, 1,
		0, 0, 0, 2, '/', 'x', 0, 0, 0, 2, '/', 'x', 0, 0, 0, 0,
	};
	/* clang-format on */

	assert_int_equal(pkt_reply_name1(q, 5, "/x"), 0);
	assert_queue(q, want, sizeof want);
}

static void
test_pkt_data_end_less_than_max(void **state)
{
	struct oqueue *q = *state;
	struct reply r;
	uint8_t *p;
	/* clang-format off */
	static const uint8_t want[] = {
		0, 0, 0, 14, SSH_FXP_DATA, 0, 0, 0, 11, 0, 0, 0, 5,
		'h', 'e', 'l', 'l', 'o',
	};
	/* clang-format on */

	p = pkt_data_begin(q, &r, 11, 100);
	assert_non_null(p);
	assert_ptr_equal(p, q->buf + 13);
	memcpy(p, "hello", 5);
	pkt_data_end(q, &r, 5);
	assert_queue(q, want, sizeof want);
	assert_int_equal(q->nreplies, 1);
}

static void
test_pkt_data_end_zero_bytes(void **state)
{
	struct oqueue *q = *state;
	struct reply r;
	/* clang-format off */
	static const uint8_t want[] = {
		0, 0, 0, 9, SSH_FXP_DATA, 0, 0, 0, 11, 0, 0, 0, 0,
	};
	/* clang-format on */

	assert_non_null(pkt_data_begin(q, &r, 11, SFTP_MAX_READ));
	pkt_data_end(q, &r, 0);
	assert_queue(q, want, sizeof want);
}

static void
test_pkt_data_begin_largest_fits(void **state)
{
	struct oqueue *q = *state;
	struct reply r;
	uint8_t *p;

	/* 4 length, 1 type, 4 id, 4 data length: SFTP_MAX_MSG - 9 fits. */
	p = pkt_data_begin(q, &r, 1, SFTP_MAX_MSG - 9);
	assert_non_null(p);
	memset(p, 0xCC, SFTP_MAX_MSG - 9);
	pkt_data_end(q, &r, SFTP_MAX_MSG - 9);
	assert_int_equal(q->len, SFTP_MAX_MSG + 4);
	assert_int_equal(q->buf[0], 0x00);
	assert_int_equal(q->buf[1], 0x04);
	assert_int_equal(q->buf[2], 0x00);
	assert_int_equal(q->buf[3], 0x00);
}

static void
test_pkt_data_begin_past_max_is_null(void **state)
{
	struct oqueue *q = *state;
	struct reply r;

	assert_int_equal(pkt_reply_status(q, 1, 0, NULL), 0);
	assert_null(pkt_data_begin(q, &r, 1, SFTP_MAX_MSG - 8));
	/* The queue is as it was, and takes the next reply. */
	assert_int_equal(q->len, 28);
	assert_int_equal(q->nreplies, 1);
	assert_non_null(pkt_data_begin(q, &r, 1, SFTP_MAX_MSG - 9));
}

static void
test_pkt_data_begin_huge_max_is_null(void **state)
{
	struct oqueue *q = *state;
	struct reply r;

	/* 8 + max must not wrap around in the bounds check. */
	assert_null(pkt_data_begin(q, &r, 1, SIZE_MAX - 7));
	assert_null(pkt_data_begin(q, &r, 1, SIZE_MAX));
	assert_int_equal(q->len, 0);
}

static void
test_pkt_begin_extended_reply_bytes(void **state)
{
	struct oqueue *q = *state;
	struct reply r;
	/* clang-format off */
	static const uint8_t want[] = {
		0, 0, 0, 25, SSH_FXP_EXTENDED_REPLY, 0, 0, 0, 4,
		0, 0, 0, 0, 0, 4, 0, 0,			/* u64 */
		0x7f,					/* u8 */
		0, 0, 0, 3, 'a', 'b', 'c',		/* string */
		0, 0, 0, 0,				/* cstring "" */
	};
	/* clang-format on */

	assert_int_equal(pkt_begin(q, &r, SSH_FXP_EXTENDED_REPLY), 0);
	assert_int_equal(pkt_put_u32(q, 4), 0);
	assert_int_equal(pkt_put_u64(q, SFTP_MAX_MSG), 0);
	assert_int_equal(pkt_put_u8(q, 0x7f), 0);
	assert_int_equal(pkt_put_string(q, "abc", 3), 0);
	assert_int_equal(pkt_put_cstring(q, ""), 0);
	assert_int_equal(pkt_reply_len(q, &r), sizeof want);
	pkt_end(q, &r);
	assert_queue(q, want, sizeof want);
	assert_int_equal(q->nreplies, 1);
}

static void
test_pkt_cancel_restores_queue(void **state)
{
	struct oqueue *q = *state;
	uint8_t saved[64];
	struct reply r;
	size_t len;

	/* Set up: one complete reply. */
	assert_int_equal(pkt_reply_handle(q, 1, 3, 1), 0);
	len = q->len;
	memcpy(saved, q->buf, len);
	/* Act: a reply started, filled and dropped. */
	assert_int_equal(pkt_begin(q, &r, SSH_FXP_EXTENDED_REPLY), 0);
	assert_int_equal(pkt_put_u32(q, 2), 0);
	assert_int_equal(pkt_put_string(q, "0123456789", 10), 0);
	pkt_cancel(q, &r);
	/* Check: the queue is what it was. */
	assert_queue(q, saved, len);
	assert_int_equal(q->nreplies, 1);
	assert_int_equal(oq_pending(q), len);
	/* Check: the next reply goes right behind the first. */
	assert_int_equal(pkt_reply_status(q, 2, 0, NULL), 0);
	assert_int_equal(q->len, len + 28);
	assert_memory_equal(q->buf, saved, len);
	assert_int_equal(q->buf[len + 3], 24);
	assert_int_equal(q->nreplies, 2);
}

/* Fills the reply in construction up to exactly SFTP_MAX_MSG. */
static void
fill_to_max(struct oqueue *q, struct reply *r)
{
	static uint8_t big[SFTP_MAX_MSG];

	assert_int_equal(pkt_begin(q, r, SSH_FXP_EXTENDED_REPLY), 0);
	/* 4 length, 1 type, 4 string length. */
	assert_int_equal(pkt_put_string(q, big, SFTP_MAX_MSG - 5), 0);
	assert_int_equal(pkt_reply_len(q, r), SFTP_MAX_MSG + 4);
}

static void
test_pkt_put_u8_past_max_msg_is_nospace(void **state)
{
	struct oqueue *q = *state;
	struct reply r;
	size_t len;

	/* Set up: a reply already queued, so the limit is per reply. */
	assert_int_equal(pkt_reply_status(q, 1, 0, NULL), 0);
	fill_to_max(q, &r);
	len = q->len;
	/* Act and check: no field fits any more. */
	assert_int_equal(pkt_put_u8(q, 1), PKT_ENOSPACE);
	assert_int_equal(pkt_put_u32(q, 1), PKT_ENOSPACE);
	assert_int_equal(pkt_put_u64(q, 1), PKT_ENOSPACE);
	assert_int_equal(pkt_put_string(q, "", 0), PKT_ENOSPACE);
	assert_int_equal(q->len, len);
	/* The full reply ends with a length of SFTP_MAX_MSG. */
	pkt_end(q, &r);
	assert_int_equal(q->buf[28], 0x00);
	assert_int_equal(q->buf[29], 0x04);
	assert_int_equal(q->buf[30], 0x00);
	assert_int_equal(q->buf[31], 0x00);
	assert_int_equal(q->nreplies, 2);
}

static void
test_pkt_put_string_one_past_max_msg_is_nospace(void **state)
{
	struct oqueue *q = *state;
	static uint8_t big[SFTP_MAX_MSG];
	struct reply r;

	assert_int_equal(pkt_begin(q, &r, SSH_FXP_EXTENDED_REPLY), 0);
	assert_int_equal(pkt_put_string(q, big, SFTP_MAX_MSG - 4),
	    PKT_ENOSPACE);
	assert_int_equal(q->len, 5);
	assert_int_equal(pkt_put_string(q, big, SIZE_MAX - 3), PKT_ENOSPACE);
	assert_int_equal(pkt_put_string(q, big, SIZE_MAX), PKT_ENOSPACE);
	assert_int_equal(q->len, 5);
}

static void
test_pkt_reply_status_too_long_is_cancelled(void **state)
{
	struct oqueue *q = *state;
	char *msg;

	msg = malloc(SFTP_MAX_MSG + 1);
	assert_non_null(msg);
	memset(msg, 'm', SFTP_MAX_MSG);
	msg[SFTP_MAX_MSG] = '\0';
	assert_int_equal(pkt_reply_status(q, 1, 0, NULL), 0);
	assert_int_equal(pkt_reply_status(q, 2, SSH_FX_FAILURE, msg),
	    PKT_ENOSPACE);
	assert_int_equal(q->len, 28);
	assert_int_equal(q->nreplies, 1);
	free(msg);
}

static void
test_pkt_name_add_past_max_msg_keeps_reply(void **state)
{
	struct oqueue *q = *state;
	struct sftp_attrs none = { 0 };
	struct reply r;
	char *name;
	size_t len;

	/* Set up: a name that fits, but not twice. */
	name = malloc(SFTP_MAX_MSG / 2 + 1);
	assert_non_null(name);
	memset(name, 'n', SFTP_MAX_MSG / 2);
	name[SFTP_MAX_MSG / 2] = '\0';
	assert_int_equal(pkt_name_begin(q, &r, 3), 0);
	assert_int_equal(pkt_name_add(q, &r, "a", "b", &none), 0);
	len = q->len;
	/* Too long as a whole: the entry is dropped, the reply kept. */
	assert_int_equal(pkt_name_add(q, &r, name, name, &none),
	    PKT_ENOSPACE);
	assert_int_equal(q->len, len);
	assert_int_equal(r.count, 1);
	pkt_name_end(q, &r);
	assert_int_equal(q->buf[12], 1);
	assert_int_equal(q->buf[2], 0);
	assert_int_equal(q->buf[3], len - 4);
	free(name);
}

static void
test_pkt_begin_small_queue_is_nospace(void **state)
{
	struct oqueue q;

	(void)state;
	/* A STATUS with "No such file" takes 33 bytes. */
	assert_int_equal(oq_init(&q, 32), 0);
	assert_int_equal(pkt_reply_status(&q, 1, SSH_FX_NO_SUCH_FILE, NULL),
	    PKT_ENOSPACE);
	assert_int_equal(q.len, 0);
	assert_int_equal(q.nreplies, 0);
	oq_free(&q);
	assert_int_equal(oq_init(&q, 33), 0);
	assert_int_equal(pkt_reply_status(&q, 1, SSH_FX_NO_SUCH_FILE, NULL),
	    0);
	assert_int_equal(q.len, 33);
	assert_int_equal(pkt_begin(&q, &(struct reply){ 0 }, SSH_FXP_STATUS),
	    PKT_ENOSPACE);
	oq_free(&q);
}

static void
test_pkt_patch_u32_at_mark(void **state)
{
	struct oqueue *q = *state;
	struct reply r;
	size_t mark;
	/* clang-format off */
	static const uint8_t want[] = {
		0, 0, 0, 16, SSH_FXP_EXTENDED_REPLY, 0, 0, 0, 1,
		0, 0, 0, 3, 'x', 'y', 'z', 0xde, 0xad, 0xbe, 0xef,
	};
	/* clang-format on */

	assert_int_equal(pkt_begin(q, &r, SSH_FXP_EXTENDED_REPLY), 0);
	assert_int_equal(pkt_put_u32(q, 1), 0);
	mark = pkt_mark(q);
	assert_int_equal(mark, 9);
	assert_int_equal(pkt_put_u32(q, 0), 0);
	assert_int_equal(pkt_put_u8(q, 'x'), 0);
	assert_int_equal(pkt_put_u8(q, 'y'), 0);
	assert_int_equal(pkt_put_u8(q, 'z'), 0);
	pkt_patch_u32(q, mark, (uint32_t)(pkt_mark(q) - mark - 4));
	/* The last four bytes can be patched too. */
	assert_int_equal(pkt_put_u32(q, 0), 0);
	pkt_patch_u32(q, pkt_mark(q) - 4, 0xdeadbeef);
	pkt_end(q, &r);
	assert_queue(q, want, sizeof want);
}

static void
patch_past_end(void *arg)
{
	struct oqueue *q = arg;

	pkt_patch_u32(q, pkt_mark(q) - 3, 1);
}

static void
test_pkt_patch_u32_past_end_aborts(void **state)
{
	struct oqueue *q = *state;
	struct reply r;

	assert_int_equal(pkt_begin(q, &r, SSH_FXP_EXTENDED_REPLY), 0);
	assert_int_equal(pkt_put_u32(q, 1), 0);
	expect_abort(patch_past_end, q);
}

static void
test_pkt_status_message_every_code(void **state)
{
	static const char *const want[] = {
		"Success",
		"End of file",
		"No such file",
		"Permission denied",
		"Failure",
		"Bad message",
		"No connection",
		"Connection lost",
		"Operation unsupported",
	};

	(void)state;
	for (uint32_t i = 0; i < sizeof want / sizeof want[0]; i++)
		assert_string_equal(pkt_status_message(i), want[i]);
	assert_string_equal(pkt_status_message(9), "Unknown error");
	assert_string_equal(pkt_status_message(0x7fffffff), "Unknown error");
	assert_string_equal(pkt_status_message(UINT32_MAX), "Unknown error");
}

/* Flushing. */

/* Reads exactly n bytes from fd into buf. */
static void
read_exact(int fd, uint8_t *buf, size_t n)
{
	size_t got = 0;
	ssize_t r;

	while (got < n) {
		r = read(fd, buf + got, n - got);
		if (r == -1 && errno == EINTR)
			continue;
		assert_true(r > 0);
		got += (size_t)r;
	}
}

static void
test_oq_flush_writes_all_to_pipe(void **state)
{
	struct oqueue *q = *state;
	uint8_t want[128], got[128], extra;
	size_t len;
	int fds[2];

	/* Set up: three replies. */
	assert_int_equal(pkt_reply_status(q, 1, SSH_FX_EOF, NULL), 0);
	assert_int_equal(pkt_reply_handle(q, 2, 3, 1), 0);
	assert_int_equal(pkt_reply_name1(q, 3, "/"), 0);
	len = q->len;
	assert_true(len <= sizeof want);
	memcpy(want, q->buf, len);
	assert_int_equal(pipe(fds), 0);
	/* Act. */
	assert_int_equal(oq_flush(q, fds[1]), 0);
	/* Check: all of it, nothing more, and the queue is empty. */
	assert_int_equal(close(fds[1]), 0);
	read_exact(fds[0], got, len);
	assert_memory_equal(got, want, len);
	assert_int_equal(read(fds[0], &extra, 1), 0);
	assert_int_equal(close(fds[0]), 0);
	assert_int_equal(oq_pending(q), 0);
	assert_int_equal(q->len, 0);
	assert_int_equal(q->sent, 0);
	/* The next reply starts at the front again. */
	assert_int_equal(pkt_reply_status(q, 4, 0, NULL), 0);
	assert_int_equal(q->len, 28);
}

static void
test_oq_flush_empty_queue_writes_nothing(void **state)
{
	struct oqueue *q = *state;

	/* No write happens, so even a bad descriptor is fine. */
	assert_int_equal(oq_flush(q, -1), 0);
}

/*
 * A child reads the pipe, once the parent writes a byte to go: first the
 * filler that made it full, then what the parent flushes, and exits 0 when
 * it all matches.
 */
static void
drain_child(int fd, int go, size_t filler, const uint8_t *want, size_t len)
{
	uint8_t *got, c;
	size_t n = 0;
	ssize_t r;

	if ((got = malloc(filler + len + 1)) == NULL)
		_exit(2);
	/* The parent met the full pipe first. */
	while ((r = read(go, &c, 1)) == -1 && errno == EINTR)
		;
	if (r != 1)
		_exit(6);
	for (;;) {
		r = read(fd, got + n, filler + len + 1 - n);
		if (r == -1 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		n += (size_t)r;
		if (n == filler + len + 1)
			break;
	}
	if (n != filler + len)
		_exit(3);
	for (size_t i = 0; i < filler; i++)
		if (got[i] != 'f')
			_exit(4);
	if (memcmp(got + filler, want, len) != 0)
		_exit(5);
	_exit(0);
}

static void
test_oq_flush_full_nonblocking_pipe_resumes(void **state)
{
	struct oqueue *q = *state;
	struct pollfd pfd;
	struct reply r;
	uint8_t *want, *p, f[4096];
	size_t len, filler = 0;
	ssize_t n;
	pid_t pid;
	int fds[2], go[2], status;

	/* Set up: a queue at its mark plus a full DATA reply. */
	rng_seed(3);
	while (q->len < OQ_HIWAT) {
		p = pkt_data_begin(q, &r, (uint32_t)q->nreplies, 1000);
		assert_non_null(p);
		for (size_t i = 0; i < 1000; i++)
			p[i] = (uint8_t)rng_next();
		pkt_data_end(q, &r, rng_range(0, 1000));
	}
	p = pkt_data_begin(q, &r, 0, SFTP_MAX_READ);
	assert_non_null(p);
	memset(p, 0xd5, SFTP_MAX_READ);
	pkt_data_end(q, &r, SFTP_MAX_READ);
	len = q->len;
	want = malloc(len);
	assert_non_null(want);
	memcpy(want, q->buf, len);
	/* Set up: a non-blocking pipe filled until it takes no more. */
	assert_int_equal(pipe(fds), 0);
	assert_int_equal(fcntl(fds[1], F_SETFL, O_NONBLOCK), 0);
	memset(f, 'f', sizeof f);
	for (;;) {
		n = write(fds[1], f, sizeof f);
		if (n == -1) {
			assert_true(errno == EAGAIN || errno == EWOULDBLOCK);
			break;
		}
		filler += (size_t)n;
	}
	assert_int_equal(pipe(go), 0);
	pid = fork();
	assert_true(pid != -1);
	if (pid == 0) {
		(void)close(fds[1]);
		(void)close(go[1]);
		drain_child(fds[0], go[0], filler, want, len);
	}
	assert_int_equal(close(fds[0]), 0);
	assert_int_equal(close(go[0]), 0);
	/*
	 * Act: a full pipe gives EAGAIN (the child reads only once told to, so
	 * the first call meets it full); the caller waits in poll() until the
	 * child reads, and each call goes on where the last one stopped.
	 */
	pfd.fd = fds[1];
	pfd.events = POLLOUT;
	assert_int_equal(oq_flush(q, fds[1]), -1);
	assert_true(errno == EAGAIN || errno == EWOULDBLOCK);
	assert_int_equal(write(go[1], "g", 1), 1);
	assert_int_equal(close(go[1]), 0);
	while (oq_flush(q, fds[1]) == -1) {
		assert_true(errno == EAGAIN || errno == EWOULDBLOCK);
		assert_int_equal(poll(&pfd, 1, 10000), 1);
	}
	assert_int_equal(close(fds[1]), 0);
	/* Check. */
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_int_equal(oq_pending(q), 0);
	free(want);
}

static void
test_oq_flush_closed_pipe_is_epipe(void **state)
{
	struct oqueue *q = *state;
	void (*old)(int);
	int fds[2], r, e;

	assert_int_equal(pkt_reply_status(q, 1, 0, NULL), 0);
	assert_int_equal(pipe(fds), 0);
	assert_int_equal(close(fds[0]), 0);
	old = signal(SIGPIPE, SIG_IGN);
	errno = 0;
	r = oq_flush(q, fds[1]);
	e = errno;
	(void)signal(SIGPIPE, old);
	assert_int_equal(r, -1);
	assert_int_equal(e, EPIPE);
	/* Nothing was taken off the queue. */
	assert_int_equal(oq_pending(q), 28);
	assert_int_equal(close(fds[1]), 0);
}

/* Reads what fd holds now (non-blocking) onto the end of got. */
static size_t
drain_now(int fd, uint8_t *got, size_t have, size_t size)
{
	ssize_t n;

	while (have < size && (n = read(fd, got + have, size - have)) > 0)
		have += (size_t)n;
	return have;
}

/*
 * A flush cut short leaves more than OQ_HIWAT - SFTP_MAX_MSG bytes written
 * and the rest pending, below the mark: the end of a session then answers
 * a 255 KiB READ.  It fits (the unwritten bytes move to the front), and the
 * stream read from the pipe is the old replies, then the new one, whole.
 */
static void
test_pkt_begin_after_partial_write_fits_largest_reply(void **state)
{
	struct oqueue *q = *state;
	struct reply r;
	uint8_t *want, *got, *p;
	size_t len, have = 0, total;
	int fds[2];

	/* Set up: the queue at its mark plus a largest DATA reply. */
	rng_seed(7);
	while (q->len < OQ_HIWAT) {
		p = pkt_data_begin(q, &r, (uint32_t)q->nreplies, 1000);
		assert_non_null(p);
		for (size_t i = 0; i < 1000; i++)
			p[i] = (uint8_t)rng_next();
		pkt_data_end(q, &r, rng_range(0, 1000));
	}
	p = pkt_data_begin(q, &r, 1, SFTP_MAX_READ);
	assert_non_null(p);
	memset(p, 0xa1, SFTP_MAX_READ);
	pkt_data_end(q, &r, SFTP_MAX_READ);
	len = q->len;
	total = len + SFTP_MAX_READ + 13;
	want = malloc(total);
	got = malloc(total);
	assert_non_null(want);
	assert_non_null(got);
	memcpy(want, q->buf, len);
	/* Act: flush into a non-blocking pipe, drained in steps. */
	assert_int_equal(pipe(fds), 0);
	assert_int_equal(fcntl(fds[0], F_SETFL, O_NONBLOCK), 0);
	assert_int_equal(fcntl(fds[1], F_SETFL, O_NONBLOCK), 0);
	while (q->sent <= len - OQ_HIWAT + 4096) {
		assert_int_equal(oq_flush(q, fds[1]), -1);
		assert_true(errno == EAGAIN || errno == EWOULDBLOCK);
		if (q->sent <= len - OQ_HIWAT + 4096)
			have = drain_now(fds[0], got, have, total);
	}
	assert_true(oq_pending(q) < OQ_HIWAT);
	assert_true(q->size - q->len < SFTP_MAX_MSG + 4);
	p = pkt_data_begin(q, &r, 2, SFTP_MAX_READ);
	assert_non_null(p);
	memset(p, 0xb2, SFTP_MAX_READ);
	pkt_data_end(q, &r, SFTP_MAX_READ);
	memcpy(want + len, q->buf + q->len - (SFTP_MAX_READ + 13),
	    SFTP_MAX_READ + 13);
	while (oq_flush(q, fds[1]) == -1) {
		assert_true(errno == EAGAIN || errno == EWOULDBLOCK);
		have = drain_now(fds[0], got, have, total);
	}
	have = drain_now(fds[0], got, have, total);
	/* Check. */
	assert_int_equal(have, total);
	assert_memory_equal(got, want, total);
	assert_int_equal(oq_pending(q), 0);
	assert_int_equal(close(fds[0]), 0);
	assert_int_equal(close(fds[1]), 0);
	free(want);
	free(got);
}

/*
 * A muted queue builds and counts every reply, however many and large,
 * and holds none: it never fills, and a flush writes nothing.
 */
static void
test_oq_mute_counts_and_drops(void **state)
{
	struct oqueue *q = *state;
	struct reply r;
	uint8_t *p;

	assert_int_equal(pkt_reply_status(q, 1, 0, NULL), 0);
	oq_mute(q);
	assert_int_equal(oq_pending(q), 0);
	for (uint32_t i = 0; i < 64; i++) {
		p = pkt_data_begin(q, &r, i, SFTP_MAX_READ);
		assert_non_null(p);
		pkt_data_end(q, &r, SFTP_MAX_READ);
		assert_int_equal(pkt_reply_status(q, i, 4, NULL), 0);
		assert_int_equal(oq_pending(q), 0);
	}
	assert_int_equal(q->nreplies, 1 + 2 * 64);
	assert_int_equal(oq_flush(q, -1), 0);
}

/* DATA by reference. */

/* A DATA reply as the wire has it, at want: its length. */
static size_t
want_data(uint8_t *want, uint32_t id, const uint8_t *p, size_t n)
{
	poke_u32(want, (uint32_t)(9 + n));
	want[4] = SSH_FXP_DATA;
	poke_u32(want + 5, id);
	poke_u32(want + 9, (uint32_t)n);
	memcpy(want + 13, p, n);
	return 13 + n;
}

/* Reads up to max bytes of what fd holds now onto got + have. */
static size_t
drain_some(int fd, uint8_t *got, size_t have, size_t size, size_t max)
{
	ssize_t n;

	if (max > size - have)
		max = size - have;
	if (max > 0 && (n = read(fd, got + have, max)) > 0)
		have += (size_t)n;
	return have;
}

/* The bytes a pipe holds, written and not yet read. */
static int
pipe_held(int fd)
{
	int n = 0;

	assert_int_equal(ioctl(fd, FIONREAD, &n), 0);
	return n;
}

#define REF_SRC		(1024 * 1024)
#define REF_STREAM	(24 * 1024 * 1024)

/*
 * A run of replies by reference: the bytes they point at (random), the
 * stream expected and the stream read, from a non-blocking pipe.
 */
struct ref_run {
	uint8_t *src, *want, *got;
	size_t size, total, have;
	int fds[2];
};

static void
ref_run_start(struct ref_run *t, size_t size, uint64_t seed)
{
	memset(t, 0, sizeof *t);
	rng_seed(seed);
	t->size = size;
	t->src = malloc(REF_SRC);
	t->want = malloc(size);
	t->got = malloc(size);
	assert_non_null(t->src);
	assert_non_null(t->want);
	assert_non_null(t->got);
	for (size_t i = 0; i < REF_SRC; i++)
		t->src[i] = (uint8_t)rng_next();
	assert_int_equal(pipe(t->fds), 0);
	assert_int_equal(fcntl(t->fds[0], F_SETFL, O_NONBLOCK), 0);
	assert_int_equal(fcntl(t->fds[1], F_SETFL, O_NONBLOCK), 0);
}

/* Reads what is left in the pipe; the stream read is the one expected. */
static void
ref_run_end(struct ref_run *t)
{
	t->have = drain_now(t->fds[0], t->got, t->have, t->size);
	assert_int_equal(t->have, t->total);
	assert_memory_equal(t->got, t->want, t->total);
	assert_int_equal(close(t->fds[0]), 0);
	assert_int_equal(close(t->fds[1]), 0);
	free(t->src);
	free(t->want);
	free(t->got);
}

/*
 * Rounds of replies of every kind, until the queue is at its mark: STATUS,
 * DATA copied, DATA by reference (whole, shorter than said, of no bytes,
 * cancelled), and references refused as too short.  Each round is flushed
 * into a non-blocking pipe that is read a random number of bytes at a
 * time, so that writes stop anywhere: in the queue's bytes, in a
 * reference's, on the border between them.  The stream read is every
 * reply, whole and in order, and oq_pending() counts what is left.
 */
static void
test_oq_refs_stream_random(void **state)
{
	struct oqueue *q = *state;
	struct ref_run t;
	struct reply r;
	uint8_t *p;
	size_t n, m, at, start, len, queued;
	unsigned partial = 0, inside = 0, refs = 0, kind;
	uint32_t id;

	ref_run_start(&t, REF_STREAM, 17);
	for (unsigned round = 0; round < 40; round++) {
		queued = 0;
		while (oq_pending(q) < OQ_HIWAT &&
		    t.total < REF_STREAM - 2 * SFTP_MAX_MSG) {
			kind = (unsigned)rng_range(0, 6);
			id = (uint32_t)rng_next();
			n = kind == 1 ? rng_range(0, 9000) :
			    rng_range(OQ_REF_MIN, SFTP_MAX_READ);
			at = rng_range(0, REF_SRC - n);
			len = q->len;
			switch (kind) {
			case 0:		/* STATUS: its bytes as built */
				start = q->len;
				assert_int_equal(pkt_reply_status(q, id,
				    SSH_FX_EOF, NULL), 0);
				m = q->len - start;
				memcpy(t.want + t.total, q->buf + start, m);
				break;
			case 1:		/* copied */
				p = pkt_data_begin(q, &r, id, n);
				assert_non_null(p);
				memcpy(p, t.src + at, n);
				pkt_data_end(q, &r, n);
				m = want_data(t.want + t.total, id, t.src + at,
				    n);
				break;
			case 2:		/* by reference, whole */
			case 3:		/* shorter than said, maybe empty */
				assert_int_equal(pkt_data_ref(q, &r, id,
				    t.src + at, n), 0);
				if (kind == 3)
					n = rng_range(0, n);
				pkt_data_end(q, &r, n);
				m = want_data(t.want + t.total, id, t.src + at,
				    n);
				refs += n > 0;
				break;
			case 4:		/* cancelled */
				assert_int_equal(pkt_data_ref(q, &r, id,
				    t.src + at, n), 0);
				pkt_cancel(q, &r);
				assert_int_equal(q->len, len);
				m = 0;
				break;
			default:	/* too short: refused, nothing queued */
				n = rng_range(0, OQ_REF_MIN - 1);
				assert_int_equal(pkt_data_ref(q, &r, id,
				    t.src, n), -1);
				assert_int_equal(q->len, len);
				m = 0;
				break;
			}
			t.total += m;
			queued += m;
			assert_int_equal(oq_pending(q), queued);
		}
		while (oq_flush(q, t.fds[1]) == -1) {
			assert_true(errno == EAGAIN || errno == EWOULDBLOCK);
			partial++;
			inside += q->rsent > 0;
			t.have = drain_some(t.fds[0], t.got, t.have,
			    REF_STREAM, rng_range(1, 70000));
			assert_int_equal(oq_pending(q), t.total - t.have -
			    (size_t)pipe_held(t.fds[0]));
		}
		assert_int_equal(oq_pending(q), 0);
		assert_int_equal(oq_refs(q), 0);
	}
	/* Check: and writes stopped inside references, often. */
	ref_run_end(&t);
	assert_true(refs > 100);
	assert_true(partial > 100);
	assert_true(inside > 10);
}

/*
 * A flush cut short behind references, then a reply that needs the
 * queue's unwritten bytes moved to the front (the end of a session): the
 * references not yet written move with them, and the stream is whole.
 */
static void
test_pkt_begin_after_partial_write_moves_refs(void **state)
{
	struct oqueue *q = *state;
	struct ref_run t;
	struct reply r;
	uint8_t *p;
	size_t n, old_len, sent;

	ref_run_start(&t, 4 * SFTP_MAX_MSG, 23);
	/* Copies, a reference, copies, a reference, copies past the mark. */
	for (unsigned part = 0; part < 5; part++) {
		if (part % 2 == 1) {
			n = part == 1 ? 20000 : 100000;
			assert_int_equal(pkt_data_ref(q, &r, part,
			    t.src + part * 1000, n), 0);
			pkt_data_end(q, &r, n);
			t.total += want_data(t.want + t.total, part,
			    t.src + part * 1000, n);
			continue;
		}
		while (q->len < (part + 2) * OQ_HIWAT / 6) {
			n = rng_range(0, 1000);
			p = pkt_data_begin(q, &r, 9, n);
			assert_non_null(p);
			memcpy(p, t.src + 500000 + n, n);
			pkt_data_end(q, &r, n);
			t.total += want_data(t.want + t.total, 9,
			    t.src + 500000 + n, n);
		}
	}
	assert_int_equal(oq_refs(q), 2);
	assert_true(q->len > OQ_HIWAT);
	/* Act: flush into a pipe read in steps, until past the first. */
	while (q->rnext == 0 || q->sent <= q->len - OQ_HIWAT + 4096) {
		assert_int_equal(oq_flush(q, t.fds[1]), -1);
		assert_true(errno == EAGAIN || errno == EWOULDBLOCK);
		t.have = drain_some(t.fds[0], t.got, t.have, t.size, 5000);
	}
	assert_true(q->rnext == 1 && q->sent < q->ref[1].at);
	assert_true(q->size - q->len < SFTP_MAX_MSG + 4);
	old_len = q->len;
	sent = q->sent;
	/* The largest reply: the unwritten bytes move to the front. */
	p = pkt_data_begin(q, &r, 77, SFTP_MAX_READ);
	assert_non_null(p);
	memset(p, 0xc3, SFTP_MAX_READ);
	assert_int_equal(r.start, old_len - sent);
	pkt_data_end(q, &r, SFTP_MAX_READ);
	assert_int_equal(oq_refs(q), 1);
	p = malloc(SFTP_MAX_READ);
	assert_non_null(p);
	memset(p, 0xc3, SFTP_MAX_READ);
	t.total += want_data(t.want + t.total, 77, p, SFTP_MAX_READ);
	free(p);
	while (oq_flush(q, t.fds[1]) == -1) {
		assert_true(errno == EAGAIN || errno == EWOULDBLOCK);
		t.have = drain_some(t.fds[0], t.got, t.have, t.size, 50000);
	}
	/* Check. */
	ref_run_end(&t);
	assert_int_equal(oq_pending(q), 0);
}

static void
end_past_max(void *arg)
{
	struct oqueue *q = arg;
	static uint8_t src[OQ_REF_MIN];
	struct reply r;

	if (pkt_data_ref(q, &r, 1, src, sizeof src) == 0)
		pkt_data_end(q, &r, sizeof src + 1);
}

/*
 * When a reference is refused (the caller copies instead) and what a
 * refused or ended one leaves: too short, longer than a message, every
 * reference taken, a queue muted or behind a partial write; an empty one
 * queues no reference; one longer than said aborts.
 */
static void
test_pkt_data_ref_refused(void **state)
{
	struct oqueue *q = *state;
	static uint8_t src[SFTP_MAX_MSG];
	struct reply r;
	size_t len;
	int fds[2];

	assert_int_equal(pkt_data_ref(q, &r, 1, src, OQ_REF_MIN - 1), -1);
	assert_int_equal(pkt_data_ref(q, &r, 1, src, SFTP_MAX_MSG - 8), -1);
	assert_int_equal(q->len, 0);
	assert_int_equal(q->nreplies, 0);
	/* The largest that fits a message. */
	assert_int_equal(pkt_data_ref(q, &r, 1, src, SFTP_MAX_MSG - 9), 0);
	pkt_data_end(q, &r, SFTP_MAX_MSG - 9);
	assert_int_equal(oq_pending(q), SFTP_MAX_MSG + 4);
	/* Of no bytes: the header alone, no reference. */
	assert_int_equal(pkt_data_ref(q, &r, 2, src, OQ_REF_MIN), 0);
	pkt_data_end(q, &r, 0);
	assert_int_equal(oq_refs(q), 1);
	assert_int_equal(q->len, 13 + 13);
	/* Every reference taken. */
	for (unsigned i = 1; i < OQ_REFS; i++) {
		assert_int_equal(pkt_data_ref(q, &r, 3, src, OQ_REF_MIN), 0);
		pkt_data_end(q, &r, OQ_REF_MIN);
	}
	assert_int_equal(oq_refs(q), OQ_REFS);
	len = q->len;
	assert_int_equal(pkt_data_ref(q, &r, 4, src, OQ_REF_MIN), -1);
	assert_int_equal(q->len, len);
	assert_non_null(pkt_data_begin(q, &r, 4, OQ_REF_MIN));
	pkt_cancel(q, &r);
	/* Dropped: none left, and room again. */
	oq_drop(q);
	assert_int_equal(oq_refs(q), 0);
	assert_int_equal(oq_pending(q), 0);
	/* Behind a partial write. */
	assert_int_equal(pkt_data_ref(q, &r, 5, src, SFTP_MAX_READ), 0);
	pkt_data_end(q, &r, SFTP_MAX_READ);
	assert_int_equal(pipe(fds), 0);
	assert_int_equal(fcntl(fds[1], F_SETFL, O_NONBLOCK), 0);
	assert_int_equal(oq_flush(q, fds[1]), -1);
	assert_int_equal(pkt_data_ref(q, &r, 6, src, OQ_REF_MIN), -1);
	assert_int_equal(close(fds[0]), 0);
	assert_int_equal(close(fds[1]), 0);
	oq_drop(q);
	/* Muted. */
	oq_mute(q);
	assert_int_equal(pkt_data_ref(q, &r, 7, src, OQ_REF_MIN), -1);
	/* Longer than said. */
	q->muted = 0;
	expect_abort(end_past_max, q);
}

int
main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		/* Framing. */
		cmocka_unit_test(test_ibuf_next_every_split_in_two_reads),
		cmocka_unit_test(test_ibuf_next_byte_by_byte),
		cmocka_unit_test(test_ibuf_next_random_chunks),
		cmocka_unit_test(test_ibuf_next_long_stream_small_soft),
		cmocka_unit_test(test_ibuf_room_past_soft_takes_rest_of_packet),
		cmocka_unit_test(
		    test_ibuf_room_past_soft_completes_length_word),
		cmocka_unit_test(test_ibuf_next_length_zero_is_frame_error),
		cmocka_unit_test(
		    test_ibuf_next_length_max_plus_one_is_frame_error),
		cmocka_unit_test(test_ibuf_next_length_all_ones_is_frame_error),
		cmocka_unit_test(test_ibuf_next_length_max_waits_for_body),
		cmocka_unit_test(test_ibuf_next_frame_error_after_good_packet),
		cmocka_unit_test(test_ibuf_next_empty_buffer_wants_input),
		cmocka_unit_test(test_ibuf_read_pipe_delivers_packets),
		cmocka_unit_test(test_ibuf_fill_past_buffer_aborts),
		cmocka_unit_test(test_ibuf_pins_model),
		cmocka_unit_test(test_ibuf_pinned_stream_never_drains),
		cmocka_unit_test(test_ibuf_pinned_read_makes_room_present),
		cmocka_unit_test(test_ibuf_bulk_window_on_huge_pages),
		cmocka_unit_test(test_ibuf_pin_misuse_aborts),
		/* The cursor. */
		cmocka_unit_test(test_get_u8_empty_is_short),
		cmocka_unit_test(test_get_u8_one_byte),
		cmocka_unit_test(test_get_u8_two_bytes_leaves_one),
		cmocka_unit_test(test_get_u32_three_bytes_is_short),
		cmocka_unit_test(test_get_u32_four_bytes),
		cmocka_unit_test(test_get_u32_five_bytes_leaves_one),
		cmocka_unit_test(test_get_u64_seven_bytes_is_short),
		cmocka_unit_test(test_get_u64_eight_bytes),
		cmocka_unit_test(test_get_u64_nine_bytes_leaves_one),
		cmocka_unit_test(test_get_string_header_short),
		cmocka_unit_test(test_get_string_one_byte_short),
		cmocka_unit_test(test_get_string_exact),
		cmocka_unit_test(test_get_string_one_byte_more_leaves_one),
		cmocka_unit_test(test_get_string_empty),
		cmocka_unit_test(test_get_string_length_all_ones_is_short),
		cmocka_unit_test(test_get_handle_slot_and_generation),
		cmocka_unit_test(test_get_handle_wrong_length_names_no_slot),
		cmocka_unit_test(test_get_handle_short_leaves_cursor),
		cmocka_unit_test(test_get_path_short),
		cmocka_unit_test(test_get_path_exact),
		cmocka_unit_test(test_get_path_one_byte_more_leaves_one),
		cmocka_unit_test(test_get_path_embedded_nul_is_enul),
		cmocka_unit_test(
		    test_get_path_size_equal_to_length_is_too_long),
		cmocka_unit_test(test_get_path_size_length_plus_one_fits),
		cmocka_unit_test(test_get_path_empty_string),
		cmocka_unit_test(test_get_path_length_all_ones_is_short),
		cmocka_unit_test(test_get_attrs_every_flag_combination),
		cmocka_unit_test(
		    test_get_attrs_extended_count_over_limit_is_bad),
		cmocka_unit_test(
		    test_get_attrs_extended_count_at_limit_is_accepted),
		cmocka_unit_test(
		    test_get_attrs_extended_pairs_truncated_is_short),
		cmocka_unit_test(test_getters_request_bodies_parse_whole),
		cmocka_unit_test(test_getters_request_prefixes_are_short),
		/* Replies. */
		cmocka_unit_test_setup_teardown(
		    test_pkt_reply_status_fixed_message, setup_queue,
		    teardown_queue),
		cmocka_unit_test_setup_teardown(
		    test_pkt_reply_status_own_message, setup_queue,
		    teardown_queue),
		cmocka_unit_test_setup_teardown(
		    test_pkt_reply_status_unknown_code, setup_queue,
		    teardown_queue),
		cmocka_unit_test_setup_teardown(test_pkt_reply_handle_bytes,
		    setup_queue, teardown_queue),
		cmocka_unit_test_setup_teardown(test_pkt_reply_attrs_all_flags,
		    setup_queue, teardown_queue),
		cmocka_unit_test_setup_teardown(
		    test_pkt_reply_attrs_extended_flag_dropped, setup_queue,
		    teardown_queue),
		cmocka_unit_test_setup_teardown(
		    test_pkt_name_add_several_entries, setup_queue,
		    teardown_queue),
		cmocka_unit_test_setup_teardown(test_pkt_name_end_no_entries,
		    setup_queue, teardown_queue),
		cmocka_unit_test_setup_teardown(test_pkt_reply_name1_bytes,
		    setup_queue, teardown_queue),
		cmocka_unit_test_setup_teardown(
		    test_pkt_data_end_less_than_max, setup_queue,
		    teardown_queue),
		cmocka_unit_test_setup_teardown(test_pkt_data_end_zero_bytes,
		    setup_queue, teardown_queue),
		cmocka_unit_test_setup_teardown(
		    test_pkt_data_begin_largest_fits, setup_queue,
		    teardown_queue),
		cmocka_unit_test_setup_teardown(
		    test_pkt_data_begin_past_max_is_null, setup_queue,
		    teardown_queue),
		cmocka_unit_test_setup_teardown(
		    test_pkt_data_begin_huge_max_is_null, setup_queue,
		    teardown_queue),
		cmocka_unit_test_setup_teardown(
		    test_pkt_begin_extended_reply_bytes, setup_queue,
		    teardown_queue),
		cmocka_unit_test_setup_teardown(test_pkt_cancel_restores_queue,
		    setup_queue, teardown_queue),
		cmocka_unit_test_setup_teardown(
		    test_pkt_put_u8_past_max_msg_is_nospace, setup_queue,
		    teardown_queue),
		cmocka_unit_test_setup_teardown(
		    test_pkt_put_string_one_past_max_msg_is_nospace,
		    setup_queue, teardown_queue),
		cmocka_unit_test_setup_teardown(
		    test_pkt_reply_status_too_long_is_cancelled, setup_queue,
		    teardown_queue),
		cmocka_unit_test_setup_teardown(
		    test_pkt_name_add_past_max_msg_keeps_reply, setup_queue,
		    teardown_queue),
		cmocka_unit_test(test_pkt_begin_small_queue_is_nospace),
		cmocka_unit_test_setup_teardown(test_pkt_patch_u32_at_mark,
		    setup_queue, teardown_queue),
		cmocka_unit_test_setup_teardown(
		    test_pkt_patch_u32_past_end_aborts, setup_queue,
		    teardown_queue),
		cmocka_unit_test(test_pkt_status_message_every_code),
		/* Flushing. */
		cmocka_unit_test_setup_teardown(
		    test_oq_flush_writes_all_to_pipe, setup_queue,
		    teardown_queue),
		cmocka_unit_test_setup_teardown(
		    test_oq_flush_empty_queue_writes_nothing, setup_queue,
		    teardown_queue),
		cmocka_unit_test_setup_teardown(
		    test_oq_flush_full_nonblocking_pipe_resumes, setup_queue,
		    teardown_queue),
		cmocka_unit_test_setup_teardown(
		    test_oq_flush_closed_pipe_is_epipe, setup_queue,
		    teardown_queue),
		/* The end of a session. */
		cmocka_unit_test_setup_teardown(
		    test_pkt_begin_after_partial_write_fits_largest_reply,
		    setup_queue, teardown_queue),
		cmocka_unit_test_setup_teardown(
		    test_oq_mute_counts_and_drops, setup_queue,
		    teardown_queue),
		/* DATA by reference. */
		cmocka_unit_test_setup_teardown(test_oq_refs_stream_random,
		    setup_queue, teardown_queue),
		cmocka_unit_test_setup_teardown(
		    test_pkt_begin_after_partial_write_moves_refs,
		    setup_queue, teardown_queue),
		cmocka_unit_test_setup_teardown(test_pkt_data_ref_refused,
		    setup_queue, teardown_queue),
	};

	if (unit_args(argc, argv) != 0)
		return 2;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
