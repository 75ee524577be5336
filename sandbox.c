/*
 * The server confines itself once start-up is over (options read, logs
 * open, the -r root opened), with the kernel's own mechanisms and libc
 * alone:
 *
 *   - PR_SET_NO_NEW_PRIVS: nothing it could run would gain privileges;
 *   - Landlock: under -r, files opened, made, removed, renamed and linked
 *     only beneath the root, and reads of what user and group lookups
 *     need (not modes, owners, times or attributes: see not_under_r[]);
 *     wherever the ABI has them, no TCP bind or connect, and no abstract
 *     unix socket or signal reaching outside the process;
 *   - a seccomp filter, written by hand below: the system calls that
 *     serving makes are allowed, those that take a command, flags or an
 *     address only with the values the server and its C library use
 *     (other values fail with EPERM and are logged at ERROR, once per
 *     call); a few calls that must never be made are refused with EPERM,
 *     and no row of the list can let them in; any other call is trapped,
 *     fails with ENOSYS (a C library that tries a newer call first then
 *     falls back to the one allowed) and is logged at ERROR, once, by its
 *     name (the sanitizer and fuzz builds abort instead, naming it); a
 *     call of another ABI than the server's kills the process, since its
 *     numbers mean other calls there.  Under -r, the calls of
 *     not_under_r[] are refused as well: what the confinement leaves
 *     reachable, and why, is said there.
 *
 * Each mechanism the kernel lacks is left out and the others still apply;
 * the server never refuses to serve for want of one.  What is in force is
 * logged once, at VERBOSE.
 *
 * The structures and constants of the kernel's ABI are written out here:
 * musl's headers have no <linux/...>, and older headers lack Landlock.
 */
#include <sys/types.h>
#ifdef __linux__
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#endif

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "sandbox.h"
#include "sys-gnu.h"

#ifdef __linux__
#ifndef PR_SET_NO_NEW_PRIVS
#define PR_SET_NO_NEW_PRIVS	38
#endif
#ifndef PR_SET_SECCOMP
#define PR_SET_SECCOMP		22
#endif
#define SB_SECCOMP_MODE_FILTER	2

/*
 * The architecture the filter is written for, as the kernel reports it in
 * seccomp_data.arch (<linux/audit.h>): the ELF machine, with bits for
 * 64-bit and little-endian.  Elsewhere there is no filter.
 */
#if defined(__x86_64__) && !defined(__ILP32__)
#define SB_AUDIT_ARCH	0xc000003eU	/* EM_X86_64, 64-bit, LE */
#define SB_X32_BIT	0x40000000U	/* __X32_SYSCALL_BIT */
#elif defined(__i386__)
#define SB_AUDIT_ARCH	0x40000003U	/* EM_386, LE */
#elif defined(__aarch64__) && !defined(__ILP32__) && \
    !defined(__AARCH64EB__)
#define SB_AUDIT_ARCH	0xc00000b7U	/* EM_AARCH64, 64-bit, LE */
#elif defined(__arm__) && defined(__ARMEL__)
#define SB_AUDIT_ARCH	0x40000028U	/* EM_ARM, LE */
#elif defined(__s390x__)
#define SB_AUDIT_ARCH	0x80000016U	/* EM_S390, 64-bit */
#endif

#if defined(SB_AUDIT_ARCH) && defined(__linux__)
#define HAVE_FILTER	1
#endif

/* AddressSanitizer, as gcc and clang announce it. */
#if defined(__SANITIZE_ADDRESS__)
#define SB_ASAN	1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SB_ASAN	1
#endif
#endif
#if defined(SB_ASAN) && defined(HAVE_FILTER)
#include <sanitizer/common_interface_defs.h>
#endif

/*
 * ThreadSanitizer, a test build: its runtime sleeps in nanosleep(2) in a
 * thread of its own and starts a symbolizer for a report, neither of which
 * serving does, so that build runs without the filter (make
 * integration-tsan); Landlock and no_new_privs still apply.
 */
#if defined(__SANITIZE_THREAD__)
#define SB_TSAN	1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SB_TSAN	1
#endif
#endif
#ifndef SB_TSAN
#define SB_TSAN	0
#endif

/*
 * System calls from 424 on have one number on all the architectures above;
 * the C library's headers may predate them.
 */
#ifdef __NR_fchmodat2
#define NR_FCHMODAT2	__NR_fchmodat2
#else
#define NR_FCHMODAT2	452
#endif
#ifdef __NR_landlock_create_ruleset
#define NR_LL_CREATE	__NR_landlock_create_ruleset
#define NR_LL_ADD	__NR_landlock_add_rule
#define NR_LL_RESTRICT	__NR_landlock_restrict_self
#else
#define NR_LL_CREATE	444
#define NR_LL_ADD	445
#define NR_LL_RESTRICT	446
#endif

/* Classic BPF, as <linux/filter.h>. */
struct sb_insn {
	uint16_t code;
	uint8_t jt;
	uint8_t jf;
	uint32_t k;
};

struct sb_prog {
	unsigned short len;
	struct sb_insn *filter;
};

#define BPF_LD_ABS	0x20	/* BPF_LD | BPF_W | BPF_ABS */
#define BPF_AND		0x54	/* BPF_ALU | BPF_AND | BPF_K */
#define BPF_JEQ		0x15	/* BPF_JMP | BPF_JEQ | BPF_K */
#define BPF_JSET	0x45	/* BPF_JMP | BPF_JSET | BPF_K */
#define BPF_RET		0x06	/* BPF_RET | BPF_K */

/* Offsets in struct seccomp_data, and the filter's answers. */
#define SD_NR		0
#define SD_ARCH		4
#define SD_ARGS		16
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define SD_ARG_LO(i)	(SD_ARGS + 8 * (i) + 4)
#define SD_ARG_HI(i)	(SD_ARGS + 8 * (i))
#else
#define SD_ARG_LO(i)	(SD_ARGS + 8 * (i))
#define SD_ARG_HI(i)	(SD_ARGS + 8 * (i) + 4)
#endif
#define RET_KILL	0x80000000U	/* SECCOMP_RET_KILL_PROCESS */
#define RET_TRAP	0x00030000U	/* SECCOMP_RET_TRAP: SIGSYS */
#define RET_ERRNO(e)	(0x00050000U | ((e) & 0xffff))
#define RET_ALLOW	0x7fff0000U
#define SYS_SECCOMP_CODE	1	/* si_code of the filter's SIGSYS */

/*
 * The answers trapped, and told apart by the handler in si_errno (the data
 * of SECCOMP_RET_TRAP): a call no row names fails with ENOSYS, a call with
 * arguments its row does not allow with EPERM; each is logged.
 */
#define TRAP_OFF_LIST	0
#define TRAP_ARGUMENTS	1

/*
 * The values some rows allow, as the kernel defines them where the C
 * library names them only with _GNU_SOURCE (or not at all).
 */
#define SB_PROT_EXEC		0x4
/*
 * The flags pthread_create() passes to clone(2): glibc's, and musl's with
 * CLONE_DETACHED.  A new thread shares everything; anything else (a new
 * process, new namespaces) is refused.  s390x takes the stack first and
 * the flags second.
 */
#define SB_CLONE_THREAD	(0x00000100 | 0x00000200 | 0x00000400 | \
    0x00000800 | 0x00010000 | 0x00040000 | 0x00080000 | 0x00100000 | \
    0x00200000)	/* CLONE_VM FS FILES SIGHAND THREAD SYSVSEM SETTLS
			   PARENT_SETTID CHILD_CLEARTID */
