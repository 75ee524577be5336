/*
 * hashbench: how fast digest.c hashes a file, read as the server reads it
 * for check-file: pread(2) in blocks of 256 KiB into one buffer.
 *
 *	hashbench [-b size] algo file
 *
 * It prints the digest in hex and the file name, as sha256sum(1) does,
 * then one line of key=value fields: the algorithm, the bytes hashed, the
 * wall-clock seconds, the CPU seconds (user and system) and the rate in
 * MB/s (10^6 bytes per wall-clock second).  bench/hash-compare.sh runs it
 * against the coreutils tools.
 */
#include <sys/types.h>
#include <sys/resource.h>
#include <sys/time.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../digest.h"

#define BUF_SIZE	(256 * 1024)
#define BUF_MAX		(64 * 1024 * 1024)

static void usage(void) __attribute__((noreturn));

static void
usage(void)
{
	fprintf(stderr, "usage: hashbench [-b size] algo file\n");
	exit(2);
}

static double
now(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_MONOTONIC, &ts) == -1) {
		perror("clock_gettime");
		exit(1);
	}
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double
cpu_seconds(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru) == -1) {
		perror("getrusage");
		exit(1);
	}
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
	    (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

/* The size of the -b option: a number of bytes, with an optional K or M. */
static size_t
parse_size(const char *s)
{
	unsigned long long v;
	char *end;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0 || end == s)
		usage();
	if (*end == 'K' || *end == 'k') {
		v *= 1024;
		end++;
	} else if (*end == 'M' || *end == 'm') {
		v *= 1024 * 1024;
		end++;
	}
	if (*end != '\0' || v == 0 || v > BUF_MAX)
		usage();
	return (size_t)v;
}

int
main(int argc, char **argv)
{
	const struct digest_algo *algo;
	struct digest_ctx ctx;
	uint8_t md[DIGEST_MAX_LEN];
	size_t bufsize = BUF_SIZE, i;
	uint64_t total = 0;
	double t0, c0, wall, cpu;
	ssize_t n;
	char *buf;
	int ch, fd;

	while ((ch = getopt(argc, argv, "b:")) != -1) {
		switch (ch) {
		case 'b':
			bufsize = parse_size(optarg);
			break;
		default:
			usage();
		}
	}
	argc -= optind;
	argv += optind;
	if (argc != 2)
		usage();
	if ((algo = digest_by_name(argv[0], strlen(argv[0]))) == NULL) {
		fprintf(stderr, "hashbench: unknown algorithm %s\n", argv[0]);
		return 2;
	}
	if ((fd = open(argv[1], O_RDONLY)) == -1) {
		fprintf(stderr, "hashbench: %s: %s\n", argv[1],
		    strerror(errno));
		return 1;
	}
	if ((buf = malloc(bufsize)) == NULL) {
		perror("malloc");
		return 1;
	}
	/* Touch the buffer now, not while the clock runs. */
	memset(buf, 0, bufsize);

	t0 = now();
	c0 = cpu_seconds();
	digest_init(&ctx, algo);
	for (;;) {
		if ((n = pread(fd, buf, bufsize, (off_t)total)) == -1) {
			if (errno == EINTR)
				continue;
			fprintf(stderr, "hashbench: read %s: %s\n", argv[1],
			    strerror(errno));
			return 1;
		}
		if (n == 0)
			break;
		digest_update(&ctx, buf, (size_t)n);
		total += (uint64_t)n;
	}
	digest_final(&ctx, md);
	wall = now() - t0;
	cpu = cpu_seconds() - c0;

	for (i = 0; i < digest_len(algo); i++)
		printf("%02x", md[i]);
	printf("  %s\n", argv[1]);
	printf("algo=%s bytes=%llu seconds=%.3f cpu=%.3f mbps=%.1f\n",
	    digest_name(algo), (unsigned long long)total, wall, cpu,
	    wall > 0 ? (double)total / wall / 1e6 : 0.0);
	(void)close(fd);
	free(buf);
	return 0;
}
