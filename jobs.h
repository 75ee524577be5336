/*
 * Storage work that waits, run beside the loop.  A job is one request's
 * system calls; it is queued in request order, run by a worker thread (or
 * by the loop itself when it will not wait), and handed back in request
 * order, so that the replies it leads to leave in that order too.
 *
 * jobs.c knows threads, a ring of jobs and a ring of bytes, not files or
 * the protocol: what a job does is the run function given to jobs_init(),
 * and what it carries is the caller's.  struct job holds jobs.c's fields
 * only; the caller's struct begins with one (as nginx's task->ctx follows
 * its task), and jobs_init() is told its size: each entry of the ring is
 * that big, zeroed by jobs_new(), and jobs.c touches only its struct job
 * at the start.  The caller converts the pointers it is given.  Workers
 * are started when work is handed off and none is free, at most the limit
 * given, and all end at jobs_idle(): an idle session holds no thread, no
 * descriptor and no page of the rings.
 *
 * Workers block every signal: the loop alone takes them.  A worker only
 * runs the run function; everything else (handles, logs, replies) stays
 * with the loop's thread.
 */
#ifndef JOBS_H
#define JOBS_H

#include <sys/types.h>
#include <sys/stat.h>

#include <stddef.h>
#include <stdint.h>

/* Jobs queued at once, waiting or done and not yet handed back. */
#define JOBS_RING	128
/*
 * Bytes of data (READ buffers, paths) that jobs hold at once: 8 MiB less
 * the arena's skew (jobs.c), so that it ends where a page does: 32 READs
 * of 255 KiB in flight.  A job of at most JOBS_SMALL bytes whose place
 * would start at JOBS_SOFT_END or past it starts over at the arena's
 * start instead, when it fits there: a pipeline of small jobs (32 KiB
 * READs, listings, paths) that holds less than 4 MiB at once goes round
 * the first 4 MiB only (the last job may run one job's size past them).
 */
#define JOBS_ARENA	(8 * 1024 * 1024 - 1088)
#define JOBS_SOFT_END	(4 * 1024 * 1024 - 1088)
#define JOBS_SMALL	(64 * 1024)
/* Most workers a session may have (-T). */
#define JOBS_MAX_WORKERS	128

/* jobs.c's part of a job: the caller's struct begins with it. */
struct job {
	uint8_t *buf;		/* the arena bytes of jobs_new() */
	int queued;		/* handed to a worker */
	_Atomic int finished;	/* a worker is done with it (jobs.c) */
	int done;		/* the loop has seen it done */
	size_t arena_off;	/* where buf lies in the arena */
	size_t arena_size;	/* its bytes there */
	size_t arena_charge;	/* what it took: its bytes and any skipped */
	/* A job that several workers may run at once (jobs_share()). */
	unsigned runs;		/* at most this many runs; 0: one */
	unsigned begun;		/* runs begun (jobs.c, under its lock) */
	unsigned running;	/* runs not ended (jobs.c, under its lock) */
	int closed;		/* no run begins any more (jobs.c, lock) */
	/* Its bytes are still read once it retires (jobs_retire()). */
	int keep;
};

/*
 * Sets what a job does (run, called in a worker or in the loop's thread),
 * how many workers may run at once, and the size of the caller's struct
 * that begins with struct job (at least sizeof(struct job), at most
 * JOBS_ENTRY_MAX).  Maps the rings, whose pages only jobs touch.  Returns
 * 0; -1 when the size is out of those bounds, or differs from the last
 * while jobs are in the ring or workers run, or the mapping cannot be
 * made (errno).
 */
int	jobs_init(void (*run)(struct job *), unsigned max_workers,
    size_t entry_size);
/* The largest caller's struct. */
#define JOBS_ENTRY_MAX	1024
/*
 * A function each worker calls once as it starts, before its first job
 * (NULL: none): what the caller sets up in each worker's thread.
 */
void	jobs_on_start(void (*start)(void));
/* The limit of jobs_init(). */
unsigned	jobs_max_workers(void);
/*
 * 0 while every worker wanted could be started; else the error of the
 * first that could not (EAGAIN: a process limit), and in *made how
 * many ran then.  After a failure no worker is tried until jobs_idle().
 */
int	jobs_thread_error(unsigned *made);
/*
 * A new job at the end of the ring, its whole entry zeroed, with size
 * bytes of the arena at job->buf (none for 0).  NULL when the ring or the
 * arena is full: the caller waits for jobs to be handed back (jobs_head(),
 * jobs_retire()).
 */
struct job	*jobs_new(size_t size);
/* Whether jobs_new(size) would succeed now. */
int	jobs_room(size_t size);
/*
 * Hands the job to a worker; a worker is started when none is free and
 * the limit allows.  When no worker can be started at all, the job is run
 * here and is done on return.
 */
void	jobs_start(struct job *);
/*
 * Lets up to runs workers run the job at once, as they come free, before
 * jobs_start(): for work that each run takes its own share of (a READDIR's
 * lstats, claimed one name at a time), so that a worker that comes free
 * joins it while any is left.  A run that takes the last of the work, or
 * finds none left, calls jobs_no_more(), and no further run begins.  The
 * job is finished when the runs begun have all ended: each wrote its
 * share before.
 */
void	jobs_share(struct job *, unsigned runs);
/* A run of a shared job left no work for others: no further run begins. */
void	jobs_no_more(struct job *);
/* Runs the job here, now: it is done on return. */
void	jobs_run_here(struct job *);
/* The job's work was done here by the caller: it is done. */
void	jobs_mark_done(struct job *);
/* Whether the loop has seen the job done. */
int	jobs_done(const struct job *);
/*
 * Takes note of the jobs the workers finished: marks them done.  Returns
 * how many were newly seen.
 */
unsigned	jobs_collect(void);
/* The oldest job, when it is done; else NULL. */
struct job	*jobs_head(void);
/*
 * Removes the oldest job (done) and gives its arena bytes back; but when
 * the caller set its keep (a reply that is written out from its bytes),
 * they stay taken, as do those of every job retired after it, until
 * jobs_release().
 */
void	jobs_retire(void);
/*
 * Gives back the bytes of the jobs retired since one was kept.  Returns
 * whether there were any.
 */
int	jobs_release(void);
/* Whether any bytes are kept (jobs_retire()). */
int	jobs_kept(void);
/* Jobs in the ring. */
unsigned	jobs_count(void);
/* How many of them run in workers, not yet seen done. */
unsigned	jobs_running(void);
/* The job i places from the oldest (i < jobs_count()). */
struct job	*jobs_at(unsigned i);
/*
 * The loop is about to sleep: a descriptor (an eventfd) for its poll(2)
 * that becomes readable when a worker finishes a job from now on; -1 when
 * it must not sleep: a job finished that jobs_collect() has not seen, or
 * none is running.  After the poll, whatever woke it, jobs_woke() says
 * whether the descriptor was readable (it is read then).  Workers write
 * the descriptor only while the loop sleeps.
 */
int	jobs_sleep(void);
void	jobs_woke(int readable);
/*
 * Waits until a running job finishes, if one is running: for the tests
 * and jobs_free().  The server's loop does not block here: it sleeps in
 * its own poll(2), on jobs_sleep()'s descriptor beside its others.
 */
void	jobs_wait(void);
/*
 * No job queued: ends the workers, closes the descriptor and gives back
 * the rings' pages.  With jobs in the ring, does nothing.
 */
void	jobs_idle(void);
#ifdef SFTP_FUZZ
/* Unmaps what jobs took (after jobs_idle()): the fuzz harness. */
void	jobs_free(void);
#endif

#endif /* JOBS_H */
