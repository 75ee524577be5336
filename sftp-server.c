/*
 * sftp-server: SFTP version 3 and OpenSSH's extensions over stdin and
 * stdout, a drop-in replacement for OpenSSH's sftp-server.
 *
 * One loop: read as much input as there is room for, answer every complete
 * request in it into the reply queue, write the queue out in one go.  The
 * request table below drives dispatch, -R, -P, -p and -Q alike.
 */
#include <sys/types.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/time.h>

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pwd.h>
#include <grp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "attrib.h"
#include "fs.h"
#include "handles.h"
#include "log.h"
#include "packet.h"
#include "path.h"
#include "pipes.h"
#include "sys-gnu.h"

#define SFTP_VERSION	3
/* READDIR answers at most this many names, as OpenSSH. */
#define READDIR_BATCH	100
/*
 * A session with nothing to do for this long gives back what a transfer
 * grew: pipe pages, buffer pages.
 */
#define IDLE_MS		2000
/*
 * users-groups-by-id looks up at most this many names in the system's
 * databases; other ids not in the cache are answered as unknown ("").
 */
#define ID_LOOKUPS_MAX	256
/* copy-data moves this much per system call when it copies by hand. */
#define COPY_CHUNK	(64 * 1024)

/* A request may change the file system: refused under -R. */
#define REQ_WRITES	0x1

struct request {
	const char *name;	/* as -P, -p and -Q name it */
	const char *ext_name;	/* extension name, or NULL */
	const char *ext_version;
	uint8_t type;
	void (*handler)(uint32_t, struct cursor *);
	int flags;
};

static struct ibuf ib;
static struct oqueue oq;
static struct handle_table handles;

static int readonly;
static int init_done;
static char *deny_list;
static char *allow_list;
static const char *client_addr = "UNKNOWN";
static const char *progname = "sftp-server";	/* as invoked, for logs */
static char user_name[256];
static char user_home[PATH_MAX];
static uid_t user_uid;

/* Scratch for paths: requests are handled one at a time. */
static char path1[PATH_MAX];
static char path2[PATH_MAX];
static char resolved[PATH_MAX];

static void cleanup_exit(int) __attribute__((noreturn));

#ifdef SFTP_FUZZ
#include <setjmp.h>
/*
 * Built for the fuzz harness (tests/fuzz_session.c): main() is
 * sftp_server_main(), and the end of a session jumps back to the harness
 * with its exit status instead of ending the process.
 */
jmp_buf sftp_fuzz_exit;
int sftp_fuzz_status;
int sftp_server_main(int, char **);
#define SERVER_MAIN	sftp_server_main
#else
#define SERVER_MAIN	main
#endif
static void output_failed(void) __attribute__((noreturn));
static void flush_replies(void);

/* The request table: the one list of requests. */
static void process_open(uint32_t, struct cursor *);
static void process_close(uint32_t, struct cursor *);
static void process_read(uint32_t, struct cursor *);
static void process_write(uint32_t, struct cursor *);
static void process_lstat(uint32_t, struct cursor *);
static void process_fstat(uint32_t, struct cursor *);
static void process_setstat(uint32_t, struct cursor *);
static void process_fsetstat(uint32_t, struct cursor *);
static void process_opendir(uint32_t, struct cursor *);
static void process_readdir(uint32_t, struct cursor *);
static void process_remove(uint32_t, struct cursor *);
static void process_mkdir(uint32_t, struct cursor *);
static void process_rmdir(uint32_t, struct cursor *);
static void process_realpath(uint32_t, struct cursor *);
static void process_stat(uint32_t, struct cursor *);
static void process_rename(uint32_t, struct cursor *);
static void process_readlink(uint32_t, struct cursor *);
static void process_symlink(uint32_t, struct cursor *);
static void process_ext_posix_rename(uint32_t, struct cursor *);
static void process_ext_statvfs(uint32_t, struct cursor *);
static void process_ext_fstatvfs(uint32_t, struct cursor *);
static void process_ext_hardlink(uint32_t, struct cursor *);
static void process_ext_fsync(uint32_t, struct cursor *);
static void process_ext_lsetstat(uint32_t, struct cursor *);
static void process_ext_limits(uint32_t, struct cursor *);
static void process_ext_expand_path(uint32_t, struct cursor *);
static void process_ext_copy_data(uint32_t, struct cursor *);
static void process_ext_home_directory(uint32_t, struct cursor *);
static void process_ext_users_groups(uint32_t, struct cursor *);

/* clang-format off */
static struct request requests[] = {
	{ "open", NULL, NULL, SSH_FXP_OPEN, process_open, 0 },
	{ "close", NULL, NULL, SSH_FXP_CLOSE, process_close, 0 },
	{ "read", NULL, NULL, SSH_FXP_READ, process_read, 0 },
	{ "write", NULL, NULL, SSH_FXP_WRITE, process_write, REQ_WRITES },
	{ "lstat", NULL, NULL, SSH_FXP_LSTAT, process_lstat, 0 },
	{ "fstat", NULL, NULL, SSH_FXP_FSTAT, process_fstat, 0 },
	{ "setstat", NULL, NULL, SSH_FXP_SETSTAT, process_setstat, REQ_WRITES },
	{ "fsetstat", NULL, NULL, SSH_FXP_FSETSTAT, process_fsetstat, REQ_WRITES },
	{ "opendir", NULL, NULL, SSH_FXP_OPENDIR, process_opendir, 0 },
	{ "readdir", NULL, NULL, SSH_FXP_READDIR, process_readdir, 0 },
	{ "remove", NULL, NULL, SSH_FXP_REMOVE, process_remove, REQ_WRITES },
	{ "mkdir", NULL, NULL, SSH_FXP_MKDIR, process_mkdir, REQ_WRITES },
	{ "rmdir", NULL, NULL, SSH_FXP_RMDIR, process_rmdir, REQ_WRITES },
	{ "realpath", NULL, NULL, SSH_FXP_REALPATH, process_realpath, 0 },
	{ "stat", NULL, NULL, SSH_FXP_STAT, process_stat, 0 },
	{ "rename", NULL, NULL, SSH_FXP_RENAME, process_rename, REQ_WRITES },
	{ "readlink", NULL, NULL, SSH_FXP_READLINK, process_readlink, 0 },
	{ "symlink", NULL, NULL, SSH_FXP_SYMLINK, process_symlink, REQ_WRITES },
	{ "posix-rename", "posix-rename@openssh.com", "1", SSH_FXP_EXTENDED, process_ext_posix_rename, REQ_WRITES },
	{ "statvfs", "statvfs@openssh.com", "2", SSH_FXP_EXTENDED, process_ext_statvfs, 0 },
	{ "fstatvfs", "fstatvfs@openssh.com", "2", SSH_FXP_EXTENDED, process_ext_fstatvfs, 0 },
	{ "hardlink", "hardlink@openssh.com", "1", SSH_FXP_EXTENDED, process_ext_hardlink, REQ_WRITES },
	{ "fsync", "fsync@openssh.com", "1", SSH_FXP_EXTENDED, process_ext_fsync, REQ_WRITES },
	{ "lsetstat", "lsetstat@openssh.com", "1", SSH_FXP_EXTENDED, process_ext_lsetstat, REQ_WRITES },
	{ "limits", "limits@openssh.com", "1", SSH_FXP_EXTENDED, process_ext_limits, 0 },
	{ "expand-path", "expand-path@openssh.com", "1", SSH_FXP_EXTENDED, process_ext_expand_path, 0 },
	{ "copy-data", "copy-data", "1", SSH_FXP_EXTENDED, process_ext_copy_data, REQ_WRITES },
	{ "home-directory", "home-directory", "1", SSH_FXP_EXTENDED, process_ext_home_directory, 0 },
	{ "users-groups-by-id", "users-groups-by-id@openssh.com", "1", SSH_FXP_EXTENDED, process_ext_users_groups, 0 },
};
/* clang-format on */
#define NREQUESTS	(sizeof requests / sizeof requests[0])

