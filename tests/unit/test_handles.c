/*
 * Unit tests of handles.c: the handle table, lookups by slot and generation,
 * and the limit taken from RLIMIT_NOFILE.  The wire form of a handle is
 * packet.c's, tested in test_packet.c.
 */
#include <sys/types.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* cmocka 1.1.5 needs the four headers above it. */
#include <cmocka.h>

#include "../../handles.c"
#include "unit.h"

/* Slots in the table of most tests. */
#define NSLOTS	4

static int
setup_table(void **state)
{
	struct handle_table *t = malloc(sizeof *t);

	if (t == NULL || handle_table_init(t, NSLOTS) != 0) {
		free(t);
		return -1;
	}
	*state = t;
	return 0;
}

static int
teardown_table(void **state)
{
	struct handle_table *t = *state;

	handle_table_free(t);
	free(t);
	return 0;
}

/* What a client names a handle by: its slot and generation when handed out. */
struct name {
	uint32_t index;
	uint32_t gen;
};

static struct name
name_of(const struct handle *h)
{
	struct name n = { h->index, h->gen };

	return n;
}

static struct handle *
lookup(struct handle_table *t, struct name n, enum handle_kind kind)
{
	return handle_lookup(t, n.index, n.gen, kind);
}

static void
test_handle_table_init_zero_slots_fails(void **state)
{
	struct handle_table t;

	(void)state;
	assert_int_equal(handle_table_init(&t, 0), -1);
}

static void
test_handle_table_init_over_cap_fails(void **state)
{
	struct handle_table t;

	(void)state;
	assert_int_equal(handle_table_init(&t, HANDLE_CAP + 1), -1);
	assert_int_equal(handle_table_init(&t, UINT32_MAX), -1);
	assert_int_equal(handle_table_init(&t, HANDLE_CAP), 0);
	assert_int_equal(t.nslots, HANDLE_CAP);
	handle_table_free(&t);
}

static void
test_handle_new_across_chunks(void **state)
{
	/* Three chunks and one slot of a fourth. */
	const uint32_t n = 3 * HANDLE_CHUNK + 1;
	struct handle_table t;
	struct handle **h;

	(void)state;
	h = calloc(n, sizeof *h);
	assert_non_null(h);
	assert_int_equal(handle_table_init(&t, n), 0);
	/* Act: every slot, in order. */
	for (uint32_t i = 0; i < n; i++) {
		h[i] = handle_new(&t, i % 3 ? HANDLE_FILE : HANDLE_DIR, "/x");
		assert_non_null(h[i]);
		assert_int_equal(h[i]->index, i);
	}
	assert_null(handle_new(&t, HANDLE_FILE, "/y"));
	/* Check: each is found by its name and by its index. */
	for (uint32_t i = 0; i < n; i++) {
		assert_ptr_equal(lookup(&t, name_of(h[i]), HANDLE_FREE), h[i]);
		assert_ptr_equal(handle_at(&t, i), h[i]);
	}
	/* Act and check: slots on chunk edges come back, newest first. */
	handle_release(&t, h[HANDLE_CHUNK - 1]);
	handle_release(&t, h[HANDLE_CHUNK]);
	handle_release(&t, h[n - 1]);
	assert_null(handle_at(&t, HANDLE_CHUNK));
	assert_ptr_equal(handle_new(&t, HANDLE_FILE, "/a"), h[n - 1]);
	assert_ptr_equal(handle_new(&t, HANDLE_FILE, "/b"), h[HANDLE_CHUNK]);
	assert_ptr_equal(handle_new(&t, HANDLE_FILE, "/c"),
	    h[HANDLE_CHUNK - 1]);
	assert_null(handle_new(&t, HANDLE_FILE, "/d"));
	assert_int_equal(h[HANDLE_CHUNK]->gen, 1);
	handle_table_free(&t);
	free(h);
}

