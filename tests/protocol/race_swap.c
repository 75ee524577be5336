/*
 * The swapper of tests/protocol/test_race.py: keeps exchanging one name in a
 * directory with prepared candidates, as fast as it can, so that a server
 * that checks a name and then resolves it again meets another kind of file
 * the second time.
 *
 * Usage: race_swap [-s seconds] dir spec ...
 *
 *   spec is KIND:NAME[:TEXT], one object in dir:
 *     f:NAME        a regular file
 *     d:NAME        a directory holding a regular file "x"
 *     l:NAME:TEXT   a symlink whose text is TEXT
 *
 * The first spec names the target; each other spec is a candidate that
 * renameat2(RENAME_EXCHANGE) swaps with it in turn, so that the target
 * meets the objects in the order of the specs, over and over: to make it
 * alternate between a file or a directory and a link, alternate the specs.
 * Several specs may have the same kind (for links: the same text).  Every
 * call acts on a single name relative to a descriptor of dir, and no call
 * follows a symlink: the swapper itself never reaches outside dir.
 *
 * The server under test may remove, rename or replace any of these names
 * meanwhile.  Every 64 rounds, and when a swap finds a name missing, the
 * names are looked at again: a kind that has gone is made anew, in place
 * of a missing name or of a name holding a duplicate or a stranger (which
 * is moved into dir/.trash first).
 *
 * Prints "ready" once the objects exist and one exchange worked, and at
 * the end a line "swaps N repairs M".  Runs until SIGTERM or SIGINT (sent
 * too when the parent dies), or for the given seconds (default 60).  Exits
 * 0, or with a message: 1 on an unexpected error, 2 on a usage error, 3
 * when the file system cannot exchange names.
 *
 * renameat2() and PR_SET_PDEATHSIG are Linux's; renameat2() is called
 * through syscall(2), as older C libraries lack a wrapper, hence
 * _GNU_SOURCE for syscall() and O_PATH.
 */
#define _GNU_SOURCE

#include <sys/types.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE	(1 << 1)
#endif

#define MAX_SPECS	16
#define CHECK_EVERY	64	/* rounds between two looks at the names */
#define TRASH		".trash"

/* What a name holds, as far as the swapper is concerned. */
#define K_MISSING	(-1)
#define K_STRANGER	(-2)

struct spec {
	char kind;		/* 'f', 'd' or 'l' */
	const char *name;
	const char *text;	/* the link's text, for 'l' */
};

static struct spec specs[MAX_SPECS];
static int kind_of[MAX_SPECS];	/* the first spec of the same kind */
static int nspecs;
static int dir_fd = -1;
static int trash_fd = -1;
static unsigned long trashed;
static unsigned long repairs;
static volatile sig_atomic_t stop;

static void usage(void) __attribute__((noreturn));
static void die(const char *, const char *) __attribute__((noreturn));

static void
usage(void)
{
	fprintf(stderr, "usage: race_swap [-s seconds] dir "
	    "f:NAME|d:NAME|l:NAME:TEXT ...\n");
	exit(2);
}

static void
die(const char *what, const char *name)
{
	fprintf(stderr, "race_swap: %s %s: %s\n", what, name, strerror(errno));
	exit(1);
}

static void
on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static int
parse_spec(char *arg, struct spec *s)
{
	char *name, *text;

	if (arg[0] == '\0' || arg[1] != ':' || arg[2] == '\0')
		return -1;
	s->kind = arg[0];
	name = arg + 2;
	text = strchr(name, ':');
	if (s->kind == 'l') {
		if (text == NULL || text[1] == '\0')
			return -1;
		*text++ = '\0';
	} else if (s->kind != 'f' && s->kind != 'd') {
		return -1;
	} else if (text != NULL) {
		return -1;
	}
	if (strchr(name, '/') != NULL || strcmp(name, ".") == 0 ||
	    strcmp(name, "..") == 0 || strcmp(name, TRASH) == 0)
		return -1;
	s->name = name;
	s->text = text;
	return 0;
}

