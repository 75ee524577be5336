/*
 * Unit tests of the ordering rule (sched.c): an earlier request is put in
 * flight as a job in the ring (jobs.c), and sched_admit() is asked about a
 * later one, as requests.c asks it.  Every (earlier kind, later kind) pair
 * in one setting, then the settings where the rule turns: range edges (end
 * == start, overlap by one byte), O_APPEND, a FIFO's reader and writer,
 * handles of known and unknown files, OPEN's flags and creation modes,
 * free space at the margin and one byte below, work already done, how
 * often free space is looked at when a look is slow.  The
 * free space the rule looks at is this file's (SCHED_FREE_SPACE), so no
 * outcome depends on the machine.  A failure names the pair.
 */
#include <sys/types.h>
#include <sys/stat.h>

#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#define SCHED_FREE_SPACE	test_free_space
#include "../../sched.c"
#include "unit.h"

/* What the file systems have free, for the rule's looks. */
static uint64_t free_now;
/* The looks made, and how long each takes (ns). */
static unsigned looks;
static long look_ns;

static uint64_t
test_free_space(int fd, int64_t *when)
{
	struct timespec ts = { 0, look_ns };

	(void)fd;
	*when = now_ns() == 0 ? 1 : now_ns();
	looks++;
	while (look_ns > 0 && nanosleep(&ts, &ts) == -1)
		;
	return free_now;
}

/* The handles the requests come through. */
enum hid {
	H_NONE,		/* a path: STAT, LSTAT; READDIR's has its own */
	H_A,		/* a file, O_RDWR, not known (its OPEN ran here) */
	H_A2,		/* another such handle: maybe the same file */
	H_APP,		/* O_WRONLY | O_APPEND, not known */
	H_B,		/* a known file */
	H_B2,		/* the same known file, another handle */
	H_C,		/* another known file */
	H_RO,		/* O_RDONLY, not known: a FIFO's reader, maybe */
	H_WO,		/* O_WRONLY, not known: a FIFO's writer, maybe */
	H_DIR,		/* a directory */
	H_U1,		/* -A: an upload of "t1", O_WRONLY */
	H_U2,		/* an upload of "t2" */
	H_U3,		/* another upload of "t1" */
	H_COUNT
};
static const char *const hnames[H_COUNT] = {
	"-", "A", "A2", "APP", "B", "B2", "C", "RO", "WO", "DIR", "U1", "U2",
	"U3",
};
static struct handle hs[H_COUNT];
static struct fs_upload ups[3];

static void
handles_reset(void)
{
	static const int flags[H_COUNT] = {
		[H_A] = O_RDWR, [H_A2] = O_RDWR,
		[H_APP] = O_WRONLY | O_APPEND, [H_B] = O_RDWR,
		[H_B2] = O_RDWR, [H_C] = O_RDWR, [H_RO] = O_RDONLY,
		[H_WO] = O_WRONLY, [H_DIR] = O_RDONLY, [H_U1] = O_WRONLY,
		[H_U2] = O_WRONLY, [H_U3] = O_WRONLY,
	};

	memset(hs, 0, sizeof hs);
	for (int i = 0; i < H_COUNT; i++) {
		hs[i].kind = i == H_DIR ? HANDLE_DIR : HANDLE_FILE;
		hs[i].fd = -1;
		hs[i].flags = flags[i];
	}
	hs[H_B].known = hs[H_B2].known = hs[H_C].known = 1;
	hs[H_B].dev = hs[H_B2].dev = hs[H_C].dev = 7;
	hs[H_B].ino = hs[H_B2].ino = 100;
	hs[H_C].ino = 200;
	memset(ups, 0, sizeof ups);
	for (int i = 0; i < 3; i++) {
		ups[i].atomic = 1;
		hs[H_U1 + i].up = &ups[i];
	}
	memcpy(ups[0].name, "t1", 3);
	memcpy(ups[1].name, "t2", 3);
	memcpy(ups[2].name, "t1", 3);
}

/* One request of a pair: its kind and what the rule reads of it. */
struct side {
	enum job_op op;
	enum hid h;
	uint64_t off, len;
	int flags;		/* OPEN: open(2)'s; a WRITE: JOB_AMPLE */
	mode_t mode;		/* OPEN's creation mode */
};

/* Free space: ample, or the later WRITE's length above the margin. */
#define AMPLE		((uint64_t)1 << 40)
#define AT_MARGIN	(SPACE_MARGIN + 100)
#define BELOW_MARGIN	(SPACE_MARGIN + 99)

