/*
 * wire.h: SFTP version 3 as the bench clients (sftpbench.c, holder.c) speak
 * it.  The packet types, flags and status codes they use; big-endian
 * integers built byte by byte; a request built in a fixed buffer, with its
 * length filled in last; the requests (and a WRITE's data, not copied) queued
 * as iovecs and written with writev; and a reply framed where it lies in the
 * input and read through a bounded cursor.  All static inline: each client
 * includes it into its one source file, and its hot loop compiles as before.
 */
#ifndef WIRE_H
#define WIRE_H

#include <sys/types.h>
#include <sys/uio.h>

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define SSH_FXP_INIT		1
#define SSH_FXP_VERSION		2
#define SSH_FXP_OPEN		3
#define SSH_FXP_CLOSE		4
#define SSH_FXP_READ		5
#define SSH_FXP_WRITE		6
#define SSH_FXP_LSTAT		7
#define SSH_FXP_OPENDIR		11
#define SSH_FXP_READDIR		12
#define SSH_FXP_STAT		17
#define SSH_FXP_STATUS		101
#define SSH_FXP_HANDLE		102
#define SSH_FXP_DATA		103
#define SSH_FXP_NAME		104
#define SSH_FXP_ATTRS		105

#define SSH_FXF_READ		0x01
#define SSH_FXF_WRITE		0x02
#define SSH_FXF_CREAT		0x08
#define SSH_FXF_TRUNC		0x10

#define SSH_FX_OK		0
#define SSH_FX_EOF		1

#define SSH_FILEXFER_ATTR_SIZE		0x00000001
#define SSH_FILEXFER_ATTR_UIDGID	0x00000002
#define SSH_FILEXFER_ATTR_PERMISSIONS	0x00000004
#define SSH_FILEXFER_ATTR_ACMODTIME	0x00000008
#define SSH_FILEXFER_ATTR_EXTENDED	0x80000000U

#define WIRE_VERSION	3
#define WIRE_HANDLE_MAX	256	/* longest handle the protocol allows */
#define WIRE_PATH_MAX	64	/* the clients' own paths are short */
#define WIRE_REQ_MAX	(64 + WIRE_HANDLE_MAX + WIRE_PATH_MAX)
#define WIRE_IOV_BATCH	1024	/* iovecs per writev (IOV_MAX on Linux) */

/*
 * A request up to its data: length, type, id and fields.  A WRITE's data is
 * not copied in; it follows as an iovec of its own.
 */
struct wire_req {
	size_t	len;
	uint8_t	buf[WIRE_REQ_MAX];
};

/*
 * What is queued for the server and not yet written: v[head..head + n) of an
 * array of cap iovecs, owned by the caller.
 */
struct wire_out {
	struct iovec	*v;
	size_t		 cap;
	size_t		 head;
	size_t		 n;
};

/* A bounded read cursor over one reply. */
struct wire_cur {
	const uint8_t	*p;
	size_t		 left;
};

static inline void
wire_put_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static inline uint32_t
wire_get_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	    (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

/* Starts a request of that type; wire_end() fills in its length. */
static inline void
wire_begin(struct wire_req *q, uint8_t type)
{
	q->buf[4] = type;
	q->len = 5;
}

/* Appends to a request; past WIRE_REQ_MAX is a bug: abort(). */
static inline void
wire_u32(struct wire_req *q, uint32_t v)
{
	if (WIRE_REQ_MAX - q->len < 4)
		abort();
	wire_put_be32(q->buf + q->len, v);
	q->len += 4;
}

static inline void
wire_u64(struct wire_req *q, uint64_t v)
{
	wire_u32(q, (uint32_t)(v >> 32));
	wire_u32(q, (uint32_t)v);
}

static inline void
wire_str(struct wire_req *q, const void *s, size_t n)
{
	wire_u32(q, (uint32_t)n);
	if (WIRE_REQ_MAX - q->len < n)
		abort();
	memcpy(q->buf + q->len, s, n);
	q->len += n;
}

/* Fills in the length of a request that dlen bytes of data will follow. */
static inline void
wire_end(struct wire_req *q, uint32_t dlen)
{
	wire_put_be32(q->buf, (uint32_t)(q->len - 4 + dlen));
}

/* INIT, version 3: the first packet of every session. */
static inline void
wire_init(struct wire_req *q)
{
	wire_begin(q, SSH_FXP_INIT);
	wire_u32(q, WIRE_VERSION);
	wire_end(q, 0);
}

/*
 * Queues len bytes at base, which must stay put until written.  The caller
 * sizes the array for all it queues at once; a full queue is a bug: abort().
 */
static inline void
wire_out_push(struct wire_out *o, void *base, size_t len)
{
	if (o->head + o->n == o->cap) {
		if (o->n == o->cap)
			abort();
		memmove(o->v, o->v + o->head, o->n * sizeof(*o->v));
		o->head = 0;
	}
	o->v[o->head + o->n].iov_base = base;
	o->v[o->head + o->n].iov_len = len;
	o->n++;
}

/*
 * One writev of up to WIRE_IOV_BATCH queued iovecs to fd.  What went leaves
 * the queue; an iovec written in part keeps its rest.  Returns what writev
 * returned: the bytes written, or -1 with errno set.
 */
static inline ssize_t
wire_out_write(struct wire_out *o, int fd)
{
	struct iovec *v;
	size_t left;
	ssize_t r;

	r = writev(fd, o->v + o->head,
	    o->n < WIRE_IOV_BATCH ? (int)o->n : WIRE_IOV_BATCH);
	if (r < 0)
		return r;
	left = (size_t)r;
	while (left > 0) {
		v = &o->v[o->head];
		if (left < v->iov_len) {
			v->iov_base = (uint8_t *)v->iov_base + left;
			v->iov_len -= left;
			break;
		}
		left -= v->iov_len;
		o->head++;
		o->n--;
	}
	if (o->n == 0)
		o->head = 0;
	return r;
}

/*
 * Frames the first packet of buf[0..len).  Returns 1 when it is complete,
 * with its length (after the length field) in *plen, its type in *type and
 * a cursor over the rest in *c (valid while buf is); 0 when more input is
 * needed; -1 when its length, in *plen, is 0 or above max.
 */
static inline int
wire_frame(const uint8_t *buf, size_t len, uint32_t max, uint32_t *plen,
    uint8_t *type, struct wire_cur *c)
{
	if (len < 4)
		return 0;
	*plen = wire_get_be32(buf);
	if (*plen == 0 || *plen > max)
		return -1;
	if (len - 4 < *plen)
		return 0;
	*type = buf[4];
	c->p = buf + 5;
	c->left = *plen - 1;
	return 1;
}

/* The cursor's getters: 0, or -1 when the reply is too short. */
static inline int
wire_get_u32(struct wire_cur *c, uint32_t *v)
{
	if (c->left < 4)
		return -1;
	*v = wire_get_be32(c->p);
	c->p += 4;
	c->left -= 4;
	return 0;
}

static inline int
wire_get_u64(struct wire_cur *c, uint64_t *v)
{
	uint32_t hi, lo;

	if (wire_get_u32(c, &hi) != 0 || wire_get_u32(c, &lo) != 0)
		return -1;
	*v = (uint64_t)hi << 32 | lo;
	return 0;
}

/* A string as a slice of the reply: valid while the reply is. */
static inline int
wire_get_str(struct wire_cur *c, const uint8_t **s, uint32_t *n)
{
	if (wire_get_u32(c, n) != 0 || *n > c->left)
		return -1;
	*s = c->p;
	c->p += *n;
	c->left -= *n;
	return 0;
}

#endif /* WIRE_H */
