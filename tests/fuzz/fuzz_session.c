/*
 * libFuzzer harness for a whole session.  The input is the byte stream of
 * a client, fed on stdin to the real server loop and handlers (the server
 * linked without sftp-server-main.c and built with -DSFTP_FUZZ, where the
 * end of a session longjmps back here).
 *
 * The server opens, writes, renames and removes whatever paths the input
 * names, and in CI it runs as root.  Sessions therefore run in a thread of
 * their own (unshare(CLONE_FS | CLONE_FILES)) whose root directory is a
 * private temporary directory (chroot), with descriptors 0 to 2 of its own.
 * libFuzzer's thread keeps the real root, current directory and stderr, so
 * its corpus, crash files and messages are unaffected, and the sanitizer
 * hooks below leave the jail before a report.  Where the kernel allows it,
 * the jail is a 64 MiB tmpfs in the thread's own mount namespace, gone
 * with the process.  Without the right to chroot, not even in a user
 * namespace of its own, the harness refuses to run unless FUZZ_UNSAFE=1 is
 * set.
 *
 * Every session starts in the jail's root from this tree, rebuilt after
 * each session so that runs are independent:
 *	etc/passwd, etc/group	root (uid 0, home /root) and alice (1000)
 *	root/
 *	home/alice/notes, home/alice/up -> ../../file,
 *	home/alice/abs -> /file
 *	file			20000 bytes (READ goes by zero-copy)
 *	dir/a, dir/b, dir/sub/
 *	link -> file, dangling -> nowhere, loop -> loop
 *	outside-MARKER		an empty file
 *
 * The INIT packet's version word picks the server's options; its low byte
 * is the protocol version proper, and version 3 gives the defaults:
 *	0x00000100	stdout is /dev/null instead of a pipe (no zero-copy)
 *	0x00000600	logging: 0 "-e -l DEBUG3", 1 "-l DEBUG3" to syslog
 *			(no /dev/log in the jail), 2 "-e -l INFO",
 *			3 "-e -l QUIET"; stderr is /dev/null
 *	0x00000800	-R
 *	0x00001000	-P with the requests that write
 *	0x00002000	-p with the requests that read
 *	0x00004000	-u 077
 *	0x00018000	-d: 1 "%d", 2 "~alice", 3 "/nowhere/%U" (chdir
 *			fails)
 *	0x00020000	-r ~alice: the session must not reach outside
 *			home/alice
 *	0x00040000	storage that waits (below)
 *	0x00180000	-T: 0 the default (64), 1 "-T 2", 2 "-T 4",
 *			3 "-T 128"
 *	0x00200000	the client reads the replies slowly (16 KiB every
 *			50 us), when stdout is a pipe: the server's writes
 *			block, and a signal (below) may cut one short
 *	0x00400000	-A: atomic uploads
 *	0x00800000	-m 0640 -M 0750: forced modes
 *	0x01000000	-b 2M:2M: bandwidth limits (a READ or WRITE
 *			past 100 KiB in 50 ms is held)
 *
 * Storage that waits: the jail's tmpfs never makes a call wait, so the
 * server would make every storage call in its loop, none in its workers
 * (the ordering rule in sched.c).  With this bit the
 * server (built with -DSFTP_FUZZ, sched.c) starts as if its storage
 * waited, finds no READ's data in the page cache, and before each job's
 * system calls calls storage_wait() below with the job's request id,
 * in the thread that makes them.  So requests go to the server's workers,
 * the job ring and the arena fill, and replies are collected and sent in
 * order while later jobs finish first.  The id (the client's choice, so
 * the fuzzer's) says what the storage does:
 *	0x0000000f	the call waits 20 us times the square of these bits,
 *			up to 4.5 ms (15); at 0 it does not wait at all, from
 *			3 up (180 us) the server sees a call that waited, and
 *			1 and 2 count either way, as the timers' slack goes
 *	0x40000000	the call hangs: HANG_MS, longer than the server's
 *			give-up time after a signal (ABANDON_MS, 20 ms in
 *			the fuzz build)
 *	0x80000000	SIGTERM comes to the session once the call has
 *			waited: it may find the loop anywhere, writing its
 *			replies included
 * A session that is sent a signal ends as a real one does: end_session()
 * waits for the calls in flight, gives up on those that hang, and closes
 * every handle.  A real server then exits, which closes the descriptors
 * of the calls given up: after a session that was sent a signal, the
 * harness closes what it left open instead of reporting it.
 *
 * Under -r the harness checks the confinement.  MARKER is 16 random bytes,
 * new for each session, written every 64 bytes of "file" and into the name
 * "outside-MARKER"; replies (to a file, not a pipe, then) that hold it
 * read something outside.  Everything outside home/alice is compared
 * before and after the session (type, mode, size, links, owner, times,
 * link target), so that a change there is caught too.
 *
 * The session thread runs under the server's sandbox (sandbox.c), which it
 * enters in its first session and keeps: its filter also lets through the
 * harness's own calls in that thread, and traps any other, so that a call
 * the server makes but the filter's list lacks is a crash here.
 *
 * RLIMIT_NOFILE is 64, so the handle table has 59 slots and running out of
 * handles is reachable; RLIMIT_FSIZE is 4 MiB, so that no file grows
 * large.  A descriptor below 64 left open by a session is a bug.
 *
 * For debugging, FUZZ_SESSION_OUT=file appends the replies to file (stdout
 * is then a file, not a pipe) and FUZZ_SESSION_LOG=file appends the
 * server's log on stderr to file.  FUZZ_SESSION_STATS=1 prints at exit how
 * many storage calls waited, how many of them in the server's workers,
 * and how many signals came (run-fuzz.sh checks that its corpus hands
 * work to the workers).
 */
