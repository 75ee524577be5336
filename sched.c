/*
 * THE ORDERING RULE.  What the client sees (every reply) and what the
 * files hold in the end are those of running the requests one at a time,
 * in the order they came.  Replies leave in that order whatever finishes
 * first.  A request may start while earlier ones are still in flight only
 * when it is independent of each of them; else the loop holds it (and
 * everything after it) until they have finished.  Independent:
 *   - READ, FSTAT, STAT and LSTAT change nothing: any of them is
 *     independent of any other of them.
 *   - A WRITE of [w, w+n) and a READ of [r, r+L) are independent only when
 *     w+n <= r: the write neither changes the bytes read nor, by making the
 *     file longer, turns an end of file the read meets into a hole of
 *     zeros.  The rule is the same whichever came first.
 *   - Two WRITEs are independent only when their ranges do not overlap,
 *     neither handle is O_APPEND (where the kernel picks the offset), and
 *     each was handed off while the file system it writes to had ample
 *     free space (below).  Else the one that meets a full disk (ENOSPC)
 *     would be the one the kernel reaches last, not the last in order.
 *   - A WRITE and an FSTAT are never independent (the size, the times),
 *     nor a WRITE and a STAT or LSTAT: a path may name any file.
 *   - CLOSE of a file handle H waits for the requests in flight on H; it
 *     is independent of everything else (close(2) changes no file), but
 *     for the one case where a close changes what another call finds: the
 *     last reader of a FIFO gone, a write-only OPEN fails with ENXIO; the
 *     last close of a file removed while open frees its space, which a
 *     WRITE on a full disk may need.  So a CLOSE of a read-only handle and
 *     a write-only OPEN are never independent, nor a CLOSE and a WRITE
 *     without ample free space (below).  When a CLOSE starts, H is
 *     marked closing: a later request naming H waits until it is
 *     answered, then finds H unknown, as after a close.
 *   - OPEN (of files: OPENDIR runs alone) writes its path's name space
 *     when it creates (O_CREAT) and the file when it truncates (O_TRUNC):
 *     such an OPEN is independent of no READ, WRITE, stat or READDIR, in
 *     either order.  An OPEN that does neither is independent of them.
 *   - Two OPENs are independent when no outcome depends on which the
 *     kernel takes first, whatever files their paths name (the same one
 *     through another spelling, a symlink, a hard link):
 *       . both create, with the same creation mode, and that mode (less
 *         the umask) gives the owner what each asks (read for O_RDONLY,
 *         write for O_WRONLY or O_TRUNC, both for O_RDWR): whichever
 *         makes the file, the other opens it and is let in, and the file
 *         is made once, with the one mode; truncation is idempotent;
 *       . neither creates: nothing is made, a truncation is idempotent;
 *       . and in both cases neither has O_EXCL (the second one fails:
 *         which one is the kernel's order), and they are not a write-only
 *         and a read-only one (a FIFO: the writer fails with ENXIO unless
 *         the reader came first).
 *     A creating and a non-creating OPEN are not independent: the second
 *     would find the name or not by timing.
 *   - Atomic uploads (-A).  An upload's OPEN reads its target's name
 *     (whether it is there, a symlink, the mode and owner of the file it
 *     names) and makes a file of its own, unnamed or under a hidden name
 *     in the target's directory; it changes no file that another request
 *     reaches.  So it is independent of READ, WRITE, FSTAT and other
 *     uploads' OPENs, and not of the stats and READDIR (a hidden name is
 *     an entry), of a creating OPEN (it may make the name looked at), nor
 *     of a FIFO's other end.  Its CLOSE, the commit, puts the file in
 *     place: it changes the target's name and the link count of the file
 *     it replaces, whose space it may free.  The commit is a barrier for
 *     everything that reads names or links: OPEN of either kind, the
 *     stats, READDIR and FSTAT wait for it, and it for them, and it waits
 *     for the requests on its own handle.  It is independent of READ and
 *     CLOSE through other handles, of WRITE with ample free space (below),
 *     and of the commit of an upload of another name (two names in any
 *     directories are two entries).
 *   - Every other request (OPENDIR, CLOSE of a directory, SETSTAT,
 *     RENAME, REMOVE, the extensions, ...) waits until nothing is in
 *     flight, and nothing starts until it is answered: it runs alone, as
 *     before.  So does OPEN while a transfer log is guarded (fs.c's guard
 *     keeps state for one thread), and OPEN when every handle slot is
 *     taken (a CLOSE in flight would have freed one).
 * The handle of an OPEN is taken at dispatch, pending, and filled in (or
 * given back, on failure) when its reply is built.  Log lines of CLOSE
 * (INFO and the transfer log) are written then too, in request order.
 * Not covered here: a default ACL that gives the owner less than the mode
 * asks (two creating OPENs of one name: the creator is let in whatever
 * the mode); a creating OPEN beside the last CLOSE of a removed file on a
 * file system out of inodes or blocks.  An OPEN is taken to create
 * whether or not its name exists.
 *
 * Two handles may name one file (opened twice, hard links, another
 * spelling of the path): so the ranges above are compared whichever
 * handles they came through, unless both handles are known to be of two
 * different regular files.  A handle is known when its OPEN was a job:
 * there, after open(2), the worker asks the kernel which file the new
 * descriptor is, its device, inode and type (sys_file_id(): from the
 * kernel's copy, so that the OPEN waits for its open(2) alone, as
 * OpenSSH's does).  READ, WRITE and FSTAT
 * through handles of two different files share no byte, size or time:
 * they are independent (two WRITEs still need ample free space).  An OPEN
 * run at once (nothing in flight, storage answers at once) asks nothing
 * more, and its handle is compared by ranges.  A request whose work
 * is done (its system call returned) no longer counts as in flight,
 * though its reply may still wait for earlier ones.  A status is queued
 * only once the kernel has answered the request's call.
 *
 * Ample free space: when a WRITE is about to go to a worker, the free
 * space of its file system (fstatvfs(): f_bavail * f_frsize) is looked up,
 * at most every SPACE_NS per handle, or SPACE_COST times as long as the
 * last look took, if longer (the loop waits for a look: on storage whose
 * statfs takes longer than SPACE_NS, a look for every WRITE would hold
 * each for that long); between looks, every byte handed off
 * since (by any handle: conservative) is taken off what was seen.  The
 * handles whose file is known (below) share one look per file system
 * (st_dev), so that a new file does not cost one.  The
 * WRITE may run beside other WRITEs only while what is left exceeds its
 * length by SPACE_MARGIN, far above the bytes that can be in flight at
 * once (WRITE data pinned in the input window, IBUF_HARD, and READ
 * buffers, JOBS_ARENA): then no WRITE in flight can meet a full disk, and
 * the order in which the kernel takes them makes no difference.  Below
 * the margin, WRITEs run one at a time, in order (beside READs and stats,
 * which allocate nothing); so does everything else that allocates
 * (FSETSTAT's size, copy-data, OPEN, ...: they run alone).  A file system
 * that reports no free space (some FUSE ones) or cannot answer gets
 * WRITEs one at a time.  A session on fast storage (requests run here)
 * never looks.
 *
 * Not covered: access times (a READ may update them after a later STAT
 * looked); per-user quotas (EDQUOT: statvfs does not show them, so which
 * of two concurrent WRITEs meets the quota is the kernel's order); and
 * other processes filling the disk, which make even the serial outcome a
 * matter of timing.
 *
 * Work that does not wait is not handed off.  A READ first asks the page
 * cache (preadv2() with RWF_NOWAIT) and goes to a worker only when the
 * data is not there; once a READ through a handle missed the page cache,
 * or a worker's READ through it waited, the next READs through it go
 * straight to workers, until one of them did not wait (a miss costs the
 * loop a system call that the worker repeats, and the next block of a
 * file that waited is seldom in the cache).  Other
 * calls, and READs on a file system that cannot
 * answer RWF_NOWAIT, are timed when run here: once SLOW_STREAK calls in a
 * row took longer than SLOW_NS, WRITE, the stats and READDIR's lstats go
 * to workers, until FAST_STREAK calls in a row did not; otherwise they run
 * here, at today's cost; CLOSE goes with them, until its own streak says
 * that closes do not wait (close_streaks).  While requests are in flight,
 * later requests are jobs too (run here when they will not wait), so that
 * their replies can follow in order.  The loop's thread alone parses,
 * checks handles, logs, counts bytes and builds replies; workers only make
 * the system calls (run_job()).
 *
 * This file (sched.h): the rule's predicates (independent() and its
 * family), admission (sched_admit()), placement (the page cache, the
 * slow streaks, free space) and each kind of job's row in job_kinds[]:
 * its run function and its predicate.
 */
