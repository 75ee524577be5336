/*
 * The request table, the dispatcher and the handlers.
 *
 * The handler contract: a handler parses its fields through the cursor,
 * acts, and either queues its one reply with a reply_*() helper and
 * returns what the helper returns (REPLIED), or returns a status code for
 * the dispatcher to send.  A field that does not parse is PARSE_ERROR: the
 * dispatcher logs it under the request's name and answers BAD_MESSAGE.  A
 * handler cannot send a status itself, flush, wait or exit, so every
 * request gets exactly one reply; the dispatcher checks it all the same.
 */
#include <sys/types.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "attrib.h"
#include "digest.h"
#include "fileio.h"
#include "fs.h"
#include "handles.h"
#include "jobs.h"
#include "log.h"
#include "packet.h"
#include "path.h"
#include "requests.h"
#include "sched.h"
#include "sys-gnu.h"
#include "xferlog.h"

#define SFTP_VERSION	3
/*
 * users-groups-by-id looks up at most this many names in the system's
 * databases; other ids not in the cache are answered as unknown ("").
 */
#define ID_LOOKUPS_MAX	256
/* OpenSSH's copy-data moves this much at a time (see copy_hit_eof()). */
#define COPY_CHUNK	(64 * 1024)

/* check-file: the algorithms advertised, the draft's smallest block size. */
#define CHECK_FILE_ALGOS	"md5,sha1,sha224,sha256,sha384,sha512,crc32"
#define CHECK_BLOCK_MIN		256

/* statvfs@openssh.com's flag bits. */
#define SSH2_FXE_STATVFS_ST_RDONLY	0x1
#define SSH2_FXE_STATVFS_ST_NOSUID	0x2

/* What a handler returns besides a status code (see above). */
#define REPLIED		0xffffffffU
#define PARSE_ERROR	0xfffffffeU
/* The session must stop (FILEIO_STOP): no reply at all. */
#define STOP		0xfffffffdU
/* A job will answer, in request order (requests_reap()). */
#define DEFERRED	0xfffffffcU
/*
 * The request may not start yet (admit()): nothing of it was logged or
 * done; the dispatcher runs the handler again later, on the same bytes.
 */
#define WAIT		0xfffffffbU

/*
 * check-file hashes at most this much in one request: about five minutes of
 * sha256 on one core.  A larger range is refused; a client can ask for
 * parts of it.
 */
#define CHECK_FILE_MAX	((uint64_t)64 << 30)

/* A request may change the file system: refused under -R. */
#define REQ_WRITES	0x1

/*
 * Storage that waits (NFS, FUSE, cold disks): requests in flight.  The
 * ordering rule, and what runs where, are the scheduler's (sched.c).  A
 * request kind whose row names a job kind may start while others are in
 * flight; its handler parses and validates it, then asks admit() before
 * it logs or acts: when admit() says wait, the handler returns WAIT and
 * runs again later, on the same bytes.  A row without a job kind is a
 * barrier: it waits until nothing is in flight, and nothing starts until
 * it is answered.
 */

struct request {
	const char *name;	/* as -P, -p and -Q name it */
	const char *ext_name;	/* extension name, or NULL */
	const char *ext_version;
	uint8_t type;
	uint32_t (*handler)(uint32_t, struct cursor *);
	int flags;
	/*
	 * The kind of job it may be, that may start beside requests in
	 * flight; OP_NONE: a barrier, it runs alone.
	 */
	enum job_op job;
	/*
	 * Requests this one does the work of, comma-separated, or NULL: it
	 * is permitted only where they are too.  check-file discloses what
	 * a file holds, so it is a read.
	 */
	const char *also;
};

static const struct session *ss;
static struct oqueue *oq;
static struct handle_table handles;
static int init_done;
/*
 * requests_abandon() gave up on the storage: from then on no handle is
 * closed (a close(2) may wait on the same storage); each is logged as not
 * closed, and the exit closes its descriptor.
 */
static int given_up;

/* Scratch for paths: requests are handled one at a time. */
static char path1[PATH_MAX];
static char path2[PATH_MAX];
static char resolved[PATH_MAX];

/* The request table: the one list of requests. */
static uint32_t process_open(uint32_t, struct cursor *);
static uint32_t process_close(uint32_t, struct cursor *);
static uint32_t process_read(uint32_t, struct cursor *);
static uint32_t process_write(uint32_t, struct cursor *);
static uint32_t process_lstat(uint32_t, struct cursor *);
static uint32_t process_fstat(uint32_t, struct cursor *);
static uint32_t process_setstat(uint32_t, struct cursor *);
static uint32_t process_fsetstat(uint32_t, struct cursor *);
static uint32_t process_opendir(uint32_t, struct cursor *);
static uint32_t process_readdir(uint32_t, struct cursor *);
static uint32_t process_remove(uint32_t, struct cursor *);
static uint32_t process_mkdir(uint32_t, struct cursor *);
static uint32_t process_rmdir(uint32_t, struct cursor *);
static uint32_t process_realpath(uint32_t, struct cursor *);
static uint32_t process_stat(uint32_t, struct cursor *);
static uint32_t process_rename(uint32_t, struct cursor *);
static uint32_t process_readlink(uint32_t, struct cursor *);
static uint32_t process_symlink(uint32_t, struct cursor *);
static uint32_t process_ext_posix_rename(uint32_t, struct cursor *);
static uint32_t process_ext_statvfs(uint32_t, struct cursor *);
static uint32_t process_ext_fstatvfs(uint32_t, struct cursor *);
static uint32_t process_ext_hardlink(uint32_t, struct cursor *);
static uint32_t process_ext_fsync(uint32_t, struct cursor *);
static uint32_t process_ext_lsetstat(uint32_t, struct cursor *);
static uint32_t process_ext_limits(uint32_t, struct cursor *);
static uint32_t process_ext_expand_path(uint32_t, struct cursor *);
static uint32_t process_ext_copy_data(uint32_t, struct cursor *);
static uint32_t process_ext_home_directory(uint32_t, struct cursor *);
static uint32_t process_ext_users_groups(uint32_t, struct cursor *);
static uint32_t process_ext_check_file_handle(uint32_t, struct cursor *);
static uint32_t process_ext_check_file_name(uint32_t, struct cursor *);

/* clang-format off */
static const struct request requests[] = {
	{ "open", NULL, NULL, SSH_FXP_OPEN, process_open, 0, OP_OPEN, NULL },
	{ "close", NULL, NULL, SSH_FXP_CLOSE, process_close, 0, OP_CLOSE,
	    NULL },
	{ "read", NULL, NULL, SSH_FXP_READ, process_read, 0, OP_READ, NULL },
	{ "write", NULL, NULL, SSH_FXP_WRITE, process_write, REQ_WRITES,
	    OP_WRITE, NULL },
	{ "lstat", NULL, NULL, SSH_FXP_LSTAT, process_lstat, 0, OP_LSTAT,
	    NULL },
	{ "fstat", NULL, NULL, SSH_FXP_FSTAT, process_fstat, 0, OP_FSTAT,
	    NULL },
	{ "setstat", NULL, NULL, SSH_FXP_SETSTAT,
	    process_setstat, REQ_WRITES, OP_NONE, NULL },
	{ "fsetstat", NULL, NULL, SSH_FXP_FSETSTAT,
	    process_fsetstat, REQ_WRITES, OP_NONE, NULL },
	{ "opendir", NULL, NULL, SSH_FXP_OPENDIR, process_opendir, 0, OP_NONE,
	    NULL },
	{ "readdir", NULL, NULL, SSH_FXP_READDIR, process_readdir, 0,
	    OP_DIRSTAT, NULL },
	{ "remove", NULL, NULL, SSH_FXP_REMOVE,
	    process_remove, REQ_WRITES, OP_NONE, NULL },
	{ "mkdir", NULL, NULL, SSH_FXP_MKDIR, process_mkdir, REQ_WRITES,
	    OP_NONE, NULL },
	{ "rmdir", NULL, NULL, SSH_FXP_RMDIR, process_rmdir, REQ_WRITES,
	    OP_NONE, NULL },
	{ "realpath", NULL, NULL, SSH_FXP_REALPATH, process_realpath, 0,
	    OP_NONE, NULL },
	{ "stat", NULL, NULL, SSH_FXP_STAT, process_stat, 0, OP_STAT, NULL },
	{ "rename", NULL, NULL, SSH_FXP_RENAME,
	    process_rename, REQ_WRITES, OP_NONE, NULL },
	{ "readlink", NULL, NULL, SSH_FXP_READLINK, process_readlink, 0,
	    OP_NONE, NULL },
	{ "symlink", NULL, NULL, SSH_FXP_SYMLINK,
	    process_symlink, REQ_WRITES, OP_NONE, NULL },
	{ "posix-rename", "posix-rename@openssh.com", "1", SSH_FXP_EXTENDED,
	    process_ext_posix_rename, REQ_WRITES, OP_NONE, NULL },
	{ "statvfs", "statvfs@openssh.com", "2", SSH_FXP_EXTENDED,
	    process_ext_statvfs, 0, OP_NONE, NULL },
	{ "fstatvfs", "fstatvfs@openssh.com", "2", SSH_FXP_EXTENDED,
	    process_ext_fstatvfs, 0, OP_NONE, NULL },
	{ "hardlink", "hardlink@openssh.com", "1", SSH_FXP_EXTENDED,
	    process_ext_hardlink, REQ_WRITES, OP_NONE, NULL },
	{ "fsync", "fsync@openssh.com", "1", SSH_FXP_EXTENDED,
	    process_ext_fsync, REQ_WRITES, OP_NONE, NULL },
	{ "lsetstat", "lsetstat@openssh.com", "1", SSH_FXP_EXTENDED,
	    process_ext_lsetstat, REQ_WRITES, OP_NONE, NULL },
	{ "limits", "limits@openssh.com", "1", SSH_FXP_EXTENDED,
	    process_ext_limits, 0, OP_NONE, NULL },
	{ "expand-path", "expand-path@openssh.com", "1", SSH_FXP_EXTENDED,
	    process_ext_expand_path, 0, OP_NONE, NULL },
	{ "copy-data", "copy-data", "1", SSH_FXP_EXTENDED,
	    process_ext_copy_data, REQ_WRITES, OP_NONE, NULL },
	{ "home-directory", "home-directory", "1", SSH_FXP_EXTENDED,
	    process_ext_home_directory, 0, OP_NONE, NULL },
	{ "users-groups-by-id", "users-groups-by-id@openssh.com", "1",
	    SSH_FXP_EXTENDED, process_ext_users_groups, 0, OP_NONE, NULL },
	{ "check-file", "check-file-handle", CHECK_FILE_ALGOS, SSH_FXP_EXTENDED,
	    process_ext_check_file_handle, 0, OP_NONE, "read" },
	{ "check-file", "check-file-name", CHECK_FILE_ALGOS, SSH_FXP_EXTENDED,
	    process_ext_check_file_name, 0, OP_NONE, "open,read" },
	{ "check-file", "check-file", CHECK_FILE_ALGOS, SSH_FXP_EXTENDED,
	    process_ext_check_file_handle, 0, OP_NONE, "read" },
};
/* clang-format on */
#define NREQUESTS	(sizeof requests / sizeof requests[0])

_Static_assert(REQUESTS_MAX_OPS == JOBS_MAX_WORKERS,
    "-T's limit is the workers' limit");

static void string_from_portable(uint32_t, char *, size_t);

/* Requests by packet type, filled from the table at start. */
static const struct request *by_type[256];

/*
 * The only place errno becomes a status, as OpenSSH's errno_to_portable().
 */
static uint32_t
errno_to_status(int e)
{
	switch (e) {
	case 0:
		return SSH_FX_OK;
	case ENOENT:
	case ENOTDIR:
	case EBADF:
	case ELOOP:
		return SSH_FX_NO_SUCH_FILE;
	case EPERM:
	case EACCES:
	case EFAULT:
		return SSH_FX_PERMISSION_DENIED;
	case ENAMETOOLONG:
	case EINVAL:
		return SSH_FX_BAD_MESSAGE;
	case ENOSYS:
		return SSH_FX_OP_UNSUPPORTED;
	default:
		return SSH_FX_FAILURE;
	}
}

/* The status of a call that returned r, errno set when it is -1. */
static uint32_t
status_of(int r)
{
	return r == -1 ? errno_to_status(errno) : SSH_FX_OK;
}

/*
 * A reply that does not fit the queue is a bug, whatever the client does:
 * replies start only while oq_pending() is below OQ_HIWAT (the loop takes
 * requests, and requests_reap() answers jobs, only then; requests_abandon()
 * mutes the queue first), where a whole message always fits, a partial
 * write in the queue or not (pkt_begin()); and every reply that could
 * outgrow a message is bounded before it is built.
 */