static void
test_handle_new_allocates_chunks_as_needed(void **state)
{
	struct handle_table t;

	(void)state;
	assert_int_equal(handle_table_init(&t, HANDLE_CAP), 0);
	/* No slot memory until a handle needs it. */
	for (uint32_t i = 0; i < HANDLE_CAP / HANDLE_CHUNK; i++)
		assert_null(t.chunks[i]);
	for (uint32_t i = 0; i < HANDLE_CHUNK; i++)
		assert_non_null(handle_new(&t, HANDLE_FILE, "/x"));
	assert_non_null(t.chunks[0]);
	assert_null(t.chunks[1]);
	/* Reuse of a released slot takes no new chunk either. */
	handle_release(&t, handle_at(&t, 5));
	assert_non_null(handle_new(&t, HANDLE_FILE, "/x"));
	assert_null(t.chunks[1]);
	assert_non_null(handle_new(&t, HANDLE_FILE, "/x"));
	assert_non_null(t.chunks[1]);
	assert_null(t.chunks[2]);
	handle_table_free(&t);
}

static void
test_handle_new_in_order(void **state)
{
	struct handle_table *t = *state;
	struct handle *h;
	char path[16];

	for (uint32_t i = 0; i < NSLOTS; i++) {
		(void)snprintf(path, sizeof path, "/file%u", i);
		h = handle_new(t, i % 2 ? HANDLE_DIR : HANDLE_FILE, path);
		assert_non_null(h);
		assert_int_equal(h->index, i);
		assert_ptr_equal(handle_at(t, i), h);
		assert_int_equal(h->kind, i % 2 ? HANDLE_DIR : HANDLE_FILE);
		assert_string_equal(h->path, path);
		assert_int_equal(h->fd, -1);
		assert_null(h->dir);
		assert_int_equal(t->used, i + 1);
	}
}

static void
test_handle_new_free_kind_is_refused(void **state)
{
	struct handle_table *t = *state;

	assert_null(handle_new(t, HANDLE_FREE, "/x"));
	assert_int_equal(t->used, 0);
	/* No slot was taken: the next handle still gets slot 0. */
	assert_int_equal(handle_new(t, HANDLE_FILE, "/x")->index, 0);
}

static void
test_handle_new_long_path_is_truncated(void **state)
{
	struct handle_table *t = *state;
	struct handle *h;
	char *path;

	path = malloc(PATH_MAX + 10);
	assert_non_null(path);
	memset(path, 'p', PATH_MAX + 9);
	path[PATH_MAX + 9] = '\0';
	h = handle_new(t, HANDLE_FILE, path);
	assert_non_null(h);
	assert_int_equal(strlen(h->path), PATH_MAX - 1);
	assert_memory_equal(h->path, path, PATH_MAX - 1);
	free(path);
}

static void
test_handle_name_slot_and_generation(void **state)
{
	struct handle_table *t = *state;
	struct handle *h;

	assert_non_null(handle_new(t, HANDLE_FILE, "/a"));
	h = handle_new(t, HANDLE_FILE, "/b");
	assert_non_null(h);
	assert_int_equal(h->index, 1);
	assert_int_equal(h->gen, 0);
	/* After a release, the slot comes back with the next generation. */
	handle_release(t, h);
	assert_ptr_equal(handle_new(t, HANDLE_DIR, "/c"), h);
	assert_int_equal(h->index, 1);
	assert_int_equal(h->gen, 1);
}

static void
test_handle_lookup_by_name(void **state)
{
	struct handle_table *t = *state;
	struct name n[NSLOTS];
	struct handle *h[NSLOTS];

	for (uint32_t i = 0; i < NSLOTS; i++) {
		h[i] = handle_new(t, i % 2 ? HANDLE_DIR : HANDLE_FILE, "/x");
		assert_non_null(h[i]);
		n[i] = name_of(h[i]);
	}
	for (uint32_t i = 0; i < NSLOTS; i++) {
		assert_ptr_equal(lookup(t, n[i], HANDLE_FREE), h[i]);
		assert_ptr_equal(lookup(t, n[i], h[i]->kind), h[i]);
	}
}

static void
test_handle_lookup_wrong_kind_is_null(void **state)
{
	struct handle_table *t = *state;
	struct handle *f, *d;

	f = handle_new(t, HANDLE_FILE, "/f");
	d = handle_new(t, HANDLE_DIR, "/d");
	assert_non_null(f);
	assert_non_null(d);
	assert_null(lookup(t, name_of(f), HANDLE_DIR));
	assert_null(lookup(t, name_of(d), HANDLE_FILE));
}

