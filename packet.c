/*
 * The wire: framing of the input buffer, the field cursor and the reply
 * queue.  Only this file does pointer arithmetic on wire data.
 */
#include <sys/types.h>
#include <sys/mman.h>
#include <sys/uio.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "packet.h"

_Static_assert(SFTP_MAX_READ + 13 <= SFTP_MAX_MSG + 4,
    "a full DATA reply must fit one message");
_Static_assert(OQ_SIZE >= OQ_HIWAT + SFTP_MAX_MSG + 4,
    "the queue must hold a maximal reply above its mark");

static uint32_t
peek_u32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	    (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static void
poke_u32(uint8_t *p, uint32_t v)
{
	p[0] = v >> 24;
	p[1] = v >> 16;
	p[2] = v >> 8;
	p[3] = v;
}

/* The field cursor. */

int
pkt_get_u8(struct cursor *c, uint8_t *vp)
{
	*vp = 0;
	if (c->left < 1)
		return PKT_ESHORT;
	*vp = c->p[0];
	c->p++;
	c->left--;
	return 0;
}

int
pkt_get_u32(struct cursor *c, uint32_t *vp)
{
	*vp = 0;
	if (c->left < 4)
		return PKT_ESHORT;
	*vp = peek_u32(c->p);
	c->p += 4;
	c->left -= 4;
	return 0;
}

int
pkt_get_u64(struct cursor *c, uint64_t *vp)
{
	*vp = 0;
	if (c->left < 8)
		return PKT_ESHORT;
	*vp = (uint64_t)peek_u32(c->p) << 32 | peek_u32(c->p + 4);
	c->p += 8;
	c->left -= 8;
	return 0;
}

int
pkt_get_string(struct cursor *c, const uint8_t **datap, uint32_t *lenp)
{
	uint32_t len;

	*datap = NULL;
	*lenp = 0;
	if (c->left < 4)
		return PKT_ESHORT;
	len = peek_u32(c->p);
	if (len > c->left - 4)
		return PKT_ESHORT;
	*datap = c->p + 4;
	*lenp = len;
	c->p += 4 + (size_t)len;
	c->left -= 4 + (size_t)len;
	return 0;
}

int
pkt_get_handle(struct cursor *c, uint32_t *slotp, uint32_t *genp)
{
	const uint8_t *s;
	uint32_t len;
	int e;

	*slotp = PKT_HANDLE_NONE;
	*genp = 0;
	if ((e = pkt_get_string(c, &s, &len)) != 0)
		return e;
	if (len == PKT_HANDLE_LEN) {
		*slotp = peek_u32(s);
		*genp = peek_u32(s + 4);
	}
	return 0;
}

int
pkt_get_path(struct cursor *c, char *buf, size_t size)
{
	struct cursor save = *c;
	const uint8_t *s;
	uint32_t len;
	int r;

	if (size > 0)
		buf[0] = '\0';
	if ((r = pkt_get_string(c, &s, &len)) != 0)
		return r;
	if (memchr(s, '\0', len) != NULL) {
		*c = save;
		return PKT_ENUL;
	}
	if (len >= size) {
		*c = save;
		return PKT_ETOOLONG;
	}
	memcpy(buf, s, len);
	buf[len] = '\0';
	return 0;
}

int
pkt_get_attrs(struct cursor *c, struct sftp_attrs *a)
{
	struct cursor save = *c;
	const uint8_t *s;
	uint32_t count, len;
	int r;

	memset(a, 0, sizeof *a);
	if ((r = pkt_get_u32(c, &a->flags)) != 0)
		goto fail;
	if ((a->flags & SSH_FILEXFER_ATTR_SIZE) &&
	    (r = pkt_get_u64(c, &a->size)) != 0)
		goto fail;
	if ((a->flags & SSH_FILEXFER_ATTR_UIDGID) &&
	    ((r = pkt_get_u32(c, &a->uid)) != 0 ||
	    (r = pkt_get_u32(c, &a->gid)) != 0))
		goto fail;
	if ((a->flags & SSH_FILEXFER_ATTR_PERMISSIONS) &&
	    (r = pkt_get_u32(c, &a->perm)) != 0)
		goto fail;
	if ((a->flags & SSH_FILEXFER_ATTR_ACMODTIME) &&
	    ((r = pkt_get_u32(c, &a->atime)) != 0 ||
	    (r = pkt_get_u32(c, &a->mtime)) != 0))
		goto fail;
	if (a->flags & SSH_FILEXFER_ATTR_EXTENDED) {
		if ((r = pkt_get_u32(c, &count)) != 0)
			goto fail;
		if (count > SFTP_MAX_EXTENDED) {
			r = PKT_EBADATTR;
			goto fail;
		}
		/* As OpenSSH: extended pairs are parsed and ignored. */
		for (uint32_t i = 0; i < count; i++) {
			if ((r = pkt_get_string(c, &s, &len)) != 0 ||
			    (r = pkt_get_string(c, &s, &len)) != 0)
				goto fail;
		}
	}
	return 0;
fail:
	*c = save;
	memset(a, 0, sizeof *a);
	return r;
}

/* The input buffer. */

/*
 * The buffers are mappings of their own, so that an idle session can give
 * their pages back (buf_release()) and keep the addresses.
 */
static uint8_t *
buf_map(size_t size)
{
	void *p;

	p = mmap(NULL, size, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

/* Gives back the pages of buf from offset from on; they read as zeros. */
static void
buf_release(uint8_t *buf, size_t size, size_t from)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);

	from = (from + page - 1) / page * page;
	if (from < size)
		(void)madvise(buf + from, size - from, MADV_DONTNEED);
}

int
ibuf_init_pinned(struct ibuf *ib, size_t soft, size_t hard)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE), huge, from, span;
	uint8_t *map;

	memset(ib, 0, sizeof *ib);
	ib->soft = soft;
	ib->hard = hard > soft ? hard : soft;
	ib->size = ib->hard + IBUF_TAIL;
	ib->pin_size = (IBUF_PINS * sizeof *ib->pin + page - 1) / page * page;
	ib->map_size = ib->pin_size + ib->size;
	if (ib->size > UINT32_MAX)
		return -1;
	/*
	 * The window past the reach of a read with nothing pinned (soft and
	 * a packet's room behind it), which only pinned WRITEs fill, in whole
	 * huge pages: the last one may reach past size, by at most an eighth.
	 */
	huge = ib->hard > ib->soft ? buf_huge_size() : 0;
	from = (soft + IBUF_TAIL + page - 1) / page * page;
	if (huge != 0 && ib->size > from && ib->size - from >= huge) {
		span = (ib->size - from + huge - 1) / huge * huge;
		if (span - (ib->size - from) > (ib->size - from) / 8)
			span -= huge;
		ib->huge = huge;
		ib->huge_from = from;
		ib->huge_to = from + span;
		if (ib->pin_size + ib->huge_to > ib->map_size)
			ib->map_size = ib->pin_size + ib->huge_to;
	}
	if ((map = buf_map_aligned(ib->map_size, ib->pin_size + from,
	    ib->huge)) == NULL)
		return -1;
	ib->pin = (struct ibuf_pin *)(void *)map;
	ib->buf = map + ib->pin_size;
	if (ib->huge != 0 && (uintptr_t)(ib->buf + from) % ib->huge != 0)
		ib->huge = 0;	/* mapped without the margin for it */
	return 0;
}

