/*
 * Unit tests of the worker pool (jobs.c): jobs come back in the order they
 * were made, a loop that sleeps is always woken when a job finishes (the
 * sleep must not miss a job that finishes just before it), a loop that
 * does not sleep makes the workers write nothing, and an idle pool holds no
 * thread and no descriptor.  A shared job runs in several workers at once
 * and ends once.  The arena's placements are checked against a
 * model of its free bytes over millions of random steps; small jobs keep
 * to its first 4 MiB.
 */
#include <sys/types.h>

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <pthread.h>
#include <semaphore.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

/*
 * jobs.c's lock, counted: by the loop's thread (this one) and by the
 * workers; and its semaphore's tokens, posted and taken.  Only jobs.c's own
 * calls are counted: the macros end with it.
 */
static pthread_t loop_thread;
static _Atomic unsigned loop_locks, worker_locks, tokens_posted, tokens_taken;

static int
counted_lock(pthread_mutex_t *m)
{
	if (pthread_equal(pthread_self(), loop_thread))
		atomic_fetch_add(&loop_locks, 1);
	else
		atomic_fetch_add(&worker_locks, 1);
	return pthread_mutex_lock(m);
}
static int
counted_post(sem_t *s)
{
	atomic_fetch_add(&tokens_posted, 1);
	return sem_post(s);
}

static int
counted_wait(sem_t *s)
{
	int r = sem_wait(s);

	if (r == 0)
		atomic_fetch_add(&tokens_taken, 1);
	return r;
}
#define pthread_mutex_lock(m)	counted_lock(m)
#define sem_post(s)		counted_post(s)
#define sem_wait(s)		counted_wait(s)
#include "../../jobs.c"
#undef pthread_mutex_lock
#undef sem_post
#undef sem_wait
#include "unit.h"

/* Jobs run by the tests, and the most at once. */
#define NJOBS		3000
#define BATCH		48
/* A wake-up later than this was lost (ms). */
#define LOST_MS		5000

/*
 * The tests' struct of a job: jobs.c's part first, then what they give it
 * (jobs.c knows none of it).
 */
struct tjob {
	struct job job;
	uint32_t id;
	size_t len;		/* run_sleep(): microseconds */
	ssize_t n;		/* what the run function said */
};
#define T(j)	((struct tjob *)(void *)(j))

/* A job's work: sleep len microseconds, then say which job it was. */
static void
run_sleep(struct job *j)
{
	struct timespec ts = { 0, (long)T(j)->len * 1000 };

	if (T(j)->len > 0)
		(void)nanosleep(&ts, NULL);
	T(j)->n = (ssize_t)T(j)->id;
}

/* A job's work that waits until the test opens the gate. */
static pthread_mutex_t gate_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cv = PTHREAD_COND_INITIALIZER;
static int gate_open;

static void
run_gated(struct job *j)
{
	(void)pthread_mutex_lock(&gate_lock);
	while (!gate_open)
		(void)pthread_cond_wait(&gate_cv, &gate_lock);
	(void)pthread_mutex_unlock(&gate_lock);
	T(j)->n = (ssize_t)T(j)->id;
}

static void
set_gate(int open)
{
	(void)pthread_mutex_lock(&gate_lock);
	gate_open = open;
	(void)pthread_cond_broadcast(&gate_cv);
	(void)pthread_mutex_unlock(&gate_lock);
}

/* Waits until a worker finished j (as jobs.c sees it). */
static void
wait_finished(const struct job *j)
{
	struct timespec ts = { 0, 100000 };
	int f;

	for (;;) {
		f = atomic_load(&j->finished);
		if (f)
			return;
		(void)nanosleep(&ts, NULL);
	}
}

/* A small random number, the same series on every run. */
static unsigned
next_rand(unsigned *seed)
{
	*seed = *seed * 1103515245u + 12345u;
	return (*seed >> 16) & 0x7fff;
}

/* Hands back every job at the front that is done, checking the order. */
static void
retire_done(uint32_t *next)
{
	struct job *j;

	while ((j = jobs_head()) != NULL) {
		assert_int_equal(T(j)->id, *next);
		assert_int_equal(T(j)->n, (ssize_t)*next);
		(*next)++;
		jobs_retire();
	}
}

/* Waits for every job in the ring and hands each back. */
static void
drain(uint32_t *next)
{
	while (jobs_count() > 0) {
		jobs_wait();
		retire_done(next);
	}
}

/* Starts up to BATCH jobs of durations from 0 to max_us microseconds. */
static void
start_batch(uint32_t *made, unsigned *seed, unsigned max_us)
{
	struct job *j;

	while (*made < NJOBS && jobs_count() < BATCH) {
		j = jobs_new(64);
		assert_non_null(j);
		T(j)->id = (*made)++;
		T(j)->len = max_us > 0 ? next_rand(seed) % (max_us + 1) : 0;
		jobs_start(j);
	}
}

/* Waits as the loop does; fails when a finished job did not wake it. */
static void
sleep_as_the_loop(void)
{
	struct pollfd pfd;
	int n;

	if ((pfd.fd = jobs_sleep()) == -1)
		return;		/* one finished: collect it */
	pfd.events = POLLIN;
	pfd.revents = 0;
	n = poll(&pfd, 1, LOST_MS);
	if (n == 0) {
		print_error("asleep %d ms with %u jobs running: a wake-up "
		    "was lost\n", LOST_MS, jobs_running());
		fail();
	}
	jobs_woke(pfd.revents != 0);
}