#include <sys/types.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fileio.h"
#include "fs.h"
#include "handles.h"
#include "jobs.h"
#include "log.h"
#include "sched.h"
#include "sys-gnu.h"

/*
 * A storage call waited when it took longer than SLOW_NS and slept in the
 * kernel meanwhile: a call that a busy CPU preempted, or that copied much,
 * took as long without waiting for storage.  Counting the sleeps costs a
 * system call on each side, so a call in the loop is first timed alone,
 * and the sleeps are counted only after a call took longer than SLOW_NS,
 * until one does not.  While storage answers at once, only one call in
 * SAMPLE is timed at all (two clock reads each).
 */
/*
 * Calls in a row that waited before requests go to workers, and that did
 * not before they come back: a call that a busy CPU or a page fault
 * delayed once does not send a session on fast storage to workers.  A
 * call counts only if it slept, so a few in a row suffice; each one is a
 * whole wait of the storage that the client's pipeline pays in turn.
 */
#define SLOW_STREAK	4
#define FAST_STREAK	32

/*
 * Free space that lets WRITEs run beside each other (see the rule), and
 * how often a handle's file system is looked at (ns).  The margin is well
 * above 4 times the bytes in flight (IBUF_HARD + JOBS_ARENA).
 */
#define SPACE_MARGIN	((uint64_t)64 << 20)
#define SPACE_NS	50000000
#define SPACE_COST	20