int
ibuf_init(struct ibuf *ib, size_t soft)
{
	return ibuf_init_pinned(ib, soft, soft);
}

unsigned
ibuf_pin(struct ibuf *ib, const uint8_t *p)
{
	unsigned i;

	if (p < ib->buf || p > ib->buf + ib->end)
		abort();
	for (i = 0; i < IBUF_PINS && ib->pin[i].held; i++)
		;
	if (i == IBUF_PINS)
		abort();	/* more than IBUF_PINS: see packet.h */
	ib->pin[i].off = (uint32_t)(p - ib->buf);
	ib->pin[i].lap = (uint8_t)ib->lap;
	ib->pin[i].held = 1;
	ib->pins++;
	ib->pinned = 1;
	return i;
}

void
ibuf_unpin(struct ibuf *ib, unsigned i)
{
	if (i >= IBUF_PINS || !ib->pin[i].held)
		abort();
	ib->pin[i].held = 0;
	ib->pins--;
	if (ib->pin[i].lap != ib->lap)
		ib->old--;
}

/*
 * Where the lap of parity lap may read up to: soft without pins, hard
 * with pins of its own only, and below the lowest byte pinned in the lap
 * before, less IBUF_TAIL, while it has some.
 */
static size_t
ibuf_limit(const struct ibuf *ib, unsigned lap)
{
	size_t low = SIZE_MAX;

	if (ib->pins == 0)
		return ib->soft;
	if (lap == ib->lap && ib->old == 0)
		return ib->hard;	/* no pin of the lap before */
	for (unsigned i = 0; i < IBUF_PINS; i++)
		if (ib->pin[i].held && ib->pin[i].lap != lap &&
		    ib->pin[i].off < low)
			low = ib->pin[i].off;
	if (low == SIZE_MAX)
		return ib->hard;
	if (low <= IBUF_TAIL)
		return 0;
	return low - IBUF_TAIL < ib->hard ? low - IBUF_TAIL : ib->hard;
}

