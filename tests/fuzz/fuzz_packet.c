/*
 * libFuzzer harness for the wire code alone (packet.c): the framing of the
 * input buffer, the field cursor and ATTRS, and the reply builders fed with
 * what was parsed.  No file system and no server state are involved.
 *
 * Input: byte 0 sets the input buffer's read-ahead (0: IBUF_SOFT, else
 * that many bytes), byte 1 seeds the sizes of the reads, byte 2 sets the
 * size of the reply queue (0: OQ_SIZE, else 64 times it).  The rest is a
 * client's byte stream (a session seed with three bytes in front).  It is
 * cut into reads through a pipe and framed by ibuf_next() as serve() does
 * it, and every frame is checked against a plain reading of the same bytes.
 * Each packet is then parsed twice: field by field as its request type
 * says, as the handlers do, then by a sequence of getters picked from byte
 * 1.  Each getter is checked against its contract (packet.h) and an
 * independent reading of the bytes; what was parsed goes into replies,
 * which are read back and compared.
 */
#include <sys/types.h>

#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../packet.c"
#include "../lib/packet_test.h"


#define CHECK(e) do {							\
	if (!(e)) {							\
		fprintf(stderr, "fuzz_packet: %s:%d: check failed: %s\n", \
		    __FILE__, __LINE__, #e);				\
		abort();						\
	}								\
} while (0)

/* Getters per packet in the second pass. */
#define SCRIPT_MAX	64

int	LLVMFuzzerInitialize(int *, char ***);
int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

static int null_fd = -1;
static int pipe_r = -1, pipe_w = -1;
static struct oqueue q;
static uint32_t rng;

static char path_a[PATH_MAX], path_b[PATH_MAX];

static uint32_t
next_random(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 17;
	rng ^= rng << 5;
	return rng;
}

static uint32_t
ref_u32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	    (uint32_t)p[2] << 8 | p[3];
}

/* The cursor moved forward by exactly n bytes. */
static void
advanced(const struct cursor *before, const struct cursor *after, size_t n)
{
	CHECK(n <= before->left);
	CHECK(after->p == before->p + n);
	CHECK(after->left == before->left - n);
}

static void
unchanged(const struct cursor *before, const struct cursor *after)
{
	CHECK(after->p == before->p && after->left == before->left);
}

/* The getters, each checked against its contract and the bytes. */

static int
get_u8(struct cursor *c, uint8_t *v)
{
	struct cursor b = *c;
	int r;

	r = pkt_get_u8(c, v);
	CHECK(r == (b.left < 1 ? PKT_ESHORT : 0));
	if (r == 0) {
		CHECK(*v == b.p[0]);
		advanced(&b, c, 1);
	} else {
		CHECK(*v == 0);
		unchanged(&b, c);
	}
	return r;
}

static int
get_u32(struct cursor *c, uint32_t *v)
{
	struct cursor b = *c;
	int r;

	r = pkt_get_u32(c, v);
	CHECK(r == (b.left < 4 ? PKT_ESHORT : 0));
	if (r == 0) {
		CHECK(*v == ref_u32(b.p));
		advanced(&b, c, 4);
	} else {
		CHECK(*v == 0);
		unchanged(&b, c);
	}
	return r;
}

static int
get_u64(struct cursor *c, uint64_t *v)
{
	struct cursor b = *c;
	int r;

	r = pkt_get_u64(c, v);
	CHECK(r == (b.left < 8 ? PKT_ESHORT : 0));
	if (r == 0) {
		CHECK(*v == ((uint64_t)ref_u32(b.p) << 32 | ref_u32(b.p + 4)));
		advanced(&b, c, 8);
	} else {
		CHECK(*v == 0);
		unchanged(&b, c);
	}
	return r;
}

static int
get_string(struct cursor *c, const uint8_t **s, uint32_t *len)
{
	struct cursor b = *c;
	int r, fits;

	r = pkt_get_string(c, s, len);
	fits = b.left >= 4 && ref_u32(b.p) <= b.left - 4;
	CHECK(r == (fits ? 0 : PKT_ESHORT));
	if (r == 0) {
		CHECK(*len == ref_u32(b.p));
		CHECK(*s == b.p + 4);
		advanced(&b, c, 4 + (size_t)*len);
	} else {
		CHECK(*s == NULL && *len == 0);
		unchanged(&b, c);
	}
	return r;
}