static void
queued(int r)
{
	if (r != 0)
		abort();
}

/*
 * The reply helpers: each queues one whole reply and returns REPLIED, for
 * the handler to return in turn.
 */
static uint32_t
reply_status(uint32_t id, uint32_t code, const char *msg)
{
	debug3("request %u: sent status %u", id, code);
	if (log_level > LOG_LEVEL_VERBOSE ||
	    (code != SSH_FX_OK && code != SSH_FX_EOF))
		logit("sent status %s", pkt_status_message(code));
	queued(pkt_reply_status(oq, id, code, msg));
	return REPLIED;
}

static uint32_t
reply_handle(uint32_t id, struct handle *h)
{
	/* Sic: OpenSSH 9.2 says "handle" twice. */
	debug("request %u: sent handle handle %u", id, h->index);
	queued(pkt_reply_handle(oq, id, h->index, h->gen));
	return REPLIED;
}

static uint32_t
reply_name1(uint32_t id, const char *path)
{
	debug("request %u: sent names count 1", id);
	queued(pkt_reply_name1(oq, id, path));
	return REPLIED;
}

static uint32_t
reply_attrs(uint32_t id, const struct sftp_attrs *a)
{
	debug("request %u: sent attrib have 0x%x", id, a->flags);
	queued(pkt_reply_attrs(oq, id, a));
	return REPLIED;
}

/* Ends a reply built field by field (pkt_begin()). */
static uint32_t
reply_end(struct reply *r)
{
	pkt_end(oq, r);
	return REPLIED;
}

static struct handle *
get_handle(struct cursor *c, enum handle_kind kind, int *rp)
{
	uint32_t index, gen;

	struct handle *h;

	if ((*rp = pkt_get_handle(c, &index, &gen)) != 0)
		return NULL;
	h = handle_lookup(&handles, index, gen, kind);
	/* Being opened or closed: unknown, as a closed one. */
	return h != NULL && h->kind == HANDLE_PENDING ? NULL : h;
}

static const char *
handle_name(const struct handle *h)
{
	return h != NULL ? h->path : "(null)";
}

static int
handle_index(const struct handle *h)
{
	return h != NULL ? (int)h->index : -1;
}

static void
log_close(struct handle *h, const char *emsg)
{
	struct timespec now;
	double secs, mib;

	if (h->kind == HANDLE_FILE) {
		logit("%s%sclose \"%s\" bytes read %llu written %llu",
		    emsg == NULL ? "" : emsg, emsg == NULL ? "" : " ", h->path,
		    (unsigned long long)h->bytes_read,
		    (unsigned long long)h->bytes_written);
		if (log_level >= LOG_LEVEL_VERBOSE &&
		    clock_gettime(CLOCK_MONOTONIC, &now) == 0) {
			secs = (double)(now.tv_sec - h->opened.tv_sec) +
			    (double)(now.tv_nsec - h->opened.tv_nsec) / 1e9;
			mib = (double)(h->bytes_read + h->bytes_written) /
			    (1024.0 * 1024.0);
			verbose("transfer \"%s\" %.3f s %.1f MiB/s", h->path,
			    secs, secs > 0 ? mib / secs : 0.0);
		}
	} else {
		logit("%s%sclosedir \"%s\"", emsg == NULL ? "" : emsg,
		    emsg == NULL ? "" : " ", h->path);
	}
}

/* A file's transfer, closed with result r (errno e), in the transfer log. */
static void
xfer_close(const struct handle *h, int r, int e, int forced)
{
	struct xfer_event ev = XFER_EVENT("close");
	char fl[64];

	if (!xferlog_enabled())
		return;
	string_from_portable(h->pflags, fl, sizeof fl);
	ev.path = h->path;
	ev.flags = fl;
	ev.bytes_read = h->bytes_read;
	ev.bytes_written = h->bytes_written;
	if (h->first_off != UINT64_MAX) {
		ev.first_offset = h->first_off;
		ev.last_offset = h->last_off;
	}
	ev.opened = &h->opened;
	ev.forced = forced;
	ev.not_closed = h->abandoned;
	if (h->up != NULL)
		ev.placed = h->up->placed ? 1 : -1;
	ev.mode_forced = h->mode_forced;
	if (h->io_errno != 0)
		ev.result = strerror(h->io_errno);
	else if (h->abandoned)
		ev.result = "not closed: the storage did not answer";
	else
		ev.result = r == -1 ? strerror(e) : "ok";
	xferlog_write(&ev);
}

#ifdef SFTP_FUZZ
/*
 * The uploads of handles given up, which a worker may still be in: the
 * harness goes on in this process, so requests_free() frees them once
 * every job has ended.  Kept in a list of its own, since the handle's slot
 * is freed now.
 */
static struct fs_upload **given_up_uploads;
static size_t n_given_up_uploads;

static void
free_later(struct fs_upload *up)
{
	struct fs_upload **a;

	a = realloc(given_up_uploads,
	    (n_given_up_uploads + 1) * sizeof *given_up_uploads);
	if (a == NULL)
		abort();	/* the harness's own memory */
	given_up_uploads = a;
	given_up_uploads[n_given_up_uploads++] = up;
}
#endif

/*
 * What the handle held was closed with result r (errno e): logs a file's
 * transfer and frees its slot.  Returns r, errno e.
 */
static int
closed(struct handle *h, int r, int e, int forced)
{
	if (h->kind == HANDLE_FILE)
		xfer_close(h, r, e, forced);
	/* A worker given up may still be in it: the exit frees it. */
	if (h->up != NULL && !h->abandoned)
		free(h->up);
#ifdef SFTP_FUZZ
	else if (h->up != NULL)
		free_later(h->up);
#endif
	h->up = NULL;
	handle_release(&handles, h);
	errno = e;
	return r;
}

/*
 * Closes a file's descriptor.  An atomic upload (-A) is put in place first,
 * unless the session is ending (forced): then it is discarded.
 */
static int
close_file(struct handle *h, int forced)
{
	int r = 0, e = 0;

	if (h->up != NULL && !forced) {
		r = fs_upload_commit(h->fd, h->up);
		e = errno;
	} else if (h->up != NULL) {
		fs_upload_discard(h->up);
	}
	if (close(h->fd) == -1 && r == 0)
		return -1;
	errno = e;
	return r;
}

/*
 * Closes what the handle holds, logs a file's transfer and frees its slot.
 * Returns 0, or -1 with errno.  Once the storage was given up, or a call
 * on this handle was, nothing is closed: that is logged, and the exit
 * closes the descriptor.
 */
static int
close_handle(struct handle *h, int forced)
{
	int r;

	if (h->abandoned || given_up) {
		h->abandoned = 1;
		logit("%s \"%s\" not closed: the storage did not answer",
		    h->kind == HANDLE_FILE ? "file" : "directory", h->path);
		r = -1;
		errno = EINTR;
#ifdef SFTP_FUZZ
		/* The harness goes on in this process, which no exit frees. */
		if (h->kind == HANDLE_DIR)
			(void)closedir(h->dir);
#endif
	} else if (h->kind == HANDLE_FILE) {
		r = close_file(h, forced);
	} else {
		r = closedir(h->dir);
	}
	return closed(h, r, errno, forced);
}

/* n bytes read or written at off: the range the transfer log reports. */
static void
track(struct handle *h, uint64_t off, uint64_t n)
{
	if (n == 0)
		return;
	if (off < h->first_off)
		h->first_off = off;
	if (off + n > h->last_off)
		h->last_off = off + n;
}

/* The scheduler's answers, as the handlers ask them. */
#define concurrent()	sched_concurrent()
#define slow()		sched_slow()
#define deferring()	sched_deferring()

/* The replies of jobs (struct task's answer), below their handlers. */
static uint32_t	open_answer(struct task *);
static uint32_t	upload_answer(struct task *);
static uint32_t	close_answer(struct task *);
static uint32_t	read_answer(struct task *);
static uint32_t	write_answer(struct task *);
static uint32_t	stat_answer(struct task *);
static uint32_t	readdir_answer(struct task *);

/* Starts a job that is filled in (sched_start()): its reply will follow. */
static uint32_t
start_job(struct task *j, int wait)
{
	sched_start(j, wait);
	return DEFERRED;
}

/* The request being dispatched: its permission is logged once admitted. */
static const struct request *admitting;

/*
 * Whether the request a handler parsed may go on: asked before it logs or
 * acts.  With nothing in flight, yes.  While requests are in flight, only
 * a request that will be a job (r, valid: NULL for one that would answer
 * at once, an error, or would run here) and that the rule lets start
 * beside them (sched_admit()); else the handler returns WAIT.  The same
 * while the arena keeps bytes that queued replies point at, though nothing
 * is in flight: they may leave no room for the request's job until the
 * queue is written out (serve() then tries it again).
 */
static int
admit(const struct sched_req *r)
{
	if ((deferring() || jobs_kept()) && (r == NULL || !sched_admit(r)))
		return 0;
	if (admitting != NULL && ss->allow_list != NULL)
		debug2("Permitting allowlisted %s request", admitting->name);
	admitting = NULL;
	return 1;
}

/* A change to the file system, with the status it got, in the log. */
static uint32_t
logged(struct xfer_event *ev, uint32_t status)
{
	ev->result = status == SSH_FX_OK ? "ok" : pkt_status_message(status);
	xferlog_write(ev);
	return status;
}

/* The same for a path, and another path or none. */
static uint32_t
logged_paths(const char *event, const char *path, const char *target,
    uint32_t status)
{
	struct xfer_event ev = XFER_EVENT(event);

	ev.path = path;
	ev.target = target;
	return logged(&ev, status);
}

/* Entries OpenSSH's match_list() reads from a list, as its MAX_PROP. */
#define LIST_MAX	40

/*
 * -P and -p: exact, comma-separated names.  OpenSSH's match_list() stops at
 * the first empty entry and after LIST_MAX entries.  Where the two readings
 * differ, this one refuses: an allow list (strict) ends where OpenSSH's
 * does, a deny list names every entry it holds.
 */
static int
in_list(const char *name, const char *list, int strict)
{
	size_t n = strlen(name);
	const char *p = list, *comma;
	size_t len;

	for (int i = 0; !strict || i < LIST_MAX; i++) {
		comma = strchr(p, ',');
		len = comma != NULL ? (size_t)(comma - p) : strlen(p);
		if (len == 0 && strict)
			break;
		if (len == n && strncmp(p, name, n) == 0)
			return 1;
		if (comma == NULL)
			break;
		p = comma + 1;
	}
	return 0;
}

/* Warns at start of a list that OpenSSH and this server could read apart. */
void
requests_check_list(const char *opt, const char *list)
{
	const char *p = list;
	int n = 1;

	for (; *p != '\0'; p++)
		n += *p == ',';
	if (list[0] == '\0' || list[0] == ',' || strstr(list, ",,") != NULL ||
	    p[-1] == ',')
		error("%s \"%s\": an empty entry; an allow list ends there, "
		    "a deny list goes on", opt, list);
	if (n > LIST_MAX)
		error("%s \"%s\": more than %d entries; an allow list ends "
		    "there, a deny list goes on", opt, list, LIST_MAX);
}

/* Why -R, -P or -p refuse a request. */
enum refusal {
	PERMITTED = 0,
	READ_ONLY,	/* -R */
	DENIED,		/* -P */
	NOT_ALLOWED,	/* -p */
};

static enum refusal
refusal(const char *name, int flags)
{
	if (ss->readonly && (flags & REQ_WRITES))
		return READ_ONLY;
	if (ss->deny_list != NULL && in_list(name, ss->deny_list, 0))
		return DENIED;
	if (ss->allow_list != NULL && !in_list(name, ss->allow_list, 1))
		return NOT_ALLOWED;
	return PERMITTED;
}

/* The first row of the table with this request name. */
static const struct request *
request_by_name(const char *name, size_t len)
{
	for (size_t i = 0; i < NREQUESTS; i++)
		if (strlen(requests[i].name) == len &&
		    strncmp(requests[i].name, name, len) == 0)
			return &requests[i];
	abort();	/* a name in "also" that the table lacks */
}

/*
 * Whether a request may run; logs the refusal as OpenSSH does.  A request
 * that does the work of others (rq->also) is refused where they are.
 */
static int
request_permitted(const struct request *rq)
{
	const struct request *other;
	const char *p;
	size_t n;

	switch (refusal(rq->name, rq->flags)) {
	case READ_ONLY:
		verbose("Refusing %s request in read-only mode", rq->name);
		return 0;
	case DENIED:
		verbose("Refusing denylisted %s request", rq->name);
		return 0;
	case NOT_ALLOWED:
		verbose("Refusing non-allowlisted %s request", rq->name);
		return 0;
	case PERMITTED:
		break;
	}
	for (p = rq->also; p != NULL && *p != '\0'; p += n + (p[n] == ',')) {
		n = strcspn(p, ",");
		other = request_by_name(p, n);
		if (refusal(other->name, other->flags) != PERMITTED) {
			verbose("Refusing %s request: it reads as %s does, and "
			    "%s requests are refused", rq->name, other->name,
			    other->name);
			return 0;
		}
	}
	if (ss->allow_list != NULL)
		debug2("Permitting allowlisted %s request", rq->name);
	return 1;
}

