/*
 * sftpbench: start an SFTP server binary on a pair of pipes (as sshd does) or
 * on a socketpair (as "sftp -D" does on Linux), complete INIT, and drive one
 * workload through it with a deep pipeline of requests. Every reply is
 * checked: its id, its type, its status, the length of its data; the content
 * too with -V. One line of key=value fields reports the wall time, the rate,
 * the server's own CPU time and peak RSS (from wait4) and the client's own
 * CPU time.
 *
 * With -F the child is the floor program (floor.c) instead of a server: the
 * client moves the raw bytes of the transfer through the pipe and the floor
 * copies them to or from the file, the least work any server must do.
 *
 * Fixtures (the file to download, the directory to list) are made in the work
 * directory before the server starts, and kept for the next run.
 */

#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/wait.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "proc.h"
#include "wire.h"

/*
 * The content pattern repeats with a prime period, so that no request size
 * divides it and a block that lands at the wrong offset shows. The buffer holds
 * one period plus the largest request: the bytes at any offset are one slice.
 */
#define PAT_PERIOD	1048573
#define MAX_REQ		(1024 * 1024)
#define PAT_SIZE	((size_t)PAT_PERIOD + MAX_REQ)
_Static_assert(MAX_REQ > PAT_PERIOD && MAX_REQ < 2 * PAT_PERIOD,
    "pat_make copies one period and a part of another");

/*
 * The input buffer is read with all its free room; an incomplete reply is moved
 * to the front only when less than a largest reply fits behind it, so at most
 * one reply is moved per IN_SIZE - MAX_REPLY bytes received.
 */
#define MAX_REPLY	(MAX_REQ + 1024)
#define IN_SIZE		(8 * 1024 * 1024)

#define MAX_DEPTH	65535	/* the slot index is the low 16 bits of an id */
#define SMALL_SIZE	4096	/* smallfiles: bytes per file */
#define READDIR_WINDOW	8	/* READDIRs in flight on one directory handle */
#define PAGE_BYTES	4096
#define PREFAULT_BASE	(64 * 1024 * 1024)
#define MAX_ENTRIES	999999	/* fixture names have six digits */

enum phase {
	PH_OPEN,		/* OPEN or OPENDIR to send */
	PH_OPENING,		/* waiting for its HANDLE */
	PH_RUN,			/* the pipelined requests */
	PH_CLOSING,		/* waiting for the CLOSE status */
	PH_DONE,
};

/*
 * One request in flight. Its id is the slot index in the low 16 bits and a
 * generation above, so a reply names its slot and a stale id does not match.
 * The request's header bytes live in the slot until the reply comes back.
 */
struct req {
	uint32_t	id;
	uint16_t	gen;
	uint8_t		type;		/* 0 while the slot is free */
	uint64_t	seq;		/* order of sending */
	uint64_t	end;		/* output position past this request */
	uint64_t	off;		/* READ, WRITE: offset */
	uint32_t	len;		/* READ, WRITE: length */
	uint32_t	file;		/* smallfiles: file number */
	uint32_t	hlen;
	uint8_t		handle[WIRE_HANDLE_MAX];
	struct wire_req	q;		/* the request up to its data */
};

/* A READ to send again: the rest of a short read. */
struct gap {
	uint64_t	off;
	uint32_t	len;
};

enum kind {
	WL_UPLOAD,
	WL_DOWNLOAD,
	WL_READDIR,
	WL_STAT,
	WL_SMALLFILES,
};

struct workload {
	enum kind	 kind;
	const char	*name;
	const char	*unit;
	void		(*prepare)(void);
	void		(*issue)(void);
	void		(*reply)(const struct req *, uint8_t,
		    struct wire_cur *);
	void		(*finish)(void);
};

static struct {
	const struct workload *wl;
	uint64_t	 bytes;
	uint32_t	 reqsize;
	uint32_t	 depth;
	uint32_t	 count;
	uint32_t	 entries;
	uint32_t	 listings;
	uint64_t	 prefault;	/* bytes to touch, or UINT64_MAX */
	int		 use_socketpair;
	int		 verify;
	int		 verbose;
	int		 floor_mode;
	int		 timeout_ms;
	const char	*label;
	const char	*dir;
	char		**argv;
} opt;

static struct {
	pid_t		 pid;
	int		 rfd;
	int		 wfd;
	uint8_t		*in;
	size_t		 in_off;
	size_t		 in_len;
	struct wire_out	 out;		/* requests not yet written */
	uint64_t	 queued;	/* bytes queued for the server */
	uint64_t	 written;	/* bytes the server's input took */
	struct req	*slots;
	uint32_t	*freel;
	uint32_t	 nfree;
	uint32_t	 inflight;
	uint64_t	 seq;
	uint64_t	 last_seq;
	uint64_t	 requests;
	uint64_t	 ooo;
	int		 version_seen;
	long		 hwm;		/* VmHWM near the end, KiB */
	struct wire_req	 init;
	uint32_t	 hlen;
	uint8_t		 handle[WIRE_HANDLE_MAX];
} c;

static struct {
	enum phase	 phase;
	uint64_t	 next_off;
	uint64_t	 acked;		/* bytes acknowledged or received */
	int		 eof;
	struct gap	*gaps;
	uint32_t	 ngaps;
	uint32_t	 listing;
	uint64_t	 entries;
	uint64_t	 total_entries;
	uint8_t		*seen;
	uint32_t	 dots;
	uint32_t	 sent;
	uint32_t	 completed;
	int		 done;
} w;

static uint8_t *pat;
static char path_up[] = "upload.dat";
static char path_dl[WIRE_PATH_MAX];
static char path_dir[WIRE_PATH_MAX];
static char path_dir_ok[WIRE_PATH_MAX];
static const char path_small[] = "small";

static void die(const char *, ...)
    __attribute__((format(printf, 1, 2), noreturn));
static void usage(void) __attribute__((noreturn));

/*
 * Print a message, kill the child and exit 1.
 */
static void
die(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fprintf(stderr, "sftpbench: %s: ",
	    opt.wl != NULL ? opt.wl->name : "setup");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	if (c.pid > 0) {
		(void)kill(c.pid, SIGKILL);
		(void)waitpid(c.pid, NULL, 0);
	}
	exit(1);
}

static double
now(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0)
		die("clock_gettime: %s", strerror(errno));
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double
tv_sec(const struct timeval *tv)
{
	return (double)tv->tv_sec + (double)tv->tv_usec / 1e6;
}

static void *
xmalloc(size_t n)
{
	void *p;

	if ((p = calloc(1, n == 0 ? 1 : n)) == NULL)
		die("out of memory (%zu bytes)", n);
	return p;
}

/*
 * Map and fill the content pattern: xorshift64 words over one period, then a
 * copy of the period's start behind it.
 */