#define _GNU_SOURCE	/* memfd_create(), unshare(), CLONE_FS, memmem() */

#include <sys/types.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pthread.h>
#include <poll.h>
#include <pwd.h>
#include <sched.h>
#include <semaphore.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#include <sanitizer/ubsan_interface.h>

#include "../../packet.h"
#include "../../sftp-server.h"

/* Descriptors the server may use: 59 handles. */
#define FD_LIMIT	64
/* The harness's own descriptors live at or above this, out of its reach. */
#define FD_HIGH		100
#define FSIZE_LIMIT	(4 * 1024 * 1024)
#define TMPFS_SIZE	"64m"
/* Longer inputs are ignored. */
#define INPUT_MAX	(1024 * 1024)
#define FIXTURE_FILE	20000
#define MARKER_LEN	16
/* Room for the listing of everything outside the -r root. */
#define SNAP_SIZE	(64 * 1024)
#define SNAP_DEPTH	16

#define CFG_DEVNULL	0x00000100
#define CFG_LOG_SHIFT	9
#define CFG_READONLY	0x00000800
#define CFG_DENY	0x00001000
#define CFG_ALLOW	0x00002000
#define CFG_UMASK	0x00004000
#define CFG_DIR_SHIFT	15
#define CFG_ROOT	0x00020000
#define CFG_WAIT	0x00040000
#define CFG_OPS_SHIFT	19
#define CFG_SLOW_READER	0x00200000
#define CFG_ATOMIC	0x00400000
#define CFG_MODES	0x00800000
#define CFG_BWLIMIT	0x01000000

/* The ids of storage that waits (see above). */
#define WAIT_UNITS	0x0000000f
#define WAIT_UNIT_NS	20000
#define WAIT_HANG	0x40000000
#define WAIT_SIGNAL	0x80000000
#define HANG_MS		60
/* The slow reader of the replies. */
#define SLOW_READ	16384
#define SLOW_READ_NS	50000

/* The -r root, as the jail and as the server name it. */
#define ROOT_IN_JAIL	"home/alice"
#define ROOT_ARG	"~alice"

/* From sftp-server.c and sched.c built with -DSFTP_FUZZ. */
extern jmp_buf sftp_fuzz_exit;
extern int sftp_fuzz_status;
extern void (*sftp_fuzz_storage_wait)(uint32_t);

int	LLVMFuzzerInitialize(int *, char ***);
int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);
/* Called by UBSan before a report; not in its public header. */
void	__ubsan_on_report(void);

struct snapshot {
	char buf[SNAP_SIZE];
	size_t len;
	int full;
};

static char jail_path[PATH_MAX];
static int jailed;
static int root_fd = -1;	/* the real root, to leave the jail */
static int cwd_fd = -1;		/* libFuzzer's current directory */
static int jail_fd = -1;
static int err_fd = -1;		/* the real stderr */
static int null_fd = -1;
static int log_fd = -1;		/* the server's stderr */
static int in_fd = -1;		/* memfd: the input */
static int out_fd = -1;		/* memfd: the replies, when kept */
static int pipe_r = -1, pipe_w = -1;
static int trace_fd = -1;

static pthread_t fuzzer, session, drainer;
static sem_t go, done;
static const uint8_t *input;
static size_t input_len;
static const char *setup_error;
static int setup_errno;

/* Set in the session thread while it is inside the jail. */
static _Thread_local int in_jail;
/*
 * Set while the session thread is inside the jail: so are the server's
 * workers, which share its root and descriptors.
 */
static volatile sig_atomic_t jail_shared;
/* Whether storage_wait() sent a signal in this session. */
static int waits_signalled;
/* What storage_wait() saw, ever (FUZZ_SESSION_STATS). */
static unsigned long stats_calls, stats_in_workers, stats_signals;
/* The drainer reads the replies slowly (CFG_SLOW_READER). */
static int slow_reader;

static uint64_t rng;
static uint8_t marker[MARKER_LEN];
static char marker_name[sizeof "outside-" + 2 * MARKER_LEN];
static uint8_t fixture_data[FIXTURE_FILE];
static struct snapshot snap_before, snap_after;

static const char passwd_text[] =
    "root:x:0:0:root:/root:/bin/sh\n"
    "alice:x:1000:1000:Alice:/home/alice:/bin/sh\n"
    "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n";
static const char group_text[] =
    "root:x:0:\n"
    "users:x:100:alice\n"
    "alice:x:1000:\n"
    "nogroup:x:65534:\n";