/* -T: requests in flight at once. */
static unsigned storage_ops;
/* How long a look at free space lasts: SPACE_NS, or longer (the rule). */
static int64_t space_ns = SPACE_NS;
/* The lack of threads was logged (threads_check()). */
static int threads_told;
/* Whether storage waits, of late, and the calls in a row that said not. */
static int waiting;
static unsigned streak;
/* A call took longer than SLOW_NS: the next ones count their sleeps. */
static int suspect;
/* Bytes of WRITEs handed to workers, ever (see space_ample()). */
static uint64_t space_spent;
/*
 * Looks at the free space of file systems, by st_dev, that the handles of
 * known files share (space_ample()).
 */
#define SPACE_DEVS	8
struct space {
	dev_t dev;
	int64_t at;		/* when; 0: unused */
	uint64_t seen;		/* bytes free then */
	uint64_t spent;		/* space_spent then */
};
static struct space spaces[SPACE_DEVS];
/* The umask, read at start: the mode a creating OPEN gives (the rule). */
static mode_t cmask;
/* The clock, the timing of calls and the slow streaks. */

static int64_t
now_ns(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_MONOTONIC, &ts) == -1)
		return 0;
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/*
 * While storage answers at once, one call in SAMPLE is timed, and every
 * call once one was slow.  A session's first SAMPLE_FROM calls are all
 * timed: on storage that waits from the start (NFS, a cold disk), the
 * first call is seen to wait, and the calls go to workers after
 * SLOW_STREAK of them in the loop, not after up to SAMPLE more (a 255 KiB
 * upload under slowfs -d 1 made 11 WRITEs in the loop, one after the
 * other, before its pipeline began).
 */
#define SAMPLE		8
#define SAMPLE_FROM	64
static unsigned ticks;

void
sched_timing_start(struct timing *t, int every)
{
	/* Workers time with every, and read nothing of the loop's here. */
	if (!every) {
		if (ticks < SAMPLE_FROM) {
			ticks++;
		} else if (!suspect && !waiting && ++ticks % SAMPLE != 0) {
			t->wall = -1;
			return;
		}
	}
	t->wall = now_ns();
	t->sleeps = every || suspect ? sys_thread_sleeps() : -1;
}

int64_t
sched_timing_waited(const struct timing *t)
{
	int64_t ns;
	int e = errno;	/* the timed call's, which the caller reads next */

	if (t->wall == -1)
		return SCHED_NOT_TIMED;
	ns = now_ns() - t->wall;
	if (ns > SLOW_NS && t->sleeps < 0)
		ns = sys_thread_sleeps() < 0 ? ns : -1;
	else if (ns > SLOW_NS)
		ns = sys_thread_sleeps() > t->sleeps ? ns : 0;
	errno = e;
	return ns;
}

/* -b: the virtual clock of each direction (sched.h). */
static struct pace {
	uint64_t rate;		/* bytes per second; 0: no limit */
	int64_t due;		/* when the bytes counted so far are due */
} paces[2];
/* When the request held by a limit may go; 0: none is held. */
static int64_t pace_hold;

void
sched_pace_init(uint64_t down, uint64_t up)
{
	paces[PACE_DOWN].rate = down;
	paces[PACE_UP].rate = up;
	paces[PACE_DOWN].due = paces[PACE_UP].due = 0;
	pace_hold = 0;
}

/* The time n bytes take at rate (ns). */
static int64_t
pace_ns(uint64_t n, uint64_t rate)
{
	if (n > UINT64_MAX / 1000000000)
		return INT64_MAX / 4;
	return (int64_t)(n * 1000000000 / rate);
}

int
sched_paced(int dir, uint64_t n)
{
	struct pace *p = &paces[dir];
	int64_t now;

	if (p->rate == 0)
		return 0;
	now = now_ns();
	if (p->due < now)
		p->due = now;
	if (p->due - now > PACE_BURST_NS) {
		pace_hold = p->due - PACE_BURST_NS;
		return 1;
	}
	pace_hold = 0;
	p->due += pace_ns(n, p->rate);
	return 0;
}

void
sched_pace_refund(int dir, uint64_t n)
{
	struct pace *p = &paces[dir];

	if (p->rate != 0 && n > 0)
		p->due -= pace_ns(n, p->rate);
}

int
sched_pace_ms(void)
{
	int64_t left;

	if (pace_hold == 0)
		return -1;
	if ((left = pace_hold - now_ns()) <= 0) {
		pace_hold = 0;	/* due: the request is tried again */
		return -1;
	}
	return left / 1000000 >= INT32_MAX ? INT32_MAX :
	    (int)(left / 1000000) + 1;
}

int
sched_concurrent(void)
{
	return storage_ops > 1;
}

