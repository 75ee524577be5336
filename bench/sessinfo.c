/*
 * sessinfo: what server processes hold, read as root: the pipe pages of their
 * stdin and stdout, as the kernel counts them against a user's quota
 * (pipe-user-pages-soft; F_GETPIPE_SZ / 4096), and their Private_Dirty and
 * Rss (/proc/PID/smaps_rollup, which an undumpable process, as both servers
 * make themselves, shows to root only).  Each pipe is reached through a
 * duplicate of the process's own descriptor (pidfd_getfd), which opens
 * nothing anew and so changes neither end's count of readers or writers.
 *
 *   sessinfo -u UID      every distinct pipe held by a process whose real uid
 *                        is UID: "pipes=N pages=P"
 *   sessinfo -f PIDFILE  the processes listed, one PID a line, that still
 *                        live: minimum, median, maximum and total of their
 *                        pipe pages (fd 0 and 1: pages; fd 2: err_pages),
 *                        Private_Dirty and Rss
 *   sessinfo PID         "fd0=BYTES fd1=BYTES fd2=BYTES pd_kb=K rss_kb=K"
 *                        (-1: not a pipe, or unreadable)
 *
 * The kernel charges a pipe to the user who made it, and pipes are shared:
 * a pipe another user made and UID's processes hold is counted by -u too,
 * and one UID made and only others hold is not.
 */

/* F_GETPIPE_SZ is Linux only. */
#define _GNU_SOURCE

#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proc.h"
#include "spread.h"

#define PAGE_BYTES	4096

static void __attribute__((noreturn))
usage(void)
{
	fprintf(stderr, "usage: sessinfo -u uid\n"
	    "       sessinfo -f pidfile\n"
	    "       sessinfo pid\n");
	exit(2);
}

static long
parse_num(const char *s)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || v < 0)
		usage();
	return v;
}

static int
xpidfd_open(pid_t pid)
{
	return (int)syscall(SYS_pidfd_open, pid, 0);
}

/* The size of the pipe that fd of the process behind pidfd is, or -1. */
static int
pipe_size(int pidfd, int fd)
{
	int dup, n;

	if ((dup = (int)syscall(SYS_pidfd_getfd, pidfd, fd, 0)) < 0)
		return -1;
	n = fcntl(dup, F_GETPIPE_SZ);
	(void)close(dup);
	return n;
}

/* Has ino been seen?  Adds it to the sorted set if not. */
static int
seen(unsigned long **set, size_t *n, size_t *cap, unsigned long ino)
{
	size_t lo = 0, hi = *n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if ((*set)[mid] == ino)
			return 1;
		if ((*set)[mid] < ino)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (*n == *cap) {
		*cap = *cap ? *cap * 2 : 1024;
		if ((*set = realloc(*set, *cap * sizeof(**set))) == NULL) {
			perror("sessinfo");
			exit(1);
		}
	}
	memmove(*set + lo + 1, *set + lo, (*n - lo) * sizeof(**set));
	(*set)[lo] = ino;
	(*n)++;
	return 0;
}

static int
by_uid(long uid)
{
	unsigned long *set = NULL, ino;
	size_t n = 0, cap = 0;
	long long pages = 0;
	char path[64], link[64];
	struct dirent *pe, *fe;
	DIR *proc, *fds;
	long pid, fd;
	ssize_t l;
	int pidfd, sz;

	if ((proc = opendir("/proc")) == NULL) {
		perror("/proc");
		return 1;
	}
	while ((pe = readdir(proc)) != NULL) {
		if (pe->d_name[0] < '0' || pe->d_name[0] > '9')
			continue;
		pid = strtol(pe->d_name, NULL, 10);
		if (proc_long(pid, "status", "Uid") != uid)
			continue;
		(void)snprintf(path, sizeof(path), "/proc/%ld/fd", pid);
		if ((fds = opendir(path)) == NULL)
			continue;
		pidfd = xpidfd_open((pid_t)pid);
		while (pidfd >= 0 && (fe = readdir(fds)) != NULL) {
			if (fe->d_name[0] == '.')
				continue;
			fd = strtol(fe->d_name, NULL, 10);
			(void)snprintf(path, sizeof(path), "/proc/%ld/fd/%ld",
			    pid, fd);
			if ((l = readlink(path, link, sizeof(link) - 1)) < 0)
				continue;
			link[l] = '\0';
			if (sscanf(link, "pipe:[%lu]", &ino) != 1 ||
			    seen(&set, &n, &cap, ino))
				continue;
			if ((sz = pipe_size(pidfd, (int)fd)) > 0)
				pages += sz / PAGE_BYTES;
		}
		if (pidfd >= 0)
			(void)close(pidfd);
		(void)closedir(fds);
	}
	(void)closedir(proc);
	printf("pipes=%zu pages=%lld\n", n, pages);
	free(set);
	return 0;
}