/*
 * Reads fill [end, limit) while end is below the lap's limit.  Past it,
 * only the rest of the packet that started before it is read, so that it
 * ends within IBUF_TAIL of the limit (the frame checks of ibuf_next() keep
 * every length within SFTP_MAX_MSG).  Once every byte read is parsed, a new
 * lap starts at 0: at once without pins, and when the lap is at its limit
 * and none of the lap before is left with them (*wrap).  Returns how much
 * to read next; 0 (pinned and full) waits for ibuf_unpin().
 */
static size_t
ibuf_want(const struct ibuf *ib, int *wrap)
{
	size_t want, start = ib->start, end = ib->end;
	size_t limit = ibuf_limit(ib, ib->lap);

	*wrap = 0;
	if (start == end && end > 0 &&
	    (ib->pins == 0 || (end >= limit && ib->old == 0))) {
		*wrap = 1;
		start = end = 0;
		limit = ibuf_limit(ib, ib->lap ^ 1);
	}
	if (end < limit)
		return limit - end;
	if (start == end && ib->pins > 0)
		return 0;
	if (end - start < 4)
		return 4 - (end - start);
	want = start + 4 + peek_u32(ib->buf + start) - end;
	if (want > ib->size - end)
		abort();	/* a frame longer than SFTP_MAX_MSG */
	return want;
}

int
ibuf_can_read(const struct ibuf *ib)
{
	int wrap;

	return ibuf_want(ib, &wrap) > 0;
}

void
ibuf_free(struct ibuf *ib)
{
	if (ib->buf != NULL)
		(void)munmap(ib->pin, ib->map_size);
	memset(ib, 0, sizeof *ib);
}

void
ibuf_release(struct ibuf *ib)
{
	if (ib->pins == 0 && ib->pinned) {
		/* The slots' page goes back; they read as free (0) again. */
		(void)madvise(ib->pin, ib->pin_size, MADV_DONTNEED);
		ib->pinned = 0;
	}
	if (ib->start == ib->end && ib->pins == 0)
		ib->start = ib->end = 0;
	if (ib->old == 0) {	/* else bytes past end are pinned */
		buf_release(ib->buf, ib->map_size - ib->pin_size, ib->end);
		if (ib->present > ib->end)
			ib->present = ib->end;	/* its page may stay */
		ib->reached = ib->end;
		/*
		 * Small pages again, as before a bulk.  A huge page that
		 * still holds bytes (a packet cut short at idle) was split by
		 * the release above, which gave back its pages past end, as
		 * before; the advice keeps them from being gathered into one
		 * again (khugepaged).
		 */
		if (ib->huge_on) {
			(void)buf_huge(ib->buf + ib->huge_lo,
			    ib->huge_to - ib->huge_lo, 0);
			ib->huge_on = 0;
		}
	}
}

void
ibuf_bulk(struct ibuf *ib)
{
	size_t from, used;

	if (ib->huge == 0 || ib->huge_on)
		return;
	/* The whole huge pages past every byte reached or made present. */
	used = ib->reached > ib->present ? ib->reached : ib->present;
	from = ib->huge_from;
	if (used > from)
		from += (used - from + ib->huge - 1) / ib->huge * ib->huge;
	if (from >= ib->huge_to)
		return;
	if (buf_huge(ib->buf + from, ib->huge_to - from, 1) == -1) {
		ib->huge = 0;	/* refused: small pages for good */
		return;
	}
	ib->huge_lo = from;
	ib->huge_on = 1;
}

