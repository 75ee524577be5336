/*
 * holder: the client side of many SFTP sessions of one user, for scale.sh.
 * Each session is a server process started on two pipes, as sshd starts a
 * subsystem.  The pipes are made here, so they count against the pipe quota
 * of whoever runs holder: run it as the user whose sessions it stands for.
 *
 *   holder hold [-d dir] [-l reqsize] [-n sessions] [-P pidfile] [-q depth]
 *       -- server [arg ...]
 *	Starts the sessions, completes INIT on each, prints one line
 *	"ready ..." and then answers commands read from stdin, one a line:
 *	  stat        one line: each session's pipe pages (F_GETPIPE_SZ of
 *	              both its pipes, read through our ends, / 4096):
 *	              minimum, median, maximum, total
 *	  probe       makes a pipe, as a new session's would be made, and
 *	              tries to grow it to 1 MiB: "probe new=BYTES grown=BYTES"
 *	              (grown=EPERM when the quota refuses)
 *	  xfer SIZE   each session in turn uploads SIZE bytes to a file of its
 *	              own and downloads it again; one line when all are done
 *	  trickle S   keeps every session busy but barely: a STAT of "." to
 *	              each, every second for S seconds, the last one just
 *	              before the line that says it is done
 *	  quit        (or end of input) closes every session and reaps it
 *   holder burst [-b size] [-d dir] [-l reqsize] [-q depth] [-r rounds]
 *       [-s seconds] -w upload|download -- server [arg ...]
 *	One session: a warm-up transfer, then per round a pause of -s
 *	seconds, one transfer of -b bytes (the burst) and at once another
 *	(steady).  One line per round: rates, and the server's CPU for each
 *	from /proc/PID/schedstat.
 *   holder touch SIZE
 *	Touches SIZE bytes of fresh memory and frees them, so that the pages a
 *	host took back come back before, not during, a measurement.
 *
 * The servers' memory is read by sessinfo, as root: both servers make
 * themselves undumpable, which closes /proc/PID/smaps_rollup to their user.
 *
 * Transfers keep -q requests (64) in flight and check every reply's id,
 * type and status; data is not checked (sftpbench -V does that).
 */

/* pipe2, close_range and F_GETPIPE_SZ are Linux only. */
#define _GNU_SOURCE

#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "proc.h"
#include "spread.h"
#include "wire.h"

#define MAX_REQ		(255 * 1024)	/* OpenSSH's largest READ/WRITE */
#define MAX_REPLY	(MAX_REQ + 1024)
#define IN_SIZE		(4 * 1024 * 1024)
#define MAX_DEPTH	256
#define IOV_CAP		(2 * MAX_DEPTH + 8)
#define PAGE_BYTES	4096
#define TIMEOUT_MS	60000

struct sess {
	pid_t	pid;		/* 0 once reaped */
	int	wfd;		/* the server's stdin */
	int	rfd;		/* the server's stdout */
};

/* One request in flight; the id's low byte is the slot index. */
struct slot {
	uint32_t	id;
	int		busy;
	uint64_t	off;
	uint32_t	len;
	struct wire_req	q;
};

static struct {
	const char	*dir;
	uint32_t	 reqsize;
	uint32_t	 depth;
	uint64_t	 bytes;
	unsigned int	 pause_s;
	unsigned int	 rounds;
	int		 upload;
	size_t		 nsess;
	const char	*pidfile;
	char		**argv;
} opt = { NULL, MAX_REQ, 64, 64ULL << 20, 5, 3, -1, 0, NULL, NULL };

/* The transfer engine: one session at a time. */
static struct {
	uint8_t		*in;		/* replies */
	size_t		 in_off;	/* first unparsed byte */
	size_t		 in_len;	/* bytes in the buffer */
	struct iovec	 iov[IOV_CAP];
	struct wire_out	 out;		/* requests not yet written */
	struct slot	 slots[MAX_DEPTH];
	uint32_t	 freel[MAX_DEPTH];
	uint32_t	 nfree;
	uint32_t	 gen;
	uint64_t	 next;		/* next offset to ask for */
	uint64_t	 gap_off;	/* rest of a short READ to ask again */
	uint32_t	 gap_len;
	uint8_t		 handle[WIRE_HANDLE_MAX];
	uint32_t	 hlen;
	uint8_t		*data;		/* WRITE payload */
} x;