#ifdef __GLIBC__
#define SB_CLONE_FLAGS	SB_CLONE_THREAD
#else
#define SB_CLONE_FLAGS	(SB_CLONE_THREAD | 0x00400000)	/* CLONE_DETACHED */
#endif
#ifdef __s390x__
#define SB_CLONE_FLAGS_ARG	1
#else
#define SB_CLONE_FLAGS_ARG	0
#endif
#define SB_F_DUPFD_CLOEXEC	1030
#define SB_F_SETPIPE_SZ		1031
#define SB_F_GETPIPE_SZ		1032
#define SB_MADV_DONTNEED	4
#define SB_MADV_FREE		8
#define SB_MADV_POPULATE_WRITE	23
#define SB_MADV_HUGEPAGE	14
#define SB_MADV_NOHUGEPAGE	15
#define SB_MREMAP_MAYMOVE	1
#define SB_RENAME_NOREPLACE	1
#define SB_SCHED_BATCH		3
#define SB_AT_SYMLINK_FOLLOW	0x400
#define SB_AT_EMPTY_PATH	0x1000
#define SB_FUTEX_WAIT		0
#define SB_FUTEX_WAKE		1
#define SB_FUTEX_REQUEUE	3
#define SB_FUTEX_CMP_REQUEUE	4
#define SB_FUTEX_WAIT_BITSET	9
#define SB_FUTEX_WAKE_BITSET	10
#define SB_FUTEX_PRIVATE	128
#define SB_FUTEX_CLOCK_REALTIME	256

/* socketcall(2)'s operations, as <linux/net.h>. */
#define SC_CONNECT	3
#define SC_SEND		9
#define SC_RECV		10
#define SC_SENDTO	11
#define SC_RECVFROM	12
#define SC_SENDMSG	16
#define SC_RECVMSG	17
#define SC_SETSOCKOPT	14
#define SC_GETSOCKOPT	15

/* Landlock, as <linux/landlock.h>. */
struct sb_ruleset_attr {
	uint64_t handled_access_fs;
	uint64_t handled_access_net;
	uint64_t scoped;
};

struct sb_path_beneath {
	uint64_t allowed_access;
	int32_t parent_fd;
} __attribute__((packed));

#define LL_CREATE_RULESET_VERSION	0x1
#define LL_RULE_PATH_BENEATH		1

#define LL_FS_EXECUTE		0x0001
#define LL_FS_WRITE_FILE	0x0002
#define LL_FS_READ_FILE		0x0004
#define LL_FS_READ_DIR		0x0008
#define LL_FS_REMOVE_DIR	0x0010
#define LL_FS_REMOVE_FILE	0x0020
#define LL_FS_MAKE_CHAR		0x0040
#define LL_FS_MAKE_DIR		0x0080
#define LL_FS_MAKE_REG		0x0100
#define LL_FS_MAKE_SOCK		0x0200
#define LL_FS_MAKE_FIFO		0x0400
#define LL_FS_MAKE_BLOCK	0x0800
#define LL_FS_MAKE_SYM		0x1000
#define LL_FS_REFER		0x2000	/* ABI 2 */
#define LL_FS_TRUNCATE		0x4000	/* ABI 3 */
#define LL_FS_IOCTL_DEV		0x8000	/* ABI 5 */
#define LL_NET_BIND_TCP		0x1	/* ABI 4 */
#define LL_NET_CONNECT_TCP	0x2	/* ABI 4 */
#define LL_SCOPE_ABSTRACT_UNIX	0x1	/* ABI 6 */
#define LL_SCOPE_SIGNAL		0x2	/* ABI 6 */

/*
 * What serving never does beneath the root: run a program, make a device,
 * a socket or a FIFO, or send a device an ioctl.
 */
#define LL_FS_NOT_BENEATH	(LL_FS_EXECUTE | LL_FS_MAKE_CHAR | \
    LL_FS_MAKE_BLOCK | LL_FS_MAKE_SOCK | LL_FS_MAKE_FIFO | LL_FS_IOCTL_DEV)

/*
 * Read access kept under -r, for user and group lookups (long names,
 * users-groups-by-id, ~user, home-directory): the files of the "files"
 * service and the switch's configuration, which the C library checks for
 * changes; the user records of systemd's userdb, which nss_systemd reads
 * and lists; sssd's memory caches; libnss-extrausers.  What does not exist
 * here is left out.  Unix sockets (syslog, nscd, sssd, userdb) are reached
 * by connect(2), which these Landlock ABIs leave alone; under -r no socket
 * is made once the session serves (not_under_r[]).
 */
static const char *const lookup_paths[] = {
	"/etc/passwd",
	"/etc/group",
	"/etc/nsswitch.conf",
	"/etc/userdb",
	"/run/userdb",
	"/run/host/userdb",
	"/run/systemd/userdb",
	"/usr/local/lib/userdb",
	"/usr/lib/userdb",
	"/var/lib/sss/mc",
	"/var/lib/extrausers",
};

#ifdef HAVE_FILTER
/*
 * A condition on one argument of a call.  The kernel reads an int argument
 * in its low 32 bits alone; an argument it reads as a long (wide) must also
 * have its high 32 bits clear on a 64-bit system, or a value with bits
 * above could pass for one below.  when, if not 0, is 1 + the index of an
 * argument: the condition applies only when that argument is when_value.
 */
enum arg_op {
	ARG_ONE_OF,	/* (argument & mask) is one of values[] */
	ARG_NONE_OF,	/* the argument has none of the bits of mask */
	ARG_SELF	/* the argument is the process's own pid */
};

#define ARG_VALUES_MAX	10

struct arg_check {
	uint8_t arg;
	uint8_t op;
	uint8_t wide;
	uint8_t nvalues;
	uint32_t mask;
	uint32_t values[ARG_VALUES_MAX];
	uint8_t when;
	uint32_t when_value;
};

/*
 * One row of the list.  An allowed call with checks is allowed when every
 * check holds, and refused with EPERM otherwise.
 */
enum rule_kind {
	R_ALLOW,	/* allowed, with checks if any */
	R_REFUSE,	/* EPERM, whatever row of the list names it too */
	R_UNKNOWN	/* ENOSYS, unlogged, as from a kernel without the
			   call: the C library falls back to one allowed */
};

struct rule {
	long nr;
	const char *name;
	enum rule_kind kind;
	const struct arg_check *checks;
	size_t nchecks;
};

#define SB_NVALUES(...)	(sizeof((const uint32_t[]){ __VA_ARGS__ }) /	\
	sizeof(uint32_t))
#define SB_CHECKS(...)	(const struct arg_check[]){ __VA_ARGS__ },	\
	sizeof((const struct arg_check[]){ __VA_ARGS__ }) /		\
	sizeof(struct arg_check)

#define ALLOW(name)	{ __NR_##name, #name, R_ALLOW, NULL, 0 }
#define REFUSE(name)	{ __NR_##name, #name, R_REFUSE, NULL, 0 }
#define UNKNOWN(name)	{ __NR_##name, #name, R_UNKNOWN, NULL, 0 }
/* Allowed when each check holds. */
#define ALLOW_IF(name, ...)	ALLOW_NR_IF(__NR_##name, #name, __VA_ARGS__)
#define ALLOW_NR_IF(nr, name, ...) \
	{ nr, name, R_ALLOW, SB_CHECKS(__VA_ARGS__) }

/* The checks: argument i (an int) is one of the values. */
#define ONE_OF(i, ...)	{ .arg = (i), .op = ARG_ONE_OF, .mask = ~0U,	\
	.values = { __VA_ARGS__ }, .nvalues = SB_NVALUES(__VA_ARGS__) }
/* Argument i, a long, is one of the values. */
#define LONG_ONE_OF(i, ...) { .arg = (i), .op = ARG_ONE_OF, .wide = 1,	\
	.mask = ~0U, .values = { __VA_ARGS__ },				\
	.nvalues = SB_NVALUES(__VA_ARGS__) }
/* Argument i (an int) with the bits outside m cleared is one of them. */
#define MASKED_ONE_OF(i, m, ...) { .arg = (i), .op = ARG_ONE_OF,	\
	.mask = (m), .values = { __VA_ARGS__ },				\
	.nvalues = SB_NVALUES(__VA_ARGS__) }
/* Argument i has none of bits (all in its low 32). */
#define NONE_OF(i, bits) { .arg = (i), .op = ARG_NONE_OF, .mask = (bits) }
/* Argument i has none of bits when argument j is v. */
#define NONE_OF_WHEN(i, bits, j, v) { .arg = (i), .op = ARG_NONE_OF,	\
	.mask = (bits), .when = (j) + 1, .when_value = (v) }
/* Argument i is the process's pid. */
#define SELF(i)		{ .arg = (i), .op = ARG_SELF }