/*
 * NJOBS jobs of 0 to max_us microseconds on at most max workers, run as the
 * loop runs them: start, collect, hand back, sleep while any runs.
 */
static void
run_as_the_loop(unsigned max, unsigned seed, unsigned max_us)
{
	uint32_t made = 0, next = 0;

	(void)jobs_init(run_sleep, max, sizeof(struct tjob));
	while (next < NJOBS) {
		start_batch(&made, &seed, max_us);
		(void)jobs_collect();
		retire_done(&next);
		if (jobs_running() > 0)
			sleep_as_the_loop();
	}
	assert_int_equal(jobs_count(), 0);
	jobs_idle();
}

static void
test_jobs_sleeping_loop_is_always_woken(void **state)
{
	(void)state;
	run_as_the_loop(16, 1, 200);
}

/* Jobs that finish at once, the loop asleep at every turn: the races. */
static void
test_jobs_quick_jobs_never_lose_a_wakeup(void **state)
{
	(void)state;
	run_as_the_loop(4, 7, 0);
}

/*
 * The two sides of the race, one at a time: a job that finished before the
 * loop goes to sleep keeps it awake (no descriptor, or one already
 * readable); one that finishes while it sleeps wakes it.
 */
static void
test_jobs_finished_before_or_during_sleep_wakes(void **state)
{
	struct pollfd pfd;
	struct job *j;
	uint32_t next = 0;

	(void)state;
	(void)jobs_init(run_gated, 2, sizeof(struct tjob));
	set_gate(0);
	j = jobs_new(0);
	assert_non_null(j);
	T(j)->id = 0;
	jobs_start(j);
	assert_int_equal(jobs_collect(), 0);
	set_gate(1);
	wait_finished(j);
	if ((pfd.fd = jobs_sleep()) != -1) {
		pfd.events = POLLIN;
		assert_int_equal(poll(&pfd, 1, 0), 1);
		jobs_woke(1);
	}
	assert_int_equal(jobs_collect(), 1);
	retire_done(&next);

	set_gate(0);
	j = jobs_new(0);
	assert_non_null(j);
	T(j)->id = 1;
	jobs_start(j);
	assert_int_equal(jobs_collect(), 0);
	pfd.fd = jobs_sleep();
	assert_int_not_equal(pfd.fd, -1);
	pfd.events = POLLIN;
	set_gate(1);
	assert_int_equal(poll(&pfd, 1, LOST_MS), 1);
	jobs_woke(1);
	assert_int_equal(jobs_collect(), 1);
	retire_done(&next);
	assert_int_equal(next, 2);
	jobs_idle();
}

/* A loop that never sleeps: the workers never write the descriptor. */
static void
test_jobs_busy_loop_costs_workers_no_write(void **state)
{
	uint32_t made = 0, next = 0;
	unsigned seed = 3;
	uint64_t v;

	(void)state;
	(void)jobs_init(run_sleep, 8, sizeof(struct tjob));
	start_batch(&made, &seed, 100);
	assert_int_not_equal(efd, -1);
	while (jobs_count() > 0) {
		(void)jobs_collect();
		retire_done(&next);
	}
	assert_int_equal(next, BATCH);
	errno = 0;
	assert_int_equal(read(efd, &v, sizeof v), -1);
	assert_int_equal(errno, EAGAIN);
	jobs_idle();
}

/*
 * The lock guards the queue alone: the loop takes it once per job it hands
 * off, a worker once per job it takes, once as it starts and once each
 * time a token wakes it; the end of a job, collecting it, and the loop's
 * sleep and wake-up take none.  Each token posted is taken once, and a
 * job wakes at most one worker.
 */
static void
test_jobs_lock_once_per_job_each_side(void **state)
{
	uint32_t made = 0, next = 0;
	unsigned seed = 11, threads;

	(void)state;
	(void)jobs_init(run_sleep, 8, sizeof(struct tjob));
	loop_thread = pthread_self();
	atomic_store(&loop_locks, 0);
	atomic_store(&worker_locks, 0);
	atomic_store(&tokens_posted, 0);
	atomic_store(&tokens_taken, 0);
	while (next < NJOBS) {
		start_batch(&made, &seed, 50);
		jobs_wait();
		retire_done(&next);
	}
	drain(&next);
	threads = nworkers;
	jobs_idle();	/* joins them: their counts are all in */
	assert_true(threads > 1);
	/* jobs_idle() takes it once to stop the workers. */
	assert_int_equal(atomic_load(&loop_locks), NJOBS + 1);
	assert_int_equal(atomic_load(&tokens_taken),
	    atomic_load(&tokens_posted));
	/* One per job, and one for each worker to stop. */
	assert_true(atomic_load(&tokens_posted) <= NJOBS + threads);
	assert_int_equal(atomic_load(&worker_locks),
	    NJOBS + threads + atomic_load(&tokens_taken));
}

/* jobs_wait() returns once a job finished, and at once with none running. */
static void
test_jobs_wait_returns_when_one_finished(void **state)
{
	uint32_t made = 0, next = 0;
	unsigned seed = 5;

	(void)state;
	(void)jobs_init(run_sleep, 8, sizeof(struct tjob));
	jobs_wait();		/* nothing runs */
	while (next < NJOBS) {
		start_batch(&made, &seed, 50);
		jobs_wait();
		retire_done(&next);
	}
	jobs_wait();
	jobs_idle();
}

