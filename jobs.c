/*
 * Jobs and their workers (jobs.h).
 *
 * The ring of jobs and the ring of arena bytes are taken and given back in
 * the same order, request order: a job is added at the end and removed
 * from the front only.  The arena is a ring of bytes: the bytes in use
 * start at arena_beg and run arena_used bytes on, past the arena's end
 * back to its start.  A job's bytes are one run, never split: when the
 * room left before the arena's end is too short, the job takes that room
 * too and starts at 0, as a small job does once past the soft end
 * (jobs.h) when it fits at 0.  What a job took (arena_charge) is given
 * back when it retires, in the order taken, so that the two offsets always
 * describe exactly the bytes of the jobs in the ring, whatever mix of
 * sized and zero-sized jobs comes and goes.  Every placement is checked,
 * where its offset is computed, to lie inside the arena; one that would
 * not is refused, and the caller waits.  A guard page follows the arena,
 * and sanitizer builds poison the arena's free bytes.  The ring, the
 * arena and the guard live in one mapping, made the first time a job is
 * made; jobs_idle() gives its pages back.
 *
 * A job retired with keep set (its bytes are still read: a reply written
 * out from them) leaves the ring, but its bytes stay in use, and so do
 * those of every job retired after it: arena_kept counts them, from
 * arena_beg on, and jobs_release() gives them all back at once.  They stay
 * the oldest bytes in use, so that the two offsets still describe every
 * byte taken.  jobs_idle() gives no page back while any are kept.
 *
 * The workers share one lock, one semaphore and one queue of jobs handed
 * off; the lock guards the queue (and a shared job's counts), and a worker
 * takes it once per job, to take the next (a shared job's run takes it
 * again to close the job and to end).  A worker that finds the queue
 * empty counts itself idle (nidle), lets the lock go and waits for a token
 * of the semaphore; whoever queues work (or stops the workers) moves as
 * many idle workers as it wants woken from nidle to nwoken, under the
 * lock, and posts a token for each after letting it go; a worker back
 * from its wait takes the lock and leaves nwoken.  So a token is posted
 * for each idle count and taken by one waiter, no worker is counted twice
 * (jobs_start() adds workers only for work that the idle and the woken do
 * not cover), and a worker woken takes a lock that no one else marked as
 * waited for: a condition variable's wait (glibc's) takes the lock back
 * marked so, and the worker's next unlock then made a futex call for no
 * one, once per job.  A job's end takes no lock: the
 * worker stores finished (release), then counts it in unseen; the loop
 * empties unseen, then marks the jobs it finds finished (acquire) as done
 * (jobs_collect()), so that every other field of a job is read by the loop
 * only after the worker's writes.  A job counted in unseen after the loop
 * emptied it, but found finished already, costs one more scan that finds
 * nothing.  The eventfd is written only to wake the loop: when a worker
 * finishes a job while the loop sleeps on it (asleep).  jobs_sleep() sets
 * asleep, then reads unseen; a worker adds to unseen, then clears asleep,
 * and writes the eventfd if it was set.  All four are sequentially
 * consistent, so one of the two sees the other: no wake-up is lost (a job
 * finished before jobs_sleep() keeps the loop awake, one finished after it
 * writes the eventfd), and a loop that is busy costs the workers no system
 * call.  An eventfd written for a loop that found unseen first wakes its
 * next poll once, for nothing.
 *
 * A shared job (jobs_share()) stays at the queue's head while runs may
 * still begin: each worker that takes it counts a run begun and running,
 * under the lock, and the run that ends the count (runs begun all ended,
 * and no more to begin: closed) finishes it.  Only the head can have runs
 * begun and be still queued, so jobs_no_more() closes it by taking it off
 * the head.  The lock orders every run's writes before the last run's
 * finish (release), and so before the loop's collect (acquire).
 */
#include <sys/types.h>
#include <sys/eventfd.h>
#include <sys/mman.h>

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "jobs.h"
#include "packet.h"

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
static void (*on_start)(void);
static unsigned max_workers = 1;
/* An entry of the ring: the caller's struct, which begins with a job. */
static size_t entry_size = sizeof(struct job);

