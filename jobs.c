/*
 * Jobs and their workers (jobs.h).
 *
 * The ring of jobs and the ring of arena bytes are taken and given back in
 * the same order, request order: a job is added at the end and removed
 * from the front only, so either ring is two offsets.  Both live in one
 * mapping, made the first time a job is made; jobs_idle() gives its pages
 * back.
 *
 * The workers share one lock, one condition and one queue of jobs handed
 * off.  A worker that finishes a job marks it under the lock; the loop
 * marks the jobs it finds finished as done (jobs_collect()), so that every
 * other field of a job is read by the loop only after the lock has ordered
 * the worker's writes before.  The eventfd is written only to wake the
 * loop: when a worker finishes a job while the loop sleeps on it (asleep,
 * set by jobs_sleep() under the lock only when nothing finished is
 * unseen).  A loop that is busy costs the workers no system call, and
 * no wake-up is lost: a job finished before jobs_sleep() keeps the loop
 * awake, one finished after it writes the eventfd.
 */
#include <sys/types.h>
#include <sys/eventfd.h>
#include <sys/mman.h>

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "jobs.h"

/* Arena bytes are handed out in multiples of this. */
#define ARENA_ALIGN	64
/*
 * A worker's stack: its calls need a few path buffers.  The C library's
 * default (8 MiB with glibc) would be address space wasted many times.
 * The stacks are this file's own (with a guard page below each), so that
 * jobs_idle() can give their pages back: the C library keeps the stacks of
 * ended threads for reuse, with the pages they touched.
 */
#define WORKER_STACK	(256 * 1024)
#define STACK_GUARD	(64 * 1024)	/* above any page size */

static void (*run_job)(struct job *);
static unsigned max_workers = 1;

static uint8_t *map;		/* the ring, then the arena; NULL until used */
static struct job *ring;
static uint8_t *arena;
static unsigned ring_head, ring_count, nrunning;
static size_t arena_beg, arena_end, arena_wrap;	/* wrap: 0, or where the
						   bytes before the wrap end */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t work = PTHREAD_COND_INITIALIZER;
static pthread_t workers[JOBS_MAX_WORKERS];
static void *stacks[JOBS_MAX_WORKERS];	/* guard, then stack; or NULL */
static unsigned nworkers, nidle;
static struct job *queue[JOBS_RING];	/* handed off, not yet taken */
static unsigned queue_head, queue_count;
static int stopping;
static int efd = -1;
static int asleep;		/* the loop waits on efd */
static unsigned unseen;		/* jobs finished that it has not collected */

#define MAP_SIZE	(JOBS_RING * sizeof(struct job) + JOBS_ARENA)

int
jobs_init(void (*run)(struct job *), unsigned max)
{
	run_job = run;
	if (max < 1)
		max = 1;
	if (max > JOBS_MAX_WORKERS)
		max = JOBS_MAX_WORKERS;
	max_workers = max;
	return 0;
}

unsigned
jobs_max_workers(void)
{
	return max_workers;
}