static struct sess *sess;
static size_t nsess;

static void __attribute__((format(printf, 1, 2), noreturn))
die(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fprintf(stderr, "holder: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

static void *
xmalloc(size_t n)
{
	void *p;

	if ((p = malloc(n)) == NULL)
		die("out of memory");
	return p;
}

static double
now(void)
{
	struct timespec ts;

	(void)clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t
parse_size(const char *s, const char *what)
{
	unsigned long long v;
	char *end;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0 || end == s)
		die("bad %s: %s", what, s);
	switch (*end) {
	case 'k': case 'K':
		v <<= 10;
		end++;
		break;
	case 'm': case 'M':
		v <<= 20;
		end++;
		break;
	case 'g': case 'G':
		v <<= 30;
		end++;
		break;
	}
	if (*end != '\0')
		die("bad %s: %s", what, s);
	return v;
}

/* Session start and the blocking exchanges. */

static void
set_nonblock(int fd)
{
	if (fcntl(fd, F_SETFL, O_NONBLOCK) != 0)
		die("fcntl: %s", strerror(errno));
}

/*
 * Starts the server on two fresh pipes.  Both are made close-on-exec, so no
 * server holds another session's pipe (its EOF would never come); dup2 clears
 * the flag on the server's own stdin and stdout.  Whatever else holder
 * inherited is closed in the child, as sshd gives a session only 0, 1, 2.
 */
static void
sess_start(struct sess *s)
{
	int in[2], out[2];

	if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0)
		die("pipe: %s", strerror(errno));
	fflush(stdout);
	if ((s->pid = fork()) < 0)
		die("fork: %s", strerror(errno));
	if (s->pid == 0) {
		if (dup2(in[0], STDIN_FILENO) < 0 ||
		    dup2(out[1], STDOUT_FILENO) < 0)
			_exit(127);
		if (close_range(3, ~0U, 0) != 0)
			for (int fd = 3; fd < 1024; fd++)
				(void)close(fd);
		(void)signal(SIGPIPE, SIG_DFL);
		execvp(opt.argv[0], opt.argv);
		fprintf(stderr, "holder: exec %s: %s\n", opt.argv[0],
		    strerror(errno));
		_exit(127);
	}
	(void)close(in[0]);
	(void)close(out[1]);
	s->wfd = in[1];
	s->rfd = out[0];
	set_nonblock(s->wfd);
	set_nonblock(s->rfd);
}

static void
wait_fd(int fd, short events)
{
	struct pollfd p;
	int r;

	p.fd = fd;
	p.events = events;
	while ((r = poll(&p, 1, TIMEOUT_MS)) < 0 && errno == EINTR)
		;
	if (r < 0)
		die("poll: %s", strerror(errno));
	if (r == 0)
		die("no progress for %d s", TIMEOUT_MS / 1000);
}

static void
send_all(int fd, const uint8_t *p, size_t n)
{
	ssize_t r;

	while (n > 0) {
		if ((r = write(fd, p, n)) < 0) {
			if (errno == EAGAIN) {
				wait_fd(fd, POLLOUT);
				continue;
			}
			if (errno == EINTR)
				continue;
			die("write to server: %s", strerror(errno));
		}
		p += r;
		n -= (size_t)r;
	}
}

/*
 * Reads what the server has written, without blocking.  Moves the unparsed
 * rest to the front first when a largest reply no longer fits behind it.
 */
static void
fill(struct sess *s)
{
	ssize_t r;

	if (IN_SIZE - x.in_len < MAX_REPLY) {
		memmove(x.in, x.in + x.in_off, x.in_len - x.in_off);
		x.in_len -= x.in_off;
		x.in_off = 0;
	}
	if ((r = read(s->rfd, x.in + x.in_len, IN_SIZE - x.in_len)) < 0) {
		if (errno == EAGAIN || errno == EINTR)
			return;
		die("read from server %d: %s", (int)s->pid, strerror(errno));
	}
	if (r == 0)
		die("server %d closed its output", (int)s->pid);
	x.in_len += (size_t)r;
}

/*
 * The next complete reply in the buffer: returns 1 with its type and a cursor
 * over the rest (id first), 0 when more input is needed.
 */
static int
next_reply(uint8_t *type, struct wire_cur *c)
{
	uint32_t len;
	int r;

	r = wire_frame(x.in + x.in_off, x.in_len - x.in_off, MAX_REPLY, &len,
	    type, c);
	if (r < 0)
		die("reply of %u bytes", len);
	if (r == 0)
		return 0;
	x.in_off += 4 + (size_t)len;
	if (x.in_off == x.in_len)
		x.in_off = x.in_len = 0;
	return 1;
}

static void
wait_reply(struct sess *s, uint8_t *type, struct wire_cur *c)
{
	while (!next_reply(type, c)) {
		wait_fd(s->rfd, POLLIN);
		fill(s);
	}
}

static void
sess_init(struct sess *s)
{
	struct wire_req q;
	struct wire_cur c;
	uint8_t type;

	wire_init(&q);
	send_all(s->wfd, q.buf, q.len);
	wait_reply(s, &type, &c);
	if (type != SSH_FXP_VERSION)
		die("server %d: reply %u to INIT", (int)s->pid, type);
}

/* Checks a STATUS reply: it must be OK. */
static void
expect_ok(struct sess *s, uint8_t type, struct wire_cur *c, const char *what)
{
	uint32_t id, code;

	if (type != SSH_FXP_STATUS || wire_get_u32(c, &id) != 0 ||
	    wire_get_u32(c, &code) != 0)
		die("server %d: reply %u to %s", (int)s->pid, type, what);
	if (code != SSH_FX_OK)
		die("server %d: status %u to %s", (int)s->pid, code, what);
}

static void
open_file(struct sess *s, const char *path, uint32_t pflags)
{
	struct wire_req q;
	struct wire_cur c;
	const uint8_t *h;
	uint32_t id, n;
	uint8_t type;

	wire_begin(&q, SSH_FXP_OPEN);
	wire_u32(&q, 1);
	wire_str(&q, path, strlen(path));
	wire_u32(&q, pflags);
	wire_u32(&q, 0);
	wire_end(&q, 0);
	send_all(s->wfd, q.buf, q.len);
	wait_reply(s, &type, &c);
	if (type != SSH_FXP_HANDLE || wire_get_u32(&c, &id) != 0 ||
	    wire_get_str(&c, &h, &n) != 0 || n > WIRE_HANDLE_MAX)
		die("server %d: reply %u to OPEN %s", (int)s->pid, type, path);
	memcpy(x.handle, h, n);
	x.hlen = n;
}

/* A request of one string (a handle, a path), and its reply. */
static void
call_str(struct sess *s, uint8_t req, uint32_t id, const void *p, size_t n,
    uint8_t *type, struct wire_cur *c)
{
	struct wire_req q;

	wire_begin(&q, req);
	wire_u32(&q, id);
	wire_str(&q, p, n);
	wire_end(&q, 0);
	send_all(s->wfd, q.buf, q.len);
	wait_reply(s, type, c);
}

static void
close_file(struct sess *s)
{
	struct wire_cur c;
	uint8_t type;

	call_str(s, SSH_FXP_CLOSE, 2, x.handle, x.hlen, &type, &c);
	expect_ok(s, type, &c, "CLOSE");
}

/* The pipelined transfer. */

/* Queues READs or WRITEs while slots are free and bytes are left. */
static void
issue(int upload, uint64_t size)
{
	struct slot *r;
	uint64_t off;
	uint32_t len, idx;

	while (x.nfree > 0 && (x.gap_len > 0 || x.next < size)) {
		if (x.gap_len > 0) {
			off = x.gap_off;
			len = x.gap_len;
			x.gap_len = 0;
		} else {
			off = x.next;
			len = size - off < opt.reqsize ?
			    (uint32_t)(size - off) : opt.reqsize;
			x.next += len;
		}
		idx = x.freel[--x.nfree];
		r = &x.slots[idx];
		r->id = ++x.gen << 8 | idx;
		r->busy = 1;
		r->off = off;
		r->len = len;
		wire_begin(&r->q, upload ? SSH_FXP_WRITE : SSH_FXP_READ);
		wire_u32(&r->q, r->id);
		wire_str(&r->q, x.handle, x.hlen);
		wire_u64(&r->q, off);
		wire_u32(&r->q, len);
		wire_end(&r->q, upload ? len : 0);
		wire_out_push(&x.out, r->q.buf, r->q.len);
		if (upload)
			wire_out_push(&x.out, x.data, len);
	}
}

/* Writes what it can of the queued requests. */
static void
flush(struct sess *s)
{
	while (x.out.n > 0) {
		if (wire_out_write(&x.out, s->wfd) < 0) {
			if (errno == EAGAIN || errno == EINTR)
				return;
			die("writev to server: %s", strerror(errno));
		}
	}
}

/* One reply to a READ or WRITE: frees its slot, notes a short read. */
static void
on_reply(struct sess *s, int upload, uint8_t type, struct wire_cur *c)
{
	struct slot *r;
	uint32_t id, n;

	if (wire_get_u32(c, &id) != 0)
		die("server %d: short reply", (int)s->pid);
	r = &x.slots[id & 0xff];
	if (!r->busy || r->id != id)
		die("server %d: reply to unknown id %#x", (int)s->pid, id);
	if (upload) {
		c->p -= 4;
		c->left += 4;
		expect_ok(s, type, c, "WRITE");
	} else {
		if (type != SSH_FXP_DATA || wire_get_u32(c, &n) != 0 ||
		    n != c->left || n == 0 || n > r->len)
			die("server %d: reply %u to READ", (int)s->pid, type);
		if (n < r->len) {
			if (x.gap_len > 0)
				die("two short READs in flight");
			x.gap_off = r->off + n;
			x.gap_len = r->len - n;
		}
	}
	r->busy = 0;
	x.freel[x.nfree++] = id & 0xff;
}

/*
 * Uploads size bytes to path (created or truncated), or downloads them from
 * it, with opt.depth requests in flight; OPEN and CLOSE included.
 */
static void
transfer(struct sess *s, int upload, const char *path, uint64_t size)
{
	struct pollfd p[2];
	struct wire_cur c;
	uint8_t type;
	int r;

	open_file(s, path, upload ?
	    SSH_FXF_WRITE | SSH_FXF_CREAT | SSH_FXF_TRUNC : SSH_FXF_READ);
	x.next = 0;
	x.gap_len = 0;
	x.nfree = 0;
	for (uint32_t i = 0; i < opt.depth; i++)
		x.freel[x.nfree++] = opt.depth - 1 - i;
	for (;;) {
		issue(upload, size);
		if (x.nfree == opt.depth)
			break;
		p[0].fd = s->rfd;
		p[0].events = POLLIN;
		p[1].fd = s->wfd;
		p[1].events = x.out.n > 0 ? POLLOUT : 0;
		while ((r = poll(p, 2, TIMEOUT_MS)) < 0 && errno == EINTR)
			;
		if (r < 0)
			die("poll: %s", strerror(errno));
		if (r == 0)
			die("server %d: no progress for %d s", (int)s->pid,
			    TIMEOUT_MS / 1000);
		if (p[1].revents != 0)
			flush(s);
		if (p[0].revents != 0) {
			fill(s);
			while (next_reply(&type, &c))
				on_reply(s, upload, type, &c);
		}
	}
	close_file(s);
}

/* Measurements of a live session. */

static int
pipe_pages(int fd)
{
	int n;

	if ((n = fcntl(fd, F_GETPIPE_SZ)) < 0)
		return -1;
	return n / PAGE_BYTES;
}

/* The CPU time a process has run, from schedstat (nanoseconds). */
static double
proc_cpu(pid_t pid)
{
	char buf[128];

	if (proc_read(pid, "schedstat", buf, sizeof(buf)) != 0)
		die("cannot read /proc/%d/schedstat", (int)pid);
	return strtod(buf, NULL) / 1e9;
}

/* Notes sessions whose server has exited; returns how many still live. */
static size_t
reap_dead(void)
{
	size_t alive = 0;
	int st;

	for (size_t i = 0; i < nsess; i++) {
		if (sess[i].pid == 0)
			continue;
		if (waitpid(sess[i].pid, &st, WNOHANG) == sess[i].pid) {
			fprintf(stderr, "holder: server %d exited early "
			    "(status %#x)\n", (int)sess[i].pid, st);
			sess[i].pid = 0;
			continue;
		}
		alive++;
	}
	return alive;
}

static void
cmd_stat(void)
{
	long *pages;
	size_t n = 0, alive;

	alive = reap_dead();
	pages = xmalloc((nsess + 1) * sizeof(*pages));
	for (size_t i = 0; i < nsess; i++)
		if (sess[i].pid != 0)
			pages[n++] = pipe_pages(sess[i].wfd) +
			    pipe_pages(sess[i].rfd);
	printf("stat sessions=%zu alive=%zu", nsess, alive);
	print_spread("pages", pages, n);
	printf("\n");
	fflush(stdout);
	free(pages);
}

static void
cmd_probe(void)
{
	int p[2], made, grown;

	if (pipe(p) != 0)
		die("pipe: %s", strerror(errno));
	made = fcntl(p[0], F_GETPIPE_SZ);
	grown = fcntl(p[0], F_SETPIPE_SZ, 1024 * 1024);
	if (grown < 0 && errno != EPERM)
		die("F_SETPIPE_SZ: %s", strerror(errno));
	if (grown < 0)
		printf("probe new=%d grown=EPERM\n", made);
	else
		printf("probe new=%d grown=%d\n", made, grown);
	fflush(stdout);
	(void)close(p[0]);
	(void)close(p[1]);
}

static void
cmd_xfer(uint64_t size)
{
	char path[64];
	double t0 = now();

	for (size_t i = 0; i < nsess; i++) {
		if (sess[i].pid == 0)
			continue;
		(void)snprintf(path, sizeof(path), "held-%zu.dat", i);
		transfer(&sess[i], 1, path, size);
		transfer(&sess[i], 0, path, size);
		if (unlink(path) != 0)
			die("unlink %s: %s", path, strerror(errno));
	}
	printf("xfer sessions=%zu bytes=%llu seconds=%.3f\n", nsess,
	    (unsigned long long)size, now() - t0);
	fflush(stdout);
}

static void
pause_s(unsigned int s)
{
	struct timespec ts = { (time_t)s, 0 };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* One STAT of "." and its ATTRS. */
static void
stat_dot(struct sess *s)
{
	struct wire_cur c;
	uint8_t type;

	call_str(s, SSH_FXP_STAT, 3, ".", 1, &type, &c);
	if (type != SSH_FXP_ATTRS)
		die("server %d: reply %u to STAT", (int)s->pid, type);
}

static void
cmd_trickle(uint64_t seconds)
{
	for (uint64_t t = 0; t <= seconds; t++) {
		if (t > 0)
			pause_s(1);
		for (size_t i = 0; i < nsess; i++)
			if (sess[i].pid != 0)
				stat_dot(&sess[i]);
	}
	printf("trickle sessions=%zu seconds=%llu\n", nsess,
	    (unsigned long long)seconds);
	fflush(stdout);
}

/*
 * Ends every session as sshd does when the client goes: the server's stdin
 * closes, and it must exit 0.
 */
static void
quit(void)
{
	size_t bad = 0;
	int st;

	for (size_t i = 0; i < nsess; i++)
		(void)close(sess[i].wfd);
	for (size_t i = 0; i < nsess; i++) {
		if (sess[i].pid != 0) {
			if (waitpid(sess[i].pid, &st, 0) != sess[i].pid)
				die("waitpid: %s", strerror(errno));
			if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
				bad++;
		} else
			bad++;
		(void)close(sess[i].rfd);
	}
	printf("exited sessions=%zu bad=%zu\n", nsess, bad);
	fflush(stdout);
}

static void
engine_init(void)
{
	x.in = xmalloc(IN_SIZE);
	x.out.v = x.iov;
	x.out.cap = IOV_CAP;
	x.data = xmalloc(MAX_REQ);
	memset(x.data, 0x5a, MAX_REQ);
}

static int
do_hold(void)
{
	char line[256];
	FILE *pf = NULL;
	double t0;

	engine_init();
	nsess = opt.nsess;
	sess = xmalloc((nsess + 1) * sizeof(*sess));
	if (opt.pidfile != NULL && (pf = fopen(opt.pidfile, "w")) == NULL)
		die("%s: %s", opt.pidfile, strerror(errno));
	t0 = now();
	for (size_t i = 0; i < nsess; i++) {
		sess_start(&sess[i]);
		if (pf != NULL) {
			fprintf(pf, "%d\n", (int)sess[i].pid);
			fflush(pf);
		}
		sess_init(&sess[i]);
	}
	if (pf != NULL && fclose(pf) != 0)
		die("%s: %s", opt.pidfile, strerror(errno));
	printf("ready sessions=%zu seconds=%.3f\n", nsess, now() - t0);
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin) != NULL) {
		line[strcspn(line, "\n")] = '\0';
		if (strcmp(line, "stat") == 0)
			cmd_stat();
		else if (strcmp(line, "probe") == 0)
			cmd_probe();
		else if (strncmp(line, "xfer ", 5) == 0)
			cmd_xfer(parse_size(line + 5, "xfer size"));
		else if (strncmp(line, "trickle ", 8) == 0)
			cmd_trickle(parse_size(line + 8, "trickle seconds"));
		else if (strcmp(line, "quit") == 0)
			break;
		else
			die("unknown command: %s", line);
	}
	quit();
	return 0;
}

