/*
 * The wire: the input buffer and its framing, the bounded field cursor, and
 * the reply queue in which replies are built in place.
 *
 * packet.c knows bytes, not files.  Every other file reads wire data only
 * through a struct cursor, so a handler cannot read outside its own packet.
 */
#ifndef PACKET_H
#define PACKET_H

#include <sys/types.h>
#include <sys/mman.h>

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

/*
 * Longest message, as OpenSSH's SFTP_MAX_MSG_LENGTH: a longer frame ends the
 * session.
 */
#define SFTP_MAX_MSG		(256 * 1024)
/*
 * Longest READ answered; a longer one is clamped.  As limits@openssh.com
 * reports.
 */
#define SFTP_MAX_READ		(SFTP_MAX_MSG - 1024)
/* Longest WRITE a client should send, as limits@openssh.com reports. */
#define SFTP_MAX_WRITE		(SFTP_MAX_MSG - 1024)
/*
 * Input read ahead of the packet being parsed (see ibuf_room() in packet.c).
 * Uploads cost the same CPU with 384 KiB as with 512 (128 KiB costs 10%
 * more), and a busy session's peak is the smaller: bench/RESULTS.md.
 */
#define IBUF_SOFT		(384 * 1024)
/* The same while WRITEs in workers' hands pin the buffer (struct ibuf). */
#define IBUF_HARD		(4 * 1024 * 1024)
/* Replies queued before the queue is written out and stdin is left alone. */
#define OQ_HIWAT		(256 * 1024)
/* Room for the largest reply on top of the high-water mark. */
#define OQ_SIZE			(OQ_HIWAT + SFTP_MAX_MSG + 4)
/* Extended ATTRS pairs accepted in one ATTRS, as OpenSSH. */
#define SFTP_MAX_EXTENDED	0x100000

/* Errors of the cursor and queue functions: negative, never errno. */
#define PKT_ESHORT	-1	/* a field runs past the end of the packet */
#define PKT_ENUL	-2	/* a path holds a NUL byte */
#define PKT_ETOOLONG	-3	/* a path does not fit the scratch buffer */
#define PKT_ENOSPACE	-4	/* a reply does not fit the queue */
#define PKT_EFRAME	-5	/* a frame length of 0 or above SFTP_MAX_MSG */
#define PKT_EBADATTR	-6	/* too many extended ATTRS pairs */

/* Packet types of SFTP version 3 (draft-ietf-secsh-filexfer-02). */
#define SSH_FXP_INIT		1
#define SSH_FXP_VERSION		2
#define SSH_FXP_OPEN		3
#define SSH_FXP_CLOSE		4
#define SSH_FXP_READ		5
#define SSH_FXP_WRITE		6
#define SSH_FXP_LSTAT		7
#define SSH_FXP_FSTAT		8
#define SSH_FXP_SETSTAT		9
#define SSH_FXP_FSETSTAT	10
#define SSH_FXP_OPENDIR		11
#define SSH_FXP_READDIR		12
#define SSH_FXP_REMOVE		13
#define SSH_FXP_MKDIR		14
#define SSH_FXP_RMDIR		15
#define SSH_FXP_REALPATH	16
#define SSH_FXP_STAT		17
#define SSH_FXP_RENAME		18
#define SSH_FXP_READLINK	19
#define SSH_FXP_SYMLINK		20
#define SSH_FXP_STATUS		101
#define SSH_FXP_HANDLE		102
#define SSH_FXP_DATA		103
#define SSH_FXP_NAME		104
#define SSH_FXP_ATTRS		105
#define SSH_FXP_EXTENDED	200
#define SSH_FXP_EXTENDED_REPLY	201

#define SSH_FXF_READ		0x01
#define SSH_FXF_WRITE		0x02
#define SSH_FXF_APPEND		0x04
#define SSH_FXF_CREAT		0x08
#define SSH_FXF_TRUNC		0x10
#define SSH_FXF_EXCL		0x20

#define SSH_FILEXFER_ATTR_SIZE		0x00000001
#define SSH_FILEXFER_ATTR_UIDGID	0x00000002
#define SSH_FILEXFER_ATTR_PERMISSIONS	0x00000004
#define SSH_FILEXFER_ATTR_ACMODTIME	0x00000008
#define SSH_FILEXFER_ATTR_EXTENDED	0x80000000