/* Whether two rows are permitted alike: the same name, the same "also". */
static int
same_rule(const struct request *a, const struct request *b)
{
	if (strcmp(a->name, b->name) != 0 || a->flags != b->flags)
		return 0;
	if (a->also == NULL || b->also == NULL)
		return a->also == b->also;
	return strcmp(a->also, b->also) == 0;
}

/* uint32 version.  Returns 0, or SESSION_FATAL for a malformed INIT. */
static int
process_init(struct cursor *c)
{
	struct reply r;
	uint32_t version;
	int permitted = 1;

	if (pkt_get_u32(c, &version) != 0) {
		error(OPENSSH_FN("process_init") "bad message");
		return SESSION_FATAL;
	}
	verbose("received client version %u", version);
	queued(pkt_begin(oq, &r, SSH_FXP_VERSION));
	queued(pkt_put_u32(oq, SFTP_VERSION));
	/* An extension refused by -R, -P or -p is not advertised. */
	for (size_t i = 0; i < NREQUESTS; i++) {
		if (requests[i].ext_name == NULL)
			continue;
		/* Rows alike (check-file's) are asked (and logged) once. */
		if (i == 0 || !same_rule(&requests[i], &requests[i - 1]))
			permitted = request_permitted(&requests[i]);
		if (!permitted) {
			debug2(OPENSSH_FN("compose_extension")
			    "refusing to advertise disallowed extension %s",
			    requests[i].ext_name);
			continue;
		}
		queued(pkt_put_cstring(oq, requests[i].ext_name));
		queued(pkt_put_cstring(oq, requests[i].ext_version));
	}
	pkt_end(oq, &r);
	return 0;
}

static int
flags_from_portable(uint32_t pflags)
{
	int flags = O_RDONLY;

	if ((pflags & SSH_FXF_READ) && (pflags & SSH_FXF_WRITE))
		flags = O_RDWR;
	else if (pflags & SSH_FXF_WRITE)
		flags = O_WRONLY;
	if (pflags & SSH_FXF_APPEND)
		flags |= O_APPEND;
	if (pflags & SSH_FXF_CREAT)
		flags |= O_CREAT;
	if (pflags & SSH_FXF_TRUNC)
		flags |= O_TRUNC;
	if (pflags & SSH_FXF_EXCL)
		flags |= O_EXCL;
	return flags;
}

static void
string_from_portable(uint32_t pflags, char *buf, size_t size)
{
	static const struct {
		uint32_t flag;
		const char *word;
	} words[] = {
		{ SSH_FXF_READ, "READ" },
		{ SSH_FXF_WRITE, "WRITE" },
		{ SSH_FXF_APPEND, "APPEND" },
		{ SSH_FXF_CREAT, "CREATE" },
		{ SSH_FXF_TRUNC, "TRUNCATE" },
		{ SSH_FXF_EXCL, "EXCL" },
	};
	size_t o = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
		if (!(pflags & words[i].flag))
			continue;
		o += (size_t)snprintf(buf + o, size - o, "%s%s",
		    o > 0 ? "," : "", words[i].word);
	}
}

/*
 * The mode a file (dir: a directory) that the client asks to make with
 * mode is made with: -m's or -M's, else mode less the umask, which the
 * process applies itself unless either option set it to 0.
 */
static mode_t
create_mode(mode_t mode, int dir)
{
	int forced = dir ? ss->dir_mode : ss->file_mode;

	if (forced != -1)
		return (mode_t)forced;
	if (ss->file_mode != -1 || ss->dir_mode != -1)
		return mode & ~ss->mask;
	return mode;
}

/*
 * Whether an OPEN learns if it made its file (an extra open(2) when the
 * file is there): only the transfer log says so ("mode_forced").
 */
static int
forced_made(void)
{
	return ss->file_mode != -1 && xferlog_enabled();
}

/*
 * An atomic upload's state goes with its handle, to be put in place by
 * CLOSE.  Returns 0, or -1 when there is no memory for it.
 */
static int
keep_upload(struct handle *h, const struct fs_upload *u)
{
	if (!u->atomic)
		return 0;
	if ((h->up = malloc(sizeof *h->up)) == NULL)
		return -1;
	h->mode_forced = ss->file_mode != -1 && !u->replaced;
	*h->up = *u;
	debug("upload \"%s\": %s%s", h->path, u->unnamed ?
	    "an unnamed file in its directory" : "hidden as ",
	    u->unnamed ? "" : u->tmp);
	return 0;
}

/* Whether OPEN may be a job: fs_open() may run in a worker. */
static int
open_job_ok(void)
{
	return concurrent() && !fs_guarded();
}

/*
 * OPEN as a job (op OP_OPEN, or OP_UPLOAD for an upload under -A), path1
 * its path: the handle is taken now, pending, and filled in when the job
 * is answered.  With no slot free, the file is opened (and closed again)
 * all the same, as when run here.
 */
static uint32_t
open_job(enum job_op op, uint32_t id, uint32_t pflags, int flags,
    mode_t mode)
{
	struct handle *h;
	struct task *j;
	size_t len = strlen(path1) + 1;
	size_t at = op == OP_UPLOAD ? sizeof(struct fs_upload) : 0;

	h = handle_new(&handles, HANDLE_FILE, path1);
	j = sched_job(op, op == OP_UPLOAD ? upload_answer : open_answer, id,
	    h, at + len);
	memcpy(j->job.buf + at, path1, len);
	j->flags = flags | O_NONBLOCK | O_NOCTTY;
	j->mode = mode;
	j->made = op == OP_OPEN && forced_made();
	if (h != NULL) {
		h->kind = HANDLE_PENDING;
		h->flags = flags;
		h->pflags = pflags;
		(void)clock_gettime(CLOCK_MONOTONIC, &h->opened);
	}
	return start_job(j, 0);
}

/*
 * uint32 id, string filename, uint32 pflags, ATTRS attrs
 *
 * Opened with O_NONBLOCK, kept: a FIFO or a device never blocks the
 * session, in open(2) or after (a FIFO without a reader fails with ENXIO;
 * its READs fail, as OpenSSH's, since a FIFO has no offsets).  For regular
 * files and directories Linux ignores the flag.
 */
static uint32_t
process_open(uint32_t id, struct cursor *c)
{
	struct sched_req rq = { 0 };
	struct sftp_attrs a;
	struct fs_upload u;
	struct handle *h;
	struct timing t;
	uint32_t pflags, status = SSH_FX_FAILURE;
	char fl[64];
	int r, flags, fd, refused, upload, made = 0;
	mode_t mode, cmode;

	if ((r = pkt_get_path(c, path1, sizeof path1)) != 0 ||
	    (r = pkt_get_u32(c, &pflags)) != 0 ||
	    (r = pkt_get_attrs(c, &a)) != 0)
		return PARSE_ERROR;
	flags = flags_from_portable(pflags);
	mode = (a.flags & SSH_FILEXFER_ATTR_PERMISSIONS) ? a.perm : 0666;
	refused = ss->readonly && ((flags & O_ACCMODE) != O_RDONLY ||
	    (flags & (O_CREAT | O_TRUNC)) != 0);
	upload = ss->atomic && (flags & O_ACCMODE) != O_RDONLY &&
	    (flags & (O_CREAT | O_TRUNC)) != 0;
	cmode = create_mode(mode, 0);
	rq.op = upload ? OP_UPLOAD : OP_OPEN;
	rq.flags = flags | O_NONBLOCK | O_NOCTTY;
	rq.mode = cmode;
	rq.size = (upload ? sizeof u : 0) + strlen(path1) + 1;
	/* Out of slots: a CLOSE in flight would have freed one. */
	if (!admit(open_job_ok() && !refused &&
	    handles.used < handles.nslots ? &rq : NULL))
		return WAIT;
	debug3("request %u: open flags %d", id, (int)pflags);
	if (log_level >= LOG_LEVEL_INFO) {
		string_from_portable(pflags, fl, sizeof fl);
		logit("open \"%s\" flags %s mode 0%o", path1, fl,
		    (unsigned)mode);
	}
	if (refused) {
		verbose("Refusing open request in read-only mode");
		return SSH_FX_PERMISSION_DENIED;
	}
	if (open_job_ok() && (deferring() || slow()))
		return open_job(rq.op, id, pflags, flags, cmode);
	if (concurrent())
		sched_timing_start(&t, 0);
	if (upload)
		fd = fs_upload_open(path1, rq.flags, cmode, &u);
	else if (forced_made())
		fd = fs_open_made(path1, rq.flags, cmode, &made);
	else
		fd = fs_open(path1, rq.flags, cmode);
	if (concurrent())
		sched_note_latency(sched_timing_waited(&t));
	if (fd == -1) {
		status = errno_to_status(errno);
	} else if ((h = handle_new(&handles, HANDLE_FILE, path1)) == NULL ||
	    (upload && keep_upload(h, &u) == -1)) {
		if (upload && u.atomic)
			fs_upload_discard(&u);
		if (h != NULL)
			handle_release(&handles, h);
		(void)close(fd);	/* out of handles or memory: FAILURE */
	} else {
		h->fd = fd;
		h->flags = flags;
		h->pflags = pflags;
		if (!upload)
			h->mode_forced = made;
		(void)clock_gettime(CLOCK_MONOTONIC, &h->opened);
		return reply_handle(id, h);
	}
	return status;
}

/* An upload's OPEN job is done (-A): as OPEN's, its upload kept. */
static uint32_t
upload_answer(struct task *j)
{
	struct fs_upload *u = (struct fs_upload *)(void *)j->job.buf;
	struct handle *h = j->owner;

	if (j->n != -1 && h != NULL && keep_upload(h, u) == -1) {
		handle_release(&handles, h);
		j->owner = h = NULL;
	}
	if (j->n != -1 && h == NULL && u->atomic)
		fs_upload_discard(u);
	return open_answer(j);
}

/* An OPEN's job is done: its handle, or the status of its failure. */
static uint32_t
open_answer(struct task *j)
{
	struct handle *h = j->owner;

	if (j->n == -1) {
		if (h != NULL)
			handle_release(&handles, h);
		return errno_to_status(j->err);
	}
	if (h == NULL) {
		(void)close((int)j->n);	/* out of handles: FAILURE */
		return SSH_FX_FAILURE;
	}
	h->kind = HANDLE_FILE;
	h->fd = (int)j->n;
	if (j->op == OP_OPEN)
		h->mode_forced = j->made;
	if (j->st.st_nlink > 0 && S_ISREG(j->st.st_mode)) {
		h->known = 1;
		h->dev = j->st.st_dev;
		h->ino = j->st.st_ino;
	}
	return reply_handle(j->id, h);
}

/* uint32 id, string handle */
static uint32_t
process_close(uint32_t id, struct cursor *c)
{
	struct sched_req rq = { 0 };
	struct handle *h;
	struct task *j;
	int r, job;

	h = get_handle(c, HANDLE_FREE, &r);
	if (r != 0)
		return PARSE_ERROR;
	/* Putting an upload in place goes through the log's guard. */
	job = h != NULL && h->kind == HANDLE_FILE && concurrent() &&
	    (h->up == NULL || !fs_guarded());
	rq.op = h != NULL && h->up != NULL ? OP_COMMIT : OP_CLOSE;
	rq.h = h;
	if (!admit(job ? &rq : NULL))
		return WAIT;
	/*
	 * -b: the last READ or WRITE went as soon as the bytes before it
	 * were due; the transfer ends when its own bytes are due too.
	 */
	if (h != NULL && ((h->bytes_read > 0 && sched_paced(PACE_DOWN, 0)) ||
	    (h->bytes_written > 0 && sched_paced(PACE_UP, 0))))
		return WAIT;
	debug3("request %u: close handle %d", id, handle_index(h));
	if (h == NULL) {
		/* As OpenSSH: an unknown handle is "no such file". */
		return SSH_FX_NO_SUCH_FILE;
	}
	if (job && (deferring() || slow())) {
		/* Unknown to later requests from now on. */
		h->kind = HANDLE_PENDING;
		j = sched_job(rq.op, close_answer, id, h, 0);
		j->shared = h->up;
		return start_job(j, 0);
	}
	log_close(h, NULL);
	return status_of(close_handle(h, 0));
}

/* A CLOSE's job is done: the log lines, and the slot given back. */
static uint32_t
close_answer(struct task *j)
{
	struct handle *h = j->owner;

	h->kind = HANDLE_FILE;
	log_close(h, NULL);
	return status_of(closed(h, (int)j->n, j->err, 0));
}

