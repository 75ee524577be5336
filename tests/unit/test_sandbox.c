/*
 * Unit tests of the sandbox's seccomp filter (sandbox.c): the program that
 * build_filter() generates for the architecture this test is built for is
 * run in a small classic-BPF interpreter, as the kernel would run it, on
 * every row of the list, on the calls the protocol suites make the server
 * make there (tests/unit/sandbox_calls_ARCH.h, recorded with
 * tests/unit/record-sandbox-calls.sh), and on what must be refused.
 * make check-cross runs it for each architecture, under qemu-user where
 * this kernel cannot run it: qemu-user cannot load a filter, but the
 * interpreter needs none.  A failure names the call.
 */
/* sys-gnu.c, which sandbox.c calls, wants the GNU names. */
#define _GNU_SOURCE

#include <sys/types.h>
#include <sys/mman.h>
#include <sys/socket.h>

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../sandbox.c"
#include "../../sys-gnu.c"
#include "../../log.c"
#include "unit.h"

#ifdef HAVE_FILTER

/* The pid the filter is built for: kill() is allowed at it alone. */
#define PID	4242

/* struct seccomp_data, as <linux/seccomp.h>. */
struct sd {
	int32_t nr;
	uint32_t arch;
	uint64_t ip;
	uint64_t args[6];
};

/* The answers to a call off the list and to arguments refused. */
#define OFF_LIST	(RET_TRAP | TRAP_OFF_LIST)
#define BAD_ARGS	(RET_TRAP | TRAP_ARGUMENTS)

static struct prog prog;

/*
 * Before each test: the generated filter, as the server installs it with
 * its handler, without -r and with -A, whose rows are the table's (the
 * tests of other programs build their own).
 */
static int
default_program(void **state)
{
	(void)state;
	build_filter(&prog, PID, 0, 1, 1);
	return 0;
}

/*
 * Runs the program on d, as the kernel does: each instruction must be one
 * that the emitter writes, each load inside struct seccomp_data and each
 * jump inside the program, which must end in a return.
 */
static uint32_t
run(const struct sd *d)
{
	uint32_t a = 0;
	size_t pc = 0, steps = 0;

	assert_true(prog.len > 0 && prog.len <= 4096);
	for (;;) {
		const struct sb_insn *in;

		assert_true(pc < prog.len);
		assert_true(steps++ <= prog.len);	/* jumps go forward */
		in = &prog.insn[pc++];
		switch (in->code) {
		case BPF_LD_ABS:
			assert_true(in->k % 4 == 0 && in->k + 4 <= sizeof *d);
			memcpy(&a, (const char *)d + in->k, 4);
			break;
		case BPF_AND:
			a &= in->k;
			break;
		case BPF_JEQ:
			pc += a == in->k ? in->jt : in->jf;
			break;
		case BPF_JSET:
			pc += (a & in->k) != 0 ? in->jt : in->jf;
			break;
		case BPF_RET:
			return in->k;
		default:
			fail_msg("instruction %zu: code 0x%x is not one the "
			    "emitter writes", pc - 1, in->code);
		}
	}
}

/* The filter's answer to call nr with args (missing ones 0). */
static uint32_t
answer(long nr, const uint64_t *args)
{
	struct sd d;

	memset(&d, 0, sizeof d);
	d.nr = (int32_t)nr;
	d.arch = SB_AUDIT_ARCH;
	if (args != NULL)
		memcpy(d.args, args, sizeof d.args);
	return run(&d);
}

static const char *
answer_name(uint32_t r)
{
	if (r == RET_ALLOW)
		return "allowed";
	if (r == RET_ERRNO(EPERM))
		return "EPERM";
	if (r == OFF_LIST)
		return "trapped (off the list)";
	if (r == BAD_ARGS)
		return "trapped (arguments refused)";
	if (r == RET_ERRNO(ENOSYS))
		return "ENOSYS";
	if (r == RET_KILL)
		return "killed";
	return "another answer";
}

/* The call must get want; a failure names it and its arguments. */
static void
expect_answer(const char *what, long nr, const uint64_t *args, uint32_t want)
{
	uint32_t got = answer(nr, args);

	if (got != want)
		fail_msg("%s (number %ld, arguments %#llx %#llx %#llx %#llx "
		    "%#llx): expected %s, got %s", what, nr,
		    args ? (unsigned long long)args[0] : 0ULL,
		    args ? (unsigned long long)args[1] : 0ULL,
		    args ? (unsigned long long)args[2] : 0ULL,
		    args ? (unsigned long long)args[3] : 0ULL,
		    args ? (unsigned long long)args[4] : 0ULL,
		    answer_name(want), answer_name(got));
}