static uint8_t *map;		/* the arena, its guard, then the ring */
static uint8_t *ring;
static uint8_t *arena;
static unsigned ring_head, ring_count, nrunning;
static size_t arena_beg, arena_used;	/* the bytes in use: a ring */
/* Of those, the oldest, of jobs retired since one was kept. */
static size_t arena_kept;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
/* A token for each idle worker woken (see the workers' rule above). */
static sem_t work;
static int work_made;
/*
 * The workers' threads and stacks, and the queue of jobs handed off:
 * in the mapping, after the ring, so that an idle session's own pages
 * (its bss) do not hold them.
 */
struct pool {
	pthread_t workers[JOBS_MAX_WORKERS];
	void *stacks[JOBS_MAX_WORKERS];	/* guard, then stack; or NULL */
	struct job *queue[JOBS_RING];	/* handed off, not yet taken */
};
static struct pool *pool;
static unsigned nworkers;
/* Idle workers not woken yet, and those woken that have not come back. */
static unsigned nidle, nwoken;
/*
 * A worker could not be started: the errno, and how many there were then
 * (for jobs_thread_error()); and no more are tried until jobs_idle(), so
 * that a session at its process limit does not pay a failed mmap and
 * clone for every job.
 */
static int thread_err;
static unsigned thread_err_workers;
static int no_more_workers;
static unsigned queue_head, queue_count;
static int stopping;
static int efd = -1;
static _Atomic int asleep;	/* the loop waits on efd */
static _Atomic unsigned unseen;	/* jobs finished, maybe not collected */

/*
 * The mapping: the arena, the guard (a multiple of any page size), the
 * ring, then the pool.  The arena starts ARENA_SKEW bytes in, not on a
 * page, and ends at ARENA_END, where the guard starts: READ buffers at
 * page offset 0, as are the page cache's pages they are filled from and
 * the pipe's pages they are sent into, made 32 KiB downloads on storage
 * that waits 10% slower (bench/latency.sh at 1 ms, skewed against
 * aligned: 1.14 and 1.09 in two runs).
 */
#define ARENA_END	(8 * 1024 * 1024)
#define ARENA_SKEW	(ARENA_END - JOBS_ARENA)
#define ARENA_GUARD	(64 * 1024)
#define RING_BYTES	(JOBS_RING * entry_size)
#define MAP_SIZE	(ARENA_END + ARENA_GUARD + RING_BYTES + \
	sizeof(struct pool))

_Static_assert(ARENA_SKEW > 0 && ARENA_SKEW % ARENA_ALIGN == 0 &&
    ARENA_SKEW < 4096, "the arena starts inside the mapping's first page, "
    "aligned for its jobs");

/* Sanitizer builds: the arena's free bytes may not be touched. */
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define JOBS_ASAN	1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) && !defined(JOBS_ASAN)
#define JOBS_ASAN	1
#endif
#ifdef JOBS_ASAN
#include <sanitizer/asan_interface.h>
#define POISON(p, n)	ASAN_POISON_MEMORY_REGION((p), (n))
#define UNPOISON(p, n)	ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define POISON(p, n)	((void)(p), (void)(n))
#define UNPOISON(p, n)	((void)(p), (void)(n))
#endif

/*
 * The arena's pages are made present (buf_present()) as jobs first take
 * them, a job's whole range at once, rather than by a page fault each as
 * a worker's read writes them: one call per job that reaches a page no
 * job reached before, where the first lap of 255 KiB READs took 2,048
 * faults.  arena_present marks how far from the arena's start jobs have
 * reached since the last idle, to the end of the last page reached, and
 * so how far they are present (pages of a job placed past a gap in it
 * fault as before, as do all once the advice is refused); jobs_idle()
 * gives the pages back and starts it over.
 */
static size_t arena_present;
static int populate_refused;
static unsigned long present_calls;	/* the advice asked (the tests) */

/*
 * Huge pages for a bulk transfer's arena (BUF_BULK, packet.h): arena_huge
 * is their size (0: none, or refused), the map's first byte on a boundary.
 * A job of BUF_BULK bytes or more, placed to end at arena byte end, puts
 * the whole huge pages past it and past every byte a job has reached since
 * the last idle (arena_present) on huge pages, from the map's byte huge_lo
 * on (huge_on), until jobs_idle() gives them back: only jobs that come
 * after it reach them, so that a lone READ (a client asks 255 KiB of a
 * file of 1) keeps small pages.  Their bytes are not made present here: a
 * worker's first write takes a huge page in one fault, and the loop does
 * not clear 2 MiB at a time.
 */