static int
mapped(void)
{
	void *p;

	if (map != NULL)
		return 0;
	p = mmap(NULL, MAP_SIZE, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return -1;
	map = p;
	ring = (struct job *)(void *)map;
	arena = map + JOBS_RING * sizeof(struct job);
	return 0;
}

/* Where size arena bytes would go, or SIZE_MAX; *wrapp: at a wrap. */
static size_t
arena_place(size_t size, int *wrapp)
{
	*wrapp = 0;
	if (size == 0)
		return arena_end;
	if (arena_wrap == 0) {
		if (JOBS_ARENA - arena_end >= size)
			return arena_end;
		if (arena_beg >= size) {
			*wrapp = 1;
			return 0;
		}
		return SIZE_MAX;
	}
	if (arena_beg - arena_end >= size)
		return arena_end;
	return SIZE_MAX;
}

static size_t
aligned(size_t size)
{
	return (size + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN;
}

int
jobs_room(size_t size)
{
	int wrap;

	if (ring_count == JOBS_RING || size > JOBS_ARENA)
		return 0;
	if (ring_count == 0)
		return 1;
	return arena_place(aligned(size), &wrap) != SIZE_MAX;
}

struct job *
jobs_new(size_t size)
{
	struct job *j;
	size_t off;
	int wrap;

	if (!jobs_room(size) || mapped() == -1)
		return NULL;
	if (ring_count == 0)
		arena_beg = arena_end = arena_wrap = 0;
	size = aligned(size);
	if ((off = arena_place(size, &wrap)) == SIZE_MAX)
		return NULL;
	if (wrap) {
		arena_wrap = arena_end;
		off = 0;
	}
	j = &ring[(ring_head + ring_count) % JOBS_RING];
	memset(j, 0, sizeof *j);
	j->fd = -1;
	j->arena_off = off;
	j->arena_len = size;
	j->buf = size > 0 ? arena + off : NULL;
	arena_end = off + size;
	ring_count++;
	return j;
}

/* The job ends: the worker lets the loop know, waking it if it sleeps. */
static void
finished(struct job *j)
{
	uint64_t one = 1;
	int wake;

	(void)pthread_mutex_lock(&lock);
	j->finished = 1;
	unseen++;
	wake = asleep;
	asleep = 0;
	(void)pthread_mutex_unlock(&lock);
	while (wake && write(efd, &one, sizeof one) == -1 && errno == EINTR)
		;
}

static void *
worker(void *arg)
{
	struct job *j;

	(void)arg;
	(void)pthread_mutex_lock(&lock);
	for (;;) {
		while (queue_count == 0 && !stopping) {
			nidle++;
			(void)pthread_cond_wait(&work, &lock);
			nidle--;
		}
		if (queue_count == 0)
			break;	/* stopping, and nothing left */
		j = queue[queue_head];
		queue_head = (queue_head + 1) % JOBS_RING;
		queue_count--;
		(void)pthread_mutex_unlock(&lock);
		run_job(j);
		finished(j);
		(void)pthread_mutex_lock(&lock);
	}
	(void)pthread_mutex_unlock(&lock);
	return NULL;
}

/*
 * One more worker, with every signal blocked but SIGSYS (it inherits the
 * mask it is made with).  Called with the lock held.  Returns 0 or -1.
 */
static int
add_worker(void)
{
	pthread_attr_t attr;
	sigset_t all, old;
	int r;

	void *st;

	if (efd == -1 &&
	    (efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) == -1)
		return -1;
	st = mmap(NULL, STACK_GUARD + WORKER_STACK, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
	if (st == MAP_FAILED)
		return -1;
	if (mprotect(st, STACK_GUARD, PROT_NONE) == -1 ||
	    pthread_attr_init(&attr) != 0) {
		(void)munmap(st, STACK_GUARD + WORKER_STACK);
		return -1;
	}
	(void)pthread_attr_setstack(&attr, (uint8_t *)st + STACK_GUARD,
	    WORKER_STACK);
	(void)sigfillset(&all);
	/* A call off the sandbox's list traps with a report, not a kill. */
	(void)sigdelset(&all, SIGSYS);
	(void)pthread_sigmask(SIG_SETMASK, &all, &old);
	r = pthread_create(&workers[nworkers], &attr, worker, NULL);
	(void)pthread_sigmask(SIG_SETMASK, &old, NULL);
	(void)pthread_attr_destroy(&attr);
	if (r != 0) {
		(void)munmap(st, STACK_GUARD + WORKER_STACK);
		return -1;
	}
	stacks[nworkers++] = st;
	return 0;
}

void
jobs_run_here(struct job *j)
{
	run_job(j);
	j->done = 1;
}

void
jobs_mark_done(struct job *j)
{
	j->done = 1;
}

int
jobs_done(const struct job *j)
{
	return j->done;
}

void
jobs_start(struct job *j)
{
	int alone;

	(void)pthread_mutex_lock(&lock);
	if (nidle <= queue_count && nworkers < max_workers)
		(void)add_worker();
	alone = nworkers == 0;
	if (!alone) {
		queue[(queue_head + queue_count) % JOBS_RING] = j;
		queue_count++;
		j->queued = 1;
		nrunning++;
		(void)pthread_cond_signal(&work);
	}
	(void)pthread_mutex_unlock(&lock);
	/* No thread to be had: slower, still right. */
	if (alone)
		jobs_run_here(j);
}

unsigned
jobs_collect(void)
{
	unsigned n = 0;
	struct job *j;

	if (nrunning == 0)
		return 0;
	(void)pthread_mutex_lock(&lock);
	for (unsigned i = 0; unseen > 0 && i < ring_count; i++) {
		j = &ring[(ring_head + i) % JOBS_RING];
		if (j->queued && !j->done && j->finished) {
			j->done = 1;
			n++;
		}
	}
	unseen = 0;
	(void)pthread_mutex_unlock(&lock);
	nrunning -= n;
	return n;
}

struct job *
jobs_head(void)
{
	if (ring_count == 0 || !ring[ring_head].done)
		return NULL;
	return &ring[ring_head];
}

void
jobs_retire(void)
{
	struct job *j = &ring[ring_head];

	if (ring_count == 0 || !j->done)
		return;
	if (j->arena_len > 0) {
		arena_beg = j->arena_off + j->arena_len;
		if (arena_wrap != 0 && arena_beg == arena_wrap) {
			arena_beg = 0;
			arena_wrap = 0;
		}
	}
	ring_head = (ring_head + 1) % JOBS_RING;
	if (--ring_count == 0) {
		ring_head = 0;
		arena_beg = arena_end = arena_wrap = 0;
	}
}

unsigned
jobs_count(void)
{
	return ring_count;
}

unsigned
jobs_running(void)
{
	return nrunning;
}

struct job *
jobs_at(unsigned i)
{
	return &ring[(ring_head + i) % JOBS_RING];
}

int
jobs_sleep(void)
{
	int fd = -1;

	if (nrunning == 0 || efd == -1)
		return -1;
	(void)pthread_mutex_lock(&lock);
	if (unseen == 0) {
		asleep = 1;
		fd = efd;
	}
	(void)pthread_mutex_unlock(&lock);
	return fd;
}

void
jobs_woke(int readable)
{
	uint64_t v;

	(void)pthread_mutex_lock(&lock);
	asleep = 0;
	(void)pthread_mutex_unlock(&lock);
	/* Nonblocking: a worker that saw the loop asleep may write it late. */
	if (readable && read(efd, &v, sizeof v) == -1)
		v = 0;
}

void
jobs_wait(void)
{
	struct pollfd pfd;

	while (jobs_collect() == 0 && nrunning > 0) {
		if ((pfd.fd = jobs_sleep()) == -1)
			continue;	/* one finished meanwhile */
		pfd.events = POLLIN;
		pfd.revents = 0;
		(void)poll(&pfd, 1, -1);
		jobs_woke(pfd.revents != 0);
	}
}

void
jobs_idle(void)
{
	if (ring_count > 0)
		return;
	if (nworkers > 0) {
		(void)pthread_mutex_lock(&lock);
		stopping = 1;
		(void)pthread_cond_broadcast(&work);
		(void)pthread_mutex_unlock(&lock);
		for (unsigned i = 0; i < nworkers; i++) {
			(void)pthread_join(workers[i], NULL);
			(void)munmap(stacks[i], STACK_GUARD + WORKER_STACK);
			stacks[i] = NULL;
		}
		nworkers = 0;
		stopping = 0;
	}
	if (efd != -1) {
		(void)close(efd);
		efd = -1;
	}
	if (map != NULL)
		(void)madvise(map, MAP_SIZE, MADV_DONTNEED);
}

#ifdef SFTP_FUZZ
void
jobs_free(void)
{
	while (ring_count > 0) {
		jobs_wait();
		jobs_retire();
	}
	jobs_idle();
	if (map != NULL)
		(void)munmap(map, MAP_SIZE);
	map = NULL;
}
#endif
