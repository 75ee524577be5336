/*
 * Makes system calls from inside a running process, as a debugger's call
 * command does: tests/protocol/test_sandbox.py tries from inside a live
 * server what its sandbox must refuse.
 *
 * Usage: inject PID CALL...
 *   CALL is NR[,ARG]...: a system call's number, in the ABI of the process
 *   (x86-64, or i386 on an x86-64 kernel), and up to six arguments, each a
 *   number (decimal, or hex with 0x), @TEXT, the address of TEXT,
 *   NUL-terminated, copied into the process, or %HEX, the address of the
 *   bytes HEX spells (two hex digits each, a sockaddr say), copied so.
 * Prints one line per call: what it returned, -errno for a failure.
 *
 * The process is stopped where it is (PTRACE_SEIZE, PTRACE_INTERRUPT: a
 * server waits in poll(2)), and each call is made by pointing it at the
 * instruction of the call it stopped in ("syscall", or "int $0x80" for
 * i386), with the call's registers, and stepping over that instruction.
 * A call that the process's seccomp filter traps returns what the process's
 * SIGSYS handler makes it return (the handler runs, up to a breakpoint
 * after the instruction).  Its registers are then put back, and the call
 * it was in is restarted as after any stop.  The text lives in a
 * page the process maps (mmap) and unmaps (munmap) for the occasion.
 *
 * Build: cc -o inject inject.c.  Exit status 0 when every call was made
 * (whatever it returned), 2 for a usage error, 1 when the process could not
 * be driven.
 */
#define _GNU_SOURCE

#include <sys/types.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_ARGS	6
#define TEXT_PAGE	65536

#if defined(__x86_64__)
#define NR_MMAP		9
#define NR_MUNMAP	11
#define NR_MMAP2_I386	192
#define NR_MUNMAP_I386	91

static pid_t pid;
static struct user_regs_struct saved;
static unsigned long long insn;	/* the syscall instruction */
static int i386;		/* it is "int $0x80": the i386 ABI */

static void __attribute__((noreturn))
die(const char *what)
{
	fprintf(stderr, "inject: %s: %s\n", what, strerror(errno));
	exit(1);
}

/* Waits for the next stop; returns its signal, dies when the process ended. */
static int
wait_stop(void)
{
	int status;

	for (;;) {
		if (waitpid(pid, &status, __WALL) == -1) {
			if (errno == EINTR)
				continue;
			die("waitpid");
		}
		if (WIFSTOPPED(status))
			return WSTOPSIG(status);
		errno = ESRCH;
		die("the process ended");
	}
}

/* Whether SIGSYS waits for the process (its seccomp filter trapped a call). */
static int
sigsys_pending(void)
{
	char path[64], line[256];
	unsigned long long mask = 0;
	FILE *f;

	(void)snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
	if ((f = fopen(path, "r")) == NULL)
		die(path);
	while (fgets(line, sizeof line, f) != NULL)
		if (strncmp(line, "SigPnd:", 7) == 0 ||
		    strncmp(line, "ShdPnd:", 7) == 0)
			mask |= strtoull(line + 7, NULL, 16);
	fclose(f);
	return (mask >> (SIGSYS - 1)) & 1;
}

/*
 * A call that the filter trapped: the process's SIGSYS handler decides
 * what it returns.  The handler runs (PTRACE_CONT with the signal) and
 * returns to the instruction after the call, where a breakpoint (int3)
 * stops the process again, with the call's result.
 */
static void
through_handler(int sig, struct user_regs_struct *r)
{
	unsigned long long after = insn + 2;
	long word, trap;

	errno = 0;
	word = ptrace(PTRACE_PEEKTEXT, pid, after, NULL);
	if (errno != 0)
		die("PTRACE_PEEKTEXT");
	trap = (word & ~0xffL) | 0xcc;
	if (ptrace(PTRACE_POKETEXT, pid, after, trap) == -1)
		die("PTRACE_POKETEXT");
	for (;;) {
		if (ptrace(PTRACE_CONT, pid, NULL,
		    sig == SIGSYS ? (void *)(long)SIGSYS : NULL) == -1)
			die("PTRACE_CONT");
		sig = wait_stop();
		if (ptrace(PTRACE_GETREGS, pid, NULL, r) == -1)
			die("PTRACE_GETREGS");
		if (sig == SIGTRAP && r->rip == after + 1)
			break;		/* back from the handler */
		if (sig != SIGSYS && sig != SIGTRAP) {
			errno = EINTR;
			die("a signal while the handler ran");
		}
	}
	if (ptrace(PTRACE_POKETEXT, pid, after, word) == -1)
		die("PTRACE_POKETEXT");
}