/* Requests by packet type, filled from the table at start. */
static struct request *by_type[256];

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

/* A reply that does not fit breaks the queue's invariant: a bug. */
static void
queued(int r)
{
	if (r != 0) {
		error("internal error: reply does not fit the queue");
		cleanup_exit(1);
	}
}

static void
send_status_msg(uint32_t id, uint32_t code, const char *msg)
{
	debug3("request %u: sent status %u", id, code);
	if (log_level > LOG_LEVEL_VERBOSE ||
	    (code != SSH_FX_OK && code != SSH_FX_EOF))
		logit("sent status %s", pkt_status_message(code));
	queued(pkt_reply_status(&oq, id, code, msg));
}

static void
send_status(uint32_t id, uint32_t code)
{
	send_status_msg(id, code, NULL);
}

static void
send_handle(uint32_t id, struct handle *h)
{
	uint8_t wire[HANDLE_LEN];

	handle_encode(&handles, h, wire);
	/* Sic: OpenSSH 9.2 says "handle" twice. */
	debug("request %u: sent handle handle %u", id, h->index);
	queued(pkt_reply_handle(&oq, id, wire, sizeof wire));
}

static void
send_name1(uint32_t id, const char *path)
{
	debug("request %u: sent names count 1", id);
	queued(pkt_reply_name1(&oq, id, path));
}

/* A field did not parse: BAD_MESSAGE, and the session goes on. */
static void
send_bad(uint32_t id, const char *what)
{
	error("%s: bad message in request %u", what, id);
	send_status(id, SSH_FX_BAD_MESSAGE);
}