static int
get_handle(struct cursor *c, uint32_t *slot, uint32_t *gen)
{
	struct cursor b = *c;
	uint32_t len;
	int r, fits;

	r = pkt_get_handle(c, slot, gen);
	fits = b.left >= 4 && ref_u32(b.p) <= b.left - 4;
	CHECK(r == (fits ? 0 : PKT_ESHORT));
	if (r == 0) {
		len = ref_u32(b.p);
		if (len == PKT_HANDLE_LEN)
			CHECK(*slot == ref_u32(b.p + 4) &&
			    *gen == ref_u32(b.p + 8));
		else
			CHECK(*slot == PKT_HANDLE_NONE && *gen == 0);
		advanced(&b, c, 4 + (size_t)len);
	} else {
		CHECK(*slot == PKT_HANDLE_NONE && *gen == 0);
		unchanged(&b, c);
	}
	return r;
}

static int
get_path(struct cursor *c, char *buf, size_t size)
{
	struct cursor b = *c;
	uint32_t len = 0;
	int r, want;

	r = pkt_get_path(c, buf, size);
	if (b.left < 4 || (len = ref_u32(b.p)) > b.left - 4)
		want = PKT_ESHORT;
	else if (memchr(b.p + 4, '\0', len) != NULL)
		want = PKT_ENUL;
	else if (len >= size)
		want = PKT_ETOOLONG;
	else
		want = 0;
	CHECK(r == want);
	if (r == 0) {
		CHECK(strlen(buf) == len);
		CHECK(memcmp(buf, b.p + 4, len) == 0);
		advanced(&b, c, 4 + (size_t)len);
	} else {
		CHECK(size == 0 || buf[0] == '\0');
		unchanged(&b, c);
	}
	return r;
}

/* ATTRS read by hand: the result, and in *used the bytes it takes. */
static int
ref_attrs(const uint8_t *p, size_t left, struct sftp_attrs *a, size_t *used)
{
	uint32_t count, len;
	size_t o = 0;

	memset(a, 0, sizeof *a);
	*used = 0;
	if (left < 4)
		return PKT_ESHORT;
	a->flags = ref_u32(p);
	o = 4;
	if (a->flags & SSH_FILEXFER_ATTR_SIZE) {
		if (left - o < 8)
			return PKT_ESHORT;
		a->size = (uint64_t)ref_u32(p + o) << 32 | ref_u32(p + o + 4);
		o += 8;
	}
	if (a->flags & SSH_FILEXFER_ATTR_UIDGID) {
		if (left - o < 8)
			return PKT_ESHORT;
		a->uid = ref_u32(p + o);
		a->gid = ref_u32(p + o + 4);
		o += 8;
	}
	if (a->flags & SSH_FILEXFER_ATTR_PERMISSIONS) {
		if (left - o < 4)
			return PKT_ESHORT;
		a->perm = ref_u32(p + o);
		o += 4;
	}
	if (a->flags & SSH_FILEXFER_ATTR_ACMODTIME) {
		if (left - o < 8)
			return PKT_ESHORT;
		a->atime = ref_u32(p + o);
		a->mtime = ref_u32(p + o + 4);
		o += 8;
	}
	if (a->flags & SSH_FILEXFER_ATTR_EXTENDED) {
		if (left - o < 4)
			return PKT_ESHORT;
		count = ref_u32(p + o);
		o += 4;
		if (count > SFTP_MAX_EXTENDED)
			return PKT_EBADATTR;
		for (uint64_t i = 0; i < 2 * (uint64_t)count; i++) {
			if (left - o < 4)
				return PKT_ESHORT;
			len = ref_u32(p + o);
			o += 4;
			if (len > left - o)
				return PKT_ESHORT;
			o += len;
		}
	}
	*used = o;
	return 0;
}