/*
 * OpenSSH seeks before every read and write, so an offset the file system
 * cannot hold fails there, with EINVAL: BAD_MESSAGE.  We seek only for
 * offsets past 2^40, so that the common case costs no system call.  Returns
 * 1 with errno set for a bad offset.
 */
#define BIG_OFFSET	((uint64_t)1 << 40)
static int
bad_offset(struct handle *h, uint64_t off)
{
	if (off > (uint64_t)INT64_MAX) {
		errno = EINVAL;
		return 1;
	}
	if (off >= BIG_OFFSET && lseek(h->fd, (off_t)off, SEEK_SET) == -1)
		return 1;
	return 0;
}

/*
 * What READ answers for n bytes read at off (-1: errno e), whose DATA
 * reply rep holds them already.
 */
static uint32_t
read_result(struct handle *h, uint32_t id, uint64_t off, uint32_t len,
    ssize_t n, int e, struct reply *rep)
{
	sched_pace_refund(PACE_DOWN, n > 0 ? len - (uint64_t)n : len);
	if (n == -1) {
		pkt_cancel(oq, rep);
		error(OPENSSH_FN("process_read") "read \"%.100s\": %s", h->path,
		    strerror(e));
		if (h->io_errno == 0)
			h->io_errno = e;
		return errno_to_status(e);
	}
	if (n == 0 && len > 0) {
		pkt_cancel(oq, rep);
		return SSH_FX_EOF;
	}
	pkt_data_end(oq, rep, (size_t)n);
	debug("request %u: sent data len %d", id, (int)n);
	h->bytes_read += (uint64_t)n;
	track(h, off, (uint64_t)n);
	return REPLIED;
}

/* READ as a job: from the page cache here, or in a worker. */
static uint32_t
read_job(struct handle *h, uint32_t id, uint64_t off, uint32_t len)
{
	struct task *j;

	j = sched_job(OP_READ, read_answer, id, h, len);
	j->off = (off_t)off;
	j->len = len;
	sched_read_start(j, h);
	return DEFERRED;
}

/* uint32 id, string handle, uint64 offset, uint32 len */
static uint32_t
process_read(uint32_t id, struct cursor *c)
{
	struct sched_req rq = { 0 };
	struct handle *h;
	struct reply rep;
	uint64_t off;
	uint32_t len;
	uint8_t *buf;
	ssize_t n;
	int r;

	h = get_handle(c, HANDLE_FILE, &r);
	if (r != 0 || (r = pkt_get_u64(c, &off)) != 0 ||
	    (r = pkt_get_u32(c, &len)) != 0)
		return PARSE_ERROR;
	rq.op = OP_READ;
	rq.h = h;
	rq.off = off;
	rq.len = rq.size = len > SFTP_MAX_READ ? SFTP_MAX_READ : len;
	/* bad_offset() may seek past BIG_OFFSET: alone. */
	if (!admit(h != NULL && off < BIG_OFFSET ? &rq : NULL))
		return WAIT;
	/*
	 * -b: counted now, what did not cross given back in read_result().
	 * A READ of no bytes has none to wait for.
	 */
	if (h != NULL && rq.len > 0 && sched_paced(PACE_DOWN, rq.len))
		return WAIT;
	debug("request %u: read \"%s\" (handle %d) off %llu len %u", id,
	    handle_name(h), handle_index(h), (unsigned long long)off, len);
	if (h == NULL)
		return SSH_FX_FAILURE;
	if (len > SFTP_MAX_READ) {
		debug2("read change len %u to %u", len, SFTP_MAX_READ);
		len = SFTP_MAX_READ;
	}
	if (bad_offset(h, off)) {
		sched_pace_refund(PACE_DOWN, len);
		return errno_to_status(errno);
	}
	if (deferring() || h->read_waits || (slow() && h->no_nowait))
		return read_job(h, id, off, len);
	if ((buf = pkt_data_begin(oq, &rep, id, len)) == NULL) {
		queued(PKT_ENOSPACE);
		return REPLIED;
	}
	n = len == 0 ? 0 : sched_read_here(h, buf, len, (off_t)off);
	if (n == -2) {
		/* Not in the page cache: a worker reads it. */
		pkt_cancel(oq, &rep);
		return read_job(h, id, off, len);
	}
	return read_result(h, id, off, len, n, errno, &rep);
}

/* A READ's job is done: its DATA, from the job's buffer. */
static uint32_t
read_answer(struct task *j)
{
	struct handle *h = j->owner;
	struct reply rep;
	uint8_t *buf;
	size_t n = j->n > 0 ? (size_t)j->n : 0;

	sched_read_done(j, h);
	/*
	 * The data is written out from the job's bytes, which stay taken
	 * until then (requests_written()); a short one is copied.
	 */
	if (pkt_data_ref(oq, &rep, j->id, j->job.buf, n) == 0) {
		j->job.keep = 1;
	} else if ((buf = pkt_data_begin(oq, &rep, j->id, n)) == NULL) {
		queued(PKT_ENOSPACE);
		return REPLIED;
	} else if (n > 0) {
		memcpy(buf, j->job.buf, n);
	}
	return read_result(h, j->id, (uint64_t)j->off, (uint32_t)j->len, j->n,
	    j->err, &rep);
}

/*
 * Writes all of buf at off or, for an O_APPEND handle, at the end (as
 * OpenSSH, the offset is then ignored).  Returns 0, or -1 with errno: the
 * bytes before the failure may be on disk, and are counted, but are never
 * acknowledged.
 */
static int
write_full(struct handle *h, const uint8_t *buf, size_t len, off_t off)
{
	return fileio_write_full(h->fd, buf, len,
	    (h->flags & O_APPEND) ? FILEIO_APPEND : off, &h->bytes_written);
}

/*
 * A write into h's file failed with e: an atomic upload (-A) is partial,
 * and its CLOSE discards it.
 */
static void
upload_broken(struct handle *h, int e)
{
	if (h->up != NULL && h->up->broken == 0)
		h->up->broken = e;
}

/* What WRITE answers after r (-1: errno e), in the log too. */
static uint32_t
write_result(struct handle *h, uint64_t off, uint32_t len, int r, int e)
{
	if (r == -1) {
		error(OPENSSH_FN("process_write") "write \"%.100s\": %s",
		    h->path, strerror(e));
		if (h->io_errno == 0)
			h->io_errno = e;
		upload_broken(h, e);
		return errno_to_status(e);
	}
	if (!(h->flags & O_APPEND))
		track(h, off, len);
	return SSH_FX_OK;
}

/* uint32 id, string handle, uint64 offset, string data */
static uint32_t
process_write(uint32_t id, struct cursor *c)
{
	struct sched_req rq = { 0 };
	const uint8_t *data;
	struct handle *h;
	struct task *j;
	uint32_t len;
	uint64_t off;
	struct timing t;
	int r, e;

	h = get_handle(c, HANDLE_FILE, &r);
	if (r != 0 || (r = pkt_get_u64(c, &off)) != 0 ||
	    (r = pkt_get_string(c, &data, &len)) != 0)
		return PARSE_ERROR;
	rq.op = OP_WRITE;
	rq.h = h;
	rq.off = off;
	rq.len = len;
	if (!admit(h != NULL && off < BIG_OFFSET ? &rq : NULL))
		return WAIT;
	/* -b: the bytes came; the next WRITEs wait for them (none: no wait). */
	if (h != NULL && len > 0 && sched_paced(PACE_UP, len))
		return WAIT;
	debug("request %u: write \"%s\" (handle %d) off %llu len %u", id,
	    handle_name(h), handle_index(h), (unsigned long long)off, len);
	if (h == NULL)
		return SSH_FX_FAILURE;
	if (off > (uint64_t)INT64_MAX - len)
		return SSH_FX_BAD_MESSAGE;
	if (!(h->flags & O_APPEND) && bad_offset(h, off))
		return errno_to_status(errno);
	if (deferring() || slow()) {
		/* The data stays where it lies until the job is answered. */
		j = sched_job(OP_WRITE, write_answer, id, h, 0);
		j->data = data;
		j->len = len;
		j->off = (h->flags & O_APPEND) ? FILEIO_APPEND : (off_t)off;
		sched_write_space(j, h, len);
		j->pin = ibuf_pin(ss->in, data);
		if (len >= BUF_BULK)
			ibuf_bulk(ss->in);
		return start_job(j, 0);
	}
	if (concurrent())
		sched_timing_start(&t, 0);
	r = write_full(h, data, len, (off_t)off);
	e = errno;	/* before anything else can change it */
	if (concurrent())
		sched_note_latency(sched_timing_waited(&t));
	return write_result(h, off, len, r, e);
}

_Static_assert(JOBS_RING <= IBUF_PINS,
    "each WRITE in the ring of jobs can pin its data");

/* A WRITE's job is done: its data is let go, its bytes counted. */
static uint32_t
write_answer(struct task *j)
{
	struct handle *h = j->owner;

	ibuf_unpin(ss->in, j->pin);
	h->bytes_written += j->written;
	return write_result(h, j->off == FILEIO_APPEND ? 0 : (uint64_t)j->off,
	    (uint32_t)j->len, (int)j->n, j->err);
}

/* What STAT, LSTAT and FSTAT answer after r (-1: errno e). */
static uint32_t
stat_result(uint32_t id, int r, int e, const struct stat *st)
{
	struct sftp_attrs a;

	if (r == -1)
		return errno_to_status(e);
	attrs_from_stat(st, &a);
	return reply_attrs(id, &a);
}

/* A stat's job is done: its ATTRS. */
static uint32_t
stat_answer(struct task *j)
{
	return stat_result(j->id, (int)j->n, j->err, &j->st);
}

static uint32_t
do_stat(uint32_t id, struct cursor *c, int follow)
{
	struct sched_req rq = { 0 };
	struct stat st;
	struct task *j;
	struct timing t;
	int r;

	if ((r = pkt_get_path(c, path1, sizeof path1)) != 0)
		return PARSE_ERROR;
	rq.op = follow ? OP_STAT : OP_LSTAT;
	rq.size = strlen(path1) + 1;
	if (!admit(&rq))
		return WAIT;
	debug3("request %u: %sstat", id, follow ? "" : "l");
	verbose("%sstat name \"%s\"", follow ? "" : "l", path1);
	if (deferring() || slow()) {
		j = sched_job(follow ? OP_STAT : OP_LSTAT, stat_answer, id,
		    NULL, strlen(path1) + 1);
		memcpy(j->job.buf, path1, strlen(path1) + 1);
		return start_job(j, 0);
	}
	if (concurrent())
		sched_timing_start(&t, 0);
	r = fs_stat(path1, &st, follow);
	if (concurrent())
		sched_note_latency(sched_timing_waited(&t));
	return stat_result(id, r, errno, &st);
}

/* uint32 id, string path */
static uint32_t
process_lstat(uint32_t id, struct cursor *c)
{
	return do_stat(id, c, 0);
}

/* uint32 id, string path */
static uint32_t
process_stat(uint32_t id, struct cursor *c)
{
	return do_stat(id, c, 1);
}

/* uint32 id, string handle */
static uint32_t
process_fstat(uint32_t id, struct cursor *c)
{
	struct sched_req rq = { 0 };
	struct handle *h;
	struct stat st;
	struct timing t;
	int r;

	h = get_handle(c, HANDLE_FILE, &r);
	if (r != 0)
		return PARSE_ERROR;
	rq.op = OP_FSTAT;
	rq.h = h;
	if (!admit(h != NULL ? &rq : NULL))
		return WAIT;
	debug("request %u: fstat \"%s\" (handle %d)", id, handle_name(h),
	    handle_index(h));
	if (h == NULL)
		return SSH_FX_FAILURE;
	if (deferring() || slow())
		return start_job(sched_job(OP_FSTAT, stat_answer, id, h, 0), 0);
	if (concurrent())
		sched_timing_start(&t, 0);
	r = fstat(h->fd, &st);
	if (concurrent())
		sched_note_latency(sched_timing_waited(&t));
	return stat_result(id, r, errno, &st);
}

static void
log_modtime(const char *name, uint32_t mtime)
{
	char buf[64];
	time_t t = (time_t)mtime;
	struct tm tm;

	if (log_level < LOG_LEVEL_INFO)
		return;
	if (localtime_r(&t, &tm) == NULL ||
	    strftime(buf, sizeof buf, "%Y%m%d-%H:%M:%S", &tm) == 0)
		buf[0] = '\0';
	logit("set \"%s\" modtime %s", name, buf);
}

/*
 * The permissions of what name names (fd -1, following a final symlink or
 * not) or of fd become mode, unless -m keeps a regular file's or -M a
 * directory's: returns 1 then (logged at VERBOSE), 0 when changed, or -1
 * with errno.  The type is that of the file the mode would change.
 */