static void
pat_make(void)
{
	uint64_t x = 0x9e3779b97f4a7c15ULL;
	size_t i;

	pat = mmap(NULL, PAT_SIZE, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (pat == MAP_FAILED)
		die("mmap: %s", strerror(errno));
	for (i = 0; i + 8 <= PAT_PERIOD; i += 8) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		memcpy(pat + i, &x, 8);
	}
	for (; i < PAT_PERIOD; i++)
		pat[i] = (uint8_t)(i * 131);
	/* MAX_REQ is a little more than a period: a period, then the rest. */
	memcpy(pat + PAT_PERIOD, pat, PAT_PERIOD);
	memcpy(pat + 2 * (size_t)PAT_PERIOD, pat, MAX_REQ - PAT_PERIOD);
}

static void
pat_free(void)
{
	(void)munmap(pat, PAT_SIZE);
	pat = NULL;
}

/* The expected bytes at offset off of a pattern file. */
static const uint8_t *
pat_at(uint64_t off)
{
	return pat + off % PAT_PERIOD;
}

/*
 * Fault in len bytes of fresh memory and give it back. Free pages may have been
 * handed back to the host; touching them now puts the cost of getting them back
 * here, not in the measured transfer that allocates them next (page cache, pipe
 * buffers, the server's heap).
 */
static void
prefault(uint64_t len)
{
	volatile uint8_t *p;
	uint64_t i;

	p = mmap(NULL, len, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		die("mmap %llu bytes: %s", (unsigned long long)len,
		    strerror(errno));
	for (i = 0; i < len; i += PAGE_BYTES)
		p[i] = 1;
	(void)munmap((void *)p, len);
}

static void
write_all(int fd, const uint8_t *p, size_t n, const char *what)
{
	ssize_t r;

	while (n > 0) {
		if ((r = write(fd, p, n)) < 0) {
			if (errno == EINTR)
				continue;
			die("write %s: %s", what, strerror(errno));
		}
		p += r;
		n -= (size_t)r;
	}
}

/*
 * Read a whole file written by the server and compare it with the pattern
 * from offset base on; it must be exactly size bytes long.
 */
static void
verify_file(const char *path, uint64_t base, uint64_t size)
{
	struct stat st;
	uint64_t off = 0;
	ssize_t r;
	uint8_t *buf;
	int fd;

	if ((fd = open(path, O_RDONLY)) < 0)
		die("verify: open %s: %s", path, strerror(errno));
	if (fstat(fd, &st) != 0)
		die("verify: fstat %s: %s", path, strerror(errno));
	if ((uint64_t)st.st_size != size)
		die("verify: %s is %lld bytes, expected %llu", path,
		    (long long)st.st_size, (unsigned long long)size);
	buf = xmalloc(MAX_REQ);
	while (off < size) {
		r = read(fd, buf, MAX_REQ);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			die("verify: read %s: %s", path,
			    r < 0 ? strerror(errno) : "short file");
		if (memcmp(buf, pat_at(base + off), (size_t)r) != 0)
			die("verify: %s differs from the pattern in the %zd "
			    "bytes at offset %llu", path, r,
			    (unsigned long long)off);
		off += (uint64_t)r;
	}
	free(buf);
	(void)close(fd);
}

/* Remove every entry of a flat directory, and the directory if rm_self. */
static void
clear_dir(const char *path, int rm_self)
{
	char p[WIRE_PATH_MAX * 2];
	struct dirent *de;
	DIR *d;

	if ((d = opendir(path)) == NULL) {
		if (errno == ENOENT)
			return;
		die("opendir %s: %s", path, strerror(errno));
	}
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0)
			continue;
		if ((size_t)snprintf(p, sizeof(p), "%s/%s", path,
		    de->d_name) >= sizeof(p))
			die("name too long in %s", path);
		if (unlink(p) != 0)
			die("unlink %s: %s", p, strerror(errno));
	}
	(void)closedir(d);
	if (rm_self && rmdir(path) != 0)
		die("rmdir %s: %s", path, strerror(errno));
}

/* Fixture: the file to download, opt.bytes long, made once. */
static void
make_download_file(void)
{
	struct stat st;
	uint64_t off;
	size_t n;
	int fd;

	if (stat(path_dl, &st) == 0 && (uint64_t)st.st_size == opt.bytes)
		return;
	pat_make();
	if ((fd = open(path_dl, O_WRONLY | O_CREAT | O_TRUNC, 0644)) < 0)
		die("create %s: %s", path_dl, strerror(errno));
	for (off = 0; off < opt.bytes; off += n) {
		n = opt.bytes - off < MAX_REQ ? (size_t)(opt.bytes - off) :
		    MAX_REQ;
		write_all(fd, pat_at(off), n, path_dl);
	}
	if (close(fd) != 0)
		die("close %s: %s", path_dl, strerror(errno));
	pat_free();
}

/* Fixture: a directory of opt.entries empty files, made once. */
static void
make_dir(void)
{
	char p[WIRE_PATH_MAX * 2];
	uint32_t i;
	int fd;

	if (access(path_dir_ok, F_OK) == 0)
		return;
	if (mkdir(path_dir, 0755) != 0 && errno != EEXIST)
		die("mkdir %s: %s", path_dir, strerror(errno));
	clear_dir(path_dir, 0);
	for (i = 0; i < opt.entries; i++) {
		(void)snprintf(p, sizeof(p), "%s/file-%06u.dat", path_dir, i);
		if ((fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644)) < 0)
			die("create %s: %s", p, strerror(errno));
		(void)close(fd);
	}
	if ((fd = open(path_dir_ok, O_WRONLY | O_CREAT, 0644)) < 0)
		die("create %s: %s", path_dir_ok, strerror(errno));
	(void)close(fd);
}

/*
 * ATTRS. Fills size (or UINT64_MAX) and perm (or 0); fails on a short or
 * malformed block.
 */
static int
get_attrs(struct wire_cur *cu, uint64_t *size, uint32_t *perm)
{
	uint32_t flags, v, n, i, sl;
	const uint8_t *s;

	*size = UINT64_MAX;
	*perm = 0;
	if (wire_get_u32(cu, &flags) != 0)
		return -1;
	if ((flags & SSH_FILEXFER_ATTR_SIZE) && wire_get_u64(cu, size) != 0)
		return -1;
	if ((flags & SSH_FILEXFER_ATTR_UIDGID) &&
	    (wire_get_u32(cu, &v) != 0 || wire_get_u32(cu, &v) != 0))
		return -1;
	if ((flags & SSH_FILEXFER_ATTR_PERMISSIONS) &&
	    wire_get_u32(cu, perm) != 0)
		return -1;
	if ((flags & SSH_FILEXFER_ATTR_ACMODTIME) &&
	    (wire_get_u32(cu, &v) != 0 || wire_get_u32(cu, &v) != 0))
		return -1;
	if (flags & SSH_FILEXFER_ATTR_EXTENDED) {
		if (wire_get_u32(cu, &n) != 0)
			return -1;
		for (i = 0; i < n; i++)
			if (wire_get_str(cu, &s, &sl) != 0 ||
			    wire_get_str(cu, &s, &sl) != 0)
				return -1;
	}
	return 0;
}

