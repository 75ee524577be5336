/*
 * The scheduler: which requests run at once (the ordering rule, sched.c),
 * where their storage calls run (here or in a worker: the page cache, the
 * slow streaks, free space) and the calls themselves.  requests.c parses
 * and validates a request, asks sched_admit() whether it may start beside
 * the requests in flight, and builds the replies; this file makes the
 * system calls of the jobs and decides, from their timing, where the next
 * ones run.  It knows handles (handles.h) and the workers (jobs.h), not
 * the protocol.
 *
 * Functions a worker may call: none; the workers run the jobs' run
 * functions (sched.c), which make system calls only.  Everything here is
 * the loop's thread's.
 */
#ifndef SCHED_H
#define SCHED_H

#include <sys/types.h>
#include <sys/stat.h>

#include <limits.h>
#include <stdint.h>

#include "handles.h"
#include "jobs.h"

/* READDIR answers at most this many names, as OpenSSH. */
#define READDIR_BATCH	100
/* A storage call slower than this waited (ns). */
#define SLOW_NS		150000

/*
 * What a job does (struct task's op); a request kind of the table with
 * none (OP_NONE) is a barrier: it runs alone.
 */
enum job_op {
	OP_NONE = 0,
	OP_READ,
	OP_WRITE,
	OP_FSTAT,
	OP_STAT,
	OP_LSTAT,
	OP_DIRSTAT,	/* READDIR's lstat of each name, in shared runs */
	OP_OPEN,	/* flags: open(2)'s, mode, buf: the path */
	OP_CLOSE,
	OP_UPLOAD,	/* -A: an upload's OPEN; buf: struct fs_upload, path */
	OP_COMMIT,	/* -A: its CLOSE, which puts it in place */
	OP_COUNT
};

/* struct task's flags: a WRITE handed off with ample free space. */
#define JOB_AMPLE	0x1

/*
 * A job as this file and requests.c see it: jobs.c's part first, then
 * what to do and what came of it.  TASK() is the task of a struct job
 * that jobs.h hands out.
 */
struct task {
	struct job job;		/* jobs.c's; its arena bytes at job.buf */
	enum job_op op;		/* its system calls and its rule (sched.c) */
	/* Its reply, built in the loop's thread once done (requests.c). */
	uint32_t (*answer)(struct task *);
	int fd;
	int flags;		/* OPEN: open(2)'s; WRITE: JOB_AMPLE */
	uint32_t id;
	void *owner;		/* the handle it works through, or NULL */
	off_t off;		/* READ, WRITE: its range */
	size_t len;
	mode_t mode;		/* an OPEN's creation mode */
	const uint8_t *data;	/* a WRITE's bytes */
	unsigned pin;		/* a WRITE's hold on them (ibuf_pin()) */
	void *shared;		/* DIRSTAT: its struct dirbatch (in buf);
				   COMMIT: the handle's struct fs_upload */
	ssize_t n;
	int err;
	uint64_t written;
	int64_t ns;		/* how long its system calls took */
	int made;		/* OPEN: asks (1) and says whether it made
				   the file (-m) */
	struct stat st;
};
#define TASK(j)	((struct task *)(void *)(j))

/*
 * READDIR on storage that waits: the names come from one getdents in the
 * loop, their lstats from one job that up to one worker per name runs at
 * once (jobs_share()), each run claiming the next name not yet claimed
 * (next) until none is left: a lone READDIR waits for one or two lstats
 * in a row, and in a pipeline the workers that come free join the oldest
 * READDIR with names left.  The batch lies in the job's arena bytes; each
 * run adds what its calls waited, and how many it made, to us and timed
 * (32 bits: no 64-bit atomics, which some 32-bit machines lack).
 */
struct dirbatch {
	unsigned count;
	_Atomic unsigned next;		/* the first name not claimed */
	_Atomic unsigned us;		/* the runs' waits, summed (us) */
	_Atomic unsigned timed;		/* the names of the runs timed */
	struct {
		char name[NAME_MAX + 1];
		struct stat st;
		int r;
	} e[READDIR_BATCH];
};

/*
 * A request as the rule sees it, parsed and valid, before its job exists:
 * what sched_admit() decides on.
 */
struct sched_req {
	enum job_op op;
	struct handle *h;	/* READ, WRITE, FSTAT, CLOSE, COMMIT: its
				   handle */
	uint64_t off;		/* READ, WRITE: its range */
	uint64_t len;
	int flags;		/* OPEN, UPLOAD: open(2)'s flags, creation
				   mode */
	mode_t mode;
	size_t size;		/* the arena bytes its job takes */
};

/*
 * Starts the scheduler of a session: storage_ops is -T, workers the most
 * workers at once.  Returns 0.
 */