/* The first spec of this kind (for a link, text), or K_STRANGER. */
static int
find_kind(char kind, const char *text)
{
	for (int i = 0; i < nspecs; i++) {
		if (specs[i].kind != kind)
			continue;
		if (kind != 'l' || strcmp(specs[i].text, text) == 0)
			return i;
	}
	return K_STRANGER;
}

/*
 * The kind the name holds, as the first spec of that kind, or K_MISSING or
 * K_STRANGER.
 */
static int
classify(const char *name)
{
	char text[PATH_MAX];
	struct stat st;
	ssize_t n;
	char kind;

	if (fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) == -1) {
		if (errno == ENOENT)
			return K_MISSING;
		die("fstatat", name);
	}
	if (S_ISREG(st.st_mode))
		kind = 'f';
	else if (S_ISDIR(st.st_mode))
		kind = 'd';
	else if (S_ISLNK(st.st_mode))
		kind = 'l';
	else
		return K_STRANGER;
	if (kind == 'l') {
		if ((n = readlinkat(dir_fd, name, text, sizeof text - 1)) == -1)
			return errno == ENOENT ? K_MISSING : K_STRANGER;
		text[n] = '\0';
	}
	return find_kind(kind, kind == 'l' ? text : NULL);
}

/* Makes the object of spec k under name; a name taken meanwhile is fine. */
static void
create(int k, const char *name)
{
	int fd, xfd;

	switch (specs[k].kind) {
	case 'f':
		fd = openat(dir_fd, name, O_WRONLY | O_CREAT | O_EXCL |
		    O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd == -1) {
			if (errno == EEXIST)
				return;
			die("create file", name);
		}
		if (write(fd, "inside\n", 7) != 7)
			die("write", name);
		(void)close(fd);
		break;
	case 'd':
		if (mkdirat(dir_fd, name, 0700) == -1) {
			if (errno == EEXIST)
				return;
			die("mkdir", name);
		}
		fd = openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
		    O_CLOEXEC);
		if (fd == -1)
			return;	/* swapped or removed meanwhile */
		xfd = openat(fd, "x", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
		    O_CLOEXEC, 0600);
		if (xfd != -1)
			(void)close(xfd);
		(void)close(fd);
		break;
	case 'l':
		if (symlinkat(specs[k].text, dir_fd, name) == -1 &&
		    errno != EEXIST)
			die("symlink", name);
		break;
	}
	repairs++;
}

/* Moves what name holds out of the way, into dir/.trash. */
static void
discard(const char *name)
{
	char to[32];

	(void)snprintf(to, sizeof to, "%lu", trashed++);
	if (renameat(dir_fd, name, trash_fd, to) == -1 && errno != ENOENT)
		die("rename to " TRASH, name);
}

/*
 * Whether slot i may be given to another kind: it is missing, holds a
 * stranger, or holds one more object of its kind than the specs ask for.
 */
static int
spare_slot(int i, const int *held, const int *count, const int *need)
{
	return held[i] == K_MISSING || held[i] == K_STRANGER ||
	    count[held[i]] > need[held[i]];
}

/*
 * Looks at every name: each kind must be held by as many names as there
 * are specs of that kind.  A kind short of that is made anew, under its
 * spec's own name when that one is spare (which keeps the order the target
 * meets the kinds in), else in another spare name; a stranger or a
 * duplicate is moved away first.  As there are as many names as specs,
 * every name exists afterwards.
 */