static int
set_mode(const char *name, int fd, int follow, mode_t mode)
{
	struct stat st;
	int keep = (ss->file_mode != -1 ? FS_KEEP_FILE : 0) |
	    (ss->dir_mode != -1 ? FS_KEEP_DIR : 0);
	int r;

	if (keep == 0)
		return fd == -1 ? fs_chmod(name, mode, follow) :
		    fchmod(fd, mode);
	if (fd == -1)
		r = fs_chmod_unless(name, mode, follow, keep);
	else if (fstat(fd, &st) == -1)
		return -1;
	else if (S_ISREG(st.st_mode) && (keep & FS_KEEP_FILE))
		r = FS_KEEP_FILE;
	else if (S_ISDIR(st.st_mode) && (keep & FS_KEEP_DIR))
		r = FS_KEEP_DIR;
	else
		r = fchmod(fd, mode);
	if (r <= 0)
		return r;
	verbose("mode of \"%s\" kept: %s", name, r == FS_KEEP_DIR ? "-M" :
	    "-m");
	return 1;
}

/*
 * SETSTAT, FSETSTAT and LSETSTAT: size, permissions, times, then owner,
 * each tried even when an earlier one failed; as OpenSSH, the last failure
 * is the status.  fd is -1 to work on the path, following a final symlink
 * or not (follow); LSETSTAT never brings a size.  done, unless NULL, gets
 * the flags of the permissions and the owner where they were set.
 */
static uint32_t
apply_attrs(const char *event, const char *name, int fd, int follow,
    const struct sftp_attrs *a, uint32_t *done)
{
	struct xfer_event ev = XFER_EVENT(event);
	struct timespec ts[2];
	uint32_t status = SSH_FX_OK, none;
	int r;

	if (done == NULL)
		done = &none;
	*done = 0;

	ev.path = name;
	if (a->flags & SSH_FILEXFER_ATTR_SIZE)
		ev.size = a->size;
	if (a->flags & SSH_FILEXFER_ATTR_PERMISSIONS)
		ev.mode = a->perm & 07777;
	if (a->flags & SSH_FILEXFER_ATTR_UIDGID) {
		ev.uid = a->uid;
		ev.gid = a->gid;
	}
	if (a->flags & SSH_FILEXFER_ATTR_ACMODTIME)
		ev.mtime = a->mtime;

	if (a->flags & SSH_FILEXFER_ATTR_SIZE) {
		logit("set \"%s\" size %llu", name,
		    (unsigned long long)a->size);
		if (a->size > (uint64_t)INT64_MAX) {
			status = SSH_FX_BAD_MESSAGE;
		} else if ((fd == -1 ? fs_truncate(name, (off_t)a->size) :
		    ftruncate(fd, (off_t)a->size)) == -1) {
			status = errno_to_status(errno);
		}
	}
	if (a->flags & SSH_FILEXFER_ATTR_PERMISSIONS) {
		logit("set \"%s\" mode %04o", name, a->perm);
		if ((r = set_mode(name, fd, follow, a->perm & 07777)) == -1)
			status = errno_to_status(errno);
		else if (r != 0)
			ev.mode_forced = 1;
		else
			*done |= SSH_FILEXFER_ATTR_PERMISSIONS;
	}
	if (a->flags & SSH_FILEXFER_ATTR_ACMODTIME) {
		log_modtime(name, a->mtime);
		ts[0].tv_sec = (time_t)a->atime;
		ts[0].tv_nsec = 0;
		ts[1].tv_sec = (time_t)a->mtime;
		ts[1].tv_nsec = 0;
		if ((fd == -1 ? fs_utimes(name, ts, follow) :
		    futimens(fd, ts)) == -1)
			status = errno_to_status(errno);
	}
	if (a->flags & SSH_FILEXFER_ATTR_UIDGID) {
		logit("set \"%s\" owner %lu group %lu", name,
		    (unsigned long)a->uid, (unsigned long)a->gid);
		if ((fd == -1 ? fs_chown(name, a->uid, a->gid, follow) :
		    fchown(fd, a->uid, a->gid)) == -1)
			status = errno_to_status(errno);
		else
			*done |= SSH_FILEXFER_ATTR_UIDGID;
	}
	return logged(&ev, status);
}

/* uint32 id, string path, ATTRS attrs */
static uint32_t
process_setstat(uint32_t id, struct cursor *c)
{
	struct sftp_attrs a;
	int r;

	if ((r = pkt_get_path(c, path1, sizeof path1)) != 0 ||
	    (r = pkt_get_attrs(c, &a)) != 0)
		return PARSE_ERROR;
	debug("request %u: setstat name \"%s\"", id, path1);
	return apply_attrs("setstat", path1, -1, 1, &a, NULL);
}

/* uint32 id, string handle, ATTRS attrs */
static uint32_t
process_fsetstat(uint32_t id, struct cursor *c)
{
	struct sftp_attrs a;
	struct handle *h;
	uint32_t status, done;
	int r;

	h = get_handle(c, HANDLE_FILE, &r);
	if (r != 0 || (r = pkt_get_attrs(c, &a)) != 0)
		return PARSE_ERROR;
	debug("request %u: fsetstat handle %d", id, handle_index(h));
	if (h == NULL)
		return SSH_FX_FAILURE;
	status = apply_attrs("fsetstat", h->path, h->fd, 1, &a, &done);
	/*
	 * An upload keeps at its CLOSE the mode and owner the client gave
	 * it, each that was set, whatever else of the request failed.
	 */
	if (h->up != NULL) {
		if (done & SSH_FILEXFER_ATTR_PERMISSIONS)
			h->up->mode_set = 1;
		if (done & SSH_FILEXFER_ATTR_UIDGID)
			h->up->owner_set = 1;
	}
	return status;
}

/* uint32 id, string path */
static uint32_t
process_opendir(uint32_t id, struct cursor *c)
{
	struct handle *h;
	DIR *d;
	int r;

	if ((r = pkt_get_path(c, path1, sizeof path1)) != 0)
		return PARSE_ERROR;
	debug3("request %u: opendir", id);
	logit("opendir \"%s\"", path1);
	if ((d = fs_opendir(path1)) == NULL)
		return errno_to_status(errno);
	if ((h = handle_new(&handles, HANDLE_DIR, path1)) == NULL) {
		(void)closedir(d);	/* out of handles: FAILURE */
		return SSH_FX_FAILURE;
	}
	h->dir = d;
	h->fd = dirfd(d);
	(void)clock_gettime(CLOCK_MONOTONIC, &h->opened);
	return reply_handle(id, h);
}

/*
 * Adds up to READDIR_BATCH - rep->count names of h to the NAME reply, each
 * stat'ed here, skipping those that vanished.  Once storage is found to
 * wait, a reply that holds READDIR_EARLY names ends there.  A listing of
 * fewer names comes whole, as OpenSSH's does: at most that many lstats in
 * a row wait in the loop, and a small directory costs the client no more
 * READDIRs.
 */
#define READDIR_EARLY	16
static void
readdir_here(struct handle *h, struct reply *rep, time_t now)
{
	char longname[LONGNAME_MAX];
	struct sftp_attrs a;
	struct dirent *de;
	struct timing t;
	struct stat st;
	int r;

	while (rep->count < READDIR_BATCH) {
		/*
		 * Storage found to wait (each lstat is timed as any call
		 * here): the names so far are the reply, and the next
		 * READDIR's lstats go to workers, not a hundred in a row.
		 */
		if (rep->count >= READDIR_EARLY && slow())
			break;
		errno = 0;
		if ((de = readdir(h->dir)) == NULL)
			break;
		if (concurrent())
			sched_timing_start(&t, 0);
		r = fs_stat_entry(h->fd, de->d_name, &st);
		if (concurrent())
			sched_note_latency(sched_timing_waited(&t));
		if (r == -1)
			continue;
		attrs_from_stat(&st, &a);
		attrs_longname(longname, de->d_name, &st, now);
		/* Cannot fail: 100 entries of at most 2.3 KiB fit a message. */
		queued(pkt_name_add(oq, rep, de->d_name, longname, &a));
	}
}

/* The NAME reply of READDIR, or EOF when it holds no name. */
static uint32_t
readdir_end(uint32_t id, struct reply *rep)
{
	if (rep->count == 0) {
		pkt_cancel(oq, rep);
		return SSH_FX_EOF;
	}
	pkt_name_end(oq, rep);
	debug("request %u: sent names count %u", id, rep->count);
	return REPLIED;
}

/*
 * READDIR as a job: the next names read here, their lstats made by up to
 * one worker per name at once (see struct dirbatch).
 */
static uint32_t
readdir_job(struct handle *h, uint32_t id)
{
	struct dirbatch *db;
	struct dirent *de;
	struct task *j;
	size_t len;

	j = sched_job(OP_DIRSTAT, readdir_answer, id, h, sizeof *db);
	db = j->shared = j->job.buf;
	db->count = 0;
	atomic_init(&db->next, 0);
	atomic_init(&db->us, 0);
	atomic_init(&db->timed, 0);
	while (db->count < READDIR_BATCH) {
		errno = 0;
		if ((de = readdir(h->dir)) == NULL)
			break;
		len = strlen(de->d_name);
		if (len > NAME_MAX)
			continue;	/* never: the kernel's limit */
		memcpy(db->e[db->count].name, de->d_name, len + 1);
		db->count++;
	}
	jobs_share(&j->job, db->count);
	return start_job(j, 0);
}

/* READDIR's job is done: the NAME reply from the batch. */
static uint32_t
readdir_answer(struct task *j)
{
	char longname[LONGNAME_MAX];
	struct dirbatch *db = j->shared;
	struct sftp_attrs a;
	struct reply rep;
	time_t now = time(NULL);
	int r;

	if ((r = pkt_name_begin(oq, &rep, j->id)) != 0) {
		queued(r);
		return REPLIED;
	}
	for (unsigned i = 0; i < db->count; i++) {
		if (db->e[i].r == -1)
			continue;	/* vanished since */
		attrs_from_stat(&db->e[i].st, &a);
		attrs_longname(longname, db->e[i].name, &db->e[i].st, now);
		queued(pkt_name_add(oq, &rep, db->e[i].name, longname, &a));
	}
	/* Every name vanished: the listing is not at its end. */
	if (rep.count == 0 && db->count > 0)
		readdir_here(j->owner, &rep, now);
	return readdir_end(j->id, &rep);
}

/*
 * uint32 id, string handle
 *
 * Up to READDIR_BATCH names, each stat'ed relative to the directory's own
 * descriptor; an entry that vanished in between is skipped, as OpenSSH.
 */
static uint32_t
process_readdir(uint32_t id, struct cursor *c)
{
	struct sched_req rq = { 0 };
	struct handle *h;
	struct reply rep;
	int r;

	h = get_handle(c, HANDLE_DIR, &r);
	if (r != 0)
		return PARSE_ERROR;
	rq.op = OP_DIRSTAT;
	rq.size = sizeof(struct dirbatch);
	if (!admit(h != NULL ? &rq : NULL))
		return WAIT;
	debug("request %u: readdir \"%s\" (handle %d)", id, handle_name(h),
	    handle_index(h));
	if (h == NULL)
		return SSH_FX_FAILURE;
	if (deferring() || slow())
		return readdir_job(h, id);
	if ((r = pkt_name_begin(oq, &rep, id)) != 0) {
		queued(r);
		return REPLIED;
	}
	readdir_here(h, &rep, time(NULL));
	return readdir_end(id, &rep);
}

/* uint32 id, string filename */
static uint32_t
process_remove(uint32_t id, struct cursor *c)
{
	int r;

	if ((r = pkt_get_path(c, path1, sizeof path1)) != 0)
		return PARSE_ERROR;
	debug3("request %u: remove", id);
	logit("remove name \"%s\"", path1);
	r = fs_unlink(path1);
	return logged_paths("remove", path1, NULL, status_of(r));
}

/* uint32 id, string path, ATTRS attrs */
static uint32_t
process_mkdir(uint32_t id, struct cursor *c)
{
	struct xfer_event ev = XFER_EVENT("mkdir");
	struct sftp_attrs a;
	mode_t mode;
	int r;

	if ((r = pkt_get_path(c, path1, sizeof path1)) != 0 ||
	    (r = pkt_get_attrs(c, &a)) != 0)
		return PARSE_ERROR;
	mode = (a.flags & SSH_FILEXFER_ATTR_PERMISSIONS) ? a.perm & 07777 :
	    0777;
	debug3("request %u: mkdir", id);
	logit("mkdir name \"%s\" mode 0%o", path1, (unsigned)mode);
	r = fs_mkdir(path1, create_mode(mode, 1));
	ev.path = path1;
	/* -M: the mode the directory was made with; none made, none forced. */
	ev.mode_forced = ss->dir_mode != -1 && r == 0;
	ev.mode = ev.mode_forced ? (uint64_t)ss->dir_mode : mode;
	return logged(&ev, status_of(r));
}