int	sched_init(unsigned storage_ops, unsigned workers);
/*
 * -b: the session's bandwidth limits, in bytes per second (0: none), for
 * the data of READ replies (PACE_DOWN) and of WRITE requests (PACE_UP).
 * A request of n bytes goes when the bytes before it are due (a virtual
 * clock advanced by n / rate per request, PACE_BURST_NS of slack), so the
 * rate over any long stretch is the limit; a request that must wait is
 * held, and everything after it, as the ordering rule holds requests.  A
 * CLOSE asks with n = 0, so that it waits for the last request's bytes.
 */
enum { PACE_DOWN, PACE_UP };
#define PACE_BURST_NS	50000000
void	sched_pace_init(uint64_t down, uint64_t up);
/*
 * Whether a request of n bytes in direction dir must wait (1: then
 * sched_pace_ms() says how long); 0: it goes now, and is counted.
 */
int	sched_paced(int dir, uint64_t n);
/* n of the bytes counted at dispatch did not cross (a short READ). */
void	sched_pace_refund(int dir, uint64_t n);
/*
 * Milliseconds until the request held by a limit may go, at least 1; -1
 * when none is held, or it may go now.
 */
int	sched_pace_ms(void);

/* Whether requests may be in flight at once (-T above 1). */
int	sched_concurrent(void);
/* Whether storage calls wait, of late: they go to workers. */
int	sched_slow(void);
/* Whether requests are in flight: a later one's reply must follow theirs. */
int	sched_deferring(void);
/*
 * Whether the request r may start now beside every request in flight (the
 * ordering rule), with room for its job.  Changes nothing but the looks
 * at free space that the rule takes.
 */
int	sched_admit(const struct sched_req *r);

/* A storage call timed in the loop's thread (a stat, an open, ...). */
struct timing {
	int64_t wall;		/* -1: not timed */
	long sleeps;		/* -1: not counted */
};
/*
 * Starts timing a call; every (for a batch of calls): the call is timed
 * and its sleeps counted, whatever came before.
 */
void	sched_timing_start(struct timing *t, int every);
/*
 * How long the call waited since sched_timing_start(): its time, or 0 when
 * it did not sleep; -1 when it took longer than SLOW_NS and its sleeps were
 * not counted; SCHED_NOT_TIMED.  Keeps errno.
 */
int64_t	sched_timing_waited(const struct timing *t);
#define SCHED_NOT_TIMED	INT64_MIN
/*
 * A storage call waited ns: enough calls in a row that waited make the
 * session's calls go to workers, enough that did not bring them back.
 */
void	sched_note_latency(int64_t ns);
/* A job that is done counts in the streaks as the calls it made. */
void	sched_note_job(const struct task *j);

/*
 * A new job of op for request id through h (or none), with size bytes of
 * the arena, answered by answer once done (NULL: a part of the job before
 * it, answered with it); sched_admit() (or nothing in flight) made sure of
 * the room.
 */
struct task	*sched_job(enum job_op op, uint32_t (*answer)(struct task *),
    uint32_t id, struct handle *h, size_t size);
/*
 * Starts a job that is filled in: in a worker while storage is slow (or
 * always, wait), here otherwise.
 */
void	sched_start(struct task *j, int wait);
/*
 * A WRITE's job of len bytes through h is about to start: while storage
 * is slow, whether it may run beside other WRITEs (JOB_AMPLE), and its
 * bytes counted as spent.
 */
void	sched_write_space(struct task *j, struct handle *h, uint64_t len);
/*
 * A READ's job, filled in: answered from the page cache here when the data
 * is there, else started (in a worker when the handle's reads wait).
 */
void	sched_read_start(struct task *j, struct handle *h);
/*
 * Reads into buf here: from the page cache when the file system can say
 * what would wait (-2: some would: a job reads it, and the handle's next
 * READs go to workers), else timed.
 */
ssize_t	sched_read_here(struct handle *h, uint8_t *buf, size_t len, off_t off);
/* A READ's job is done: whether the next reads through h go to workers. */
void	sched_read_done(const struct task *j, struct handle *h);

#ifdef SFTP_FUZZ
/*
 * The fuzz harness's storage that waits (tests/fuzz/fuzz_session.c).  Set,
 * the session starts as if its storage waited (sched_init()), no READ
 * finds its data in the page cache, and each job calls it with its request
 * id before its system calls, in the thread that makes them: the harness
 * sleeps there as storage would, for as long as the id says, so that
 * later jobs can finish before earlier ones.
 */
extern void (*sftp_fuzz_storage_wait)(uint32_t);
#endif

#endif /* SCHED_H */
