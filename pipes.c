/*
 * Pipe sizes follow the traffic: one page while it is a trickle, what sshd
 * gave, then the pipe's largest size while a transfer runs.  A pipe grows a
 * step when one read or write fills half of it.  stderr, a third pipe from
 * sshd that only log lines use, is one page while the traffic is a trickle
 * and what sshd gave otherwise.
 *
 * The traffic is the bytes read from stdin and written to stdout, counted
 * in a window of WINDOW_MS on the monotonic clock.  The window starts again
 * each time it has moved QUIET bytes, whatever the number of requests that
 * brought them; when it reaches its end having moved less, the pipes shrink,
 * even if requests still come.  A session kept alive by a request a second
 * thus shrinks as an idle one does, WINDOW_MS after a transfer, and the
 * next window starts with its next request.
 *
 * stdout may be a unix stream socket instead: sftp -D starts the server on
 * a socketpair.  There the writer's send buffer (SO_SNDBUF) bounds the
 * bytes in flight, and a writer that filled it sleeps until the reader has
 * taken all but a quarter of it.  With the default 208 KiB, a quarter is
 * what a reader such as OpenSSH's sftp takes in a few microseconds, less
 * than the writer needs to wake: the reader then waits on an empty socket,
 * about once per 255 KiB reply (1,400 waits in a 512 MiB download).  A
 * transfer therefore grows the send buffer as it grows a pipe, and the
 * session gives it back to its first size when the traffic falls to a
 * trickle.  An unread socket holds only what was written, whatever its
 * send buffer; the size caps what a session may leave in it.
 *
 * Only a reader that runs while the server works waits so: one on another
 * CPU.  Where the two take turns on one CPU, the reader runs when the
 * writer sleeps, never waits for it, and takes the bytes from the CPU's
 * caches, which a larger buffer cools (4 to 10% more CPU for the server).  So
 * the buffer grows once the reader is seen to take bytes between two large
 * writes, with no read of the input between them (when the session waits
 * for input, the reader may run on its CPU): the bytes it has yet to read
 * (SO_MEMINFO) fell from the end of the one to the start of the other.
 */
#include <sys/types.h>
#include <sys/socket.h>

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pipes.h"
#include "sys-gnu.h"

/*
 * A transfer's largest pipes: fewer, larger reads and writes on both sides.
 * Through sshd, a 1 MiB stdin lets sshd write an upload in 256 KiB writes.
 * sshd reads stdout 32 KiB at a time whatever its size, and 256 KiB there
 * moves downloads as fast as 1 MiB (bench/README, "Many sessions") while it
 * holds 64 pages of the user's pipe quota (pipe-user-pages-soft), not 256.
 */
#define PIPE_BIG_IN	(1024 * 1024)
#define PIPE_BIG_OUT	(256 * 1024)
/*
 * A transfer's send buffer on a socket: the writer then wakes with 256 KiB
 * still queued, a whole 255 KiB reply for the reader to take meanwhile.
 * 416 KiB to 2 MiB moved downloads as fast (bench/RESULTS.md); this holds
 * less while the client is the slower side.  The kernel caps it at twice
 * net.core.wmem_max (416 KiB by default).
 */
#define SOCK_BIG_OUT	(1024 * 1024)
/*
 * A quiet session's: the kernel's smallest, one page.  pipes_init() asks
 * the kernel for it: on a kernel of 64 KiB pages, a pipe asked for 4 KiB
 * stays at 64 KiB, and would count as never shrunk.
 */
#define PIPE_IDLE	4096
/*
 * After a grow the user's quota refused, a busy pipe tries again once this
 * many milliseconds have passed: other sessions may have given pages back.
 */
#define RETRY_MS	1000
/* The window over which the traffic is measured. */
#define WINDOW_MS	2000
/*
 * Less than this many bytes in a window, in and out together, is a
 * trickle.  Under 64 KiB in 2 s, one-page pipes cost at most 16 reads and
 * writes more than large ones: a few microseconds.  A STAT a second moves
 * about 110 bytes a window, 100 a second 11 KiB.  A transfer, with 32 KiB
 * or more per request and many requests in flight, moves 64 KiB in
 * milliseconds; at 1 MiB/s it moves 32 times QUIET in a window.  One slower
 * than 32 KiB/s counts as a trickle: its pipes shrink when a window ends
 * and grow again with its next full read.
 */