#define SSH_FX_OK			0
#define SSH_FX_EOF			1
#define SSH_FX_NO_SUCH_FILE		2
#define SSH_FX_PERMISSION_DENIED	3
#define SSH_FX_FAILURE			4
#define SSH_FX_BAD_MESSAGE		5
#define SSH_FX_NO_CONNECTION		6
#define SSH_FX_CONNECTION_LOST		7
#define SSH_FX_OP_UNSUPPORTED		8

/* The ATTRS of version 3; a field is meaningful only when its flag is set. */
struct sftp_attrs {
	uint32_t flags;
	uint64_t size;
	uint32_t uid;
	uint32_t gid;
	uint32_t perm;
	uint32_t atime;
	uint32_t mtime;
};

/*
 * A read-only view of exactly one packet body.  Getters consume from the
 * front and fail with PKT_ESHORT, leaving the cursor as it was, when the
 * field does not fit in what is left.
 */
struct cursor {
	const uint8_t *p;
	size_t left;
};

/* Each getter clears its outputs first; returns 0 or a negative PKT_E*. */
int	pkt_get_u8(struct cursor *, uint8_t *);
int	pkt_get_u32(struct cursor *, uint32_t *);
int	pkt_get_u64(struct cursor *, uint64_t *);
/*
 * A string as a slice of the packet: *datap points into the input buffer and
 * stays valid until the handler returns.
 */
int	pkt_get_string(struct cursor *, const uint8_t **datap, uint32_t *lenp);
/*
 * A string copied into buf as a NUL-terminated path.  PKT_ENUL if it holds a
 * NUL byte, PKT_ETOOLONG if it does not fit in size bytes with the NUL.
 */
int	pkt_get_path(struct cursor *, char *buf, size_t size);
/* ATTRS; extended pairs are checked and skipped. */
int	pkt_get_attrs(struct cursor *, struct sftp_attrs *);
/*
 * A handle names a slot of the handle table and the slot's generation: on
 * the wire, a string of PKT_HANDLE_LEN bytes, the two as uint32s.  A string
 * of another length is not a parse error (OpenSSH answers it as an unknown
 * handle): it reads as slot PKT_HANDLE_NONE, which names no handle.
 */
#define PKT_HANDLE_LEN	8
#define PKT_HANDLE_NONE	UINT32_MAX
int	pkt_get_handle(struct cursor *, uint32_t *slot, uint32_t *gen);

/*
 * The input buffer.  Bytes are read into [end, ...) and packets are parsed
 * where they lie, between start and end.  Reads stop at soft, so that any
 * packet that starts before soft can be completed in place behind it: no
 * byte is ever moved.  Once every byte read is parsed, reading starts over
 * at offset 0: a new lap.
 *
 * While a WRITE's data is pinned (ibuf_pin(): a worker is writing it out
 * of the buffer), reads stop at hard instead of soft, and no byte of it is
 * overwritten.  A lap that reached hard with pins left ends all the same,
 * and the next lap reads only below the lowest byte still pinned in the
 * lap before, less room for a whole packet (IBUF_TAIL): a stream of WRITEs
 * goes on while the earliest are written out, and never waits for the
 * last pin to go.  A lap starts only once no pin of the lap before it is
 * left, so pins lie in two laps at most.
 */
#define IBUF_PINS	128
#define IBUF_TAIL	(SFTP_MAX_MSG + 4)
struct ibuf_pin {
	uint32_t off;		/* the pinned bytes start here */
	uint8_t lap;		/* the parity of the lap they came in */
	uint8_t held;
};
struct ibuf {
	uint8_t *buf;
	size_t size;		/* hard + IBUF_TAIL */
	size_t soft;
	size_t hard;		/* soft, or more: the window while pinned */
	size_t start;		/* first byte not yet parsed */
	size_t end;		/* first free byte */
	unsigned pins;		/* pins held */
	unsigned old;		/* of which in the lap before this one */
	unsigned lap;		/* this lap's parity */
	/*
	 * IBUF_PINS slots, in the mapping's first pages, before buf: a
	 * session that never pins never touches them.
	 */
	struct ibuf_pin *pin;
	size_t pin_size;
	int pinned;		/* a slot was written since ibuf_release() */
	size_t present;		/* buf's bytes made present (ibuf_read()) */
	size_t last;		/* what the last read returned */
	size_t reached;		/* buf's bytes read into since the release */
	/*
	 * The window past soft on huge pages (BUF_BULK): huge is their size
	 * (0: none), [huge_from, huge_to) of buf their whole pages, the
	 * mapping map_size bytes from pin on to hold the last; huge_on says
	 * [huge_lo, huge_to) is advised MADV_HUGEPAGE (ibuf_bulk()).
	 */
	size_t huge, huge_from, huge_to, huge_lo, map_size;
	int huge_on;
};