static size_t arena_huge, huge_lo;
static int huge_on;

static void
arena_bulk(size_t end)
{
	size_t from;

	if (arena_huge == 0 || huge_on)
		return;
	if (end < arena_present)
		end = arena_present;
	/* The arena's byte x is the map's x + ARENA_SKEW. */
	from = (end + ARENA_SKEW + arena_huge - 1) / arena_huge * arena_huge;
	if (from >= ARENA_END)
		return;
	if (buf_huge(map + from, ARENA_END - from, 1) == -1) {
		arena_huge = 0;	/* refused: small pages for good */
		return;
	}
	huge_lo = from;
	huge_on = 1;
}

static void
make_present(size_t off, size_t size)
{
	size_t end = off + size, page = (size_t)sysconf(_SC_PAGESIZE), mark;
	size_t upto;

	if (end <= arena_present)
		return;
	/* Only the job's bytes the mark has not reached. */
	if (off < arena_present)
		off = arena_present;
	/*
	 * To the end of the job's last page, which is made present whole: the
	 * jobs that end in that page after it need no call (a pipeline of
	 * LSTATs made one for each path).  The arena ends where a page does
	 * (ARENA_END), so the mark never passes it.
	 */
	mark = (end + ARENA_SKEW + page - 1) / page * page - ARENA_SKEW;
	if (mark > JOBS_ARENA)
		mark = JOBS_ARENA;
	upto = mark;
	/* Nor those on huge pages (arena_bulk()); huge_lo > ARENA_SKEW. */
	if (huge_on && upto > huge_lo - ARENA_SKEW)
		upto = huge_lo - ARENA_SKEW;
	if (!populate_refused && upto > off) {
		present_calls++;
		if (buf_present(arena + off, arena + upto) == -1)
			populate_refused = 1;
	}
	arena_present = mark;
}

/* Gives the mapping back, with no job in the ring. */
static void
unmap(void)
{
	arena_present = 0;
	huge_on = 0;
	if (map != NULL) {
		UNPOISON(arena, JOBS_ARENA);	/* the next mapping's */
		(void)munmap(map, MAP_SIZE);
	}
	map = NULL;
	pool = NULL;
}

/* The entry of the ring at index i (< JOBS_RING). */
static struct job *
entry(unsigned i)
{
	return (struct job *)(void *)(ring + (size_t)i * entry_size);
}

static int mapped(void);

int
jobs_init(void (*run)(struct job *), unsigned max, size_t size)
{
	if (size < sizeof(struct job) || size > JOBS_ENTRY_MAX)
		return -1;
	/* Each entry starts aligned for whatever the caller's struct holds. */
	size = (size + _Alignof(max_align_t) - 1) / _Alignof(max_align_t) *
	    _Alignof(max_align_t);
	if ((ring_count > 0 || nworkers > 0 || arena_kept > 0) &&
	    size != entry_size)
		return -1;	/* the ring, arena or pool is in use */
	if (size != entry_size)
		unmap();	/* the next mapping is made of the new size */
	entry_size = size;
	run_job = run;
	if (max < 1)
		max = 1;
	if (max > JOBS_MAX_WORKERS)
		max = JOBS_MAX_WORKERS;
	max_workers = max;
	thread_err = 0;
	thread_err_workers = 0;
	no_more_workers = 0;
	/*
	 * Mapped now, so that no job made later can fail for want of it; its
	 * pages are touched only by jobs.
	 */
	return mapped();
}

void
jobs_on_start(void (*start)(void))
{
	on_start = start;
}

unsigned
jobs_max_workers(void)
{
	return max_workers;
}

int
jobs_thread_error(unsigned *made)
{
	*made = thread_err_workers;
	return thread_err;
}