int
ibuf_next(struct ibuf *ib, struct cursor *c, uint32_t *lenp)
{
	size_t have = ib->end - ib->start;
	uint32_t len;

	c->p = NULL;
	c->left = 0;
	*lenp = 0;
	if (have < 4)
		return 0;
	len = peek_u32(ib->buf + ib->start);
	*lenp = len;
	if (len == 0 || len > SFTP_MAX_MSG)
		return PKT_EFRAME;
	if (have - 4 < len)
		return 0;
	c->p = ib->buf + ib->start + 4;
	c->left = len;
	ib->start += 4 + (size_t)len;
	return 1;
}

int
ibuf_ready(const struct ibuf *ib)
{
	size_t have = ib->end - ib->start;
	uint32_t len;

	if (have < 4)
		return 0;
	len = peek_u32(ib->buf + ib->start);
	return len == 0 || len > SFTP_MAX_MSG || have - 4 >= len;
}

/* Where to read next, and how much (ibuf_want()), starting a lap. */
static void
ibuf_room(struct ibuf *ib, uint8_t **pp, size_t *lenp)
{
	int wrap;

	*lenp = ibuf_want(ib, &wrap);
	if (wrap) {
		ib->start = ib->end = 0;
		ib->lap ^= 1;
		ib->old = ib->pins;
	}
	*pp = ib->buf + ib->end;
}

static void
ibuf_fill(struct ibuf *ib, size_t n)
{
	if (n > ib->size - ib->end)
		abort();
	ib->end += n;
	if (ib->end > ib->reached)
		ib->reached = ib->end;
}

/*
 * While WRITEs are pinned, a lap reads up to the window's hard end, and
 * pages are first made present (buf_present()), with one call, rather
 * than by a page fault each as a read fills them (1,024 faults for the
 * first lap of 4 MiB, in the loop's thread): as many bytes of the room as
 * the last read returned, what the next is likely to bring, so that a
 * trickle of input makes no page present that it would not touch.
 * Without pins the window (soft) is small.
 */
static int populate_refused;

static void
ibuf_present(struct ibuf *ib, size_t upto)
{
	if (upto <= ib->present || populate_refused)
		return;
	if (buf_present(ib->buf + ib->present, ib->buf + upto) == -1)
		populate_refused = 1;
	ib->present = upto;
}

ssize_t
ibuf_read(struct ibuf *ib, int fd)
{
	uint8_t *p;
	size_t room;
	ssize_t n;

	ibuf_room(ib, &p, &room);
	if (room == 0) {
		errno = EAGAIN;
		return -1;
	}
	if (ib->pins > 0)
		ibuf_present(ib, (size_t)(p - ib->buf) +
		    (room < ib->last ? room : ib->last));
	if ((n = read(fd, p, room)) == -1)
		return -1;
	ib->last = (size_t)n;
	if (n > 0)
		ibuf_fill(ib, (size_t)n);
	return n;
}

/* The reply queue. */

int
oq_init(struct oqueue *q, size_t size)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	uint8_t *map;

	memset(q, 0, sizeof *q);
	q->ref_size = (OQ_REFS * sizeof *q->ref + page - 1) / page * page;
	if ((map = buf_map(q->ref_size + size)) == NULL)
		return -1;
	q->ref = (struct oq_ref *)(void *)map;
	q->buf = map + q->ref_size;
	q->size = size;
	return 0;
}

void
oq_free(struct oqueue *q)
{
	if (q->buf != NULL)
		(void)munmap(q->ref, q->ref_size + q->size);
	memset(q, 0, sizeof *q);
}

void
oq_release(struct oqueue *q)
{
	if (q->nrefs == 0 && q->ref_touched) {
		(void)madvise(q->ref, q->ref_size, MADV_DONTNEED);
		q->ref_touched = 0;
	}
	buf_release(q->buf, q->size, q->len);
}

void
oq_drop(struct oqueue *q)
{
	q->sent = q->len = q->reply_start = 0;
	q->nrefs = q->rnext = 0;
	q->rsent = q->ref_left = 0;
}

void
oq_mute(struct oqueue *q)
{
	oq_drop(q);
	q->muted = 1;
}

size_t
oq_pending(const struct oqueue *q)
{
	return q->len - q->sent + q->ref_left;
}

unsigned
oq_refs(const struct oqueue *q)
{
	return q->nrefs;
}