/* What send(2), sendto(2) and sendmsg(2) are given as flags. */
#define SEND_FLAGS	(MSG_NOSIGNAL | MSG_DONTWAIT)
/* A futex(2) operation, with the flags that may come with it. */
#define FUTEX_CHECK	MASKED_ONE_OF(1, ~(uint32_t)(SB_FUTEX_PRIVATE |	\
	SB_FUTEX_CLOCK_REALTIME), SB_FUTEX_WAIT, SB_FUTEX_WAKE,		\
	SB_FUTEX_REQUEUE, SB_FUTEX_CMP_REQUEUE, SB_FUTEX_WAIT_BITSET,	\
	SB_FUTEX_WAKE_BITSET)

/*
 * fcntl(2): the commands in use.  F_GETFL and F_SETFL make stdout
 * non-blocking at a signal; F_GETPIPE_SZ and F_SETPIPE_SZ size the pipes;
 * F_GETFD, F_SETFD, F_GETFL and F_SETFL are also the C library's
 * (fdopendir(3) of OPENDIR) and the name service's (sssd's client),
 * F_DUPFD_CLOEXEC nss_systemd's.  F_SETFL never with O_ASYNC: with
 * F_SETOWN and F_SETSIG, which are refused as well, it would send a signal
 * of the client's choosing to any process of the account.
 */
#define FCNTL_CHECKS	ONE_OF(1, F_GETFD, F_SETFD, F_GETFL, F_SETFL,	\
	SB_F_DUPFD_CLOEXEC, SB_F_GETPIPE_SZ, SB_F_SETPIPE_SZ),		\
	NONE_OF_WHEN(2, O_ASYNC, 1, F_SETFL)

/*
 * The allow-list: every system call the server makes once it serves, with
 * what makes it.  The most frequent come first, as the filter tests them
 * in order.  Names differ between architectures and C libraries (glibc,
 * musl), hence one entry for each name that exists.
 *
 * A row is ALLOW(name); ALLOW_IF(name, check, ...) for a call that takes a
 * command, flags or an address, with the checks above (argument indexes as
 * the architecture's system call takes them); or REFUSE(name).  Each
 * number has one row: tests/unit/test_sandbox.c fails on a second, and on a
 * call that the recorded suites make (tests/unit/sandbox_calls_ARCH.h)
 * but the list does not allow.
 */
