/*
 * sftp-server: SFTP version 3 and OpenSSH's extensions over stdin and
 * stdout, a drop-in replacement for OpenSSH's sftp-server.
 *
 * This file is the session: the options, its setup, and one loop: read as
 * much input as there is room for, hand every complete request in it to
 * requests_process() (requests.c), write the queue of replies out in one
 * go, and give back what a transfer grew once the session goes idle.  Only
 * this file reads stdin, writes stdout and ends the process.
 */
#include <sys/types.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif
#include <sys/stat.h>

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "fileio.h"
#include "fs.h"
#include "log.h"
#include "packet.h"
#include "path.h"
#include "pipes.h"
#include "requests.h"
#include "rootcheck.h"
#include "sandbox.h"
#include "sftp-server.h"
#include "sys-gnu.h"
#include "xferlog.h"

/*
 * A long request (copy-data, check-file) looks, at most this often between
 * its chunks, whether the client is still there.
 */
#define STOP_CHECK_MS	100
/*
 * -T: storage operations in flight at once, unless told otherwise: as many
 * as OpenSSH's sftp client keeps requests in flight.
 */
#define STORAGE_OPS_DEFAULT	64
/* What wait_for() waits for, and what it saw. */
#define WAIT_INPUT	0x1	/* stdin has input, or its end */
#define WAIT_OUTPUT	0x2	/* stdout takes more, or failed */
#define WAIT_JOBS	0x4	/* work in a worker ended */
#define WAIT_STOP	0x8	/* the session ends: stop waiting */
/* With WAIT_JOBS and WAIT_INPUT: replies wait, look at stdin all the same. */
#define WAIT_PEEK	0x10

/* The options, as parse_options() reads them. */
struct options {
	const char *dir;	/* -d, or NULL */
	const char *xferlog;	/* -L, or NULL */
	const char *root;	/* -r, or NULL */
	int level;		/* -l */
	int facility;		/* -f */
	int on_stderr;		/* -e */
	int no_sandbox;		/* -S */
};

static struct ibuf ib;
static struct oqueue oq;
static struct session sess;
static const char *client_addr = "UNKNOWN";
static const char *progname = "sftp-server";	/* as invoked, for logs */
static char user_name[256];
static char user_home[PATH_MAX];
static uid_t user_uid;
/* SIGTERM, SIGHUP or SIGINT came: the session ends at the next look. */
static volatile sig_atomic_t got_signal;
/* end_session() runs: the waits return to it rather than end the session. */
static int ending;
/* stdout failed, or its reader left: no reply can be sent any more. */
static int out_gone;
static sigset_t end_signals;	/* those of the three that are caught */
/*
 * After a signal, how long the storage calls in flight may take to finish
 * before the session ends without them (ms).
 */
#ifndef SFTP_FUZZ
#define ABANDON_MS	5000
#else
#define ABANDON_MS	20	/* the fuzz harness's storage hangs longer */
#endif
/*
 * After storage work, how long the session keeps what the work grew (its
 * workers, the jobs' arena, the buffers' touched pages) once none is in
 * flight (ms), whatever the client's byte rate.
 */
#define LINGER_MS	50
/* Storage work was in flight since the session last gave that back. */
static int lingering;
static struct timespec last_in_flight;
/* stdout's file flags with O_NONBLOCK, when it is a pipe or socket; or -1. */
static int out_nonblock = -1;

static void end_session(int) __attribute__((noreturn));
static long elapsed_ms(const struct timespec *, const struct timespec *);
static int write_out(void);
static int wait_for(int, int);

#ifdef SFTP_FUZZ
#include <setjmp.h>
/*
 * Built for the fuzz harness (tests/fuzz/fuzz_session.c): the end of a session
 * jumps back to the harness with its exit status instead of ending the
 * process.
 */
jmp_buf sftp_fuzz_exit;
int sftp_fuzz_status;
#endif

/* The start or end of the session in the transfer log. */
static void
log_session(const char *event, const char *result)
{
	static struct timespec started;
	struct xfer_event ev = XFER_EVENT(event);

	if (started.tv_sec == 0 && started.tv_nsec == 0)
		(void)clock_gettime(CLOCK_MONOTONIC, &started);
	else
		ev.opened = &started;	/* the end: how long it lasted */
	ev.result = result;
	xferlog_write(&ev);
}

/* Every handle closed (and logged), then the end of the session logged. */
static void
close_session(const char *result)
{
	requests_close_all();
	log_session("session-close", result);
	logit("session closed for local user %s from [%s]", user_name,
	    client_addr);
}

