/*
 * Pipe sizes follow the traffic: one page while idle, what sshd gave, then
 * the pipe's largest size while a transfer runs.  A pipe grows a step when
 * one read or write fills half of it.  stderr, a third pipe from sshd that
 * only log lines use, is one page while idle and what sshd gave otherwise.
 */
#include <sys/types.h>

#include <errno.h>
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
/* An idle session's: the kernel's smallest, one page. */
#define PIPE_IDLE	4096
/*
 * After a grow the user's quota refused, a busy pipe tries again once this
 * many seconds have passed: other sessions may have given pages back.
 */
#define RETRY_S		1

static struct pipe {
	int fd;
	int big;	/* its largest size */
	int size;	/* current size; -1 when fd is not a pipe */
	int base;	/* the size sshd gave it */
	time_t refused;	/* when a grow last failed, or 0 */
} pipes[3] = {
	{ STDIN_FILENO, PIPE_BIG_IN, -1, -1, 0 },
	{ STDOUT_FILENO, PIPE_BIG_OUT, -1, -1, 0 },
	{ STDERR_FILENO, 0, -1, -1, 0 },
};
#define NPIPES	(sizeof pipes / sizeof pipes[0])

void
pipes_init(void)
{
	for (size_t i = 0; i < NPIPES; i++) {
		pipes[i].size = sys_pipe_size(pipes[i].fd, 0);
		pipes[i].base = pipes[i].size;
	}
}

/* Seconds on the monotonic clock; never 0. */
static time_t
now_s(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_MONOTONIC, &ts) == -1)
		return 1;
	return ts.tv_sec + 1;
}

/* n bytes went through p at once: the next size up when they filled half. */
static void
busy(struct pipe *p, size_t n)
{
	int want, was = p->size;

	if (p->size <= 0 || p->size >= p->big || n < (size_t)p->size / 2)
		return;
	/* Only a pipe that ran full asks the clock. */
	if (p->refused != 0 && now_s() - p->refused < RETRY_S)
		return;
	want = p->size < p->base ? p->base : p->big;
	p->size = sys_pipe_size(p->fd, want);
	/* Refused: the user's quota is spent, for now. */
	p->refused = p->size <= was ? now_s() : 0;
	/* A transfer begins: the log gets its pipe back too. */
	if (pipes[2].size > 0 && pipes[2].size < pipes[2].base)
		pipes[2].size = sys_pipe_size(pipes[2].fd, pipes[2].base);
}

void
pipes_read(size_t n)
{
	busy(&pipes[0], n);
}

void
pipes_write(size_t n)
{
	busy(&pipes[1], n);
}

int
pipes_idle(void)
{
	int r = 0;

	for (size_t i = 0; i < NPIPES; i++) {
		pipes[i].refused = 0;
		if (pipes[i].size <= PIPE_IDLE)
			continue;
		pipes[i].size = sys_pipe_size(pipes[i].fd, PIPE_IDLE);
		if (pipes[i].size > PIPE_IDLE)
			r = -1;	/* EBUSY: it holds more than a page */
	}
	return r;
}