static const struct rule rules[] = {
	/* The loop. */
	ALLOW(read),		/* requests on stdin; NSS reads its files */
	ALLOW(write),		/* replies; log lines (-e); the transfer log */
	ALLOW(writev),		/* replies with a worker READ's data */
	ALLOW(pread64),		/* READ, check-file, copy-data by hand */
#ifdef __NR_preadv2
	ALLOW(preadv2),		/* READ from the page cache, not waiting */
#endif
	ALLOW(pwrite64),	/* WRITE, copy-data by hand */
#ifdef __NR_poll
	ALLOW(poll),		/* waits for input, for stdout to drain */
#endif
#ifdef __NR_ppoll
	ALLOW(ppoll),		/* the same where libc has no poll(2) */
#endif
#ifdef __NR_ppoll_time64
	ALLOW(ppoll_time64),	/* the same with a 64-bit time_t */
#endif

	/* Paths: every request that names a file. */
#ifdef __NR_newfstatat
	ALLOW(newfstatat),	/* STAT, LSTAT, long names of READDIR, -r */
#endif
#ifdef __NR_fstatat64
	ALLOW(fstatat64),	/* the same on 32-bit systems */
#endif
#ifdef __NR_statx
	ALLOW(statx),		/* the same where libc has a 64-bit time_t */
#endif
#ifdef __NR_fstat
	ALLOW(fstat),		/* FSTAT, OPENDIR, check-file, copy-data */
#endif
#ifdef __NR_fstat64
	ALLOW(fstat64),		/* the same on 32-bit systems */
#endif
#ifdef __NR_stat
	ALLOW(stat),		/* STAT without -r, where libc calls it */
#endif
#ifdef __NR_stat64
	ALLOW(stat64),		/* the same on 32-bit systems */
#endif
#ifdef __NR_lstat
	ALLOW(lstat),		/* LSTAT without -r, where libc calls it */
#endif
#ifdef __NR_lstat64
	ALLOW(lstat64),		/* the same on 32-bit systems */
#endif
	ALLOW(openat),		/* OPEN, OPENDIR, the walk of REALPATH */
#ifdef __NR_open
	ALLOW(open),		/* the same where libc calls open(2) */
#endif
#ifdef __NR_openat2
	ALLOW(openat2),		/* every path under -r, beneath the root */
#endif
	ALLOW(close),		/* CLOSE, and descriptors of a path walk */
	ALLOW(getdents64),	/* READDIR */
#ifdef __NR_getdents
	ALLOW(getdents),	/* READDIR, where libc names it so */
#endif
#ifdef __NR_lseek
	ALLOW(lseek),		/* READ and WRITE past 2^40; NSS rewinds */
#endif
#ifdef __NR__llseek
	ALLOW(_llseek),		/* the same on 32-bit systems */
#endif
#ifdef __NR_fcntl
	ALLOW_IF(fcntl, FCNTL_CHECKS),	/* see FCNTL_CHECKS */
#endif
#ifdef __NR_fcntl64
	ALLOW_IF(fcntl64, FCNTL_CHECKS), /* the same on 32-bit systems */
#endif
#ifdef __NR_setsockopt
	/* stdout's send buffer, when a socket (sftp -D): at stdout alone */
	ALLOW_IF(setsockopt, ONE_OF(0, STDOUT_FILENO)),
#endif
#ifdef __NR_getsockopt
	/* what the client has yet to read of stdout, a socket (pipes.c) */
	ALLOW_IF(getsockopt, ONE_OF(0, STDOUT_FILENO)),
#endif
#ifdef __NR_readlink
	ALLOW(readlink),	/* READLINK without -r */
#endif
	ALLOW(readlinkat),	/* READLINK under -r, REALPATH */
	ALLOW(getcwd),		/* REALPATH of a relative path */
#ifdef __NR_statfs
	ALLOW(statfs),		/* statvfs@openssh.com (its fsid) */
#endif
#ifdef __NR_statfs64
	ALLOW(statfs64),	/* the same on 32-bit systems */
#endif
#ifdef __NR_fstatfs
	ALLOW(fstatfs),		/* fstatvfs, statvfs under -r, READLINK */
#endif
#ifdef __NR_fstatfs64
	ALLOW(fstatfs64),	/* the same on 32-bit systems */
#endif
#ifdef __NR_mkdir
	ALLOW(mkdir),		/* MKDIR without -r */
#endif
	ALLOW(mkdirat),		/* MKDIR under -r */
#ifdef __NR_rmdir
	ALLOW(rmdir),		/* RMDIR without -r */
#endif
#ifdef __NR_unlink
	ALLOW(unlink),		/* REMOVE without -r */
#endif
	ALLOW(unlinkat),	/* REMOVE and RMDIR under -r */
#ifdef __NR_rename
	ALLOW(rename),		/* RENAME, posix-rename without -r */
#endif
#ifdef __NR_renameat
	ALLOW(renameat),	/* the same under -r */
#endif
#ifdef __NR_renameat2
	/* RENAME without replacing (and -r); posix-rename in musl. */
	ALLOW_IF(renameat2, ONE_OF(4, 0, SB_RENAME_NOREPLACE)),
#endif
#ifdef __NR_link
	ALLOW(link),		/* hardlink@openssh.com without -r */
#endif
	/* The same under -r; -A names its unnamed uploads (see link_rows). */
	ALLOW_IF(linkat, ONE_OF(4, 0, SB_AT_SYMLINK_FOLLOW, SB_AT_EMPTY_PATH)),
#ifdef __NR_symlink
	ALLOW(symlink),		/* SYMLINK without -r */
#endif
	ALLOW(symlinkat),	/* SYMLINK under -r */
#ifdef __NR_chmod
	ALLOW(chmod),		/* SETSTAT permissions without -r */
#endif
	ALLOW(fchmod),		/* FSETSTAT permissions */
	ALLOW(fchmodat),	/* SETSTAT, lsetstat permissions */
	{ NR_FCHMODAT2, "fchmodat2", R_ALLOW, NULL, 0 }, /* lsetstat, -r */
#ifdef __NR_chown
	ALLOW(chown),		/* SETSTAT owner without -r */
#endif
#ifdef __NR_chown32
	ALLOW(chown32),		/* the same on 32-bit systems */
#endif
	ALLOW(fchown),		/* FSETSTAT owner */
	/* -A: an upload takes the extended attributes of the file it
	   replaces, its ACL among them (fs.c); off the list without -A. */
	ALLOW(flistxattr),
	ALLOW(fgetxattr),
	ALLOW(fsetxattr),
	ALLOW(fremovexattr),	/* an ACL the old file did not have */
#ifdef __NR_fchown32
	ALLOW(fchown32),	/* the same on 32-bit systems */
#endif
#ifdef __NR_lchown
	ALLOW(lchown),		/* lsetstat owner without -r */
#endif
#ifdef __NR_lchown32
	ALLOW(lchown32),	/* the same on 32-bit systems */
#endif
	ALLOW(fchownat),	/* SETSTAT, lsetstat owner */
#ifdef __NR_truncate
	ALLOW(truncate),	/* SETSTAT size without -r */
#endif
#ifdef __NR_truncate64
	ALLOW(truncate64),	/* the same on 32-bit systems */
#endif
	ALLOW(ftruncate),	/* FSETSTAT size, SETSTAT under -r */
#ifdef __NR_ftruncate64
	ALLOW(ftruncate64),	/* the same on 32-bit systems */
#endif
	ALLOW(utimensat),	/* SETSTAT, FSETSTAT, lsetstat times */
#ifdef __NR_utimensat_time64
	ALLOW(utimensat_time64), /* the same with a 64-bit time_t */
#endif
	ALLOW(fsync),		/* fsync@openssh.com */
#ifdef __NR_copy_file_range
	ALLOW(copy_file_range),	/* copy-data */
#endif
	ALLOW(sched_yield),	/* -r: lets concurrent renames pass */

	/*
	 * Memory: buffers given back when idle, libc's allocator.  i386's
	 * mmap(2) takes its arguments in memory and libc does not call it
	 * (mmap2 instead); s390x has only that kind.
	 */
#if defined(__NR_mmap) && !defined(__i386__) && !defined(__s390x__)
	/* copy-data, check-file buffers; never executable memory. */
	ALLOW_IF(mmap, NONE_OF(2, SB_PROT_EXEC)),
#elif defined(__NR_mmap) && defined(__s390x__)
	ALLOW(mmap),		/* the same; PROT_EXEC cannot be seen */
#endif
#ifdef __NR_mmap2
	ALLOW_IF(mmap2, NONE_OF(2, SB_PROT_EXEC)), /* 32-bit systems */
#endif
	ALLOW(munmap),		/* the same, freed */
	ALLOW_IF(mprotect, NONE_OF(2, SB_PROT_EXEC)),	/* libc's allocator */
	/*
	 * Buffer pages given back when idle (MADV_DONTNEED), glibc's
	 * allocator trimming (the same), musl's freeing (MADV_FREE); the
	 * workers' arena and the pinned input made present before they are
	 * written (MADV_POPULATE_WRITE: jobs.c, packet.c), and put on huge
	 * pages for a bulk transfer and back on small ones when idle
	 * (MADV_HUGEPAGE, MADV_NOHUGEPAGE: BUF_BULK in packet.h).
	 */
	ALLOW_IF(madvise, ONE_OF(2, SB_MADV_DONTNEED, SB_MADV_FREE,
	    SB_MADV_POPULATE_WRITE, SB_MADV_HUGEPAGE, SB_MADV_NOHUGEPAGE)),
	/* realloc(3) of a large block (NSS buffers): moved, never placed. */
	ALLOW_IF(mremap, LONG_ONE_OF(3, 0, SB_MREMAP_MAYMOVE)),
	ALLOW(brk),		/* libc's allocator */

	/* Time, where the vDSO cannot answer. */
#ifdef __NR_clock_gettime
	ALLOW(clock_gettime),	/* transfer times, the transfer log */
#endif
#ifdef __NR_clock_gettime64
	ALLOW(clock_gettime64),	/* the same with a 64-bit time_t */
#endif
#ifdef __NR_gettimeofday
	ALLOW(gettimeofday),	/* the same, older libcs */
#endif
#ifdef __NR_time
	ALLOW(time),		/* the time of a transfer log line */
#endif

	/*
	 * syslog(3) (it connects again after a syslogd restart) and the name
	 * service's daemons (nscd, sssd, systemd's userdb): unix sockets only.
	 */
#ifdef __NR_socket
	/* AF_UNIX alone, a stream or datagram socket, no protocol. */
	ALLOW_IF(socket, ONE_OF(0, AF_UNIX),
	    MASKED_ONE_OF(1, ~(uint32_t)(SOCK_CLOEXEC | SOCK_NONBLOCK),
	    SOCK_STREAM, SOCK_DGRAM), ONE_OF(2, 0)),
#endif
#ifdef __NR_connect
	ALLOW(connect),		/* /dev/log, the daemons' sockets */
#endif
#ifdef __NR_sendto
	ALLOW_IF(sendto, NONE_OF(3, ~(uint32_t)SEND_FLAGS)),	/* syslog(3) */
#endif
#ifdef __NR_send
	ALLOW_IF(send, NONE_OF(3, ~(uint32_t)SEND_FLAGS)), /* the same */
#endif
#ifdef __NR_sendmsg
	/*
	 * NSS daemons (nss_systemd).  What a message carries (SCM_RIGHTS:
	 * descriptors) is in memory, where a filter cannot look.
	 */
	ALLOW_IF(sendmsg, NONE_OF(2, ~(uint32_t)SEND_FLAGS)),
#endif
#ifdef __NR_recvfrom
	ALLOW(recvfrom),	/* NSS daemons */
#endif
#ifdef __NR_recv
	ALLOW(recv),		/* the same, where libc names it so */
#endif
#ifdef __NR_recvmsg
	ALLOW(recvmsg),		/* nscd passes its cache as a descriptor */
#endif
#ifdef __NR_socketcall
	/*
	 * The same calls where libc makes them through socketcall(2), but
	 * socket(2): its arguments are in memory, where a filter cannot
	 * look, so it could not be held to AF_UNIX.  For the same reason
	 * the socket options are not held to stdout there.
	 */
	ALLOW_IF(socketcall, ONE_OF(0, SC_CONNECT, SC_SEND, SC_SENDTO,
	    SC_SENDMSG, SC_RECV, SC_RECVFROM, SC_RECVMSG, SC_SETSOCKOPT,
	    SC_GETSOCKOPT)),
#endif
	ALLOW(getpid),		/* syslog's LOG_PID; a signal to itself */
#ifdef __NR_getrandom
	ALLOW(getrandom),	/* nss_systemd seeds its hash tables */
#endif
	/*
	 * libc's locks (stdio, syslog, NSS): waits and wake-ups, never the
	 * priority-inheritance operations.
	 */
	ALLOW_IF(futex, FUTEX_CHECK),
#ifdef __NR_futex_time64
	ALLOW_IF(futex_time64, FUTEX_CHECK), /* with a 64-bit time_t */
#endif

	/*
	 * Signals: a handler that only sets a flag, and after a clean end
	 * the signal raised again at the process itself, with its default
	 * action (signal(sig, SIG_DFL); raise(sig)).
	 */
	ALLOW(rt_sigaction),	/* signal(sig, SIG_DFL) */
	ALLOW(rt_sigprocmask),	/* raise(), nss_systemd blocks signals */
	ALLOW(rt_sigreturn),	/* the end of a handler */
#ifdef __NR_sigreturn
	ALLOW(sigreturn),	/* the same on 32-bit systems */
#endif
	ALLOW(restart_syscall),	/* poll(2) resumed after a stop */
	ALLOW(gettid),		/* raise() */
	ALLOW_IF(kill, SELF(0)),	/* kill(getpid(), sig) */
	ALLOW_IF(tgkill, SELF(0)),	/* raise() in glibc */
	ALLOW_IF(tkill, SELF(0)),	/* raise() in musl */
	ALLOW(exit_group),	/* the end of the session: _exit() */
	ALLOW(exit),		/* _exit()'s fallback in libc; a worker's end */

	/*
	 * The storage workers (jobs.c): threads, made while storage waits
	 * and ended when the session is idle, and the eventfd through which
	 * they wake the loop.  clone3(2) takes its flags in memory, where a
	 * filter cannot look: it answers as a kernel without it does, and
	 * the C library calls clone(2), whose flags the row holds to a
	 * thread's.
	 */
	ALLOW_IF(clone, LONG_ONE_OF(SB_CLONE_FLAGS_ARG, SB_CLONE_FLAGS)),
#ifdef __NR_clone3
	UNKNOWN(clone3),	/* glibc tries it first */
#endif
	ALLOW(set_robust_list),	/* a new thread, in glibc */
#ifdef __NR_rseq
	ALLOW(rseq),		/* a new thread, in glibc 2.35 and later */
#endif
#ifdef __NR_membarrier
	ALLOW(membarrier),	/* musl's thread list, at a thread's end */
#endif
	ALLOW(eventfd2),	/* a worker wakes the loop's poll(2) */
	/* A worker's own policy, SCHED_BATCH (sys_sched_batch()). */
	ALLOW_IF(sched_setscheduler, ONE_OF(0, 0), ONE_OF(1, SB_SCHED_BATCH)),
	ALLOW(getrusage),	/* whether a slow storage call slept */

#ifdef SB_ASAN
	/*
	 * The sanitizer builds: AddressSanitizer reads the signal stack before
	 * each call that does not return (end_session()).  LeakSanitizer's
	 * check at exit() (a thread, ptrace) is never reached: a session ends
	 * with _exit().
	 */
	ALLOW(sigaltstack),
	/* Its record of a new thread: pthread_getattr_np(). */
	ALLOW(sched_getaffinity),
#endif
#ifdef SFTP_FUZZ
	/*
	 * The fuzz harness (tests/fuzz/fuzz_session.c) runs session after
	 * session in the thread the filter confines, and rebuilds its jail
	 * there in between: start-up again (getuid, geteuid and getegid of
	 * -A's fs_upload_init(), getrlimit of the handle table, umask of -u,
	 * PR_SET_DUMPABLE, chdir of -d and -r, realpath(3) of -r), and its
	 * own descriptors, directories, listings and chroot (to leave the
	 * jail before a report).
	 */
#ifdef __NR_getuid
	ALLOW(getuid),
	ALLOW(geteuid),
	ALLOW(getegid),
#endif
#ifdef __NR_getuid32
	ALLOW(getuid32),
	ALLOW(geteuid32),
	ALLOW(getegid32),
#endif
#ifdef __NR_getrlimit
	ALLOW(getrlimit),
#endif
#ifdef __NR_prlimit64
	ALLOW(prlimit64),
#endif
	ALLOW(umask),
	ALLOW_IF(prctl, ONE_OF(0, PR_SET_DUMPABLE)),
#ifdef __NR_access
	ALLOW(access),
#endif
	ALLOW(faccessat),
#ifdef __NR_faccessat2
	ALLOW(faccessat2),
#endif
	ALLOW(chdir),
	ALLOW(fchdir),
#ifdef __NR_dup2
	ALLOW(dup2),
#endif
	ALLOW(dup3),
	ALLOW(chroot),
	ALLOW(sysinfo),		/* qsort(3) of a large directory's names */
#endif /* SFTP_FUZZ */

	/*
	 * Never, with EPERM: running a program, making a process (clone(2)
	 * other than a thread's, above), reaching into another process,
	 * listening, mounting,
	 * loading kernel code, the kernel's other interpreters and queues,
	 * changing identity or namespace.
	 */
	REFUSE(execve),
#ifdef __NR_execveat
	REFUSE(execveat),
#endif
#ifdef __NR_fork
	REFUSE(fork),
#endif
#ifdef __NR_vfork
	REFUSE(vfork),
#endif
	REFUSE(ptrace),
	REFUSE(process_vm_readv),
	REFUSE(process_vm_writev),
#ifdef __NR_bind
	REFUSE(bind),
	REFUSE(listen),
#endif
#ifdef __NR_accept
	REFUSE(accept),
#endif
#ifdef __NR_accept4
	REFUSE(accept4),
#endif
	REFUSE(mount),
	REFUSE(umount2),
	REFUSE(pivot_root),
#ifdef __NR_move_mount
	REFUSE(move_mount),
	REFUSE(open_tree),
	REFUSE(fsopen),
	REFUSE(fsconfig),
	REFUSE(fsmount),
	REFUSE(fspick),
#endif
#ifdef __NR_mount_setattr
	REFUSE(mount_setattr),
#endif
#ifndef SFTP_FUZZ
	REFUSE(chroot),
#endif
#ifdef __NR_bpf
	REFUSE(bpf),
#endif
	REFUSE(perf_event_open),
#ifdef __NR_userfaultfd
	REFUSE(userfaultfd),
#endif
#ifdef __NR_io_uring_setup
	REFUSE(io_uring_setup),
	REFUSE(io_uring_enter),
	REFUSE(io_uring_register),
#endif
	REFUSE(keyctl),
	REFUSE(add_key),
	REFUSE(request_key),
#ifdef __NR_kexec_load
	REFUSE(kexec_load),
#endif
#ifdef __NR_kexec_file_load
	REFUSE(kexec_file_load),
#endif
	REFUSE(init_module),
#ifdef __NR_finit_module
	REFUSE(finit_module),
#endif
	REFUSE(delete_module),
	REFUSE(setuid),
	REFUSE(setgid),
	REFUSE(setreuid),
	REFUSE(setregid),
	REFUSE(setresuid),
	REFUSE(setresgid),
	REFUSE(setfsuid),
	REFUSE(setfsgid),
	REFUSE(setgroups),
#ifdef __NR_setuid32
	REFUSE(setuid32),
	REFUSE(setgid32),
	REFUSE(setreuid32),
	REFUSE(setregid32),
	REFUSE(setresuid32),
	REFUSE(setresgid32),
	REFUSE(setfsuid32),
	REFUSE(setfsgid32),
	REFUSE(setgroups32),
#endif
	REFUSE(capset),
	REFUSE(unshare),
	REFUSE(setns),
};
#define NRULES	(sizeof rules / sizeof rules[0])