/* Writes path anew, size bytes long: the file a download reads. */
static void
make_file(const char *path, uint64_t size)
{
	uint64_t off;
	size_t n;
	ssize_t r;
	int fd;

	if ((fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644)) < 0)
		die("create %s: %s", path, strerror(errno));
	for (off = 0; off < size; off += n) {
		n = size - off < MAX_REQ ? (size_t)(size - off) : MAX_REQ;
		if ((r = write(fd, x.data, n)) < 0)
			die("write %s: %s", path, strerror(errno));
		n = (size_t)r;
	}
	if (close(fd) != 0)
		die("close %s: %s", path, strerror(errno));
}

static int
do_burst(void)
{
	struct sess s;
	double t0, c0, bw, bc, sw, sc;
	const char *path;
	int pg;
	int st;

	engine_init();
	path = opt.upload ? "burst-up.dat" : "burst-down.dat";
	if (!opt.upload)
		make_file(path, opt.bytes);
	sess_start(&s);
	sess_init(&s);
	transfer(&s, opt.upload, path, opt.bytes);	/* warm-up */
	for (unsigned int r = 1; r <= opt.rounds; r++) {
		pause_s(opt.pause_s);
		pg = pipe_pages(s.wfd) + pipe_pages(s.rfd);
		t0 = now();
		c0 = proc_cpu(s.pid);
		transfer(&s, opt.upload, path, opt.bytes);
		bw = now() - t0;
		bc = proc_cpu(s.pid) - c0;
		t0 = now();
		c0 = proc_cpu(s.pid);
		transfer(&s, opt.upload, path, opt.bytes);
		sw = now() - t0;
		sc = proc_cpu(s.pid) - c0;
		printf("burst round=%u workload=%s reqsize=%u bytes=%llu "
		    "pause_s=%u idle_pages=%d busy_pages=%d "
		    "burst_wall=%.6f burst_rate=%.1f burst_cpu=%.6f "
		    "steady_wall=%.6f steady_rate=%.1f steady_cpu=%.6f\n",
		    r, opt.upload ? "upload" : "download", opt.reqsize,
		    (unsigned long long)opt.bytes, opt.pause_s, pg,
		    pipe_pages(s.wfd) + pipe_pages(s.rfd), bw,
		    (double)opt.bytes / 1048576.0 / bw, bc, sw,
		    (double)opt.bytes / 1048576.0 / sw, sc);
		fflush(stdout);
	}
	(void)close(s.wfd);
	if (waitpid(s.pid, &st, 0) != s.pid)
		die("waitpid: %s", strerror(errno));
	(void)close(s.rfd);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		die("server exited with status %#x", st);
	(void)unlink(path);
	return 0;
}