/* Makes one call; returns what the process's kernel returned. */
static long
call(long nr, const long *args)
{
	struct user_regs_struct r = saved;
	int sig;

	r.rip = insn;
	r.rax = (unsigned long long)nr;
	r.orig_rax = (unsigned long long)-1;	/* no restart of the old call */
	if (i386) {
		r.rbx = (uint32_t)args[0];
		r.rcx = (uint32_t)args[1];
		r.rdx = (uint32_t)args[2];
		r.rsi = (uint32_t)args[3];
		r.rdi = (uint32_t)args[4];
		r.rbp = (uint32_t)args[5];
	} else {
		r.rdi = (unsigned long long)args[0];
		r.rsi = (unsigned long long)args[1];
		r.rdx = (unsigned long long)args[2];
		r.r10 = (unsigned long long)args[3];
		r.r8 = (unsigned long long)args[4];
		r.r9 = (unsigned long long)args[5];
	}
	if (ptrace(PTRACE_SETREGS, pid, NULL, &r) == -1)
		die("PTRACE_SETREGS");
	if (ptrace(PTRACE_SINGLESTEP, pid, NULL, NULL) == -1)
		die("PTRACE_SINGLESTEP");
	sig = wait_stop();
	if (sig == SIGSYS || sigsys_pending())
		through_handler(sig, &r);
	else if (ptrace(PTRACE_GETREGS, pid, NULL, &r) == -1)
		die("PTRACE_GETREGS");
	return i386 ? (long)(int32_t)r.rax : (long)r.rax;
}

/* Copies len bytes to addr in the process, a word at a time. */
static void
poke(unsigned long addr, const char *s, size_t len)
{
	long word;

	for (size_t off = 0; off < len; off += sizeof word) {
		word = 0;
		memcpy(&word, s + off, len - off < sizeof word ? len - off :
		    sizeof word);
		if (ptrace(PTRACE_POKEDATA, pid, addr + off, word) == -1)
			die("PTRACE_POKEDATA");
	}
}

/* One call of the command line: its number, arguments and texts. */
struct call {
	long nr;
	long args[MAX_ARGS];
	const char *text[MAX_ARGS];	/* of @TEXT or %HEX, or NULL */
	size_t len[MAX_ARGS];		/* its bytes (@TEXT: its NUL too) */
};

/* The bytes that hex spells, into out (strlen(hex) / 2 of them). */
static int
unhex(const char *hex, char *out)
{
	unsigned int byte;
	size_t n = strlen(hex);

	if (n == 0 || n % 2 != 0)
		return -1;
	for (size_t i = 0; i < n; i += 2) {
		if (strspn(hex + i, "0123456789abcdefABCDEF") < 2 ||
		    sscanf(hex + i, "%2x", &byte) != 1)
			return -1;
		out[i / 2] = (char)byte;
	}
	return (int)(n / 2);
}

/* Reads CALL into c; returns 0, or -1 when it does not parse. */
static int
parse(char *spec, struct call *c)
{
	char *tok, *end;
	int n, len;

	memset(c, 0, sizeof *c);
	tok = strsep(&spec, ",");
	c->nr = strtol(tok, &end, 0);
	if (*tok == '\0' || *end != '\0')
		return -1;
	for (n = 0; (tok = strsep(&spec, ",")) != NULL; n++) {
		if (n == MAX_ARGS)
			return -1;
		if (tok[0] == '@') {
			c->text[n] = tok + 1;
			c->len[n] = strlen(tok + 1) + 1;
			continue;
		}
		if (tok[0] == '%') {
			/* In place: the bytes are fewer than their digits. */
			if ((len = unhex(tok + 1, tok)) == -1)
				return -1;
			c->text[n] = tok;
			c->len[n] = (size_t)len;
			continue;
		}
		c->args[n] = strtol(tok, &end, 0);
		if (*tok == '\0' || *end != '\0')
			return -1;
	}
	return 0;
}