struct pair {
	struct side earlier, later;
	uint64_t free;		/* 0: AMPLE */
	int done;		/* the earlier one's system call returned */
	int expect;		/* the later may start beside the earlier */
	mode_t umask;		/* 0: 022 */
};

static const char *const opnames[OP_COUNT] = {
	"NONE", "READ", "WRITE", "FSTAT", "STAT", "LSTAT", "READDIR", "OPEN",
	"CLOSE", "UPLOAD", "COMMIT",
};

static void
describe(char *buf, size_t size, const struct side *s)
{
	switch (s->op) {
	case OP_READ:
	case OP_WRITE:
		(void)snprintf(buf, size, "%s %s [%llu,%llu)%s", opnames[s->op],
		    hnames[s->h], (unsigned long long)s->off,
		    (unsigned long long)(s->off + s->len),
		    (s->flags & JOB_AMPLE) ? " ample" : "");
		break;
	case OP_OPEN:
	case OP_UPLOAD:
		(void)snprintf(buf, size, "%s %s%s%s%s%s mode 0%o",
		    opnames[s->op],
		    (s->flags & O_ACCMODE) == O_RDONLY ? "O_RDONLY" :
		    (s->flags & O_ACCMODE) == O_WRONLY ? "O_WRONLY" :
		    "O_RDWR", (s->flags & O_CREAT) ? "|O_CREAT" : "",
		    (s->flags & O_EXCL) ? "|O_EXCL" : "",
		    (s->flags & O_TRUNC) ? "|O_TRUNC" : "",
		    (s->flags & O_APPEND) ? "|O_APPEND" : "",
		    (unsigned)s->mode);
		break;
	default:
		(void)snprintf(buf, size, "%s %s", opnames[s->op],
		    hnames[s->h]);
		break;
	}
}

/* Puts s in flight: a job in the ring, not done unless done. */
static void
put_in_flight(const struct side *s, int done)
{
	struct task *j = TASK(jobs_new(0));

	assert_non_null(j);
	j->op = s->op;
	j->owner = s->h == H_NONE ? NULL : &hs[s->h];
	j->fd = -1;
	j->off = (off_t)s->off;
	j->len = (size_t)s->len;
	j->flags = s->flags;
	j->mode = s->mode;
	if (done)
		jobs_mark_done(&j->job);
}

/* Empties the ring. */
static void
drain(void)
{
	while (jobs_count() > 0) {
		jobs_mark_done(jobs_at(0));
		jobs_retire();
	}
}

/* Runs the pairs; prints each that fails, by name, and counts them. */
static int
run_pairs(const struct pair *p, size_t n)
{
	char a[128], b[128];
	struct sched_req r;
	int got, failed = 0;

	for (size_t i = 0; i < n; i++) {
		handles_reset();
		memset(spaces, 0, sizeof spaces);
		space_spent = 0;
		cmask = p[i].umask != 0 ? p[i].umask : 022;
		free_now = p[i].free != 0 ? p[i].free : AMPLE;
		put_in_flight(&p[i].earlier, p[i].done);
		memset(&r, 0, sizeof r);
		r.op = p[i].later.op;
		r.h = p[i].later.h == H_NONE ? NULL : &hs[p[i].later.h];
		r.off = p[i].later.off;
		r.len = p[i].later.len;
		r.flags = p[i].later.flags;
		r.mode = p[i].later.mode;
		got = sched_admit(&r);
		drain();
		if (got == p[i].expect)
			continue;
		describe(a, sizeof a, &p[i].earlier);
		describe(b, sizeof b, &p[i].later);
		print_error("earlier %s%s, later %s%s%s: expected %s, got %s\n",
		    a, p[i].done ? " (done)" : "", b,
		    p[i].free == 0 ? "" : p[i].free == AT_MARGIN ?
		    " (free: at the margin)" : " (free: one byte below)",
		    p[i].umask != 0 ? " (umask)" : "",
		    p[i].expect ? "independent" : "to wait",
		    got ? "independent" : "to wait");
		failed++;
	}
	return failed;
}

/* Each kind in one setting: on handle A, ranges that meet, nothing made. */
static const struct side kinds[] = {
	{ OP_READ, H_A, 100, 100, 0, 0 },
	{ OP_WRITE, H_A, 100, 100, JOB_AMPLE, 0 },
	{ OP_FSTAT, H_A, 0, 0, 0, 0 },
	{ OP_STAT, H_NONE, 0, 0, 0, 0 },
	{ OP_LSTAT, H_NONE, 0, 0, 0, 0 },
	{ OP_DIRSTAT, H_DIR, 0, 0, 0, 0 },
	{ OP_OPEN, H_NONE, 0, 0, O_RDONLY, 0666 },
	{ OP_CLOSE, H_A2, 0, 0, 0, 0 },
};
#define NKINDS	(sizeof kinds / sizeof kinds[0])

