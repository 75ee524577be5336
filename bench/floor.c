/*
 * floor: the least work an SFTP server does to move a file, for comparison.
 * It copies its standard input to a file ("up") or a file to its standard
 * output ("down"), with nothing of the protocol:
 *
 *	rw	read(2) and write(2) through one buffer of 256 KiB,
 *	splice	splice(2) from the input to the file, or sendfile(2) from the
 *		file to the output: no copy through user space.
 *
 * Either way it first grows its pipe to 1 MiB, as a server may.
 *
 * sftpbench -F starts it as it starts a server, on the same pipes, and reports
 * its CPU time and peak RSS the same way.
 *
 * "floor files HOW DIR COUNT" is the floor of small files instead: COUNT new
 * files of 4 KiB made in DIR (empty, of the file system to measure) and
 * removed after, by the calls a server makes for OPEN, WRITE and CLOSE,
 * with nothing of the protocol; it prints its CPU time per file:
 *
 *	create	open(2) with O_CREAT, pwrite(2), close(2): a server without -A;
 *	atomic	what the server makes under -A: the directory opened (O_PATH),
 *		the name looked up (ENOENT), an unnamed file (O_TMPFILE),
 *		pwrite(2), linkat(2) onto the name, two close(2);
 *	least	the least an atomic new file costs: O_TMPFILE, pwrite(2),
 *		linkat(2), close(2), by path, with no lookup first.
 */

/* splice(2) is Linux only. */
#define _GNU_SOURCE

#include <sys/resource.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BUF_SIZE	(256 * 1024)
#define SPLICE_CHUNK	(1024 * 1024)
#define PIPE_SIZE	(1024 * 1024)

static void usage(void) __attribute__((noreturn));
static void fail(const char *, const char *) __attribute__((noreturn));

static void
usage(void)
{
	fprintf(stderr, "usage: floor rw|splice up|down file\n"
	    "       floor files create|atomic|least dir count\n");
	exit(2);
}

static void
fail(const char *what, const char *path)
{
	fprintf(stderr, "floor: %s %s: %s\n", what, path, strerror(errno));
	exit(1);
}