static int
by_file(const char *file)
{
	long *pages = NULL, *err = NULL, *pd = NULL, *rss = NULL, pid;
	size_t n = 0, cap = 0, listed = 0;
	char line[64];
	FILE *f;
	int pidfd, a, b, e;

	if ((f = fopen(file, "r")) == NULL) {
		perror(file);
		return 1;
	}
	while (fgets(line, sizeof(line), f) != NULL) {
		if ((pid = strtol(line, NULL, 10)) <= 0)
			continue;
		listed++;
		if ((pidfd = xpidfd_open((pid_t)pid)) < 0)
			continue;	/* gone */
		if (n == cap) {
			cap = cap ? cap * 2 : 1024;
			if ((pages = realloc(pages, cap * sizeof(long))) ==
			    NULL || (err = realloc(err, cap * sizeof(long))) ==
			    NULL || (pd = realloc(pd, cap * sizeof(long))) ==
			    NULL || (rss = realloc(rss, cap * sizeof(long))) ==
			    NULL) {
				perror("sessinfo");
				return 1;
			}
		}
		a = pipe_size(pidfd, 0);
		b = pipe_size(pidfd, 1);
		e = pipe_size(pidfd, 2);
		(void)close(pidfd);
		pages[n] = (a > 0 ? a : 0) / PAGE_BYTES +
		    (b > 0 ? b : 0) / PAGE_BYTES;
		err[n] = (e > 0 ? e : 0) / PAGE_BYTES;
		pd[n] = proc_long(pid, "smaps_rollup", "Private_Dirty");
		rss[n] = proc_long(pid, "smaps_rollup", "Rss");
		n++;
	}
	(void)fclose(f);
	printf("listed=%zu alive=%zu", listed, n);
	print_spread("pages", pages, n);
	print_spread("err_pages", err, n);
	print_spread("pd_kb", pd, n);
	print_spread("rss_kb", rss, n);
	printf("\n");
	free(pages);
	free(err);
	free(pd);
	free(rss);
	return 0;
}

int
main(int argc, char **argv)
{
	long pid;
	int pidfd;

	if (argc == 3 && strcmp(argv[1], "-u") == 0)
		return by_uid(parse_num(argv[2]));
	if (argc == 3 && strcmp(argv[1], "-f") == 0)
		return by_file(argv[2]);
	if (argc != 2 || argv[1][0] == '-')
		usage();
	pid = parse_num(argv[1]);
	if ((pidfd = xpidfd_open((pid_t)pid)) < 0) {
		fprintf(stderr, "sessinfo: pidfd_open %ld: %s\n", pid,
		    strerror(errno));
		return 1;
	}
	printf("fd0=%d fd1=%d fd2=%d pd_kb=%ld rss_kb=%ld\n",
	    pipe_size(pidfd, 0), pipe_size(pidfd, 1), pipe_size(pidfd, 2),
	    proc_long(pid, "smaps_rollup", "Private_Dirty"),
	    proc_long(pid, "smaps_rollup", "Rss"));
	(void)close(pidfd);
	return 0;
}