/*
 * What is left to write, from where the last write stopped, as iovecs:
 * buf's bytes up to the next reference, its bytes, and so on to buf's
 * end.  Returns how many (at most 2 * OQ_REFS + 1).
 */
static int
oq_iov(const struct oqueue *q, struct iovec *iov)
{
	size_t b = q->sent, skip = q->rsent;
	int n = 0;

	for (unsigned i = q->rnext; i < q->nrefs; i++) {
		if (q->ref[i].at > b) {
			iov[n].iov_base = q->buf + b;
			iov[n++].iov_len = q->ref[i].at - b;
			b = q->ref[i].at;
		}
		iov[n].iov_base = (void *)(uintptr_t)(q->ref[i].p + skip);
		iov[n++].iov_len = q->ref[i].n - skip;
		skip = 0;
	}
	if (b < q->len) {
		iov[n].iov_base = q->buf + b;
		iov[n++].iov_len = q->len - b;
	}
	return n;
}

/* n more bytes were written: buf's and the references', in stream order. */
static void
oq_advance(struct oqueue *q, size_t n)
{
	size_t take, lim;
	const struct oq_ref *r;

	while (n > 0) {
		r = q->rnext < q->nrefs ? &q->ref[q->rnext] : NULL;
		if (r != NULL && q->sent == r->at) {
			take = r->n - q->rsent < n ? r->n - q->rsent : n;
			q->rsent += take;
			q->ref_left -= take;
			if (q->rsent == r->n) {
				q->rnext++;
				q->rsent = 0;
			}
		} else {
			lim = r != NULL ? r->at : q->len;
			take = lim - q->sent < n ? lim - q->sent : n;
			q->sent += take;
		}
		n -= take;
	}
}

int
oq_flush(struct oqueue *q, int fd)
{
	struct iovec iov[2 * OQ_REFS + 1];
	ssize_t n;
	int cnt;

	while (oq_pending(q) > 0) {
		cnt = oq_iov(q, iov);
		n = cnt == 1 ? write(fd, iov[0].iov_base, iov[0].iov_len) :
		    writev(fd, iov, cnt);
		if (n == -1)
			return -1;
		if ((size_t)n > oq_pending(q))
			abort();
		oq_advance(q, (size_t)n);
	}
	oq_drop(q);	/* all written */
	return 0;
}

static int
reserve(struct oqueue *q, size_t n)
{
	if (n > q->size - q->len ||
	    n > SFTP_MAX_MSG + 4 - (q->len - q->reply_start))
		return PKT_ENOSPACE;
	return 0;
}

/*
 * A reply starts.  When a flush left part of the queue unwritten and the
 * room behind the queue's end could not take a whole message, the unwritten
 * bytes move to the front: then a reply started while oq_pending() is at
 * most OQ_HIWAT always fits (OQ_SIZE, _Static_assert above).  Only the end
 * of a session starts replies behind a partial write; the loop's flushes
 * are whole.
 */
int
pkt_begin(struct oqueue *q, struct reply *r, uint8_t type)
{
	memset(r, 0, sizeof *r);
	if (q->sent > 0 && q->size - q->len < SFTP_MAX_MSG + 4) {
		memmove(q->buf, q->buf + q->sent, q->len - q->sent);
		/* The references not wholly written move with their bytes. */
		for (unsigned i = q->rnext; i < q->nrefs; i++) {
			q->ref[i - q->rnext] = q->ref[i];
			q->ref[i - q->rnext].at -= q->sent;
		}
		q->nrefs -= q->rnext;
		q->rnext = 0;
		q->len -= q->sent;
		q->sent = 0;
	}
	q->reply_start = q->len;
	if (reserve(q, 5) != 0)
		return PKT_ENOSPACE;
	r->start = q->len;
	poke_u32(q->buf + q->len, 0);
	q->buf[q->len + 4] = type;
	q->len += 5;
	return 0;
}

int
pkt_put_u32(struct oqueue *q, uint32_t v)
{
	if (reserve(q, 4) != 0)
		return PKT_ENOSPACE;
	poke_u32(q->buf + q->len, v);
	q->len += 4;
	return 0;
}

int
pkt_put_u64(struct oqueue *q, uint64_t v)
{
	if (reserve(q, 8) != 0)
		return PKT_ENOSPACE;
	poke_u32(q->buf + q->len, (uint32_t)(v >> 32));
	poke_u32(q->buf + q->len + 4, (uint32_t)v);
	q->len += 8;
	return 0;
}