/* Write all of p to fd. */
static int
write_all(int fd, const char *p, size_t n)
{
	ssize_t r;

	while (n > 0) {
		if ((r = write(fd, p, n)) < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

/* Copy from in to out through a buffer until end of input. */
static void
copy_rw(int in, int out, const char *path)
{
	char *buf;
	ssize_t n;

	if ((buf = malloc(BUF_SIZE)) == NULL)
		fail("malloc", "buffer");
	/* Touch the buffer now, not during the copy. */
	memset(buf, 0, BUF_SIZE);
	for (;;) {
		if ((n = read(in, buf, BUF_SIZE)) < 0) {
			if (errno == EINTR)
				continue;
			fail("read", path);
		}
		if (n == 0)
			break;
		if (write_all(out, buf, (size_t)n) != 0)
			fail("write", path);
	}
	free(buf);
}

/* One splice(2), retried on EINTR. */
static ssize_t
splice_once(int in, int out, size_t n, const char *path)
{
	ssize_t r;

	while ((r = splice(in, NULL, out, NULL, n, SPLICE_F_MOVE)) < 0)
		if (errno != EINTR)
			fail("splice", path);
	return r;
}

/*
 * Splice standard input to the file. splice needs a pipe at one end: when the
 * input is a socket, the bytes go through a pipe of our own.
 */
static void
splice_up(int out, const char *path)
{
	struct stat st;
	ssize_t n, m;
	int p[2];

	if (fstat(0, &st) != 0)
		fail("fstat", "stdin");
	if (S_ISFIFO(st.st_mode)) {
		while (splice_once(0, out, SPLICE_CHUNK, path) > 0)
			;
		return;
	}
	if (pipe(p) != 0)
		fail("pipe", "relay");
	/* A larger relay pipe means fewer calls; the default works too. */
	(void)fcntl(p[1], F_SETPIPE_SZ, SPLICE_CHUNK);
	while ((n = splice_once(0, p[1], SPLICE_CHUNK, "stdin")) > 0)
		for (; n > 0; n -= m)
			if ((m = splice_once(p[0], out, (size_t)n, path)) == 0)
				fail("splice (short)", path);
}

/* Send the file to standard output. */
static void
sendfile_down(int in, const char *path)
{
	ssize_t n;

	for (;;) {
		n = sendfile(1, in, NULL, SPLICE_CHUNK);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			fail("sendfile", path);
		if (n == 0)
			break;
	}
}

/* Small files: the bytes of each, and how its calls are made. */
#define FILE_SIZE	4096
enum { F_CREATE, F_ATOMIC, F_LEAST };

/* Names the unnamed file on fd as path (dfd, name): as the server does. */
static void
link_unnamed(int fd, int dfd, const char *name)
{
	char proc[32];

	if (linkat(fd, "", dfd, name, AT_EMPTY_PATH) == 0)
		return;
	/* Before Linux 6.10, without CAP_DAC_READ_SEARCH: through /proc. */
	(void)snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
	if (linkat(AT_FDCWD, proc, dfd, name, AT_SYMLINK_FOLLOW) != 0)
		fail("linkat", name);
}

static double
cpu_seconds(void)
{
	struct rusage ru;

	(void)getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
	    (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

static void
one_file(int how, const char *dir, const char *name, const char *data)
{
	char path[PATH_MAX];
	int fd, dfd;

	(void)snprintf(path, sizeof path, "%s/%s", dir, name);
	switch (how) {
	case F_CREATE:
		if ((fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644)) < 0)
			fail("open", path);
		break;
	case F_ATOMIC:
		if ((dfd = open(dir, O_PATH | O_DIRECTORY)) < 0)
			fail("open", dir);
		if (openat(dfd, name, O_WRONLY | O_NOFOLLOW) >= 0 ||
		    errno != ENOENT)
			fail("lookup (a file is there)", path);
		if ((fd = openat(dfd, ".", O_WRONLY | O_TMPFILE, 0644)) < 0)
			fail("open O_TMPFILE", dir);
		if (pwrite(fd, data, FILE_SIZE, 0) != FILE_SIZE)
			fail("pwrite", path);
		link_unnamed(fd, dfd, name);
		(void)close(dfd);
		goto done;
	default:
		if ((fd = open(dir, O_WRONLY | O_TMPFILE, 0644)) < 0)
			fail("open O_TMPFILE", dir);
		if (pwrite(fd, data, FILE_SIZE, 0) != FILE_SIZE)
			fail("pwrite", path);
		link_unnamed(fd, AT_FDCWD, path);
		goto done;
	}
	if (pwrite(fd, data, FILE_SIZE, 0) != FILE_SIZE)
		fail("pwrite", path);
done:
	if (close(fd) != 0)
		fail("close", path);
}

static int
files(const char *how_s, const char *dir, const char *count_s)
{
	static char data[FILE_SIZE];
	char name[32], *end;
	double t0, t;
	long count, i;
	int how;

	if (strcmp(how_s, "create") == 0)
		how = F_CREATE;
	else if (strcmp(how_s, "atomic") == 0)
		how = F_ATOMIC;
	else if (strcmp(how_s, "least") == 0)
		how = F_LEAST;
	else
		usage();
	count = strtol(count_s, &end, 10);
	if (*end != '\0' || count <= 0)
		usage();
	memset(data, 'x', sizeof data);
	t0 = cpu_seconds();
	for (i = 0; i < count; i++) {
		(void)snprintf(name, sizeof name, "f-%06ld", i);
		one_file(how, dir, name, data);
	}
	t = cpu_seconds() - t0;
	for (i = 0; i < count; i++) {
		(void)snprintf(name, sizeof name, "%s/f-%06ld", dir, i);
		(void)unlink(name);
	}
	printf("files=%ld how=%s cpu_us_per_file=%.2f\n", count, how_s,
	    t / (double)count * 1e6);
	return 0;
}

int
main(int argc, char **argv)
{
	int splice_mode, up, fd;
	const char *path;

	if (argc == 5 && strcmp(argv[1], "files") == 0)
		return files(argv[2], argv[3], argv[4]);
	if (argc != 4)
		usage();
	if (strcmp(argv[1], "rw") == 0)
		splice_mode = 0;
	else if (strcmp(argv[1], "splice") == 0)
		splice_mode = 1;
	else
		usage();
	if (strcmp(argv[2], "up") == 0)
		up = 1;
	else if (strcmp(argv[2], "down") == 0)
		up = 0;
	else
		usage();
	path = argv[3];

	if (up)
		fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	else
		fd = open(path, O_RDONLY);
	if (fd < 0)
		fail("open", path);
	/*
	 * As a server may: a larger pipe takes more per wakeup. Not a pipe,
	 * or no room for it: the copy works all the same.
	 */
	(void)fcntl(up ? 0 : 1, F_SETPIPE_SZ, PIPE_SIZE);
	if (up && splice_mode)
		splice_up(fd, path);
	else if (up)
		copy_rw(0, fd, path);
	else if (splice_mode)
		sendfile_down(fd, path);
	else
		copy_rw(fd, 1, path);
	if (close(fd) != 0)
		fail("close", path);
	return 0;
}