/*
 * A shared job's work (len 1; others do nothing): SHARED_ITEMS items, each
 * claimed by one run.  A run
 * counts itself in and waits at the gate (when shared_gated), so that the
 * test sees how many run at once; then it claims items until none is
 * left, and says so (jobs_no_more()).
 */
#define SHARED_ITEMS	40
static _Atomic unsigned shared_next, shared_in, shared_runs;
static _Atomic unsigned shared_done[SHARED_ITEMS];
static int shared_gated;

static void
run_shared(struct job *j)
{
	unsigned i;

	T(j)->n = (ssize_t)T(j)->id;
	if (T(j)->len == 0)
		return;		/* not the shared job: nothing to claim */
	atomic_fetch_add(&shared_runs, 1);
	atomic_fetch_add(&shared_in, 1);
	if (shared_gated)
		run_gated(j);
	while ((i = atomic_fetch_add(&shared_next, 1)) < SHARED_ITEMS)
		atomic_fetch_add(&shared_done[i], 1);
	jobs_no_more(j);
	atomic_fetch_sub(&shared_in, 1);
}

static void
shared_reset(int gated)
{
	atomic_store(&shared_next, 0);
	atomic_store(&shared_in, 0);
	atomic_store(&shared_runs, 0);
	for (unsigned i = 0; i < SHARED_ITEMS; i++)
		atomic_store(&shared_done[i], 0);
	shared_gated = gated;
}

/* Waits until n runs are in run_shared() at once, or LOST_MS. */
static unsigned
wait_shared_in(unsigned n)
{
	struct timespec ts = { 0, 100000 };

	for (int i = 0; i < LOST_MS * 10 && atomic_load(&shared_in) < n; i++)
		(void)nanosleep(&ts, NULL);
	return atomic_load(&shared_in);
}

/*
 * jobs_share(): up to runs workers run one job at once; it is finished
 * once, when the last run ends, and not before; each item is claimed once;
 * once a run found none left no further run begins; and the jobs queued
 * behind it run and come back in order.
 */
/* A job of no bytes, shared by up to runs (0: not the shared job). */
static struct job *
shared_job(uint32_t id, unsigned runs)
{
	struct job *j = jobs_new(0);

	assert_non_null(j);
	T(j)->id = id;
	T(j)->len = runs > 0;
	if (runs > 0)
		jobs_share(j, runs);
	return j;
}

static void
assert_items_claimed_once(void)
{
	for (unsigned i = 0; i < SHARED_ITEMS; i++)
		assert_int_equal(atomic_load(&shared_done[i]), 1);
}

static void
test_jobs_shared_job_runs_at_once_ends_once(void **state)
{
	struct job *j, *k;
	uint32_t next = 0;

	(void)state;
	(void)jobs_init(run_shared, 8, sizeof(struct tjob));
	/* Four runs at once, held at the gate: not finished meanwhile. */
	shared_reset(1);
	set_gate(0);
	j = shared_job(0, 4);
	jobs_start(j);
	k = shared_job(1, 0);
	jobs_start(k);	/* behind it: a fifth worker runs it */
	wait_finished(k);
	assert_int_equal(wait_shared_in(4), 4);
	assert_int_equal(atomic_load(&j->finished), 0);
	assert_int_equal(atomic_load(&shared_runs), 4);
	set_gate(1);
	drain(&next);
	assert_int_equal(next, 2);
	assert_int_equal(j->begun, 4);
	assert_items_claimed_once();

	/* Up to 100 runs, but none begins once the items are all claimed. */
	shared_reset(0);
	j = shared_job(2, 100);
	jobs_start(j);
	for (uint32_t id = 3; id < 3 + BATCH; id++)
		jobs_start(shared_job(id, 0));
	drain(&next);
	assert_int_equal(next, 3 + BATCH);
	/* Each run that began found items, but the last of each worker. */
	assert_true(j->begun <= SHARED_ITEMS + 8);
	assert_int_equal(atomic_load(&shared_runs), j->begun);
	assert_items_claimed_once();

	/* No worker at all: one run here does every item. */
	shared_reset(0);
	jobs_idle();
	jobs_run_here(shared_job(3 + BATCH, 4));
	assert_int_equal(atomic_load(&shared_runs), 1);
	assert_items_claimed_once();
	retire_done(&next);
	jobs_idle();
}

/* Idle: no worker, no descriptor, nothing queued; work starts them again. */
/*
 * A job's arena bytes are in memory when jobs_new() hands them out, before
 * anything writes them, the first time they are taken; given back when
 * the session is idle, and made present again then.
 */
static void
test_jobs_arena_bytes_made_present(void **state)
{
	struct job *a, *b;
	int first, second, idle, again;

	(void)state;
	if (!unit_populate_works())
		skip();		/* the pages fault, as without it */
	(void)jobs_init(run_sleep, 1, sizeof(struct tjob));
	a = jobs_new(261120);
	b = jobs_new(32768);
	assert_non_null(a);
	assert_non_null(b);
	first = unit_resident(a->buf, 261120);
	second = unit_resident(b->buf, 32768);
	jobs_mark_done(a);
	jobs_mark_done(b);
	jobs_retire();
	jobs_retire();
	jobs_idle();
	idle = arena_present == 0 && !unit_resident(arena + 8192, 65536);
	a = jobs_new(65536);
	assert_non_null(a);
	again = unit_resident(a->buf, 65536);
	jobs_mark_done(a);
	jobs_retire();
	jobs_idle();
	/* Checked once the ring is empty again, for the tests after. */
	assert_true(first);
	assert_true(second);
	assert_true(idle);
	assert_true(again);
}