static int
pkt_put_string(struct oqueue *q, const void *s, size_t len)
{
	if (len > UINT32_MAX || len > SIZE_MAX - 4 || reserve(q, 4 + len) != 0)
		return PKT_ENOSPACE;
	poke_u32(q->buf + q->len, (uint32_t)len);
	if (len > 0)
		memcpy(q->buf + q->len + 4, s, len);
	q->len += 4 + len;
	return 0;
}

int
pkt_put_raw(struct oqueue *q, const void *s, size_t len)
{
	if (reserve(q, len) != 0)
		return PKT_ENOSPACE;
	if (len > 0)
		memcpy(q->buf + q->len, s, len);
	q->len += len;
	return 0;
}

int
pkt_put_cstring(struct oqueue *q, const char *s)
{
	return pkt_put_string(q, s, strlen(s));
}

static int
pkt_put_attrs(struct oqueue *q, const struct sftp_attrs *a)
{
	uint32_t flags = a->flags & ~SSH_FILEXFER_ATTR_EXTENDED;
	int r;

	if ((r = pkt_put_u32(q, flags)) != 0)
		return r;
	if ((flags & SSH_FILEXFER_ATTR_SIZE) &&
	    (r = pkt_put_u64(q, a->size)) != 0)
		return r;
	if ((flags & SSH_FILEXFER_ATTR_UIDGID) &&
	    ((r = pkt_put_u32(q, a->uid)) != 0 ||
	    (r = pkt_put_u32(q, a->gid)) != 0))
		return r;
	if ((flags & SSH_FILEXFER_ATTR_PERMISSIONS) &&
	    (r = pkt_put_u32(q, a->perm)) != 0)
		return r;
	if ((flags & SSH_FILEXFER_ATTR_ACMODTIME) &&
	    ((r = pkt_put_u32(q, a->atime)) != 0 ||
	    (r = pkt_put_u32(q, a->mtime)) != 0))
		return r;
	return 0;
}

/* The reply ends, with extra bytes behind buf's (a reference's). */
static void
end_reply(struct oqueue *q, struct reply *r, size_t extra)
{
	size_t len = q->len - r->start - 4;

	if (r->start > q->len || len > SFTP_MAX_MSG ||
	    extra > SFTP_MAX_MSG - len)
		abort();
	poke_u32(q->buf + r->start, (uint32_t)(len + extra));
	q->nreplies++;
	if (q->muted)
		q->len = r->start;	/* built, counted, and dropped */
	q->reply_start = q->len;
}

void
pkt_end(struct oqueue *q, struct reply *r)
{
	end_reply(q, r, 0);
}

size_t
pkt_mark(const struct oqueue *q)
{
	return q->len;
}

void
pkt_patch_u32(struct oqueue *q, size_t mark, uint32_t v)
{
	if (mark > q->len || q->len - mark < 4)
		abort();
	poke_u32(q->buf + mark, v);
}

void
pkt_cancel(struct oqueue *q, struct reply *r)
{
	if (r->start > q->len)
		abort();
	q->len = r->start;
	q->reply_start = q->len;
}