/*
 * CLOSE while storage waits.  close(2) waits on few file systems, and
 * there mostly for what was written: NFS flushes the file's dirty pages,
 * a FUSE file system (GlusterFS) is sent a flush.  So CLOSEs go to workers
 * while the session's other calls do, until CLOSE_STREAK of them in a row
 * did not wait; from then on CLOSEs run here, each timed as in a worker,
 * until one waits.  A CLOSE that ran here and waited held the loop once,
 * for one wait of the storage.  The handles open for writing and the
 * read-only ones keep a streak each: on NFS the first wait (when written
 * through) and the second do not.  The open flags, not the bytes written,
 * tell them apart: a CLOSE may start once its handle's WRITEs are done,
 * before their replies have counted their bytes, and it is placed and
 * counted in the same streak.
 *
 * A CLOSE that runs here spares a worker's wake-up and sleep, a third of
 * a small file's (OPEN, WRITE, CLOSE) on storage whose close(2) does not
 * wait.
 */
#define CLOSE_STREAK	32
static struct {
	unsigned quick;		/* CLOSEs in a row that did not wait */
	int here;		/* CLOSEs run here */
} close_streaks[2];

/* Which streak a CLOSE counts in: 1 when its handle is open for writing. */
static int
close_class(const struct task *j)
{
	const struct handle *h = j->owner;

	return h != NULL && (h->flags & O_ACCMODE) != O_RDONLY;
}

static void
note_close(const struct task *j)
{
	int c = close_class(j), was = close_streaks[c].here;

	if (j->ns < 0)
		return;		/* not told */
	if (j->ns > SLOW_NS) {
		close_streaks[c].quick = 0;
		close_streaks[c].here = 0;
	} else if (close_streaks[c].quick < CLOSE_STREAK &&
	    ++close_streaks[c].quick == CLOSE_STREAK) {
		close_streaks[c].here = 1;
	}
	if (close_streaks[c].here != was)
		debug("CLOSE of handles %s %s", c ? "open for writing" :
		    "open for reading", was ? "waits: it goes to workers" :
		    "answers at once: it runs here");
}

/*
 * SLOW_STREAK calls in a row that waited make the session wait,
 * FAST_STREAK that did not end it.
 */
void
sched_note_latency(int64_t ns)
{
	int waited = ns > SLOW_NS;

	if (ns == SCHED_NOT_TIMED)
		return;
	suspect = ns == -1 || waited;
	if (ns == -1)
		return;		/* the next calls tell */

	if (waited != waiting) {
		if (++streak >= (waiting ? FAST_STREAK : SLOW_STREAK)) {
			waiting = waited;
			streak = 0;
			debug("storage %s", waiting ? "waits: requests go to "
			    "workers" : "answers at once: requests run here");
		}
	} else {
		streak = 0;
	}
}

void
sched_note_job(const struct task *j)
{
	const struct dirbatch *db;
	unsigned timed;
	int64_t mean;

	if (j->op == OP_CLOSE)
		note_close(j);
	if (j->op != OP_DIRSTAT) {
		/*
		 * A close(2) waits on few file systems (NFS flushes): a quick
		 * one says nothing of the other calls, so only a slow one
		 * counts.
		 */
		if (j->ns >= 0 && (j->op != OP_CLOSE || j->ns > SLOW_NS))
			sched_note_latency(j->ns);
		return;
	}
	/* Each name was a call: the mean of those timed, once each. */
	db = j->shared;
	if ((timed = atomic_load(&db->timed)) == 0)
		return;
	mean = (int64_t)atomic_load(&db->us) * 1000 / (int64_t)timed;
	for (unsigned i = 0; i < timed; i++)
		sched_note_latency(mean);
}

int
sched_slow(void)
{
	return sched_concurrent() && waiting;
}

int
sched_deferring(void)
{
	return jobs_count() > 0;
}

#ifdef SFTP_FUZZ
void (*sftp_fuzz_storage_wait)(uint32_t);
#define FUZZ_STORAGE_WAITS()	(sftp_fuzz_storage_wait != NULL)
#define FUZZ_STORAGE_CALL(j)	do {					\
	if (sftp_fuzz_storage_wait != NULL)				\
		sftp_fuzz_storage_wait((j)->id);			\
} while (0)
#else
#define FUZZ_STORAGE_WAITS()	0
#define FUZZ_STORAGE_CALL(j)	do { } while (0)
#endif

/* Free space. */

/*
 * The look at a file system that handles of known files share: found by
 * st_dev, else the oldest one made over (at 0: to be looked at).
 */
static struct space *
space_of(dev_t dev)
{
	struct space *s = &spaces[0];

	for (size_t i = 0; i < SPACE_DEVS; i++) {
		if (spaces[i].at != 0 && spaces[i].dev == dev)
			return &spaces[i];
		if (spaces[i].at < s->at)
			s = &spaces[i];
	}
	s->dev = dev;
	s->at = 0;
	return s;
}

#ifndef SCHED_FREE_SPACE
/*
 * The bytes free on fd's file system for the user (0 when it cannot say),
 * and when that was seen (never 0).
 */
static uint64_t
free_space(int fd, int64_t *when)
{
	struct statvfs sv;

	*when = now_ns();
	if (*when == 0)
		*when = 1;
	if (fstatvfs(fd, &sv) == -1 || sv.f_frsize == 0 ||
	    sv.f_bavail > UINT64_MAX / sv.f_frsize)
		return 0;
	return (uint64_t)sv.f_bavail * sv.f_frsize;
}
#else
/* The unit test's free space (tests/unit/test_sched.c). */
static uint64_t SCHED_FREE_SPACE(int fd, int64_t *when);
#define free_space	SCHED_FREE_SPACE
#endif

