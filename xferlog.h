/*
 * The transfer log (-L): one JSON object per line for each closed file, each
 * change to the file system and each session start and end, appended to a
 * file opened at start with one write(2) per line, so that the lines of
 * concurrent sessions never interleave.  It answers "who moved what, when,
 * how much, and did it finish" without the AUTH stream of the system log.
 *
 * A failed write never fails a request; the first one is reported in the
 * normal log.  After a rotation (the file renamed and a new one made at its
 * path) the next line goes to the new file.
 */
#ifndef XFERLOG_H
#define XFERLOG_H

#include <stdint.h>
#include <time.h>

/* One line.  Fields that are NULL, or XFER_NONE for numbers, are left out. */
struct xfer_event {
	const char *event;	/* "close", "remove", "rename", ... */
	const char *path;	/* as the client named it */
	const char *target;	/* rename, link and symlink: the other path */
	const char *flags;	/* open flags, as "READ,WRITE,CREATE" */
	uint64_t bytes_read;
	uint64_t bytes_written;
	uint64_t first_offset;	/* lowest byte read or written */
	uint64_t last_offset;	/* one past the highest */
	uint64_t mode;		/* mkdir, setstat: permissions */
	uint64_t size;		/* setstat: size */
	uint64_t uid, gid;	/* setstat: owner */
	uint64_t mtime;		/* setstat: modification time */
	const struct timespec *opened;	/* CLOCK_MONOTONIC, for "duration" */
	int forced;		/* closed by the end of the session */
	int not_closed;		/* the close was not made: "closed":false */
	/* -A: put in place ("placed":true) or not (-1: false); 0: left out */
	int placed;
	/* -m, -M: the mode was the option's ("mode_forced":true) */
	int mode_forced;
	const char *result;	/* "ok", or what went wrong */
};

#define XFER_NONE	UINT64_MAX

/*
 * An event with every field left out but the name: the numbers XFER_NONE,
 * the rest NULL or 0 as designated initialisers leave them.
 */
#define XFER_EVENT(name) {						\
	.event = (name),						\
	.bytes_read = XFER_NONE,					\
	.bytes_written = XFER_NONE,					\
	.first_offset = XFER_NONE,					\
	.last_offset = XFER_NONE,					\
	.mode = XFER_NONE,						\
	.size = XFER_NONE,						\
	.uid = XFER_NONE,						\
	.gid = XFER_NONE,						\
	.mtime = XFER_NONE,						\
}

/*
 * Opens the log at path for appending.  It must exist and be a regular file:
 * it is never created (a log made by the first session would belong to that
 * user) and never opened through a symlink in its place.  Returns 0, or -1
 * with errno: ENOENT, ELOOP for a symlink, EINVAL for anything but a regular
 * file, or what open(2) said.  The log's directory is held open, so that a
 * rotation is found by the same name in the same directory whatever the
 * current directory becomes.
 */
int	xferlog_open(const char *path);
/*
 * Sends the records to the system log instead, one message each, at
 * facility (LOG_LOCAL6, ...) and LOG_INFO, tagged SYSLOG_TAG's
 * "sftp-transfer", on a socket of their own connected now to the system
 * log (a restarted system log is connected to again).  Returns 0, or -1
 * with errno from socket(2) or connect(2).
 */
int	xferlog_open_syslog(int facility);
/* The log file's descriptor, or -1: for fs_protect(). */
int	xferlog_fd(void);
/* Whether the log is open. */
int	xferlog_enabled(void);
/*
 * The session's user and SSH_CONNECTION ("addr port laddr lport", or
 * NULL), named in every line.  Both strings must outlive the session.
 */
void	xferlog_session(const char *user, const char *connection);
/*
 * Writes one line, when the log is open: to the file the path names now,
 * when it is another regular file than the one open and can be opened as
 * xferlog_open() would; otherwise to the one open (the first such failure
 * is reported in the normal log).
 */
void	xferlog_write(const struct xfer_event *);

#endif /* XFERLOG_H */