/*
 * Leaves the jail and gives stderr back, so that a sanitizer report and
 * libFuzzer's crash file reach the real file system.  Async-signal-safe;
 * does nothing outside the session thread and the server's workers.
 */
static void
jail_leave(void)
{
	pthread_t self = pthread_self();

	if (!in_jail && (!jail_shared || pthread_equal(self, fuzzer) ||
	    pthread_equal(self, drainer)))
		return;
	in_jail = 0;
	jail_shared = 0;
	(void)dup2(err_fd, STDERR_FILENO);
	if (jailed) {
		(void)fchdir(root_fd);
		(void)chroot(".");
	}
	(void)fchdir(cwd_fd);
}

void
__asan_on_error(void)
{
	jail_leave();
}

void
__ubsan_on_report(void)
{
	jail_leave();
}

/*
 * abort() and failed assertions are reported by ASan, through the hook.
 * No colours: deciding them asks whether stderr is a terminal, with an
 * ioctl(2) that the session's sandbox traps, which would kill the process
 * in the middle of its report.
 */
const char *
__asan_default_options(void)
{
	return "handle_abort=1:handle_sigill=1:halt_on_error=1:color=never";
}

const char *
__ubsan_default_options(void)
{
	return "halt_on_error=1:print_stacktrace=1:color=never";
}

/* A finding, or a harness that cannot go on: report and abort. */
static void __attribute__((format(printf, 1, 2), noreturn))
fail(const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	int e = errno;

	jail_leave();
	va_start(ap, fmt);
	(void)vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (e != 0)
		fprintf(stderr, "fuzz_session: %s: %s\n", msg, strerror(e));
	else
		fprintf(stderr, "fuzz_session: %s\n", msg);
	abort();
}

/* Moves fd to FD_HIGH or above, close-on-exec. */
static int
high(int fd)
{
	int h;

	if (fd == -1)
		fail("setup");
	if ((h = fcntl(fd, F_DUPFD_CLOEXEC, FD_HIGH)) == -1)
		fail("F_DUPFD");
	(void)close(fd);
	return h;
}

static uint64_t
next_random(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static void
put_file(const char *path, const void *data, size_t len, mode_t mode)
{
	int fd;

	if ((fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
	    mode)) == -1)
		fail("create %s", path);
	if (write(fd, data, len) != (ssize_t)len)
		fail("write %s", path);
	(void)close(fd);
}

static void
make_dir(const char *path, mode_t mode)
{
	if (mkdir(path, mode) == -1)
		fail("mkdir %s", path);
}

static void
make_link(const char *target, const char *path)
{
	if (symlink(target, path) == -1)
		fail("symlink %s", path);
}

/* The tree every session starts from, in the current directory. */
static void
make_fixture(void)
{
	static const char notes[] = "alice's notes\n";
	static const char hex[] = "0123456789abcdef";
	uint64_t r;

	/* A session's -u must not change the next one's tree. */
	(void)umask(022);
	/*
	 * Nor may a session without -r that changed the top directory (its
	 * "/") make the next one's -r refuse the path to its root.
	 */
	(void)chmod(".", 0755);
	if (geteuid() == 0)
		(void)chown(".", 0, 0);
	for (size_t i = 0; i < MARKER_LEN; i += 8) {
		r = next_random();
		memcpy(marker + i, &r, 8);
	}
	memcpy(marker_name, "outside-", 8);
	for (size_t i = 0; i < MARKER_LEN; i++) {
		marker_name[8 + 2 * i] = hex[marker[i] >> 4];
		marker_name[9 + 2 * i] = hex[marker[i] & 15];
	}
	marker_name[8 + 2 * MARKER_LEN] = '\0';
	for (size_t i = 0; i + MARKER_LEN <= sizeof fixture_data; i += 64)
		memcpy(fixture_data + i, marker, MARKER_LEN);

	make_dir("etc", 0755);
	put_file("etc/passwd", passwd_text, sizeof passwd_text - 1, 0644);
	put_file("etc/group", group_text, sizeof group_text - 1, 0644);
	make_dir("root", 0700);
	make_dir("home", 0755);
	make_dir("home/alice", 0755);
	put_file("home/alice/notes", notes, sizeof notes - 1, 0644);
	make_link("../../file", "home/alice/up");
	make_link("/file", "home/alice/abs");
	put_file("file", fixture_data, sizeof fixture_data, 0644);
	make_dir("dir", 0755);
	put_file("dir/a", "a\n", 2, 0644);
	put_file("dir/b", "", 0, 0600);
	make_dir("dir/sub", 0755);
	make_link("file", "link");
	make_link("nowhere", "dangling");
	make_link("loop", "loop");
	put_file(marker_name, "", 0, 0644);
}

/*
 * Empties the current directory, however deep the tree under it and however
 * long its paths: depth first with chdir(), one directory stream at a time.
 */