/*
 * Whether the file system h writes to has room for len bytes and
 * SPACE_MARGIN more, as last seen less what was handed off since: looked
 * at again when SPACE_NS has passed.  Called only when a WRITE goes, or
 * may go, to a worker.
 */
static int
space_ample(struct handle *h, uint64_t len)
{
	int64_t now = now_ns(), *at = &h->space_at, took;
	uint64_t *seen = &h->space_free, *spent = &h->space_spent, since;
	struct space *s;

	if (h->known) {
		s = space_of(h->dev);
		at = &s->at;
		seen = &s->seen;
		spent = &s->spent;
	}
	if (*at == 0 || now - *at >= space_ns) {
		*spent = space_spent;
		*seen = free_space(h->fd, at);
		took = now_ns() - now;
		space_ns = took > SPACE_NS / SPACE_COST ? took * SPACE_COST :
		    SPACE_NS;
	}
	since = space_spent - *spent;
	return *seen >= since && *seen - since >= SPACE_MARGIN &&
	    *seen - since - SPACE_MARGIN >= len;
}

void
sched_write_space(struct task *j, struct handle *h, uint64_t len)
{
	if (!sched_slow())
		return;
	/* To a worker: may it run beside other WRITEs? */
	if (space_ample(h, len))
		j->flags |= JOB_AMPLE;
	space_spent += len;
}

/* The jobs: one run function per kind, system calls only. */

static void
run_read(struct task *j)
{
	j->n = fileio_read_full(j->fd, j->job.buf, j->len, j->off);
}

static void
run_write(struct task *j)
{
	j->n = fileio_write_full(j->fd, j->data, j->len, j->off, &j->written);
}

static void
run_fstat(struct task *j)
{
	j->n = fstat(j->fd, &j->st);
}

static void
run_stat(struct task *j)
{
	j->n = fs_stat((const char *)j->job.buf, &j->st, 1);
}

static void
run_lstat(struct task *j)
{
	j->n = fs_stat((const char *)j->job.buf, &j->st, 0);
}

/*
 * One run of a READDIR's job, of the several that may run at once: it
 * claims names until none is left, and writes nothing of the task but
 * the names' entries and the batch's sums (struct dirbatch).
 */
static void
run_dirstat(struct task *j)
{
	struct dirbatch *db = j->shared;
	struct timing t;
	unsigned i, made = 0;
	int64_t ns;

	sched_timing_start(&t, 1);
	FUZZ_STORAGE_CALL(j);
	while ((i = atomic_fetch_add(&db->next, 1)) < db->count) {
		/* The last name claimed: no further run would find one. */
		if (i + 1 == db->count)
			jobs_no_more(&j->job);
		db->e[i].r = fs_stat_entry(j->fd, db->e[i].name,
		    &db->e[i].st);
		made++;
	}
	if (made == 0) {
		jobs_no_more(&j->job);
		return;
	}
	/* At most 10 s a run: 100 of them fit the sum. */
	if ((ns = sched_timing_waited(&t)) >= 0) {
		(void)atomic_fetch_add(&db->us, ns > 10000000000LL ?
		    10000000U : (unsigned)(ns / 1000));
		(void)atomic_fetch_add(&db->timed, made);
	}
}

/*
 * Which file an OPEN's descriptor is, so that requests on other files are
 * independent of its own: j->st's device, inode and type, and st_nlink 1
 * (known); left 0 when it cannot be told.  Asked of the kernel's own copy
 * (sys_file_id()), so that on storage that waits an OPEN waits for its
 * open(2) alone, as OpenSSH's does.
 */
static void
file_id(struct task *j)
{
	if (j->n != -1 && sys_file_id((int)j->n, &j->st) == 0)
		j->st.st_nlink = 1;
}

static void
run_open(struct task *j)
{
	if (j->made)
		j->n = fs_open_made((const char *)j->job.buf, j->flags,
		    j->mode, &j->made);
	else
		j->n = fs_open((const char *)j->job.buf, j->flags, j->mode);
	file_id(j);
}

static void
run_close(struct task *j)
{
	j->n = close(j->fd);
}

static void
run_upload(struct task *j)
{
	struct fs_upload *u = (struct fs_upload *)(void *)j->job.buf;

	j->n = fs_upload_open((const char *)(u + 1), j->flags, j->mode, u);
	file_id(j);
}

/* Puts the upload in place, then closes it: close(2)'s failure counts. */
static void
run_commit(struct task *j)
{
	int e;

	j->n = fs_upload_commit(j->fd, j->shared);
	e = errno;
	if (close(j->fd) == -1 && j->n == 0) {
		j->n = -1;
		e = errno;
	}
	errno = e;
}

/*
 * Says once a session, at INFO, that storage calls run fewer at a time
 * than -T allows because no more threads could be made (a process limit:
 * RLIMIT_NPROC, a cgroup's pids.max), and why.
 */