/*
 * The one end of a session, whatever ends it.  Every request in flight
 * finishes (a storage call cannot be taken back) and is answered, so that
 * its bytes count in the logs; but once a signal ended the session, the
 * storage calls still running ABANDON_MS later (storage that hangs) are
 * given up, and logged as such; from then on no storage call is made, and
 * the handles are logged as not closed (requests_abandon()).  The replies
 * are sent as the queue fills and at the end; they are dropped (the queue
 * muted: each is built and counted, then dropped, so the queue never
 * fills) when a signal or stdout's failure ended the session (the client
 * may not be reading, or cannot), and from the moment stdout fails or a
 * signal comes while they are sent.  Every handle is logged, and closed
 * unless the storage was given up; then the process exits with status, or,
 * ended by a signal, dies of it as without a handler.
 */
static void
end_session(int status)
{
	int saved = errno, sig = got_signal, send = sig == 0 && !out_gone;
	int term = sig;
	struct timespec start, now;
	long left = -1;
	unsigned n;
#ifndef SFTP_FUZZ
	sigset_t set;
#endif

	ending = 1;
	if (!send)
		oq_mute(&oq);
	if (sig != 0)
		verbose("received signal %d; closing the session", sig);
	(void)clock_gettime(CLOCK_MONOTONIC, &start);
	while (requests_in_flight() > 0) {
		(void)requests_reap();
		if (requests_in_flight() == 0)
			break;
		/* A signal while the end waits starts the clock too. */
		if (term == 0 && (term = got_signal) != 0)
			(void)clock_gettime(CLOCK_MONOTONIC, &start);
		if (term != 0 && clock_gettime(CLOCK_MONOTONIC, &now) == 0 &&
		    (left = ABANDON_MS - elapsed_ms(&start, &now)) <= 0) {
			n = requests_abandon();
			error("%u storage operation%s did not finish within "
			    "%d s of signal %d: given up, and not counted", n,
			    n == 1 ? "" : "s", ABANDON_MS / 1000, term);
			break;
		}
		if (oq_pending(&oq) < OQ_HIWAT) {
			(void)wait_for(WAIT_JOBS, (int)left);
		} else if (write_out() == -1) {
			oq_mute(&oq);
			send = 0;
		}
	}
	if (send)
		(void)write_out();
	close_session(sig == 0 ? "ok" : sig == SIGTERM ? "SIGTERM" :
	    sig == SIGHUP ? "SIGHUP" : "SIGINT");
	errno = saved;
#ifdef SFTP_FUZZ
	/* The fuzz harness runs many sessions in one process. */
	ibuf_free(&ib);
	oq_free(&oq);
	requests_free();
	fs_reset();
	ending = 0;
	out_gone = 0;
	lingering = 0;
	/*
	 * A signal the harness sent from a job ended this session, not the
	 * next: the workers that send them are gone by now.
	 */
	got_signal = 0;
	sftp_fuzz_status = sig == 0 ? status : SESSION_OK;
	longjmp(sftp_fuzz_exit, 1);
#else
	if (sig != 0) {
		(void)signal(sig, SIG_DFL);
		(void)sigemptyset(&set);
		(void)sigaddset(&set, sig);
		(void)sigprocmask(SIG_UNBLOCK, &set, NULL);
		(void)raise(sig);
		_exit(128 + sig);
	}
	_exit(status);
#endif
}

/*
 * The handler sets the flag, and makes stdout non-blocking: a write that
 * was about to block on a client that reads nothing returns instead, so the
 * loop sees the flag.  A short write of a blocked write is seen the same
 * way, by the next write's EAGAIN.
 */
static void
on_signal(int sig)
{
	int e = errno;

	got_signal = sig;
	if (out_nonblock != -1)
		(void)fcntl(STDOUT_FILENO, F_SETFL, out_nonblock);
	errno = e;
}

/*
 * SIGTERM, SIGHUP and SIGINT end the session cleanly: the handler sets a
 * flag, and the loop closes the files, logs and exits.  No SA_RESTART, so
 * that a call blocked in the loop returns EINTR and the flag is looked at.
 * A signal inherited as ignored stays so: sftp -D starts the server with
 * SIGINT ignored, so that ^C stops a transfer and not the server.
 */