static void
empty_cwd(void)
{
	struct dirent *de;
	DIR *d;
	int depth = 0, down;

	for (;;) {
		if ((d = opendir(".")) == NULL)
			fail("opendir");
		down = 0;
		while (!down && (de = readdir(d)) != NULL) {
			if (strcmp(de->d_name, ".") == 0 ||
			    strcmp(de->d_name, "..") == 0)
				continue;
			if (unlink(de->d_name) == 0 || rmdir(de->d_name) == 0)
				continue;
			if (errno != ENOTEMPTY && errno != EEXIST)
				fail("remove %s", de->d_name);
			if (chdir(de->d_name) == -1)
				fail("chdir %s", de->d_name);
			depth++;
			down = 1;
		}
		(void)closedir(d);
		if (down)
			continue;
		if (depth == 0)
			break;
		if (chdir("..") == -1)
			fail("chdir ..");
		depth--;
	}
}

/* The jail's root: the session's current directory at start. */
static void
enter_top(void)
{
	if ((jailed ? chdir("/") : fchdir(jail_fd)) == -1)
		fail("chdir to the jail");
}

static void __attribute__((format(printf, 2, 3)))
snap_add(struct snapshot *s, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (s->full)
		return;
	va_start(ap, fmt);
	n = vsnprintf(s->buf + s->len, sizeof s->buf - s->len, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof s->buf - s->len)
		s->full = 1;
	else
		s->len += (size_t)n;
}

static int
compare_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/*
 * Lists the tree under dir (a path relative to the jail's root, "" for the
 * root itself), sorted, one line per entry, leaving out the -r root.
 */
static void
snap_tree(struct snapshot *s, const char *dir, int depth)
{
	char path[PATH_MAX], target[PATH_MAX];
	char **names = NULL, **more;
	size_t n = 0, cap = 0;
	struct dirent *de;
	struct stat st;
	ssize_t len;
	DIR *d;

	if (depth > SNAP_DEPTH) {
		snap_add(s, "%s: too deep\n", dir);
		return;
	}
	if ((d = opendir(*dir == '\0' ? "." : dir)) == NULL) {
		snap_add(s, "%s: %s\n", dir, strerror(errno));
		return;
	}
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0)
			continue;
		if (n == cap) {
			cap = cap == 0 ? 16 : 2 * cap;
			if ((more = reallocarray(names, cap,
			    sizeof *names)) == NULL)
				fail("reallocarray");
			names = more;
		}
		if ((names[n++] = strdup(de->d_name)) == NULL)
			fail("strdup");
	}
	(void)closedir(d);
	if (n > 0)
		qsort(names, n, sizeof *names, compare_names);
	for (size_t i = 0; i < n; i++) {
		(void)snprintf(path, sizeof path, "%s%s%s", dir,
		    *dir == '\0' ? "" : "/", names[i]);
		free(names[i]);
		if (strcmp(path, ROOT_IN_JAIL) == 0)
			continue;
		if (lstat(path, &st) == -1) {
			snap_add(s, "%s: %s\n", path, strerror(errno));
			continue;
		}
		snap_add(s, "%s: %o %lld %lu %u:%u %lld.%09ld %lld.%09ld", path,
		    (unsigned)st.st_mode, (long long)st.st_size,
		    (unsigned long)st.st_nlink, (unsigned)st.st_uid,
		    (unsigned)st.st_gid, (long long)st.st_mtim.tv_sec,
		    st.st_mtim.tv_nsec, (long long)st.st_ctim.tv_sec,
		    st.st_ctim.tv_nsec);
		if (S_ISLNK(st.st_mode) &&
		    (len = readlink(path, target, sizeof target - 1)) >= 0) {
			target[len] = '\0';
			snap_add(s, " -> %s", target);
		}
		snap_add(s, "\n");
		if (S_ISDIR(st.st_mode))
			snap_tree(s, path, depth + 1);
	}
	free(names);
}

static void
snapshot(struct snapshot *s)
{
	s->len = 0;
	s->full = 0;
	snap_tree(s, "", 0);
}

/* The first line that differs, for the report. */
static void
snap_diff(const struct snapshot *a, const struct snapshot *b, char *out,
    size_t size)
{
	size_t i = 0, start = 0, end;

	while (i < a->len && i < b->len && a->buf[i] == b->buf[i]) {
		if (a->buf[i] == '\n')
			start = i + 1;
		i++;
	}
	for (end = start; end < b->len && b->buf[end] != '\n'; end++)
		continue;
	if (start >= b->len)
		(void)snprintf(out, size, "entries missing after the session");
	else
		(void)snprintf(out, size, "now \"%.*s\"", (int)(end - start),
		    b->buf + start);
}

/* Under -r: nothing outside the root was changed or read. */
static void
check_confinement(void)
{
	char diff[600];
	struct stat st;
	uint8_t *out;

	enter_top();
	snapshot(&snap_after);
	if (snap_after.full || snap_after.len != snap_before.len ||
	    memcmp(snap_after.buf, snap_before.buf, snap_before.len) != 0) {
		snap_diff(&snap_before, &snap_after, diff, sizeof diff);
		errno = 0;
		fail("-r: the session changed the tree outside its root: %s",
		    diff);
	}
	if (fstat(out_fd, &st) == -1)
		fail("fstat");
	if (st.st_size == 0)
		return;
	out = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, out_fd,
	    0);
	if (out == MAP_FAILED)
		fail("mmap");
	if (memmem(out, (size_t)st.st_size, marker, sizeof marker) != NULL ||
	    memmem(out, (size_t)st.st_size, marker_name,
	    strlen(marker_name)) != NULL) {
		errno = 0;
		fail("-r: a reply holds data or a name from outside the root");
	}
	(void)munmap(out, (size_t)st.st_size);
}