static void
test_handle_lookup_stale_after_release_is_null(void **state)
{
	struct handle_table *t = *state;
	struct name old, cur;
	struct handle *h, *again;

	/* Set up: a handle, its name, then its release. */
	h = handle_new(t, HANDLE_FILE, "/old");
	assert_non_null(h);
	old = name_of(h);
	handle_release(t, h);
	/* Check: the old name names nothing. */
	assert_null(lookup(t, old, HANDLE_FREE));
	assert_null(handle_at(t, 0));
	/* Act: the slot is reused. */
	again = handle_new(t, HANDLE_FILE, "/new");
	assert_ptr_equal(again, h);
	cur = name_of(again);
	/* Check: still nothing under the old name; the new one works. */
	assert_null(lookup(t, old, HANDLE_FREE));
	assert_null(lookup(t, old, HANDLE_FILE));
	assert_ptr_equal(lookup(t, cur, HANDLE_FILE), again);
	assert_int_equal(old.index, cur.index);
	assert_int_not_equal(old.gen, cur.gen);
}

static void
test_handle_lookup_free_slot_current_generation_is_null(void **state)
{
	struct handle_table *t = *state;
	struct handle *h;

	h = handle_new(t, HANDLE_FILE, "/x");
	assert_non_null(h);
	handle_release(t, h);
	/* The generation the slot would have next, forged. */
	assert_null(handle_lookup(t, 0, h->gen, HANDLE_FREE));
}

static void
test_handle_lookup_index_out_of_range_is_null(void **state)
{
	static const uint32_t idx[] = { 1, NSLOTS - 1, NSLOTS, NSLOTS + 1,
		0x80000000, UINT32_MAX };
	struct handle_table *t = *state;

	assert_non_null(handle_new(t, HANDLE_FILE, "/x"));
	/* Slots never handed out, slots past the table, and what packet.c
	 * reads a handle string of the wrong length as. */
	for (size_t i = 0; i < sizeof idx / sizeof idx[0]; i++)
		assert_null(handle_lookup(t, idx[i], 0, HANDLE_FREE));
}

static void
test_handle_lookup_unallocated_chunk_is_null(void **state)
{
	static const uint32_t idx[] = { 1, HANDLE_CHUNK - 1, HANDLE_CHUNK,
		2 * HANDLE_CHUNK + 5, 3 * HANDLE_CHUNK - 1 };
	struct handle_table t;

	(void)state;
	/* Set up: one handle open, so one chunk of three allocated. */
	assert_int_equal(handle_table_init(&t, 3 * HANDLE_CHUNK), 0);
	assert_non_null(handle_new(&t, HANDLE_FILE, "/x"));
	/* Check: slots inside the table but never handed out. */
	for (size_t i = 0; i < sizeof idx / sizeof idx[0]; i++) {
		assert_null(handle_lookup(&t, idx[i], 0, HANDLE_FREE));
		assert_null(handle_at(&t, idx[i]));
	}
	handle_table_free(&t);
}

static void
test_handle_lookup_wrong_generation_is_null(void **state)
{
	static const uint32_t gens[] = { 1, 2, 0x80000000, UINT32_MAX };
	struct handle_table *t = *state;

	assert_non_null(handle_new(t, HANDLE_FILE, "/x"));
	for (size_t i = 0; i < sizeof gens / sizeof gens[0]; i++)
		assert_null(handle_lookup(t, 0, gens[i], HANDLE_FREE));
	assert_non_null(handle_lookup(t, 0, 0, HANDLE_FREE));
}

static void
test_handle_new_exhausted_table_is_null(void **state)
{
	struct handle_table *t = *state;
	struct handle *h[NSLOTS], *more;

	/* Set up: every slot in use. */
	for (uint32_t i = 0; i < NSLOTS; i++) {
		h[i] = handle_new(t, HANDLE_FILE, "/x");
		assert_non_null(h[i]);
	}
	/* Check: n + 1 fails. */
	assert_null(handle_new(t, HANDLE_FILE, "/y"));
	assert_null(handle_new(t, HANDLE_DIR, "/y"));
	assert_int_equal(t->used, NSLOTS);
	/* Act and check: after one release, exactly one more. */
	handle_release(t, h[2]);
	more = handle_new(t, HANDLE_DIR, "/z");
	assert_ptr_equal(more, h[2]);
	assert_null(handle_new(t, HANDLE_FILE, "/y"));
	assert_int_equal(t->used, NSLOTS);
}