static void
catch_signals(void)
{
	static const int sigs[] = { SIGTERM, SIGHUP, SIGINT };
	struct sigaction sa, old;
	struct stat st;

	if (fstat(STDOUT_FILENO, &st) == 0 &&
	    (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode)) &&
	    (out_nonblock = fcntl(STDOUT_FILENO, F_GETFL)) != -1)
		out_nonblock |= O_NONBLOCK;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	(void)sigfillset(&sa.sa_mask);
	(void)sigemptyset(&end_signals);
	for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
		if (sigaction(sigs[i], NULL, &old) == 0 &&
		    old.sa_handler == SIG_IGN)
			continue;
		(void)sigaction(sigs[i], &sa, NULL);
		(void)sigaddset(&end_signals, sigs[i]);
	}
}

/* stdout failed: a peer that went away ends the session quietly. */
static void
output_failed(void)
{
	out_gone = 1;
	if (errno == EPIPE || errno == ECONNRESET)
		end_session(SESSION_OK);
	error("write: %s", strerror(errno));
	end_session(SESSION_ERROR);
}

/*
 * Writes the queue out, waiting while stdout takes no more (when it is
 * non-blocking: a signal made it so, or whoever started the server).
 * Returns 0, or -1: stdout failed (errno says why), or, while the session
 * ends, a signal came.
 */
static int
write_out(void)
{
	while (oq_flush(&oq, STDOUT_FILENO) == -1) {
		if (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK)
			return -1;
		if (wait_for(WAIT_OUTPUT, -1) == WAIT_STOP)
			return -1;
	}
	return 0;
}

/*
 * Writes the queue out; a failure ends the session.  Returns whether the
 * bytes of jobs that replies were written from were given back.
 */
static int
flush_replies(void)
{
	size_t n = oq_pending(&oq);

	pipes_write(n);
	if (write_out() == -1)
		output_failed();
	pipes_written(n);
	return requests_written();
}

/*
 * The one wait of the session: until stdin has input (WAIT_INPUT), stdout
 * takes more (WAIT_OUTPUT) or work in a worker ends (WAIT_JOBS), as want
 * asks, for at most timeout ms (-1: no limit).  Returns what is ready, or
 * 0 on timeout or when a signal that does not end the session cut the wait
 * short.
 *
 * The end signals are blocked from the last look at the flag until ppoll()
 * takes them, so none is missed.  One ends the session, there; so does a
 * failed poll, and stdout's reader gone (no reply can ever be sent),
 * whatever the wait is for.  While the session ends (end_session()) the
 * wait returns WAIT_STOP instead, and only a wait for output is cut short
 * by a signal: the requests in flight are waited for all the same.
 */
static int
wait_for(int want, int timeout)
{
	struct pollfd pfd[3];
	sigset_t old;
	int n = 0, e = 0, woke = 0;
	int cut = !ending || (want & WAIT_OUTPUT);

	pfd[0].fd = (want & WAIT_INPUT) ? STDIN_FILENO : -1;
	pfd[0].events = POLLIN;
	/* Not asked for, POLLERR and POLLHUP come all the same. */
	pfd[1].fd = !ending || (want & WAIT_OUTPUT) ? STDOUT_FILENO : -1;
	pfd[1].events = (want & WAIT_OUTPUT) ? POLLOUT : 0;
	pfd[2].fd = -1;
	pfd[2].events = POLLIN;
	pfd[2].revents = 0;
	/*
	 * Work finished meanwhile: no sleep.  With WAIT_PEEK, a look at stdin
	 * too, so that requests that came while a full queue of replies was
	 * written start now, not once every reply ready is out.  A signal
	 * that comes meanwhile is seen by the loop before its next wait.
	 */
	if ((want & WAIT_JOBS) && (pfd[2].fd = requests_wait_fd()) == -1) {
		if ((want & (WAIT_PEEK | WAIT_INPUT)) ==
		    (WAIT_PEEK | WAIT_INPUT) && poll(pfd, 1, 0) == 1)
			return WAIT_JOBS | WAIT_INPUT;
		return WAIT_JOBS;
	}
	(void)sigprocmask(SIG_BLOCK, &end_signals, &old);
	if (!(cut && got_signal)) {
		n = sys_ppoll(pfd, 3, timeout, &old);
		e = errno;
	}
	(void)sigprocmask(SIG_SETMASK, &old, NULL);
	if (pfd[2].fd != -1)
		requests_woke(pfd[2].revents != 0);
	if (cut && got_signal) {
		if (!ending)
			end_session(SESSION_OK);
		return WAIT_STOP;
	}
	if (n == -1 && e == EINTR)
		return 0;
	if (n == -1) {
		if (ending)
			return WAIT_STOP;
		error("poll: %s", strerror(e));
		end_session(SESSION_POLL);
	}
	if (pfd[0].revents != 0)
		woke |= WAIT_INPUT;	/* input, or its end: read it */
	if (pfd[1].revents != 0 && (want & WAIT_OUTPUT))
		woke |= WAIT_OUTPUT;	/* room, or a failure: write */
	if (pfd[2].revents != 0)
		woke |= WAIT_JOBS;
	if (woke != 0)
		return woke;
	if (pfd[1].revents & (POLLERR | POLLHUP)) {
		debug("output closed");
		out_gone = 1;
		end_session(SESSION_OK);
	}
	return 0;
}