static int
mapped(void)
{
	void *p;

	if (map != NULL)
		return 0;
	/* Whole huge pages in the arena from the map's start (arena_bulk()). */
	arena_huge = buf_huge_size();
	if (arena_huge != 0 && (arena_huge > ARENA_END ||
	    ARENA_END % arena_huge != 0))
		arena_huge = 0;
	if ((p = buf_map_aligned(MAP_SIZE, 0, arena_huge)) == NULL)
		return -1;
	if (arena_huge != 0 && (uintptr_t)p % arena_huge != 0)
		arena_huge = 0;	/* mapped without the margin for it */
	/* A run past the arena's end faults rather than reach the ring. */
	if (mprotect((uint8_t *)p + ARENA_END, ARENA_GUARD, PROT_NONE) ==
	    -1) {
		(void)munmap(p, MAP_SIZE);
		return -1;
	}
	map = p;
	arena = map + ARENA_SKEW;
	ring = map + ARENA_END + ARENA_GUARD;
	/* RING_BYTES is a multiple of max_align_t's alignment. */
	pool = (struct pool *)(void *)(ring + RING_BYTES);
	POISON(arena, JOBS_ARENA);
	return 0;
}

/*
 * Where size arena bytes (a multiple of ARENA_ALIGN) would go, and what
 * they would take (*chargep): size, and before it the room skipped at the
 * arena's end when they start over at 0 (there when the room left is too
 * short, or for a small job once end is past the soft end: jobs.h).
 * SIZE_MAX when they do not fit now.  The free bytes are a ring too: free
 * = JOBS_ARENA - arena_used of them from end on.  Whatever the state, the
 * offset returned is d bytes into them, d + size <= free, and off + size
 * <= JOBS_ARENA: the bytes lie inside the arena and inside its free
 * bytes.  That is checked here, where the offset is computed.
 */
static size_t
arena_place(size_t size, size_t *chargep)
{
	size_t end, free, off, d;

	*chargep = 0;
	if (size == 0)
		return 0;
	if (arena_beg >= JOBS_ARENA || arena_used > JOBS_ARENA ||
	    size > JOBS_ARENA)
		return SIZE_MAX;
	free = JOBS_ARENA - arena_used;
	end = (arena_beg + arena_used) % JOBS_ARENA;
	off = JOBS_ARENA - end >= size ? end : 0;
	if (size <= JOBS_SMALL && end >= JOBS_SOFT_END && size <= free &&
	    JOBS_ARENA - end <= free - size)
		off = 0;	/* the bytes before the soft end suffice */
	d = (off + JOBS_ARENA - end) % JOBS_ARENA;
	if (d > free || size > free - d || off > JOBS_ARENA - size)
		return SIZE_MAX;
	*chargep = d + size;
	return off;
}