/*
 * Stops the process and finds the syscall instruction it stopped behind.
 * A process caught between calls (a server still answering, on a loaded
 * machine) is let go and stopped again, up to TRIES times, 10 ms apart.
 */
#define TRIES	500

static void
seize(void)
{
	long word;

	for (int tries = 1;; tries++) {
		if (ptrace(PTRACE_SEIZE, pid, NULL, NULL) == -1)
			die("PTRACE_SEIZE");
		if (ptrace(PTRACE_INTERRUPT, pid, NULL, NULL) == -1)
			die("PTRACE_INTERRUPT");
		(void)wait_stop();
		if (ptrace(PTRACE_GETREGS, pid, NULL, &saved) == -1)
			die("PTRACE_GETREGS");
		/*
		 * A process stopped in a call has "syscall" (0f 05) behind
		 * it, or "int $0x80" (cd 80), where an i386 process enters
		 * and restarts its calls.
		 */
		insn = saved.rip - 2;
		errno = 0;
		word = ptrace(PTRACE_PEEKTEXT, pid, insn, NULL);
		i386 = errno == 0 && (word & 0xffff) == 0x80cd;
		if (errno == 0 && ((word & 0xffff) == 0x050f || i386))
			return;
		(void)ptrace(PTRACE_DETACH, pid, NULL, NULL);
		if (tries == TRIES) {
			errno = EINVAL;
			die("no syscall instruction where the process stopped");
		}
		(void)usleep(10000);
	}
}

int
main(int argc, char **argv)
{
	struct call *calls;
	long args[MAX_ARGS], page, used = 0;
	size_t len;
	char *end;
	int ncalls = argc - 2;

	if (argc < 3)
		goto usage;
	pid = (pid_t)strtol(argv[1], &end, 10);
	if (*end != '\0' || pid <= 0)
		goto usage;
	if ((calls = calloc((size_t)ncalls, sizeof *calls)) == NULL)
		die("calloc");
	for (int i = 0; i < ncalls; i++)
		if (parse(argv[i + 2], &calls[i]) == -1)
			goto usage;
	seize();
	memset(args, 0, sizeof args);
	args[1] = TEXT_PAGE;
	args[2] = 0x3;		/* PROT_READ | PROT_WRITE */
	args[3] = 0x22;		/* MAP_PRIVATE | MAP_ANONYMOUS */
	args[4] = -1;
	if ((page = call(i386 ? NR_MMAP2_I386 : NR_MMAP, args)) < 0 &&
	    page > -4096) {
		errno = (int)-page;
		die("mmap in the process");
	}
	if (i386)
		page = (long)(uint32_t)page;	/* an address, not a number */
	for (int i = 0; i < ncalls; i++) {
		for (int n = 0; n < MAX_ARGS; n++) {
			if (calls[i].text[n] == NULL)
				continue;
			len = calls[i].len[n];
			if (used + (long)len > TEXT_PAGE) {
				errno = E2BIG;
				die("texts");
			}
			poke((unsigned long)(page + used), calls[i].text[n],
			    len);
			calls[i].args[n] = page + used;
			used += (long)(len + 7) & ~7L;
		}
		printf("%ld\n", call(calls[i].nr, calls[i].args));
		(void)fflush(stdout);
	}
	memset(args, 0, sizeof args);
	args[0] = page;
	args[1] = TEXT_PAGE;
	(void)call(i386 ? NR_MUNMAP_I386 : NR_MUNMAP, args);
	if (ptrace(PTRACE_SETREGS, pid, NULL, &saved) == -1)
		die("PTRACE_SETREGS");
	if (ptrace(PTRACE_DETACH, pid, NULL, NULL) == -1)
		die("PTRACE_DETACH");
	return 0;
usage:
	fprintf(stderr, "usage: inject PID NR[,ARG]...\n");
	return 2;
}
#else
int
main(void)
{
	fprintf(stderr, "inject: x86-64 only\n");
	return 3;
}
#endif