static uint32_t
config_word(const uint8_t *data, size_t len)
{
	/* uint32 length, byte SSH_FXP_INIT, uint32 version */
	if (len < 9 || data[4] != SSH_FXP_INIT)
		return 0;
	return ((uint32_t)data[5] << 24 | (uint32_t)data[6] << 16 |
	    (uint32_t)data[7] << 8 | data[8]) & ~(uint32_t)0xff;
}

/* The server's command line for configuration word cfg; returns argc. */
static int
make_argv(uint32_t cfg, char **argv)
{
	static char *logopts[4][5] = {
		{ "-e", "-l", "DEBUG3", NULL },
		{ "-l", "DEBUG3", "-f", "LOCAL7", NULL },
		{ "-e", "-l", "INFO", NULL },
		{ "-e", "-l", "QUIET", NULL },
	};
	static char *dirs[4] = { NULL, "%d", "~alice", "/nowhere/%U" };
	static char *ops[4] = { NULL, "2", "4", "128" };
	unsigned log = (cfg >> CFG_LOG_SHIFT) & 3;
	int argc = 0;

	/* Outside a jail, syslog would reach the real /dev/log. */
	if (log == 1 && !jailed)
		log = 0;
	argv[argc++] = "sftp-server";
	for (char **o = logopts[log]; *o != NULL; o++)
		argv[argc++] = *o;
	if (cfg & CFG_READONLY)
		argv[argc++] = "-R";
	if (cfg & CFG_ATOMIC)
		argv[argc++] = "-A";
	if (cfg & CFG_MODES) {
		argv[argc++] = "-m";
		argv[argc++] = "0640";
		argv[argc++] = "-M";
		argv[argc++] = "0750";
	}
	if (cfg & CFG_BWLIMIT) {
		argv[argc++] = "-b";
		argv[argc++] = "2M:2M";
	}
	if (cfg & CFG_DENY) {
		argv[argc++] = "-P";
		argv[argc++] = "write,remove,rename,posix-rename,hardlink,"
		    "symlink,setstat,fsetstat,lsetstat,mkdir,rmdir";
	}
	if (cfg & CFG_ALLOW) {
		argv[argc++] = "-p";
		argv[argc++] = "open,close,read,opendir,readdir,stat,lstat,"
		    "fstat,realpath,limits,copy-data,statvfs";
	}
	if (cfg & CFG_UMASK) {
		argv[argc++] = "-u";
		argv[argc++] = "077";
	}
	if (dirs[(cfg >> CFG_DIR_SHIFT) & 3] != NULL) {
		argv[argc++] = "-d";
		argv[argc++] = dirs[(cfg >> CFG_DIR_SHIFT) & 3];
	}
	if (cfg & CFG_ROOT) {
		argv[argc++] = "-r";
		argv[argc++] = ROOT_ARG;
	}
	if (ops[(cfg >> CFG_OPS_SHIFT) & 3] != NULL) {
		argv[argc++] = "-T";
		argv[argc++] = ops[(cfg >> CFG_OPS_SHIFT) & 3];
	}
	argv[argc] = NULL;
	return argc;
}

/*
 * A descriptor below FD_LIMIT other than 0 to 2 leaked from the session.
 * Once a signal came, the session may have given up storage calls (those
 * that hung, or any, on a machine busy enough): their descriptors are left
 * for the process's exit to close, and are closed here.
 */
static void
check_fds(void)
{
	int exited = waits_signalled;

	for (int fd = 0; fd < FD_LIMIT; fd++) {
		if ((fcntl(fd, F_GETFD) != -1) == (fd <= STDERR_FILENO))
			continue;
		if (exited && fd > STDERR_FILENO) {
			(void)close(fd);
			continue;
		}
		errno = 0;
		fail("descriptor %d %s after the session", fd,
		    fd <= STDERR_FILENO ? "closed" : "left open");
	}
}

/*
 * Storage that waits (see above): called by the server before the system
 * calls of the job of request id, in the thread that makes them (one of
 * its workers, or the session thread).  Sleeps in ppoll(2), which the
 * sandbox allows, so that the server sees a call that slept.
 */
static void
storage_wait(uint32_t id)
{
	struct timespec ts;

	__atomic_add_fetch(&stats_calls, 1, __ATOMIC_RELAXED);
	if (!pthread_equal(pthread_self(), session))
		__atomic_add_fetch(&stats_in_workers, 1, __ATOMIC_RELAXED);
	if (id & WAIT_HANG) {
		ts.tv_sec = HANG_MS / 1000;
		ts.tv_nsec = HANG_MS % 1000 * 1000000L;
	} else {
		ts.tv_sec = 0;
		ts.tv_nsec = (long)(id & WAIT_UNITS) * (id & WAIT_UNITS) *
		    WAIT_UNIT_NS;
	}
	/* Its end, whatever cuts it short: a call that waits, waits. */
	while ((ts.tv_sec != 0 || ts.tv_nsec != 0) &&
	    ppoll(NULL, 0, &ts, NULL) == -1 && errno == EINTR)
		continue;
	if (id & WAIT_SIGNAL) {
		__atomic_store_n(&waits_signalled, 1, __ATOMIC_RELAXED);
		__atomic_add_fetch(&stats_signals, 1, __ATOMIC_RELAXED);
		if ((errno = pthread_kill(session, SIGTERM)) != 0)
			fail("pthread_kill");
	}
}

