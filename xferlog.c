/*
 * The transfer log: JSON lines built in one buffer and written with one
 * write(2) on a descriptor opened with O_APPEND, which the kernel appends
 * whole for every writer of the file.
 */
#include <sys/types.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "sys-gnu.h"
#include "xferlog.h"

/*
 * Two paths of PATH_MAX bytes, each escaped (6 bytes a byte at worst) and in
 * hexadecimal (2 bytes a byte), and the rest of the line; before it, room
 * for the system log's header, so that a record is sent from one buffer.
 */
#define HEAD_BYTES	128
#define LINE_MAX_BYTES	(HEAD_BYTES + 80 * 1024)

/* The tag of the records in the system log. */
#define SYSLOG_TAG	"sftp-transfer"

#ifndef _PATH_LOG
#define _PATH_LOG	"/dev/log"	/* where <syslog.h> does not say */
#endif

static int log_fd = -1;
static struct stat log_st;	/* the file log_fd holds */
static int dir_fd = -1;		/* the log's directory, for rotations */
static char log_name[NAME_MAX + 1];	/* the log's name in it */
static struct stat stuck_st;	/* a new file that could not be opened */
static int sys_fd = -1;		/* the system log's socket, or -1 */
static int sys_pri;		/* the records' facility and priority */
static int failed;		/* a write failed: reported once */
static int stuck;		/* a rotation not followed: reported once */
static const char *user = "";
static char addr[64], port[16];
/*
 * The record being made: allocated when a log is opened, so that a session
 * without one holds none of it, and no page of its own around it.
 */
static char *linebuf;

/* The record's buffer, made once: 0, or -1 with errno. */
static int
line_alloc(void)
{
	if (linebuf == NULL && (linebuf = malloc(LINE_MAX_BYTES)) == NULL)
		return -1;
	return 0;
}

/*
 * Opens name in the directory dirfd for appending, never creating it and
 * never through a symlink, and only a regular file.  Returns the descriptor,
 * with its fstat() in st, or -1 with errno.
 */