/* Allocates the buffer; soft is the read-ahead.  Returns 0 or -1 (ENOMEM). */
int	ibuf_init(struct ibuf *, size_t soft);
/* The same with a window of hard bytes (>= soft) while pinned. */
int	ibuf_init_pinned(struct ibuf *, size_t soft, size_t hard);
/*
 * Holds the bytes buffered in place from p on (a WRITE's data in a
 * worker's hands) and returns the pin, which ibuf_unpin() lets go.  At
 * most IBUF_PINS are held at once.
 */
unsigned	ibuf_pin(struct ibuf *, const uint8_t *p);
void	ibuf_unpin(struct ibuf *, unsigned pin);
/*
 * A WRITE of BUF_BULK bytes or more is pinned: the window's bytes that no
 * read has reached since ibuf_release() go on huge pages (see BUF_BULK),
 * until the next ibuf_release() that finds them unused.
 */
void	ibuf_bulk(struct ibuf *);
/* Whether ibuf_read() has room to read into (pins may hold it full). */
int	ibuf_can_read(const struct ibuf *);
void	ibuf_free(struct ibuf *);
/*
 * Gives the pages behind the bytes still buffered back to the system (an
 * idle session); they are mapped again, zeroed, when next used.
 */
void	ibuf_release(struct ibuf *);
/*
 * The next complete packet: returns 1 and a cursor over its body (type byte
 * first), 0 when more input is needed, PKT_EFRAME for a length of 0 or above
 * SFTP_MAX_MSG (*lenp then holds the length read).  The body stays valid
 * until the next ibuf_read().
 */
int	ibuf_next(struct ibuf *, struct cursor *, uint32_t *lenp);
/* Whether ibuf_next() has a packet or a frame error to return. */
int	ibuf_ready(const struct ibuf *);
/*
 * Reads once from fd into the room: bytes read, 0 at EOF, or -1 with errno
 * (EINTR, or EAGAIN on a non-blocking fd or when pins leave no room: the
 * caller waits and reads again).
 */
ssize_t	ibuf_read(struct ibuf *, int fd);

/*
 * The reply queue: one arena in which replies are appended in request order
 * and written out with one writev.  A reply in construction is marked by a
 * struct reply; the length word is patched when it ends.
 *
 * A DATA reply may leave its payload where it already is (pkt_data_ref():
 * a READ's bytes in a job's buffer): the queue then holds the reply's
 * header, and a reference that places the payload's bytes right behind
 * it, to be written from there.  The bytes must stay as they are until
 * oq_refs() is 0 again: the queue written out, or dropped.
 */
struct oq_ref {
	size_t at;		/* the bytes go behind buf[at - 1] */
	const uint8_t *p;
	size_t n;
};

struct oqueue {
	uint8_t *buf;
	size_t size;
	size_t sent;		/* buf's bytes written by a flush cut short */
	size_t len;		/* bytes of buf queued */
	size_t reply_start;	/* offset of the reply in construction */
	uint64_t nreplies;	/* replies completed, for the one-reply check */
	int muted;		/* oq_mute(): replies are built, then dropped */
	/* References, in the mapping before buf: OQ_REFS of them. */
	struct oq_ref *ref;
	size_t ref_size;	/* their page(s) */
	unsigned nrefs;		/* queued */
	unsigned rnext;		/* the first not wholly written */
	size_t rsent;		/* bytes of it written */
	size_t ref_left;	/* bytes of the references not written */
	int ref_touched;	/* their page holds memory (oq_release()) */
};

/*
 * References queued at once, and the least payload sent by reference: a
 * smaller one is copied.  Replies are queued while oq_pending() is below
 * OQ_HIWAT, so at most OQ_HIWAT / OQ_REF_MIN + 1 references are queued:
 * OQ_REFS leaves room for that.
 */
#define OQ_REF_MIN		(4 * 1024)
#define OQ_REFS			(OQ_HIWAT / OQ_REF_MIN + 2)

struct reply {
	size_t start;		/* offset of the length word */
	size_t countpos;	/* NAME: offset of the count */
	uint32_t count;
	const uint8_t *ref;	/* DATA by reference: the payload, */
	size_t ref_max;		/* and its length */
};