static int
do_touch(uint64_t len)
{
	volatile uint8_t *p;

	p = mmap(NULL, len, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		die("mmap %llu bytes: %s", (unsigned long long)len,
		    strerror(errno));
	for (uint64_t i = 0; i < len; i += PAGE_BYTES)
		p[i] = 1;
	(void)munmap((void *)p, len);
	return 0;
}

static void __attribute__((noreturn))
usage(void)
{
	fprintf(stderr,
	    "usage: holder hold [-d dir] [-l reqsize] [-n sessions] "
	    "[-P pidfile] [-q depth]\n"
	    "           -- server [arg ...]\n"
	    "       holder burst [-b size] [-d dir] [-l reqsize] "
	    "[-q depth] [-r rounds]\n"
	    "           [-s seconds] -w upload|download -- server [arg ...]\n"
	    "       holder touch size\n");
	exit(2);
}

int
main(int argc, char **argv)
{
	const char *mode;
	uint64_t v;
	int ch;

	if (argc < 2)
		usage();
	mode = argv[1];
	if (strcmp(mode, "touch") == 0) {
		if (argc != 3)
			usage();
		return do_touch(parse_size(argv[2], "size"));
	}
	if (strcmp(mode, "hold") != 0 && strcmp(mode, "burst") != 0)
		usage();
	argc--;
	argv++;
	while ((ch = getopt(argc, argv, "b:d:l:n:P:q:r:s:w:")) != -1) {
		switch (ch) {
		case 'b':
			opt.bytes = parse_size(optarg, "size");
			break;
		case 'd':
			opt.dir = optarg;
			break;
		case 'l':
			v = parse_size(optarg, "request size");
			if (v == 0 || v > MAX_REQ)
				die("request size must be 1 to %d", MAX_REQ);
			opt.reqsize = (uint32_t)v;
			break;
		case 'n':
			opt.nsess = (size_t)parse_size(optarg, "sessions");
			break;
		case 'P':
			opt.pidfile = optarg;
			break;
		case 'q':
			v = parse_size(optarg, "depth");
			if (v == 0 || v > MAX_DEPTH)
				die("depth must be 1 to %d", MAX_DEPTH);
			opt.depth = (uint32_t)v;
			break;
		case 'r':
			opt.rounds = (unsigned int)parse_size(optarg, "rounds");
			break;
		case 's':
			opt.pause_s = (unsigned int)parse_size(optarg, "pause");
			break;
		case 'w':
			if (strcmp(optarg, "upload") == 0)
				opt.upload = 1;
			else if (strcmp(optarg, "download") == 0)
				opt.upload = 0;
			else
				usage();
			break;
		default:
			usage();
		}
	}
	argc -= optind;
	argv += optind;
	if (argc < 1)
		usage();
	opt.argv = argv;
	(void)signal(SIGPIPE, SIG_IGN);
	(void)umask(022);
	if (opt.dir != NULL && chdir(opt.dir) != 0)
		die("chdir %s: %s", opt.dir, strerror(errno));
	if (strcmp(mode, "hold") == 0)
		return do_hold();
	if (opt.upload < 0)
		usage();
	return do_burst();
}