static int
get_attrs(struct cursor *c, struct sftp_attrs *a)
{
	static const struct sftp_attrs zero;
	struct sftp_attrs want;
	struct cursor b = *c;
	size_t used;
	int r;

	r = pkt_get_attrs(c, a);
	CHECK(r == ref_attrs(b.p, b.left, &want, &used));
	if (r == 0) {
		CHECK(memcmp(a, &want, sizeof *a) == 0);
		advanced(&b, c, used);
	} else {
		CHECK(memcmp(a, &zero, sizeof *a) == 0);
		unchanged(&b, c);
	}
	return r;
}

/* The reply queue. */

static void
flush(void)
{
	CHECK(oq_flush(&q, null_fd) == 0);
	CHECK(q.len == 0 && q.sent == 0 && oq_pending(&q) == 0);
	CHECK(oq_refs(&q) == 0);
}

/* As serve(): past its mark the queue is written out. */
static void
room_for_reply(void)
{
	if (q.len >= OQ_HIWAT || q.size - q.len < SFTP_MAX_MSG + 4)
		flush();
}

/*
 * A reply that a builder says it completed at start: its length word covers
 * the rest of the queue, within SFTP_MAX_MSG.  Returns a cursor over its
 * body, after the type byte.
 */
static struct cursor
reply_at(size_t start, uint8_t type)
{
	struct cursor c;
	uint32_t len;

	CHECK(start <= q.len && q.len - start >= 5 && q.len <= q.size);
	len = ref_u32(q.buf + start);
	CHECK(len == q.len - start - 4);
	CHECK(len <= SFTP_MAX_MSG);
	CHECK(q.buf[start + 4] == type);
	CHECK(q.reply_start == q.len);
	c.p = q.buf + start + 5;
	c.left = len - 1;
	return c;
}

/* A builder failed: it must have left the queue as it was. */
static void
failed(int e, size_t start)
{
	CHECK(e == PKT_ENOSPACE);
	CHECK(q.len == start);
}

static void
read_back_string(struct cursor *c, const void *s, size_t len)
{
	const uint8_t *got;
	uint32_t glen;

	CHECK(get_string(c, &got, &glen) == 0);
	CHECK(glen == len && (len == 0 || memcmp(got, s, len) == 0));
}

static void
read_back_attrs(struct cursor *c, const struct sftp_attrs *a)
{
	struct sftp_attrs got, want = *a;

	want.flags &= ~SSH_FILEXFER_ATTR_EXTENDED;
	if (!(want.flags & SSH_FILEXFER_ATTR_SIZE))
		want.size = 0;
	if (!(want.flags & SSH_FILEXFER_ATTR_UIDGID))
		want.uid = want.gid = 0;
	if (!(want.flags & SSH_FILEXFER_ATTR_PERMISSIONS))
		want.perm = 0;
	if (!(want.flags & SSH_FILEXFER_ATTR_ACMODTIME))
		want.atime = want.mtime = 0;
	CHECK(get_attrs(c, &got) == 0);
	CHECK(memcmp(&got, &want, sizeof got) == 0);
}

static void
reply_status(uint32_t id, uint32_t code, const char *msg)
{
	struct cursor c;
	size_t start;
	uint32_t v;
	int e;

	room_for_reply();
	start = q.len;
	if ((e = pkt_reply_status(&q, id, code, msg)) != 0) {
		failed(e, start);
		return;
	}
	c = reply_at(start, SSH_FXP_STATUS);
	CHECK(get_u32(&c, &v) == 0 && v == id);
	CHECK(get_u32(&c, &v) == 0 && v == code);
	if (msg == NULL)
		msg = pkt_status_message(code);
	read_back_string(&c, msg, strlen(msg));
	read_back_string(&c, "", 0);
	CHECK(c.left == 0);
}

static void
reply_handle(uint32_t id, uint32_t slot, uint32_t gen)
{
	struct cursor c;
	size_t start;
	uint32_t v, s, g;
	int e;

	room_for_reply();
	start = q.len;
	if ((e = pkt_reply_handle(&q, id, slot, gen)) != 0) {
		failed(e, start);
		return;
	}
	c = reply_at(start, SSH_FXP_HANDLE);
	CHECK(get_u32(&c, &v) == 0 && v == id);
	CHECK(c.left == 4 + PKT_HANDLE_LEN);
	CHECK(get_handle(&c, &s, &g) == 0 && s == slot && g == gen);
	CHECK(c.left == 0);
}