/*
 * Every (earlier, later) pair of kinds as above, but that the earlier READ
 * and WRITE are at [0, 100): a WRITE waits for a READ of the bytes before
 * it (the READ would meet its end of file), and a READ after a WRITE of
 * the bytes before it does not; a WRITE waits for every stat and READDIR
 * and they for it; everything else is independent.
 */
static const int matrix[NKINDS][NKINDS] = {
	/* later: READ WRITE FSTAT STAT LSTAT READDIR OPEN CLOSE */
	[0] = { 1, 0, 1, 1, 1, 1, 1, 1 },	/* earlier READ */
	[1] = { 1, 1, 0, 0, 0, 0, 1, 1 },	/* earlier WRITE */
	[2] = { 1, 0, 1, 1, 1, 1, 1, 1 },	/* earlier FSTAT */
	[3] = { 1, 0, 1, 1, 1, 1, 1, 1 },	/* earlier STAT */
	[4] = { 1, 0, 1, 1, 1, 1, 1, 1 },	/* earlier LSTAT */
	[5] = { 1, 0, 1, 1, 1, 1, 1, 1 },	/* earlier READDIR */
	[6] = { 1, 1, 1, 1, 1, 1, 1, 1 },	/* earlier OPEN */
	[7] = { 1, 1, 1, 1, 1, 1, 1, 1 },	/* earlier CLOSE */
};

static void
test_every_pair_of_kinds(void **state)
{
	struct pair p[NKINDS * NKINDS];
	size_t n = 0;

	(void)state;
	for (size_t e = 0; e < NKINDS; e++) {
		for (size_t l = 0; l < NKINDS; l++) {
			memset(&p[n], 0, sizeof p[n]);
			p[n].earlier = kinds[e];
			if (kinds[e].op == OP_READ || kinds[e].op == OP_WRITE)
				p[n].earlier.off = 0;
			/* A handle being closed is named by no later one. */
			if (kinds[e].op == OP_CLOSE)
				p[n].earlier.h = H_C;
			p[n].later = kinds[l];
			p[n].later.flags &= ~JOB_AMPLE;
			p[n].expect = matrix[e][l];
			n++;
		}
	}
	assert_int_equal(run_pairs(p, n), 0);
}

#define READ_(h, o, l)		{ OP_READ, h, o, l, 0, 0 }
#define WRITE_(h, o, l)		{ OP_WRITE, h, o, l, 0, 0 }
#define AWRITE(h, o, l)		{ OP_WRITE, h, o, l, JOB_AMPLE, 0 }
#define FSTAT_(h)		{ OP_FSTAT, h, 0, 0, 0, 0 }
#define STAT_			{ OP_STAT, H_NONE, 0, 0, 0, 0 }
#define DIRSTAT_		{ OP_DIRSTAT, H_DIR, 0, 0, 0, 0 }
#define OPEN_(f, m)		{ OP_OPEN, H_NONE, 0, 0, f, m }
#define CLOSE_(h)		{ OP_CLOSE, h, 0, 0, 0, 0 }
#define LSTAT_			{ OP_LSTAT, H_NONE, 0, 0, 0, 0 }
#define UPLOAD_(f)		{ OP_UPLOAD, H_NONE, 0, 0, f, 0644 }
#define COMMIT_(h)		{ OP_COMMIT, h, 0, 0, 0, 0 }
#define UP_W			(O_WRONLY | O_CREAT | O_TRUNC)

/* READ and WRITE: where ranges meet, and overlap by one byte. */
static const struct pair ranges[] = {
	/* A WRITE's end at a READ's start: independent, either order. */
	{ AWRITE(H_A, 0, 100), READ_(H_A, 100, 50), 0, 0, 1, 0 },
	{ READ_(H_A, 100, 50), WRITE_(H_A, 0, 100), 0, 0, 1, 0 },
	/* One byte into the READ: the READ would see it. */
	{ AWRITE(H_A, 0, 101), READ_(H_A, 100, 50), 0, 0, 0, 0 },
	{ READ_(H_A, 100, 50), WRITE_(H_A, 0, 101), 0, 0, 0, 0 },
	/* A READ before a WRITE: its end of file may become a hole. */
	{ AWRITE(H_A, 200, 10), READ_(H_A, 0, 100), 0, 0, 0, 0 },
	{ READ_(H_A, 0, 100), WRITE_(H_A, 200, 10), 0, 0, 0, 0 },
	/* Two WRITEs that meet, and that overlap by one byte. */
	{ AWRITE(H_A, 0, 100), WRITE_(H_A, 100, 100), 0, 0, 1, 0 },
	{ AWRITE(H_A, 100, 100), WRITE_(H_A, 0, 100), 0, 0, 1, 0 },
	{ AWRITE(H_A, 0, 100), WRITE_(H_A, 99, 100), 0, 0, 0, 0 },
	{ AWRITE(H_A, 100, 100), WRITE_(H_A, 0, 101), 0, 0, 0, 0 },
	/* Two handles not known apart: the same ranges rule. */
	{ AWRITE(H_A, 0, 100), READ_(H_A2, 50, 10), 0, 0, 0, 0 },
	{ AWRITE(H_A, 0, 100), WRITE_(H_A2, 50, 10), 0, 0, 0, 0 },
	{ AWRITE(H_A, 0, 100), FSTAT_(H_A2), 0, 0, 0, 0 },
	/* READs never wait for READs, whatever the ranges. */
	{ READ_(H_A, 0, 100), READ_(H_A, 50, 100), 0, 0, 1, 0 },
};