/* Milliseconds from a to b. */
static long
elapsed_ms(const struct timespec *a, const struct timespec *b)
{
	return (long)(b->tv_sec - a->tv_sec) * 1000 +
	    (b->tv_nsec - a->tv_nsec) / 1000000;
}

/*
 * The stop check, called between the chunks of a long request (copy-data,
 * check-file; fileio_set_stop()): whether the session must stop now.  A
 * signal came, or the client is gone: the reader of stdout or the writer of
 * stdin closed its end, so no reply can reach it or no request come.  The
 * pipes are looked at every STOP_CHECK_MS at most.
 */
static int
stop_check(void)
{
	static struct timespec last;
	struct timespec now;
	struct pollfd pfd[2];

	if (got_signal)
		return 1;
	if (clock_gettime(CLOCK_MONOTONIC, &now) == -1 ||
	    elapsed_ms(&last, &now) < STOP_CHECK_MS)
		return 0;
	last = now;
	pfd[0].fd = STDIN_FILENO;
	pfd[0].events = 0;	/* POLLERR and POLLHUP come unasked */
	pfd[1].fd = STDOUT_FILENO;
	pfd[1].events = 0;
	if (poll(pfd, 2, 0) <= 0)
		return 0;
	if (((pfd[0].revents | pfd[1].revents) & (POLLERR | POLLHUP)) == 0)
		return 0;
	debug("client gone during a request");
	return 1;
}

/*
 * The traffic fell to a trickle (pipes_wait()), even if requests still come:
 * the buffers' pages and the pipes' go back, so that such a session holds
 * little.
 */
static void
go_idle(void)
{
	lingering = 0;
	requests_idle();
	ibuf_release(&ib);
	oq_release(&oq);
	fileio_release();
	pipes_idle();
}

/* The input and output buffers' pages, between a trickle's requests. */
static void
release_buffers(void)
{
	ibuf_release(&ib);
	oq_release(&oq);
}

/*
 * The loop is about to wait with no storage work in flight, for at most
 * timeout ms (-1: no limit).  Once none has been in flight for LINGER_MS,
 * the workers and the pages that work grew go back, as they do when the
 * session goes idle: a client that trickles after a burst keeps none of
 * them.  Returns the timeout, shortened to wake then.
 */
static int
linger(int timeout)
{
	struct timespec now;
	long left;

	if (!lingering || clock_gettime(CLOCK_MONOTONIC, &now) == -1)
		return timeout;
	if ((left = LINGER_MS - elapsed_ms(&last_in_flight, &now)) > 0)
		return timeout == -1 || timeout > left ? (int)left : timeout;
	requests_idle();
	ibuf_release(&ib);
	oq_release(&oq);
	fileio_release();
	lingering = 0;
	return timeout;
}

/* Reads what stdin has into the input buffer; its end ends the session. */
static void
read_input(void)
{
	ssize_t n;

	if ((n = ibuf_read(&ib, STDIN_FILENO)) == 0) {
		debug("read eof");
		end_session(SESSION_OK);
	}
	if (n == -1 && (errno == EINTR || errno == EAGAIN ||
	    errno == EWOULDBLOCK))
		return;		/* the loop looks at the flag, then waits */
	if (n == -1) {
		error("read: %s", strerror(errno));
		end_session(SESSION_ERROR);
	}
	pipes_read((size_t)n);
}

/*
 * The loop.  Requests are taken in order; one that depends on requests
 * still in flight (REQUESTS_WAIT) is held, and nothing after it is taken,
 * until they have finished.  While requests are in flight the loop waits
 * for them as well as for input, and stays awake (no idle) until they are
 * answered.
 */
