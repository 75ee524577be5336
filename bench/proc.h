/*
 * proc.h: a process's files under /proc, as the bench tools (sftpbench.c,
 * holder.c, sessinfo.c) read them: the start of the file in one read(2),
 * and the number on its "Key: value" line.  All static inline: each tool
 * includes it into its one source file.
 */
#ifndef PROC_H
#define PROC_H

#include <sys/types.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PROC_BUF	4096	/* status, smaps_rollup and schedstat fit */

/*
 * Reads the start of /proc/PID/NAME, up to size - 1 bytes in one read, into
 * buf and ends it with a NUL.  Returns 0, or -1 when the file cannot be
 * opened (errno says why) or reads empty.
 */
static inline int
proc_read(long pid, const char *name, char *buf, size_t size)
{
	char path[64];
	ssize_t n;
	int fd;

	(void)snprintf(path, sizeof(path), "/proc/%ld/%s", pid, name);
	if ((fd = open(path, O_RDONLY)) < 0)
		return -1;
	n = read(fd, buf, size - 1);
	(void)close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	return 0;
}

/*
 * The number after "KEY:" on the line of buf that starts with KEY (the first
 * of several, as on "Uid:"), or -1 when there is no such line.
 */
static inline long
proc_field(const char *buf, const char *key)
{
	size_t kl = strlen(key);
	const char *p;

	for (p = buf; p != NULL; p = strchr(p, '\n')) {
		if (*p == '\n')
			p++;
		if (strncmp(p, key, kl) == 0 && p[kl] == ':')
			return strtol(p + kl + 1, NULL, 10);
	}
	return -1;
}

/* KEY's number in /proc/PID/NAME, or -1. */
static inline long
proc_long(long pid, const char *name, const char *key)
{
	char buf[PROC_BUF];

	if (proc_read(pid, name, buf, sizeof(buf)) != 0)
		return -1;
	return proc_field(buf, key);
}

#endif /* PROC_H */