#define QUIET		(64 * 1024)

static struct pipe {
	int fd;
	int big;	/* its largest size */
	int size;	/* current size; -1 when fd is neither kind */
	int base;	/* the size sshd gave it */
	int idle;	/* its size while the traffic is a trickle */
	int sock;	/* a unix stream socket: the size is its SO_SNDBUF */
	long after;	/* a socket's unread bytes after a large write, or -1 */
	int drained;	/* its reader took bytes while the session worked */
	int64_t refused;	/* when a grow last failed (ms), or 0 */
} pipes[3] = {
	{ STDIN_FILENO, PIPE_BIG_IN, -1, -1, PIPE_IDLE, 0, -1, 0, 0 },
	{ STDOUT_FILENO, PIPE_BIG_OUT, -1, -1, PIPE_IDLE, 0, -1, 0, 0 },
	{ STDERR_FILENO, 0, -1, -1, PIPE_IDLE, 0, -1, 0, 0 },
};
#define NPIPES	(sizeof pipes / sizeof pipes[0])

/* The current window. */
static struct {
	int64_t end;	/* its end (ms); 0 when none runs */
	size_t moved;	/* bytes read and written in it */
} window;
/* The pipes shrank, and no window has moved QUIET bytes since. */
static int quiet;

/* Milliseconds on the monotonic clock; never 0. */
static int64_t
now_ms(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_MONOTONIC, &ts) == -1)
		return 1;
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000 + 1;
}

static void
window_start(int64_t now)
{
	window.end = now + WINDOW_MS;
	window.moved = 0;
}

/* The send buffer of fd when it is a unix stream socket, or -1. */
static int
sock_size(int fd)
{
#ifdef SO_DOMAIN
	socklen_t len;
	int domain, type, size;

	/* Socket options alone: the sandbox lets them through on stdout. */
	len = sizeof domain;
	if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) == -1 ||
	    domain != AF_UNIX)
		return -1;
	len = sizeof type;
	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) == -1 ||
	    type != SOCK_STREAM)
		return -1;
	len = sizeof size;
	if (getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, &len) == -1)
		return -1;
	return size;
#else
	(void)fd;
	return -1;
#endif
}

/*
 * The bytes the peer of socket fd has yet to read, as the kernel charges
 * them to fd (its sk_wmem_alloc); or -1.
 */
static long
sock_queued(int fd)
{
#ifdef SO_MEMINFO
	uint32_t mi[3];		/* SK_MEMINFO_WMEM_ALLOC is the third */
	socklen_t len = sizeof mi;

	if (getsockopt(fd, SOL_SOCKET, SO_MEMINFO, mi, &len) == -1 ||
	    len < sizeof mi)
		return -1;
	return (long)mi[2];
#else
	(void)fd;
	return -1;
#endif
}

/*
 * Asks for size bytes on p; returns the size it has then.  The kernel
 * doubles what SO_SNDBUF is given (for its own bookkeeping), so half is
 * asked; what it caps is not read back, since the sandbox lets the session
 * set stdout's send buffer and no more.
 */
static int
resize(struct pipe *p, int size)
{
	int half = size / 2;

	if (!p->sock)
		return sys_pipe_size(p->fd, size);
	if (setsockopt(p->fd, SOL_SOCKET, SO_SNDBUF, &half, sizeof half) == -1)
		return p->size;
	return size;
}

/*
 * The size of the smallest pipe, as the kernel makes it (its page size,
 * which an emulator's may not be), or PIPE_IDLE when it cannot be told.
 * Asked once, before the sandbox (which the fuzz harness keeps from one
 * session to the next).
 */