/*
 * The session, on the options of cfg.  With storage that waits, SIGTERM
 * may end it as it would a real one: it is let in while the server runs.
 */
static void
run_server(uint32_t cfg, int argc, char **argv)
{
	sigset_t term;
	int flags;

	waits_signalled = 0;
	__atomic_store_n(&slow_reader, (cfg & CFG_SLOW_READER) != 0,
	    __ATOMIC_RELAXED);
	sftp_fuzz_storage_wait = (cfg & CFG_WAIT) ? storage_wait : NULL;
	(void)sigemptyset(&term);
	(void)sigaddset(&term, SIGTERM);
	if (cfg & CFG_WAIT)
		(void)pthread_sigmask(SIG_UNBLOCK, &term, NULL);
	if (setjmp(sftp_fuzz_exit) == 0) {
		(void)sftp_server_main(argc, argv);
		errno = 0;
		fail("sftp_server_main() returned");
	}
	/*
	 * The server's workers are gone (the end of the session waits for
	 * them), and with them anything that sends a signal.
	 */
	(void)pthread_sigmask(SIG_BLOCK, &term, NULL);
	sftp_fuzz_storage_wait = NULL;
	/* The signal's handler made the shared pipe non-blocking. */
	if ((flags = fcntl(pipe_w, F_GETFL)) != -1 && (flags & O_NONBLOCK))
		(void)fcntl(pipe_w, F_SETFL, flags & ~O_NONBLOCK);
}

/* Appends the replies kept in out_fd to the trace file. */
static void
copy_trace(void)
{
	uint8_t buf[64 * 1024];
	off_t off = 0;
	ssize_t n;

	while ((n = pread(out_fd, buf, sizeof buf, off)) > 0) {
		if (write(trace_fd, buf, (size_t)n) != n)
			fail("FUZZ_SESSION_OUT");
		off += n;
	}
}

/* One session on the current input, then the jail put back as it was. */
static void
run_session(void)
{
	char *argv[32];
	uint32_t cfg;
	int argc, out, keep;

	cfg = config_word(input, input_len);
	/* -r wants a path to its root that only root can change. */
	if (geteuid() != 0)
		cfg &= ~(uint32_t)CFG_ROOT;
	argc = make_argv(cfg, argv);
	if (ftruncate(in_fd, 0) == -1 ||
	    pwrite(in_fd, input, input_len, 0) != (ssize_t)input_len ||
	    lseek(in_fd, 0, SEEK_SET) == -1)
		fail("input file");
	/* Replies to check or to trace go to a file; others are dropped. */
	keep = (cfg & CFG_ROOT) || trace_fd != -1;
	out = (cfg & CFG_DEVNULL) ? null_fd : pipe_w;
	if (keep) {
		if (ftruncate(out_fd, 0) == -1 ||
		    lseek(out_fd, 0, SEEK_SET) == -1)
			fail("output file");
		out = out_fd;
	}
	if (cfg & CFG_ROOT)
		snapshot(&snap_before);
	if (dup2(in_fd, STDIN_FILENO) == -1 ||
	    dup2(out, STDOUT_FILENO) == -1 ||
	    dup2(log_fd, STDERR_FILENO) == -1)
		fail("dup2");
	(void)umask(022);
	run_server(cfg, argc, argv);
	check_fds();
	if (cfg & CFG_ROOT)
		check_confinement();
	if (trace_fd != -1)
		copy_trace();
	enter_top();
	empty_cwd();
	make_fixture();
}

/*
 * Keeps the replies flowing: reads the pipe and drops them; a slow reader
 * (CFG_SLOW_READER) takes SLOW_READ bytes every SLOW_READ_NS.
 */
static void *
drainer_main(void *arg)
{
	static uint8_t buf[256 * 1024];
	struct timespec ts = { 0, SLOW_READ_NS };
	ssize_t n;

	(void)arg;
	for (;;) {
		if (__atomic_load_n(&slow_reader, __ATOMIC_RELAXED)) {
			(void)nanosleep(&ts, NULL);
			n = read(pipe_r, buf, SLOW_READ);
		} else {
			n = read(pipe_r, buf, sizeof buf);
		}
		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
	}
	return NULL;
}

/* Signals belong to libFuzzer's thread: its timer, ^C. */
static void
block_signals(void)
{
	sigset_t set;

	(void)sigfillset(&set);
	(void)sigdelset(&set, SIGSEGV);
	(void)sigdelset(&set, SIGBUS);
	(void)sigdelset(&set, SIGFPE);
	(void)sigdelset(&set, SIGILL);
	(void)sigdelset(&set, SIGABRT);
	(void)pthread_sigmask(SIG_BLOCK, &set, NULL);
}