/* O_APPEND: the kernel picks the offset. */
static const struct pair append[] = {
	{ AWRITE(H_APP, 0, 10), READ_(H_A, 1000, 10), 0, 0, 0, 0 },
	{ READ_(H_A, 1000, 10), WRITE_(H_APP, 0, 10), 0, 0, 0, 0 },
	{ AWRITE(H_APP, 0, 10), WRITE_(H_A, 1000, 10), 0, 0, 0, 0 },
	{ AWRITE(H_A, 0, 10), WRITE_(H_APP, 1000, 10), 0, 0, 0, 0 },
	{ AWRITE(H_APP, 0, 10), WRITE_(H_APP, 1000, 10), 0, 0, 0, 0 },
	/* Neither writes: O_APPEND or not. */
	{ READ_(H_B, 0, 10), READ_(H_APP, 0, 10), 0, 0, 1, 0 },
};

/* Handles of known files: the same file, two files, one not known. */
static const struct pair known[] = {
	{ AWRITE(H_B, 0, 100), READ_(H_C, 0, 100), 0, 0, 1, 0 },
	{ READ_(H_B, 0, 100), WRITE_(H_C, 0, 100), 0, 0, 1, 0 },
	{ AWRITE(H_B, 0, 100), FSTAT_(H_C), 0, 0, 1, 0 },
	{ FSTAT_(H_B), WRITE_(H_C, 0, 100), 0, 0, 1, 0 },
	{ AWRITE(H_B, 0, 100), WRITE_(H_C, 0, 100), 0, 0, 1, 0 },
	{ WRITE_(H_B, 0, 100), WRITE_(H_C, 0, 100), 0, 0, 0, 0 },
	/* Two handles of one known file: its ranges. */
	{ AWRITE(H_B, 0, 100), READ_(H_B2, 50, 10), 0, 0, 0, 0 },
	{ AWRITE(H_B, 0, 100), READ_(H_B2, 100, 10), 0, 0, 1, 0 },
	{ AWRITE(H_B, 0, 100), FSTAT_(H_B2), 0, 0, 0, 0 },
	/* Known and not known: maybe the same file. */
	{ AWRITE(H_B, 0, 100), READ_(H_A, 50, 10), 0, 0, 0, 0 },
	{ AWRITE(H_A, 0, 100), FSTAT_(H_B), 0, 0, 0, 0 },
	/* A stat names any file. */
	{ AWRITE(H_B, 0, 100), STAT_, 0, 0, 0, 0 },
	/* Done: no longer in flight, whatever it was. */
	{ AWRITE(H_A, 0, 100), READ_(H_A, 50, 10), 0, 1, 1, 0 },
	{ OPEN_(O_WRONLY | O_CREAT, 0666), STAT_, 0, 1, 1, 0 },
	{ READ_(H_A, 0, 10), CLOSE_(H_A), 0, 1, 1, 0 },
};