/*
 * Under -r, the filter refuses these calls with EPERM before any row of
 * rules[] is tried: there they are allowed for serving without -r alone.
 *
 * What -r holds once a bug has handed the process to the client.  Landlock
 * keeps opening, making, removing, renaming and linking files beneath the
 * root, but it has no right for a file's mode, owner or times, nor for
 * reading its attributes; it does not check O_PATH opens; and it governs
 * truncation only from ABI 3 (Linux 6.2).  Under -r, fs.c reaches every
 * file through descriptors that openat2(2) opened beneath the root, and
 * never makes the calls below that resolve a path of their own from the
 * real "/" or the current directory (utime, utimes, futimesat and access
 * are not allowed at all).  Refusing them closes truncation outside the
 * root on every ABI: truncate(2) is refused, and ftruncate(2) wants a
 * descriptor open for writing, which Landlock grants only beneath the
 * root.  (On ABI 2, opening a file read-only with O_TRUNC truncates it
 * too: of the files outside, only those of the lookups, and only for an
 * account that may write them, which normally only root may.)
 *
 * A filter cannot close the rest.  The *at() calls that fs.c needs under
 * -r (fchmodat, fchmodat2, fchownat, utimensat, newfstatat or statx,
 * readlinkat, openat with O_PATH) take a path, which a filter cannot read;
 * an absolute path makes their directory argument moot, and AT_EMPTY_PATH
 * with a path that is not empty resolves that path.  So a taken-over
 * session under -r can still change the mode, group (owner, as root) and
 * times of any file the account owns outside the root, and read the
 * attributes of any path and the target of any symlink it can reach; it
 * cannot read, write, truncate, make, remove, rename or link a file there.
 * chroot(2) into the root inside a new user namespace would close that
 * too, and is not done: where the kernel lets an unprivileged process make
 * one at all, it may map only its own uid and gid, so stat(2) would report
 * every other owner as the overflow id 65534 (ATTRS and long names would
 * change, and the server would no longer be a drop-in replacement), a
 * chown to another group of the account would fail, and the name service
 * would read the root's /etc/passwd instead of the system's.
 *
 * Unix sockets.  Without -r, socket(AF_UNIX) and connect(2) serve the
 * system log and the name service's daemons (nscd, sssd, systemd's userdb,
 * nslcd, winbind), and reach whatever else the account may connect to:
 * its own service manager (systemd --user, with pam_systemd) starts any
 * program outside the sandbox on request, and SCM_RIGHTS hands a listener
 * any descriptor.  Without -r that reaches no file the session could not
 * change anyway (it may write the account's start-up files); under -r it
 * would undo the root, so both are refused there.  The system log's socket
 * is connected at start (log.c, LOG_NDELAY) and stays; after a restart of
 * the system logger syslog(3) cannot connect again, and the session's
 * later lines are lost.  Lookups find what the files hold, nscd's clients
 * falling back to them; sssd answers from its memory cache, or through a
 * connection made at start while sssd keeps it open; a user or group known
 * only to a daemon is shown by number.  What stays: a datagram sent with
 * an address (sendto, sendmsg) from the log's socket to any datagram
 * socket the account may write to, descriptors attached; and where libc
 * goes through socketcall(2) (i386, s390x), whose socket operation is
 * refused anyway, its connect aiming that same socket elsewhere.
 */