static const char *
type_name(uint8_t t)
{
	switch (t) {
	case SSH_FXP_INIT:
		return "INIT";
	case SSH_FXP_VERSION:
		return "VERSION";
	case SSH_FXP_OPEN:
		return "OPEN";
	case SSH_FXP_CLOSE:
		return "CLOSE";
	case SSH_FXP_READ:
		return "READ";
	case SSH_FXP_WRITE:
		return "WRITE";
	case SSH_FXP_LSTAT:
		return "LSTAT";
	case SSH_FXP_OPENDIR:
		return "OPENDIR";
	case SSH_FXP_READDIR:
		return "READDIR";
	case SSH_FXP_STATUS:
		return "STATUS";
	case SSH_FXP_HANDLE:
		return "HANDLE";
	case SSH_FXP_DATA:
		return "DATA";
	case SSH_FXP_NAME:
		return "NAME";
	case SSH_FXP_ATTRS:
		return "ATTRS";
	default:
		return "unknown";
	}
}

/*
 * Take a free slot for a new request and start its header, or return NULL when
 * opt.depth requests are already in flight.
 */
static struct req *
req_new(uint8_t type)
{
	struct req *r;
	uint32_t idx;

	if (c.nfree == 0)
		return NULL;
	idx = c.freel[--c.nfree];
	r = &c.slots[idx];
	r->gen++;
	r->id = (uint32_t)r->gen << 16 | idx;
	r->type = type;
	r->seq = c.seq++;
	r->hlen = 0;
	wire_begin(&r->q, type);
	wire_u32(&r->q, r->id);
	c.inflight++;
	return r;
}

static void
iov_push(void *base, size_t len)
{
	wire_out_push(&c.out, base, len);
	c.queued += len;
}

/* Finish a request: fill in its length and queue it with its data, if any. */
static void
req_send(struct req *r, const void *data, uint32_t dlen)
{
	wire_end(&r->q, dlen);
	iov_push(r->q.buf, r->q.len);
	if (dlen > 0)
		iov_push((void *)(uintptr_t)data, dlen);
	r->end = c.queued;
	c.requests++;
}

/* A request whose only argument is a handle: CLOSE, READDIR. */
static void
send_handle_req(struct req *r, const uint8_t *h, uint32_t hlen)
{
	memcpy(r->handle, h, hlen);
	r->hlen = hlen;
	wire_str(&r->q, h, hlen);
	req_send(r, NULL, 0);
}

/* OPEN with empty attributes, or OPENDIR when pflags is UINT32_MAX. */
static struct req *
send_open(const char *path, uint32_t pflags)
{
	struct req *r;

	r = req_new(pflags == UINT32_MAX ? SSH_FXP_OPENDIR : SSH_FXP_OPEN);
	if (r == NULL)
		return NULL;
	wire_str(&r->q, path, strlen(path));
	if (pflags != UINT32_MAX) {
		wire_u32(&r->q, pflags);
		wire_u32(&r->q, 0);
	}
	req_send(r, NULL, 0);
	return r;
}

static void
status_die(const struct req *r, struct wire_cur *cu, const char *want)
{
	uint32_t code = UINT32_MAX, mlen = 0;
	const uint8_t *msg = NULL;

	if (wire_get_u32(cu, &code) != 0 ||
	    wire_get_str(cu, &msg, &mlen) != 0) {
		msg = (const uint8_t *)"";
		mlen = 0;
	}
	die("%s id %u (off %llu len %u): STATUS %u \"%.*s\", expected %s",
	    type_name(r->type), r->id, (unsigned long long)r->off, r->len,
	    code, (int)mlen, (const char *)msg, want);
}

static void
bad_reply(const struct req *r, uint8_t type, const char *want)
{
	die("%s id %u (off %llu len %u): reply %s (%u), expected %s",
	    type_name(r->type), r->id, (unsigned long long)r->off, r->len,
	    type_name(type), type, want);
}

/* Read the code of a STATUS reply; die on any other reply type. */
static uint32_t
status_code(const struct req *r, uint8_t type, struct wire_cur *cu)
{
	struct wire_cur save = *cu;
	uint32_t code;

	if (type != SSH_FXP_STATUS)
		bad_reply(r, type, "STATUS");
	if (wire_get_u32(cu, &code) != 0)
		die("%s id %u: STATUS too short", type_name(r->type), r->id);
	*cu = save;
	return code;
}

static void
expect_ok(const struct req *r, uint8_t type, struct wire_cur *cu)
{
	if (status_code(r, type, cu) != SSH_FX_OK)
		status_die(r, cu, "OK");
}

/* Copy the handle of a HANDLE reply to h. */
static void
expect_handle(const struct req *r, uint8_t type, struct wire_cur *cu,
    uint8_t *h, uint32_t *hlen)
{
	const uint8_t *s;
	uint32_t n;

	if (type == SSH_FXP_STATUS)
		status_die(r, cu, "HANDLE");
	if (type != SSH_FXP_HANDLE)
		bad_reply(r, type, "HANDLE");
	if (wire_get_str(cu, &s, &n) != 0 || n > WIRE_HANDLE_MAX)
		die("%s id %u: malformed HANDLE", type_name(r->type), r->id);
	memcpy(h, s, n);
	*hlen = n;
}

/*
 * The reply to a request, matched to its slot by id. The slot is freed before
 * the workload sees the reply, so a follow-up request always has a slot.
 */
static void
on_reply(uint8_t type, struct wire_cur *cu)
{
	struct req *slot, r;
	uint32_t id, idx;
	const uint8_t *s;
	uint32_t n, ver = 0;

	if (!c.version_seen) {
		if (type != SSH_FXP_VERSION)
			die("first reply is %s (%u), expected VERSION",
			    type_name(type), type);
		if (wire_get_u32(cu, &ver) != 0 || ver != WIRE_VERSION)
			die("server speaks version %u, expected 3", ver);
		while (cu->left > 0) {
			const uint8_t *v;
			uint32_t vn;

			if (wire_get_str(cu, &s, &n) != 0 ||
			    wire_get_str(cu, &v, &vn) != 0)
				die("malformed VERSION extensions");
			if (opt.verbose)
				fprintf(stderr, "extension %.*s \"%.*s\"\n",
				    (int)n, (const char *)s, (int)vn,
				    (const char *)v);
		}
		c.version_seen = 1;
		return;
	}
	if (wire_get_u32(cu, &id) != 0)
		die("reply %s without an id", type_name(type));
	idx = id & 0xffff;
	if (idx >= opt.depth || c.slots[idx].type == 0 ||
	    c.slots[idx].id != id)
		die("reply %s (%u) to id %u, which is not in flight",
		    type_name(type), type, id);
	slot = &c.slots[idx];
	if (c.written < slot->end)
		die("reply %s to id %u before the request was fully sent",
		    type_name(type), id);
	if (slot->seq < c.last_seq)
		c.ooo++;
	else
		c.last_seq = slot->seq;
	memcpy(&r, slot, offsetof(struct req, handle) + slot->hlen);
	slot->type = 0;
	c.freel[c.nfree++] = idx;
	c.inflight--;
	opt.wl->reply(&r, type, cu);
}