/* Arguments that every check of row r passes. */
static void
passing_args(const struct rule *r, uint64_t *args)
{
	memset(args, 0, 6 * sizeof *args);
	for (size_t i = 0; i < r->nchecks; i++) {
		const struct arg_check *c = &r->checks[i];

		if (c->op == ARG_ONE_OF)
			args[c->arg] = c->values[0];
		else if (c->op == ARG_SELF)
			args[c->arg] = PID;
	}
}

static const char *
kind_name(enum rule_kind k)
{
	return k == R_ALLOW ? "allowed" : k == R_REFUSE ? "refused" :
	    "unknown";
}

static void
test_no_call_is_listed_twice(void **state)
{
	(void)state;
	for (size_t i = 0; i < NRULES; i++)
		for (size_t j = i + 1; j < NRULES; j++)
			if (rules[i].nr == rules[j].nr)
				fail_msg("%s (number %ld) is listed twice: rows "
				    "%zu (%s) and %zu (%s)", rules[i].name,
				    rules[i].nr, i,
				    kind_name(rules[i].kind), j,
				    kind_name(rules[j].kind));
}

static void
test_every_row_names_its_own_number(void **state)
{
	(void)state;
	for (size_t i = 0; i < NRULES; i++) {
		const char *n = sys_name(rules[i].nr);

		if (strcmp(n, rules[i].name) != 0)
			fail_msg("row %zu is named %s, but its number %ld is "
			    "%s's", i, rules[i].name, rules[i].nr, n);
	}
}

static void
test_each_allowed_call_is_allowed(void **state)
{
	uint64_t args[6];

	(void)state;
	for (size_t i = 0; i < NRULES; i++) {
		if (rules[i].kind != R_ALLOW)
			continue;
		passing_args(&rules[i], args);
		expect_answer(rules[i].name, rules[i].nr, args, RET_ALLOW);
	}
}

/* Each refused call, wherever its row sits, with any arguments. */
static void
test_each_refused_call_gets_eperm(void **state)
{
	uint64_t args[6];

	(void)state;
	for (size_t i = 0; i < NRULES; i++) {
		if (rules[i].kind != R_REFUSE)
			continue;
		memset(args, 0, sizeof args);
		expect_answer(rules[i].name, rules[i].nr, args,
		    RET_ERRNO(EPERM));
		args[0] = PID;
		args[1] = args[2] = 1;
		expect_answer(rules[i].name, rules[i].nr, args,
		    RET_ERRNO(EPERM));
	}
}

/*
 * Each call answered as unknown (clone3, for libc to fall back), wherever
 * its row sits: ENOSYS, neither trapped nor logged.
 */
static void
test_each_unknown_call_gets_enosys(void **state)
{
	uint64_t args[6];

	(void)state;
	for (size_t i = 0; i < NRULES; i++) {
		if (rules[i].kind != R_UNKNOWN)
			continue;
		memset(args, 0, sizeof args);
		expect_answer(rules[i].name, rules[i].nr, args,
		    RET_ERRNO(ENOSYS));
	}
}

/*
 * Each checked argument: every listed value passes; values off the list,
 * forbidden bits, high bits of a long and another pid are refused.
 */