static void
serve(void)
{
	struct cursor c, held;
	uint32_t len;
	int r, want, timeout, holding = 0, full;

	memset(&held, 0, sizeof held);
	for (;;) {
		/* A signal that came while no wait was blocked. */
		if (got_signal)
			end_session(SESSION_OK);
		full = requests_reap();
		/*
		 * Take every complete request while the queue has room, or
		 * while each is answered through a job in a worker: a full
		 * queue of replies does not hold up the start of their waits.
		 */
		while (oq_pending(&oq) < OQ_HIWAT || requests_queue_free()) {
			/*
			 * A signal ends the session before the next request,
			 * however many are buffered: each may wait on storage.
			 */
			if (got_signal)
				end_session(SESSION_OK);
			if (holding) {
				c = held;
			} else if ((r = ibuf_next(&ib, &c, &len)) == 0) {
				break;
			} else if (r < 0) {
				error("bad message from %s local user %s",
				    client_addr, user_name);
				end_session(len == 0 ? SESSION_FATAL :
				    SESSION_TOOLONG);
			}
			if ((r = requests_process(&c)) == REQUESTS_WAIT) {
				held = c;
				holding = 1;
				break;
			}
			holding = 0;
			if (r == REQUESTS_STOP)
				end_session(SESSION_OK); /* a signal, or gone */
			if (r != 0)
				end_session(r);
		}
		/* A request held for want of those bytes may go now. */
		if (oq_pending(&oq) > 0 && flush_replies() && holding)
			continue;
		if (oq_pending(&oq) == 0 && !holding && ibuf_ready(&ib))
			continue;
		sandbox_report();
		if (requests_in_flight() > 0) {
			lingering = 1;
			(void)clock_gettime(CLOCK_MONOTONIC, &last_in_flight);
			want = WAIT_JOBS | (full ? WAIT_PEEK : 0);
			if (!holding && ibuf_can_read(&ib))
				want |= WAIT_INPUT;
			timeout = holding ? requests_paced_ms() : -1;
		} else if (holding) {
			/* It can start now, or when a limit (-b) lets it. */
			if ((timeout = requests_paced_ms()) == -1)
				continue;
			want = 0;
		} else if ((timeout = pipes_wait()) == 0) {
			go_idle();
			continue;
		} else {
			/*
			 * A trickle (a STAT a second) after the session went
			 * idle: the buffers' pages go back after each request,
			 * not when the window ends, so that such a session
			 * holds what an idle one does between its requests
			 * (204 KiB against 196 in bench/scale.sh).  Each
			 * request then costs two madvise() calls and two page
			 * faults, at most a few hundred times a second (under
			 * 64 KiB in 2 s: a STAT moves about 110 bytes).
			 */
			if (pipes_quiet())
				release_buffers();
			want = WAIT_INPUT;
			timeout = linger(timeout);
		}
		if (wait_for(want, timeout) & WAIT_INPUT)
			read_input();	/* else the window ended, or a signal */
	}
}

static void
usage(void)
{
	fprintf(stderr,
	    "usage: %s [-AehRS] [-b down[:up]] [-d start_directory]\n"
	    "\t[-f log_facility] [-l log_level] [-L transfer_log] "
	    "[-M dir_mode]\n\t[-m file_mode] [-P denied_requests] "
	    "[-p allowed_requests]\n\t[-r root_directory] [-T storage_ops] "
	    "[-u umask]\n"
	    "       %s -Q protocol_feature\n", progname, progname);
	exit(SESSION_ERROR);
}

/*
 * A fatal error in the options, as OpenSSH's fatal() before its log_init():
 * to syslog with the default facility, then exit 255.
 */
static void __attribute__((format(printf, 1, 2), noreturn))
die(const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	(void)vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	log_emit(LOG_LEVEL_FATAL, "%s", msg);
	exit(SESSION_FATAL);
}

static void
find_user(void)
{
	struct passwd *pw;
	const char *home;

	user_uid = getuid();
	/* In a jail without /etc/passwd the user is its number. */
	if ((pw = getpwuid(user_uid)) != NULL) {
		(void)snprintf(user_name, sizeof user_name, "%s", pw->pw_name);
		(void)snprintf(user_home, sizeof user_home, "%s", pw->pw_dir);
		return;
	}
	(void)snprintf(user_name, sizeof user_name, "%lu",
	    (unsigned long)user_uid);
	home = getenv("HOME");
	(void)snprintf(user_home, sizeof user_home, "%s",
	    home != NULL ? home : "/");
}