/* The end, in the arena, of the page that arena byte at - 1 lies in. */
static size_t
page_end(size_t at)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);

	return (at + ARENA_SKEW + page - 1) / page * page - ARENA_SKEW;
}

/*
 * A job that starts below the mark and ends past it moves the mark to the
 * end of its last page, no further: a mark carried past it once ran into
 * the guard page at the arena's end, the advice failed (EINVAL) and was
 * never asked again in the session.
 */
static void
test_jobs_arena_present_mark_ends_at_the_job(void **state)
{
	(void)state;
	if (!unit_populate_works())
		skip();		/* refused, or taken for nothing */
	(void)jobs_init(run_sleep, 1, sizeof(struct tjob));
	arena_present = 0;
	populate_refused = 0;
	make_present(0, 100000);
	assert_int_equal(arena_present, page_end(100000));
	make_present(50000, 100000);
	assert_int_equal(arena_present, page_end(150000));
	make_present(JOBS_ARENA - 300000, 200000);
	make_present(JOBS_ARENA - 150000, 150000);
	assert_int_equal(arena_present, JOBS_ARENA);
	assert_int_equal(populate_refused, 0);
	jobs_idle();
	assert_int_equal(arena_present, 0);
}

/*
 * Small jobs that end in a page already made present ask nothing: a
 * pipeline of LSTATs, whose paths take 64 to 128 bytes each, asked the
 * kernel once per request.  A page holds 32 jobs of 128 bytes: 1,000 of
 * them make one call per page they reach, and each one's bytes are in
 * memory.
 */
static void
test_jobs_small_jobs_one_call_per_page(void **state)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	unsigned long before;
	struct job *j;
	int resident = 1;

	(void)state;
	if (!unit_populate_works())
		skip();		/* refused, or taken for nothing */
	(void)jobs_init(run_sleep, 1, sizeof(struct tjob));
	jobs_idle();
	before = present_calls;
	/* 64 in the ring at once, as a pipeline keeps them: one run of bytes. */
	for (unsigned i = 0; i < 1000; i++) {
		j = jobs_new(128);
		assert_non_null(j);
		resident = resident && unit_resident(j->buf, 128);
		jobs_mark_done(j);
		if (jobs_count() > 64)
			jobs_retire();
	}
	while (jobs_count() > 0)
		jobs_retire();
	assert_int_equal(arena_present, page_end(1000 * 128));
	assert_int_equal(present_calls - before,
	    (page_end(1000 * 128) + ARENA_SKEW) / page);
	jobs_idle();
	assert_true(resident);
}

/*
 * The arena is mapped on huge page boundaries and advised against them,
 * so that small jobs keep small pages; a job of BUF_BULK bytes or more
 * advises for them the whole huge pages past its own bytes and past every
 * byte a job has reached since the last idle (so a lone READ keeps small
 * pages), whose bytes are not made present in the loop; the idle advises
 * against them again.
 */
static void
test_jobs_bulk_job_takes_huge_pages(void **state)
{
	struct job *a, *a1, *b, *c[10];
	int small, short_of, next, before, idle, lone, past, left = 1, again;
	size_t h;

	(void)state;
	if (buf_huge_size() == 0 || !unit_huge_advice_works())
		skip();		/* no huge pages here, or none that show */
	(void)jobs_init(run_sleep, 1, sizeof(struct tjob));
	if ((h = arena_huge) == 0)
		skip();		/* larger than the arena */
	assert_int_equal((uintptr_t)map % h, 0);
	a = jobs_new(32768);
	assert_non_null(a);
	small = unit_vm_flag(map, "nh") == 1 && unit_vm_flag(map, "hg") == 0 &&
	    !huge_on;
	/* Short of BUF_BULK as asked, though aligned up to it. */
	a1 = jobs_new(BUF_BULK - 1);
	assert_non_null(a1);
	short_of = !huge_on && a1->arena_size >= BUF_BULK;
	b = jobs_new(BUF_BULK);
	assert_non_null(b);
	next = huge_on && huge_lo == h && unit_vm_flag(map + h, "hg") == 1 &&
	    unit_vm_flag(map + ARENA_END - 1, "hg") == 1;
	before = unit_vm_flag(map, "nh") == 1;
	jobs_mark_done(a);
	jobs_mark_done(a1);
	jobs_mark_done(b);
	jobs_retire();
	jobs_retire();
	jobs_retire();
	jobs_idle();
	idle = !huge_on && unit_vm_flag(map + h, "nh") == 1 &&
	    unit_vm_flag(map + h, "hg") == 0;
	/* A burst that starts with one bulk READ: its own page stays small. */
	c[0] = jobs_new(261120);
	assert_non_null(c[0]);
	lone = huge_on && huge_lo == h && unit_vm_flag(map, "nh") == 1 &&
	    unit_vm_flag(map + h, "hg") == 1;
	/* The jobs past huge_lo are left to their worker's fault. */
	for (unsigned i = 1; i < 10; i++)
		assert_non_null(c[i] = jobs_new(261120));
	past = (size_t)(c[9]->buf - map) >= h;
	if (unit_populate_works())
		left = unit_resident(c[0]->buf, 261120) &&
		    !unit_resident(c[9]->buf, 4096);
	for (unsigned i = 0; i < 10; i++) {
		jobs_mark_done(c[i]);
		jobs_retire();
	}
	jobs_idle();
	again = unit_vm_flag(map + h, "nh") == 1 && !huge_on;
	/* Checked once the ring is empty again, for the tests after. */
	assert_true(small);
	assert_true(short_of);
	assert_true(next);
	assert_true(before);
	assert_true(idle);
	assert_true(lone);
	assert_true(past);
	assert_true(left);
	assert_true(again);
}