static size_t
aligned(size_t size)
{
	return (size + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN;
}

int
jobs_room(size_t size)
{
	size_t charge;

	if (ring_count == JOBS_RING || size > JOBS_ARENA)
		return 0;
	return arena_place(aligned(size), &charge) != SIZE_MAX;
}

struct job *
jobs_new(size_t size)
{
	struct job *j;
	size_t off, charge;
	int bulk = size >= BUF_BULK;	/* as asked, before the alignment */

	if (ring_count == JOBS_RING || size > JOBS_ARENA || mapped() == -1)
		return NULL;
	size = aligned(size);
	if ((off = arena_place(size, &charge)) == SIZE_MAX)
		return NULL;
	arena_used += charge;
	j = entry((ring_head + ring_count) % JOBS_RING);
	memset(j, 0, entry_size);
	j->arena_off = off;
	j->arena_size = size;
	j->arena_charge = charge;
	j->buf = size > 0 ? arena + off : NULL;
	if (size > 0) {
		UNPOISON(j->buf, size);
		if (bulk)
			arena_bulk(off + size);
		make_present(off, size);
	}
	ring_count++;
	return j;
}

/* The job ends: the worker lets the loop know, waking it if it sleeps. */
static void
finished(struct job *j)
{
	uint64_t one = 1;

	atomic_store_explicit(&j->finished, 1, memory_order_release);
	atomic_fetch_add(&unseen, 1);
	if (atomic_exchange(&asleep, 0) == 0)
		return;
	while (write(efd, &one, sizeof one) == -1 && errno == EINTR)
		;
}

/* The queue's head, j, is taken off it: no run of it begins any more. */
static void
unqueue(struct job *j)
{
	queue_head = (queue_head + 1) % JOBS_RING;
	queue_count--;
	j->closed = 1;
}

static void *
worker(void *arg)
{
	struct job *j;

	(void)arg;
	if (on_start != NULL)
		on_start();
	(void)pthread_mutex_lock(&lock);
	for (;;) {
		while (queue_count == 0 && !stopping) {
			nidle++;
			(void)pthread_mutex_unlock(&lock);
			while (sem_wait(&work) == -1 && errno == EINTR)
				;
			(void)pthread_mutex_lock(&lock);
			nwoken--;
		}
		if (queue_count == 0)
			break;	/* stopping, and nothing left */
		j = pool->queue[queue_head];
		if (++j->begun >= j->runs)
			unqueue(j);
		j->running++;
		(void)pthread_mutex_unlock(&lock);
		run_job(j);
		if (j->runs > 1) {
			(void)pthread_mutex_lock(&lock);
			if (--j->running > 0 || !j->closed)
				continue;	/* another run ends it */
			(void)pthread_mutex_unlock(&lock);
		}
		finished(j);
		(void)pthread_mutex_lock(&lock);
	}
	(void)pthread_mutex_unlock(&lock);
	return NULL;
}

/* A worker could not be started (error e): noted; returns -1. */
static int
worker_failed(int e)
{
	if (thread_err == 0) {
		thread_err = e != 0 ? e : EAGAIN;
		thread_err_workers = nworkers;
	}
	no_more_workers = 1;
	return -1;
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
		return worker_failed(errno);
	if (!work_made) {
		if (sem_init(&work, 0, 0) == -1)
			return worker_failed(errno);
		work_made = 1;
	}
	st = mmap(NULL, STACK_GUARD + WORKER_STACK, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
	if (st == MAP_FAILED)
		return worker_failed(errno);
	if (mprotect(st, STACK_GUARD, PROT_NONE) == -1 ||
	    pthread_attr_init(&attr) != 0) {
		r = errno;
		(void)munmap(st, STACK_GUARD + WORKER_STACK);
		return worker_failed(r);
	}
	(void)pthread_attr_setstack(&attr, (uint8_t *)st + STACK_GUARD,
	    WORKER_STACK);
	(void)sigfillset(&all);
	/* A call off the sandbox's list traps with a report, not a kill. */
	(void)sigdelset(&all, SIGSYS);
	(void)pthread_sigmask(SIG_SETMASK, &all, &old);
	r = pthread_create(&pool->workers[nworkers], &attr, worker, NULL);
	(void)pthread_sigmask(SIG_SETMASK, &old, NULL);
	(void)pthread_attr_destroy(&attr);
	if (r != 0) {
		(void)munmap(st, STACK_GUARD + WORKER_STACK);
		return worker_failed(r);
	}
	pool->stacks[nworkers++] = st;
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
jobs_share(struct job *j, unsigned runs)
{
	j->runs = runs;
}

void
jobs_no_more(struct job *j)
{
	if (!j->queued)
		return;	/* run here, whole */
	(void)pthread_mutex_lock(&lock);
	if (!j->closed && queue_count > 0 && pool->queue[queue_head] == j)
		unqueue(j);
	(void)pthread_mutex_unlock(&lock);
}

void
jobs_start(struct job *j)
{
	unsigned runs = j->runs > 1 ? j->runs : 1, wake = 0;
	int alone;

	(void)pthread_mutex_lock(&lock);
	/*
	 * Workers for the jobs queued and this one's runs, as far as idle
	 * ones (woken or not) do not take them.
	 */
	for (unsigned k = 0; k < runs &&
	    nidle + nwoken + k < queue_count + runs &&
	    nworkers < max_workers && !no_more_workers && pool != NULL; k++)
		if (add_worker() == -1)
			break;
	alone = nworkers == 0;
	if (!alone) {
		j->runs = runs;
		pool->queue[(queue_head + queue_count) % JOBS_RING] = j;
		queue_count++;
		j->queued = 1;
		nrunning++;
		wake = nidle < runs ? nidle : runs;
		nidle -= wake;
		nwoken += wake;
	}
	(void)pthread_mutex_unlock(&lock);
	/* Busy workers take it when they come back for the next. */
	while (wake-- > 0)
		(void)sem_post(&work);
	/* No thread to be had: slower, still right. */
	if (alone)
		jobs_run_here(j);
}

unsigned
jobs_collect(void)
{
	unsigned n = 0;
	struct job *j;

	if (nrunning == 0 || atomic_load(&unseen) == 0)
		return 0;
	(void)atomic_exchange(&unseen, 0);
	for (unsigned i = 0; i < ring_count; i++) {
		j = entry((ring_head + i) % JOBS_RING);
		if (j->queued && !j->done && atomic_load_explicit(&j->finished,
		    memory_order_acquire)) {
			j->done = 1;
			n++;
		}
	}
	nrunning -= n;
	return n;
}

struct job *
jobs_head(void)
{
	if (ring_count == 0 || !entry(ring_head)->done)
		return NULL;
	return entry(ring_head);
}

/* The oldest n bytes in use go back. */
static void
give_back(size_t n)
{
	arena_used -= n;
	arena_beg = arena_used == 0 ? 0 : (arena_beg + n) % JOBS_ARENA;
}

void
jobs_retire(void)
{
	struct job *j = entry(ring_head);

	if (ring_count == 0 || !j->done)
		return;
	/*
	 * The oldest bytes in use past those kept are what it took: they go
	 * back, or are kept too, behind the kept ones.
	 */
	if (j->keep || arena_kept > 0) {
		arena_kept += j->arena_charge;
	} else {
		if (j->arena_size > 0)
			POISON(arena + j->arena_off, j->arena_size);
		give_back(j->arena_charge);
	}
	ring_head = (ring_head + 1) % JOBS_RING;
	if (--ring_count == 0)
		ring_head = 0;
}

int
jobs_release(void)
{
	size_t first;

	if (arena_kept == 0)
		return 0;
	/* They run from arena_beg, maybe past the arena's end to its start. */
	first = JOBS_ARENA - arena_beg < arena_kept ? JOBS_ARENA - arena_beg :
	    arena_kept;
	POISON(arena + arena_beg, first);
	POISON(arena, arena_kept - first);
	give_back(arena_kept);
	arena_kept = 0;
	return 1;
}

int
jobs_kept(void)
{
	return arena_kept > 0;
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
	return entry((ring_head + i) % JOBS_RING);
}

int
jobs_sleep(void)
{
	int fd = -1;

	if (nrunning == 0 || efd == -1)
		return -1;
	atomic_store(&asleep, 1);
	if (atomic_load(&unseen) == 0)
		fd = efd;
	else
		atomic_store(&asleep, 0);
	return fd;
}

void
jobs_woke(int readable)
{
	uint64_t v;

	atomic_store(&asleep, 0);
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
	unsigned wake;

	if (ring_count > 0 || arena_kept > 0)
		return;
	if (nworkers > 0) {
		(void)pthread_mutex_lock(&lock);
		stopping = 1;
		wake = nidle;
		nwoken += nidle;
		nidle = 0;
		(void)pthread_mutex_unlock(&lock);
		while (wake-- > 0)
			(void)sem_post(&work);
		for (unsigned i = 0; i < nworkers; i++) {
			(void)pthread_join(pool->workers[i], NULL);
			(void)munmap(pool->stacks[i],
			    STACK_GUARD + WORKER_STACK);
			pool->stacks[i] = NULL;
		}
		nworkers = 0;
		stopping = 0;
	}
	no_more_workers = 0;	/* the next burst tries again */
	if (efd != -1) {
		(void)close(efd);
		efd = -1;
	}
	if (map != NULL) {
		(void)madvise(map, ARENA_END, MADV_DONTNEED);
		arena_present = 0;
		if (huge_on)
			(void)buf_huge(map, ARENA_END, 0);
		huge_on = 0;
		(void)madvise(ring, RING_BYTES + sizeof(struct pool),
		    MADV_DONTNEED);
	}
}

#ifdef SFTP_FUZZ
void
jobs_free(void)
{
	/*
	 * Every job done before any is retired: a given-up call may still be
	 * running, in a job's bytes.
	 */
	while (nrunning > 0)
		jobs_wait();
	while (ring_count > 0)
		jobs_retire();
	(void)jobs_release();
	jobs_idle();
	unmap();
}
#endif
