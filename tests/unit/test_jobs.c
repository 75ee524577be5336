/*
 * Unit tests of the worker pool (jobs.c): jobs come back in the order they
 * were made, a loop that sleeps is always woken when a job finishes (the
 * sleep must not miss a job that finishes just before it), a loop that
 * does not sleep makes the workers write nothing, and an idle pool holds no
 * thread and no descriptor.
 */
#include <sys/types.h>

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../jobs.c"
#include "unit.h"

/* Jobs run by the tests, and the most at once. */
#define NJOBS		3000
#define BATCH		48
/* A wake-up later than this was lost (ms). */
#define LOST_MS		5000

/* A job's work: sleep j->len microseconds, then say which job it was. */
static void
run_sleep(struct job *j)
{
	struct timespec ts = { 0, (long)j->len * 1000 };

	if (j->len > 0)
		(void)nanosleep(&ts, NULL);
	j->n = (ssize_t)j->id;
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
	j->n = (ssize_t)j->id;
}

static void
set_gate(int open)
{
	(void)pthread_mutex_lock(&gate_lock);
	gate_open = open;
	(void)pthread_cond_broadcast(&gate_cv);
	(void)pthread_mutex_unlock(&gate_lock);
}

/* Waits until a worker finished j (as jobs.c sees it, under its lock). */
static void
wait_finished(const struct job *j)
{
	struct timespec ts = { 0, 100000 };
	int f;

	for (;;) {
		(void)pthread_mutex_lock(&lock);
		f = j->finished;
		(void)pthread_mutex_unlock(&lock);
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
		assert_int_equal(j->id, *next);
		assert_int_equal(j->n, (ssize_t)*next);
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
		j->id = (*made)++;
		j->len = max_us > 0 ? next_rand(seed) % (max_us + 1) : 0;
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

	(void)jobs_init(run_sleep, max);
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
	(void)jobs_init(run_gated, 2);
	set_gate(0);
	j = jobs_new(0);
	assert_non_null(j);
	j->id = 0;
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
	j->id = 1;
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
	(void)jobs_init(run_sleep, 8);
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

/* jobs_wait() returns once a job finished, and at once with none running. */
static void
test_jobs_wait_returns_when_one_finished(void **state)
{
	uint32_t made = 0, next = 0;
	unsigned seed = 5;

	(void)state;
	(void)jobs_init(run_sleep, 8);
	jobs_wait();		/* nothing runs */
	while (next < NJOBS) {
		start_batch(&made, &seed, 50);
		jobs_wait();
		retire_done(&next);
	}
	jobs_wait();
	jobs_idle();
}

/* Idle: no worker, no descriptor, nothing queued; work starts them again. */
static void
test_jobs_idle_holds_no_thread_or_descriptor(void **state)
{
	uint32_t made = 0, next = 0;
	unsigned seed = 9;

	(void)state;
	(void)jobs_init(run_sleep, 8);
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

int
main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_jobs_sleeping_loop_is_always_woken),
		cmocka_unit_test(test_jobs_quick_jobs_never_lose_a_wakeup),
		cmocka_unit_test(
		    test_jobs_finished_before_or_during_sleep_wakes),
		cmocka_unit_test(test_jobs_busy_loop_costs_workers_no_write),
		cmocka_unit_test(test_jobs_wait_returns_when_one_finished),
		cmocka_unit_test(test_jobs_idle_holds_no_thread_or_descriptor),
	};

	if (unit_args(argc, argv) == -1)
		return 2;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