int	oq_init(struct oqueue *, size_t size);
void	oq_free(struct oqueue *);
/* As ibuf_release(), for the pages behind what is queued. */
void	oq_release(struct oqueue *);
/* Drops what is queued, written or not (a session that ends unheard). */
void	oq_drop(struct oqueue *);
/*
 * Drops what is queued, and every reply completed from now on: each is
 * still built and counted (nreplies), then its bytes are dropped, so the
 * queue stays empty.  For a session whose replies can no longer be sent.
 */
void	oq_mute(struct oqueue *);
/* Bytes queued and not yet written, the references' bytes counted. */
size_t	oq_pending(const struct oqueue *);
/* References queued: while not 0, the bytes they point at are read. */
unsigned	oq_refs(const struct oqueue *);
/*
 * Writes everything queued to fd, resuming partial writes.  Returns 0, or
 * -1 with errno set; after EINTR or EAGAIN (a signal came, or fd is
 * non-blocking and full: the caller looks, or waits) a later call goes on
 * from where this one stopped.
 */
int	oq_flush(struct oqueue *, int fd);

/*
 * Starts a reply of the given type; the caller puts the fields.  A put that
 * would make the reply longer than SFTP_MAX_MSG fails with PKT_ENOSPACE.
 * In a queue of OQ_SIZE, a reply started while oq_pending() is at most
 * OQ_HIWAT always fits, a partial write in the queue or not: PKT_ENOSPACE
 * then means only a reply longer than a message.
 */
int	pkt_begin(struct oqueue *, struct reply *, uint8_t type);
int	pkt_put_u32(struct oqueue *, uint32_t);
int	pkt_put_u64(struct oqueue *, uint64_t);
int	pkt_put_cstring(struct oqueue *, const char *);
/* Bytes as they are, without a length word. */
int	pkt_put_raw(struct oqueue *, const void *, size_t);
/* Offset of the next byte put, and a later patch of a placeholder there. */
size_t	pkt_mark(const struct oqueue *);
void	pkt_patch_u32(struct oqueue *, size_t mark, uint32_t);
/* Patches the length word: the reply is complete. */
void	pkt_end(struct oqueue *, struct reply *);
/* Drops a reply in construction. */
void	pkt_cancel(struct oqueue *, struct reply *);

/* Whole replies.  msg NULL means the fixed message of the code. */
int	pkt_reply_status(struct oqueue *, uint32_t id, uint32_t code,
	    const char *msg);
int	pkt_reply_handle(struct oqueue *, uint32_t id, uint32_t slot,
	    uint32_t gen);
int	pkt_reply_attrs(struct oqueue *, uint32_t id,
	    const struct sftp_attrs *);
/* NAME with one entry, name = longname = path, attrs flags 0 (REALPATH). */
int	pkt_reply_name1(struct oqueue *, uint32_t id, const char *path);

/* NAME built entry by entry. */
int	pkt_name_begin(struct oqueue *, struct reply *, uint32_t id);
int	pkt_name_add(struct oqueue *, struct reply *, const char *name,
	    const char *longname, const struct sftp_attrs *);
void	pkt_name_end(struct oqueue *, struct reply *);

/*
 * DATA filled in place: pkt_data_begin() returns where up to max payload
 * bytes go (the caller reads straight into it), pkt_data_end() sets the
 * length actually filled.
 */
uint8_t	*pkt_data_begin(struct oqueue *, struct reply *, uint32_t id,
	    size_t max);
/*
 * DATA whose payload is the n bytes at p, written from there: when it
 * ends (pkt_data_end(), with at most n), the queue holds a reference to
 * them, which they must outlive (struct oqueue).  Returns 0; -1 when the
 * payload is better copied (shorter than OQ_REF_MIN, no reference free, a
 * queue muted or behind a partial write) or does not fit a message: the
 * caller uses pkt_data_begin() instead.
 */
int	pkt_data_ref(struct oqueue *, struct reply *, uint32_t id,
	    const uint8_t *p, size_t n);
void	pkt_data_end(struct oqueue *, struct reply *, size_t n);

/* The fixed message of a status code, as OpenSSH sends it. */
const char *pkt_status_message(uint32_t code);

/*
 * Makes the pages of [from, to) present for writing with one call
 * (MADV_POPULATE_WRITE) rather than by a page fault each as they are first
 * written: the workers' arena (jobs.c), the pinned input (ibuf_read()).
 * A fault cost 12 to 17 µs on the paravirtualized guest of
 * bench/RESULTS.md.  Returns 0, or -1 when the advice is refused for good
 * (a kernel before 5.14, or no Linux): the pages then fault as they would.
 * Inline, for the tests that build jobs.c without this file's object.
 */