static void
threads_check(void)
{
	unsigned made;
	int e;

	if (threads_told || (e = jobs_thread_error(&made)) == 0)
		return;
	threads_told = 1;
	if (made == 0)
		logit("storage calls run one at a time, in the session's own "
		    "thread: no thread could be made for them (%s)",
		    strerror(e));
	else
		logit("storage calls run on %u threads at most, fewer than "
		    "%u: no more could be made (%s)", made,
		    jobs_max_workers(), strerror(e));
}

void
sched_start(struct task *j, int wait)
{
	if (wait || (sched_slow() &&
	    !(j->op == OP_CLOSE && close_streaks[close_class(j)].here))) {
		jobs_start(&j->job);
		threads_check();
	} else {
		jobs_run_here(&j->job);
	}
}

struct task *
sched_job(enum job_op op, uint32_t (*answer)(struct task *), uint32_t id,
    struct handle *h, size_t size)
{
	struct task *j;

	if ((j = TASK(jobs_new(size))) == NULL)
		abort();	/* admitted without room: a bug */
	j->op = op;
	j->answer = answer;
	j->id = id;
	j->owner = h;
	j->fd = h != NULL ? h->fd : -1;
	return j;
}

/* READs: the page cache first. */

/*
 * Reads what the page cache holds of [off, off+len) without waiting:
 * returns the bytes (len, or fewer at end of file), or -1 with errno
 * (EAGAIN: some of it would wait).
 */
static ssize_t
read_cached(int fd, uint8_t *buf, size_t len, off_t off)
{
	size_t got = 0;
	ssize_t n;

	if (FUZZ_STORAGE_WAITS()) {
		errno = EAGAIN;
		return -1;
	}
	while (got < len) {
		n = sys_pread_nowait(fd, buf + got, len - got,
		    off + (off_t)got);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1)
			return -1;
		if (n == 0)
			break;
		got += (size_t)n;
	}
	return (ssize_t)got;
}

/* The file system of h cannot answer RWF_NOWAIT: reads are timed instead. */
static int
nowait_unsupported(struct handle *h, int e)
{
	if (e == EOPNOTSUPP || e == ENOSYS || e == EINVAL)
		h->no_nowait = 1;
	return h->no_nowait;
}

void
sched_read_start(struct task *j, struct handle *h)
{
	ssize_t n;

	if (h->read_waits && j->len > 0) {
		sched_start(j, 1);
		return;
	}
	if (j->len == 0 || h->no_nowait) {
		sched_start(j, 0);
		return;
	}
	if ((n = read_cached(h->fd, j->job.buf, j->len, j->off)) >= 0) {
		j->n = n;
		j->ns = -1;	/* no storage call: not in the average */
		jobs_mark_done(&j->job);
		return;
	}
	if (nowait_unsupported(h, errno)) {
		sched_start(j, 0);
		return;
	}
	/*
	 * A miss: the READs behind it, a pipeline's window of them that a
	 * client sends at once, go straight to workers too, until one of
	 * them does not wait (sched_read_done()).
	 */
	h->read_waits = 1;
	sched_start(j, 1);
}

ssize_t
sched_read_here(struct handle *h, uint8_t *buf, size_t len, off_t off)
{
	struct timing t;
	ssize_t n;

	if (!sched_concurrent())
		return fileio_read_full(h->fd, buf, len, off);
	if (!h->no_nowait) {
		if ((n = read_cached(h->fd, buf, len, off)) >= 0)
			return n;
		if (!nowait_unsupported(h, errno)) {
			h->read_waits = 1;	/* a miss: sched_read_start() */
			return -2;
		}
	}
	sched_timing_start(&t, 0);
	n = fileio_read_full(h->fd, buf, len, off);
	sched_note_latency(sched_timing_waited(&t));
	return n;
}

void
sched_read_done(const struct task *j, struct handle *h)
{
	/* A read that the page cache answered at once says nothing. */
	if (j->ns >= 0 && !h->no_nowait)
		h->read_waits = j->ns > SLOW_NS;
}

/* The rule (at the top of this file). */

/* An OPEN that creates or truncates: it changes what others look at. */
static int
open_changes(int flags)
{
	return (flags & (O_CREAT | O_TRUNC)) != 0;
}

/* Whether a write-only and a read-only open(2) (a FIFO's ends) are these. */
static int
fifo_pair(int a, int b)
{
	return ((a & O_ACCMODE) == O_WRONLY && (b & O_ACCMODE) == O_RDONLY) ||
	    ((a & O_ACCMODE) == O_RDONLY && (b & O_ACCMODE) == O_WRONLY);
}

/*
 * Whether a file a creating OPEN with these flags makes with mode (less
 * the umask) lets its owner open it so again.
 */
static int
owner_may(int flags, mode_t mode)
{
	mode_t need = 0;

	if ((flags & O_ACCMODE) != O_WRONLY)
		need |= S_IRUSR;
	if ((flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC))
		need |= S_IWUSR;
	return (mode & ~cmask & need) == need;
}