/* Parse every complete reply in the input buffer. */
static void
parse_in(void)
{
	struct wire_cur cu;
	uint32_t plen;
	uint8_t type;
	int r;

	while ((r = wire_frame(c.in + c.in_off, c.in_len, MAX_REPLY, &plen,
	    &type, &cu)) > 0) {
		on_reply(type, &cu);
		c.in_off += 4 + (size_t)plen;
		c.in_len -= 4 + (size_t)plen;
	}
	if (r < 0)
		die("reply length %u is out of range", plen);
	if (c.in_len == 0)
		c.in_off = 0;
}

/* Say how the child ended, for a message. */
static const char *
child_fate(void)
{
	static char buf[64];
	int st;

	if (waitpid(c.pid, &st, 0) != c.pid)
		return "(not reaped)";
	c.pid = 0;
	if (WIFEXITED(st))
		(void)snprintf(buf, sizeof(buf), "exited with status %d",
		    WEXITSTATUS(st));
	else if (WIFSIGNALED(st))
		(void)snprintf(buf, sizeof(buf), "killed by signal %d",
		    WTERMSIG(st));
	else
		(void)snprintf(buf, sizeof(buf), "ended (status %#x)", st);
	return buf;
}

/* One read with all the free room. Returns 1 if bytes came. */
static int
read_in(void)
{
	size_t room;
	ssize_t n;

	room = IN_SIZE - c.in_off - c.in_len;
	if (room < MAX_REPLY && c.in_off > 0) {
		memmove(c.in, c.in + c.in_off, c.in_len);
		c.in_off = 0;
		room = IN_SIZE - c.in_len;
	}
	n = read(c.rfd, c.in + c.in_off + c.in_len, room);
	if (n < 0) {
		if (errno == EAGAIN || errno == EINTR)
			return 0;
		die("read from server: %s", strerror(errno));
	}
	if (n == 0)
		die("server closed its output with %u requests in flight: "
		    "server %s", c.inflight, child_fate());
	c.in_len += (size_t)n;
	parse_in();
	return 1;
}

/* One writev of the queued requests. Returns 1 if bytes went. */
static int
flush_out(void)
{
	ssize_t n;

	if ((n = wire_out_write(&c.out, c.wfd)) < 0) {
		if (errno == EAGAIN || errno == EINTR)
			return 0;
		if (errno == EPIPE)
			die("server closed its input: server %s",
			    child_fate());
		die("write to server: %s", strerror(errno));
	}
	c.written += (uint64_t)n;
	return n > 0;
}

/* Wait until the server can take more input or has output for us. */
static void
wait_io(int want_out)
{
	struct pollfd pfd[2];
	int n, r;

	pfd[0].fd = c.rfd;
	pfd[0].events = POLLIN;
	n = 1;
	if (want_out) {
		if (c.wfd == c.rfd)
			pfd[0].events |= POLLOUT;
		else {
			pfd[1].fd = c.wfd;
			pfd[1].events = POLLOUT;
			n = 2;
		}
	}
	r = poll(pfd, (nfds_t)n, opt.timeout_ms);
	if (r < 0 && errno != EINTR)
		die("poll: %s", strerror(errno));
	if (r == 0)
		die("no progress for %d ms with %u requests in flight "
		    "(%llu bytes queued, %llu taken): server stalled",
		    opt.timeout_ms, c.inflight, (unsigned long long)c.queued,
		    (unsigned long long)c.written);
}

/*
 * The event loop: fill the pipeline, write what the server can take, read
 * what it answered; block in poll only when neither moved.
 */
static void
run_until(const int *flag, void (*issue)(void))
{
	int progress;

	while (!*flag) {
		if (issue != NULL)
			issue();
		progress = 0;
		if (c.out.n > 0)
			progress |= flush_out();
		progress |= read_in();
		if (!progress && !*flag)
			wait_io(c.out.n > 0);
	}
}

static void
init_exchange(void)
{
	wire_init(&c.init);
	iov_push(c.init.buf, c.init.len);
	run_until(&c.version_seen, NULL);
}

/* Send CLOSE for the workload's handle. */
static void
send_close(void)
{
	struct req *r;

	if ((r = req_new(SSH_FXP_CLOSE)) == NULL)
		abort();
	send_handle_req(r, c.handle, c.hlen);
	w.phase = PH_CLOSING;
}

/*
 * What the workloads on one handle share.  handle_ready sends the OPEN (or
 * the OPENDIR, when pflags is UINT32_MAX) once a slot is free and returns 1
 * once its HANDLE has come, when the pipelined requests may go.
 */
static int
handle_ready(const char *path, uint32_t pflags)
{
	if (w.phase == PH_OPEN && send_open(path, pflags) != NULL)
		w.phase = PH_OPENING;
	return w.phase == PH_RUN;
}

/* The HANDLE of the OPEN or OPENDIR, and the OK of the CLOSE, the end. */
static void
handle_reply(const struct req *r, uint8_t type, struct wire_cur *cu)
{
	switch (r->type) {
	case SSH_FXP_OPEN:
	case SSH_FXP_OPENDIR:
		expect_handle(r, type, cu, c.handle, &c.hlen);
		w.phase = PH_RUN;
		break;
	case SSH_FXP_CLOSE:
		expect_ok(r, type, cu);
		w.phase = PH_DONE;
		w.done = 1;
		break;
	default:
		abort();
	}
}

/*
 * upload: OPEN (write, create, truncate), opt.bytes in pipelined WRITEs of
 * opt.reqsize, then CLOSE once every WRITE is acknowledged.
 */
static void
upload_prepare(void)
{
	if (unlink(path_up) != 0 && errno != ENOENT)
		die("unlink %s: %s", path_up, strerror(errno));
}

static void
upload_issue(void)
{
	struct req *r;
	uint64_t off;
	uint32_t len;

	if (!handle_ready(path_up,
	    SSH_FXF_WRITE | SSH_FXF_CREAT | SSH_FXF_TRUNC))
		return;
	while (w.next_off < opt.bytes &&
	    (r = req_new(SSH_FXP_WRITE)) != NULL) {
		off = w.next_off;
		len = opt.bytes - off < opt.reqsize ?
		    (uint32_t)(opt.bytes - off) : opt.reqsize;
		wire_str(&r->q, c.handle, c.hlen);
		wire_u64(&r->q, off);
		wire_u32(&r->q, len);
		r->off = off;
		r->len = len;
		req_send(r, pat_at(off), len);
		w.next_off += len;
	}
	if (w.acked == opt.bytes && c.inflight == 0)
		send_close();
}

