/*
 * callrate: how many storage calls per second a program can make, so that
 * slowfs's own ceiling can be measured: N threads each lstat() one path M
 * times, as fast as they can, started together.  With -r each thread
 * instead reads one byte of PATH with pread(2) on a descriptor of its own:
 * calls that slowfs tells apart by their descriptor, as a server's reads.
 *
 *	callrate [-r] THREADS CALLS PATH
 *
 * It prints "threads=N calls=TOTAL wall=SECONDS rate=CALLS_PER_SECOND".
 * Under "slowfs -d D", N threads can make at most N / D calls per second;
 * what they make is the most slowfs serves at that depth.
 */

#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_THREADS	1024

static const char *path;
static long calls;
static int use_pread;
static pthread_barrier_t start;

static void usage(void) __attribute__((noreturn));

static void
usage(void)
{
	fprintf(stderr, "usage: callrate [-r] threads calls path\n");
	exit(2);
}

static long
number(const char *s, long max)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || v < 1 || v > max)
		usage();
	return v;
}

static double
now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* One thread: wait for the others, then its share of lstat() calls. */
static void *
worker(void *arg)
{
	struct stat st;
	long i, n = *(long *)arg;
	int fd = -1;
	char byte;

	if (use_pread && (fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
		fprintf(stderr, "callrate: %s: %s\n", path, strerror(errno));
		exit(1);
	}
	pthread_barrier_wait(&start);
	for (i = 0; i < n; i++)
		if (use_pread ? pread(fd, &byte, 1, 0) < 0 :
		    lstat(path, &st) != 0) {
			fprintf(stderr, "callrate: %s: %s\n", path,
			    strerror(errno));
			exit(1);
		}
	if (fd >= 0)
		close(fd);
	return NULL;
}

int
main(int argc, char *argv[])
{
	static pthread_t t[MAX_THREADS];
	static long share[MAX_THREADS];
	long i, n;
	double t0, t1;
	int e;

	if (argc > 1 && strcmp(argv[1], "-r") == 0) {
		use_pread = 1;
		argc--;
		argv++;
	}
	if (argc != 4)
		usage();
	n = number(argv[1], MAX_THREADS);
	calls = number(argv[2], 1000000000L);
	path = argv[3];
	if (calls < n)
		calls = n;
	if ((e = pthread_barrier_init(&start, NULL, (unsigned)n + 1)) != 0) {
		fprintf(stderr, "callrate: barrier: %s\n", strerror(e));
		return 1;
	}
	for (i = 0; i < n; i++) {
		share[i] = calls / n + (i < calls % n ? 1 : 0);
		if ((e = pthread_create(&t[i], NULL, worker, &share[i])) != 0) {
			fprintf(stderr, "callrate: thread: %s\n", strerror(e));
			return 1;
		}
	}
	pthread_barrier_wait(&start);
	t0 = now();
	for (i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	t1 = now();
	printf("threads=%ld calls=%ld wall=%.6f rate=%.1f\n", n, calls,
	    t1 - t0, (double)calls / (t1 - t0));
	return 0;
}