/* CLOSE waits for its handle's requests; a FIFO's last reader. */
static const struct pair closes[] = {
	{ READ_(H_A, 0, 10), CLOSE_(H_A), 0, 0, 0, 0 },
	{ AWRITE(H_A, 0, 10), CLOSE_(H_A), 0, 0, 0, 0 },
	{ FSTAT_(H_A), CLOSE_(H_A), 0, 0, 0, 0 },
	{ READ_(H_A, 0, 10), CLOSE_(H_A2), 0, 0, 1, 0 },
	/* A WRITE without ample space: a last close may free some. */
	{ WRITE_(H_A, 0, 10), CLOSE_(H_A2), 0, 0, 0, 0 },
	{ CLOSE_(H_A2), WRITE_(H_A, 0, 100), AT_MARGIN, 0, 1, 0 },
	{ CLOSE_(H_A2), WRITE_(H_A, 0, 100), BELOW_MARGIN, 0, 0, 0 },
	/* A FIFO: the writer fails unless the reader is still there. */
	{ CLOSE_(H_RO), OPEN_(O_WRONLY, 0666), 0, 0, 0, 0 },
	{ CLOSE_(H_WO), OPEN_(O_RDONLY, 0666), 0, 0, 0, 0 },
	{ CLOSE_(H_A), OPEN_(O_WRONLY, 0666), 0, 0, 1, 0 },
	{ CLOSE_(H_RO), OPEN_(O_RDONLY, 0666), 0, 0, 1, 0 },
	{ OPEN_(O_WRONLY, 0666), CLOSE_(H_RO), 0, 0, 0, 0 },
	{ OPEN_(O_RDONLY, 0666), CLOSE_(H_WO), 0, 0, 0, 0 },
	{ OPEN_(O_RDWR, 0666), CLOSE_(H_RO), 0, 0, 1, 0 },
	{ CLOSE_(H_A2), CLOSE_(H_A), 0, 0, 1, 0 },
};

/* OPEN: what it creates or truncates, and two OPENs. */
static const struct pair opens[] = {
	/* An OPEN that creates or truncates, before or after the rest. */
	{ OPEN_(O_WRONLY | O_CREAT, 0666), READ_(H_A, 0, 10), 0, 0, 0, 0 },
	{ OPEN_(O_WRONLY | O_TRUNC, 0666), STAT_, 0, 0, 0, 0 },
	{ OPEN_(O_RDWR | O_CREAT, 0666), DIRSTAT_, 0, 0, 0, 0 },
	{ OPEN_(O_RDONLY, 0666), WRITE_(H_A, 0, 10), 0, 0, 1, 0 },
	{ READ_(H_A, 0, 10), OPEN_(O_RDONLY | O_CREAT, 0666), 0, 0, 0, 0 },
	{ AWRITE(H_A, 0, 10), OPEN_(O_WRONLY | O_TRUNC, 0666), 0, 0, 0, 0 },
	{ STAT_, OPEN_(O_RDWR, 0666), 0, 0, 1, 0 },
	{ FSTAT_(H_A), OPEN_(O_RDWR | O_APPEND, 0666), 0, 0, 1, 0 },
	/* Neither creates: independent, truncations too. */
	{ OPEN_(O_WRONLY | O_TRUNC, 0), OPEN_(O_WRONLY | O_TRUNC, 0), 0, 0,
	    1, 0 },
	{ OPEN_(O_RDWR, 0666), OPEN_(O_RDWR, 0600), 0, 0, 1, 0 },
	/* O_EXCL in either: the second fails. */
	{ OPEN_(O_RDWR | O_CREAT | O_EXCL, 0666),
	    OPEN_(O_RDWR | O_CREAT, 0666), 0, 0, 0, 0 },
	{ OPEN_(O_RDWR | O_CREAT, 0666),
	    OPEN_(O_RDWR | O_CREAT | O_EXCL, 0666), 0, 0, 0, 0 },
	{ OPEN_(O_RDONLY | O_EXCL, 0666), OPEN_(O_RDONLY, 0666), 0, 0, 0, 0 },
	/* One creates, one not: the name is there or not by timing. */
	{ OPEN_(O_RDWR | O_CREAT, 0666), OPEN_(O_RDWR, 0666), 0, 0, 0, 0 },
	{ OPEN_(O_RDWR, 0666), OPEN_(O_RDWR | O_CREAT, 0666), 0, 0, 0, 0 },
	/* Both create, one mode, which lets the owner in each way. */
	{ OPEN_(O_RDWR | O_CREAT, 0666), OPEN_(O_RDWR | O_CREAT, 0666), 0, 0,
	    1, 0 },
	{ OPEN_(O_RDWR | O_CREAT | O_TRUNC, 0600),
	    OPEN_(O_WRONLY | O_CREAT, 0600), 0, 0, 1, 0 },
	/* Two modes: the file's is the one the kernel took first. */
	{ OPEN_(O_RDWR | O_CREAT, 0666), OPEN_(O_RDWR | O_CREAT, 0644), 0, 0,
	    0, 0 },
	/* Modes the owner may not use: the creator is let in, not the other. */
	{ OPEN_(O_RDONLY | O_CREAT, 0444), OPEN_(O_RDONLY | O_CREAT, 0444),
	    0, 0, 1, 0 },
	{ OPEN_(O_WRONLY | O_CREAT, 0444), OPEN_(O_WRONLY | O_CREAT, 0444),
	    0, 0, 0, 0 },
	{ OPEN_(O_RDONLY | O_CREAT, 0222), OPEN_(O_RDONLY | O_CREAT, 0222),
	    0, 0, 0, 0 },
	{ OPEN_(O_RDONLY | O_CREAT | O_TRUNC, 0444),
	    OPEN_(O_RDONLY | O_CREAT | O_TRUNC, 0444), 0, 0, 0, 0 },
	/* The umask takes from the owner what the mode gives. */
	{ OPEN_(O_RDWR | O_CREAT, 0600), OPEN_(O_RDWR | O_CREAT, 0600), 0, 0,
	    1, 0077 },
	{ OPEN_(O_RDWR | O_CREAT, 0600), OPEN_(O_RDWR | O_CREAT, 0600), 0, 0,
	    0, 0277 },
	/* A FIFO's two ends, creating or not. */
	{ OPEN_(O_WRONLY, 0666), OPEN_(O_RDONLY, 0666), 0, 0, 0, 0 },
	{ OPEN_(O_RDONLY, 0666), OPEN_(O_WRONLY, 0666), 0, 0, 0, 0 },
	{ OPEN_(O_WRONLY | O_CREAT, 0666), OPEN_(O_RDONLY | O_CREAT, 0666),
	    0, 0, 0, 0 },
	{ OPEN_(O_WRONLY, 0666), OPEN_(O_WRONLY, 0666), 0, 0, 1, 0 },
	{ OPEN_(O_RDWR, 0666), OPEN_(O_WRONLY, 0666), 0, 0, 1, 0 },
};