static void
upload_reply(const struct req *r, uint8_t type, struct wire_cur *cu)
{
	if (r->type != SSH_FXP_WRITE) {
		handle_reply(r, type, cu);
		return;
	}
	expect_ok(r, type, cu);
	w.acked += r->len;
}

static void
upload_finish(void)
{
	if (opt.verify)
		verify_file(path_up, 0, opt.bytes);
	(void)unlink(path_up);
}

/*
 * download: OPEN (read), pipelined READs of opt.reqsize until EOF, the rest of
 * any short read asked for again, then CLOSE. Every byte of the file must come
 * exactly once, and EOF only at its end.
 */
static void
download_prepare(void)
{
	make_download_file();
}

static void
send_read(uint64_t off, uint32_t len)
{
	struct req *r;

	if ((r = req_new(SSH_FXP_READ)) == NULL)
		abort();
	wire_str(&r->q, c.handle, c.hlen);
	wire_u64(&r->q, off);
	wire_u32(&r->q, len);
	r->off = off;
	r->len = len;
	req_send(r, NULL, 0);
}

static void
download_issue(void)
{
	if (!handle_ready(path_dl, SSH_FXF_READ))
		return;
	while (w.ngaps > 0 && c.nfree > 0) {
		w.ngaps--;
		send_read(w.gaps[w.ngaps].off, w.gaps[w.ngaps].len);
	}
	while (!w.eof && c.nfree > 0) {
		send_read(w.next_off, opt.reqsize);
		w.next_off += opt.reqsize;
	}
	if (w.eof && w.ngaps == 0 && c.inflight == 0) {
		if (w.acked != opt.bytes)
			die("EOF after %llu of %llu bytes",
			    (unsigned long long)w.acked,
			    (unsigned long long)opt.bytes);
		send_close();
	}
}

static void
download_data(const struct req *r, struct wire_cur *cu)
{
	const uint8_t *d;
	uint32_t n;

	if (wire_get_str(cu, &d, &n) != 0)
		die("READ id %u: malformed DATA", r->id);
	if (n > r->len)
		die("READ id %u off %llu: DATA of %u bytes, asked for %u",
		    r->id, (unsigned long long)r->off, n, r->len);
	if (n == 0)
		die("READ id %u off %llu: empty DATA", r->id,
		    (unsigned long long)r->off);
	if (r->off + n > opt.bytes)
		die("READ id %u off %llu: %u bytes past the end of the file",
		    r->id, (unsigned long long)r->off, n);
	if (opt.verify && memcmp(d, pat_at(r->off), n) != 0)
		die("READ id %u off %llu: the %u bytes differ from the file",
		    r->id, (unsigned long long)r->off, n);
	w.acked += n;
	if (n < r->len) {
		/* Each gap comes from a reply: never more than slots. */
		if (w.ngaps > opt.depth)
			abort();
		w.gaps[w.ngaps].off = r->off + n;
		w.gaps[w.ngaps].len = r->len - n;
		w.ngaps++;
	}
}

static void
download_reply(const struct req *r, uint8_t type, struct wire_cur *cu)
{
	if (r->type != SSH_FXP_READ) {
		handle_reply(r, type, cu);
		return;
	}
	if (type == SSH_FXP_DATA) {
		download_data(r, cu);
		return;
	}
	if (status_code(r, type, cu) != SSH_FX_EOF)
		status_die(r, cu, "DATA or EOF");
	if (r->off < opt.bytes)
		die("READ id %u: EOF at offset %llu, inside the file of %llu "
		    "bytes", r->id, (unsigned long long)r->off,
		    (unsigned long long)opt.bytes);
	w.eof = 1;
}

/*
 * readdir: opt.listings times OPENDIR, READDIRs (a few in flight) until EOF,
 * CLOSE. Each listing must hold every fixture name once, and "." and ".."
 * both or neither (Go's pkg/sftp lists no dots).
 */
static void
readdir_prepare(void)
{
	make_dir();
	w.seen = xmalloc(opt.entries / 8 + 1);
}

static void
readdir_issue(void)
{
	uint32_t window;
	struct req *r;

	window = opt.depth < READDIR_WINDOW ? opt.depth : READDIR_WINDOW;
	if (!handle_ready(path_dir, UINT32_MAX))
		return;
	while (!w.eof && c.inflight < window &&
	    (r = req_new(SSH_FXP_READDIR)) != NULL)
		send_handle_req(r, c.handle, c.hlen);
	if (w.eof && c.inflight == 0) {
		/* OpenSSH lists "." and ".."; Go's pkg/sftp does not. */
		if ((w.dots != 0 && w.dots != 2) ||
		    w.entries != (uint64_t)opt.entries + w.dots)
			die("listing %u: %llu entries (%u of them dots), "
			    "expected %u and 2 or no dots", w.listing + 1,
			    (unsigned long long)w.entries, w.dots,
			    opt.entries);
		send_close();
	}
}

/* Whether a name is "." or "..". */
static int
is_dot(const uint8_t *s, uint32_t n)
{
	return (n == 1 && s[0] == '.') ||
	    (n == 2 && s[0] == '.' && s[1] == '.');
}

/* Check one name of a listing against the fixture: file-NNNNNN.dat. */
static void
readdir_name(const uint8_t *s, uint32_t n, uint64_t size, uint32_t perm)
{
	uint32_t i, k;

	if (is_dot(s, n)) {
		if (perm != 0 && !S_ISDIR(perm))
			die("\"%.*s\" is not a directory (mode %o)", (int)n,
			    (const char *)s, perm);
		return;
	}
	if (n != 15 || memcmp(s, "file-", 5) != 0 ||
	    memcmp(s + 11, ".dat", 4) != 0)
		die("unexpected name \"%.*s\"", (int)n, (const char *)s);
	for (i = 5, k = 0; i < 11; i++) {
		if (s[i] < '0' || s[i] > '9')
			die("unexpected name \"%.*s\"", (int)n,
			    (const char *)s);
		k = k * 10 + (uint32_t)(s[i] - '0');
	}
	if (k >= opt.entries || (w.seen[k / 8] & (1U << (k % 8))))
		die("name \"%.*s\" unknown or listed twice", (int)n,
		    (const char *)s);
	w.seen[k / 8] |= (uint8_t)(1U << (k % 8));
	if (!S_ISREG(perm) || size != 0)
		die("\"%.*s\": mode %o size %llu, expected an empty file",
		    (int)n, (const char *)s, perm, (unsigned long long)size);
}