static const long not_under_r[] = {
	/* Paths resolved by the call itself. */
#ifdef __NR_stat
	__NR_stat,
#endif
#ifdef __NR_stat64
	__NR_stat64,
#endif
#ifdef __NR_lstat
	__NR_lstat,
#endif
#ifdef __NR_lstat64
	__NR_lstat64,
#endif
#ifdef __NR_readlink
	__NR_readlink,
#endif
#ifdef __NR_statfs
	__NR_statfs,
#endif
#ifdef __NR_statfs64
	__NR_statfs64,
#endif
#ifdef __NR_chmod
	__NR_chmod,
#endif
#ifdef __NR_chown
	__NR_chown,
#endif
#ifdef __NR_chown32
	__NR_chown32,
#endif
#ifdef __NR_lchown
	__NR_lchown,
#endif
#ifdef __NR_lchown32
	__NR_lchown32,
#endif
#ifdef __NR_truncate
	__NR_truncate,
#endif
#ifdef __NR_truncate64
	__NR_truncate64,
#endif
#ifdef __NR_mkdir
	__NR_mkdir,
#endif
#ifdef __NR_rmdir
	__NR_rmdir,
#endif
#ifdef __NR_unlink
	__NR_unlink,
#endif
#ifdef __NR_rename
	__NR_rename,
#endif
#ifdef __NR_link
	__NR_link,
#endif
#ifdef __NR_symlink
	__NR_symlink,
#endif
	/* New sockets. */
#ifdef __NR_socket
	__NR_socket,
#endif
#ifdef __NR_connect
	__NR_connect,
#endif
};
#define NNOT_UNDER_R	(sizeof not_under_r / sizeof not_under_r[0])

/*
 * The names of all calls, for the log: see sysnames.h.  The names are
 * held in the rows, not pointed at: a table of pointers is relocated at
 * start, and its pages are then each session's own memory.
 */
static const struct {
	int nr;
	char name[32];
} sys_names[] = {
#include "sysnames.h"
};

/* The name of call nr, or "unknown". */
static const char *
sys_name(long nr)
{
	for (size_t i = 0; i < sizeof sys_names / sizeof sys_names[0]; i++)
		if (sys_names[i].nr == nr)
			return sys_names[i].name;
	return "unknown";
}

/* Room for the program: the kernel's limit (BPF_MAXINSNS). */
#define PROG_MAX	4096
/* Checks in one row. */
#define ROW_CHECKS_MAX	4

struct prog {
	struct sb_insn insn[PROG_MAX];
	size_t len;
};

/* A jump to the refusal of a row, to point there once it is known. */
struct fixup {
	size_t at;
	int jt;		/* the jump's true branch, else its false one */
};

/* Appends an instruction; returns its index. */
static size_t
emit(struct prog *p, uint16_t code, uint8_t jt, uint8_t jf, uint32_t k)
{
	if (p->len >= PROG_MAX)
		abort();	/* the list outgrew the kernel's limit */
	p->insn[p->len].code = code;
	p->insn[p->len].jt = jt;
	p->insn[p->len].jf = jf;
	p->insn[p->len].k = k;
	return p->len++;
}

/* Points a branch of the jump at f->at to instruction target. */
static void
patch(struct prog *p, const struct fixup *f, size_t target)
{
	size_t off = target - f->at - 1;

	if (target <= f->at || off > UINT8_MAX)
		abort();	/* a row too long for one jump: a bug */
	if (f->jt)
		p->insn[f->at].jt = (uint8_t)off;
	else
		p->insn[f->at].jf = (uint8_t)off;
}

/*
 * Whether row i is left out: its number has a REFUSE or UNKNOWN row (the
 * refusal wins, wherever the rows sit), or an earlier row of the same kind (the
 * first wins).  The unit test fails on either, naming the call.
 */
static int
shadowed(size_t i)
{
	int refuse = rules[i].kind != R_ALLOW;

	for (size_t j = 0; j < NRULES; j++) {
		if (j == i || rules[j].nr != rules[i].nr)
			continue;
		if (rules[j].kind != R_ALLOW && !refuse)
			return 1;
		if (j < i && (rules[j].kind != R_ALLOW) == refuse)
			return 1;
	}
	return 0;
}

/*
 * One check of a row: falls through when it holds, and otherwise jumps to
 * the row's refusal (the jumps are added to fail[], two at most).
 */
static void
emit_check(struct prog *p, const struct arg_check *c, uint32_t pid,
    struct fixup *fail, size_t *nfail)
{
	struct fixup skip = { 0, 0 };

	if (c->when != 0) {
		emit(p, BPF_LD_ABS, 0, 0, SD_ARG_LO(c->when - 1));
		skip.at = emit(p, BPF_JEQ, 0, 0, c->when_value);
		skip.jt = 0;
	}
	if (c->wide && sizeof(long) > 4) {
		emit(p, BPF_LD_ABS, 0, 0, SD_ARG_HI(c->arg));
		fail[*nfail].at = emit(p, BPF_JEQ, 0, 0, 0);
		fail[(*nfail)++].jt = 0;
	}
	emit(p, BPF_LD_ABS, 0, 0, SD_ARG_LO(c->arg));
	switch (c->op) {
	case ARG_ONE_OF:
		if (c->mask != ~0U)
			emit(p, BPF_AND, 0, 0, c->mask);
		/* A match goes on past the last test. */
		for (size_t v = 0; v + 1 < c->nvalues; v++)
			emit(p, BPF_JEQ, (uint8_t)(c->nvalues - 1 - v), 0,
			    c->values[v]);
		fail[*nfail].at = emit(p, BPF_JEQ, 0, 0,
		    c->values[c->nvalues - 1]);
		fail[(*nfail)++].jt = 0;
		break;
	case ARG_NONE_OF:
		fail[*nfail].at = emit(p, BPF_JSET, 0, 0, c->mask);
		fail[(*nfail)++].jt = 1;
		break;
	case ARG_SELF:
		fail[*nfail].at = emit(p, BPF_JEQ, 0, 0, pid);
		fail[(*nfail)++].jt = 0;
		break;
	}
	if (c->when != 0)
		patch(p, &skip, p->len);
}

/*
 * One row; bad_args is the answer to arguments it does not allow.  The
 * accumulator holds the call's number on entry; a row that looks at
 * arguments ends in a return either way, so the next row finds the number
 * still there.
 */