static void
test_checked_arguments_refuse_other_values(void **state)
{
	uint64_t args[6], base[6], keep;
	char what[128];

	(void)state;
	for (size_t i = 0; i < NRULES; i++) {
		const struct rule *r = &rules[i];

		if (r->kind != R_ALLOW || shadowed(i))
			continue;
		for (size_t k = 0; k < r->nchecks; k++) {
			const struct arg_check *c = &r->checks[k];

			passing_args(r, args);
			(void)snprintf(what, sizeof what, "%s, argument %d",
			    r->name, c->arg);
			if (c->when != 0)
				args[c->when - 1] = c->when_value;
			keep = args[c->arg];
			switch (c->op) {
			case ARG_ONE_OF:
				for (size_t v = 0; v < c->nvalues; v++) {
					args[c->arg] = c->values[v];
					expect_answer(what, r->nr, args,
					    RET_ALLOW);
				}
				/* Small values, and the highest. */
				for (uint64_t x = 0; x <= 2048; x++) {
					int listed = 0;

					for (size_t v = 0; v < c->nvalues; v++)
						listed |= (x & c->mask) ==
						    c->values[v];
					if (listed)
						continue;
					args[c->arg] = x;
					expect_answer(what, r->nr, args,
					    BAD_ARGS);
				}
				args[c->arg] = 0xffffffffU;
				expect_answer(what, r->nr, args,
				    BAD_ARGS);
				if (c->wide && sizeof(long) > 4) {
					args[c->arg] = keep | 1ULL << 32;
					expect_answer(what, r->nr, args,
					    BAD_ARGS);
				}
				break;
			case ARG_NONE_OF:
				for (int b = 0; b < 32; b++) {
					args[c->arg] = 1ULL << b;
					expect_answer(what, r->nr, args,
					    c->mask & 1U << b ?
					    BAD_ARGS : RET_ALLOW);
				}
				/* Under another value of the guard they pass. */
				passing_args(r, base);
				if (c->when != 0 &&
				    base[c->when - 1] != c->when_value) {
					args[c->when - 1] = base[c->when - 1];
					args[c->arg] = c->mask;
					expect_answer(what, r->nr, args,
					    RET_ALLOW);
				}
				break;
			case ARG_SELF:
				args[c->arg] = PID + 1;
				expect_answer(what, r->nr, args,
				    BAD_ARGS);
				args[c->arg] = 1;
				expect_answer(what, r->nr, args,
				    BAD_ARGS);
				break;
			}
		}
	}
}

/* Finding 3 of the third review, by name: fcntl, madvise, socket. */
static void
test_no_signal_commands_nor_raw_sockets(void **state)
{
	long fcntl_nr;
	uint64_t a[6] = { 0 };

	(void)state;
#ifdef __NR_fcntl64
	fcntl_nr = __NR_fcntl64;
#else
	fcntl_nr = __NR_fcntl;
#endif
	a[1] = F_SETFL;
	a[2] = O_NONBLOCK;
	expect_answer("fcntl(F_SETFL, O_NONBLOCK)", fcntl_nr, a, RET_ALLOW);
	a[2] = O_NONBLOCK | O_ASYNC;
	expect_answer("fcntl(F_SETFL, O_ASYNC)", fcntl_nr, a,
	    BAD_ARGS);
	a[2] = 0;
	a[1] = 8;		/* F_SETOWN */
	expect_answer("fcntl(F_SETOWN)", fcntl_nr, a, BAD_ARGS);
	a[1] = 10;		/* F_SETSIG */
	expect_answer("fcntl(F_SETSIG)", fcntl_nr, a, BAD_ARGS);
	a[1] = 15;		/* F_SETOWN_EX */
	expect_answer("fcntl(F_SETOWN_EX)", fcntl_nr, a, BAD_ARGS);
	a[1] = 1024;		/* F_SETLEASE */
	expect_answer("fcntl(F_SETLEASE)", fcntl_nr, a, BAD_ARGS);
	a[1] = 1026;		/* F_NOTIFY */
	expect_answer("fcntl(F_NOTIFY)", fcntl_nr, a, BAD_ARGS);

	memset(a, 0, sizeof a);
	a[2] = 100;		/* MADV_HWPOISON */
	expect_answer("madvise(MADV_HWPOISON)", __NR_madvise, a,
	    BAD_ARGS);
	a[2] = 0xffff;
	expect_answer("madvise(0xffff)", __NR_madvise, a, BAD_ARGS);
	a[2] = 14;		/* MADV_HUGEPAGE: a bulk transfer's buffers */
	expect_answer("madvise(MADV_HUGEPAGE)", __NR_madvise, a, RET_ALLOW);
	a[2] = 15;		/* MADV_NOHUGEPAGE: the same, idle */
	expect_answer("madvise(MADV_NOHUGEPAGE)", __NR_madvise, a,
	    RET_ALLOW);
	a[2] = 16;		/* MADV_DONTDUMP */
	expect_answer("madvise(MADV_DONTDUMP)", __NR_madvise, a, BAD_ARGS);
#ifdef __NR_socket
	a[0] = AF_UNIX;
	a[1] = SOCK_RAW;
	a[2] = 0;
	expect_answer("socket(AF_UNIX, SOCK_RAW)", __NR_socket, a,
	    BAD_ARGS);
	a[1] = SOCK_SEQPACKET | SOCK_CLOEXEC;
	expect_answer("socket(AF_UNIX, SOCK_SEQPACKET)", __NR_socket, a,
	    BAD_ARGS);
	a[1] = SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK;
	expect_answer("socket(AF_UNIX, SOCK_STREAM)", __NR_socket, a,
	    RET_ALLOW);
	a[0] = AF_INET;
	expect_answer("socket(AF_INET, SOCK_STREAM)", __NR_socket, a,
	    BAD_ARGS);
	a[0] = AF_UNIX | 1ULL << 32;	/* an int: the kernel reads 32 bits */
	expect_answer("socket(AF_UNIX + 2^32, SOCK_STREAM)", __NR_socket, a,
	    RET_ALLOW);
#endif
}