static void
readdir_names(const struct req *r, struct wire_cur *cu)
{
	const uint8_t *s, *l;
	uint32_t count, n, ln, i, perm;
	uint64_t size;

	if (wire_get_u32(cu, &count) != 0)
		die("READDIR id %u: malformed NAME", r->id);
	for (i = 0; i < count; i++) {
		if (wire_get_str(cu, &s, &n) != 0 ||
		    wire_get_str(cu, &l, &ln) != 0 ||
		    get_attrs(cu, &size, &perm) != 0)
			die("READDIR id %u: malformed NAME entry %u of %u",
			    r->id, i, count);
		if (is_dot(s, n))
			w.dots++;
		if (opt.verify)
			readdir_name(s, n, size, perm);
	}
	if (cu->left != 0)
		die("READDIR id %u: %zu bytes after the last name", r->id,
		    cu->left);
	w.entries += count;
}

static void
readdir_reply(const struct req *r, uint8_t type, struct wire_cur *cu)
{
	switch (r->type) {
	case SSH_FXP_READDIR:
		if (type == SSH_FXP_NAME) {
			if (w.eof)
				die("READDIR id %u: NAME after EOF", r->id);
			readdir_names(r, cu);
			break;
		}
		if (status_code(r, type, cu) != SSH_FX_EOF)
			status_die(r, cu, "NAME or EOF");
		w.eof = 1;
		break;
	case SSH_FXP_CLOSE:
		expect_ok(r, type, cu);
		w.total_entries += w.entries;
		w.entries = 0;
		w.dots = 0;
		w.eof = 0;
		memset(w.seen, 0, opt.entries / 8 + 1);
		if (++w.listing == opt.listings) {
			w.phase = PH_DONE;
			w.done = 1;
		} else
			w.phase = PH_OPEN;
		break;
	default:
		handle_reply(r, type, cu);
	}
}

/* stat: opt.count pipelined LSTATs over the fixture directory's files. */
static void
stat_prepare(void)
{
	make_dir();
}

static void
stat_issue(void)
{
	char p[WIRE_PATH_MAX];
	struct req *r;
	int n;

	while (w.sent < opt.count && (r = req_new(SSH_FXP_LSTAT)) != NULL) {
		n = snprintf(p, sizeof(p), "%s/file-%06u.dat", path_dir,
		    w.sent % opt.entries);
		wire_str(&r->q, p, (size_t)n);
		r->file = w.sent;
		req_send(r, NULL, 0);
		w.sent++;
	}
}

static void
stat_reply(const struct req *r, uint8_t type, struct wire_cur *cu)
{
	uint64_t size;
	uint32_t perm;

	if (type == SSH_FXP_STATUS)
		status_die(r, cu, "ATTRS");
	if (type != SSH_FXP_ATTRS)
		bad_reply(r, type, "ATTRS");
	if (get_attrs(cu, &size, &perm) != 0)
		die("LSTAT id %u: malformed ATTRS", r->id);
	if (opt.verify && (!S_ISREG(perm) || size != 0))
		die("LSTAT id %u file %u: mode %o size %llu, expected an "
		    "empty file", r->id, r->file % opt.entries, perm,
		    (unsigned long long)size);
	if (++w.completed == opt.count)
		w.done = 1;
}

/*
 * smallfiles: opt.count times OPEN (write, create, truncate), one WRITE of
 * SMALL_SIZE bytes, CLOSE; as many files in flight as the pipeline holds.
 */
static void
small_path(char *p, size_t sz, uint32_t i)
{
	(void)snprintf(p, sz, "%s/f-%06u", path_small, i);
}

static void
small_prepare(void)
{
	clear_dir(path_small, 1);
	if (mkdir(path_small, 0755) != 0)
		die("mkdir %s: %s", path_small, strerror(errno));
}

static void
small_issue(void)
{
	char p[WIRE_PATH_MAX];
	struct req *r;

	while (w.sent < opt.count) {
		small_path(p, sizeof(p), w.sent);
		r = send_open(p, SSH_FXF_WRITE | SSH_FXF_CREAT | SSH_FXF_TRUNC);
		if (r == NULL)
			break;
		r->file = w.sent++;
	}
}

static void
small_reply(const struct req *r, uint8_t type, struct wire_cur *cu)
{
	struct req *n;
	uint8_t h[WIRE_HANDLE_MAX];
	uint32_t hlen;

	switch (r->type) {
	case SSH_FXP_OPEN:
		expect_handle(r, type, cu, h, &hlen);
		if ((n = req_new(SSH_FXP_WRITE)) == NULL)
			abort();
		memcpy(n->handle, h, hlen);
		n->hlen = hlen;
		n->file = r->file;
		n->off = 0;
		n->len = SMALL_SIZE;
		wire_str(&n->q, h, hlen);
		wire_u64(&n->q, 0);
		wire_u32(&n->q, SMALL_SIZE);
		req_send(n, pat_at((uint64_t)r->file * SMALL_SIZE),
		    SMALL_SIZE);
		break;
	case SSH_FXP_WRITE:
		expect_ok(r, type, cu);
		if ((n = req_new(SSH_FXP_CLOSE)) == NULL)
			abort();
		n->file = r->file;
		send_handle_req(n, r->handle, r->hlen);
		break;
	case SSH_FXP_CLOSE:
		expect_ok(r, type, cu);
		if (++w.completed == opt.count)
			w.done = 1;
		break;
	default:
		abort();
	}
}

static void
small_finish(void)
{
	char p[WIRE_PATH_MAX];
	uint32_t i;

	if (opt.verify)
		for (i = 0; i < opt.count; i++) {
			small_path(p, sizeof(p), i);
			verify_file(p, (uint64_t)i * SMALL_SIZE, SMALL_SIZE);
		}
	clear_dir(path_small, 1);
}

static const struct workload workloads[] = {
	{ WL_UPLOAD, "upload", "MiB", upload_prepare, upload_issue,
	    upload_reply, upload_finish },
	{ WL_DOWNLOAD, "download", "MiB", download_prepare, download_issue,
	    download_reply, NULL },
	{ WL_READDIR, "readdir", "entry", readdir_prepare, readdir_issue,
	    readdir_reply, NULL },
	{ WL_STAT, "stat", "op", stat_prepare, stat_issue, stat_reply, NULL },
	{ WL_SMALLFILES, "smallfiles", "file", small_prepare, small_issue,
	    small_reply, small_finish },
};

/*
 * Start the child on pipes or a socketpair. It runs in the work directory with
 * stdin and stdout connected to us and stderr inherited. fork, not vfork: the
 * child's ru_maxrss counts the memory it had before exec, which is then only
 * this small process.
 */