static void
emit_rule(struct prog *p, const struct rule *r, uint32_t pid,
    uint32_t bad_args)
{
	struct fixup head, fail[2 * ROW_CHECKS_MAX];
	size_t nfail = 0, refuse;

	if (r->nchecks > ROW_CHECKS_MAX)
		abort();	/* a row with too many checks: a bug */
	head.at = emit(p, BPF_JEQ, 0, 0, (uint32_t)r->nr);
	head.jt = 0;
	if (r->kind != R_ALLOW) {
		emit(p, BPF_RET, 0, 0, RET_ERRNO(r->kind == R_REFUSE ? EPERM :
		    ENOSYS));
		patch(p, &head, p->len);
		return;
	}
	for (size_t i = 0; i < r->nchecks; i++)
		emit_check(p, &r->checks[i], pid, fail, &nfail);
	emit(p, BPF_RET, 0, 0, RET_ALLOW);
	if (nfail > 0) {
		refuse = emit(p, BPF_RET, 0, 0, bad_args);
		for (size_t i = 0; i < nfail; i++)
			patch(p, &fail[i], refuse);
	}
	patch(p, &head, p->len);
}

/*
 * The whole filter, for this process (pid), and for -r when confined.
 * With trap, a call that no row names and a call with arguments that
 * its row does not allow are trapped (see TRAP_OFF_LIST); without (no
 * handler), they fail with ENOSYS and EPERM, unlogged.
 */
/*
 * Without -A, linkat(2) is held to the flags of hardlink@openssh.com (0):
 * no descriptor is linked by AT_EMPTY_PATH, nor through /proc, which only
 * an unnamed upload needs (fs.c).  This row comes first, and decides.
 */
static const struct rule link_rows[] = {
	ALLOW_IF(linkat, ONE_OF(4, 0)),
};
/* And these are off the list without -A (copy_xattrs() in fs.c). */
static const long upload_calls[] = {
	__NR_flistxattr, __NR_fgetxattr, __NR_fsetxattr, __NR_fremovexattr,
};

static void
build_filter(struct prog *p, uint32_t pid, int confined, int uploads,
    int trap)
{
	struct rule r = { 0, NULL, R_REFUSE, NULL, 0 };
	uint32_t off_list = trap ? RET_TRAP | TRAP_OFF_LIST :
	    RET_ERRNO(ENOSYS);
	uint32_t bad_args = trap ? RET_TRAP | TRAP_ARGUMENTS :
	    RET_ERRNO(EPERM);

	p->len = 0;
	/* Another ABI numbers its calls differently: kill. */
	emit(p, BPF_LD_ABS, 0, 0, SD_ARCH);
	emit(p, BPF_JEQ, 1, 0, SB_AUDIT_ARCH);
	emit(p, BPF_RET, 0, 0, RET_KILL);
	emit(p, BPF_LD_ABS, 0, 0, SD_NR);
#ifdef SB_X32_BIT
	/* x32 shares x86-64's arch value, with a bit in the number. */
	emit(p, BPF_JSET, 0, 1, SB_X32_BIT);
	emit(p, BPF_RET, 0, 0, RET_KILL);
#endif
	/* First, wherever their rows sit: the first rule to match decides. */
	for (size_t i = 0; confined && i < NNOT_UNDER_R; i++) {
		r.nr = not_under_r[i];
		emit_rule(p, &r, pid, bad_args);
	}
	if (!uploads)
		emit_rule(p, &link_rows[0], pid, bad_args);
	for (size_t i = 0; !uploads && i < sizeof upload_calls /
	    sizeof upload_calls[0]; i++) {
		emit(p, BPF_JEQ, 0, 1, (uint32_t)upload_calls[i]);
		emit(p, BPF_RET, 0, 0, off_list);
	}
	for (size_t i = 0; i < NRULES; i++)
		if (!shadowed(i))
			emit_rule(p, &rules[i], pid, bad_args);
	emit(p, BPF_RET, 0, 0, off_list);
}

/*
 * The calls that were trapped, each once, for sandbox_report() to log: the
 * number plus one (0 is a free slot), with NOTE_ARGUMENTS for a call whose
 * arguments were refused; off_list_lost when there was no room.  Atomics,
 * for a handler that may run in any thread at any time.
 */
#define OFF_LIST_MAX	16
#define NOTE_ARGUMENTS	0x40000000
static atomic_int off_list[OFF_LIST_MAX];
static atomic_int off_list_lost;
static size_t off_list_logged;

/* Notes a trapped call; async-signal-safe. */
static void
note_trapped(int note)
{
	int want;

	for (size_t i = 0; i < OFF_LIST_MAX; i++) {
		want = 0;
		if (atomic_compare_exchange_strong(&off_list[i], &want, note) ||
		    want == note)
			return;
	}
	atomic_store(&off_list_lost, 1);
}

/*
 * The register that holds a call's result, in the context of the SIGSYS
 * that stopped it (<sys/ucontext.h>: REG_RAX, REG_EAX).
 */
#if defined(__x86_64__)
#define SB_RESULT(uc)	((uc)->uc_mcontext.gregs[13])
#elif defined(__i386__)
#define SB_RESULT(uc)	((uc)->uc_mcontext.gregs[11])
#elif defined(__aarch64__)
#define SB_RESULT(uc)	((uc)->uc_mcontext.regs[0])
#elif defined(__arm__)
#define SB_RESULT(uc)	((uc)->uc_mcontext.arm_r0)
#elif defined(__s390x__)
#define SB_RESULT(uc)	((uc)->uc_mcontext.gregs[2])
#endif

/*
 * SIGSYS of a trapped call: it fails with ENOSYS (off the list, as if the
 * kernel did not have it) or EPERM (arguments refused), and is noted for
 * the log.  The sanitizer and fuzz builds abort at a call off the list
 * instead, naming it, so that no test passes over it.  A SIGSYS that
 * another process sent is ignored.  While SIGSYS is blocked (in the handler
 * of SIGTERM and its kin, in raise()) a trapped call would end the process
 * instead: the calls made there are all allowed.
 */
static void
trapped(int sig, siginfo_t *si, void *ctx)
{
	ucontext_t *uc = ctx;
	int args;

	(void)sig;
	if (si->si_code != SYS_SECCOMP_CODE)
		return;
	args = si->si_errno == TRAP_ARGUMENTS;
#ifdef SB_ASAN
	if (!args) {
		char msg[128];

		(void)snprintf(msg, sizeof msg, "sandbox: system call %d (%s) "
		    "is not on the list (sandbox.c)", si->si_syscall,
		    sys_name(si->si_syscall));
		__sanitizer_report_error_summary(msg);
		__sanitizer_print_stack_trace();
		abort();
	}
#endif
	note_trapped((si->si_syscall + 1) | (args ? NOTE_ARGUMENTS : 0));
	SB_RESULT(uc) = args ? -EPERM : -ENOSYS;
}

void
sandbox_report(void)
{
	int note, nr;

	while (off_list_logged < OFF_LIST_MAX &&
	    (note = atomic_load(&off_list[off_list_logged])) != 0) {
		nr = (note & ~NOTE_ARGUMENTS) - 1;
		error("sandbox: system call %d (%s) refused: %s", nr,
		    sys_name(nr), note & NOTE_ARGUMENTS ?
		    "arguments not on the list" : "not on the list");
		off_list_logged++;
	}
	if (atomic_exchange(&off_list_lost, 0))
		error("sandbox: more system calls refused than logged: not on "
		    "the list");
}

/*
 * Installs the filter, for -r when confined and -A when uploads; returns 0,
 * or -1 with errno.
 */
static int
seccomp_enter(int confined, int uploads)
{
	struct sigaction sa;
	struct sb_prog fprog;
	struct prog *p;
	int trap = 1, r, e;

	/* Without the handler a trapped call would kill the process. */
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = trapped;
	sa.sa_flags = SA_SIGINFO;
	if (sigaction(SIGSYS, &sa, NULL) == -1)
		trap = 0;
	/* The kernel keeps a copy: the program's pages go back at once. */
	if ((p = mmap(NULL, sizeof *p, PROT_READ | PROT_WRITE, MAP_PRIVATE |
	    MAP_ANONYMOUS, -1, 0)) == MAP_FAILED)
		return -1;
	build_filter(p, (uint32_t)getpid(), confined, uploads, trap);
	fprog.len = (unsigned short)p->len;
	fprog.filter = p->insn;
	r = prctl(PR_SET_SECCOMP, SB_SECCOMP_MODE_FILTER, &fprog, 0, 0);
	e = errno;
	(void)munmap(p, sizeof *p);
	errno = e;
	return r;
}
#else
static int
seccomp_enter(int confined, int uploads)
{
	(void)confined;
	(void)uploads;
	errno = ENOTSUP;
	return -1;
}