static void
reply_attrs(uint32_t id, const struct sftp_attrs *a)
{
	struct cursor c;
	size_t start;
	uint32_t v;
	int e;

	room_for_reply();
	start = q.len;
	if ((e = pkt_reply_attrs(&q, id, a)) != 0) {
		failed(e, start);
		return;
	}
	c = reply_at(start, SSH_FXP_ATTRS);
	CHECK(get_u32(&c, &v) == 0 && v == id);
	read_back_attrs(&c, a);
	CHECK(c.left == 0);
}

static void
reply_name1(uint32_t id, const char *path)
{
	static const struct sftp_attrs zero;
	struct cursor c;
	size_t start;
	uint32_t v;
	int e;

	room_for_reply();
	start = q.len;
	if ((e = pkt_reply_name1(&q, id, path)) != 0) {
		failed(e, start);
		return;
	}
	c = reply_at(start, SSH_FXP_NAME);
	CHECK(get_u32(&c, &v) == 0 && v == id);
	CHECK(get_u32(&c, &v) == 0 && v == 1);
	read_back_string(&c, path, strlen(path));
	read_back_string(&c, path, strlen(path));
	read_back_attrs(&c, &zero);
	CHECK(c.left == 0);
}

/* NAME with two entries, each added on its own; a failed add is dropped. */
static void
reply_name2(uint32_t id, const char *a, const char *b,
    const struct sftp_attrs *attrs)
{
	const char *names[2] = { a, b };
	int added[2] = { 0, 0 };
	struct reply r;
	struct cursor c;
	size_t start, mark;
	uint32_t v;
	int e;

	room_for_reply();
	start = q.len;
	if ((e = pkt_name_begin(&q, &r, id)) != 0) {
		failed(e, start);
		return;
	}
	for (int i = 0; i < 2; i++) {
		mark = q.len;
		if ((e = pkt_name_add(&q, &r, names[i], names[1 - i],
		    attrs)) != 0) {
			CHECK(e == PKT_ENOSPACE && q.len == mark);
			continue;
		}
		added[i] = 1;
		CHECK(pkt_reply_len(&q, &r) == q.len - start);
	}
	pkt_name_end(&q, &r);
	c = reply_at(start, SSH_FXP_NAME);
	CHECK(get_u32(&c, &v) == 0 && v == id);
	CHECK(get_u32(&c, &v) == 0 && v == (uint32_t)(added[0] + added[1]));
	for (int i = 0; i < 2; i++) {
		if (!added[i])
			continue;
		read_back_string(&c, names[i], strlen(names[i]));
		read_back_string(&c, names[1 - i], strlen(names[1 - i]));
		read_back_attrs(&c, attrs);
	}
	CHECK(c.left == 0);
}

/* DATA filled in place with data (len bytes). */
static void
reply_data(uint32_t id, const uint8_t *data, size_t len)
{
	struct reply r;
	struct cursor c;
	size_t start;
	uint8_t *p;
	uint32_t v;

	if (len > SFTP_MAX_READ)
		len = SFTP_MAX_READ;
	room_for_reply();
	start = q.len;
	/* By reference, as a worker's READ, when it may be. */
	if ((next_random() & 1) && pkt_data_ref(&q, &r, id, data, len) == 0) {
		CHECK(len >= OQ_REF_MIN && oq_refs(&q) == 0);
		pkt_data_end(&q, &r, len);
		CHECK(oq_refs(&q) == 1 && q.len == start + 13);
		CHECK(ref_u32(q.buf + start) == 9 + len);
		CHECK(q.buf[start + 4] == SSH_FXP_DATA);
		CHECK(ref_u32(q.buf + start + 5) == id);
		CHECK(ref_u32(q.buf + start + 9) == len);
		CHECK(oq_pending(&q) == 13 + len);
		CHECK(q.ref[0].p == data && q.ref[0].n == len);
	} else if ((p = pkt_data_begin(&q, &r, id, len)) == NULL) {
		CHECK(q.len == start);
	} else {
		CHECK(p >= q.buf && p + len <= q.buf + q.size);
		if (len > 0)
			memcpy(p, data, len);
		pkt_data_end(&q, &r, len);
		c = reply_at(start, SSH_FXP_DATA);
		CHECK(get_u32(&c, &v) == 0 && v == id);
		read_back_string(&c, data, len);
		CHECK(c.left == 0);
	}

	flush();
}