static int
smallest_pipe(void)
{
	static int smallest;
	int fd[2], size;

	if (smallest != 0)
		return smallest;
	smallest = PIPE_IDLE;
	if (pipe(fd) == -1)
		return smallest;
	size = sys_pipe_size(fd[0], 1);
	(void)close(fd[0]);
	(void)close(fd[1]);
	if (size > PIPE_IDLE && size <= PIPE_BIG_OUT)
		smallest = size;
	return smallest;
}

void
pipes_init(void)
{
	int idle = smallest_pipe();

	for (size_t i = 0; i < NPIPES; i++) {
		pipes[i].size = sys_pipe_size(pipes[i].fd, 0);
		pipes[i].base = pipes[i].size;
		pipes[i].idle = idle;
	}
	/* stdout on a socket: its own size while quiet, larger when busy. */
	if (pipes[1].size == -1 &&
	    (pipes[1].size = sock_size(STDOUT_FILENO)) > 0) {
		pipes[1].sock = 1;
		pipes[1].base = pipes[1].idle = pipes[1].size;
		pipes[1].big = SOCK_BIG_OUT;
	}
	window_start(now_ms());
}

/* n bytes went through p at once: the next size up when they filled half. */
static void
busy(struct pipe *p, size_t n)
{
	int want, was = p->size;

	if (p->size <= 0 || p->size >= p->big || n < (size_t)p->size / 2)
		return;
	if (p->sock && !p->drained)
		return;
	/* Only a pipe that ran full asks the clock. */
	if (p->refused != 0 && now_ms() - p->refused < RETRY_MS)
		return;
	want = p->size < p->base ? p->base : p->big;
	p->size = resize(p, want);
	/* Refused: the user's quota is spent, for now. */
	p->refused = p->size <= was ? now_ms() : 0;
	/* A transfer begins: the log gets its pipe back too. */
	if (pipes[2].size > 0 && pipes[2].size < pipes[2].base)
		pipes[2].size = sys_pipe_size(pipes[2].fd, pipes[2].base);
}

/* n bytes of traffic; the first after the pipes shrank starts a window. */
static void
count(size_t n)
{
	if (window.end == 0)
		window_start(now_ms());
	window.moved += n;
	if (window.moved >= QUIET)
		quiet = 0;
}

void
pipes_read(size_t n)
{
	/* The reader may have run while the session waited for this. */
	pipes[1].after = -1;
	count(n);
	busy(&pipes[0], n);
}

void
pipes_write(size_t n)
{
	struct pipe *p = &pipes[1];
	long q;

	count(n);
	/* A socket: did its reader take bytes since the last large write? */
	if (p->sock && p->after >= 0 && p->size < p->big &&
	    n >= (size_t)p->size / 2) {
		q = sock_queued(p->fd);
		p->drained = q >= 0 && q < p->after;
	}
	busy(p, n);
}

void
pipes_written(size_t n)
{
	struct pipe *p = &pipes[1];

	if (p->sock && p->size < p->big && n >= (size_t)p->size / 2)
		p->after = sock_queued(p->fd);
}

int
pipes_quiet(void)
{
	return quiet;
}

int
pipes_wait(void)
{
	int64_t now;

	if (window.end == 0)
		return -1;
	now = now_ms();
	/* Traffic: the window starts again. */
	if (window.moved >= QUIET)
		window_start(now);
	if (now >= window.end)
		return 0;
	return (int)(window.end - now);
}

void
pipes_idle(void)
{
	int full = 0;

	for (size_t i = 0; i < NPIPES; i++) {
		pipes[i].refused = 0;
		pipes[i].after = -1;
		pipes[i].drained = 0;
		if (pipes[i].size <= pipes[i].idle)
			continue;
		pipes[i].size = resize(&pipes[i], pipes[i].idle);
		if (pipes[i].size > pipes[i].idle)
			full = 1;	/* EBUSY: it holds more than a page */
	}
	quiet = 1;
	/* A pipe that held data is tried again when the next window ends. */
	if (full)
		window_start(now_ms());
	else
		window.end = 0;
}
