/*
 * The requests: the table that names them, the dispatcher and the
 * handlers.  The loop (sftp-server.c) hands each complete packet to
 * requests_process(), which queues exactly one reply on the queue given to
 * requests_init() and returns.  Nothing here writes to stdout, waits or
 * exits: a request that must end the session says so in its return value.
 *
 * Every call runs downward: requests.c calls fs.c, attrib.c, handles.c,
 * path.c and the wire code (packet.c), never the loop.
 */
#ifndef REQUESTS_H
#define REQUESTS_H

#include <sys/types.h>

#include "packet.h"

/* What the session tells the requests, once, at start. */
struct session {
	int readonly;			/* -R */
	const char *deny_list;		/* -P, or NULL */
	const char *allow_list;		/* -p, or NULL */
	const char *user_name;
	const char *user_home;
};

/* requests_process(): the session must end, with this exit status. */
#define SESSION_FATAL	255	/* a request before INIT, a malformed INIT */
#define SESSION_BROKEN	1	/* a reply that does not fit: a bug */

/*
 * Starts the requests of a session: replies go to oq.  s must outlive the
 * session.  Returns 0, or -1 when memory runs out.
 */
int	requests_init(const struct session *s, struct oqueue *oq);
/*
 * Answers the request whose body (type byte first) c covers: exactly one
 * reply is queued, or none for a request that ends the session.  Returns 0,
 * or the exit status that ends the session (SESSION_*).
 */
int	requests_process(struct cursor *c);
/* Closes every open handle, logging each as a "forced" close. */
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