/* uint32 id, string path */
static uint32_t
process_rmdir(uint32_t id, struct cursor *c)
{
	int r;

	if ((r = pkt_get_path(c, path1, sizeof path1)) != 0)
		return PARSE_ERROR;
	debug3("request %u: rmdir", id);
	logit("rmdir name \"%s\"", path1);
	r = fs_rmdir(path1);
	return logged_paths("rmdir", path1, NULL, status_of(r));
}

/* uint32 id, string path */
static uint32_t
process_realpath(uint32_t id, struct cursor *c)
{
	int r;

	if ((r = pkt_get_path(c, path1, sizeof path1)) != 0)
		return PARSE_ERROR;
	if (path1[0] == '\0')
		memcpy(path1, ".", 2);
	debug3("request %u: realpath", id);
	verbose("realpath \"%s\"", path1);
	if (fs_realpath(path1, resolved) == -1)
		return errno_to_status(errno);
	return reply_name1(id, resolved);
}

/*
 * The rename of draft-02 fails when the target exists.  OpenSSH does it
 * with link() and unlink() for regular files and a racy stat() otherwise;
 * renameat2(RENAME_NOREPLACE) gives the same answers atomically, for every
 * kind of file.  OpenSSH's way is kept for file systems without it.
 */
static uint32_t
rename_noreplace(const char *oldpath, const char *newpath)
{
	struct stat sb;

	if (fs_rename(oldpath, newpath, 1) == 0)
		return SSH_FX_OK;
	if (errno != ENOSYS && errno != EINVAL && errno != EOPNOTSUPP)
		return errno_to_status(errno);
	if (fs_stat(oldpath, &sb, 0) == -1)
		return errno_to_status(errno);
	if (S_ISREG(sb.st_mode)) {
		if (fs_link(oldpath, newpath) == -1) {
			if (errno != EOPNOTSUPP && errno != ENOSYS &&
			    errno != EXDEV && errno != EPERM)
				return errno_to_status(errno);
			/* No links on this file system: stat, then rename. */
			if (fs_stat(newpath, &sb, 1) == 0)
				return SSH_FX_FAILURE;
			if (fs_rename(oldpath, newpath, 0) == -1)
				return errno_to_status(errno);
			return SSH_FX_OK;
		}
		if (fs_unlink(oldpath) == -1) {
			int e = errno;

			(void)fs_unlink(newpath);	/* the spare link */
			return errno_to_status(e);
		}
		return SSH_FX_OK;
	}
	if (fs_stat(newpath, &sb, 1) == 0)
		return SSH_FX_FAILURE;
	if (fs_rename(oldpath, newpath, 0) == -1)
		return errno_to_status(errno);
	return SSH_FX_OK;
}

/* uint32 id, string oldpath, string newpath */
static uint32_t
process_rename(uint32_t id, struct cursor *c)
{
	int r;

	if ((r = pkt_get_path(c, path1, sizeof path1)) != 0 ||
	    (r = pkt_get_path(c, path2, sizeof path2)) != 0)
		return PARSE_ERROR;
	debug3("request %u: rename", id);
	logit("rename old \"%s\" new \"%s\"", path1, path2);
	return logged_paths("rename", path1, path2,
	    rename_noreplace(path1, path2));
}

/* uint32 id, string path */
static uint32_t
process_readlink(uint32_t id, struct cursor *c)
{
	ssize_t len;
	int r;

	if ((r = pkt_get_path(c, path1, sizeof path1)) != 0)
		return PARSE_ERROR;
	debug3("request %u: readlink", id);
	verbose("readlink \"%s\"", path1);
	if ((len = fs_readlink(path1, resolved, sizeof resolved - 1)) == -1)
		return errno_to_status(errno);
	resolved[len] = '\0';
	return reply_name1(id, resolved);
}

/*
 * uint32 id, string targetpath, string linkpath
 *
 * As OpenSSH, and every client written against it, the target comes first:
 * the reverse of draft-02's order (OpenSSH's PROTOCOL, section 4.1).
 */
static uint32_t
process_symlink(uint32_t id, struct cursor *c)
{
	int r;

	if ((r = pkt_get_path(c, path1, sizeof path1)) != 0 ||
	    (r = pkt_get_path(c, path2, sizeof path2)) != 0)
		return PARSE_ERROR;
	debug3("request %u: symlink", id);
	logit("symlink old \"%s\" new \"%s\"", path1, path2);
	r = fs_symlink(path1, path2);
	return logged_paths("symlink", path2, path1, status_of(r));
}

/* uint32 id, string "posix-rename@openssh.com", string old, string new */
static uint32_t
process_ext_posix_rename(uint32_t id, struct cursor *c)
{
	int r;

	if ((r = pkt_get_path(c, path1, sizeof path1)) != 0 ||
	    (r = pkt_get_path(c, path2, sizeof path2)) != 0)
		return PARSE_ERROR;
	debug3("request %u: posix-rename", id);
	logit("posix-rename old \"%s\" new \"%s\"", path1, path2);
	r = fs_rename(path1, path2, 0);
	return logged_paths("posix-rename", path1, path2, status_of(r));
}

static uint32_t
reply_statvfs(uint32_t id, const struct statvfs *st, uint64_t fsid)
{
	struct reply rep;
	uint64_t flag;

	flag = (st->f_flag & ST_RDONLY) ? SSH2_FXE_STATVFS_ST_RDONLY : 0;
	flag |= (st->f_flag & ST_NOSUID) ? SSH2_FXE_STATVFS_ST_NOSUID : 0;
	queued(pkt_begin(oq, &rep, SSH_FXP_EXTENDED_REPLY));
	queued(pkt_put_u32(oq, id));
	queued(pkt_put_u64(oq, st->f_bsize));
	queued(pkt_put_u64(oq, st->f_frsize));
	queued(pkt_put_u64(oq, st->f_blocks));
	queued(pkt_put_u64(oq, st->f_bfree));
	queued(pkt_put_u64(oq, st->f_bavail));
	queued(pkt_put_u64(oq, st->f_files));
	queued(pkt_put_u64(oq, st->f_ffree));
	queued(pkt_put_u64(oq, st->f_favail));
	queued(pkt_put_u64(oq, fsid));
	queued(pkt_put_u64(oq, flag));
	queued(pkt_put_u64(oq, st->f_namemax));
	return reply_end(&rep);
}

/* uint32 id, string "statvfs@openssh.com", string path */
static uint32_t
process_ext_statvfs(uint32_t id, struct cursor *c)
{
	struct statvfs st;
	uint64_t fsid;
	int r;

	if ((r = pkt_get_path(c, path1, sizeof path1)) != 0)
		return PARSE_ERROR;
	debug3("request %u: statvfs", id);
	logit("statvfs \"%s\"", path1);
	if (fs_statvfs(path1, &st, &fsid) == -1)
		return errno_to_status(errno);
	return reply_statvfs(id, &st, fsid);
}

/* uint32 id, string "fstatvfs@openssh.com", string handle */
static uint32_t
process_ext_fstatvfs(uint32_t id, struct cursor *c)
{
	struct statvfs st;
	struct handle *h;
	uint64_t fsid;
	int r;

	h = get_handle(c, HANDLE_FILE, &r);
	if (r != 0)
		return PARSE_ERROR;
	debug("request %u: fstatvfs \"%s\" (handle %d)", id, handle_name(h),
	    handle_index(h));
	if (h == NULL)
		return SSH_FX_FAILURE;
	if (fs_fstatvfs(h->fd, &st, &fsid) == -1)
		return errno_to_status(errno);
	return reply_statvfs(id, &st, fsid);
}

/* uint32 id, string "hardlink@openssh.com", string old, string new */
static uint32_t
process_ext_hardlink(uint32_t id, struct cursor *c)
{
	int r;

	if ((r = pkt_get_path(c, path1, sizeof path1)) != 0 ||
	    (r = pkt_get_path(c, path2, sizeof path2)) != 0)
		return PARSE_ERROR;
	debug3("request %u: hardlink", id);
	logit("hardlink old \"%s\" new \"%s\"", path1, path2);
	r = fs_link(path1, path2);
	return logged_paths("hardlink", path2, path1, status_of(r));
}

/* uint32 id, string "fsync@openssh.com", string handle */
static uint32_t
process_ext_fsync(uint32_t id, struct cursor *c)
{
	struct handle *h;
	int r;

	h = get_handle(c, HANDLE_FREE, &r);
	if (r != 0)
		return PARSE_ERROR;
	debug3("request %u: fsync (handle %d)", id, handle_index(h));
	verbose("fsync \"%s\"", handle_name(h));
	if (h == NULL || h->kind != HANDLE_FILE)
		return SSH_FX_NO_SUCH_FILE;
	r = fsync(h->fd);
	return status_of(r);
}

/*
 * uint32 id, string "lsetstat@openssh.com", string path, ATTRS attrs
 *
 * As SETSTAT, but on a symlink itself.  A size makes no sense for a link:
 * BAD_MESSAGE, as OpenSSH.  Linux cannot chmod a link: FAILURE.
 */
static uint32_t
process_ext_lsetstat(uint32_t id, struct cursor *c)
{
	struct sftp_attrs a;
	int r;

	if ((r = pkt_get_path(c, path1, sizeof path1)) != 0 ||
	    (r = pkt_get_attrs(c, &a)) != 0)
		return PARSE_ERROR;
	debug("request %u: lsetstat name \"%s\"", id, path1);
	if (a.flags & SSH_FILEXFER_ATTR_SIZE)
		return SSH_FX_BAD_MESSAGE;
	return apply_attrs("lsetstat", path1, -1, 0, &a, NULL);
}

/* uint32 id, string "limits@openssh.com" */
static uint32_t
process_ext_limits(uint32_t id, struct cursor *c)
{
	struct reply rep;

	(void)c;
	debug("request %u: limits", id);
	queued(pkt_begin(oq, &rep, SSH_FXP_EXTENDED_REPLY));
	queued(pkt_put_u32(oq, id));
	queued(pkt_put_u64(oq, SFTP_MAX_MSG));
	queued(pkt_put_u64(oq, SFTP_MAX_READ));
	queued(pkt_put_u64(oq, SFTP_MAX_WRITE));
	queued(pkt_put_u64(oq, handles.nslots));
	return reply_end(&rep);
}

/*
 * "~user/rest" into out.  Under -r, a home is the part the client sees:
 * the client's own home outside the root is the root, another user's home
 * outside it is unknown (ENOENT), like an unknown user.
 */
static int
expand_tilde(const char *in, char *out, size_t size)
{
	const char *rest = in + strcspn(in, "/");
	size_t len = (size_t)(rest - in) - 1;
	int n;

	if (path_tilde(in, ss->user_home, out, size) == -1)
		return -1;
	if (!fs_confined() || fs_visible(out, out, size) == 0)
		return 0;
	if (len != strlen(ss->user_name) ||
	    strncmp(in + 1, ss->user_name, len) != 0) {
		errno = ENOENT;
		return -1;
	}
	n = snprintf(out, size, "/%s", rest + strspn(rest, "/"));
	if (n < 0 || (size_t)n >= size) {
		errno = ENAMETOOLONG;
		return -1;
	}
	return 0;
}

/*
 * uint32 id, string "expand-path@openssh.com", string path
 *
 * As OpenSSH: "~" and "~/x" are taken relative to the current directory,
 * which is the home directory unless -d moved it.
 */
static uint32_t
process_ext_expand_path(uint32_t id, struct cursor *c)
{
	char *user;
	int r;

	if ((r = pkt_get_path(c, path1, sizeof path1)) != 0)
		return PARSE_ERROR;
	debug3("request %u: expand, original \"%s\"", id, path1);
	if (path1[0] == '\0' || strcmp(path1, "~") == 0) {
		memcpy(path2, ".", 2);
	} else if (strncmp(path1, "~/", 2) == 0) {
		memmove(path2, path1 + 2, strlen(path1 + 2) + 1);
	} else if (path1[0] == '~') {
		if (expand_tilde(path1, path2, sizeof path2) == -1) {
			if (errno == ENOENT) {
				user = path1 + 1;
				user[strcspn(user, "/")] = '\0';
				error(OPENSSH_FN("tilde_expand")
				    "No such user %s", user);
				return reply_status(id, SSH_FX_NO_SUCH_FILE,
				    "no such user");
			}
			return errno_to_status(errno);
		}
	} else {
		memcpy(path2, path1, strlen(path1) + 1);
	}
	verbose("expand \"%s\"", path2);
	if (fs_realpath(path2, resolved) == -1)
		return errno_to_status(errno);
	return reply_name1(id, resolved);
}