/* Free space: two WRITEs at the margin, and one byte below it. */
static const struct pair space[] = {
	{ AWRITE(H_A, 0, 100), WRITE_(H_A, 100, 100), AT_MARGIN, 0, 1, 0 },
	{ AWRITE(H_A, 0, 100), WRITE_(H_A, 100, 100), BELOW_MARGIN, 0, 0, 0 },
	{ AWRITE(H_B, 0, 100), WRITE_(H_C, 0, 100), AT_MARGIN, 0, 1, 0 },
	{ AWRITE(H_B, 0, 100), WRITE_(H_C, 0, 100), BELOW_MARGIN, 0, 0, 0 },
	/* The earlier one went without ample space: never beside it. */
	{ WRITE_(H_A, 0, 100), WRITE_(H_A, 100, 100), 0, 0, 0, 0 },
	/* READs and stats allocate nothing. */
	{ AWRITE(H_A, 0, 100), READ_(H_A, 100, 100), BELOW_MARGIN, 0, 1, 0 },
};

/*
 * -A: an upload's OPEN reads its target's name and makes a file of its
 * own (a hidden name is an entry of the directory): it waits for the
 * stats and READDIR, for a creating OPEN, and for a FIFO's other end; a
 * commit changes its target's name and the links of the file it
 * replaces: it waits for everything that names a path, for FSTAT, for the
 * requests on its handle, for WRITEs without ample space, and for the
 * commit of another upload of the same name.
 */