static struct handle *
get_handle(struct cursor *c, enum handle_kind kind, int *rp)
{
	const uint8_t *s;
	uint32_t len;

	if ((*rp = pkt_get_string(c, &s, &len)) != 0)
		return NULL;
	return handle_lookup(&handles, s, len, kind);
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

/* Closes what the handle holds and frees its slot; 0 or -1 with errno. */
static int
close_handle(struct handle *h)
{
	int r;

	if (h->kind == HANDLE_FILE)
		r = close(h->fd);
	else
		r = closedir(h->dir);
	handle_release(&handles, h);
	return r;
}

static void
cleanup_exit(int status)
{
	struct handle *h;
	int saved = errno;

	(void)oq_flush(&oq, STDOUT_FILENO);
	for (uint32_t i = 0; i < handles.fresh; i++) {
		if ((h = handle_at(&handles, i)) == NULL)
			continue;
		log_close(h, "forced");
		(void)close_handle(h);
	}
	logit("session closed for local user %s from [%s]", user_name,
	    client_addr);
	errno = saved;
#ifdef SFTP_FUZZ
	/* The fuzz harness runs many sessions in one process. */
	ibuf_free(&ib);
	oq_free(&oq);
	handle_table_free(&handles);
	fs_reset();
	sftp_fuzz_status = status;
	longjmp(sftp_fuzz_exit, 1);
#else
	_exit(status);
#endif
}

/* stdout failed: a peer that went away ends the session quietly. */
static void
output_failed(void)
{
	if (errno == EPIPE || errno == ECONNRESET)
		cleanup_exit(0);
	error("write: %s", strerror(errno));
	cleanup_exit(2);
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
static void
check_list(const char *opt, const char *list)
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

/* Whether a request may run; logs the refusal as OpenSSH does. */
static int
request_permitted(const struct request *rq)
{
	if (readonly && (rq->flags & REQ_WRITES)) {
		verbose("Refusing %s request in read-only mode", rq->name);
		return 0;
	}
	if (deny_list != NULL && in_list(rq->name, deny_list, 0)) {
		verbose("Refusing denylisted %s request", rq->name);
		return 0;
	}
	if (allow_list != NULL && in_list(rq->name, allow_list, 1)) {
		debug2("Permitting allowlisted %s request", rq->name);
		return 1;
	}
	if (allow_list != NULL) {
		verbose("Refusing non-allowlisted %s request", rq->name);
		return 0;
	}
	return 1;
}

/* uint32 version */
static void
process_init(struct cursor *c)
{
	struct reply r;
	uint32_t version;

	if (pkt_get_u32(c, &version) != 0) {
		error("process_init: bad message");
		cleanup_exit(255);
	}
	verbose("received client version %u", version);
	queued(pkt_begin(&oq, &r, SSH_FXP_VERSION));
	queued(pkt_put_u32(&oq, SFTP_VERSION));
	/* An extension refused by -R, -P or -p is not advertised. */
	for (size_t i = 0; i < NREQUESTS; i++) {
		if (requests[i].ext_name == NULL)
			continue;
		if (!request_permitted(&requests[i])) {
			debug2("compose_extension: refusing to advertise "
			    "disallowed extension %s", requests[i].ext_name);
			continue;
		}
		queued(pkt_put_cstring(&oq, requests[i].ext_name));
		queued(pkt_put_cstring(&oq, requests[i].ext_version));
	}
	pkt_end(&oq, &r);
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
 * uint32 id, string filename, uint32 pflags, ATTRS attrs
 *
 * Opened with O_NONBLOCK, kept: a FIFO or a device never blocks the
 * session, in open(2) or after (a FIFO without a reader fails with ENXIO;
 * its READs fail, as OpenSSH's, since a FIFO has no offsets).  For regular
 * files and directories Linux ignores the flag.
 */
static void
process_open(uint32_t id, struct cursor *c)
{
	struct sftp_attrs a;
	struct handle *h;
	uint32_t pflags, status = SSH_FX_FAILURE;
	char fl[64];
	int r, flags, fd;
	mode_t mode;

	if ((r = pkt_get_path(c, path1, sizeof path1)) != 0 ||
	    (r = pkt_get_u32(c, &pflags)) != 0 ||
	    (r = pkt_get_attrs(c, &a)) != 0) {
		send_bad(id, "open");
		return;
	}
	debug3("request %u: open flags %d", id, (int)pflags);
	flags = flags_from_portable(pflags);
	mode = (a.flags & SSH_FILEXFER_ATTR_PERMISSIONS) ? a.perm : 0666;
	if (log_level >= LOG_LEVEL_INFO) {
		string_from_portable(pflags, fl, sizeof fl);
		logit("open \"%s\" flags %s mode 0%o", path1, fl,
		    (unsigned)mode);
	}
	if (readonly && ((flags & O_ACCMODE) != O_RDONLY ||
	    (flags & (O_CREAT | O_TRUNC)) != 0)) {
		verbose("Refusing open request in read-only mode");
		status = SSH_FX_PERMISSION_DENIED;
	} else if ((fd = fs_open(path1, flags | O_NONBLOCK | O_NOCTTY,
	    mode)) == -1) {
		status = errno_to_status(errno);
	} else if ((h = handle_new(&handles, HANDLE_FILE, path1)) == NULL) {
		(void)close(fd);	/* out of handles: FAILURE */
	} else {
		h->fd = fd;
		h->flags = flags;
		(void)clock_gettime(CLOCK_MONOTONIC, &h->opened);
		send_handle(id, h);
		return;
	}
	send_status(id, status);
}

/* uint32 id, string handle */
static void
process_close(uint32_t id, struct cursor *c)
{
	struct handle *h;
	int r;

	h = get_handle(c, HANDLE_FREE, &r);
	if (r != 0) {
		send_bad(id, "close");
		return;
	}
	debug3("request %u: close handle %d", id, handle_index(h));
	if (h == NULL) {
		/* As OpenSSH: an unknown handle is "no such file". */
		send_status(id, SSH_FX_NO_SUCH_FILE);
		return;
	}
	log_close(h, NULL);
	if (close_handle(h) == -1)
		send_status(id, errno_to_status(errno));
	else
		send_status(id, SSH_FX_OK);
}

/*
 * OpenSSH seeks before every read and write, so an offset the file system
 * cannot hold fails there, with EINVAL: BAD_MESSAGE.  We seek only for
 * offsets past 2^40, so that the common case costs no system call.  Returns
 * 1 with errno set for a bad offset.
 */
static int
bad_offset(struct handle *h, uint64_t off)
{
	if (off > (uint64_t)INT64_MAX) {
		errno = EINVAL;
		return 1;
	}
	if (off >= (uint64_t)1 << 40 && lseek(h->fd, (off_t)off, SEEK_SET) == -1)
		return 1;
	return 0;
}

/*
 * Reads until len bytes or end of file: unlike OpenSSH's single read(2), a
 * short read is never passed on, since OpenSSH's client shrinks its request
 * size for the rest of the file after one.  Returns bytes read or -1.
 */
static ssize_t
read_full(int fd, uint8_t *buf, size_t len, off_t off)
{
	size_t got = 0;
	ssize_t n;

	while (got < len) {
		n = pread(fd, buf + got, len - got, off + (off_t)got);
		if (n == -1) {
			if (errno == EINTR)
				continue;
			if (got > 0)
				break;
			return -1;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	return (ssize_t)got;
}

/* uint32 id, string handle, uint64 offset, uint32 len */
static void
process_read(uint32_t id, struct cursor *c)
{
	struct handle *h;
	struct reply rep;
	uint64_t off;
	uint32_t len;
	uint8_t *buf;
	ssize_t n;
	int r;

	h = get_handle(c, HANDLE_FILE, &r);
	if (r != 0 || (r = pkt_get_u64(c, &off)) != 0 ||
	    (r = pkt_get_u32(c, &len)) != 0) {
		send_bad(id, "read");
		return;
	}
	debug("request %u: read \"%s\" (handle %d) off %llu len %u", id,
	    handle_name(h), handle_index(h), (unsigned long long)off, len);
	if (h == NULL) {
		send_status(id, SSH_FX_FAILURE);
		return;
	}
	if (len > SFTP_MAX_READ) {
		debug2("read change len %u to %u", len, SFTP_MAX_READ);
		len = SFTP_MAX_READ;
	}
	if (bad_offset(h, off)) {
		send_status(id, errno_to_status(errno));
		return;
	}
	if ((buf = pkt_data_begin(&oq, &rep, id, len)) == NULL)
		queued(PKT_ENOSPACE);
	n = len == 0 ? 0 : read_full(h->fd, buf, len, (off_t)off);
	if (n == -1) {
		int e = errno;

		pkt_cancel(&oq, &rep);
		error("process_read: read \"%.100s\": %s", h->path,
		    strerror(e));
		send_status(id, errno_to_status(e));
		return;
	}
	if (n == 0 && len > 0) {
		pkt_cancel(&oq, &rep);
		send_status(id, SSH_FX_EOF);
		return;
	}
	pkt_data_end(&oq, &rep, (size_t)n);
	debug("request %u: sent data len %d", id, (int)n);
	h->bytes_read += (uint64_t)n;
}

/*
 * Writes all of buf, at off or, for an O_APPEND handle, at the end (as
 * OpenSSH, the offset is then ignored).  Returns 0, or -1 with errno: the
 * bytes before the failure may be on disk, but are never acknowledged.
 */
static int
write_full(struct handle *h, const uint8_t *buf, size_t len, off_t off)
{
	size_t done = 0;
	ssize_t n;

	while (done < len) {
		if (h->flags & O_APPEND)
			n = write(h->fd, buf + done, len - done);
		else
			n = pwrite(h->fd, buf + done, len - done,
			    off + (off_t)done);
		if (n == -1) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (n == 0) {
			errno = EIO;
			return -1;
		}
		done += (size_t)n;
		h->bytes_written += (uint64_t)n;
	}
	return 0;
}

/* uint32 id, string handle, uint64 offset, string data */
static void
process_write(uint32_t id, struct cursor *c)
{
	const uint8_t *data;
	struct handle *h;
	uint32_t len, status = SSH_FX_OK;
	uint64_t off;
	int r;

	h = get_handle(c, HANDLE_FILE, &r);
	if (r != 0 || (r = pkt_get_u64(c, &off)) != 0 ||
	    (r = pkt_get_string(c, &data, &len)) != 0) {
		send_bad(id, "write");
		return;
	}
	debug("request %u: write \"%s\" (handle %d) off %llu len %u", id,
	    handle_name(h), handle_index(h), (unsigned long long)off, len);
	if (h == NULL) {
		status = SSH_FX_FAILURE;
	} else if (off > (uint64_t)INT64_MAX - len) {
		status = SSH_FX_BAD_MESSAGE;
	} else if (!(h->flags & O_APPEND) && bad_offset(h, off)) {
		status = errno_to_status(errno);
	} else if (write_full(h, data, len, (off_t)off) == -1) {
		status = errno_to_status(errno);
		error("process_write: write \"%.100s\": %s", h->path,
		    strerror(errno));
	}
	send_status(id, status);
}

static void
do_stat(uint32_t id, struct cursor *c, int follow)
{
	struct sftp_attrs a;
	struct stat st;
	int r;

	if ((r = pkt_get_path(c, path1, sizeof path1)) != 0) {
		send_bad(id, follow ? "stat" : "lstat");
		return;
	}
	debug3("request %u: %sstat", id, follow ? "" : "l");
	verbose("%sstat name \"%s\"", follow ? "" : "l", path1);
	r = fs_stat(path1, &st, follow);
	if (r == -1) {
		send_status(id, errno_to_status(errno));
		return;
	}
	attrs_from_stat(&st, &a);
	debug("request %u: sent attrib have 0x%x", id, a.flags);
	queued(pkt_reply_attrs(&oq, id, &a));
}

/* uint32 id, string path */
static void
process_lstat(uint32_t id, struct cursor *c)
{
	do_stat(id, c, 0);
}

/* uint32 id, string path */
static void
process_stat(uint32_t id, struct cursor *c)
{
	do_stat(id, c, 1);
}

/* uint32 id, string handle */
static void
process_fstat(uint32_t id, struct cursor *c)
{
	struct sftp_attrs a;
	struct handle *h;
	struct stat st;
	int r;

	h = get_handle(c, HANDLE_FILE, &r);
	if (r != 0) {
		send_bad(id, "fstat");
		return;
	}
	debug("request %u: fstat \"%s\" (handle %d)", id, handle_name(h),
	    handle_index(h));
	if (h == NULL) {
		send_status(id, SSH_FX_FAILURE);
		return;
	}
	if (fstat(h->fd, &st) == -1) {
		send_status(id, errno_to_status(errno));
		return;
	}
	attrs_from_stat(&st, &a);
	queued(pkt_reply_attrs(&oq, id, &a));
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
 * SETSTAT and FSETSTAT: size, permissions, times, then owner, each tried
 * even when an earlier one failed; as OpenSSH, the last failure is the
 * status.  fd is -1 to work on the path.
 */
static uint32_t
apply_attrs(const char *name, int fd, const struct sftp_attrs *a)
{
	struct timespec ts[2];
	uint32_t status = SSH_FX_OK;

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
		if ((fd == -1 ? fs_chmod(name, a->perm & 07777, 1) :
		    fchmod(fd, a->perm & 07777)) == -1)
			status = errno_to_status(errno);
	}
	if (a->flags & SSH_FILEXFER_ATTR_ACMODTIME) {
		log_modtime(name, a->mtime);
		ts[0].tv_sec = (time_t)a->atime;
		ts[0].tv_nsec = 0;
		ts[1].tv_sec = (time_t)a->mtime;
		ts[1].tv_nsec = 0;
		if ((fd == -1 ? fs_utimes(name, ts, 1) :
		    futimens(fd, ts)) == -1)
			status = errno_to_status(errno);
	}
	if (a->flags & SSH_FILEXFER_ATTR_UIDGID) {
		logit("set \"%s\" owner %lu group %lu", name,
		    (unsigned long)a->uid, (unsigned long)a->gid);
		if ((fd == -1 ? fs_chown(name, a->uid, a->gid, 1) :
		    fchown(fd, a->uid, a->gid)) == -1)
			status = errno_to_status(errno);
	}
	return status;
}

/* uint32 id, string path, ATTRS attrs */
static void
process_setstat(uint32_t id, struct cursor *c)
{
	struct sftp_attrs a;
	int r;

	if ((r = pkt_get_path(c, path1, sizeof path1)) != 0 ||
	    (r = pkt_get_attrs(c, &a)) != 0) {
		send_bad(id, "setstat");
		return;
	}
	debug("request %u: setstat name \"%s\"", id, path1);
	send_status(id, apply_attrs(path1, -1, &a));
}

/* uint32 id, string handle, ATTRS attrs */
static void
process_fsetstat(uint32_t id, struct cursor *c)
{
	struct sftp_attrs a;
	struct handle *h;
	int r;

	h = get_handle(c, HANDLE_FILE, &r);
	if (r != 0 || (r = pkt_get_attrs(c, &a)) != 0) {
		send_bad(id, "fsetstat");
		return;
	}
	debug("request %u: fsetstat handle %d", id, handle_index(h));
	if (h == NULL) {
		send_status(id, SSH_FX_FAILURE);
		return;
	}
	send_status(id, apply_attrs(h->path, h->fd, &a));
}

/* uint32 id, string path */
static void
process_opendir(uint32_t id, struct cursor *c)
{
	struct handle *h;
	DIR *d;
	int r;

	if ((r = pkt_get_path(c, path1, sizeof path1)) != 0) {
		send_bad(id, "opendir");
		return;
	}
	debug3("request %u: opendir", id);
	logit("opendir \"%s\"", path1);
	if ((d = fs_opendir(path1)) == NULL) {
		send_status(id, errno_to_status(errno));
		return;
	}
	if ((h = handle_new(&handles, HANDLE_DIR, path1)) == NULL) {
		(void)closedir(d);	/* out of handles: FAILURE */
		send_status(id, SSH_FX_FAILURE);
		return;
	}
	h->dir = d;
	h->fd = dirfd(d);
	(void)clock_gettime(CLOCK_MONOTONIC, &h->opened);
	send_handle(id, h);
}

/*
 * uint32 id, string handle
 *
 * Up to READDIR_BATCH names, each stat'ed relative to the directory's own
 * descriptor; an entry that vanished in between is skipped, as OpenSSH.
 */
static void
process_readdir(uint32_t id, struct cursor *c)
{
	char longname[LONGNAME_MAX];
	struct sftp_attrs a;
	struct dirent *de;
	struct handle *h;
	struct reply rep;
	struct stat st;
	time_t now;
	int r;

	h = get_handle(c, HANDLE_DIR, &r);
	if (r != 0) {
		send_bad(id, "readdir");
		return;
	}
	debug("request %u: readdir \"%s\" (handle %d)", id, handle_name(h),
	    handle_index(h));
	if (h == NULL) {
		send_status(id, SSH_FX_FAILURE);
		return;
	}
	now = time(NULL);
	queued(pkt_name_begin(&oq, &rep, id));
	while (rep.count < READDIR_BATCH) {
		errno = 0;
		if ((de = readdir(h->dir)) == NULL)
			break;
		if (fs_stat_entry(h->fd, de->d_name, &st) == -1)
			continue;
		attrs_from_stat(&st, &a);
		attrs_longname(longname, de->d_name, &st, now);
		/* Cannot fail: 100 entries of at most 2.3 KiB fit a message. */
		queued(pkt_name_add(&oq, &rep, de->d_name, longname, &a));
	}
	if (rep.count == 0) {
		pkt_cancel(&oq, &rep);
		send_status(id, SSH_FX_EOF);
		return;
	}
	pkt_name_end(&oq, &rep);
	debug("request %u: sent names count %u", id, rep.count);
}

/* uint32 id, string filename */
static void
process_remove(uint32_t id, struct cursor *c)
{
	int r;

	if ((r = pkt_get_path(c, path1, sizeof path1)) != 0) {
		send_bad(id, "remove");
		return;
	}
	debug3("request %u: remove", id);
	logit("remove name \"%s\"", path1);
	r = fs_unlink(path1);
	send_status(id, r == -1 ? errno_to_status(errno) : SSH_FX_OK);
}

/* uint32 id, string path, ATTRS attrs */
static void
process_mkdir(uint32_t id, struct cursor *c)
{
	struct sftp_attrs a;
	mode_t mode;
	int r;

	if ((r = pkt_get_path(c, path1, sizeof path1)) != 0 ||
	    (r = pkt_get_attrs(c, &a)) != 0) {
		send_bad(id, "mkdir");
		return;
	}
	mode = (a.flags & SSH_FILEXFER_ATTR_PERMISSIONS) ? a.perm & 07777 :
	    0777;
	debug3("request %u: mkdir", id);
	logit("mkdir name \"%s\" mode 0%o", path1, (unsigned)mode);
	r = fs_mkdir(path1, mode);
	send_status(id, r == -1 ? errno_to_status(errno) : SSH_FX_OK);
}

/* uint32 id, string path */
static void
process_rmdir(uint32_t id, struct cursor *c)
{
	int r;

	if ((r = pkt_get_path(c, path1, sizeof path1)) != 0) {
		send_bad(id, "rmdir");
		return;
	}
	debug3("request %u: rmdir", id);
	logit("rmdir name \"%s\"", path1);
	r = fs_rmdir(path1);
	send_status(id, r == -1 ? errno_to_status(errno) : SSH_FX_OK);
}

/* uint32 id, string path */
static void
process_realpath(uint32_t id, struct cursor *c)
{
	int r;

	if ((r = pkt_get_path(c, path1, sizeof path1)) != 0) {
		send_bad(id, "realpath");
		return;
	}
	if (path1[0] == '\0')
		memcpy(path1, ".", 2);
	debug3("request %u: realpath", id);
	verbose("realpath \"%s\"", path1);
	if (fs_realpath(path1, resolved) == -1) {
		send_status(id, errno_to_status(errno));
		return;
	}
	send_name1(id, resolved);
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

			(void)fs_unlink(newpath);	/* drop the spare link */
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
static void
process_rename(uint32_t id, struct cursor *c)
{
	int r;

	if ((r = pkt_get_path(c, path1, sizeof path1)) != 0 ||
	    (r = pkt_get_path(c, path2, sizeof path2)) != 0) {
		send_bad(id, "rename");
		return;
	}
	debug3("request %u: rename", id);
	logit("rename old \"%s\" new \"%s\"", path1, path2);
	send_status(id, rename_noreplace(path1, path2));
}

/* uint32 id, string path */
static void
process_readlink(uint32_t id, struct cursor *c)
{
	ssize_t len;
	int r;

	if ((r = pkt_get_path(c, path1, sizeof path1)) != 0) {
		send_bad(id, "readlink");
		return;
	}
	debug3("request %u: readlink", id);
	verbose("readlink \"%s\"", path1);
	if ((len = fs_readlink(path1, resolved, sizeof resolved - 1)) == -1) {
		send_status(id, errno_to_status(errno));
		return;
	}
	resolved[len] = '\0';
	send_name1(id, resolved);
}

/*
 * uint32 id, string targetpath, string linkpath
 *
 * As OpenSSH, and every client written against it, the target comes first:
 * the reverse of draft-02's order (OpenSSH's PROTOCOL, section 4.1).
 */
static void
process_symlink(uint32_t id, struct cursor *c)
{
	int r;

	if ((r = pkt_get_path(c, path1, sizeof path1)) != 0 ||
	    (r = pkt_get_path(c, path2, sizeof path2)) != 0) {
		send_bad(id, "symlink");
		return;
	}
	debug3("request %u: symlink", id);
	logit("symlink old \"%s\" new \"%s\"", path1, path2);
	r = fs_symlink(path1, path2);
	send_status(id, r == -1 ? errno_to_status(errno) : SSH_FX_OK);
}

/* uint32 id, string "posix-rename@openssh.com", string old, string new */
static void
process_ext_posix_rename(uint32_t id, struct cursor *c)
{
	int r;

	if ((r = pkt_get_path(c, path1, sizeof path1)) != 0 ||
	    (r = pkt_get_path(c, path2, sizeof path2)) != 0) {
		send_bad(id, "posix-rename");
		return;
	}
	debug3("request %u: posix-rename", id);
	logit("posix-rename old \"%s\" new \"%s\"", path1, path2);
	r = fs_rename(path1, path2, 0);
	send_status(id, r == -1 ? errno_to_status(errno) : SSH_FX_OK);
}

static void
send_statvfs(uint32_t id, const struct statvfs *st)
{
	struct reply rep;
	uint64_t flag;

	flag = (st->f_flag & ST_RDONLY) ? 0x1 : 0;
	flag |= (st->f_flag & ST_NOSUID) ? 0x2 : 0;
	queued(pkt_begin(&oq, &rep, SSH_FXP_EXTENDED_REPLY));
	queued(pkt_put_u32(&oq, id));
	queued(pkt_put_u64(&oq, st->f_bsize));
	queued(pkt_put_u64(&oq, st->f_frsize));
	queued(pkt_put_u64(&oq, st->f_blocks));
	queued(pkt_put_u64(&oq, st->f_bfree));
	queued(pkt_put_u64(&oq, st->f_bavail));
	queued(pkt_put_u64(&oq, st->f_files));
	queued(pkt_put_u64(&oq, st->f_ffree));
	queued(pkt_put_u64(&oq, st->f_favail));
	queued(pkt_put_u64(&oq, st->f_fsid));
	queued(pkt_put_u64(&oq, flag));
	queued(pkt_put_u64(&oq, st->f_namemax));
	pkt_end(&oq, &rep);
}

/* uint32 id, string "statvfs@openssh.com", string path */
static void
process_ext_statvfs(uint32_t id, struct cursor *c)
{
	struct statvfs st;
	int r;

	if ((r = pkt_get_path(c, path1, sizeof path1)) != 0) {
		send_bad(id, "statvfs");
		return;
	}
	debug3("request %u: statvfs", id);
	logit("statvfs \"%s\"", path1);
	if (fs_statvfs(path1, &st) == -1) {
		send_status(id, errno_to_status(errno));
		return;
	}
	send_statvfs(id, &st);
}

/* uint32 id, string "fstatvfs@openssh.com", string handle */
static void
process_ext_fstatvfs(uint32_t id, struct cursor *c)
{
	struct statvfs st;
	struct handle *h;
	int r;

	h = get_handle(c, HANDLE_FILE, &r);
	if (r != 0) {
		send_bad(id, "fstatvfs");
		return;
	}
	debug("request %u: fstatvfs \"%s\" (handle %d)", id, handle_name(h),
	    handle_index(h));
	if (h == NULL) {
		send_status(id, SSH_FX_FAILURE);
		return;
	}
	if (fstatvfs(h->fd, &st) == -1) {
		send_status(id, errno_to_status(errno));
		return;
	}
	send_statvfs(id, &st);
}

/* uint32 id, string "hardlink@openssh.com", string old, string new */
static void
process_ext_hardlink(uint32_t id, struct cursor *c)
{
	int r;

	if ((r = pkt_get_path(c, path1, sizeof path1)) != 0 ||
	    (r = pkt_get_path(c, path2, sizeof path2)) != 0) {
		send_bad(id, "hardlink");
		return;
	}
	debug3("request %u: hardlink", id);
	logit("hardlink old \"%s\" new \"%s\"", path1, path2);
	r = fs_link(path1, path2);
	send_status(id, r == -1 ? errno_to_status(errno) : SSH_FX_OK);
}

/* uint32 id, string "fsync@openssh.com", string handle */
static void
process_ext_fsync(uint32_t id, struct cursor *c)
{
	struct handle *h;
	int r;

	h = get_handle(c, HANDLE_FREE, &r);
	if (r != 0) {
		send_bad(id, "fsync");
		return;
	}
	debug3("request %u: fsync (handle %d)", id, handle_index(h));
	verbose("fsync \"%s\"", handle_name(h));
	if (h == NULL || h->kind != HANDLE_FILE) {
		send_status(id, SSH_FX_NO_SUCH_FILE);
		return;
	}
	r = fsync(h->fd);
	send_status(id, r == -1 ? errno_to_status(errno) : SSH_FX_OK);
}

/*
 * uint32 id, string "lsetstat@openssh.com", string path, ATTRS attrs
 *
 * As SETSTAT, but on a symlink itself.  A size makes no sense for a link:
 * BAD_MESSAGE, as OpenSSH.  Linux cannot chmod a link: FAILURE.
 */
static void
process_ext_lsetstat(uint32_t id, struct cursor *c)
{
	struct sftp_attrs a;
	struct timespec ts[2];
	uint32_t status = SSH_FX_OK;
	int r;

	if ((r = pkt_get_path(c, path1, sizeof path1)) != 0 ||
	    (r = pkt_get_attrs(c, &a)) != 0) {
		send_bad(id, "lsetstat");
		return;
	}
	debug("request %u: lsetstat name \"%s\"", id, path1);
	if (a.flags & SSH_FILEXFER_ATTR_SIZE) {
		send_status(id, SSH_FX_BAD_MESSAGE);
		return;
	}
	if (a.flags & SSH_FILEXFER_ATTR_PERMISSIONS) {
		logit("set \"%s\" mode %04o", path1, a.perm);
		if (fs_chmod(path1, a.perm & 07777, 0) == -1)
			status = errno_to_status(errno);
	}
	if (a.flags & SSH_FILEXFER_ATTR_ACMODTIME) {
		log_modtime(path1, a.mtime);
		ts[0].tv_sec = (time_t)a.atime;
		ts[0].tv_nsec = 0;
		ts[1].tv_sec = (time_t)a.mtime;
		ts[1].tv_nsec = 0;
		if (fs_utimes(path1, ts, 0) == -1)
			status = errno_to_status(errno);
	}
	if (a.flags & SSH_FILEXFER_ATTR_UIDGID) {
		logit("set \"%s\" owner %lu group %lu", path1,
		    (unsigned long)a.uid, (unsigned long)a.gid);
		if (fs_chown(path1, a.uid, a.gid, 0) == -1)
			status = errno_to_status(errno);
	}
	send_status(id, status);
}

/* uint32 id, string "limits@openssh.com" */
static void
process_ext_limits(uint32_t id, struct cursor *c)
{
	struct reply rep;

	(void)c;
	debug("request %u: limits", id);
	queued(pkt_begin(&oq, &rep, SSH_FXP_EXTENDED_REPLY));
	queued(pkt_put_u32(&oq, id));
	queued(pkt_put_u64(&oq, SFTP_MAX_MSG));
	queued(pkt_put_u64(&oq, SFTP_MAX_READ));
	queued(pkt_put_u64(&oq, SFTP_MAX_MSG - 1024));
	queued(pkt_put_u64(&oq, handles.nslots));
	pkt_end(&oq, &rep);
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

	if (path_tilde(in, user_home, out, size) == -1)
		return -1;
	if (!fs_confined() || fs_visible(out, out, size) == 0)
		return 0;
	if (len != strlen(user_name) || strncmp(in + 1, user_name, len) != 0) {
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
static void
process_ext_expand_path(uint32_t id, struct cursor *c)
{
	char *user;
	int r;

	if ((r = pkt_get_path(c, path1, sizeof path1)) != 0) {
		send_bad(id, "expand-path");
		return;
	}
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
				error("tilde_expand: No such user %s", user);
				send_status_msg(id, SSH_FX_NO_SUCH_FILE,
				    "no such user");
			} else {
				send_status(id, errno_to_status(errno));
			}
			return;
		}
	} else {
		memcpy(path2, path1, strlen(path1) + 1);
	}
	verbose("expand \"%s\"", path2);
	if (fs_realpath(path2, resolved) == -1) {
		send_status(id, errno_to_status(errno));
		return;
	}
	send_name1(id, resolved);
}

/* Copies by hand what copy_file_range() could not. */
static int
copy_loop(struct handle *rh, off_t roff, struct handle *wh, off_t woff,
    uint64_t len, int to_eof, uint64_t *copied)
{
	static uint8_t buf[COPY_CHUNK];
	size_t want;
	ssize_t n;

	*copied = 0;
	while (to_eof || *copied < len) {
		want = sizeof buf;
		if (!to_eof && len - *copied < want)
			want = (size_t)(len - *copied);
		n = pread(rh->fd, buf, want, roff);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1)
			return -1;
		if (n == 0)
			break;
		rh->bytes_read += (uint64_t)n;
		if (write_full(wh, buf, (size_t)n, woff) == -1)
			return -1;
		roff += n;
		if (!(wh->flags & O_APPEND))
			woff += n;	/* appends ignore it, and it may be huge */
		*copied += (uint64_t)n;
	}
	return 0;
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
 * Copies with copy_file_range() while the kernel can, then by hand.
 * Returns SSH_FX_OK, SSH_FX_EOF when the input ended before len bytes, or
 * a failure status.
 */
static uint32_t
copy_range(struct handle *rh, uint64_t roff, struct handle *wh,
    uint64_t woff, uint64_t len)
{
	int to_eof = len == 0, append = (wh->flags & O_APPEND) != 0;
	off_t ro = (off_t)roff, wo = (off_t)woff;
	uint64_t done = 0, more;
	ssize_t n;
	size_t want;

	while (!append && (to_eof || done < len)) {
		want = (to_eof || len - done > SSIZE_MAX / 2) ? SSIZE_MAX / 2 :
		    (size_t)(len - done);
		n = sys_copy_range(rh->fd, &ro, wh->fd, &wo, want);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1 && (errno == ENOSYS || errno == EXDEV ||
		    errno == EINVAL || errno == EOPNOTSUPP))
			break;
		if (n == -1)
			return errno_to_status(errno);
		if (n == 0)
			return to_eof || !copy_hit_eof(done, len) ? SSH_FX_OK :
			    SSH_FX_EOF;
		rh->bytes_read += (uint64_t)n;
		wh->bytes_written += (uint64_t)n;
		done += (uint64_t)n;
	}
	if (!to_eof && done == len)
		return SSH_FX_OK;
	if (copy_loop(rh, ro, wh, wo, len - done, to_eof, &more) == -1) {
		error("process_extended_copy_data: copy failed: %s",
		    strerror(errno));
		return errno_to_status(errno);
	}
	done += more;
	if (!to_eof && done < len && copy_hit_eof(done, len))
		return SSH_FX_EOF;
	return SSH_FX_OK;
}

/*
 * uint32 id, string "copy-data", string read-from-handle,
 * uint64 read-from-offset, uint64 read-data-length,
 * string write-to-handle, uint64 write-to-offset
 *
 * Length 0 copies to end of file.  The same handle, the same path or (as
 * OpenSSH 10.4) the same file on both sides is refused: the copy would read
 * what it writes.
 */
static void
process_ext_copy_data(uint32_t id, struct cursor *c)
{
	uint64_t roff, rlen, woff;
	struct handle *rh, *wh;
	struct stat rst, wst;
	int r;

	rh = get_handle(c, HANDLE_FILE, &r);
	if (r != 0 || (r = pkt_get_u64(c, &roff)) != 0 ||
	    (r = pkt_get_u64(c, &rlen)) != 0) {
		send_bad(id, "copy-data");
		return;
	}
	wh = get_handle(c, HANDLE_FILE, &r);
	if (r != 0 || (r = pkt_get_u64(c, &woff)) != 0) {
		send_bad(id, "copy-data");
		return;
	}
	debug("request %u: copy-data from \"%s\" (handle %d) off %llu len "
	    "%llu to \"%s\" (handle %d) off %llu", id, handle_name(rh),
	    handle_index(rh), (unsigned long long)roff,
	    (unsigned long long)rlen, handle_name(wh), handle_index(wh),
	    (unsigned long long)woff);
	if (rh == NULL || wh == NULL || rh == wh ||
	    strcmp(rh->path, wh->path) == 0) {
		send_status(id, SSH_FX_FAILURE);
		return;
	}
	if (fstat(rh->fd, &rst) == -1 || fstat(wh->fd, &wst) == -1) {
		send_status(id, errno_to_status(errno));
		return;
	}
	if (rst.st_dev == wst.st_dev && rst.st_ino == wst.st_ino) {
		send_status(id, SSH_FX_FAILURE);
		return;
	}
	if (roff > (uint64_t)INT64_MAX || woff > (uint64_t)INT64_MAX ||
	    rlen > (uint64_t)INT64_MAX - roff) {
		send_status(id, SSH_FX_BAD_MESSAGE);
		return;
	}
	send_status(id, copy_range(rh, roff, wh, woff, rlen));
}

/*
 * uint32 id, string "home-directory", string username
 *
 * As OpenSSH 9.8 and later: an empty name is the session's user.
 */
static void
process_ext_home_directory(uint32_t id, struct cursor *c)
{
	struct passwd *pw;
	const char *home;
	int r;

	if ((r = pkt_get_path(c, path1, sizeof path1)) != 0) {
		send_bad(id, "home-directory");
		return;
	}
	debug("request %u: home-directory \"%s\"", id, path1);
	if (path1[0] == '\0') {
		home = user_home;
	} else if ((pw = getpwnam(path1)) != NULL) {
		home = pw->pw_dir;
	} else {
		send_status(id, SSH_FX_FAILURE);
		return;
	}
	/*
	 * Under -r, a home is answered as the client sees it; the client's own
	 * home outside the root is the root, another user's is FAILURE.
	 */
	if (fs_visible(home, resolved, sizeof resolved) == 0) {
		home = resolved;
	} else if (path1[0] == '\0' || strcmp(path1, user_name) == 0) {
		home = "/";
	} else {
		send_status(id, SSH_FX_FAILURE);
		return;
	}
	verbose("home-directory \"%s\"", home);
	send_name1(id, home);
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
	mark = pkt_mark(&oq);
	if ((r = pkt_put_u32(&oq, 0)) != 0)
		return r;
	while (c.left > 0) {
		if ((r = pkt_get_u32(&c, &v)) != 0)
			return r;
		name = groups ? attrs_group_known((gid_t)v) :
		    attrs_user_known((uid_t)v);
		debug3("process_extended_get_users_groups_by_id: %s %u => "
		    "\"%s\"", groups ? "gid" : "uid", v,
		    name != NULL ? name : "");
		if ((r = pkt_put_cstring(&oq, name != NULL ? name : "")) != 0)
			return r;
		(*count)++;
	}
	pkt_patch_u32(&oq, mark, (uint32_t)(pkt_mark(&oq) - mark - 4));
	return 0;
}

/*
 * uint32 id, string "users-groups-by-id@openssh.com", string uids,
 * string gids; each a packed list of uint32.  Names come back in order,
 * "" for an id without one.
 */
static void
process_ext_users_groups(uint32_t id, struct cursor *c)
{
	const uint8_t *uids, *gids;
	uint32_t ulen, glen;
	unsigned nusers, ngroups;
	struct reply rep;
	int r;

	if ((r = pkt_get_string(c, &uids, &ulen)) != 0 ||
	    (r = pkt_get_string(c, &gids, &glen)) != 0 || ulen % 4 != 0 ||
	    glen % 4 != 0) {
		send_bad(id, "users-groups-by-id");
		return;
	}
	debug("process_extended_get_users_groups_by_id: uids len = %u, "
	    "gids len = %u", ulen, glen);
	queued(pkt_begin(&oq, &rep, SSH_FXP_EXTENDED_REPLY));
	queued(pkt_put_u32(&oq, id));
	attrs_lookup_budget(ID_LOOKUPS_MAX);
	r = put_names(uids, ulen, 0, &nusers);
	if (r == 0)
		r = put_names(gids, glen, 1, &ngroups);
	attrs_lookup_budget(ATTRS_LOOKUPS_UNLIMITED);
	if (r != 0) {
		/* More names than one message holds. */
		pkt_cancel(&oq, &rep);
		send_status(id, SSH_FX_FAILURE);
		return;
	}
	verbose("users-groups-by-id: %u users, %u groups", nusers, ngroups);
	pkt_end(&oq, &rep);
}

static struct request *
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
 * One request: every request gets exactly one reply.  Unlike OpenSSH, an
 * unknown packet type is answered with OP_UNSUPPORTED (OpenSSH says
 * nothing and the client waits forever), and a request whose fields do not
 * parse gets BAD_MESSAGE instead of ending the session.
 */
static void
process(struct cursor *c)
{
	struct request *rq;
	const uint8_t *name;
	uint32_t id, len;
	uint64_t before;
	uint8_t type;

	if (pkt_get_u8(c, &type) != 0)
		abort();	/* ibuf_next() never yields an empty body */
	if (type == SSH_FXP_INIT) {
		process_init(c);
		init_done = 1;
		return;
	}
	if (!init_done) {
		error("Received %u request before init", type);
		cleanup_exit(255);
	}
	before = oq.nreplies;
	if (pkt_get_u32(c, &id) != 0) {
		send_bad(0, "request");
		return;
	}
	if (type == SSH_FXP_EXTENDED) {
		if (pkt_get_string(c, &name, &len) != 0) {
			send_bad(id, "extended");
			return;
		}
		if ((rq = ext_by_name(name, len)) == NULL) {
			error("Unknown extended request \"%.*s\"",
			    (int)(len > 100 ? 100 : len), (const char *)name);
			send_status(id, SSH_FX_OP_UNSUPPORTED);
			return;
		}
	} else if ((rq = by_type[type]) == NULL) {
		error("Unknown message %u", type);
		send_status(id, SSH_FX_OP_UNSUPPORTED);
		return;
	}
	if (!request_permitted(rq)) {
		send_status(id, SSH_FX_PERMISSION_DENIED);
	} else {
		rq->handler(id, c);
	}
	assert(oq.nreplies == before + 1);
	(void)before;
}

/* Writes the queue out. */
static void
flush_replies(void)
{
	pipes_write(oq_pending(&oq));
	if (oq_flush(&oq, STDOUT_FILENO) == -1)
		output_failed();
}

/*
 * Waits until stdin has input, for at most timeout ms (-1: no limit).
 * Returns 1 when it has, 0 on timeout.  When stdout's reader is gone no
 * reply can ever be sent, so the session ends there, whatever it waits
 * for.
 */
static int
wait_input(int timeout)
{
	struct pollfd pfd[2];
	int n;

	pfd[0].fd = STDIN_FILENO;
	pfd[0].events = POLLIN;
	pfd[1].fd = STDOUT_FILENO;
	pfd[1].events = 0;	/* POLLERR and POLLHUP come unasked */
	if ((n = poll(pfd, 2, timeout)) == -1) {
		if (errno == EINTR)
			return 1;
		error("poll: %s", strerror(errno));
		cleanup_exit(1);
	}
	if (pfd[0].revents != 0)
		return 1;	/* input, or its end: read it */
	if (pfd[1].revents & (POLLERR | POLLHUP)) {
		debug("output closed");
		cleanup_exit(0);
	}
	return n > 0;
}

/*
 * Nothing to do: the buffers' pages and the pipes' go back, so that an idle
 * session holds little.  Returns the next wait: IDLE_MS again while a pipe
 * still held data, else no limit.
 */
static int
go_idle(void)
{
	ibuf_release(&ib);
	oq_release(&oq);
	return pipes_idle() == 0 ? -1 : IDLE_MS;
}

static void
serve(void)
{
	struct cursor c;
	uint32_t len;
	ssize_t n;
	int r, timeout = IDLE_MS;

	for (;;) {
		/* Answer every complete request while the queue has room. */
		while (oq_pending(&oq) < OQ_HIWAT &&
		    (r = ibuf_next(&ib, &c, &len)) != 0) {
			if (r < 0) {
				error("bad message from %s local user %s",
				    client_addr, user_name);
				cleanup_exit(len == 0 ? 255 : 11);
			}
			process(&c);
		}
		if (oq_pending(&oq) > 0)
			flush_replies();
		if (oq_pending(&oq) == 0 && ibuf_ready(&ib))
			continue;
		if (!wait_input(timeout)) {
			timeout = go_idle();
			continue;
		}
		timeout = IDLE_MS;
		if ((n = ibuf_read(&ib, STDIN_FILENO)) == 0) {
			debug("read eof");
			cleanup_exit(0);
		}
		if (n == -1) {
			error("read: %s", strerror(errno));
			cleanup_exit(1);
		}
		pipes_read((size_t)n);
	}
}

static void
usage(void)
{
	fprintf(stderr,
	    "usage: %s [-ehR] [-d start_directory] [-f log_facility] "
	    "[-l log_level]\n\t[-P denied_requests] "
	    "[-p allowed_requests] [-r root_directory] [-u umask]\n"
	    "       %s -Q protocol_feature\n", progname, progname);
	exit(1);
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
	exit(255);
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

	if (path_tilde(arg, user_home, path1, sizeof path1) == -1) {
		if (errno == ENOENT)
			error("tilde_expand: No such user %.*s",
			    (int)strcspn(arg + 1, "/"), arg + 1);
		else
			error("tilde_expand: Path too long");
		exit(255);
	}
	if (path_percent(path1, user_home, user_name, user_uid, out,
	    size) == 0)
		return;
	if (errno == EINVAL) {
		for (p = path1; (p = strchr(p, '%')) != NULL; p += 2) {
			if (p[1] == '\0') {
				error("vdollar_percent_expand: invalid format");
				break;
			}
			if (strchr("%duU", p[1]) == NULL) {
				error("vdollar_percent_expand: unknown key "
				    "%%%c", p[1]);
				break;
			}
		}
	}
	die("percent_expand: failed");
}

/*
 * -r: every path beneath root.  Where the kernel cannot confine paths the
 * server refuses to start rather than confine them less safely.
 */
static void
confine(const char *root)
{
	char bad[PATH_MAX];

	if (fs_root_check(root, bad, sizeof bad) == -1) {
		if (errno == EPERM)
			error("bad ownership or modes for root directory "
			    "component \"%s\": refusing to start", bad);
		else
			error("root directory \"%s\": %s", root,
			    strerror(errno));
		exit(1);
	}
	if (fs_confine(root) == 0)
		return;
	if (errno == ENOSYS)
		error("-r needs openat2(2) (Linux 5.6 or later): refusing to "
		    "start");
	else
		error("root directory \"%s\": %s", root, strerror(errno));
	exit(1);
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

int
SERVER_MAIN(int argc, char **argv)
{
	int ch, level = LOG_LEVEL_ERROR, facility = LOG_AUTH, on_stderr = 0;
	const char *dir = NULL, *root = NULL, *conn;
	static char startdir[PATH_MAX], rootdir[PATH_MAX];
	char *end, *space;
	static char addr[256];
	long mask;

	readonly = init_done = 0;
	deny_list = allow_list = NULL;
	optind = 1;
	sanitise_stdfd();
	if (argc > 0 && argv[0] != NULL && argv[0][0] != '\0')
		progname = strrchr(argv[0], '/') != NULL ?
		    strrchr(argv[0], '/') + 1 : argv[0];
	/* Until the options are read, errors go to syslog, as OpenSSH. */
	log_init(progname, LOG_LEVEL_ERROR, LOG_AUTH, 0);
	find_user();
	opterr = 0;
	while ((ch = getopt(argc, argv, "d:f:l:P:p:Q:r:u:cehR")) != -1) {
		switch (ch) {
		case 'Q':
			if (strcasecmp(optarg, "requests") != 0) {
				fprintf(stderr, "Invalid query type\n");
				exit(1);
			}
			for (size_t i = 0; i < NREQUESTS; i++)
				printf("%s\n", requests[i].name);
			exit(0);
		case 'R':
			readonly = 1;
			break;
		case 'c':
			/* As a login shell, "sftp-server -c ...": no options. */
			optind = argc;
			break;
		case 'd':
			dir = optarg;
			break;
		case 'r':
			root = optarg;
			break;
		case 'e':
			on_stderr = 1;
			break;
		case 'f':
			if ((facility = log_facility_number(optarg)) == -1)
				error("Invalid log facility \"%s\"", optarg);
			break;
		case 'l':
			if ((level = log_level_number(optarg)) ==
			    LOG_LEVEL_NOT_SET)
				error("Invalid log level \"%s\"", optarg);
			break;
		case 'P':
			if (deny_list != NULL)
				die("Refused requests already set");
			deny_list = optarg;
			break;
		case 'p':
			if (allow_list != NULL)
				die("Permitted requests already set");
			allow_list = optarg;
			break;
		case 'u':
			errno = 0;
			mask = strtol(optarg, &end, 8);
			if (mask < 0 || mask > 0777 || *end != '\0' ||
			    end == optarg || (mask == 0 && errno != 0))
				die("Invalid umask \"%s\"", optarg);
			(void)umask((mode_t)mask);
			break;
		case 'h':
		default:
			usage();
		}
		if (ch == 'c')
			break;
	}
	if (dir != NULL)
		expand_dir(dir, startdir, sizeof startdir);
	if (root != NULL)
		expand_dir(root, rootdir, sizeof rootdir);

	/* As OpenSSH's log_init(): a bad level or facility that stuck. */
	if (level == LOG_LEVEL_NOT_SET) {
		fprintf(stderr, "Unrecognized internal syslog level code %d\n",
		    level);
		exit(1);
	}
	if (facility == -1 && !on_stderr) {
		fprintf(stderr, "Unrecognized internal syslog facility code "
		    "%d\n", facility);
		exit(1);
	}
	log_init(progname, level, facility, on_stderr);
	if (deny_list != NULL)
		check_list("-P", deny_list);
	if (allow_list != NULL)
		check_list("-p", allow_list);
	/* As OpenSSH on Linux: no core dumps, no ptrace by the same user. */
	(void)prctl(PR_SET_DUMPABLE, 0);
	(void)signal(SIGPIPE, SIG_IGN);
	(void)signal(SIGXFSZ, SIG_IGN);
	tzset();

	if ((conn = getenv("SSH_CONNECTION")) != NULL) {
		(void)snprintf(addr, sizeof addr, "%s", conn);
		client_addr = addr;
		if ((space = strchr(addr, ' ')) == NULL) {
			error("Malformed SSH_CONNECTION variable: \"%s\"",
			    conn);
			cleanup_exit(255);
		}
		*space = '\0';
	}
	logit("session opened for local user %s from [%s]", user_name,
	    client_addr);

	for (size_t i = 0; i < NREQUESTS; i++)
		if (requests[i].ext_name == NULL)
			by_type[requests[i].type] = &requests[i];
	if (ibuf_init(&ib, IBUF_SOFT) == -1 || oq_init(&oq, OQ_SIZE) == -1 ||
	    handle_table_init(&handles, handle_limit()) == -1) {
		error("out of memory");
		exit(1);
	}
	pipes_init();
	if (root != NULL)
		confine(rootdir);
	if (dir != NULL && fs_chdir(startdir) == -1)
		error("chdir to \"%s\" failed: %s", startdir, strerror(errno));
	serve();
	return 0;
}