/*
 * The argument of -d or -r with ~ and %d, %u, %U, %% expanded into out.
 * Errors are logged as OpenSSH's tilde_expand() and percent_expand() log
 * them, then exit 255.
 */
static void
expand_dir(const char *arg, char *out, size_t size)
{
	const char *p;

	char tmp[PATH_MAX];

	if (path_tilde(arg, user_home, tmp, sizeof tmp) == -1) {
		if (errno == ENOENT)
			error(OPENSSH_FN("tilde_expand") "No such user %.*s",
			    (int)strcspn(arg + 1, "/"), arg + 1);
		else
			error(OPENSSH_FN("tilde_expand") "Path too long");
		exit(SESSION_FATAL);
	}
	if (path_percent(tmp, user_home, user_name, user_uid, out,
	    size) == 0)
		return;
	if (errno == EINVAL) {
		for (p = tmp; (p = strchr(p, '%')) != NULL; p += 2) {
			if (p[1] == '\0') {
				error(OPENSSH_FN("vdollar_percent_expand")
				    "invalid format");
				break;
			}
			if (strchr("%duU", p[1]) == NULL) {
				error(OPENSSH_FN("vdollar_percent_expand")
				    "unknown key %%%c", p[1]);
				break;
			}
		}
	}
	die(OPENSSH_FN("percent_expand") "failed");
}

/*
 * -r: every path beneath root.  Where the kernel cannot confine paths the
 * server refuses to start rather than confine them less safely.
 */
static void
confine(const char *root)
{
	char bad[PATH_MAX];

	if (root_check(root, bad, sizeof bad) == -1) {
		if (errno == EPERM)
			error("bad ownership or modes for root directory "
			    "component \"%s\": refusing to start", bad);
		else
			error("root directory \"%s\": %s", root,
			    strerror(errno));
		exit(SESSION_ERROR);
	}
	if (fs_confine(root) == 0)
		return;
	if (errno == ENOSYS)
		error("-r needs openat2(2) (Linux 5.6 or later): refusing to "
		    "start");
	else
		error("root directory \"%s\": %s", root, strerror(errno));
	exit(SESSION_ERROR);
}

/* sshd leaves fds 0 to 2 open; anyone else may not. */
static void
sanitise_stdfd(void)
{
	int fd;

	while ((fd = open("/dev/null", O_RDWR)) != -1) {
		if (fd > STDERR_FILENO) {
			(void)close(fd);
			break;
		}
	}
}

/*
 * Reads the options into o and the session; -Q and -h answer and exit.
 * Errors are OpenSSH's, with its exit statuses.
 */
#define OPTIONS	"b:d:f:L:l:M:m:P:p:Q:r:T:u:AcehRS"

/*
 * One rate of -b: a number of bytes per second, K, M or G after it for
 * 2^10, 2^20, 2^30 (any case); 0 for none.  Returns 0, or -1 when s is not
 * one, or is above 2^50.
 */
static int
parse_rate(const char *s, size_t len, uint64_t *rate)
{
	static const char units[] = "kmg";
	const char *u;
	uint64_t v = 0;
	size_t i;
	int shift = 0;

	for (i = 0; i < len && s[i] >= '0' && s[i] <= '9'; i++) {
		v = v * 10 + (uint64_t)(s[i] - '0');
		if (v > (uint64_t)1 << 50)
			return -1;
	}
	if (i == 0)
		return -1;
	if (i + 1 == len && (u = strchr(units, tolower((unsigned char)s[i])))
	    != NULL)
		shift = 10 * (int)(u - units + 1);
	else if (i != len)
		return -1;
	if (v > ((uint64_t)1 << 50) >> shift)
		return -1;
	*rate = v << shift;
	return 0;
}