/* Whether handles a and b are known to be of two different files. */
static int
other_files(const struct handle *a, const struct handle *b)
{
	return a != NULL && b != NULL && a->known && b->known &&
	    (a->dev != b->dev || a->ino != b->ino);
}

/*
 * Whether the work of an earlier request in flight, j, and of a new one
 * (op on [off, off+len), through handle h) may run at once: the ordering
 * rule at the top of this file.
 */
static int
independent(const struct task *j, enum job_op op, struct handle *h,
    uint64_t off, uint64_t len)
{
	struct handle *jh = j->owner;
	uint64_t wend, roff;
	enum job_op other;

	if (jobs_done(&j->job))
		return 1;	/* its system call returned */
	if (j->op == OP_OPEN)
		return !open_changes(j->flags);
	if (j->op == OP_CLOSE) {
		/* Its handle is named by no later request. */
		return op != OP_WRITE || space_ample(h, len);
	}
	if (j->op != OP_WRITE && op != OP_WRITE)
		return 1;	/* neither changes anything */
	if (j->op == OP_WRITE && op == OP_WRITE && other_files(jh, h))
		return (j->flags & JOB_AMPLE) && space_ample(h, len);
	if (other_files(jh, h))
		return 1;	/* no byte, size or time in common */
	if ((j->op == OP_WRITE && (jh->flags & O_APPEND)) ||
	    (op == OP_WRITE && (h->flags & O_APPEND)))
		return 0;	/* the kernel picks the offset */
	if (j->op == OP_WRITE && op == OP_WRITE)
		return ((uint64_t)j->off + j->len <= off ||
		    off + len <= (uint64_t)j->off) &&
		    (j->flags & JOB_AMPLE) && space_ample(h, len);
	if (j->op == OP_WRITE) {
		wend = (uint64_t)j->off + j->len;
		other = op;
		roff = off;
	} else {
		wend = off + len;
		other = j->op;
		roff = (uint64_t)j->off;
	}
	if (other != OP_READ)
		return 0;	/* FSTAT, STAT, LSTAT: sizes, any file */
	return wend <= roff;
}

/*
 * The rule for two OPENs, with open(2)'s flags and creation modes: whether
 * no outcome depends on which runs first.
 */
static int
opens_independent(int a, mode_t am, int b, mode_t bm)
{
	if (((a | b) & O_EXCL) || (a & O_CREAT) != (b & O_CREAT))
		return 0;
	if (fifo_pair(a, b))
		return 0;
	if (!(a & O_CREAT))
		return 1;
	return am == bm && owner_may(a, am) && owner_may(b, bm);
}

/*
 * Whether an OPEN with open(2)'s flags and mode may start beside the
 * request in flight j (the rule).
 */
static int
open_independent(const struct task *j, int flags, mode_t mode)
{
	const struct handle *jh = j->owner;

	if (jobs_done(&j->job))
		return 1;
	switch (j->op) {
	case OP_OPEN:
		return opens_independent(j->flags, j->mode, flags, mode);
	case OP_CLOSE:
		return !fifo_pair(jh->flags, flags);
	default:	/* READ, WRITE, the stats, READDIR's */
		return !open_changes(flags);
	}
}

/*
 * Whether a CLOSE of h may start beside the request in flight j: it waits
 * for those on h (the rule).
 */
static int
close_independent(const struct task *j, const struct handle *h)
{
	if (jobs_done(&j->job))
		return 1;
	if (j->op == OP_OPEN)
		return !fifo_pair(j->flags, h->flags);
	if (j->op == OP_WRITE && !(j->flags & JOB_AMPLE))
		return 0;	/* a removed file's last close frees space */
	return j->owner != h;
}

/*
 * Whether a new request r may start beside j in flight when either is an
 * upload's OPEN or its commit (-A; the rule).
 */
static int
upload_independent(const struct task *j, const struct sched_req *r)
{
	const struct handle *ch, *oh;
	enum job_op other;
	int uflags, oflags;

	if (jobs_done(&j->job))
		return 1;
	if (j->op == OP_COMMIT || r->op == OP_COMMIT) {
		ch = j->op == OP_COMMIT ? j->owner : r->h;
		oh = j->op == OP_COMMIT ? r->h : j->owner;
		other = j->op == OP_COMMIT ? r->op : j->op;
		switch (other) {
		case OP_READ:
			return oh != ch;
		case OP_WRITE:	/* the file it replaces may free space */
			if (oh == ch)
				return 0;
			return j->op == OP_WRITE ? (j->flags & JOB_AMPLE) != 0 :
			    space_ample(r->h, r->len);
		case OP_CLOSE:
			return 1;
		case OP_COMMIT:
			return strcmp(ch->up->name, oh->up->name) != 0;
		default:	/* names, and the links of the file replaced */
			return 0;
		}
	}
	/* An upload's OPEN, and another request. */
	uflags = j->op == OP_UPLOAD ? j->flags : r->flags;
	other = j->op == OP_UPLOAD ? r->op : j->op;
	switch (other) {
	case OP_READ:
	case OP_WRITE:
	case OP_FSTAT:
	case OP_UPLOAD:
		return 1;
	case OP_OPEN:
		oflags = j->op == OP_OPEN ? j->flags : r->flags;
		return !open_changes(oflags) && !fifo_pair(uflags, oflags);
	case OP_CLOSE:
		oh = j->op == OP_CLOSE ? j->owner : r->h;
		return !fifo_pair(uflags, oh->flags);
	default:	/* the stats, READDIR's: a hidden name is an entry */
		return 0;
	}
}