const char *
pkt_status_message(uint32_t code)
{
	static const char *const msgs[] = {
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

	if (code < sizeof msgs / sizeof msgs[0])
		return msgs[code];
	return "Unknown error";
}

int
pkt_reply_status(struct oqueue *q, uint32_t id, uint32_t code,
    const char *msg)
{
	struct reply r;
	int e;

	if (msg == NULL)
		msg = pkt_status_message(code);
	if ((e = pkt_begin(q, &r, SSH_FXP_STATUS)) != 0)
		return e;
	if ((e = pkt_put_u32(q, id)) != 0 ||
	    (e = pkt_put_u32(q, code)) != 0 ||
	    (e = pkt_put_cstring(q, msg)) != 0 ||
	    (e = pkt_put_string(q, "", 0)) != 0) {
		pkt_cancel(q, &r);
		return e;
	}
	pkt_end(q, &r);
	return 0;
}

int
pkt_reply_handle(struct oqueue *q, uint32_t id, uint32_t slot, uint32_t gen)
{
	struct reply r;
	int e;

	if ((e = pkt_begin(q, &r, SSH_FXP_HANDLE)) != 0)
		return e;
	if ((e = pkt_put_u32(q, id)) != 0 ||
	    (e = pkt_put_u32(q, PKT_HANDLE_LEN)) != 0 ||
	    (e = pkt_put_u32(q, slot)) != 0 ||
	    (e = pkt_put_u32(q, gen)) != 0) {
		pkt_cancel(q, &r);
		return e;
	}
	pkt_end(q, &r);
	return 0;
}

int
pkt_reply_attrs(struct oqueue *q, uint32_t id, const struct sftp_attrs *a)
{
	struct reply r;
	int e;

	if ((e = pkt_begin(q, &r, SSH_FXP_ATTRS)) != 0)
		return e;
	if ((e = pkt_put_u32(q, id)) != 0 || (e = pkt_put_attrs(q, a)) != 0) {
		pkt_cancel(q, &r);
		return e;
	}
	pkt_end(q, &r);
	return 0;
}

int
pkt_name_begin(struct oqueue *q, struct reply *r, uint32_t id)
{
	int e;

	if ((e = pkt_begin(q, r, SSH_FXP_NAME)) != 0)
		return e;
	if ((e = pkt_put_u32(q, id)) != 0) {
		pkt_cancel(q, r);
		return e;
	}
	r->countpos = q->len;
	r->count = 0;
	if ((e = pkt_put_u32(q, 0)) != 0) {
		pkt_cancel(q, r);
		return e;
	}
	return 0;
}

/* On failure the entry is dropped and the reply stays as it was. */
int
pkt_name_add(struct oqueue *q, struct reply *r, const char *name,
    const char *longname, const struct sftp_attrs *a)
{
	size_t mark = q->len;
	int e;

	if ((e = pkt_put_cstring(q, name)) != 0 ||
	    (e = pkt_put_cstring(q, longname)) != 0 ||
	    (e = pkt_put_attrs(q, a)) != 0) {
		q->len = mark;
		return e;
	}
	r->count++;
	return 0;
}

void
pkt_name_end(struct oqueue *q, struct reply *r)
{
	poke_u32(q->buf + r->countpos, r->count);
	pkt_end(q, r);
}

int
pkt_reply_name1(struct oqueue *q, uint32_t id, const char *path)
{
	struct sftp_attrs a;
	struct reply r;
	int e;

	memset(&a, 0, sizeof a);
	if ((e = pkt_name_begin(q, &r, id)) != 0)
		return e;
	if ((e = pkt_name_add(q, &r, path, path, &a)) != 0) {
		pkt_cancel(q, &r);
		return e;
	}
	pkt_name_end(q, &r);
	return 0;
}

uint8_t *
pkt_data_begin(struct oqueue *q, struct reply *r, uint32_t id, size_t max)
{
	if (max > SFTP_MAX_MSG || pkt_begin(q, r, SSH_FXP_DATA) != 0)
		return NULL;
	if (reserve(q, 8 + max) != 0) {
		pkt_cancel(q, r);
		return NULL;
	}
	poke_u32(q->buf + q->len, id);
	return q->buf + q->len + 8;
}

int
pkt_data_ref(struct oqueue *q, struct reply *r, uint32_t id,
    const uint8_t *p, size_t n)
{
	if (n < OQ_REF_MIN || n > SFTP_MAX_MSG - 9 || q->nrefs == OQ_REFS ||
	    q->muted || q->sent > 0 || q->rnext > 0)
		return -1;
	if (pkt_begin(q, r, SSH_FXP_DATA) != 0)
		return -1;
	if (reserve(q, 8) != 0) {
		pkt_cancel(q, r);
		return -1;
	}
	poke_u32(q->buf + q->len, id);
	r->ref = p;
	r->ref_max = n;
	return 0;
}

void
pkt_data_end(struct oqueue *q, struct reply *r, size_t n)
{
	struct oq_ref *ref;

	/* The id was written by pkt_data_begin(); then the length and data. */
	poke_u32(q->buf + q->len + 4, (uint32_t)n);
	if (r->ref == NULL) {
		q->len += 8 + n;
		pkt_end(q, r);
		return;
	}
	if (n > r->ref_max)
		abort();
	q->len += 8;
	end_reply(q, r, n);
	if (q->muted || n == 0)
		return;
	ref = &q->ref[q->nrefs++];
	ref->at = q->len;
	ref->p = r->ref;
	ref->n = n;
	q->ref_left += n;
	q->ref_touched = 1;
}