static void
parse_options(int argc, char **argv, struct options *o)
{
	unsigned long ops;
	char *end;
	long mask;
	int ch;

	optind = 1;
	opterr = 0;
	while ((ch = getopt(argc, argv, OPTIONS)) != -1) {
		switch (ch) {
		case 'Q':
			if (strcasecmp(optarg, "requests") != 0) {
				fprintf(stderr, "Invalid query type\n");
				exit(SESSION_ERROR);
			}
			requests_print_names();
			exit(SESSION_OK);
		case 'A':
			sess.atomic = 1;
			break;
		case 'R':
			sess.readonly = 1;
			break;
		case 'S':
			o->no_sandbox = 1;
			break;
		case 'c':
			/* A login shell's "sftp-server -c ...": no options. */
			optind = argc;
			return;
		case 'd':
			o->dir = optarg;
			break;
		case 'r':
			o->root = optarg;
			break;
		case 'L':
			o->xferlog = optarg;
			break;
		case 'e':
			o->on_stderr = 1;
			break;
		case 'f':
			if ((o->facility = log_facility_number(optarg)) == -1)
				error("Invalid log facility \"%s\"", optarg);
			break;
		case 'l':
			if ((o->level = log_level_number(optarg)) ==
			    LOG_LEVEL_NOT_SET)
				error("Invalid log level \"%s\"", optarg);
			break;
		case 'P':
			if (sess.deny_list != NULL)
				die("Refused requests already set");
			sess.deny_list = optarg;
			break;
		case 'p':
			if (sess.allow_list != NULL)
				die("Permitted requests already set");
			sess.allow_list = optarg;
			break;
		case 'T':
			errno = 0;
			ops = strtoul(optarg, &end, 10);
			if (*end != '\0' || end == optarg || errno != 0 ||
			    ops < 1 || ops > REQUESTS_MAX_OPS ||
			    optarg[0] == '-' || optarg[0] == '+')
				die("Invalid storage operations \"%s\": "
				    "1 to %d", optarg, REQUESTS_MAX_OPS);
			sess.storage_ops = (unsigned)ops;
			break;
		case 'u':
			errno = 0;
			mask = strtol(optarg, &end, 8);
			if (mask < 0 || mask > 0777 || *end != '\0' ||
			    end == optarg || (mask == 0 && errno != 0))
				die("Invalid umask \"%s\"", optarg);
			(void)umask((mode_t)mask);
			break;
		case 'b':
			/* The last -b counts, the upload limit too. */
			sess.up_rate = 0;
			end = strchr(optarg, ':');
			if (parse_rate(optarg, end != NULL ?
			    (size_t)(end - optarg) : strlen(optarg),
			    &sess.down_rate) == -1 || (end != NULL &&
			    parse_rate(end + 1, strlen(end + 1),
			    &sess.up_rate) == -1))
				die("Invalid bandwidth limits \"%s\": "
				    "DOWN[:UP], bytes per second, K, M or G "
				    "after each", optarg);
			break;
		case 'm':
		case 'M':
			errno = 0;
			mask = strtol(optarg, &end, 8);
			if (mask < 0 || mask > 07777 || *end != '\0' ||
			    end == optarg || errno != 0 || optarg[0] == '-' ||
			    optarg[0] == '+' ||
			    isspace((unsigned char)optarg[0]))
				die("Invalid %s mode \"%s\": octal, 0 to 7777",
				    ch == 'm' ? "file" : "directory", optarg);
			*(ch == 'm' ? &sess.file_mode : &sess.dir_mode) =
			    (int)mask;
			break;
		case 'h':
		default:
			usage();
		}
	}
}

/*
 * -L: the transfer log, a file which no request may then reach, or
 * "syslog:FACILITY", the system log.  A log that cannot be opened refuses
 * the session, rather than let it run unlogged.
 */
#define XFERLOG_SYSLOG	"syslog:"

static void
open_xferlog(const char *path)
{
	const char *why;
	int facility;

	if (strncmp(path, XFERLOG_SYSLOG, strlen(XFERLOG_SYSLOG)) == 0) {
		facility = log_facility_number(path + strlen(XFERLOG_SYSLOG));
		if (facility == -1)
			why = "unknown facility";
		else if (xferlog_open_syslog(facility) == 0)
			return;
		else
			why = strerror(errno);
	} else if (xferlog_open(path) == 0) {
		if (fs_protect(path, xferlog_fd()) == 0)
			return;
		why = strerror(errno);
	} else if (errno == ENOENT) {
		why = "no such file; create it first";
	} else if (errno == ELOOP) {
		why = "a symbolic link";
	} else if (errno == EINVAL) {
		why = "not a regular file";
	} else {
		why = strerror(errno);
	}
	error("transfer log \"%s\": %s: refusing the session", path, why);
	exit(SESSION_ERROR);
}