/* EXTENDED_REPLY echoing strings, as put_names() and limits build them. */
static void
reply_extended(uint32_t id, const uint8_t *s1, uint32_t l1, uint64_t v64)
{
	struct reply r;
	struct cursor c;
	size_t start, mark;
	uint64_t got;
	uint32_t v;
	int e;

	room_for_reply();
	start = q.len;
	if ((e = pkt_begin(&q, &r, SSH_FXP_EXTENDED_REPLY)) != 0) {
		failed(e, start);
		return;
	}
	if ((e = pkt_put_u32(&q, id)) != 0 ||
	    (e = pkt_put_u64(&q, v64)) != 0) {
		pkt_cancel(&q, &r);
		failed(e, start);
		return;
	}
	mark = pkt_mark(&q);
	if ((e = pkt_put_u32(&q, 0)) != 0 ||
	    (e = pkt_put_string(&q, s1, l1)) != 0 ||
	    (e = pkt_put_u8(&q, 0x5a)) != 0) {
		pkt_cancel(&q, &r);
		failed(e, start);
		return;
	}
	pkt_patch_u32(&q, mark, (uint32_t)(pkt_mark(&q) - mark - 4));
	pkt_end(&q, &r);
	c = reply_at(start, SSH_FXP_EXTENDED_REPLY);
	CHECK(get_u32(&c, &v) == 0 && v == id);
	CHECK(get_u64(&c, &got) == 0 && got == v64);
	CHECK(get_u32(&c, &v) == 0 && v == 4 + l1 + 1);
	read_back_string(&c, s1, l1);
	CHECK(c.left == 1 && c.p[0] == 0x5a);
}

/* The fields of an extended request, by name; the reply echoes them. */
static void
parse_extended(uint32_t id, struct cursor *c, const uint8_t *name,
    uint32_t nlen)
{
	const uint8_t *s1, *s2;
	uint32_t l1, l2, h1, g1, h2, g2;
	uint64_t a, b, d;
	struct sftp_attrs at;

	memset(&at, 0, sizeof at);
#define IS(lit)	(nlen == sizeof(lit) - 1 && memcmp(name, lit, nlen) == 0)
	if (IS("posix-rename@openssh.com") || IS("hardlink@openssh.com")) {
		if (get_path(c, path_a, sizeof path_a) == 0 &&
		    get_path(c, path_b, sizeof path_b) == 0)
			reply_name2(id, path_a, path_b, &at);
	} else if (IS("statvfs@openssh.com") ||
	    IS("expand-path@openssh.com") || IS("home-directory")) {
		if (get_path(c, path_a, sizeof path_a) == 0)
			reply_name1(id, path_a);
	} else if (IS("fstatvfs@openssh.com") || IS("fsync@openssh.com")) {
		if (get_handle(c, &h1, &g1) == 0)
			reply_handle(id, h1, g1);
	} else if (IS("lsetstat@openssh.com")) {
		if (get_path(c, path_a, sizeof path_a) == 0 &&
		    get_attrs(c, &at) == 0)
			reply_attrs(id, &at);
	} else if (IS("limits@openssh.com")) {
		reply_extended(id, (const uint8_t *)"", 0, SFTP_MAX_MSG);
	} else if (IS("copy-data")) {
		if (get_handle(c, &h1, &g1) == 0 && get_u64(c, &a) == 0 &&
		    get_u64(c, &b) == 0 && get_handle(c, &h2, &g2) == 0 &&
		    get_u64(c, &d) == 0)
			reply_extended(id, (const uint8_t *)"", 0,
			    a ^ b ^ d ^ h1 ^ g2);
	} else if (IS("users-groups-by-id@openssh.com")) {
		if (get_string(c, &s1, &l1) == 0 &&
		    get_string(c, &s2, &l2) == 0)
			reply_extended(id, s1, l1, l2);
	} else {
		reply_status(id, SSH_FX_OP_UNSUPPORTED, NULL);
	}
#undef IS
}