static int
open_log(int dirfd, const char *name, struct stat *st)
{
	int fd, e;

	fd = openat(dirfd, name, O_WRONLY | O_APPEND | O_CLOEXEC | O_NOCTTY |
	    O_NONBLOCK | O_NOFOLLOW);
	if (fd == -1) {
		if (errno == ENXIO)
			errno = EINVAL;	/* a FIFO without a reader, a device */
		return -1;
	}
	if (fstat(fd, st) == -1 || !S_ISREG(st->st_mode)) {
		e = S_ISREG(st->st_mode) ? errno : EINVAL;
		(void)close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

int
xferlog_open(const char *path)
{
	char dir[PATH_MAX];
	const char *slash = strrchr(path, '/');
	const char *base = slash != NULL ? slash + 1 : path;
	int fd, e;

	if (strlen(base) > NAME_MAX || strlen(path) >= sizeof dir) {
		errno = ENAMETOOLONG;
		return -1;
	}
	if (line_alloc() == -1 ||
	    (fd = open_log(AT_FDCWD, path, &log_st)) == -1)
		return -1;
	if (slash == NULL)
		memcpy(dir, ".", 2);
	else
		(void)snprintf(dir, sizeof dir, "%.*s",
		    slash == path ? 1 : (int)(slash - path), path);
	if ((dir_fd = sys_open_path(dir)) == -1) {
		e = errno;
		(void)close(fd);
		errno = e;
		return -1;
	}
	memcpy(log_name, base, strlen(base) + 1);
	log_fd = fd;
	return 0;
}

/*
 * After a rotation (the log renamed, a new one made at its path), the next
 * record goes to the new file, as logrotate's "create" expects: the path
 * is looked at before each record.  Until the new file exists, and when it
 * cannot be opened (under -r, where Landlock keeps files beneath the root),
 * records go on to the file already open, which the rotation renamed.
 */
static void
follow_rotation(void)
{
	struct stat st, nst;
	int fd;

	if (fstatat(dir_fd, log_name, &st, AT_SYMLINK_NOFOLLOW) == -1 ||
	    !S_ISREG(st.st_mode) || (st.st_dev == log_st.st_dev &&
	    st.st_ino == log_st.st_ino) || (st.st_dev == stuck_st.st_dev &&
	    st.st_ino == stuck_st.st_ino))
		return;
	if ((fd = open_log(dir_fd, log_name, &nst)) == -1) {
		stuck_st = st;	/* tried once */
		if (!stuck) {
			stuck = 1;
			error("transfer log: cannot open the new \"%s\" after "
			    "a rotation (%s): writing on to the rotated file",
			    log_name, strerror(errno));
		}
		return;
	}
	(void)close(log_fd);
	log_fd = fd;
	log_st = nst;
}

/*
 * The system log's socket, to which each record is sent by address: a
 * system log that was restarted (a new socket at the same path) gets the
 * next record with no connect(2) again, which the sandbox refuses under -r.
 */
static struct sockaddr_un sys_addr;

int
xferlog_open_syslog(int facility)
{
	struct stat st;
	int fd;

	if (line_alloc() == -1 || stat(_PATH_LOG, &st) == -1)
		return -1;
	if (!S_ISSOCK(st.st_mode)) {
		errno = ENOTSOCK;
		return -1;
	}
	if ((fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0)) == -1)
		return -1;
	memset(&sys_addr, 0, sizeof sys_addr);
	sys_addr.sun_family = AF_UNIX;
	(void)snprintf(sys_addr.sun_path, sizeof sys_addr.sun_path, "%s",
	    _PATH_LOG);
	sys_fd = fd;
	sys_pri = facility | LOG_INFO;
	return 0;
}

int
xferlog_fd(void)
{
	return log_fd;
}

int
xferlog_enabled(void)
{
	return log_fd != -1 || sys_fd != -1;
}

void
xferlog_session(const char *u, const char *connection)
{
	size_t n;

	user = u;
	addr[0] = port[0] = '\0';
	if (connection == NULL)
		return;
	n = strcspn(connection, " ");
	(void)snprintf(addr, sizeof addr, "%.*s", (int)n, connection);
	connection += n + (connection[n] == ' ');
	n = strcspn(connection, " ");
	(void)snprintf(port, sizeof port, "%.*s", (int)n, connection);
}

/* The length of the valid UTF-8 sequence at s (1 to 4), or 0. */
static size_t
utf8_len(const unsigned char *s)
{
	size_t n, i;
	unsigned long cp;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf) {
		n = 2;
		cp = s[0] & 0x1f;
	} else if (s[0] >= 0xe0 && s[0] <= 0xef) {
		n = 3;
		cp = s[0] & 0x0f;
	} else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
		n = 4;
		cp = s[0] & 0x07;
	} else {
		return 0;
	}
	for (i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	/* Overlong forms, surrogates and code points past U+10FFFF. */
	if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
	    (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
		return 0;
	return n;
}

/* Appends len bytes of s; -1 when they do not fit. */
static int
put(char *buf, size_t size, size_t *off, const char *s, size_t len)
{
	if (len > size - *off)
		return -1;
	memcpy(buf + *off, s, len);
	*off += len;
	return 0;
}

/*
 * Appends name as a JSON string (quotes included) to buf of size bytes at
 * *off: printable ASCII and valid UTF-8 as they are, '"' and '\' escaped,
 * control bytes as \n, \r, \t or \u00XX, and each byte that is not valid
 * UTF-8 as U+FFFD, so that the line is valid Unicode for the strictest
 * parser (RFC 7493).  A record keeps the exact bytes of such a name in a
 * field of its own ("path_hex" beside "path").  Returns 0, or -1 when it
 * does not fit (buf is then left unterminated at *off).
 */
static int
xferlog_json_string(char *buf, size_t size, size_t *off, const char *name)
{
	const unsigned char *s = (const unsigned char *)name;
	char esc[8];
	size_t n;

	if (put(buf, size, off, "\"", 1) == -1)
		return -1;
	while (*s != '\0') {
		if (*s == '"' || *s == '\\') {
			esc[0] = '\\';
			esc[1] = (char)*s;
			n = 2;
		} else if (*s == '\n' || *s == '\r' || *s == '\t') {
			esc[0] = '\\';
			esc[1] = *s == '\n' ? 'n' : *s == '\r' ? 'r' : 't';
			n = 2;
		} else if (*s < 0x20 || *s == 0x7f) {
			n = (size_t)snprintf(esc, sizeof esc, "\\u%04x", *s);
		} else if ((n = utf8_len(s)) != 0) {
			if (put(buf, size, off, (const char *)s, n) == -1)
				return -1;
			s += n;
			continue;
		} else {
			memcpy(esc, "\\ufffd", 6);	/* not UTF-8 */
			n = 6;
		}
		if (put(buf, size, off, esc, n) == -1)
			return -1;
		s++;
	}
	return put(buf, size, off, "\"", 1);
}

/* Appends ,"key":value with printf's format. */
static int __attribute__((format(printf, 4, 5)))
put_fmt(size_t *off, const char *key, int quoted, const char *fmt, ...)
{
	va_list ap;
	int n;

	n = snprintf(linebuf + *off, LINE_MAX_BYTES - *off, ",\"%s\":%s", key,
	    quoted ? "\"" : "");
	if (n < 0 || (size_t)n >= LINE_MAX_BYTES - *off)
		return -1;
	*off += (size_t)n;
	va_start(ap, fmt);
	n = vsnprintf(linebuf + *off, LINE_MAX_BYTES - *off, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= LINE_MAX_BYTES - *off)
		return -1;
	*off += (size_t)n;
	return quoted ? put(linebuf, LINE_MAX_BYTES, off, "\"", 1) : 0;
}

/* Whether s is valid UTF-8 throughout. */
static int
valid_utf8(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t n;

	for (; *p != '\0'; p += n)
		if ((n = utf8_len(p)) == 0)
			return 0;
	return 1;
}

/* Appends s in hexadecimal, two digits a byte, as a JSON string. */
static int
put_hex(size_t *off, const char *s)
{
	static const char digits[] = "0123456789abcdef";
	const unsigned char *p = (const unsigned char *)s;
	char pair[2];

	if (put(linebuf, LINE_MAX_BYTES, off, "\"", 1) == -1)
		return -1;
	for (; *p != '\0'; p++) {
		pair[0] = digits[*p >> 4];
		pair[1] = digits[*p & 0xf];
		if (put(linebuf, LINE_MAX_BYTES, off, pair, 2) == -1)
			return -1;
	}
	return put(linebuf, LINE_MAX_BYTES, off, "\"", 1);
}

/*
 * Appends ,"key":"string", escaped; for a string that is not UTF-8, also
 * ,"key_hex":"..." with its exact bytes.
 */
static int
put_str(size_t *off, const char *key, const char *s)
{
	char head[40];
	int n;

	n = snprintf(head, sizeof head, ",\"%s\":", key);
	if (n < 0 || (size_t)n >= sizeof head ||
	    put(linebuf, LINE_MAX_BYTES, off, head, (size_t)n) == -1 ||
	    xferlog_json_string(linebuf, LINE_MAX_BYTES, off, s) == -1)
		return -1;
	if (valid_utf8(s))
		return 0;
	n = snprintf(head, sizeof head, ",\"%s_hex\":", key);
	if (n < 0 || (size_t)n >= sizeof head ||
	    put(linebuf, LINE_MAX_BYTES, off, head, (size_t)n) == -1)
		return -1;
	return put_hex(off, s);
}

/* Appends ,"key":number unless it is XFER_NONE. */
static int
put_num(size_t *off, const char *key, uint64_t v)
{
	if (v == XFER_NONE)
		return 0;
	return put_fmt(off, key, 0, "%llu", (unsigned long long)v);
}

/* The fields of e after "time" and "session". */
static int
put_event(size_t *off, const struct xfer_event *e)
{
	struct timespec now;
	double secs;

	if (put_str(off, "user", user) == -1 ||
	    (addr[0] != '\0' && put_str(off, "client", addr) == -1) ||
	    (port[0] != '\0' && port[strspn(port, "0123456789")] == '\0' &&
	    put_fmt(off, "port", 0, "%s", port) == -1) ||
	    put_str(off, "event", e->event) == -1 ||
	    (e->path != NULL && put_str(off, "path", e->path) == -1) ||
	    (e->target != NULL && put_str(off, "target", e->target) == -1) ||
	    (e->flags != NULL && put_str(off, "flags", e->flags) == -1) ||
	    put_num(off, "bytes_read", e->bytes_read) == -1 ||
	    put_num(off, "bytes_written", e->bytes_written) == -1 ||
	    put_num(off, "first_offset", e->first_offset) == -1 ||
	    put_num(off, "last_offset", e->last_offset) == -1 ||
	    (e->mode != XFER_NONE &&
	    put_fmt(off, "mode", 1, "%04llo", (unsigned long long)e->mode) ==
	    -1) ||
	    put_num(off, "size", e->size) == -1 ||
	    put_num(off, "uid", e->uid) == -1 ||
	    put_num(off, "gid", e->gid) == -1 ||
	    put_num(off, "mtime", e->mtime) == -1)
		return -1;
	if (e->opened != NULL && clock_gettime(CLOCK_MONOTONIC, &now) == 0) {
		secs = (double)(now.tv_sec - e->opened->tv_sec) +
		    (double)(now.tv_nsec - e->opened->tv_nsec) / 1e9;
		if (put_fmt(off, "duration", 0, "%.3f", secs) == -1)
			return -1;
	}
	if (e->forced && put_fmt(off, "forced", 0, "true") == -1)
		return -1;
	if (e->not_closed && put_fmt(off, "closed", 0, "false") == -1)
		return -1;
	if (e->placed != 0 && put_fmt(off, "placed", 0, "%s",
	    e->placed > 0 ? "true" : "false") == -1)
		return -1;
	if (e->mode_forced && put_fmt(off, "mode_forced", 0, "true") == -1)
		return -1;
	return e->result == NULL ? 0 : put_str(off, "result", e->result);
}

/*
 * Sends the record at linebuf + HEAD_BYTES, len bytes without its newline,
 * to the system log as one message: "<PRI>Mmm dd hh:mm:ss TAG[PID]: "
 * before it, as syslog(3) writes.  Returns what sendto(2) returned.
 */
static ssize_t
send_syslog(const struct timespec *ts, size_t len)
{
	char head[HEAD_BYTES], stamp[32];
	struct tm tm;
	size_t hlen;
	ssize_t n;

	if (localtime_r(&ts->tv_sec, &tm) == NULL ||
	    strftime(stamp, sizeof stamp, "%b %e %H:%M:%S", &tm) == 0)
		memcpy(stamp, "Jan  1 00:00:00", 16);
	hlen = (size_t)snprintf(head, sizeof head, "<%d>%s %s[%ld]: ", sys_pri,
	    stamp, SYSLOG_TAG, (long)getpid());
	memcpy(linebuf + HEAD_BYTES - hlen, head, hlen);
	while ((n = sendto(sys_fd, linebuf + HEAD_BYTES - hlen, hlen + len,
	    MSG_NOSIGNAL, (struct sockaddr *)&sys_addr, sizeof sys_addr)) ==
	    -1 && errno == EINTR)
		;
	return n < 0 ? n : n - (ssize_t)hlen;
}

void
xferlog_write(const struct xfer_event *e)
{
	struct timespec ts;
	struct tm tm;
	size_t off;
	ssize_t n;
	int saved = errno;

	if (!xferlog_enabled())
		return;
	if (log_fd != -1)
		follow_rotation();
	if (clock_gettime(CLOCK_REALTIME, &ts) == -1 ||
	    gmtime_r(&ts.tv_sec, &tm) == NULL)
		memset(&tm, 0, sizeof tm);
	off = HEAD_BYTES;
	off += strftime(linebuf + off, LINE_MAX_BYTES - off,
	    "{\"time\":\"%Y-%m-%dT%H:%M:%S", &tm);
	off += (size_t)snprintf(linebuf + off, LINE_MAX_BYTES - off,
	    ".%03ldZ\",\"session\":%ld", ts.tv_nsec / 1000000L,
	    (long)getpid());
	/* Cannot fail: two paths take at most 65,536 bytes. */
	if (put_event(&off, e) == -1 ||
	    put(linebuf, LINE_MAX_BYTES, &off, "}\n", 2) == -1) {
		errno = saved;
		return;
	}
	off -= HEAD_BYTES;
	if (log_fd != -1) {
		while ((n = write(log_fd, linebuf + HEAD_BYTES, off)) == -1 &&
		    errno == EINTR)
			;
	} else {
		n = send_syslog(&ts, --off);	/* one message, no newline */
	}
	if ((n < 0 || (size_t)n != off) && !failed) {
		failed = 1;
		error("transfer log: %s", n < 0 ? strerror(errno) :
		    "short write");
	}
	errno = saved;
}