/* The client's address from SSH_CONNECTION, for the session's log lines. */
static void
find_client(void)
{
	static char addr[256];
	const char *conn;
	char *space;

	if ((conn = getenv("SSH_CONNECTION")) == NULL)
		return;
	(void)snprintf(addr, sizeof addr, "%s", conn);
	client_addr = addr;
	if ((space = strchr(addr, ' ')) == NULL) {
		error("Malformed SSH_CONNECTION variable: \"%s\"", conn);
		end_session(SESSION_FATAL);
	}
	*space = '\0';
}

int
sftp_server_main(int argc, char **argv)
{
	struct options o = {
		NULL, NULL, NULL, LOG_LEVEL_ERROR, LOG_AUTH, 0, 0
	};
	static char startdir[PATH_MAX], rootdir[PATH_MAX], logpath[PATH_MAX];
	const char *how;

	memset(&sess, 0, sizeof sess);
	sess.storage_ops = STORAGE_OPS_DEFAULT;
	sess.file_mode = sess.dir_mode = -1;
	sess.in = &ib;
	sanitise_stdfd();
	if (argc > 0 && argv[0] != NULL && argv[0][0] != '\0')
		progname = strrchr(argv[0], '/') != NULL ?
		    strrchr(argv[0], '/') + 1 : argv[0];
	/* Until the options are read, errors go to syslog, as OpenSSH. */
	log_init(progname, LOG_LEVEL_ERROR, LOG_AUTH, 0);
	find_user();
	parse_options(argc, argv, &o);
	if (o.dir != NULL)
		expand_dir(o.dir, startdir, sizeof startdir);
	if (o.root != NULL)
		expand_dir(o.root, rootdir, sizeof rootdir);
	if (o.xferlog != NULL &&
	    strncmp(o.xferlog, XFERLOG_SYSLOG, strlen(XFERLOG_SYSLOG)) != 0)
		expand_dir(o.xferlog, logpath, sizeof logpath);
	else if (o.xferlog != NULL)
		(void)snprintf(logpath, sizeof logpath, "%s", o.xferlog);

	/* As OpenSSH's log_init(): a bad level or facility that stuck. */
	if (o.level == LOG_LEVEL_NOT_SET) {
		fprintf(stderr, "Unrecognized internal syslog level code %d\n",
		    o.level);
		exit(SESSION_ERROR);
	}
	if (o.facility == -1 && !o.on_stderr) {
		fprintf(stderr, "Unrecognized internal syslog facility code "
		    "%d\n", o.facility);
		exit(SESSION_ERROR);
	}
	log_init(progname, o.level, o.facility, o.on_stderr);
	if (sess.deny_list != NULL)
		requests_check_list("-P", sess.deny_list);
	if (sess.allow_list != NULL)
		requests_check_list("-p", sess.allow_list);
#if defined(__linux__) && defined(PR_SET_DUMPABLE)
	/* As OpenSSH on Linux: no core dumps, no ptrace by the same user. */
	(void)prctl(PR_SET_DUMPABLE, 0);
#endif
	(void)signal(SIGPIPE, SIG_IGN);
	(void)signal(SIGXFSZ, SIG_IGN);
	catch_signals();
	tzset();

	find_client();
	logit("session opened for local user %s from [%s]", user_name,
	    client_addr);
	/* Before -r: the log lives outside the root. */
	if (o.xferlog != NULL)
		open_xferlog(logpath);
	xferlog_session(user_name, getenv("SSH_CONNECTION"));
	log_session("session-open", "ok");
	sess.user_name = user_name;
	sess.user_home = user_home;
	sess.confined = o.root != NULL;
	if (sess.atomic) {
		how = fs_upload_init();
		verbose("atomic uploads: %s", how);
	}
	/* -m, -M: modes made exactly; the umask applied by hand elsewhere. */
	if (sess.file_mode != -1 || sess.dir_mode != -1)
		sess.mask = umask(0);
	if (ibuf_init_pinned(&ib, IBUF_SOFT, IBUF_HARD) == -1 ||
	    oq_init(&oq, OQ_SIZE) == -1 ||
	    requests_init(&sess, &oq) == -1) {
		error("out of memory");
		exit(SESSION_ERROR);
	}
	pipes_init();
	fileio_set_stop(stop_check);
	if (o.root != NULL)
		confine(rootdir);
	if (o.dir != NULL && fs_chdir(startdir) == -1)
		error("chdir to \"%s\" failed: %s", startdir, strerror(errno));
	if (o.no_sandbox)
		verbose("sandbox: off (-S)");
	else
		sandbox_enter(o.root != NULL ? rootdir : NULL, sess.atomic);
	serve();
	return SESSION_OK;
}
