/*
 * The requests: the table that names them, the dispatcher and the
 * handlers.  The loop (sftp-server.c) hands each complete packet to
 * requests_process(), which queues exactly one reply on the queue given to
 * requests_init() and returns.  Nothing here writes to stdout, waits or
 * exits: a request that must end the session says so in its return value.
 *
 * Every call runs downward, to the layers below (tests/check-layers.sh).
 * The one call back up into the loop is its stop check, which copy-data and
 * check-file reach through fileio.c (fileio_set_stop()): FILEIO_STOP there
 * is REQUESTS_STOP here.
 */
#ifndef REQUESTS_H
#define REQUESTS_H

#include <sys/types.h>

#include "packet.h"

/* The most storage operations in flight at once that -T may ask for. */
#define REQUESTS_MAX_OPS	128

/* What the session tells the requests, once, at start. */
struct session {
	int readonly;			/* -R */
	const char *deny_list;		/* -P, or NULL */
	const char *allow_list;		/* -p, or NULL */
	const char *user_name;
	const char *user_home;
	/*
	 * -T: storage operations in flight at once; 0 or 1 runs requests
	 * one at a time, as OpenSSH.  in is the input buffer, whose WRITE
	 * data a worker writes out in place (pinned meanwhile).
	 */
	unsigned storage_ops;
	struct ibuf *in;
	int confined;			/* -r: paths resolved beneath a root */
	int atomic;			/* -A: uploads put in place by CLOSE */
	/*
	 * -m and -M: the mode of every file and directory made, or -1.
	 * With either, the process runs with umask 0, and mask is the umask
	 * it had, applied here to what no option forces.
	 */
	int file_mode;
	int dir_mode;
	mode_t mask;
	/* -b: bytes per second of READ and WRITE data; 0: no limit. */
	uint64_t down_rate;
	uint64_t up_rate;
};

/*
 * How a session ends: the exit status of the process, one list for the loop
 * and the requests (the manual's EXIT STATUS lists them).  They are OpenSSH's
 * server's, but for a client that leaves (its end of stdout closed): a clean
 * end here, where OpenSSH logs the failed write and exits 1.  A session ended
 * by SIGTERM, SIGHUP or SIGINT closes its files, then dies of that signal.
 */
enum session_exit {
	SESSION_OK = 0,		/* end of input, or the client left */
	SESSION_ERROR = 1,	/* a bad option, a read or write error */
	SESSION_POLL = 2,	/* poll(2) failed */
	SESSION_TOOLONG = 11,	/* a message longer than SFTP_MAX_MSG */
	SESSION_FATAL = 255,	/* a fatal error (as OpenSSH's fatal()): a
				   request before INIT, a malformed INIT, a
				   frame of length 0, a bad option value */
};

/*
 * requests_process(): the session must stop (the stop check said so through
 * FILEIO_STOP): a long request was given up, without a reply.
 */
#define REQUESTS_STOP	(-1)
/*
 * requests_process(): the request cannot start yet: it depends on requests
 * still in flight (see the ordering rule in sched.c).  Nothing of it was
 * consumed or logged; the loop offers it again once some have finished.
 */
#define REQUESTS_WAIT	(-2)

/*
 * Starts the requests of a session: replies go to oq.  s must outlive the
 * session.  Returns 0, or -1 when memory runs out.
 */
int	requests_init(const struct session *s, struct oqueue *oq);
/*
 * Answers the request whose body (type byte first) c covers: exactly one
 * reply is queued, or none for a request that ends the session, or none
 * yet for a request handed to a worker (requests_reap() queues it, in
 * request order).  Returns 0, the exit status that ends the session
 * (SESSION_FATAL), REQUESTS_STOP or REQUESTS_WAIT.  Called only while
 * oq_pending() is below OQ_HIWAT, where every reply fits; a reply that does
 * not, or a request that got no reply or two, is a bug: it aborts.
 */
int	requests_process(struct cursor *c);
/*
 * Queues the replies of the requests in flight that are done, in request
 * order, while the queue is below OQ_HIWAT.  Returns whether it stopped
 * there, with replies of done requests left to queue.
 */
int	requests_reap(void);
/*
 * The replies queued were written out (or dropped): the bytes of the jobs
 * whose data they were written from are given back.  Returns whether any
 * were; 0 while the queue still points into them.
 */
int	requests_written(void);
/*
 * The request the loop holds (REQUESTS_WAIT) waits for a bandwidth limit
 * (-b): the milliseconds until it may go; -1 when it waits for no limit,
 * or may go now.
 */
int	requests_paced_ms(void);
/* Requests in flight: handed off, not yet answered. */
unsigned	requests_in_flight(void);
/*
 * Whether requests may be taken while the reply queue is full: requests
 * are in flight, so that every request taken now is answered after them,
 * through a job, and queues no reply of its own; and storage calls go to
 * workers, so that taking one starts its wait rather than making it here.
 */
int	requests_queue_free(void);
/*
 * The loop is about to sleep: a descriptor to poll(2) for the end of work
 * in a worker, or -1 when it must not sleep: the oldest request in flight
 * is done (requests_reap() would queue its reply), work finished that is
 * not collected yet, or none runs in a worker.  After the poll,
 * requests_woke() says whether the descriptor was readable.
 */
int	requests_wait_fd(void);
void	requests_woke(int readable);
/*
 * The session ends without waiting longer for the requests in flight:
 * the queue is muted (oq_mute()), those whose storage calls are done are
 * answered (their bytes counted; the replies dropped), the others are
 * given up.  A file handle whose CLOSE is given up is logged as a forced
 * close that was not made, an OPEN given up leaves no handle.  From then
 * on no storage call is made: requests_close_all() logs the other handles
 * without closing them, and the exit closes their descriptors.  Returns
 * the number given up.  Only for a session that ends at once.
 */
unsigned	requests_abandon(void);
/* The session is idle: the workers end and give back what they held. */
void	requests_idle(void);
/*
 * Closes every open handle, logging each as a "forced" close; after
 * requests_abandon(), logs each as a forced close that was not made
 * ("not closed" in the log, "closed":false in the transfer log) and
 * closes nothing.
 */
void	requests_close_all(void);
/* Prints the name of every request, one per line (-Q requests). */
void	requests_print_names(void);
/*
 * Warns at start of a -P or -p list that OpenSSH's server would read
 * differently (an empty entry, more than 40 entries).
 */
void	requests_check_list(const char *opt, const char *list);
#ifdef SFTP_FUZZ
/* Frees what requests_init() took: the fuzz harness runs many sessions. */
void	requests_free(void);
#endif

#endif /* REQUESTS_H */