void
sandbox_report(void)
{
}
#endif /* HAVE_FILTER */

/*
 * The best Landlock ABI the kernel offers, or -1 with errno (ENOSYS: not
 * built in, EOPNOTSUPP: turned off at boot).
 */
static int
landlock_abi(void)
{
	return (int)syscall(NR_LL_CREATE, NULL, (size_t)0,
	    (uint32_t)LL_CREATE_RULESET_VERSION);
}

/* The file rights ABI abi knows. */
static uint64_t
fs_rights(int abi)
{
	uint64_t r = (LL_FS_MAKE_SYM << 1) - 1;	/* ABI 1 */

	if (abi >= 2)
		r |= LL_FS_REFER;
	if (abi >= 3)
		r |= LL_FS_TRUNCATE;
	if (abi >= 5)
		r |= LL_FS_IOCTL_DEV;
	return r;
}

/*
 * Grants rights on path and beneath it to the ruleset; for a file, only
 * those a file can have.  Returns 0, or -1 with errno.
 */
static int
allow_path(int ruleset, const char *path, uint64_t rights)
{
	struct sb_path_beneath pb;
	struct stat st;
	int fd, r = -1, e;

	if ((fd = sys_open_path(path)) == -1)
		return -1;
	if (fstat(fd, &st) == 0) {
		if (!S_ISDIR(st.st_mode))
			rights &= LL_FS_EXECUTE | LL_FS_WRITE_FILE |
			    LL_FS_READ_FILE | LL_FS_TRUNCATE | LL_FS_IOCTL_DEV;
		memset(&pb, 0, sizeof pb);
		pb.allowed_access = rights;
		pb.parent_fd = fd;
		r = (int)syscall(NR_LL_ADD, ruleset, LL_RULE_PATH_BENEATH, &pb,
		    (uint32_t)0);
	}
	e = errno;
	(void)close(fd);
	errno = e;
	return r;
}

/*
 * The Landlock ruleset for ABI abi: with root, files beneath it and the
 * lookups' reads; TCP and the scopes where abi has them.  Returns 0, or -1
 * with errno.
 */
static int
landlock_enter(const char *root, int abi)
{
	struct sb_ruleset_attr attr;
	uint64_t all;
	size_t size;
	int fd, r = -1, e;

	memset(&attr, 0, sizeof attr);
	all = fs_rights(abi);
	if (root != NULL)
		attr.handled_access_fs = all;
	size = offsetof(struct sb_ruleset_attr, handled_access_net);
	if (abi >= 4) {
		attr.handled_access_net = LL_NET_BIND_TCP | LL_NET_CONNECT_TCP;
		size = offsetof(struct sb_ruleset_attr, scoped);
	}
	if (abi >= 6) {
		attr.scoped = LL_SCOPE_ABSTRACT_UNIX | LL_SCOPE_SIGNAL;
		size = sizeof attr;
	}
	if ((fd = (int)syscall(NR_LL_CREATE, &attr, size, (uint32_t)0)) == -1)
		return -1;
	if (root != NULL && allow_path(fd, root, all & ~LL_FS_NOT_BENEATH) ==
	    -1)
		goto out;
	for (size_t i = 0; root != NULL &&
	    i < sizeof lookup_paths / sizeof lookup_paths[0]; i++)
		(void)allow_path(fd, lookup_paths[i],
		    LL_FS_READ_FILE | LL_FS_READ_DIR);
	r = (int)syscall(NR_LL_RESTRICT, fd, (uint32_t)0);
out:
	e = errno;
	(void)close(fd);
	errno = e;
	return r;
}

/*
 * Loads the name service's modules while the process may still open and
 * map them.  The C library loads a module when a lookup first reaches it,
 * so a name that no service knows walks every one, for users and for
 * groups; the session's own user was looked up at start.
 */
static void
warm_up_lookups(void)
{
	(void)getpwnam("");
	(void)getgrnam("");
}

/*
 * Landlock as far as the kernel allows.  Returns its ABI when files are
 * held beneath root, with desc saying what else is refused; otherwise 0,
 * with desc saying what came of it.  Both for the log.
 */
static int
landlock_part(const char *root, char *desc, size_t size)
{
	const char *net;
	int abi;

	if ((abi = landlock_abi()) == -1) {
		(void)snprintf(desc, size, "landlock missing (%s)",
		    strerror(errno));
		return 0;
	}
	if (root != NULL && abi < 2) {
		/* ABI 1 refuses every rename and link across directories. */
		(void)snprintf(desc, size, "landlock ABI %d not used: it "
		    "refuses renames across directories", abi);
		return 0;
	}
	if (root == NULL && abi < 4) {
		(void)snprintf(desc, size, "landlock ABI %d: nothing to refuse "
		    "without -r", abi);
		return 0;
	}
	if (landlock_enter(root, abi) == -1) {
		(void)snprintf(desc, size, "landlock ABI %d failed (%s)", abi,
		    strerror(errno));
		return 0;
	}
	if (abi >= 6)
		net = "TCP refused, abstract sockets and signals scoped";
	else if (abi >= 4)
		net = "TCP refused";
	else
		net = "";
	if (root != NULL) {
		(void)snprintf(desc, size, "%s%s", *net != '\0' ? ", " : "",
		    net);
		return abi;
	}
	(void)snprintf(desc, size, "landlock ABI %d: %s", abi, net);
	return 0;
}

void
sandbox_enter(const char *root, int uploads)
{
	char ll[128], sc[128];
	int abi, loaded;
#ifdef SFTP_FUZZ
	/*
	 * The fuzz harness runs many sessions in one thread: the sandbox is
	 * entered once, or filters would pile up.  No file rule: the harness
	 * rebuilds files outside a session's -r root between sessions, and
	 * checks that root itself.  Sessions with -A and without share the
	 * filter: it has -A's rows.
	 */
	static int entered;

	if (entered)
		return;
	entered = 1;
	root = NULL;
	uploads = 1;
#endif
	/*
	 * Loading a module runs and relocates it, and the kernel maps the
	 * neighbours of each page touched: about 560 KiB where the modules
	 * are systemd's (it brings libm and libcap), held by a session that
	 * may never name a user.  What is the files' own is given back.
	 */
	loaded = sys_objects_loaded();
	warm_up_lookups();
	if (loaded > 0)
		sys_objects_release(loaded);
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == -1) {
		/* Before Linux 3.5: neither mechanism can work. */
		error("sandbox: no_new_privs refused (%s): no seccomp "
		    "filter, no landlock", strerror(errno));
		return;
	}
	if ((abi = landlock_part(root, ll, sizeof ll)) == 0 && root != NULL)
		error("sandbox: %s: files outside the -r root are not refused "
		    "by the kernel", ll);
	if (SB_TSAN)
		(void)snprintf(sc, sizeof sc, "seccomp filter left out "
		    "(a ThreadSanitizer build)");
	else if (seccomp_enter(root != NULL, uploads) == 0)
		(void)snprintf(sc, sizeof sc, "seccomp filter on");
#ifdef HAVE_FILTER
	else
		(void)snprintf(sc, sizeof sc, "seccomp filter missing (%s)",
		    strerror(errno));
#else
	else
		(void)snprintf(sc, sizeof sc, "seccomp filter missing (none "
		    "for this architecture)");
#endif
	if (abi != 0)
		verbose("sandbox: %s; landlock ABI %d: files beneath \"%s\"%s",
		    sc, abi, root, ll);
	else
		verbose("sandbox: %s; %s", sc, ll);
}
#else
void
sandbox_enter(const char *root, int uploads)
{
	(void)root;
	(void)uploads;
	verbose("sandbox: none on this system");
}

void
sandbox_report(void)
{
}
#endif /* __linux__ */