static void
start_child(char **argv)
{
	int to[2], from[2], sp[2], fd;

	if (opt.use_socketpair) {
		if (socketpair(AF_UNIX, SOCK_STREAM, 0, sp) != 0)
			die("socketpair: %s", strerror(errno));
		to[0] = from[1] = sp[1];
		to[1] = from[0] = sp[0];
	} else if (pipe(to) != 0 || pipe(from) != 0)
		die("pipe: %s", strerror(errno));
	fflush(stdout);
	fflush(stderr);
	if ((c.pid = fork()) < 0)
		die("fork: %s", strerror(errno));
	if (c.pid == 0) {
		if (dup2(to[0], 0) < 0 || dup2(from[1], 1) < 0)
			_exit(127);
		for (fd = 3; fd < 64; fd++)
			(void)close(fd);
		(void)signal(SIGPIPE, SIG_DFL);
		execvp(argv[0], argv);
		fprintf(stderr, "sftpbench: exec %s: %s\n", argv[0],
		    strerror(errno));
		_exit(127);
	}
	c.rfd = from[0];
	c.wfd = to[1];
	if (opt.use_socketpair)
		(void)close(sp[1]);
	else {
		(void)close(to[0]);
		(void)close(from[1]);
	}
	if (fcntl(c.rfd, F_SETFL, O_NONBLOCK) != 0 ||
	    fcntl(c.wfd, F_SETFL, O_NONBLOCK) != 0)
		die("fcntl: %s", strerror(errno));
}

/*
 * Floor mode: the raw bytes of the transfer through the pipe, in large writes
 * or reads; the floor program copies them to or from the file and exits.
 */
static void
floor_upload(void)
{
	uint64_t off = 0;
	size_t n;
	ssize_t r;

	while (off < opt.bytes) {
		n = opt.bytes - off < MAX_REQ ? (size_t)(opt.bytes - off) :
		    MAX_REQ;
		if ((r = write(c.wfd, pat_at(off), n)) < 0) {
			if (errno == EAGAIN) {
				wait_io(1);
				continue;
			}
			if (errno == EINTR)
				continue;
			die("write to floor: %s (floor %s)", strerror(errno),
			    child_fate());
		}
		off += (uint64_t)r;
		c.written = off;
	}
}

static void
floor_download(void)
{
	uint64_t off = 0;
	ssize_t r;

	for (;;) {
		r = read(c.rfd, c.in, MAX_REQ);
		if (r < 0) {
			if (errno == EAGAIN) {
				wait_io(0);
				continue;
			}
			if (errno == EINTR)
				continue;
			die("read from floor: %s", strerror(errno));
		}
		if (r == 0)
			break;
		if (off + (uint64_t)r > opt.bytes)
			die("floor sent more than %llu bytes",
			    (unsigned long long)opt.bytes);
		if (opt.verify && memcmp(c.in, pat_at(off), (size_t)r) != 0)
			die("floor: the %zd bytes at offset %llu differ", r,
			    (unsigned long long)off);
		off += (uint64_t)r;
		if (off == opt.bytes)
			c.hwm = proc_long(c.pid, "status", "VmHWM");
	}
	if (off != opt.bytes)
		die("floor sent %llu of %llu bytes (floor %s)",
		    (unsigned long long)off, (unsigned long long)opt.bytes,
		    child_fate());
}

/* A size with an optional K, M or G suffix (powers of 1024). */
static uint64_t
parse_size(const char *s, uint64_t max, const char *what)
{
	unsigned long long v;
	char *end;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0 || end == s)
		die("bad %s \"%s\"", what, s);
	switch (*end) {
	case 'k':
	case 'K':
		v <<= 10;
		end++;
		break;
	case 'm':
	case 'M':
		v <<= 20;
		end++;
		break;
	case 'g':
	case 'G':
		v <<= 30;
		end++;
		break;
	default:
		break;
	}
	if (*end != '\0' || v > max)
		die("bad %s \"%s\" (at most %llu)", what, s,
		    (unsigned long long)max);
	return v;
}

static void
usage(void)
{
	fprintf(stderr,
	    "usage: sftpbench [-FSVv] [-b bytes] [-c count] [-d dir] "
	    "[-i listings]\n"
	    "                 [-L label] [-l reqsize] [-n entries] "
	    "[-p prefault] [-q depth]\n"
	    "                 [-t timeout] "
	    "-w upload|download|readdir|stat|smallfiles\n"
	    "                 -- command [arg ...]\n");
	exit(2);
}

static void
parse_args(int argc, char **argv)
{
	const char *wl = NULL;
	uint32_t count = 0;
	char *cmd;
	size_t i;
	int ch;

	opt.bytes = 1ULL << 30;
	opt.reqsize = 261120;
	opt.depth = 64;
	opt.entries = 20000;
	opt.listings = 5;
	opt.timeout_ms = 60000;
	opt.prefault = UINT64_MAX;
	while ((ch = getopt(argc, argv, "FSVvb:c:d:i:L:l:n:p:q:t:w:")) != -1) {
		switch (ch) {
		case 'F':
			opt.floor_mode = 1;
			break;
		case 'S':
			opt.use_socketpair = 1;
			break;
		case 'V':
			opt.verify = 1;
			break;
		case 'v':
			opt.verbose = 1;
			break;
		case 'b':
			opt.bytes = parse_size(optarg, 1ULL << 50, "size");
			break;
		case 'c':
			count = (uint32_t)parse_size(optarg, 100000000,
			    "count");
			break;
		case 'd':
			opt.dir = optarg;
			break;
		case 'i':
			opt.listings = (uint32_t)parse_size(optarg, 1000000,
			    "listings");
			break;
		case 'L':
			opt.label = optarg;
			break;
		case 'l':
			opt.reqsize = (uint32_t)parse_size(optarg, MAX_REQ,
			    "request size");
			break;
		case 'n':
			opt.entries = (uint32_t)parse_size(optarg, MAX_ENTRIES,
			    "entries");
			break;
		case 'p':
			opt.prefault = parse_size(optarg, 1ULL << 50,
			    "prefault size");
			break;
		case 'q':
			opt.depth = (uint32_t)parse_size(optarg, MAX_DEPTH,
			    "depth");
			break;
		case 't':
			opt.timeout_ms = (int)parse_size(optarg, 86400,
			    "timeout") * 1000;
			break;
		case 'w':
			wl = optarg;
			break;
		default:
			usage();
		}
	}
	if (wl == NULL || optind >= argc)
		usage();
	for (i = 0; i < sizeof(workloads) / sizeof(workloads[0]); i++)
		if (strcmp(wl, workloads[i].name) == 0)
			opt.wl = &workloads[i];
	if (opt.wl == NULL)
		die("unknown workload \"%s\"", wl);
	if (opt.depth == 0 || opt.reqsize == 0 || opt.entries == 0 ||
	    opt.listings == 0 || opt.timeout_ms == 0)
		die("depth, request size, entries, listings and timeout must "
		    "not be 0");
	if (opt.floor_mode && opt.wl->kind != WL_UPLOAD &&
	    opt.wl->kind != WL_DOWNLOAD)
		die("the floor moves only uploads and downloads");
	if (opt.wl->kind == WL_STAT)
		opt.count = count != 0 ? count : 100000;
	else if (opt.wl->kind == WL_SMALLFILES)
		opt.count = count != 0 ? count : 5000;
	opt.argv = argv + optind;
	/* A relative command path names a file from here, not from dir. */
	if (opt.dir != NULL && strchr(opt.argv[0], '/') != NULL &&
	    opt.argv[0][0] != '/') {
		if ((cmd = realpath(opt.argv[0], NULL)) == NULL)
			die("%s: %s", opt.argv[0], strerror(errno));
		opt.argv[0] = cmd;
	}
	if (opt.dir != NULL && chdir(opt.dir) != 0)
		die("chdir %s: %s", opt.dir, strerror(errno));
	if (opt.label == NULL) {
		const char *s = strrchr(opt.argv[0], '/');

		opt.label = s != NULL ? s + 1 : opt.argv[0];
	}
	(void)snprintf(path_dl, sizeof(path_dl), "download-%llu.dat",
	    (unsigned long long)opt.bytes);
	(void)snprintf(path_dir, sizeof(path_dir), "dir-%u", opt.entries);
	(void)snprintf(path_dir_ok, sizeof(path_dir_ok), "dir-%u.ok",
	    opt.entries);
}