/* jobs_on_start(): each worker calls it once, in its own thread. */
static _Atomic unsigned starts;
static _Atomic int started_in_loop;

static void
count_start(void)
{
	if (pthread_equal(pthread_self(), loop_thread))
		atomic_store(&started_in_loop, 1);
	atomic_fetch_add(&starts, 1);
}

static void
test_jobs_on_start_once_per_worker(void **state)
{
	uint32_t made = 0, next = 0;
	unsigned seed = 3, threads;

	(void)state;
	(void)jobs_init(run_sleep, 8, sizeof(struct tjob));
	loop_thread = pthread_self();
	atomic_store(&starts, 0);
	atomic_store(&started_in_loop, 0);
	jobs_on_start(count_start);
	start_batch(&made, &seed, 40);
	drain(&next);
	threads = nworkers;
	jobs_idle();	/* joins them */
	jobs_on_start(NULL);
	assert_true(threads > 0);
	assert_int_equal(atomic_load(&starts), threads);
	assert_int_equal(atomic_load(&started_in_loop), 0);
}

static void
test_jobs_idle_holds_no_thread_or_descriptor(void **state)
{
	uint32_t made = 0, next = 0;
	unsigned seed = 9;

	(void)state;
	(void)jobs_init(run_sleep, 8, sizeof(struct tjob));
	start_batch(&made, &seed, 20);
	jobs_idle();		/* jobs in the ring: does nothing */
	assert_int_not_equal(nworkers, 0);
	drain(&next);
	jobs_idle();
	assert_int_equal(nworkers, 0);
	assert_int_equal(efd, -1);
	assert_int_equal(jobs_sleep(), -1);
	made = next = 0;
	start_batch(&made, &seed, 20);
	assert_int_not_equal(nworkers, 0);
	drain(&next);
	jobs_idle();
}

/*
 * The arena against a model.  The model knows the jobs in the ring, in
 * order, and where each one's bytes lie; from that alone it says where
 * bytes are free.  A job whose bytes start over at the arena's start holds
 * the run it skipped at the end too, until it retires.  Every placement
 * must lie inside the arena and in bytes the model has free; a refusal is
 * right only when the ring is full or neither the run after the newest
 * bytes in use nor the run at the arena's start is long enough (the ring
 * places bytes in request order, so it may use no other), and a small job
 * whose place would start past the soft end must start over at 0 when the
 * run there is long enough.  Each job's first and last bytes carry its
 * number, checked when it retires: bytes given to two jobs at once show.
 * A job retired with keep set leaves the ring but keeps its bytes, and so
 * does every job retired after it, until jobs_release(): the model keeps
 * them, oldest first, and checks their marks again at the release.
 */
struct model_job {
	uint32_t id;
	size_t off, size;	/* size 0: no bytes */
	size_t skip;		/* from here to the arena's end: held (0: none) */
};

/* The kept jobs, then the ring's. */
#define MODEL_MAX	(2 * JOBS_RING)
static struct model_job model[MODEL_MAX];
static unsigned model_head, model_count, model_kept;
/* What the steps reached: start-overs, refusals, bytes behind none. */
static unsigned long model_wraps, model_refused, model_behind_none,
    model_small_wraps, model_kept_refused;