static void *
session_main(void *arg)
{
	int fd;

	(void)arg;
	block_signals();
	if (unshare(CLONE_FS | CLONE_FILES) == -1) {
		setup_error = "unshare";
		setup_errno = errno;
		(void)sem_post(&done);
		return NULL;
	}
	/* Only the harness's descriptors, all above FD_LIMIT. */
	for (fd = STDERR_FILENO + 1; fd < FD_HIGH; fd++)
		(void)close(fd);
	/*
	 * Where the kernel allows it, the jail is a tmpfs in a mount namespace
	 * of this thread's own: fast to fill and empty, bounded in size, and
	 * gone with the process, whatever way it ends.
	 */
	if (unshare(CLONE_NEWNS) == 0 &&
	    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0 &&
	    mount("sftp-fuzz", jail_path, "tmpfs", MS_NOSUID | MS_NODEV,
	    "size=" TMPFS_SIZE ",mode=0755") == 0) {
		if ((fd = open(jail_path, O_PATH | O_DIRECTORY)) == -1 ||
		    dup3(fd, jail_fd, O_CLOEXEC) == -1)
			fail("open the jail");
		(void)close(fd);
	}
	if (fchdir(jail_fd) == -1)
		fail("fchdir to the jail");
	if (chroot(".") == 0) {
		jailed = 1;
	} else {
		setup_error = "chroot";
		setup_errno = errno;
	}
	in_jail = 1;
	jail_shared = 1;
	enter_top();
	make_fixture();
	(void)sem_post(&done);
	for (;;) {
		while (sem_wait(&go) == -1)
			continue;
		run_session();
		(void)sem_post(&done);
	}
	return NULL;
}

static int
write_text(const char *path, const char *text)
{
	int fd, ok;

	if ((fd = open(path, O_WRONLY | O_CLOEXEC)) == -1)
		return -1;
	ok = write(fd, text, strlen(text)) == (ssize_t)strlen(text);
	(void)close(fd);
	return ok ? 0 : -1;
}