/* Allocate and touch the client's buffers. */
static void
alloc_client(void)
{
	uint32_t i;

	pat_make();
	c.in = xmalloc(IN_SIZE);
	memset(c.in, 0xa5, IN_SIZE);
	c.slots = xmalloc(opt.depth * sizeof(*c.slots));
	c.freel = xmalloc(opt.depth * sizeof(*c.freel));
	for (i = 0; i < opt.depth; i++)
		c.freel[i] = opt.depth - 1 - i;
	c.nfree = opt.depth;
	c.out.cap = 2 * (size_t)opt.depth + 8;
	c.out.v = xmalloc(c.out.cap * sizeof(*c.out.v));
	w.gaps = xmalloc(((size_t)opt.depth + 1) * sizeof(*w.gaps));
}

/*
 * Start the child: the server, or the floor with its direction and file
 * appended to its command.
 */
static void
start(void)
{
	char **cargv;
	int n;

	if (!opt.floor_mode) {
		start_child(opt.argv);
		return;
	}
	for (n = 0; opt.argv[n] != NULL; n++)
		;
	cargv = xmalloc(((size_t)n + 3) * sizeof(*cargv));
	memcpy(cargv, opt.argv, (size_t)n * sizeof(*cargv));
	cargv[n] = opt.wl->kind == WL_UPLOAD ? "up" : "down";
	cargv[n + 1] = opt.wl->kind == WL_UPLOAD ? path_up : path_dl;
	start_child(cargv);
	free(cargv);
}

/*
 * Run the workload and reap the child. The wall time ends with the last reply
 * (for the floor: when it exits); VmHWM is read just before the end, while
 * the child still lives.
 */
static void
measure(double *wall, double *ccpu, struct rusage *sru)
{
	struct rusage ru0, ru1;
	double t0, t1;
	int st;

	if (getrusage(RUSAGE_SELF, &ru0) != 0)
		die("getrusage: %s", strerror(errno));
	t0 = now();
	if (opt.floor_mode && opt.wl->kind == WL_UPLOAD) {
		floor_upload();
		c.hwm = proc_long(c.pid, "status", "VmHWM");
		(void)close(c.wfd);
	} else if (opt.floor_mode)
		floor_download();
	else
		run_until(&w.done, opt.wl->issue);
	t1 = now();
	if (!opt.floor_mode) {
		c.hwm = proc_long(c.pid, "status", "VmHWM");
		(void)close(c.wfd);
	}
	if (c.rfd != c.wfd)
		(void)close(c.rfd);
	c.rfd = c.wfd = -1;
	if (wait4(c.pid, &st, 0, sru) != c.pid)
		die("wait4: %s", strerror(errno));
	if (opt.floor_mode)
		t1 = now();
	if (getrusage(RUSAGE_SELF, &ru1) != 0)
		die("getrusage: %s", strerror(errno));
	c.pid = 0;
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		die("%s %s with status %#x after the workload", opt.label,
		    WIFSIGNALED(st) ? "was killed" : "exited", st);
	*wall = t1 - t0;
	*ccpu = tv_sec(&ru1.ru_utime) - tv_sec(&ru0.ru_utime) +
	    tv_sec(&ru1.ru_stime) - tv_sec(&ru0.ru_stime);
}

/* The result line. */
static void
report(double wall, double ccpu, const struct rusage *sru)
{
	double units;
	uint32_t reqsize = 0;

	switch (opt.wl->kind) {
	case WL_UPLOAD:
	case WL_DOWNLOAD:
		units = (double)opt.bytes / (1024.0 * 1024.0);
		reqsize = opt.reqsize;
		break;
	case WL_READDIR:
		units = (double)w.total_entries;
		break;
	case WL_SMALLFILES:
		units = (double)opt.count;
		reqsize = SMALL_SIZE;
		break;
	default:
		units = (double)opt.count;
		break;
	}
	printf("workload=%s server=%s transport=%s depth=%u reqsize=%u "
	    "units=%.3f unit=%s wall=%.6f rate=%.3f server_user=%.6f "
	    "server_sys=%.6f server_cpu=%.6f server_maxrss_kb=%ld "
	    "server_hwm_kb=%ld server_vcsw=%ld server_ivcsw=%ld "
	    "client_cpu=%.6f requests=%llu ooo=%llu verified=%d\n",
	    opt.wl->name, opt.label,
	    opt.use_socketpair ? "socketpair" : "pipe", opt.depth, reqsize,
	    units, opt.wl->unit, wall, wall > 0 ? units / wall : 0.0,
	    tv_sec(&sru->ru_utime), tv_sec(&sru->ru_stime),
	    tv_sec(&sru->ru_utime) + tv_sec(&sru->ru_stime),
	    sru->ru_maxrss, c.hwm, sru->ru_nvcsw, sru->ru_nivcsw, ccpu,
	    (unsigned long long)c.requests, (unsigned long long)c.ooo,
	    opt.verify);
}

int
main(int argc, char **argv)
{
	struct rusage sru;
	double wall, ccpu;
	uint64_t pre;

	(void)signal(SIGPIPE, SIG_IGN);
	(void)umask(022);
	c.hwm = -1;
	parse_args(argc, argv);
	opt.wl->prepare();
	start();
	alloc_client();
	if (!opt.floor_mode)
		init_exchange();
	pre = PREFAULT_BASE;
	if (opt.wl->kind == WL_UPLOAD)
		pre += opt.bytes;
	else if (opt.wl->kind == WL_SMALLFILES)
		pre += (uint64_t)opt.count * 2 * PAGE_BYTES;
	if (opt.prefault != UINT64_MAX)
		pre = opt.prefault;
	if (pre > 0)
		prefault(pre);
	measure(&wall, &ccpu, &sru);
	if (opt.wl->finish != NULL)
		opt.wl->finish();
	report(wall, ccpu, &sru);
	return 0;
}