static const struct pair uploads[] = {
	/* The commit first. */
	{ COMMIT_(H_U1), READ_(H_A, 0, 100), 0, 0, 1, 0 },
	{ COMMIT_(H_U1), AWRITE(H_A, 0, 100), 0, 0, 1, 0 },
	{ COMMIT_(H_U1), WRITE_(H_A, 0, 100), BELOW_MARGIN, 0, 0, 0 },
	{ COMMIT_(H_U1), FSTAT_(H_A), 0, 0, 0, 0 },
	{ COMMIT_(H_U1), STAT_, 0, 0, 0, 0 },
	{ COMMIT_(H_U1), LSTAT_, 0, 0, 0, 0 },
	{ COMMIT_(H_U1), DIRSTAT_, 0, 0, 0, 0 },
	{ COMMIT_(H_U1), OPEN_(O_RDONLY, 0666), 0, 0, 0, 0 },
	{ COMMIT_(H_U1), UPLOAD_(UP_W), 0, 0, 0, 0 },
	{ COMMIT_(H_U1), CLOSE_(H_A), 0, 0, 1, 0 },
	{ COMMIT_(H_U1), COMMIT_(H_U2), 0, 0, 1, 0 },
	{ COMMIT_(H_U1), COMMIT_(H_U3), 0, 0, 0, 0 },
	{ COMMIT_(H_U1), STAT_, 0, 1, 1, 0 },
	/* The commit later. */
	{ READ_(H_A, 0, 100), COMMIT_(H_U1), 0, 0, 1, 0 },
	{ AWRITE(H_U1, 0, 100), COMMIT_(H_U1), 0, 0, 0, 0 },
	{ AWRITE(H_A, 0, 100), COMMIT_(H_U1), 0, 0, 1, 0 },
	{ WRITE_(H_A, 0, 100), COMMIT_(H_U1), 0, 0, 0, 0 },
	{ FSTAT_(H_A), COMMIT_(H_U1), 0, 0, 0, 0 },
	{ STAT_, COMMIT_(H_U1), 0, 0, 0, 0 },
	{ DIRSTAT_, COMMIT_(H_U1), 0, 0, 0, 0 },
	{ OPEN_(O_RDONLY, 0666), COMMIT_(H_U1), 0, 0, 0, 0 },
	{ UPLOAD_(UP_W), COMMIT_(H_U1), 0, 0, 0, 0 },
	{ CLOSE_(H_A), COMMIT_(H_U1), 0, 0, 1, 0 },
	/* The upload's OPEN first. */
	{ UPLOAD_(UP_W), READ_(H_A, 0, 100), 0, 0, 1, 0 },
	{ UPLOAD_(UP_W), WRITE_(H_A, 0, 100), 0, 0, 1, 0 },
	{ UPLOAD_(UP_W), FSTAT_(H_A), 0, 0, 1, 0 },
	{ UPLOAD_(UP_W), STAT_, 0, 0, 0, 0 },
	{ UPLOAD_(UP_W), DIRSTAT_, 0, 0, 0, 0 },
	{ UPLOAD_(UP_W), UPLOAD_(UP_W | O_EXCL), 0, 0, 1, 0 },
	{ UPLOAD_(UP_W), OPEN_(O_RDONLY, 0666), 0, 0, 0, 0 },
	{ UPLOAD_(O_RDWR | O_CREAT), OPEN_(O_RDONLY, 0666), 0, 0, 1, 0 },
	{ UPLOAD_(O_RDWR | O_CREAT), OPEN_(O_RDWR | O_CREAT, 0666), 0, 0, 0,
	    0 },
	{ UPLOAD_(UP_W), CLOSE_(H_RO), 0, 0, 0, 0 },
	{ UPLOAD_(UP_W), CLOSE_(H_A), 0, 0, 1, 0 },
	/* The upload's OPEN later. */
	{ READ_(H_A, 0, 100), UPLOAD_(UP_W), 0, 0, 1, 0 },
	{ WRITE_(H_A, 0, 100), UPLOAD_(UP_W), 0, 0, 1, 0 },
	{ LSTAT_, UPLOAD_(UP_W), 0, 0, 0, 0 },
	{ OPEN_(O_RDONLY, 0666), UPLOAD_(UP_W), 0, 0, 0, 0 },
	{ OPEN_(O_RDWR, 0666), UPLOAD_(O_RDWR | O_TRUNC), 0, 0, 1, 0 },
	{ OPEN_(O_WRONLY | O_CREAT, 0666), UPLOAD_(O_RDWR | O_TRUNC), 0, 0, 0,
	    0 },
	{ CLOSE_(H_RO), UPLOAD_(UP_W), 0, 0, 0, 0 },
};

#define PAIRS(name, table)						\
static void								\
name(void **state)							\
{									\
	(void)state;							\
	assert_int_equal(run_pairs(table,				\
	    sizeof table / sizeof table[0]), 0);			\
}
PAIRS(test_ranges, ranges)
PAIRS(test_append, append)
PAIRS(test_known_files, known)
PAIRS(test_close, closes)
PAIRS(test_open, opens)
PAIRS(test_free_space_margin, space)
PAIRS(test_uploads, uploads)

/*
 * A look at free space that took 60 ms (storage whose statfs waits) is not
 * made again for 20 times as long: 100 WRITEs handed off right after it
 * cost no look (they cost one each when every look older than SPACE_NS
 * was made again, and the loop waited 60 ms for each).  A look that takes
 * no time brings SPACE_NS back.
 */
static void
test_slow_look_not_repeated(void **state)
{
	(void)state;
	handles_reset();
	memset(spaces, 0, sizeof spaces);
	space_ns = SPACE_NS;
	free_now = AMPLE;
	looks = 0;
	look_ns = 60000000;
	assert_true(space_ample(&hs[H_B], 100));
	assert_int_equal(looks, 1);
	for (int i = 0; i < 100; i++)
		assert_true(space_ample(&hs[H_C], 100));
	assert_int_equal(looks, 1);
	assert_true(space_ns >= SPACE_COST * (int64_t)60000000);
	look_ns = 0;
	spaces[0].at = 0;
	assert_true(space_ample(&hs[H_B], 100));
	assert_int_equal(looks, 2);
	assert_int_equal(space_ns, SPACE_NS);
}

