/*
 * An LD_PRELOAD shim for tests/protocol/test_sandbox.py: the server meets a
 * kernel without seccomp filters, without Landlock, or with an older
 * Landlock ABI.  The server makes these calls through prctl(2) and
 * syscall(2), which the shim wraps; everything else is passed on.
 *
 *   SHIM_NO_SECCOMP=1     prctl(PR_SET_SECCOMP, ...) fails with ENOSYS.
 *   SHIM_NO_LANDLOCK=1    landlock_create_ruleset(2), landlock_add_rule(2)
 *                         and landlock_restrict_self(2) fail with ENOSYS.
 *   SHIM_LANDLOCK_ABI=n   asked for its ABI version, Landlock answers n; the
 *                         rulesets made are the kernel's own.
 *
 * Build: cc -shared -fPIC -o shim_sandbox.so shim_sandbox.c -ldl
 */
#define _GNU_SOURCE

#include <sys/types.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>

#ifndef PR_SET_SECCOMP
#define PR_SET_SECCOMP	22
#endif
/* Landlock's calls: one number on every architecture. */
#define NR_LL_CREATE	444
#define NR_LL_ADD	445
#define NR_LL_RESTRICT	446
#define LL_CREATE_RULESET_VERSION	0x1

static int (*real_prctl)(int, ...);
static long (*real_syscall)(long, ...);

static int
env_flag(const char *name)
{
	const char *v = getenv(name);

	return v != NULL && *v != '\0' && *v != '0';
}

int
prctl(int option, ...)
{
	unsigned long a[4];
	va_list ap;

	va_start(ap, option);
	for (int i = 0; i < 4; i++)
		a[i] = va_arg(ap, unsigned long);
	va_end(ap);
	if (option == PR_SET_SECCOMP && env_flag("SHIM_NO_SECCOMP")) {
		errno = ENOSYS;
		return -1;
	}
	if (real_prctl == NULL)
		real_prctl = (int (*)(int, ...))dlsym(RTLD_NEXT, "prctl");
	return real_prctl(option, a[0], a[1], a[2], a[3]);
}

long
syscall(long nr, ...)
{
	const char *abi;
	long a[6];
	va_list ap;

	va_start(ap, nr);
	for (int i = 0; i < 6; i++)
		a[i] = va_arg(ap, long);
	va_end(ap);
	if ((nr == NR_LL_CREATE || nr == NR_LL_ADD || nr == NR_LL_RESTRICT) &&
	    env_flag("SHIM_NO_LANDLOCK")) {
		errno = ENOSYS;
		return -1;
	}
	if (nr == NR_LL_CREATE && a[0] == 0 && a[1] == 0 &&
	    a[2] == LL_CREATE_RULESET_VERSION &&
	    (abi = getenv("SHIM_LANDLOCK_ABI")) != NULL)
		return strtol(abi, NULL, 10);
	if (real_syscall == NULL)
		real_syscall = (long (*)(long, ...))dlsym(RTLD_NEXT, "syscall");
	return real_syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
}