/*
 * Whether a copy of len bytes that met end of file after done bytes answers
 * EOF.  OpenSSH copies in 64 KiB chunks and answers EOF only when a chunk
 * read nothing while more than a chunk was still to come; a copy that ends
 * in its last chunk, short or not, is a success.
 */
static int
copy_hit_eof(uint64_t done, uint64_t len)
{
	uint64_t chunks = done / COPY_CHUNK + (done % COPY_CHUNK != 0);

	return len / COPY_CHUNK > chunks + 1 ||
	    (len / COPY_CHUNK == chunks + 1 && len % COPY_CHUNK != 0);
}

/*
 * Copies len bytes (0: to end of file) between the handles.  Returns
 * SSH_FX_OK, SSH_FX_EOF when the input ended early enough that OpenSSH
 * answers so, or a failure status.
 */
static uint32_t
copy_range(struct handle *rh, uint64_t roff, struct handle *wh,
    uint64_t woff, uint64_t len)
{
	struct fileio_copied c;
	int r;

	r = fileio_copy(rh->fd, (off_t)roff, wh->fd, (wh->flags & O_APPEND) ?
	    FILEIO_APPEND : (off_t)woff, len, &c);
	rh->bytes_read += c.read;
	track(rh, roff, c.read);
	wh->bytes_written += c.written;
	if (!(wh->flags & O_APPEND))
		track(wh, woff, c.written);
	if (r == FILEIO_STOP)
		return STOP;
	if (r == -1) {
		upload_broken(wh, errno);
		error(OPENSSH_FN("process_extended_copy_data")
		    "copy failed: %s", strerror(errno));
		return errno_to_status(errno);
	}
	if (r == FILEIO_EOF && copy_hit_eof(c.read, len))
		return SSH_FX_EOF;
	return SSH_FX_OK;
}

/*
 * uint32 id, string "copy-data", string read-from-handle,
 * uint64 read-from-offset, uint64 read-data-length,
 * string write-to-handle, uint64 write-to-offset
 *
 * Length 0 copies to end of file.  The same handle, the same path or the
 * same file under another name on both sides is refused: the copy would
 * read what it writes.  As OpenSSH 10.4, a bad handle (closed, unknown or a
 * directory's) is "no such file", where 9.2 answered "failure", and both
 * that and the same file under another name are logged as errors.
 */
static uint32_t
process_ext_copy_data(uint32_t id, struct cursor *c)
{
	uint64_t roff, rlen, woff;
	struct handle *rh, *wh;
	struct stat rst, wst;
	int r;

	rh = get_handle(c, HANDLE_FILE, &r);
	if (r != 0 || (r = pkt_get_u64(c, &roff)) != 0 ||
	    (r = pkt_get_u64(c, &rlen)) != 0)
		return PARSE_ERROR;
	wh = get_handle(c, HANDLE_FILE, &r);
	if (r != 0 || (r = pkt_get_u64(c, &woff)) != 0)
		return PARSE_ERROR;
	debug("request %u: copy-data from \"%s\" (handle %d) off %llu len "
	    "%llu to \"%s\" (handle %d) off %llu", id, handle_name(rh),
	    handle_index(rh), (unsigned long long)roff,
	    (unsigned long long)rlen, handle_name(wh), handle_index(wh),
	    (unsigned long long)woff);
	if (rh == NULL || wh == NULL) {
		error(OPENSSH_FN("process_extended_copy_data")
		    "invalid %s handle", rh == NULL ? "read" : "write");
		return SSH_FX_NO_SUCH_FILE;
	}
	if (rh == wh || strcmp(rh->path, wh->path) == 0)
		return SSH_FX_FAILURE;
	if (fstat(rh->fd, &rst) == -1 || fstat(wh->fd, &wst) == -1)
		return errno_to_status(errno);
	if (rst.st_dev == wst.st_dev && rst.st_ino == wst.st_ino) {
		error(OPENSSH_FN("process_extended_copy_data")
		    "read and write handles refer to the same file");
		return SSH_FX_FAILURE;
	}
	if (roff > (uint64_t)INT64_MAX || woff > (uint64_t)INT64_MAX ||
	    rlen > (uint64_t)INT64_MAX - roff)
		return SSH_FX_BAD_MESSAGE;
	return copy_range(rh, roff, wh, woff, rlen);
}

/*
 * uint32 id, string "home-directory", string username
 *
 * As OpenSSH 9.8 and later: an empty name is the session's user.
 */
static uint32_t
process_ext_home_directory(uint32_t id, struct cursor *c)
{
	struct passwd *pw;
	const char *home;
	int r;

	if ((r = pkt_get_path(c, path1, sizeof path1)) != 0)
		return PARSE_ERROR;
	debug("request %u: home-directory \"%s\"", id, path1);
	if (path1[0] == '\0') {
		home = ss->user_home;
	} else if ((pw = getpwnam(path1)) != NULL) {
		home = pw->pw_dir;
	} else 
		return SSH_FX_FAILURE;
	/*
	 * Under -r, a home is answered as the client sees it; the client's own
	 * home outside the root is the root, another user's is FAILURE.
	 */
	if (fs_visible(home, resolved, sizeof resolved) == 0) {
		home = resolved;
	} else if (path1[0] == '\0' || strcmp(path1, ss->user_name) == 0) {
		home = "/";
	} else 
		return SSH_FX_FAILURE;
	verbose("home-directory \"%s\"", home);
	return reply_name1(id, home);
}

/* Puts a string of packed names, one per uint32 id in ids. */
static int
put_names(const uint8_t *ids, uint32_t len, int groups, unsigned *count)
{
	struct cursor c = { ids, len };
	const char *name;
	size_t mark;
	uint32_t v;
	int r;

	*count = 0;
	mark = pkt_mark(oq);
	if ((r = pkt_put_u32(oq, 0)) != 0)
		return r;
	while (c.left > 0) {
		if ((r = pkt_get_u32(&c, &v)) != 0)
			return r;
		name = groups ? attrs_group_known((gid_t)v) :
		    attrs_user_known((uid_t)v);
		debug3(OPENSSH_FN("process_extended_get_users_groups_by_id")
		    "%s %u => \"%s\"", groups ? "gid" : "uid", v,
		    name != NULL ? name : "");
		if ((r = pkt_put_cstring(oq, name != NULL ? name : "")) != 0)
			return r;
		(*count)++;
	}
	pkt_patch_u32(oq, mark, (uint32_t)(pkt_mark(oq) - mark - 4));
	return 0;
}

/*
 * uint32 id, string "users-groups-by-id@openssh.com", string uids,
 * string gids; each a packed list of uint32.  Names come back in order,
 * "" for an id without one.
 */
static uint32_t
process_ext_users_groups(uint32_t id, struct cursor *c)
{
	const uint8_t *uids, *gids;
	uint32_t ulen, glen;
	unsigned nusers, ngroups;
	struct reply rep;
	int r;

	if ((r = pkt_get_string(c, &uids, &ulen)) != 0 ||
	    (r = pkt_get_string(c, &gids, &glen)) != 0 || ulen % 4 != 0 ||
	    glen % 4 != 0)
		return PARSE_ERROR;
	debug(OPENSSH_FN("process_extended_get_users_groups_by_id")
	    "uids len = %u, gids len = %u", ulen, glen);
	queued(pkt_begin(oq, &rep, SSH_FXP_EXTENDED_REPLY));
	queued(pkt_put_u32(oq, id));
	attrs_lookup_budget(ID_LOOKUPS_MAX);
	r = put_names(uids, ulen, 0, &nusers);
	if (r == 0)
		r = put_names(gids, glen, 1, &ngroups);
	attrs_lookup_budget(ATTRS_LOOKUPS_UNLIMITED);
	if (r != 0) {
		/* More names than one message holds. */
		pkt_cancel(oq, &rep);
		return SSH_FX_FAILURE;
	}
	verbose("users-groups-by-id: %u users, %u groups", nusers, ngroups);
	return reply_end(&rep);
}

/*
 * The digests of check-file, read as READ reads: one over the range
 * [off, off + len), or one per block of bs bytes (the last one shorter).
 * The reply is the EXTENDED_REPLY of the draft: "check-file", the
 * algorithm's name, then the digests one after another.
 */
static uint32_t
check_file(uint32_t id, int fd, const uint8_t *algs, uint32_t alen,
    uint64_t off, uint64_t len, uint32_t bs, uint64_t *hashed)
{
	const struct digest_algo *algo;
	uint8_t md[DIGEST_MAX_LEN];
	struct reply rep;
	struct stat st;
	uint64_t nblocks, block;
	int r;

	*hashed = 0;
	if ((algo = digest_select((const char *)algs, alen)) == NULL)
		return SSH_FX_OP_UNSUPPORTED;
	if (bs != 0 && bs < CHECK_BLOCK_MIN)
		return SSH_FX_BAD_MESSAGE;
	if (fstat(fd, &st) == -1)
		return errno_to_status(errno);
	if (!S_ISREG(st.st_mode))
		return SSH_FX_FAILURE;
	/* A range that reaches past the end of the file: EOF, as the draft. */
	if (off > (uint64_t)st.st_size ||
	    (len != 0 && len > (uint64_t)st.st_size - off))
		return SSH_FX_EOF;
	if (len == 0)
		len = (uint64_t)st.st_size - off;
	if (len > CHECK_FILE_MAX) {
		error("check-file: %llu bytes asked for, at most %llu hashed "
		    "in one request", (unsigned long long)len,
		    (unsigned long long)CHECK_FILE_MAX);
		return SSH_FX_FAILURE;
	}
	block = bs == 0 ? len : bs;
	nblocks = bs == 0 ? 1 : len / bs + (len % bs != 0);
	if (nblocks > (SFTP_MAX_MSG - 1024) / digest_len(algo))
		return SSH_FX_FAILURE;	/* the digests would not fit a reply */
	queued(pkt_begin(oq, &rep, SSH_FXP_EXTENDED_REPLY));
	queued(pkt_put_u32(oq, id));
	queued(pkt_put_cstring(oq, "check-file"));
	queued(pkt_put_cstring(oq, digest_name(algo)));
	for (uint64_t i = 0; i < nblocks; i++) {
		r = fileio_digest(fd, (off_t)(off + i * block),
		    len - i * block < block ? len - i * block : block, algo, md,
		    hashed);
		if (r != 0) {
			/* The client left, an error, or the file shrank. */
			pkt_cancel(oq, &rep);
			if (r == FILEIO_STOP)
				return STOP;
			return r == FILEIO_EOF ? SSH_FX_EOF :
			    errno_to_status(errno);
		}
		queued(pkt_put_raw(oq, md, digest_len(algo)));
	}
	debug("request %u: sent check-file %s, %llu digests", id,
	    digest_name(algo), (unsigned long long)nblocks);
	return reply_end(&rep);
}

/* The fields of check-file after the handle or name. */
static int
get_check_fields(struct cursor *c, const uint8_t **algs, uint32_t *alen,
    uint64_t *off, uint64_t *len, uint32_t *bs)
{
	int r;

	if ((r = pkt_get_string(c, algs, alen)) != 0 ||
	    (r = pkt_get_u64(c, off)) != 0 || (r = pkt_get_u64(c, len)) != 0 ||
	    (r = pkt_get_u32(c, bs)) != 0)
		return r;
	return 0;
}

/*
 * uint32 id, string "check-file-handle" (or "check-file", as paramiko
 * names it), string handle, string hash-algorithm-list,
 * uint64 start-offset, uint64 length, uint32 block-size
 *
 * The handle must be open for reading: PERMISSION_DENIED otherwise.  What
 * is hashed is read for the client, as READ reads: it counts in the
 * handle's bytes read, logged at its close.
 */
static uint32_t
process_ext_check_file_handle(uint32_t id, struct cursor *c)
{
	const uint8_t *algs;
	struct handle *h;
	uint64_t off, len, hashed;
	uint32_t alen, bs, status;
	int r;

	h = get_handle(c, HANDLE_FILE, &r);
	if (r != 0 || get_check_fields(c, &algs, &alen, &off, &len, &bs) != 0)
		return PARSE_ERROR;
	debug("request %u: check-file \"%s\" (handle %d) off %llu len %llu "
	    "block %u", id, handle_name(h), handle_index(h),
	    (unsigned long long)off, (unsigned long long)len, bs);
	if (h == NULL)
		return SSH_FX_FAILURE;
	verbose("check-file \"%s\"", h->path);
	if ((h->flags & O_ACCMODE) == O_WRONLY)
		return SSH_FX_PERMISSION_DENIED;
	status = check_file(id, h->fd, algs, alen, off, len, bs, &hashed);
	h->bytes_read += hashed;
	track(h, off, hashed);
	return status;
}

