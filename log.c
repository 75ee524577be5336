/*
 * Log lines in OpenSSH's layout: debug levels carry a "debugN: " prefix,
 * unprintable bytes are escaped as OpenSSH's strnvis() does (octal on stderr,
 * C style in syslog), and stderr lines end in CR LF.  Without /dev/log, as
 * in a chroot jail, syslog(3) drops the line and nothing fails.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <syslog.h>
#include <unistd.h>

#include "log.h"

#define LOG_LINE_MAX	1024

int log_level = LOG_LEVEL_ERROR;
static int log_on_stderr;
static int log_facility = LOG_AUTH;

static const struct {
	const char *name;
	int level;
} levels[] = {
	{ "QUIET", LOG_LEVEL_QUIET },
	{ "FATAL", LOG_LEVEL_FATAL },
	{ "ERROR", LOG_LEVEL_ERROR },
	{ "INFO", LOG_LEVEL_INFO },
	{ "VERBOSE", LOG_LEVEL_VERBOSE },
	{ "DEBUG", LOG_LEVEL_DEBUG1 },
	{ "DEBUG1", LOG_LEVEL_DEBUG1 },
	{ "DEBUG2", LOG_LEVEL_DEBUG2 },
	{ "DEBUG3", LOG_LEVEL_DEBUG3 },
};

static const struct {
	const char *name;
	int facility;
} facilities[] = {
	{ "DAEMON", LOG_DAEMON },
	{ "USER", LOG_USER },
	{ "AUTH", LOG_AUTH },
#ifdef LOG_AUTHPRIV
	{ "AUTHPRIV", LOG_AUTHPRIV },
#endif
	{ "LOCAL0", LOG_LOCAL0 },
	{ "LOCAL1", LOG_LOCAL1 },
	{ "LOCAL2", LOG_LOCAL2 },
	{ "LOCAL3", LOG_LOCAL3 },
	{ "LOCAL4", LOG_LOCAL4 },
	{ "LOCAL5", LOG_LOCAL5 },
	{ "LOCAL6", LOG_LOCAL6 },
	{ "LOCAL7", LOG_LOCAL7 },
};

int
log_level_number(const char *name)
{
	for (size_t i = 0; i < sizeof levels / sizeof levels[0]; i++)
		if (strcasecmp(name, levels[i].name) == 0)
			return levels[i].level;
	return LOG_LEVEL_NOT_SET;
}

int
log_facility_number(const char *name)
{
	for (size_t i = 0; i < sizeof facilities / sizeof facilities[0]; i++)
		if (strcasecmp(name, facilities[i].name) == 0)
			return facilities[i].facility;
	return -1;
}

void
log_init(const char *ident, int level, int facility, int on_stderr)
{
	log_level = level;
	log_facility = facility;
	log_on_stderr = on_stderr;
	/*
	 * Connected now (LOG_NDELAY), before the sandbox: a session whose
	 * first line comes late finds /dev/log already open.  Under -r this
	 * is the only connection it gets: the sandbox refuses new sockets.
	 */
	if (!on_stderr)
		openlog(ident, LOG_PID | LOG_NDELAY, facility);
}

/*
 * Escapes src into dst the way OpenSSH's log does: on stderr, VIS_SAFE |
 * VIS_OCTAL (tab, BS and BEL pass); in syslog, VIS_CSTYLE | VIS_NL |
 * VIS_TAB | VIS_OCTAL.  A backslash is doubled in both.  Unlike OpenSSH,
 * newline and CR are escaped on stderr too, as "\n" and "\r": a name sent
 * by the client can never start a line of its own.
 */
static void
escape(char *dst, size_t size, const char *src, int cstyle)
{
	static const char cs_from[] = "\n\t\r\b\a\v\f";
	static const char cs_to[] = "ntrbavf";
	const char *hit;
	size_t o = 0;
	unsigned char ch;
	char tmp[5];
	size_t n;

	for (; *src != '\0'; src++) {
		ch = (unsigned char)*src;
		if (ch == '\\') {
			memcpy(tmp, "\\\\", 3);
		} else if ((cstyle || ch == '\n' || ch == '\r') &&
		    (hit = strchr(cs_from, ch)) != NULL) {
			tmp[0] = '\\';
			tmp[1] = cs_to[hit - cs_from];
			tmp[2] = '\0';
		} else if ((ch >= 0x20 && ch < 0x7f) ||
		    (!cstyle && (ch == '\t' || ch == '\b' || ch == '\a'))) {
			tmp[0] = (char)ch;
			tmp[1] = '\0';
		} else {
			(void)snprintf(tmp, sizeof tmp, "\\%03o", ch);
		}
		n = strlen(tmp);
		if (n >= size - o)
			break;
		memcpy(dst + o, tmp, n);
		o += n;
	}
	dst[o] = '\0';
}

void
log_emit(int level, const char *fmt, ...)
{
	char msg[LOG_LINE_MAX], vis[LOG_LINE_MAX], line[LOG_LINE_MAX + 16];
	const char *prefix = "";
	int saved_errno = errno;
	int pri = LOG_INFO;
	va_list ap;
	ssize_t w;
	size_t len, off;

	switch (level) {
	case LOG_LEVEL_FATAL:
		/* As OpenSSH, syslog marks fatal and error lines; stderr not. */
		if (!log_on_stderr)
			prefix = "fatal: ";
		pri = LOG_CRIT;
		break;
	case LOG_LEVEL_ERROR:
		if (!log_on_stderr)
			prefix = "error: ";
		pri = LOG_ERR;
		break;
	case LOG_LEVEL_DEBUG1:
		prefix = "debug1: ";
		pri = LOG_DEBUG;
		break;
	case LOG_LEVEL_DEBUG2:
		prefix = "debug2: ";
		pri = LOG_DEBUG;
		break;
	case LOG_LEVEL_DEBUG3:
		prefix = "debug3: ";
		pri = LOG_DEBUG;
		break;
	default:
		break;
	}
	len = strlen(prefix);
	memcpy(msg, prefix, len + 1);
	va_start(ap, fmt);
	(void)vsnprintf(msg + len, sizeof msg - len, fmt, ap);
	va_end(ap);
	escape(vis, sizeof vis, msg, !log_on_stderr);
	if (log_on_stderr) {
		len = (size_t)snprintf(line, sizeof line, "%s\r\n", vis);
		for (off = 0; off < len; off += (size_t)w) {
			w = write(STDERR_FILENO, line + off, len - off);
			if (w == -1 && errno == EINTR) {
				w = 0;
				continue;
			}
			if (w <= 0)
				break;
		}
	} else {
		syslog(log_facility | pri, "%.500s", vis);
	}
	errno = saved_errno;
}