/* First pass: the fields of the request type, as the handlers take them. */
static void
parse_request(struct cursor *c)
{
	const uint8_t *s1, *s2;
	struct sftp_attrs a;
	uint32_t id, v, l1, l2, h1, g1;
	uint64_t off;
	uint8_t type;

	memset(&a, 0, sizeof a);
	CHECK(get_u8(c, &type) == 0);
	if (type == SSH_FXP_INIT) {
		if (get_u32(c, &v) != 0)
			return;
		/* Extension pairs, which the server skips. */
		while (get_string(c, &s1, &l1) == 0 &&
		    get_string(c, &s2, &l2) == 0)
			reply_extended(v, s1, l1, l2);
		return;
	}
	if (get_u32(c, &id) != 0)
		return;
	switch (type) {
	case SSH_FXP_OPEN:
		if (get_path(c, path_a, sizeof path_a) == 0 &&
		    get_u32(c, &v) == 0 && get_attrs(c, &a) == 0) {
			reply_name1(id, path_a);
			reply_attrs(id, &a);
		}
		break;
	case SSH_FXP_CLOSE:
	case SSH_FXP_FSTAT:
	case SSH_FXP_READDIR:
		if (get_handle(c, &h1, &g1) == 0)
			reply_handle(id, h1, g1);
		break;
	case SSH_FXP_READ:
		if (get_handle(c, &h1, &g1) == 0 && get_u64(c, &off) == 0 &&
		    get_u32(c, &v) == 0)
			reply_data(id, c->p, v < c->left ? v : c->left);
		break;
	case SSH_FXP_WRITE:
		if (get_handle(c, &h1, &g1) == 0 && get_u64(c, &off) == 0 &&
		    get_string(c, &s2, &l2) == 0) {
			reply_data(id, s2, l2);
			reply_status(id, (uint32_t)off, NULL);
		}
		break;
	case SSH_FXP_SETSTAT:
	case SSH_FXP_MKDIR:
		if (get_path(c, path_a, sizeof path_a) == 0 &&
		    get_attrs(c, &a) == 0)
			reply_attrs(id, &a);
		break;
	case SSH_FXP_FSETSTAT:
		if (get_string(c, &s1, &l1) == 0 && get_attrs(c, &a) == 0)
			reply_attrs(id, &a);
		break;
	case SSH_FXP_LSTAT:
	case SSH_FXP_STAT:
	case SSH_FXP_OPENDIR:
	case SSH_FXP_REMOVE:
	case SSH_FXP_RMDIR:
	case SSH_FXP_REALPATH:
	case SSH_FXP_READLINK:
		if (get_path(c, path_a, sizeof path_a) == 0)
			reply_name1(id, path_a);
		break;
	case SSH_FXP_RENAME:
	case SSH_FXP_SYMLINK:
		if (get_path(c, path_a, sizeof path_a) == 0 &&
		    get_path(c, path_b, sizeof path_b) == 0)
			reply_name2(id, path_a, path_b, &a);
		break;
	case SSH_FXP_EXTENDED:
		if (get_string(c, &s1, &l1) == 0)
			parse_extended(id, c, s1, l1);
		break;
	default:
		reply_status(id, SSH_FX_OP_UNSUPPORTED, NULL);
		break;
	}
}