/*
 * uint32 id, string "check-file-name", string filename,
 * string hash-algorithm-list, uint64 start-offset, uint64 length,
 * uint32 block-size
 *
 * The file is opened for reading, following a symlink, as OPEN does, and
 * logged as an open for reading and its close: what is hashed is read for
 * the client.  The transfer log gets a "check-file" line with the bytes.
 */
static uint32_t
process_ext_check_file_name(uint32_t id, struct cursor *c)
{
	struct xfer_event ev = XFER_EVENT("check-file");
	const uint8_t *algs;
	struct timespec opened;
	uint64_t off, len, hashed = 0;
	uint32_t alen, bs, status;
	int fd;

	if (pkt_get_path(c, path1, sizeof path1) != 0 ||
	    get_check_fields(c, &algs, &alen, &off, &len, &bs) != 0)
		return PARSE_ERROR;
	debug("request %u: check-file-name \"%s\" off %llu len %llu "
	    "block %u", id, path1, (unsigned long long)off,
	    (unsigned long long)len, bs);
	logit("open \"%s\" flags READ mode 0666", path1);
	verbose("check-file \"%s\"", path1);
	(void)clock_gettime(CLOCK_MONOTONIC, &opened);
	if ((fd = fs_open(path1, O_RDONLY | O_NONBLOCK | O_NOCTTY, 0)) == -1) {
		status = errno_to_status(errno);
	} else {
		status = check_file(id, fd, algs, alen, off, len, bs, &hashed);
		(void)close(fd);
		logit("close \"%s\" bytes read %llu written 0", path1,
		    (unsigned long long)hashed);
	}
	ev.path = path1;
	ev.flags = "READ";
	ev.bytes_read = hashed;
	if (hashed > 0) {
		ev.first_offset = off;
		ev.last_offset = off + hashed;
	}
	ev.opened = &opened;
	if (status == STOP)
		ev.result = strerror(ECANCELED);	/* given up */
	else
		ev.result = status == REPLIED ? "ok" :
		    pkt_status_message(status);
	xferlog_write(&ev);
	return status;
}

static const struct request *
ext_by_name(const uint8_t *name, uint32_t len)
{
	for (size_t i = 0; i < NREQUESTS; i++) {
		if (requests[i].ext_name != NULL &&
		    strlen(requests[i].ext_name) == len &&
		    memcmp(requests[i].ext_name, name, len) == 0)
			return &requests[i];
	}
	return NULL;
}

/*
 * The request behind the type byte and id, or NULL with the status to send.
 */
static const struct request *
find_request(uint8_t type, uint32_t id, struct cursor *c, uint32_t *statusp)
{
	const struct request *rq;
	const uint8_t *name;
	uint32_t len;

	if (type != SSH_FXP_EXTENDED) {
		if ((rq = by_type[type]) == NULL) {
			error("Unknown message %u", type);
			*statusp = SSH_FX_OP_UNSUPPORTED;
		}
		return rq;
	}
	if (pkt_get_string(c, &name, &len) != 0) {
		error("extended: bad message in request %u", id);
		*statusp = SSH_FX_BAD_MESSAGE;
		return NULL;
	}
	if ((rq = ext_by_name(name, len)) == NULL) {
		error("Unknown extended request \"%.*s\"",
		    (int)(len > 100 ? 100 : len), (const char *)name);
		*statusp = SSH_FX_OP_UNSUPPORTED;
	}
	return rq;
}

/* Every request gets exactly one reply; anything else is a bug. */
static void
one_reply(const char *name, uint32_t id, uint64_t before)
{
	if (oq->nreplies == before + 1)
		return;
	error("internal error: %s request %u got %llu replies", name, id,
	    (unsigned long long)(oq->nreplies - before));
	abort();
}

/*
 * One request: every request gets exactly one reply.  Unlike OpenSSH, an
 * unknown packet type is answered with OP_UNSUPPORTED (OpenSSH says
 * nothing and the client waits forever), and a request whose fields do not
 * parse gets BAD_MESSAGE instead of ending the session.
 */
/*
 * Whether the request c holds must wait for the requests in flight before
 * its handler runs at all: one whose row names no job kind (a barrier, an
 * extension, INIT), an unknown type, or one that -R, -P or -p refuse (it
 * is answered at once, after them).  Reads a copy of c; logs nothing.
 */
static int
barrier(struct cursor c)
{
	const struct request *rq;
	uint32_t id;
	uint8_t type;

	return pkt_get_u8(&c, &type) != 0 || pkt_get_u32(&c, &id) != 0 ||
	    (rq = by_type[type]) == NULL || rq->job == OP_NONE ||
	    refusal(rq->name, rq->flags) != PERMITTED;
}

/*
 * One request: every request gets exactly one reply.  Unlike OpenSSH, an
 * unknown packet type is answered with OP_UNSUPPORTED (OpenSSH says
 * nothing and the client waits forever), and a request whose fields do not
 * parse gets BAD_MESSAGE instead of ending the session.
 *
 * While requests are in flight, a request runs only through admit(): a
 * barrier waits here, and a handler whose request may not start (admit()
 * said no, or it would answer at once) returns WAIT before it logs or
 * acts; its bytes stay as they are (c is read through a copy) for the next
 * try.  So a request in flight is answered by its job, DEFERRED, or not
 * at all yet.
 */
int
requests_process(struct cursor *c)
{
	const struct request *rq;
	struct cursor body = *c;
	uint32_t id, status;
	uint64_t before = oq->nreplies;
	int in_flight = deferring();
	uint8_t type;

	if (in_flight && barrier(body))
		return REQUESTS_WAIT;
	if (pkt_get_u8(&body, &type) != 0)
		abort();	/* ibuf_next() never yields an empty body */
	if (type == SSH_FXP_INIT) {
		*c = body;
		if (process_init(c) != 0)
			return SESSION_FATAL;
		init_done = 1;
		one_reply("init", 0, before);
		return 0;
	}
	if (!init_done) {
		error("Received %u request before init", type);
		return SESSION_FATAL;
	}
	rq = NULL;
	if (pkt_get_u32(&body, &id) != 0) {
		/* No id to echo: the reply carries 0. */
		id = 0;
		error("request of type %u: bad message: no request id", type);
		status = SSH_FX_BAD_MESSAGE;
	} else if ((rq = find_request(type, id, &body, &status)) == NULL) {
		/* status says why */
	} else if (in_flight) {
		/* Permitted (barrier()): its line is written once admitted. */
		admitting = rq;
		status = rq->handler(id, &body);
		admitting = NULL;
		if (status == PARSE_ERROR)
			status = WAIT;	/* answered at once: after them */
	} else if (!request_permitted(rq)) {
		status = SSH_FX_PERMISSION_DENIED;
	} else if ((status = rq->handler(id, &body)) == PARSE_ERROR) {
		error("%s: bad message in request %u", rq->name, id);
		status = SSH_FX_BAD_MESSAGE;
	} else if (status == STOP) {
		debug("request %u: %s given up: the session ends", id,
		    rq->name);
		return REQUESTS_STOP;
	}
	if (status == WAIT && oq->nreplies == before)
		return REQUESTS_WAIT;
	if (status == DEFERRED && oq->nreplies == before) {
		*c = body;
		return 0;
	}
	if (status == DEFERRED || status == WAIT || in_flight)
		abort();	/* answered before admit(): a bug */
	*c = body;
	if (status != REPLIED)
		(void)reply_status(id, status, NULL);
	one_reply(rq != NULL ? rq->name : "unknown", id, before);
	return 0;
}

/* The reply of a job that is done, as its handler would have queued it. */
static void
answer(struct task *j)
{
	uint64_t before = oq->nreplies;
	uint32_t status;

	sched_note_job(j);
	status = j->answer(j);
	if (status != REPLIED)
		(void)reply_status(j->id, status, NULL);
	one_reply("deferred", j->id, before);
}

int
requests_written(void)
{
	if (oq_refs(oq) > 0)
		return 0;
	return jobs_release();
}

int
requests_reap(void)
{
	struct task *j;

	(void)requests_written();
	if (jobs_count() == 0)
		return 0;
	(void)jobs_collect();
	while ((j = TASK(jobs_head())) != NULL) {
		if (oq_pending(oq) >= OQ_HIWAT)
			return 1;
		answer(j);
		jobs_retire();
	}
	return 0;
}

unsigned
requests_abandon(void)
{
	unsigned n = 0;
	struct handle *h;
	struct task *j;

	given_up = 1;
	oq_mute(oq);	/* the replies are not sent */
	(void)jobs_collect();
	for (unsigned i = 0; i < jobs_count(); i++) {
		j = TASK(jobs_at(i));
		h = j->owner;
		if (jobs_done(&j->job) && j->op != OP_DIRSTAT) {
			answer(j);	/* its bytes, handle and log line */
			continue;
		}
		if (jobs_done(&j->job))
			continue;	/* a listing: nothing to count */
		n++;
		if ((j->op == OP_OPEN || j->op == OP_UPLOAD) && h != NULL) {
			handle_release(&handles, h);
		} else if (j->op == OP_CLOSE || j->op == OP_COMMIT) {
			h->kind = HANDLE_FILE;
			log_close(h, "forced");
			(void)close_handle(h, 1);
		} else if (h != NULL) {
			h->abandoned = 1;
		}
	}
	return n;
}

int
requests_paced_ms(void)
{
	return sched_pace_ms();
}

unsigned
requests_in_flight(void)
{
	return jobs_count();
}

int
requests_queue_free(void)
{
	return deferring() && slow();
}

/*
 * Whether the oldest request in flight is done: its reply can be queued
 * now (requests_reap()), whatever runs after it.
 */
static int
answerable(void)
{
	(void)jobs_collect();
	return jobs_head() != NULL;
}

int
requests_wait_fd(void)
{
	/* A reply waits to be queued: the loop must not sleep. */
	if (answerable())
		return -1;
	return jobs_sleep();
}

void
requests_woke(int readable)
{
	jobs_woke(readable);
}

void
requests_idle(void)
{
	(void)requests_written();
	jobs_idle();
}

/*
 * The descriptors the server may hold besides its handles, every one in
 * the handle limit's budget: stdin, stdout and stderr; the syslog
 * connection; the transfer log and its directory; the -r root; the
 * workers' eventfd; two that one request's path calls hold for a moment
 * in the loop (a rename's two directories).  Under -r, each worker may
 * hold one more for a moment (the O_PATH descriptor of a stat beneath the
 * root): there, with few descriptors, the session has fewer workers than
 * -T says, at most half of what the handles would otherwise get, so that
 * both keep room.
 */
#define FDS_KEPT	(3 + 1 + 2 + 1 + 1 + 2)

/* The most workers at once, and the descriptors kept beside the handles. */
static unsigned
workers_for(const struct session *s)
{
	uint32_t half = handle_limit(FDS_KEPT) / 2;

	if (!s->confined || s->storage_ops <= 1 || s->storage_ops <= half)
		return s->storage_ops;
	return half > 1 ? half : 1;
}

static uint32_t
fds_kept(void)
{
	if (ss->confined && concurrent())
		return FDS_KEPT + jobs_max_workers();
	return FDS_KEPT;
}

/*
 * The handle slots: the descriptors left.  Under -A an upload holds up to
 * three, its file, its directory and the file it replaces: a third as
 * many, at least 1.
 */
static uint32_t
handles_for(const struct session *s)
{
	uint32_t n = handle_limit(fds_kept());

	return s->atomic && n > 2 ? n / 3 : n;
}

int
requests_init(const struct session *s, struct oqueue *q)
{
	ss = s;
	oq = q;
	init_done = 0;
	given_up = 0;
	for (size_t i = 0; i < NREQUESTS; i++)
		if (requests[i].ext_name == NULL)
			by_type[requests[i].type] = &requests[i];
	(void)sched_init(s->storage_ops, workers_for(s));
	sched_pace_init(s->down_rate, s->up_rate);
	return handle_table_init(&handles, handles_for(s));
}

void
requests_close_all(void)
{
	struct handle *h;

	for (uint32_t i = 0; i < handles.fresh; i++) {
		if ((h = handle_at(&handles, i)) == NULL)
			continue;
		log_close(h, "forced");
		(void)close_handle(h, 1);
	}
}

void
requests_print_names(void)
{
	/* Rows of one name (check-file's three) are next to each other. */
	for (size_t i = 0; i < NREQUESTS; i++)
		if (i == 0 ||
		    strcmp(requests[i].name, requests[i - 1].name) != 0)
			printf("%s\n", requests[i].name);
}

#ifdef SFTP_FUZZ
void
requests_free(void)
{
	jobs_free();	/* waits for every job */
	for (size_t i = 0; i < n_given_up_uploads; i++)
		free(given_up_uploads[i]);
	free(given_up_uploads);
	given_up_uploads = NULL;
	n_given_up_uploads = 0;
	handle_table_free(&handles);
}
#endif