#if defined(__linux__) && !defined(MADV_POPULATE_WRITE)
#define MADV_POPULATE_WRITE	23
#endif
static inline int
buf_present(uint8_t *from, uint8_t *to)
{
#ifdef MADV_POPULATE_WRITE
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	uintptr_t start = (uintptr_t)from / page * page;

	if (madvise((void *)start, (uintptr_t)to - start,
	    MADV_POPULATE_WRITE) == 0 || errno == ENOMEM || errno == EINTR ||
	    errno == EAGAIN)
		return 0;
	return -1;
#else
	(void)from;
	(void)to;
	return -1;
#endif
}

/*
 * Huge pages (transparent, Linux) for the buffers that a transfer in bulk
 * fills while storage waits: the workers' arena (jobs.c), for READs of
 * BUF_BULK bytes or more, and the input window past soft (struct ibuf),
 * for WRITEs of as many.  The first lap of either took a page fault per
 * page, and on the paravirtualized guest of bench/RESULTS.md a page cost
 * 12 to 20 µs at its first write, still 5 to 7 once made present; a huge
 * page is one fault per 2 MiB.  Both buffers are mapped with their huge
 * page boundaries in place and advised MADV_NOHUGEPAGE, whatever the
 * system's THP mode, so that a session that never transfers in bulk keeps
 * small pages (its busy and idle memory as before); a bulk transfer
 * advises the blocks no byte has reached yet MADV_HUGEPAGE, and the
 * session's idle gives their pages back and advises them as before.
 */
#define BUF_BULK	(128 * 1024)

/*
 * The system's huge page (2 MiB on x86-64 and arm64 with 4 KiB pages, 1
 * MiB on s390x), read once in each file that asks, at the session's start,
 * before any chroot; 0 where there is none to be had (no /sys, a kernel
 * without them).
 */
static inline size_t
buf_huge_size(void)
{
	static size_t huge = 1;	/* 1: not read yet */
	char text[32];
	ssize_t n;
	int fd;

	if (huge != 1)
		return huge;
	huge = 0;
	fd = open("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size",
	    O_RDONLY | O_CLOEXEC);
	if (fd == -1)
		return 0;
	n = read(fd, text, sizeof text - 1);
	(void)close(fd);
	if (n > 0) {
		unsigned long v;

		text[n] = '\0';
		v = strtoul(text, NULL, 10);
		/* A power of two above a page. */
		if (v > (unsigned long)sysconf(_SC_PAGESIZE) &&
		    (v & (v - 1)) == 0 && v <= SIZE_MAX / 4)
			huge = (size_t)v;
	}
	return huge;
}

/*
 * [p, p + len) advised MADV_HUGEPAGE (on) or MADV_NOHUGEPAGE (off).
 * Returns 0, or -1 when refused (a kernel without huge pages).
 */
static inline int
buf_huge(uint8_t *p, size_t len, int on)
{
#if defined(MADV_HUGEPAGE) && defined(MADV_NOHUGEPAGE)
	return madvise(p, len, on ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
#else
	(void)p;
	(void)len;
	(void)on;
	errno = EINVAL;
	return -1;
#endif
}

/*
 * Maps len bytes, anonymous and private, for reading and writing, with
 * offset at (a multiple of the page size) on a boundary of huge pages of
 * huge bytes (0: anywhere), advised MADV_NOHUGEPAGE.  Where the margin
 * that takes cannot be had, the mapping is plain, anywhere: the callers
 * check the boundary before they advise for huge pages.  Returns the
 * mapping, or NULL.
 */
static inline uint8_t *
buf_map_aligned(size_t len, size_t at, size_t huge)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE), lead;
	uint8_t *p, *a;

	/* Whole pages: the trimming below unmaps from len on. */
	len = (len + page - 1) / page * page;
	p = huge == 0 || len > SIZE_MAX - huge ? MAP_FAILED : mmap(NULL,
	    len + huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
	    -1, 0);
	if (p == MAP_FAILED) {
		/* No huge pages, or no room for the margin: a plain one. */
		p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			return NULL;
		if (huge != 0)
			(void)buf_huge(p, len, 0);
		return p;
	}
	/* The first start at or past p that puts offset at on a boundary. */
	lead = (huge - ((uintptr_t)p + at) % huge) % huge;
	a = p + lead;
	if (lead > 0)
		(void)munmap(p, lead);
	(void)munmap(a + len, huge - lead);
	(void)buf_huge(a, len, 0);
	return a;
}

#endif /* PACKET_H */