/* Whether chroot() works here: tried in a child, so nothing changes. */
static int
can_chroot(void)
{
	pid_t pid;
	int status;

	if ((pid = fork()) == -1)
		return 0;
	if (pid == 0)
		_exit(chroot(jail_path) == 0 ? 0 : 1);
	while (waitpid(pid, &status, 0) == -1)
		if (errno != EINTR)
			return 0;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/*
 * Without the right to chroot, becomes root of a user namespace of its
 * own, where chroot is allowed.  Only while the process has one thread.
 */
static void
enter_userns(void)
{
	char map[64];
	uid_t uid = geteuid();
	gid_t gid = getegid();

	if (unshare(CLONE_NEWUSER) == -1)
		return;
	(void)snprintf(map, sizeof map, "0 %lu 1", (unsigned long)uid);
	if (write_text("/proc/self/uid_map", map) == -1)
		return;
	(void)write_text("/proc/self/setgroups", "deny");
	(void)snprintf(map, sizeof map, "0 %lu 1", (unsigned long)gid);
	(void)write_text("/proc/self/gid_map", map);
}

/*
 * Registered after libFuzzer's own exit handler, so it runs before it: an
 * exit() in the session thread leaves the jail before libFuzzer writes its
 * crash file.
 */
static void
leave_on_exit(void)
{
	jail_leave();
}

/* FUZZ_SESSION_STATS: what storage_wait() saw, at exit. */
static void
print_stats(void)
{
	dprintf(err_fd, "fuzz_session: storage that waits: %lu calls, %lu in "
	    "the server's workers; %lu signals\n",
	    __atomic_load_n(&stats_calls, __ATOMIC_RELAXED),
	    __atomic_load_n(&stats_in_workers, __ATOMIC_RELAXED),
	    __atomic_load_n(&stats_signals, __ATOMIC_RELAXED));
}

/* Removes the jail when libFuzzer exits. */
static void
remove_jail(void)
{
	jail_leave();
	if (chdir(jail_path) == 0) {
		empty_cwd();
		(void)fchdir(cwd_fd);
		(void)rmdir(jail_path);
	}
}

int
LLVMFuzzerInitialize(int *argcp, char ***argvp)
{
	struct rlimit rl;
	const char *tmp, *path;
	char symbol[256], filler[FD_HIGH];
	int p[2], fd;

	(void)argcp;
	(void)argvp;
	fuzzer = pthread_self();
	for (size_t i = 0; i < sizeof fixture_data; i++)
		fixture_data[i] = (uint8_t)(i * 7 + i / 251);
	if (getrandom(&rng, sizeof rng, 0) != sizeof rng || rng == 0)
		rng = 0x9e3779b97f4a7c15ULL;
	if ((tmp = getenv("TMPDIR")) == NULL || *tmp == '\0')
		tmp = "/tmp";
	(void)snprintf(jail_path, sizeof jail_path, "%s/sftp-fuzz.XXXXXX",
	    tmp);
	if (mkdtemp(jail_path) == NULL)
		fail("mkdtemp %s", jail_path);

	/* Room for the descriptors above FD_HIGH, until the limit drops. */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < 2 * FD_HIGH &&
	    rl.rlim_max >= 2 * FD_HIGH) {
		rl.rlim_cur = 2 * FD_HIGH;
		(void)setrlimit(RLIMIT_NOFILE, &rl);
	}
	root_fd = high(open("/", O_PATH | O_DIRECTORY | O_CLOEXEC));
	cwd_fd = high(open(".", O_PATH | O_DIRECTORY | O_CLOEXEC));
	jail_fd = high(open(jail_path, O_PATH | O_DIRECTORY | O_CLOEXEC));
	err_fd = high(dup(STDERR_FILENO));
	null_fd = high(open("/dev/null", O_RDWR | O_CLOEXEC));
	in_fd = high(memfd_create("sftp-fuzz-input", MFD_CLOEXEC));
	out_fd = high(memfd_create("sftp-fuzz-output", MFD_CLOEXEC));
	if (pipe2(p, O_CLOEXEC) == -1)
		fail("pipe");
	pipe_r = high(p[0]);
	pipe_w = high(p[1]);
	log_fd = null_fd;
	if ((path = getenv("FUZZ_SESSION_OUT")) != NULL)
		trace_fd = high(open(path, O_WRONLY | O_CREAT | O_APPEND |
		    O_CLOEXEC, 0644));
	if ((path = getenv("FUZZ_SESSION_LOG")) != NULL)
		log_fd = high(open(path, O_WRONLY | O_CREAT | O_APPEND |
		    O_CLOEXEC, 0644));
	__sanitizer_set_report_fd((void *)(intptr_t)err_fd);

	/* Name services and the time zone are loaded before the jail. */
	(void)getpwuid(0);
	(void)getgrgid(0);
	tzset();
	/*
	 * The sanitizers' symbolizer is a process of its own, started at the
	 * first report; a session's sandbox refuses to start processes, so
	 * it starts here, and reports from inside a session read it through
	 * its pipes.  They are made at FD_HIGH or above, where the session
	 * thread keeps them: it closes the descriptors below.
	 */
	memset(filler, 0, sizeof filler);
	while ((fd = dup(null_fd)) != -1 && fd < FD_HIGH)
		filler[fd] = 1;
	if (fd != -1)
		(void)close(fd);
	__sanitizer_symbolize_pc(__builtin_return_address(0), "%p %F %L",
	    symbol, sizeof symbol);
	for (fd = 0; fd < FD_HIGH; fd++)
		if (filler[fd])
			(void)close(fd);
	if (setenv("SSH_CONNECTION", "192.0.2.1 50022 192.0.2.2 22", 1) == -1)
		fail("setenv");

	if (!can_chroot()) {
		enter_userns();
		if (!can_chroot() && getenv("FUZZ_UNSAFE") == NULL) {
			fprintf(stderr, "fuzz_session: cannot chroot into %s, "
			    "not even in a user namespace.\nThe server would "
			    "act on every path the fuzzer makes up, absolute "
			    "ones and \"..\" included.\nSet FUZZ_UNSAFE=1 to "
			    "run it anyway, in a disposable machine.\n",
			    jail_path);
			(void)rmdir(jail_path);
			exit(1);
		}
	}

	rl.rlim_cur = rl.rlim_max = FSIZE_LIMIT;
	if (setrlimit(RLIMIT_FSIZE, &rl) == -1)
		fail("RLIMIT_FSIZE");

	if (sem_init(&go, 0, 0) == -1 || sem_init(&done, 0, 0) == -1)
		fail("sem_init");
	if ((errno = pthread_create(&drainer, NULL, drainer_main,
	    NULL)) != 0 ||
	    (errno = pthread_create(&session, NULL, session_main,
	    NULL)) != 0)
		fail("pthread_create");
	while (sem_wait(&done) == -1)
		continue;
	if (!jailed) {
		errno = setup_errno;
		if (getenv("FUZZ_UNSAFE") == NULL || setup_error == NULL ||
		    strcmp(setup_error, "chroot") != 0)
			fail("session thread: %s", setup_error);
		fprintf(stderr, "fuzz_session: FUZZ_UNSAFE: sessions run in "
		    "%s without chroot\n", jail_path);
	}
	if (getrlimit(RLIMIT_NOFILE, &rl) == -1)
		fail("RLIMIT_NOFILE");
	rl.rlim_cur = FD_LIMIT;
	if (setrlimit(RLIMIT_NOFILE, &rl) == -1)
		fail("RLIMIT_NOFILE");
	if (atexit(remove_jail) != 0 || (getenv("FUZZ_SESSION_STATS") != NULL &&
	    atexit(print_stats) != 0))
		fail("atexit");
	return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	static int once;

	if (!once) {
		once = 1;
		if (atexit(leave_on_exit) != 0)
			fail("atexit");
	}
	if (len > INPUT_MAX)
		return -1;
	input = data;
	input_len = len;
	(void)sem_post(&go);
	while (sem_wait(&done) == -1)
		continue;
	return 0;
}