/* Second pass: getters in an order of the input's choosing. */
static void
parse_script(struct cursor *c)
{
	static const size_t sizes[] = { 0, 1, 2, 16, PATH_MAX };
	const uint8_t *s;
	struct sftp_attrs a;
	uint64_t v64;
	uint32_t v32, len;
	uint8_t v8;

	for (int i = 0; i < SCRIPT_MAX && c->left > 0; i++) {
		switch (next_random() % 6) {
		case 0:
			(void)get_u8(c, &v8);
			break;
		case 1:
			(void)get_u32(c, &v32);
			break;
		case 2:
			(void)get_u64(c, &v64);
			break;
		case 3:
			(void)get_string(c, &s, &len);
			break;
		case 4:
			(void)get_path(c, path_a,
			    sizes[next_random() % (sizeof sizes /
			    sizeof sizes[0])]);
			break;
		default:
			(void)get_attrs(c, &a);
			break;
		}
	}
}

/*
 * Feeds s (n bytes) through an ibuf with read-ahead soft, in reads of
 * random sizes, taking every packet out as soon as it is complete, as
 * serve() does.
 */
static void
frame_stream(const uint8_t *s, size_t n, size_t soft)
{
	struct ibuf ib;
	struct cursor c, body;
	size_t fed = 0, taken = 0, room, want, before;
	uint32_t len, plen;
	uint8_t *p;
	ssize_t got;
	int r, ready, big = rng & 1;

	CHECK(ibuf_init(&ib, soft) == 0);
	for (;;) {
		for (;;) {
			ready = ibuf_ready(&ib);
			before = ib.start;
			r = ibuf_next(&ib, &c, &len);
			CHECK(ready == (r != 0));
			if (r == 0) {
				CHECK(c.p == NULL && c.left == 0);
				/* Incomplete by a plain reading, too. */
				CHECK(fed - taken < 4 ||
				    fed - taken - 4 < ref_u32(s + taken));
				break;
			}
			CHECK(fed - taken >= 4);
			plen = ref_u32(s + taken);
			CHECK(len == plen);
			if (r == PKT_EFRAME) {
				CHECK(plen == 0 || plen > SFTP_MAX_MSG);
				goto out;
			}
			CHECK(r == 1 && plen > 0 && plen <= SFTP_MAX_MSG);
			CHECK(c.left == plen && fed - taken - 4 >= plen);
			CHECK(c.p == ib.buf + before + 4);
			CHECK(c.p + c.left <= ib.buf + ib.size);
			CHECK(memcmp(c.p, s + taken + 4, plen) == 0);
			taken += 4 + (size_t)plen;
			body = c;
			parse_request(&c);
			parse_script(&body);
		}
		CHECK(ib.start <= ib.end && ib.end <= ib.size);
		CHECK(ibuf_pending(&ib) == fed - taken);
		if (fed == n)
			break;
		ibuf_room(&ib, &p, &room);
		CHECK(room > 0 && p == ib.buf + ib.end);
		CHECK(room <= ib.size - ib.end);
		want = 1 + next_random() % (big ? 4096 : 32);
		if (want > room)
			want = room;
		if (want > n - fed)
			want = n - fed;
		CHECK(write(pipe_w, s + fed, want) == (ssize_t)want);
		got = ibuf_read(&ib, pipe_r);
		CHECK(got == (ssize_t)want);
		CHECK(memcmp(p, s + fed, want) == 0);
		fed += want;
	}
out:
	ibuf_free(&ib);
}

int
LLVMFuzzerInitialize(int *argcp, char ***argvp)
{
	int p[2];

	(void)argcp;
	(void)argvp;
	if ((null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC)) == -1 ||
	    pipe(p) == -1) {
		perror("fuzz_packet: setup");
		exit(1);
	}
	pipe_r = p[0];
	pipe_w = p[1];
	return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t head[3] = { 0, 0, 0 };
	size_t soft, qsize;

	memcpy(head, data, size < 3 ? size : 3);
	data += size < 3 ? size : 3;
	size -= size < 3 ? size : 3;
	soft = head[0] == 0 ? IBUF_SOFT : head[0];
	rng = 0x9e3779b9u ^ ((uint32_t)head[1] * 0x01000193u);
	qsize = head[2] == 0 ? OQ_SIZE : (size_t)head[2] * 64;
	CHECK(oq_init(&q, qsize) == 0);
	frame_stream(data, size, soft);
	flush();
	oq_free(&q);
	return 0;
}