/* A call of another ABI of the machine: its numbers mean other calls. */
static void
test_other_abi_is_killed(void **state)
{
	struct sd d;

	(void)state;
	memset(&d, 0, sizeof d);
	d.nr = (int32_t)__NR_read;
	d.arch = SB_AUDIT_ARCH ^ 0x80000000U;	/* the 32- or 64-bit one */
	assert_int_equal(run(&d), RET_KILL);
	d.arch = 0x40000003U;			/* i386 */
	if (d.arch != SB_AUDIT_ARCH)
		assert_int_equal(run(&d), RET_KILL);
	d.arch = 0;
	assert_int_equal(run(&d), RET_KILL);
#ifdef SB_X32_BIT
	d.arch = SB_AUDIT_ARCH;
	d.nr = (int32_t)(SB_X32_BIT | __NR_read);
	assert_int_equal(run(&d), RET_KILL);
	d.nr = (int32_t)(SB_X32_BIT | __NR_getpid);
	assert_int_equal(run(&d), RET_KILL);
#endif
}

/* Every number no row names gets the off-list answer. */
static void
test_unknown_numbers_are_off_the_list(void **state)
{
	(void)state;
	for (long nr = 0; nr < 1100; nr++) {
		int listed = 0;

		for (size_t i = 0; i < NRULES; i++)
			listed |= rules[i].nr == nr;
		if (!listed)
			expect_answer(sys_name(nr), nr, NULL, OFF_LIST);
	}
	expect_answer("number 0x3fffffff", 0x3fffffff, NULL, OFF_LIST);
}

/*
 * Without a SIGSYS handler the server installs the same program with
 * answers that need none: ENOSYS off the list, EPERM for arguments.
 */
static void
test_without_handler_nothing_is_trapped(void **state)
{
	uint64_t a[6] = { 0 };

	(void)state;
	build_filter(&prog, PID, 0, 1, 0);
	for (size_t i = 0; i < prog.len; i++)
		if (prog.insn[i].code == BPF_RET &&
		    (prog.insn[i].k & 0xffff0000U) == RET_TRAP)
			fail_msg("instruction %zu traps", i);
	expect_answer("number 0x3fffffff", 0x3fffffff, NULL,
	    RET_ERRNO(ENOSYS));
	a[2] = 100;		/* MADV_HWPOISON */
	expect_answer("madvise(MADV_HWPOISON)", __NR_madvise, a,
	    RET_ERRNO(EPERM));
}

/*
 * Under -r, the calls of not_under_r[] are refused with EPERM whatever
 * their rows allow; the other rows answer as without -r.
 */
static void
test_under_r_path_calls_and_sockets_refused(void **state)
{
	uint64_t args[6];

	(void)state;
	build_filter(&prog, PID, 1, 1, 1);
	for (size_t i = 0; i < NNOT_UNDER_R; i++) {
		memset(args, 0, sizeof args);
		args[0] = AF_UNIX;
		args[1] = SOCK_STREAM;
		expect_answer(sys_name(not_under_r[i]), not_under_r[i], args,
		    RET_ERRNO(EPERM));
	}
	for (size_t i = 0; i < NRULES; i++) {
		int under_r = 0;

		for (size_t j = 0; j < NNOT_UNDER_R; j++)
			under_r |= not_under_r[j] == rules[i].nr;
		if (rules[i].kind != R_ALLOW || under_r)
			continue;
		passing_args(&rules[i], args);
		expect_answer(rules[i].name, rules[i].nr, args, RET_ALLOW);
	}
}

