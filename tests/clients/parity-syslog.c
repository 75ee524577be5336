/*
 * An LD_PRELOAD library for tests/clients/run-parity.sh: syslog(3) writes
 * its lines to the file named by $PARITY_SYSLOG instead of /dev/log, so that
 * what a server logs to the system log (before its options are read, or without
 * -e) can be compared.  Each line is
 *
 *	IDENT[PID] fac=FACILITY pri=PRIORITY: MESSAGE
 *
 * with "[PID]" literally (when openlog() asked for LOG_PID), the facility
 * number (LOG_AUTH = 4, LOG_LOCAL5 = 21, ...) in force for the line, and the
 * priority (LOG_CRIT = 2, LOG_ERR = 3, LOG_INFO = 6, LOG_DEBUG = 7).
 *
 * Build: cc -shared -fPIC -o parity-syslog.so parity-syslog.c
 */
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <syslog.h>
#include <unistd.h>

static char ident[256] = "(no-openlog)";
static int options;
static int facility = LOG_USER;

void openlog(const char *, int, int);
void closelog(void);
void syslog(int, const char *, ...);
void vsyslog(int, const char *, va_list);
void __syslog_chk(int, int, const char *, ...);
void __vsyslog_chk(int, int, const char *, va_list);

void
openlog(const char *id, int opt, int fac)
{
	(void)snprintf(ident, sizeof ident, "%s", id != NULL ? id : "(null)");
	options = opt;
	if (fac != 0)
		facility = fac;
}

void
closelog(void)
{
}

void
__vsyslog_chk(int pri, int flag, const char *fmt, va_list ap)
{
	const char *path = getenv("PARITY_SYSLOG");
	char msg[4096], line[4500];
	int fd, n, fac;

	(void)flag;
	if (path == NULL)
		return;
	(void)vsnprintf(msg, sizeof msg, fmt, ap);
	fac = (pri & LOG_FACMASK) != 0 ? (pri & LOG_FACMASK) : facility;
	n = snprintf(line, sizeof line, "%s%s fac=%d pri=%d: %s\n", ident,
	    (options & LOG_PID) ? "[PID]" : "", fac >> 3, pri & LOG_PRIMASK,
	    msg);
	if (n < 0)
		return;
	if (n >= (int)sizeof line)
		n = (int)sizeof line - 1;
	if ((fd = open(path, O_WRONLY | O_APPEND | O_CREAT, 0600)) == -1)
		return;
	(void)!write(fd, line, (size_t)n);
	(void)close(fd);
}

void
vsyslog(int pri, const char *fmt, va_list ap)
{
	__vsyslog_chk(pri, 0, fmt, ap);
}

void
syslog(int pri, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	__vsyslog_chk(pri, 0, fmt, ap);
	va_end(ap);
}

void
__syslog_chk(int pri, int flag, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	__vsyslog_chk(pri, flag, fmt, ap);
	va_end(ap);
}