/* Whether j is an upload's OPEN or its commit. */
static int
upload_job(const struct task *j)
{
	return j->op == OP_UPLOAD || j->op == OP_COMMIT;
}

/* Kinds of job: the system calls and the rule of each, in one row. */

/*
 * Whether the request r may start beside the job j in flight, as each kind
 * asks the rule.
 */
static int
beside_range(const struct task *j, const struct sched_req *r)
{
	if (upload_job(j))
		return upload_independent(j, r);
	return independent(j, r->op, r->h, r->off, r->len);
}

static int
beside_dirstat(const struct task *j, const struct sched_req *r)
{
	if (upload_job(j))
		return upload_independent(j, r);
	/* Its names are read here, now: nothing renames. */
	return independent(j, OP_DIRSTAT, NULL, 0, 0);
}

static int
beside_open(const struct task *j, const struct sched_req *r)
{
	if (upload_job(j))
		return upload_independent(j, r);
	return open_independent(j, r->flags, r->mode);
}

static int
beside_close(const struct task *j, const struct sched_req *r)
{
	if (upload_job(j))
		return upload_independent(j, r);
	return close_independent(j, r->h);
}

/*
 * A kind of job: its system calls (run, in a worker or in the loop's
 * thread) and whether a request of the kind may start beside a job in
 * flight (beside: the rule).  Its reply is not the kind's but the job's:
 * requests.c names it (struct task's answer) when it makes the job, as a
 * libuv request carries its done beside its work.
 */
struct job_kind {
	void (*run)(struct task *);
	int (*beside)(const struct task *, const struct sched_req *);
};

static const struct job_kind job_kinds[OP_COUNT] = {
	[OP_READ] = { run_read, beside_range },
	[OP_WRITE] = { run_write, beside_range },
	[OP_FSTAT] = { run_fstat, beside_range },
	[OP_STAT] = { run_stat, beside_range },
	[OP_LSTAT] = { run_lstat, beside_range },
	[OP_DIRSTAT] = { run_dirstat, beside_dirstat },
	[OP_OPEN] = { run_open, beside_open },
	[OP_CLOSE] = { run_close, beside_close },
	[OP_UPLOAD] = { run_upload, upload_independent },
	[OP_COMMIT] = { run_commit, upload_independent },
};

/*
 * A worker's thread takes SCHED_BATCH before its first job.  Each job
 * wakes its worker twice (handed the job, and when its storage call
 * returns) for a few microseconds of work; woken so, a worker does not
 * preempt the thread running on its CPU, which on a busy machine is the
 * loop that feeds it (or the client, or sshd), but runs in its turn.
 * Where the policy is refused, the worker runs as before.
 */
static void
worker_start(void)
{
	(void)sys_sched_batch();
}

/* What a worker runs: the system calls of one job, and nothing else. */
static void
run_job(struct job *job)
{
	struct task *j = TASK(job);
	struct timing t;

	/* Its runs, perhaps several at once, time themselves. */
	if (j->op == OP_DIRSTAT) {
		run_dirstat(j);
		return;
	}
	sched_timing_start(&t, 1);
	FUZZ_STORAGE_CALL(j);
	job_kinds[j->op].run(j);
	j->err = j->n == -1 ? errno : 0;
	j->ns = sched_timing_waited(&t);
}

/* Admission. */

int
sched_admit(const struct sched_req *r)
{
	const struct job_kind *k;

	if (r->op <= OP_NONE || r->op >= OP_COUNT ||
	    job_kinds[r->op].beside == NULL)
		return 0;	/* a barrier: it runs alone */
	k = &job_kinds[r->op];
	if (jobs_count() >= JOBS_RING || !jobs_room(r->size))
		return 0;
	for (unsigned i = 0; i < jobs_count(); i++)
		if (!k->beside(TASK(jobs_at(i)), r))
			return 0;
	return 1;
}

_Static_assert(sizeof(struct task) <= JOBS_ENTRY_MAX,
    "a task must fit an entry of the ring");

int
sched_init(unsigned ops, unsigned workers)
{
	storage_ops = ops;
	threads_told = 0;
	waiting = FUZZ_STORAGE_WAITS();
	streak = 0;
	ticks = 0;
	memset(close_streaks, 0, sizeof close_streaks);
	cmask = umask(0);
	(void)umask(cmask);
	jobs_on_start(worker_start);
	if (jobs_init(run_job, workers, sizeof(struct task)) == -1) {
		/* No room for the jobs' ring: each request in turn (-T 1). */
		logit("storage operations run one at a time: no memory for "
		    "their ring (%s)", strerror(errno));
		storage_ops = 1;
	}
	return 0;
}