/*
 * Without -A, linkat(2) links no descriptor: AT_EMPTY_PATH and
 * AT_SYMLINK_FOLLOW are refused, flags 0 (hardlink@openssh.com) pass; with
 * -A all three pass.
 */
static void
test_linkat_flags_only_under_A(void **state)
{
	static const uint64_t flags[] = { 0, 0x400, 0x1000 };
	uint64_t args[6];

	(void)state;
	for (int uploads = 0; uploads <= 1; uploads++) {
		build_filter(&prog, PID, 0, uploads, 1);
		for (size_t i = 0; i < 3; i++) {
			memset(args, 0, sizeof args);
			args[4] = flags[i];
			expect_answer(uploads ? "linkat under -A" : "linkat",
			    __NR_linkat, args, uploads || flags[i] == 0 ?
			    RET_ALLOW : BAD_ARGS);
		}
	}
	build_filter(&prog, PID, 0, 1, 1);
}

/* What the suites made this architecture's server make. */
struct recorded {
	const char *name;	/* NULL: nr */
	long nr;
	uint64_t args[6];
};

#undef SELF
#define SELF	PID
static const struct recorded recorded[] = {
#if defined(__x86_64__)
#include "sandbox_calls_x86_64.h"
#elif defined(__i386__)
#include "sandbox_calls_i386.h"
#elif defined(__aarch64__)
#include "sandbox_calls_arm64.h"
#elif defined(__arm__)
#include "sandbox_calls_armhf.h"
#elif defined(__s390x__)
#include "sandbox_calls_s390x.h"
#endif
};
#undef SELF

/* The number of a call's name here, or -1. */
static long
sys_number(const char *name)
{
	for (size_t i = 0; i < sizeof sys_names / sizeof sys_names[0]; i++)
		if (strcmp(sys_names[i].name, name) == 0)
			return sys_names[i].nr;
	return -1;
}

static void
test_calls_the_suites_make_are_allowed(void **state)
{
	char what[96];
	long nr;

	(void)state;
	assert_true(sizeof recorded / sizeof recorded[0] > 20);
	for (size_t i = 0; i < sizeof recorded / sizeof recorded[0]; i++) {
		const struct recorded *r = &recorded[i];

		nr = r->name != NULL ? sys_number(r->name) : r->nr;
		if (nr == -1)
			fail_msg("%s, recorded here, has no number in "
			    "sysnames.h", r->name);
		(void)snprintf(what, sizeof what, "%s, made by the suites",
		    sys_name(nr));
		expect_answer(what, nr, r->args, RET_ALLOW);
	}
}
#endif /* HAVE_FILTER */

int
main(int argc, char **argv)
{
#ifdef HAVE_FILTER
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_no_call_is_listed_twice,
		    default_program),
		cmocka_unit_test_setup(test_every_row_names_its_own_number,
		    default_program),
		cmocka_unit_test_setup(test_each_allowed_call_is_allowed,
		    default_program),
		cmocka_unit_test_setup(test_each_refused_call_gets_eperm,
		    default_program),
		cmocka_unit_test_setup(test_each_unknown_call_gets_enosys,
		    default_program),
		cmocka_unit_test_setup(test_checked_arguments_refuse_other_values,
		    default_program),
		cmocka_unit_test_setup(test_no_signal_commands_nor_raw_sockets,
		    default_program),
		cmocka_unit_test_setup(test_other_abi_is_killed,
		    default_program),
		cmocka_unit_test_setup(test_unknown_numbers_are_off_the_list,
		    default_program),
		cmocka_unit_test_setup(test_without_handler_nothing_is_trapped,
		    default_program),
		cmocka_unit_test_setup(test_under_r_path_calls_and_sockets_refused,
		    default_program),
		cmocka_unit_test_setup(test_linkat_flags_only_under_A,
		    default_program),
		cmocka_unit_test_setup(test_calls_the_suites_make_are_allowed,
		    default_program),
	};

	if (unit_args(argc, argv) == -1)
		return 2;
	return cmocka_run_group_tests(tests, NULL, NULL);
#else
	(void)argc;
	(void)argv;
	printf("no seccomp filter for this architecture\n");
	return 0;
#endif
}