static size_t
model_aligned(size_t size)
{
	return (size + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN;
}

/* The free run from off up to the next bytes in use, or the arena's end. */
static size_t
model_run(size_t off)
{
	size_t next = JOBS_ARENA;
	struct model_job *m;

	for (unsigned i = 0; i < model_count; i++) {
		m = &model[(model_head + i) % MODEL_MAX];
		if (m->size == 0)
			continue;
		if (m->off <= off && off < m->off + m->size)
			return 0;
		if (m->skip != 0 && m->skip <= off)
			return 0;
		if (m->off >= off && m->off < next)
			next = m->off;
		if (m->skip != 0 && m->skip >= off && m->skip < next)
			next = m->skip;
	}
	return next - off;
}

/* Whether the model has a place for size bytes now. */
/* Where the newest bytes in use end (0: none, or at the arena's end). */
static size_t
model_last(void)
{
	size_t last = 0;
	struct model_job *m;

	for (unsigned i = 0; i < model_count; i++) {
		m = &model[(model_head + i) % MODEL_MAX];
		if (m->size > 0)
			last = m->off + m->size;
	}
	return last == JOBS_ARENA ? 0 : last;
}

static int
model_fits(size_t size)
{
	if (model_count - model_kept == JOBS_RING)
		return 0;
	if (size == 0)
		return 1;
	return model_run(model_last()) >= size || model_run(0) >= size;
}

static void
mark(uint8_t *p, uint32_t id)
{
	memcpy(p, &id, sizeof id);
}

static uint32_t
marked(const uint8_t *p)
{
	uint32_t id;

	memcpy(&id, p, sizeof id);
	return id;
}

/* One new job of size bytes, checked against the model. */
static void
model_new(size_t size, uint32_t id)
{
	size_t asize = model_aligned(size), off, last = model_last();
	int fits = model_fits(asize), room = jobs_room(size);
	/* A small job past the soft end starts over when it fits there. */
	int over = asize > 0 && asize <= JOBS_SMALL &&
	    last >= JOBS_SOFT_END && model_run(0) >= asize;
	struct model_job *m;
	struct job *j;

	if (room != fits) {
		print_error("step %u: jobs_room(%zu) says %d, the model %d\n",
		    (unsigned)id, size, room, fits);
		fail();
	}
	j = jobs_new(size);
	if ((j != NULL) != fits) {
		print_error("step %u: jobs_new(%zu) %s, the model says it %s\n",
		    (unsigned)id, size, j != NULL ? "placed it" : "refused",
		    fits ? "fits" : "does not fit");
		fail();
	}
	if (j == NULL) {
		model_refused++;
		/* Room there would be, were the kept bytes given back. */
		if (model_kept > 0 && asize <= JOBS_ARENA / 2)
			model_kept_refused++;
		return;
	}
	T(j)->id = id;
	m = &model[(model_head + model_count) % MODEL_MAX];
	m->id = id;
	m->size = asize;
	m->off = 0;
	m->skip = 0;
	model_count++;
	if (asize == 0) {
		assert_null(j->buf);
		return;
	}
	assert_non_null(j->buf);
	assert_true(j->buf >= arena && j->buf <= arena + JOBS_ARENA);
	off = (size_t)(j->buf - arena);
	if (off % ARENA_ALIGN != 0 || asize > JOBS_ARENA - off) {
		print_error("step %u: %zu bytes placed at %zu, past the "
		    "arena's end\n", (unsigned)id, asize, off);
		fail();
	}
	model_count--;	/* not yet its own bytes: are they free? */
	if (model_run(off) < asize) {
		print_error("step %u: %zu bytes placed at %zu, over bytes in "
		    "use\n", (unsigned)id, asize, off);
		fail();
	}
	model_count++;
	if (over && off != 0) {
		print_error("step %u: %zu bytes placed at %zu, past the soft "
		    "end, though they fit at 0\n", (unsigned)id, asize, off);
		fail();
	}
	if (over)
		model_small_wraps++;
	m->off = off;
	if (off == 0 && last != 0) {
		m->skip = last;	/* it started over */
		model_wraps++;
	}
	if (model_last() == off + asize && model_count > 1 &&
	    model_run(0) + model_run(off + asize) + asize == JOBS_ARENA)
		model_behind_none++;	/* every other job has no bytes */
	mark(j->buf, id);
	mark(j->buf + asize - sizeof id, id);
}

/* A job's bytes still carry its marks. */
static void
model_check_marks(const struct model_job *m)
{
	const uint8_t *p = arena + m->off;

	if (m->size == 0)
		return;
	if (marked(p) != m->id ||
	    marked(p + m->size - sizeof m->id) != m->id) {
		print_error("job %u: its bytes were given to job %u\n",
		    (unsigned)m->id, (unsigned)marked(p));
		fail();
	}
}

/* The oldest job in the ring retires (its bytes kept: keep), checked. */
static void
model_retire_keep(int keep)
{
	struct model_job *m = &model[(model_head + model_kept) % MODEL_MAX];
	struct job *j = jobs_at(0);

	assert_true(model_count > model_kept);
	assert_int_equal(T(j)->id, m->id);
	if (m->size > 0)
		assert_ptr_equal(j->buf, arena + m->off);
	model_check_marks(m);
	jobs_mark_done(j);
	j->keep = keep;
	jobs_retire();
	/* Its bytes stay (a job without bytes has none to keep). */
	if ((keep && m->size > 0) || model_kept > 0) {
		model_kept++;
	} else {
		model_head = (model_head + 1) % MODEL_MAX;
		model_count--;
	}
	assert_int_equal(jobs_count(), model_count - model_kept);
}

static void
model_retire(void)
{
	model_retire_keep(0);
}

/* The kept bytes go back, each job's checked first. */
static void
model_release(void)
{
	int any = 0;
	struct model_job *m;

	for (unsigned i = 0; i < model_kept; i++) {
		m = &model[(model_head + i) % MODEL_MAX];
		model_check_marks(m);
		any |= m->size > 0;
	}
	assert_int_equal(jobs_release(), any);
	model_head = (model_head + model_kept) % MODEL_MAX;
	model_count -= model_kept;
	model_kept = 0;
}

static void
model_reset(void)
{
	while (model_count > model_kept)
		model_retire();
	model_release();
	model_head = 0;
	jobs_idle();
}

/* A size as requests ask for them: none, a path, a READ, a listing, huge. */
static size_t
model_size(unsigned *seed)
{
	unsigned r = next_rand(seed) % 100;
	size_t big = (size_t)next_rand(seed) << 15 | next_rand(seed);

	if (r < 35)
		return 0;
	if (r < 55)
		return 1 + next_rand(seed) % 4096;
	if (r < 70)
		return 255 * 1024;
	if (r < 95)
		return 1 + big % (256 * 1024);
	return 1 + big % JOBS_ARENA;
}

/*
 * Random steps: new jobs of every size, the oldest retiring at a rate
 * that changes every few hundred steps, so that the arena fills, empties,
 * wraps and is left with only jobs without bytes in the ring.  Some
 * retire with their bytes kept (as a READ whose reply is written out from
 * them), and the kept bytes are given back now and then, as a flush does.
 */
static void
test_jobs_arena_matches_its_model(void **state)
{
	const char *e = getenv("JOBS_MODEL_STEPS");
	unsigned long steps = e != NULL ? strtoul(e, NULL, 10) : 2000000;
	unsigned seed = 11, rate = 50, keeps = 0, r;

	(void)state;
	(void)jobs_init(run_sleep, 1, sizeof(struct tjob));
	for (unsigned long i = 0; i < steps; i++) {
		if (i % 512 == 0) {
			rate = 10 + next_rand(&seed) % 80;
			keeps = next_rand(&seed) % 3 * 20;	/* 0, 20, 40 */
		}
		r = next_rand(&seed) % 100;
		if (model_kept > 0 && (r < 10 || model_kept == JOBS_RING))
			model_release();
		else if (model_count > model_kept && r < rate)
			model_retire_keep(next_rand(&seed) % 100 < keeps);
		else
			model_new(model_size(&seed), (uint32_t)i);
	}
	model_reset();
	/* The steps reached every state that matters. */
	assert_true(model_wraps > 0);
	assert_true(model_refused > 0);
	assert_true(model_behind_none > 0);
	assert_true(model_small_wraps > 0);
	assert_true(model_kept_refused > 0);
}

/*
 * A pipeline of 64 READs of 32 KiB, as a client keeps at 1 ms, goes round
 * the arena's first 4 MiB only: no page past them is ever touched.  Large
 * READs (255 KiB) have the whole arena: 32 at once, all through.
 */
static void
test_jobs_arena_small_jobs_keep_to_its_start(void **state)
{
	size_t most = 0, end;
	struct job *j;

	(void)state;
	(void)jobs_init(run_sleep, 1, sizeof(struct tjob));
	for (unsigned i = 0; i < 20000; i++) {
		if (jobs_count() == 64) {
			jobs_mark_done(jobs_at(0));
			jobs_retire();
		}
		assert_non_null(j = jobs_new(32 * 1024));
		end = (size_t)(j->buf - arena) + 32 * 1024;
		most = end > most ? end : most;
	}
	assert_true(most <= JOBS_SOFT_END + 32 * 1024);
	while (jobs_count() > 0) {
		jobs_mark_done(jobs_at(0));
		jobs_retire();
	}
	for (unsigned i = 0; i < 20000; i++) {
		while (jobs_room(255 * 1024))
			assert_non_null(jobs_new(255 * 1024));
		/* A start-over leaves at most one job's room unused. */
		assert_true(jobs_count() >= JOBS_ARENA / (255 * 1024) - 1);
		if (i == 0)
			assert_int_equal(jobs_count(), 32);
		jobs_mark_done(jobs_at(0));
		jobs_retire();
	}
	while (jobs_count() > 0) {
		jobs_mark_done(jobs_at(0));
		jobs_retire();
	}
	jobs_idle();
}

/*
 * The case that broke the arena: it wraps while the ring holds only jobs
 * without bytes, then a job placed after the wrap retires while a later
 * one holds bytes.  Every placement stays inside, over free bytes.
 */
static void
test_jobs_arena_wrap_behind_jobs_without_bytes(void **state)
{
	uint32_t id = 0;

	(void)state;
	(void)jobs_init(run_sleep, 1, sizeof(struct tjob));
	model_new(3 * 1024 * 1024, id++);
	model_new(0, id++);
	model_retire();		/* only a job without bytes is left */
	model_new(2 * 1024 * 1024, id++);
	model_new(512 * 1024, id++);
	model_new(0, id++);
	model_retire();
	model_retire();		/* the first after the wrap */
	model_new(3 * 1024 * 1024, id++);	/* 2 MiB free at most */
	model_new(JOBS_ARENA, id++);
	model_new(2 * 1024 * 1024, id++);
	model_new(1024 * 1024, id++);
	model_new(64, id++);
	model_reset();
}

/*
 * 32 READs of 255 KiB fill the arena.  The oldest retires with its bytes
 * kept (its reply is written from them), then the next without: neither's
 * room is given to a new job until jobs_release(), and an idle pool keeps
 * their pages.  Then the first's bytes are the new job's.
 */
static void
test_jobs_kept_bytes_wait_for_release(void **state)
{
	struct job *j;
	uint8_t *first;

	(void)state;
	(void)jobs_init(run_sleep, 1, sizeof(struct tjob));
	while (jobs_room(255 * 1024))
		assert_non_null(jobs_new(255 * 1024));
	assert_int_equal(jobs_count(), 32);
	first = jobs_at(0)->buf;
	memset(first, 0x5a, 255 * 1024);
	jobs_mark_done(jobs_at(0));
	jobs_at(0)->keep = 1;
	jobs_retire();
	jobs_mark_done(jobs_at(0));
	jobs_retire();
	assert_int_equal(jobs_count(), 30);
	assert_false(jobs_room(255 * 1024));
	assert_null(jobs_new(255 * 1024));
	/* Idle: every job gone, but the kept pages are not given back. */
	while (jobs_count() > 0) {
		jobs_mark_done(jobs_at(0));
		jobs_retire();
	}
	jobs_idle();
	for (size_t i = 0; i < 255 * 1024; i++)
		if (first[i] != 0x5a)
			fail_msg("byte %zu of the kept bytes changed", i);
	assert_false(jobs_room(255 * 1024));
	assert_int_equal(jobs_release(), 1);
	assert_int_equal(jobs_release(), 0);
	assert_non_null(j = jobs_new(255 * 1024));
	assert_ptr_equal(j->buf, first);
	jobs_mark_done(j);
	jobs_retire();
	jobs_idle();
}

/* The guard: a touch of the byte after the arena faults. */
static sigjmp_buf faulted;

static void
on_fault(int sig)
{
	(void)sig;
	siglongjmp(faulted, 1);
}

static void
test_jobs_arena_guard_faults(void **state)
{
	struct sigaction sa, old;
	volatile uint8_t *past;
	volatile int hit = 0;
	struct job *j;

	(void)state;
	(void)jobs_init(run_sleep, 1, sizeof(struct tjob));
	j = jobs_new(JOBS_ARENA);
	assert_non_null(j);
	assert_ptr_equal(j->buf, arena);
	past = j->buf + JOBS_ARENA;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_fault;
	assert_int_equal(sigaction(SIGSEGV, &sa, &old), 0);
	if (sigsetjmp(faulted, 1) == 0)
		(void)*past;
	else
		hit = 1;
	assert_int_equal(sigaction(SIGSEGV, &old, NULL), 0);
	assert_true(hit);
	jobs_mark_done(j);
	jobs_retire();
	jobs_idle();
}

/*
 * The caller's struct is the size it said: each job's is zeroed whole and
 * its own (filling one does not reach the next), and the size is kept
 * while jobs are in the ring.
 */
struct bigjob {
	struct job job;
	uint8_t fill[300];
};

static void
test_jobs_entries_are_the_callers_size(void **state)
{
	struct bigjob *j[3];

	(void)state;
	assert_int_equal(jobs_init(run_sleep, 1, sizeof(struct tjob)), 0);
	assert_int_equal(jobs_init(run_sleep, 1, sizeof(struct job) - 1), -1);
	assert_int_equal(jobs_init(run_sleep, 1, JOBS_ENTRY_MAX + 1), -1);
	assert_int_equal(jobs_init(run_sleep, 1, sizeof(struct bigjob)), 0);
	for (unsigned round = 0; round < 2; round++) {
		for (unsigned i = 0; i < 3; i++) {
			j[i] = (struct bigjob *)(void *)jobs_new(0);
			assert_non_null(j[i]);
			for (size_t k = 0; k < sizeof j[i]->fill; k++)
				assert_int_equal(j[i]->fill[k], 0);
			memset(j[i]->fill, 0xa5, sizeof j[i]->fill);
		}
		for (unsigned i = 0; i < 3; i++)
			for (size_t k = 0; k < sizeof j[i]->fill; k++)
				assert_int_equal(j[i]->fill[k], 0xa5);
		assert_int_equal(jobs_init(run_sleep, 1, sizeof(struct tjob)),
		    -1);
		for (unsigned i = 0; i < 3; i++) {
			assert_ptr_equal(jobs_at(i), &j[i]->job);
			assert_false(jobs_done(&j[i]->job));
			jobs_mark_done(&j[i]->job);
		}
		for (unsigned i = 0; i < 3; i++)
			jobs_retire();
	}
	assert_int_equal(jobs_init(run_sleep, 1, sizeof(struct tjob)), 0);
	jobs_idle();
}

#ifdef JOBS_ASAN
/* Sanitizer builds: only the bytes of jobs in the ring may be touched. */
static void
test_jobs_arena_free_bytes_are_poisoned(void **state)
{
	struct job *a, *b;

	(void)state;
	(void)jobs_init(run_sleep, 1, sizeof(struct tjob));
	a = jobs_new(100);
	b = jobs_new(0);
	assert_non_null(a);
	assert_non_null(b);
	assert_false(__asan_address_is_poisoned(a->buf));
	assert_false(__asan_address_is_poisoned(a->buf + 99));
	assert_true(__asan_address_is_poisoned(a->buf + 128));
	assert_true(__asan_address_is_poisoned(arena + JOBS_ARENA - 1));
	jobs_mark_done(a);
	jobs_mark_done(b);
	jobs_retire();
	assert_true(__asan_address_is_poisoned(arena));
	jobs_retire();
	jobs_idle();
}
#endif

int
main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_jobs_sleeping_loop_is_always_woken),
		cmocka_unit_test(test_jobs_quick_jobs_never_lose_a_wakeup),
		cmocka_unit_test(
		    test_jobs_finished_before_or_during_sleep_wakes),
		cmocka_unit_test(test_jobs_busy_loop_costs_workers_no_write),
		cmocka_unit_test(test_jobs_lock_once_per_job_each_side),
		cmocka_unit_test(test_jobs_wait_returns_when_one_finished),
		cmocka_unit_test(test_jobs_shared_job_runs_at_once_ends_once),
		cmocka_unit_test(test_jobs_idle_holds_no_thread_or_descriptor),
		cmocka_unit_test(test_jobs_on_start_once_per_worker),
		cmocka_unit_test(test_jobs_arena_bytes_made_present),
		cmocka_unit_test(test_jobs_arena_present_mark_ends_at_the_job),
		cmocka_unit_test(test_jobs_small_jobs_one_call_per_page),
		cmocka_unit_test(test_jobs_bulk_job_takes_huge_pages),
		cmocka_unit_test(test_jobs_arena_matches_its_model),
		cmocka_unit_test(test_jobs_arena_small_jobs_keep_to_its_start),
		cmocka_unit_test(
		    test_jobs_arena_wrap_behind_jobs_without_bytes),
		cmocka_unit_test(test_jobs_kept_bytes_wait_for_release),
		cmocka_unit_test(test_jobs_arena_guard_faults),
		cmocka_unit_test(test_jobs_entries_are_the_callers_size),
#ifdef JOBS_ASAN
		cmocka_unit_test(test_jobs_arena_free_bytes_are_poisoned),
#endif
	};

	if (unit_args(argc, argv) == -1)
		return 2;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