static void
repair(void)
{
	int held[MAX_SPECS], count[MAX_SPECS], need[MAX_SPECS];
	int c, slot;

	memset(count, 0, sizeof count);
	memset(need, 0, sizeof need);
	for (int i = 0; i < nspecs; i++) {
		need[kind_of[i]]++;
		held[i] = classify(specs[i].name);
		if (held[i] >= 0)
			count[held[i]]++;
	}
	for (int k = 0; k < nspecs; k++) {
		c = kind_of[k];
		if (count[c] >= need[c])
			continue;
		slot = -1;
		if (spare_slot(k, held, count, need))
			slot = k;
		for (int i = 0; i < nspecs && slot == -1; i++)
			if (held[i] == K_MISSING)
				slot = i;
		for (int i = 0; i < nspecs && slot == -1; i++)
			if (spare_slot(i, held, count, need))
				slot = i;
		if (slot == -1)
			abort();	/* more objects asked for than names */
		if (held[slot] != K_MISSING) {
			if (held[slot] >= 0)
				count[held[slot]]--;
			discard(specs[slot].name);
		}
		create(k, specs[slot].name);
		held[slot] = c;
		count[c]++;
	}
}

/* Exchanges the target with candidate i. */
static int
exchange(int i)
{
	return (int)syscall(SYS_renameat2, dir_fd, specs[0].name, dir_fd,
	    specs[i].name, RENAME_EXCHANGE);
}

static double
now(void)
{
	struct timespec ts;

	(void)clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int
main(int argc, char **argv)
{
	struct sigaction sa;
	unsigned long swaps = 0, rounds = 0;
	pid_t parent = getppid();
	double seconds = 60, end;
	char *ep;
	int ch;

	while ((ch = getopt(argc, argv, "s:")) != -1) {
		switch (ch) {
		case 's':
			errno = 0;
			seconds = strtod(optarg, &ep);
			if (errno != 0 || ep == optarg || *ep != '\0' ||
			    seconds <= 0)
				usage();
			break;
		default:
			usage();
		}
	}
	argc -= optind;
	argv += optind;
	if (argc < 3 || argc - 1 > MAX_SPECS)
		usage();
	for (int i = 1; i < argc; i++) {
		if (parse_spec(argv[i], &specs[nspecs]) == -1)
			usage();
		kind_of[nspecs] = find_kind(specs[nspecs].kind,
		    specs[nspecs].text);
		if (kind_of[nspecs] == K_STRANGER)
			kind_of[nspecs] = nspecs;
		for (int j = 0; j < nspecs; j++)
			if (strcmp(specs[j].name, specs[nspecs].name) == 0)
				usage();
		nspecs++;
	}

	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	if (sigemptyset(&sa.sa_mask) == -1 ||
	    sigaction(SIGTERM, &sa, NULL) == -1 ||
	    sigaction(SIGINT, &sa, NULL) == -1)
		die("sigaction", "SIGTERM");
	/* A test killed outright leaves no swapper behind. */
	if (prctl(PR_SET_PDEATHSIG, SIGTERM) == -1)
		die("prctl", "PR_SET_PDEATHSIG");
	if (getppid() != parent)
		return 0;

	if ((dir_fd = open(argv[0], O_PATH | O_DIRECTORY | O_CLOEXEC)) == -1)
		die("open", argv[0]);
	if (mkdirat(dir_fd, TRASH, 0700) == -1 && errno != EEXIST)
		die("mkdir", TRASH);
	if ((trash_fd = openat(dir_fd, TRASH, O_PATH | O_DIRECTORY |
	    O_NOFOLLOW | O_CLOEXEC)) == -1)
		die("open", TRASH);
	repair();
	repairs = 0;
	if (exchange(1) == -1 && errno == EINVAL) {
		fprintf(stderr, "race_swap: %s cannot exchange names "
		    "(renameat2 RENAME_EXCHANGE): %s\n", argv[0],
		    strerror(errno));
		exit(3);
	}
	printf("ready\n");
	(void)fflush(stdout);

	end = now() + seconds;
	while (!stop) {
		for (int i = 1; i < nspecs && !stop; i++) {
			if (exchange(i) == 0) {
				swaps++;
			} else if (errno == ENOENT) {
				repair();
			} else if (errno != EINTR) {
				die("renameat2 with", specs[i].name);
			}
		}
		if (++rounds % CHECK_EVERY == 0) {
			repair();
			if (now() >= end)
				break;
		}
	}
	printf("swaps %lu repairs %lu\n", swaps, repairs);
	return 0;
}