static void
test_handle_release_reuses_last_freed_first(void **state)
{
	struct handle_table *t = *state;
	struct handle *h[NSLOTS];

	for (uint32_t i = 0; i < NSLOTS; i++) {
		h[i] = handle_new(t, HANDLE_FILE, "/x");
		assert_non_null(h[i]);
	}
	handle_release(t, h[0]);
	handle_release(t, h[3]);
	handle_release(t, h[1]);
	assert_int_equal(t->used, 1);
	assert_ptr_equal(handle_new(t, HANDLE_FILE, "/a"), h[1]);
	assert_ptr_equal(handle_new(t, HANDLE_FILE, "/b"), h[3]);
	assert_ptr_equal(handle_new(t, HANDLE_FILE, "/c"), h[0]);
	assert_null(handle_new(t, HANDLE_FILE, "/d"));
}

static void
test_handle_release_many_times_bumps_generation(void **state)
{
	struct handle_table *t = *state;
	struct name prev;
	struct handle *h;

	h = handle_new(t, HANDLE_FILE, "/x");
	assert_non_null(h);
	prev = name_of(h);
	for (uint32_t i = 1; i <= 1000; i++) {
		handle_release(t, h);
		h = handle_new(t, HANDLE_FILE, "/x");
		assert_int_equal(h->index, 0);
		assert_int_equal(h->gen, i);
		assert_null(lookup(t, prev, HANDLE_FREE));
		assert_ptr_equal(lookup(t, name_of(h), HANDLE_FREE), h);
		prev = name_of(h);
	}
}

static void
release_twice(void *arg)
{
	struct handle_table *t = arg;
	struct handle *h;

	h = handle_new(t, HANDLE_FILE, "/x");
	handle_release(t, h);
	handle_release(t, h);
}

static void
test_handle_release_free_slot_aborts(void **state)
{
	struct handle_table *t = *state;
	pid_t pid;
	int status;

	/* A broken invariant is a bug: the child must die of SIGABRT. */
	pid = fork();
	assert_true(pid != -1);
	if (pid == 0) {
		(void)signal(SIGABRT, SIG_DFL);
		release_twice(t);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status));
	assert_int_equal(WTERMSIG(status), SIGABRT);
}

static void
test_handle_at_open_handles_only(void **state)
{
	struct handle_table *t = *state;
	struct handle *a, *b;

	a = handle_new(t, HANDLE_FILE, "/a");
	b = handle_new(t, HANDLE_DIR, "/b");
	assert_non_null(a);
	assert_non_null(b);
	assert_ptr_equal(handle_at(t, 0), a);
	assert_ptr_equal(handle_at(t, 1), b);
	/* Never used. */
	assert_null(handle_at(t, 2));
	assert_null(handle_at(t, NSLOTS - 1));
	/* Released. */
	handle_release(t, a);
	assert_null(handle_at(t, 0));
	assert_ptr_equal(handle_at(t, 1), b);
}

/*
 * handle_limit() with the soft limit set to soft, and the hard one raised
 * to it if need be.  Returns -1 when the system does not allow it.
 */
static int
limit_with_soft(rlim_t soft, uint32_t *limit)
{
	struct rlimit saved, rl;
	int r;

	assert_int_equal(getrlimit(RLIMIT_NOFILE, &saved), 0);
	rl = saved;
	rl.rlim_cur = soft;
	if (saved.rlim_max != RLIM_INFINITY &&
	    (soft == RLIM_INFINITY || soft > saved.rlim_max))
		rl.rlim_max = soft;
	if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
		return -1;
	*limit = handle_limit(5);
	r = setrlimit(RLIMIT_NOFILE, &saved);
	assert_int_equal(r, 0);
	return 0;
}

static void
test_handle_limit_follows_rlimit_nofile(void **state)
{
	uint32_t limit;

	(void)state;
	assert_int_equal(limit_with_soft(50, &limit), 0);
	assert_int_equal(limit, 45);
	assert_int_equal(limit_with_soft(1024, &limit), 0);
	assert_int_equal(limit, 1019);
}

/* The descriptors kept besides the handles come out of the budget. */
static void
test_handle_limit_leaves_the_kept_descriptors(void **state)
{
	struct rlimit saved, rl;
	uint32_t limit;

	(void)state;
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &saved), 0);
	rl = saved;
	rl.rlim_cur = 100;
	if (saved.rlim_max != RLIM_INFINITY && saved.rlim_max < 100)
		rl.rlim_max = 100;
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &rl), 0);
	limit = handle_limit(74);
	assert_int_equal(handle_limit(99), 1);
	assert_int_equal(handle_limit(100), 1);
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &saved), 0);
	assert_int_equal(limit, 26);
}