/* One CLOSE through h, done after ns, noted as answered. */
static void
note_close_of(struct handle *h, int64_t ns)
{
	struct task t = { .op = OP_CLOSE, .owner = h, .ns = ns };

	sched_note_job(&t);
}

/* Where a CLOSE through h starts now: 1 here (done at once), 0 a worker. */
static int
close_runs_here(struct handle *h)
{
	struct task *j = sched_job(OP_CLOSE, NULL, 1, h, 0);
	int here;

	j->fd = -1;	/* close(-1): EBADF, nothing closed */
	sched_start(j, 0);
	here = jobs_done(&j->job);
	while (jobs_running() > 0) {
		jobs_wait();
		(void)jobs_collect();
	}
	drain();
	return here;
}

/*
 * While storage waits, CLOSEs go to workers until CLOSE_STREAK in a row
 * did not wait, then run here until one waits; handles open for writing
 * keep a streak of their own, whatever they wrote so far.
 */
static void
test_close_placement(void **state)
{
	unsigned ops = storage_ops;

	(void)state;
	handles_reset();
	storage_ops = 4;
	waiting = 1;
	streak = 0;
	memset(close_streaks, 0, sizeof close_streaks);
	assert_int_equal(close_runs_here(&hs[H_B]), 0);
	for (int i = 0; i < CLOSE_STREAK - 1; i++)
		note_close_of(&hs[H_B], SLOW_NS / 2);
	note_close_of(&hs[H_B], -1);		/* not told: no count */
	note_close_of(&hs[H_B], SCHED_NOT_TIMED);
	assert_int_equal(close_runs_here(&hs[H_B]), 0);
	note_close_of(&hs[H_C], 0);		/* open for writing too */
	assert_int_equal(close_runs_here(&hs[H_B]), 1);
	assert_int_equal(close_runs_here(&hs[H_APP]), 1);
	hs[H_B].bytes_written = 4096;		/* the bytes do not count */
	assert_int_equal(close_runs_here(&hs[H_B]), 1);
	/* Read-only: its own streak, not yet made. */
	assert_int_equal(close_runs_here(&hs[H_RO]), 0);
	for (int i = 0; i < 100; i++)
		note_close_of(&hs[H_B], SLOW_NS);
	assert_int_equal(close_runs_here(&hs[H_B]), 1);
	/* One that waited sends them back, and the count starts again. */
	note_close_of(&hs[H_B], SLOW_NS + 1);
	assert_int_equal(close_runs_here(&hs[H_B]), 0);
	for (int i = 0; i < CLOSE_STREAK - 1; i++)
		note_close_of(&hs[H_B], 0);
	assert_int_equal(close_runs_here(&hs[H_B]), 0);
	for (int i = 0; i < CLOSE_STREAK; i++)
		note_close_of(&hs[H_RO], 0);
	assert_int_equal(close_runs_here(&hs[H_RO]), 1);
	assert_int_equal(close_runs_here(&hs[H_B]), 0);
	/* Storage answers at once: every CLOSE runs here. */
	waiting = 0;
	assert_int_equal(close_runs_here(&hs[H_C]), 1);
	waiting = 1;
	streak = 0;
	storage_ops = ops;
	hs[H_B].bytes_written = 0;
}

/* A barrier (no job kind) never starts beside work in flight. */
static void
test_barrier_waits(void **state)
{
	struct sched_req r = { .op = OP_NONE };

	(void)state;
	handles_reset();
	assert_int_equal(sched_admit(&r), 0);
	put_in_flight(&kinds[0], 0);
	assert_int_equal(sched_admit(&r), 0);
	drain();
}

static int
setup(void **state)
{
	(void)state;
	return jobs_init(run_job, 1, sizeof(struct task));
}

static int
teardown(void **state)
{
	(void)state;
	drain();
	jobs_idle();
	return 0;
}

int
main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_pair_of_kinds),
		cmocka_unit_test(test_ranges),
		cmocka_unit_test(test_append),
		cmocka_unit_test(test_known_files),
		cmocka_unit_test(test_close),
		cmocka_unit_test(test_open),
		cmocka_unit_test(test_free_space_margin),
		cmocka_unit_test(test_uploads),
		cmocka_unit_test(test_slow_look_not_repeated),
		cmocka_unit_test(test_barrier_waits),
		cmocka_unit_test(test_close_placement),
	};

	if (unit_args(argc, argv) != 0)
		return 2;
	return cmocka_run_group_tests(tests, setup, teardown);
}