static void
test_handle_limit_small_rlimit_is_at_least_one(void **state)
{
	static const rlim_t softs[] = { 1, 5, 6 };
	uint32_t limit;

	(void)state;
	for (size_t i = 0; i < sizeof softs / sizeof softs[0]; i++) {
		assert_int_equal(limit_with_soft(softs[i], &limit), 0);
		assert_int_equal(limit, 1);
	}
	assert_int_equal(limit_with_soft(7, &limit), 0);
	assert_int_equal(limit, 2);
}

static void
test_handle_limit_large_rlimit_is_capped(void **state)
{
	uint32_t limit;

	(void)state;
	limit = handle_limit(5);
	assert_true(limit >= 1 && limit <= HANDLE_CAP);
	/*
	 * Limits above the hard one need privilege; each case runs where the
	 * system lets the limit go that high.
	 */
	if (limit_with_soft(HANDLE_CAP + 4, &limit) == 0)
		assert_int_equal(limit, HANDLE_CAP - 1);
	if (limit_with_soft(HANDLE_CAP + 5, &limit) == 0)
		assert_int_equal(limit, HANDLE_CAP);
	if (limit_with_soft(HANDLE_CAP + 6, &limit) == 0)
		assert_int_equal(limit, HANDLE_CAP);
	if (limit_with_soft(RLIM_INFINITY, &limit) == 0)
		assert_int_equal(limit, HANDLE_CAP);
}

int
main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_handle_table_init_zero_slots_fails),
		cmocka_unit_test(test_handle_table_init_over_cap_fails),
		cmocka_unit_test(test_handle_new_across_chunks),
		cmocka_unit_test(test_handle_new_allocates_chunks_as_needed),
		cmocka_unit_test_setup_teardown(test_handle_new_in_order,
		    setup_table, teardown_table),
		cmocka_unit_test_setup_teardown(
		    test_handle_new_free_kind_is_refused, setup_table,
		    teardown_table),
		cmocka_unit_test_setup_teardown(
		    test_handle_new_long_path_is_truncated, setup_table,
		    teardown_table),
		cmocka_unit_test_setup_teardown(test_handle_name_slot_and_generation,
		    setup_table, teardown_table),
		cmocka_unit_test_setup_teardown(
		    test_handle_lookup_by_name, setup_table,
		    teardown_table),
		cmocka_unit_test_setup_teardown(
		    test_handle_lookup_wrong_kind_is_null, setup_table,
		    teardown_table),
		cmocka_unit_test_setup_teardown(
		    test_handle_lookup_stale_after_release_is_null, setup_table,
		    teardown_table),
		cmocka_unit_test_setup_teardown(
		    test_handle_lookup_free_slot_current_generation_is_null,
		    setup_table, teardown_table),
		cmocka_unit_test_setup_teardown(
		    test_handle_lookup_index_out_of_range_is_null, setup_table,
		    teardown_table),
		cmocka_unit_test(test_handle_lookup_unallocated_chunk_is_null),
		cmocka_unit_test_setup_teardown(
		    test_handle_lookup_wrong_generation_is_null, setup_table,
		    teardown_table),
		cmocka_unit_test_setup_teardown(
		    test_handle_new_exhausted_table_is_null, setup_table,
		    teardown_table),
		cmocka_unit_test_setup_teardown(
		    test_handle_release_reuses_last_freed_first, setup_table,
		    teardown_table),
		cmocka_unit_test_setup_teardown(
		    test_handle_release_many_times_bumps_generation,
		    setup_table, teardown_table),
		cmocka_unit_test_setup_teardown(
		    test_handle_release_free_slot_aborts, setup_table,
		    teardown_table),
		cmocka_unit_test_setup_teardown(
		    test_handle_at_open_handles_only, setup_table,
		    teardown_table),
		cmocka_unit_test(test_handle_limit_follows_rlimit_nofile),
		cmocka_unit_test(test_handle_limit_leaves_the_kept_descriptors),
		cmocka_unit_test(
		    test_handle_limit_small_rlimit_is_at_least_one),
		cmocka_unit_test(test_handle_limit_large_rlimit_is_capped),
	};

	if (unit_args(argc, argv) != 0)
		return 2;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
