/*
 * Unit tests of requests.c: its pure functions, and the dispatcher driven
 * in-process, as the loop drives it, with one reply checked per request.
 *
 * Every row of the request table gets, whatever rows the table holds:
 *	test_<row>_valid		a valid request: its success reply
 *	test_<row>_truncated		the request cut at every byte:
 *					BAD_MESSAGE
 *	test_<row>_under_R		-R: PERMISSION_DENIED for a request
 *					that writes, else its success reply
 *	test_<row>_denied_by_P		-P naming it: PERMISSION_DENIED
 *	test_<row>_not_allowed_by_p	-p naming every other request:
 *					PERMISSION_DENIED
 *	test_<row>_allowed_by_p		-p naming every request: served
 * where <row> is the row's extension name, else its name.  A row is named
 * once in bodies[] below, with its request body and the reply it earns;
 * a row without one fails its tests, and test_bodies_every_row_has_one.
 *
 * Each of those runs in a temporary directory of its own (the fixture
 * below), in a session started with requests_init() and INIT, with a file
 * and a directory open.  Each request is an exact-size heap copy, so that
 * AddressSanitizer sees a read past its end; each must queue exactly one
 * whole reply, of the right type, with the request's id.  A request that is
 * refused or does not parse must leave the directory as it was, and so must
 * every request under -R.
 */
#include <sys/types.h>
#include <sys/stat.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

/* cmocka 1.1.5 needs the four headers above it. */
#include <cmocka.h>

#include "../../requests.c"
#include "unit.h"

/* The id of every request, echoed in every reply. */
#define ID		0x0a0b0c0dU
/* The size of "file" in the fixture. */
#define FILE_SIZE	3000
/* OpenSSH's copy-data moves this much per read. */
#define OPENSSH_CHUNK	(64 * 1024)
/* Room for a -p list of every request's name. */
#define LIST_SIZE	2048

/* What a test of one row works with. */
struct fixture {
	struct tmpdir *dir;
	const struct request *rq;	/* the row under test, or NULL */
	struct session s;
	struct oqueue q;
	int devnull;
	int started;
	/* Open in the session: "file", for reading and writing, and "dir". */
	uint8_t file[PKT_HANDLE_LEN];
	uint8_t dirh[PKT_HANDLE_LEN];
	/* Open too, for copy-data to write to: "dest". */
	uint8_t dest[PKT_HANDLE_LEN];
	char user[256];
	char list[LIST_SIZE];
};

/* A reply taken off the queue. */
struct answer {
	uint8_t type;
	uint32_t id;
	uint32_t status;	/* STATUS only */
};

/* The valid request of one row, and what it earns. */
struct body {
	const char *key;	/* the row's extension name, else its name */
	/* The fields after the id and the extension name. */
	void (*build)(struct fixture *, struct wbuf *);
	uint8_t reply;		/* its reply type (a STATUS: OK) */
	int writes;		/* refused under -R */
};

static const char *
row_key(const struct request *rq)
{
	return rq->ext_name != NULL ? rq->ext_name : rq->name;
}

/* The fixture: a temporary directory and a reply queue. */

static void
put_handle(uint8_t out[PKT_HANDLE_LEN], const struct handle *h)
{
	struct wbuf w = { 0 };

	wb_u32(&w, h->index);
	wb_u32(&w, h->gen);
	assert_int_equal(w.len, PKT_HANDLE_LEN);
	memcpy(out, w.p, PKT_HANDLE_LEN);
	wb_free(&w);
}

/*
 * Opens a handle as OPEN and OPENDIR leave it, straight in the session's
 * table: a session under -R or -p could not open it itself.
 */
static void
open_handle(uint8_t out[PKT_HANDLE_LEN], const char *path,
    enum handle_kind kind)
{
	struct handle *h;

	h = handle_new(&handles, kind, path);
	assert_non_null(h);
	if (kind == HANDLE_FILE) {
		h->fd = open(path, O_RDWR);
		assert_true(h->fd != -1);
		h->flags = O_RDWR;
		h->pflags = SSH_FXF_READ | SSH_FXF_WRITE;
	} else {
		h->dir = opendir(path);
		assert_non_null(h->dir);
		h->fd = dirfd(h->dir);
	}
	assert_int_equal(clock_gettime(CLOCK_MONOTONIC, &h->opened), 0);
	put_handle(out, h);
}

static void
write_file(const char *name, size_t size)
{
	uint8_t buf[FILE_SIZE];
	int fd;

	assert_true(size <= sizeof buf);
	for (size_t i = 0; i < size; i++)
		buf[i] = (uint8_t)(i * 7 + 1);
	fd = open(name, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	assert_true(fd != -1);
	assert_int_equal(write(fd, buf, size), (ssize_t)size);
	assert_int_equal(close(fd), 0);
}

/*
 * The tree each test starts from:
 *	file		FILE_SIZE bytes
 *	dest		empty
 *	dir/a		empty
 *	emptydir/
 *	link -> file
 *	old, victim	empty
 */
static void
make_tree(void)
{
	write_file("file", FILE_SIZE);
	make_file("dest");
	assert_int_equal(mkdir("dir", 0755), 0);
	make_file("dir/a");
	assert_int_equal(mkdir("emptydir", 0755), 0);
	make_link("file", "link");
	make_file("old");
	make_file("victim");
}

static int
setup_fixture(void **state)
{
	const size_t *row = *state;
	struct fixture *f;
	struct passwd *pw;

	if ((f = calloc(1, sizeof *f)) == NULL)
		return -1;
	if (row != NULL)
		f->rq = &requests[*row];
	f->devnull = -1;
	if (unit_tmpdir_setup((void **)&f->dir) != 0) {
		free(f);
		return -1;
	}
	*state = f;
	if ((f->devnull = open("/dev/null", O_WRONLY)) == -1 ||
	    oq_init(&f->q, OQ_SIZE) != 0)
		return -1;
	pw = getpwuid(getuid());
	(void)snprintf(f->user, sizeof f->user, "%s",
	    pw != NULL ? pw->pw_name : "nobody");
	f->s.user_name = f->user;
	f->s.user_home = f->dir->path;
	make_tree();
	return 0;
}

static int
teardown_fixture(void **state)
{
	struct fixture *f = *state;

	if (f->started) {
		requests_close_all();
		handle_table_free(&handles);
	}
	oq_free(&f->q);
	if (f->devnull != -1)
		(void)close(f->devnull);
	(void)unit_tmpdir_teardown((void **)&f->dir);
	free(f);
	return 0;
}

/*
 * Hands the body of a request (type byte first) to the dispatcher in an
 * exact-size heap copy.  Returns what requests_process() returns.
 */
static int
dispatch(const uint8_t *body, size_t len)
{
	struct cursor c;
	uint8_t *p;
	int r;

	p = exact_copy(body, len, &c);
	r = requests_process(&c);
	free(p);
	return r;
}

/*
 * Takes the reply to one request off the queue: exactly one, whole, and
 * nothing behind it.  The queue is empty afterwards.
 */
static void
take_reply(struct fixture *f, uint64_t before, struct answer *a)
{
	struct cursor c;
	const uint8_t *s;
	uint32_t len;

	memset(a, 0, sizeof *a);
	assert_int_equal(f->q.nreplies, before + 1);
	c.p = f->q.buf + f->q.sent;
	c.left = f->q.len - f->q.sent;
	assert_int_equal(pkt_get_u32(&c, &len), 0);
	assert_int_equal(len, c.left);
	assert_int_equal(pkt_get_u8(&c, &a->type), 0);
	assert_int_equal(pkt_get_u32(&c, &a->id), 0);
	if (a->type == SSH_FXP_STATUS) {
		/* uint32 code, string message, string language */
		assert_int_equal(pkt_get_u32(&c, &a->status), 0);
		assert_int_equal(pkt_get_string(&c, &s, &len), 0);
		assert_int_equal(pkt_get_string(&c, &s, &len), 0);
		assert_int_equal(c.left, 0);
	}
	assert_int_equal(oq_flush(&f->q, f->devnull), 0);
	assert_int_equal(oq_pending(&f->q), 0);
}

/* Sends body and expects one STATUS with code. */
static void
expect_status(struct fixture *f, const uint8_t *body, size_t len,
    uint32_t id, uint32_t code)
{
	uint64_t before = f->q.nreplies;
	struct answer a;

	assert_int_equal(dispatch(body, len), 0);
	take_reply(f, before, &a);
	if (a.type != SSH_FXP_STATUS || a.id != id || a.status != code) {
		print_error("%zu bytes of type %u: reply type %u id 0x%x "
		    "status %u, want STATUS id 0x%x status %u\n", len,
		    (unsigned)body[0], a.type, a.id, a.status, id, code);
		fail();
	}
}

/* Sends body and expects one reply of type (STATUS: SSH_FX_OK). */
static void
expect_reply(struct fixture *f, const uint8_t *body, size_t len,
    uint8_t type)
{
	uint64_t before = f->q.nreplies;
	struct answer a;

	assert_int_equal(dispatch(body, len), 0);
	take_reply(f, before, &a);
	if (a.type != type || a.id != ID ||
	    (type == SSH_FXP_STATUS && a.status != SSH_FX_OK)) {
		print_error("type %u: reply type %u id 0x%x status %u, "
		    "want type %u id 0x%x\n", (unsigned)body[0], a.type, a.id,
		    a.status, type, ID);
		fail();
	}
}

/*
 * Starts the session as the loop does: requests_init(), then INIT, whose
 * VERSION reply says 3.  Then opens the fixture's handles.
 */
static void
start_with(struct fixture *f, int readonly, const char *deny,
    const char *allow)
{
	const uint8_t init[] = { SSH_FXP_INIT, 0, 0, 0, 3 };
	struct cursor c;
	uint32_t len, version;
	uint8_t type;

	f->s.readonly = readonly;
	f->s.deny_list = deny;
	f->s.allow_list = allow;
	assert_int_equal(requests_init(&f->s, &f->q), 0);
	f->started = 1;
	assert_int_equal(dispatch(init, sizeof init), 0);
	assert_int_equal(f->q.nreplies, 1);
	c.p = f->q.buf;
	c.left = f->q.len;
	assert_int_equal(pkt_get_u32(&c, &len), 0);
	assert_int_equal(len, c.left);
	assert_int_equal(pkt_get_u8(&c, &type), 0);
	assert_int_equal(type, SSH_FXP_VERSION);
	assert_int_equal(pkt_get_u32(&c, &version), 0);
	assert_int_equal(version, 3);
	assert_int_equal(oq_flush(&f->q, f->devnull), 0);
	open_handle(f->file, "file", HANDLE_FILE);
	open_handle(f->dest, "dest", HANDLE_FILE);
	open_handle(f->dirh, "dir", HANDLE_DIR);
}

static void
start(struct fixture *f)
{
	start_with(f, 0, NULL, NULL);
}

/*
 * What the file system says of everything under dir, one line each: name,
 * type and mode, size, links, owner, mtime and a link's target.  Access
 * times are left out: reading changes them.
 */
static void
snapshot_dir(const char *dir, struct wbuf *w)
{
	char path[PATH_MAX], target[PATH_MAX], line[PATH_MAX * 3];
	struct dirent *de;
	struct stat st;
	ssize_t n;
	DIR *d;

	d = opendir(dir);
	assert_non_null(d);
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0)
			continue;
		join(path, sizeof path, dir, "/");
		join(path + strlen(path), sizeof path - strlen(path),
		    de->d_name, "");
		assert_int_equal(lstat(path, &st), 0);
		target[0] = '\0';
		if (S_ISLNK(st.st_mode)) {
			n = readlink(path, target, sizeof target - 1);
			assert_true(n >= 0);
			target[n] = '\0';
		}
		(void)snprintf(line, sizeof line, "%s %o %lld %lu %lu:%lu "
		    "%lld.%09ld %s\n", path, (unsigned)st.st_mode,
		    (long long)st.st_size, (unsigned long)st.st_nlink,
		    (unsigned long)st.st_uid, (unsigned long)st.st_gid,
		    (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec, target);
		wb_put(w, line, strlen(line));
		if (S_ISDIR(st.st_mode))
			snapshot_dir(path, w);
	}
	assert_int_equal(closedir(d), 0);
}

static void
snapshot(struct wbuf *w)
{
	w->len = 0;
	snapshot_dir(".", w);
}

static void
assert_same_tree(const struct wbuf *before, const char *what)
{
	struct wbuf after = { 0 };

	snapshot(&after);
	if (after.len != before->len ||
	    memcmp(after.p, before->p, after.len) != 0) {
		print_error("%s changed the directory:\n%.*s-- is now:\n"
		    "%.*s", what, (int)before->len, (const char *)before->p,
		    (int)after.len, (const char *)after.p);
		fail();
	}
	wb_free(&after);
}

/* The request bodies: the fields after the id and the extension name. */

static void
build_open(struct fixture *f, struct wbuf *w)
{
	struct sftp_attrs a = { 0 };

	(void)f;
	/* READ only: -R lets it through (test_open_under_R_by_flags). */
	wb_cstring(w, "file");
	wb_u32(w, SSH_FXF_READ);
	wb_attrs(w, &a);
}

/* string handle, for the requests that take "file" and nothing else. */
static void
build_file_handle(struct fixture *f, struct wbuf *w)
{
	wb_string(w, f->file, sizeof f->file);
}

static void
build_read(struct fixture *f, struct wbuf *w)
{
	wb_string(w, f->file, sizeof f->file);
	wb_u64(w, 10);
	wb_u32(w, 100);
}

static void
build_write(struct fixture *f, struct wbuf *w)
{
	wb_string(w, f->file, sizeof f->file);
	wb_u64(w, 10);
	wb_cstring(w, "some data");
}

static void
build_lstat(struct fixture *f, struct wbuf *w)
{
	(void)f;
	wb_cstring(w, "link");
}

static void
build_setstat(struct fixture *f, struct wbuf *w)
{
	struct sftp_attrs a = { 0 };

	(void)f;
	a.flags = SSH_FILEXFER_ATTR_PERMISSIONS;
	a.perm = 0640;
	wb_cstring(w, "file");
	wb_attrs(w, &a);
}

static void
build_fsetstat(struct fixture *f, struct wbuf *w)
{
	struct sftp_attrs a = { 0 };

	a.flags = SSH_FILEXFER_ATTR_PERMISSIONS | SSH_FILEXFER_ATTR_SIZE;
	a.perm = 0600;
	a.size = 5;
	wb_string(w, f->file, sizeof f->file);
	wb_attrs(w, &a);
}

static void
build_opendir(struct fixture *f, struct wbuf *w)
{
	(void)f;
	wb_cstring(w, "dir");
}

static void
build_readdir(struct fixture *f, struct wbuf *w)
{
	wb_string(w, f->dirh, sizeof f->dirh);
}

static void
build_remove(struct fixture *f, struct wbuf *w)
{
	(void)f;
	wb_cstring(w, "victim");
}

static void
build_mkdir(struct fixture *f, struct wbuf *w)
{
	struct sftp_attrs a = { 0 };

	(void)f;
	a.flags = SSH_FILEXFER_ATTR_PERMISSIONS;
	a.perm = 0700;
	wb_cstring(w, "newdir");
	wb_attrs(w, &a);
}

static void
build_rmdir(struct fixture *f, struct wbuf *w)
{
	(void)f;
	wb_cstring(w, "emptydir");
}

static void
build_realpath(struct fixture *f, struct wbuf *w)
{
	(void)f;
	wb_cstring(w, "dir/../file");
}

/* string old, string new: "old" to "new". */
static void
build_rename(struct fixture *f, struct wbuf *w)
{
	(void)f;
	wb_cstring(w, "old");
	wb_cstring(w, "new");
}

static void
build_symlink(struct fixture *f, struct wbuf *w)
{
	(void)f;
	wb_cstring(w, "file");
	wb_cstring(w, "newlink");
}

static void
build_statvfs(struct fixture *f, struct wbuf *w)
{
	(void)f;
	wb_cstring(w, ".");
}

static void
build_hardlink(struct fixture *f, struct wbuf *w)
{
	(void)f;
	wb_cstring(w, "file");
	wb_cstring(w, "hard");
}

static void
build_lsetstat(struct fixture *f, struct wbuf *w)
{
	struct sftp_attrs a = { 0 };

	(void)f;
	a.flags = SSH_FILEXFER_ATTR_ACMODTIME;
	a.atime = 1000000000;
	a.mtime = 1000000001;
	wb_cstring(w, "link");
	wb_attrs(w, &a);
}

static void
build_nothing(struct fixture *f, struct wbuf *w)
{
	(void)f;
	(void)w;
}

static void
build_expand_path(struct fixture *f, struct wbuf *w)
{
	(void)f;
	wb_cstring(w, "~/dir");
}

static void
build_copy_data(struct fixture *f, struct wbuf *w)
{
	wb_string(w, f->file, sizeof f->file);
	wb_u64(w, 100);
	wb_u64(w, 0);		/* to the end of the file */
	wb_string(w, f->dest, sizeof f->dest);
	wb_u64(w, 0);
}

static void
build_home_directory(struct fixture *f, struct wbuf *w)
{
	(void)f;
	wb_cstring(w, "");	/* the session's user */
}

static void
build_users_groups(struct fixture *f, struct wbuf *w)
{
	const uint8_t ids[] = { 0, 0, 0, 0, 0, 0, 0x30, 0x39 };

	(void)f;
	wb_string(w, ids, sizeof ids);
	wb_string(w, ids, 4);
}

/* string algorithms, uint64 offset, uint64 length, uint32 block size */
static void
put_check_fields(struct wbuf *w, const char *algs)
{
	wb_cstring(w, algs);
	wb_u64(w, 0);
	wb_u64(w, 0);
	wb_u32(w, 1024);
}

static void
build_check_file_handle(struct fixture *f, struct wbuf *w)
{
	wb_string(w, f->file, sizeof f->file);
	put_check_fields(w, "sha256,md5");
}

static void
build_check_file_name(struct fixture *f, struct wbuf *w)
{
	(void)f;
	wb_cstring(w, "link");
	put_check_fields(w, "crc32");
}

/*
 * Every row of the table, by its extension name or name.  writes: OpenSSH's
 * -R refuses it (OPEN is refused by its flags instead).
 */
/* clang-format off */
static const struct body bodies[] = {
	{ "open", build_open, SSH_FXP_HANDLE, 0 },
	{ "close", build_file_handle, SSH_FXP_STATUS, 0 },
	{ "read", build_read, SSH_FXP_DATA, 0 },
	{ "write", build_write, SSH_FXP_STATUS, 1 },
	{ "lstat", build_lstat, SSH_FXP_ATTRS, 0 },
	{ "fstat", build_file_handle, SSH_FXP_ATTRS, 0 },
	{ "setstat", build_setstat, SSH_FXP_STATUS, 1 },
	{ "fsetstat", build_fsetstat, SSH_FXP_STATUS, 1 },
	{ "opendir", build_opendir, SSH_FXP_HANDLE, 0 },
	{ "readdir", build_readdir, SSH_FXP_NAME, 0 },
	{ "remove", build_remove, SSH_FXP_STATUS, 1 },
	{ "mkdir", build_mkdir, SSH_FXP_STATUS, 1 },
	{ "rmdir", build_rmdir, SSH_FXP_STATUS, 1 },
	{ "realpath", build_realpath, SSH_FXP_NAME, 0 },
	{ "stat", build_lstat, SSH_FXP_ATTRS, 0 },
	{ "rename", build_rename, SSH_FXP_STATUS, 1 },
	{ "readlink", build_lstat, SSH_FXP_NAME, 0 },
	{ "symlink", build_symlink, SSH_FXP_STATUS, 1 },
	{ "posix-rename@openssh.com", build_rename, SSH_FXP_STATUS, 1 },
	{ "statvfs@openssh.com", build_statvfs, SSH_FXP_EXTENDED_REPLY, 0 },
	{ "fstatvfs@openssh.com", build_file_handle,
	    SSH_FXP_EXTENDED_REPLY, 0 },
	{ "hardlink@openssh.com", build_hardlink, SSH_FXP_STATUS, 1 },
	{ "fsync@openssh.com", build_file_handle, SSH_FXP_STATUS, 1 },
	{ "lsetstat@openssh.com", build_lsetstat, SSH_FXP_STATUS, 1 },
	{ "limits@openssh.com", build_nothing, SSH_FXP_EXTENDED_REPLY, 0 },
	{ "expand-path@openssh.com", build_expand_path, SSH_FXP_NAME, 0 },
	{ "copy-data", build_copy_data, SSH_FXP_STATUS, 1 },
	{ "home-directory", build_home_directory, SSH_FXP_NAME, 0 },
	{ "users-groups-by-id@openssh.com", build_users_groups,
	    SSH_FXP_EXTENDED_REPLY, 0 },
	{ "check-file-handle", build_check_file_handle,
	    SSH_FXP_EXTENDED_REPLY, 0 },
	{ "check-file-name", build_check_file_name, SSH_FXP_EXTENDED_REPLY, 0 },
	{ "check-file", build_check_file_handle, SSH_FXP_EXTENDED_REPLY, 0 },
};
/* clang-format on */

static const struct body *
body_of(const struct request *rq)
{
	for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++)
		if (strcmp(bodies[i].key, row_key(rq)) == 0)
			return &bodies[i];
	return NULL;
}

/* The row's body, or the test fails saying which row has none. */
static const struct body *
need_body(const struct request *rq)
{
	const struct body *b = body_of(rq);

	if (b == NULL) {
		print_error("request \"%s\" has no body: add one to bodies[] "
		    "in tests/unit/test_requests.c\n", row_key(rq));
		fail();
	}
	return b;
}

/* The whole body of the row's valid request, type byte first, into w. */
static void
build_request(struct fixture *f, const struct request *rq, struct wbuf *w)
{
	w->len = 0;
	wb_u8(w, rq->type);
	wb_u32(w, ID);
	if (rq->ext_name != NULL)
		wb_cstring(w, rq->ext_name);
	need_body(rq)->build(f, w);
}

/* The row's valid request, and the checks of its reply. */
static void
expect_served(struct fixture *f, const struct request *rq)
{
	struct wbuf w = { 0 };

	build_request(f, rq, &w);
	expect_reply(f, w.p, w.len, need_body(rq)->reply);
	wb_free(&w);
}

/* The row's valid request, refused; the directory is left alone. */
static void
expect_refused(struct fixture *f, const struct request *rq)
{
	struct wbuf w = { 0 }, before = { 0 };

	snapshot(&before);
	build_request(f, rq, &w);
	expect_status(f, w.p, w.len, ID, SSH_FX_PERMISSION_DENIED);
	assert_same_tree(&before, row_key(rq));
	wb_free(&w);
	wb_free(&before);
}

/* The tests of each row. */

static void
test_row_valid(void **state)
{
	struct fixture *f = *state;

	start(f);
	expect_served(f, f->rq);
}

static void
test_row_truncated(void **state)
{
	struct fixture *f = *state;
	struct wbuf w = { 0 }, before = { 0 };

	start(f);
	build_request(f, f->rq, &w);
	snapshot(&before);
	/*
	 * Every cut, from the type byte alone to one byte short: a cut in
	 * the id is answered with id 0.
	 */
	for (size_t n = 1; n < w.len; n++)
		expect_status(f, w.p, n, n < 5 ? 0 : ID,
		    SSH_FX_BAD_MESSAGE);
	assert_same_tree(&before, row_key(f->rq));
	wb_free(&w);
	wb_free(&before);
}

static void
test_row_under_R(void **state)
{
	struct fixture *f = *state;
	struct wbuf before = { 0 };

	start_with(f, 1, NULL, NULL);
	if (need_body(f->rq)->writes) {
		expect_refused(f, f->rq);
	} else {
		/* Served, and nothing changes all the same. */
		snapshot(&before);
		expect_served(f, f->rq);
		assert_same_tree(&before, row_key(f->rq));
		wb_free(&before);
	}
}

static void
test_row_denied_by_P(void **state)
{
	struct fixture *f = *state;

	start_with(f, 0, f->rq->name, NULL);
	expect_refused(f, f->rq);
}

/*
 * Whether -P name refuses the row: its own name, or a request it does the
 * work of (check-file reads, and by name it opens).
 */
static int
refused_by_denying(const struct request *rq, const char *name)
{
	const char *p = rq->also;
	size_t n = strlen(name);

	if (strcmp(rq->name, name) == 0)
		return 1;
	for (; p != NULL && *p != '\0'; p += strcspn(p, ",") + (p[strcspn(p,
	    ",")] == ',')) {
		if (strcspn(p, ",") == n && strncmp(p, name, n) == 0)
			return 1;
	}
	return 0;
}

/* -P name: the row is refused exactly when it reads as name does. */
static void
row_under_P(struct fixture *f, const char *name)
{
	start_with(f, 0, name, NULL);
	if (refused_by_denying(f->rq, name))
		expect_refused(f, f->rq);
	else
		expect_served(f, f->rq);
}

static void
test_row_under_P_read(void **state)
{
	row_under_P(*state, "read");
}

static void
test_row_under_P_open(void **state)
{
	row_under_P(*state, "open");
}

/* check-file discloses what a file holds: every form of it reads. */
static void
test_check_file_rows_read(void **state)
{
	size_t rows = 0;

	(void)state;
	for (size_t i = 0; i < NREQUESTS; i++) {
		if (strcmp(requests[i].name, "check-file") != 0)
			continue;
		rows++;
		assert_true(refused_by_denying(&requests[i], "read"));
		assert_int_equal(refused_by_denying(&requests[i], "open"),
		    strcmp(requests[i].ext_name, "check-file-name") == 0);
	}
	assert_int_equal(rows, 3);
}

/* A -p list of every request's name but skip, each once. */
static void
list_names(char *list, size_t size, const char *skip)
{
	size_t o = 0;
	int n;

	list[0] = '\0';
	for (size_t i = 0; i < NREQUESTS; i++) {
		if (skip != NULL && strcmp(requests[i].name, skip) == 0)
			continue;
		/* Rows of one name are next to each other. */
		if (i > 0 && strcmp(requests[i].name, requests[i - 1].name) ==
		    0)
			continue;
		n = snprintf(list + o, size - o, "%s%s", o > 0 ? "," : "",
		    requests[i].name);
		assert_true(n > 0 && (size_t)n < size - o);
		o += (size_t)n;
	}
}

static void
test_row_not_allowed_by_p(void **state)
{
	struct fixture *f = *state;

	list_names(f->list, sizeof f->list, f->rq->name);
	start_with(f, 0, NULL, f->list);
	expect_refused(f, f->rq);
}

static void
test_row_allowed_by_p(void **state)
{
	struct fixture *f = *state;

	list_names(f->list, sizeof f->list, NULL);
	start_with(f, 0, NULL, f->list);
	expect_served(f, f->rq);
}

/* The tests of the table and the dispatcher. */

static void
test_bodies_every_row_has_one(void **state)
{
	int missing = 0;

	(void)state;
	for (size_t i = 0; i < NREQUESTS; i++) {
		if (body_of(&requests[i]) == NULL) {
			print_error("request \"%s\" has no body in bodies[]\n",
			    row_key(&requests[i]));
			missing++;
		}
	}
	assert_int_equal(missing, 0);
}

static void
test_bodies_each_names_a_row(void **state)
{
	int found;

	(void)state;
	for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++) {
		found = 0;
		for (size_t j = 0; j < NREQUESTS; j++)
			found += strcmp(bodies[i].key, row_key(&requests[j])) ==
			    0;
		if (found != 1) {
			print_error("bodies[] names \"%s\", which %d rows "
			    "have\n", bodies[i].key, found);
			fail();
		}
	}
}

static void
test_requests_before_init_end_the_session(void **state)
{
	struct fixture *f = *state;
	struct wbuf w = { 0 };

	/* Set up: a session without INIT; handles only to build bodies. */
	assert_int_equal(requests_init(&f->s, &f->q), 0);
	f->started = 1;
	open_handle(f->file, "file", HANDLE_FILE);
	open_handle(f->dest, "dest", HANDLE_FILE);
	open_handle(f->dirh, "dir", HANDLE_DIR);
	/* Check: no reply, and the status that ends the session. */
	for (size_t i = 0; i < NREQUESTS; i++) {
		build_request(f, &requests[i], &w);
		assert_int_equal(dispatch(w.p, w.len), SESSION_FATAL);
		assert_int_equal(f->q.nreplies, 0);
		assert_int_equal(f->q.len, 0);
	}
	wb_free(&w);
}

static void
test_init_without_version_ends_the_session(void **state)
{
	struct fixture *f = *state;
	const uint8_t init[] = { SSH_FXP_INIT, 0, 0, 3 };

	assert_int_equal(requests_init(&f->s, &f->q), 0);
	f->started = 1;
	for (size_t n = 1; n <= sizeof init; n++) {
		assert_int_equal(dispatch(init, n), SESSION_FATAL);
		assert_int_equal(f->q.nreplies, 0);
	}
}

static void
test_unknown_type_is_op_unsupported(void **state)
{
	struct fixture *f = *state;
	struct wbuf w = { 0 };
	int served;

	start(f);
	for (unsigned type = 0; type < 256; type++) {
		if (type == SSH_FXP_INIT || type == SSH_FXP_EXTENDED)
			continue;
		served = 0;
		for (size_t i = 0; i < NREQUESTS; i++)
			served |= requests[i].ext_name == NULL &&
			    requests[i].type == type;
		if (served)
			continue;
		w.len = 0;
		wb_u8(&w, (uint8_t)type);
		wb_u32(&w, ID);
		wb_cstring(&w, "whatever follows");
		expect_status(f, w.p, w.len, ID, SSH_FX_OP_UNSUPPORTED);
	}
	wb_free(&w);
}

static void
test_unknown_extension_is_op_unsupported(void **state)
{
	static const char *const names[] = { "", "nosuch@openssh.com",
		"limits@openssh.co", "limits@openssh.comm",
		"LIMITS@OPENSSH.COM", "open", "check-file-handl" };
	struct fixture *f = *state;
	struct wbuf w = { 0 };

	start(f);
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
		w.len = 0;
		wb_u8(&w, SSH_FXP_EXTENDED);
		wb_u32(&w, ID);
		wb_cstring(&w, names[i]);
		expect_status(f, w.p, w.len, ID, SSH_FX_OP_UNSUPPORTED);
	}
	/* A name with a NUL in it is another name. */
	w.len = 0;
	wb_u8(&w, SSH_FXP_EXTENDED);
	wb_u32(&w, ID);
	wb_string(&w, "limits@openssh.com\0", 19);
	expect_status(f, w.p, w.len, ID, SSH_FX_OP_UNSUPPORTED);
	wb_free(&w);
}

static void
test_open_under_R_by_flags(void **state)
{
	/* clang-format off */
	static const struct {
		uint32_t pflags;
		int refused;
	} cases[] = {
		{ 0, 0 },
		{ SSH_FXF_READ, 0 },
		{ SSH_FXF_READ | SSH_FXF_APPEND, 0 },
		{ SSH_FXF_READ | SSH_FXF_EXCL, 0 },
		{ SSH_FXF_WRITE, 1 },
		{ SSH_FXF_READ | SSH_FXF_WRITE, 1 },
		{ SSH_FXF_READ | SSH_FXF_CREAT, 1 },
		{ SSH_FXF_READ | SSH_FXF_TRUNC, 1 },
		{ SSH_FXF_WRITE | SSH_FXF_CREAT | SSH_FXF_TRUNC, 1 },
		{ SSH_FXF_CREAT | SSH_FXF_EXCL, 1 },
	};
	/* clang-format on */
	struct fixture *f = *state;
	struct sftp_attrs a = { 0 };
	struct wbuf w = { 0 }, before = { 0 };

	start_with(f, 1, NULL, NULL);
	snapshot(&before);
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		w.len = 0;
		wb_u8(&w, SSH_FXP_OPEN);
		wb_u32(&w, ID);
		wb_cstring(&w, "file");
		wb_u32(&w, cases[i].pflags);
		wb_attrs(&w, &a);
		if (cases[i].refused)
			expect_status(f, w.p, w.len, ID,
			    SSH_FX_PERMISSION_DENIED);
		else
			expect_reply(f, w.p, w.len, SSH_FXP_HANDLE);
	}
	assert_same_tree(&before, "open under -R");
	wb_free(&w);
	wb_free(&before);
}

/* The pure functions. */

static void
test_errno_to_status_every_mapping(void **state)
{
	/* clang-format off */
	static const struct {
		int e;
		uint32_t status;
	} cases[] = {
		{ 0, SSH_FX_OK },
		{ ENOENT, SSH_FX_NO_SUCH_FILE },
		{ ENOTDIR, SSH_FX_NO_SUCH_FILE },
		{ EBADF, SSH_FX_NO_SUCH_FILE },
		{ ELOOP, SSH_FX_NO_SUCH_FILE },
		{ EPERM, SSH_FX_PERMISSION_DENIED },
		{ EACCES, SSH_FX_PERMISSION_DENIED },
		{ EFAULT, SSH_FX_PERMISSION_DENIED },
		{ ENAMETOOLONG, SSH_FX_BAD_MESSAGE },
		{ EINVAL, SSH_FX_BAD_MESSAGE },
		{ ENOSYS, SSH_FX_OP_UNSUPPORTED },
		/* As OpenSSH's errno_to_portable(): the rest is FAILURE. */
		{ EIO, SSH_FX_FAILURE },
		{ ENOSPC, SSH_FX_FAILURE },
		{ EDQUOT, SSH_FX_FAILURE },
		{ EEXIST, SSH_FX_FAILURE },
		{ ENOTEMPTY, SSH_FX_FAILURE },
		{ EISDIR, SSH_FX_FAILURE },
		{ EXDEV, SSH_FX_FAILURE },
		{ EROFS, SSH_FX_FAILURE },
		{ EMFILE, SSH_FX_FAILURE },
		{ ETXTBSY, SSH_FX_FAILURE },
		{ EOPNOTSUPP, SSH_FX_FAILURE },
		{ EAGAIN, SSH_FX_FAILURE },
		{ -1, SSH_FX_FAILURE },
		{ INT_MAX, SSH_FX_FAILURE },
	};
	/* clang-format on */

	(void)state;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		if (errno_to_status(cases[i].e) != cases[i].status) {
			print_error("errno %d (%s): %u, want %u\n", cases[i].e,
			    strerror(cases[i].e), errno_to_status(cases[i].e),
			    cases[i].status);
			fail();
		}
	}
}

/* n entries "x0,x1,..." then name, as the (n + 1)th. */
static void
long_list(char *out, size_t size, int n, const char *name)
{
	size_t o = 0;
	int r;

	out[0] = '\0';
	for (int i = 0; i < n; i++) {
		r = snprintf(out + o, size - o, "x%d,", i);
		assert_true(r > 0 && (size_t)r < size - o);
		o += (size_t)r;
	}
	join(out + o, size - o, name, "");
}

static void
test_in_list_exact_names_and_empty_entries(void **state)
{
	/* clang-format off */
	static const struct {
		const char *name;
		const char *list;
		int strict;	/* the allow list's reading */
		int lax;	/* the deny list's */
	} cases[] = {
		{ "read", "read", 1, 1 },
		{ "read", "write,read", 1, 1 },
		{ "read", "read,write", 1, 1 },
		{ "read", "readdir", 0, 0 },
		{ "readdir", "read", 0, 0 },
		{ "read", "rea", 0, 0 },
		{ "read", "READ", 0, 0 },
		{ "read", " read", 0, 0 },
		{ "read", "write", 0, 0 },
		{ "check-file", "check-file", 1, 1 },
		/* OpenSSH's match_list() stops at an empty entry. */
		{ "read", "", 0, 0 },
		{ "read", ",", 0, 0 },
		{ "read", ",read", 0, 1 },
		{ "read", "write,,read", 0, 1 },
		{ "read", "read,", 1, 1 },
		{ "read", "read,,", 1, 1 },
		{ "write", "read,", 0, 0 },
		{ "write", "read,,write,", 0, 1 },
	};
	/* clang-format on */

	(void)state;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		if (in_list(cases[i].name, cases[i].list, 1) !=
		    cases[i].strict ||
		    in_list(cases[i].name, cases[i].list, 0) != cases[i].lax) {
			print_error("\"%s\" in \"%s\": %d strict, %d lax; want "
			    "%d, %d\n", cases[i].name, cases[i].list,
			    in_list(cases[i].name, cases[i].list, 1),
			    in_list(cases[i].name, cases[i].list, 0),
			    cases[i].strict, cases[i].lax);
			fail();
		}
	}
}

static void
test_in_list_40_entries_at_most_when_strict(void **state)
{
	char list[1024];

	(void)state;
	/* The name as entry 39, 40 and 41 (LIST_MAX - 1, LIST_MAX, + 1). */
	long_list(list, sizeof list, 38, "read");
	assert_int_equal(in_list("read", list, 1), 1);
	assert_int_equal(in_list("read", list, 0), 1);
	long_list(list, sizeof list, 39, "read");
	assert_int_equal(in_list("read", list, 1), 1);
	assert_int_equal(in_list("read", list, 0), 1);
	long_list(list, sizeof list, 40, "read");
	assert_int_equal(in_list("read", list, 1), 0);
	assert_int_equal(in_list("read", list, 0), 1);
	long_list(list, sizeof list, 60, "read");
	assert_int_equal(in_list("read", list, 1), 0);
	assert_int_equal(in_list("read", list, 0), 1);
	/* The first entries still count in a long list. */
	long_list(list, sizeof list, 60, "read");
	assert_int_equal(in_list("x0", list, 1), 1);
	assert_int_equal(in_list("x39", list, 1), 1);
	assert_int_equal(in_list("x40", list, 1), 0);
	assert_int_equal(in_list("x40", list, 0), 1);
}

static void
test_flags_from_portable_every_flag(void **state)
{
	/* clang-format off */
	static const struct {
		uint32_t pflags;
		int flags;
	} cases[] = {
		{ 0, O_RDONLY },
		{ SSH_FXF_READ, O_RDONLY },
		{ SSH_FXF_WRITE, O_WRONLY },
		{ SSH_FXF_READ | SSH_FXF_WRITE, O_RDWR },
		{ SSH_FXF_APPEND, O_RDONLY | O_APPEND },
		{ SSH_FXF_WRITE | SSH_FXF_APPEND, O_WRONLY | O_APPEND },
		{ SSH_FXF_CREAT, O_RDONLY | O_CREAT },
		{ SSH_FXF_WRITE | SSH_FXF_CREAT, O_WRONLY | O_CREAT },
		{ SSH_FXF_TRUNC, O_RDONLY | O_TRUNC },
		{ SSH_FXF_WRITE | SSH_FXF_CREAT | SSH_FXF_TRUNC,
		    O_WRONLY | O_CREAT | O_TRUNC },
		{ SSH_FXF_EXCL, O_RDONLY | O_EXCL },
		{ SSH_FXF_WRITE | SSH_FXF_CREAT | SSH_FXF_EXCL,
		    O_WRONLY | O_CREAT | O_EXCL },
		{ 0x3f, O_RDWR | O_APPEND | O_CREAT | O_TRUNC | O_EXCL },
		/* Bits the draft does not define are ignored. */
		{ 0xffffffc0, O_RDONLY },
		{ 0xffffffff, O_RDWR | O_APPEND | O_CREAT | O_TRUNC | O_EXCL },
		{ 0x40 | SSH_FXF_WRITE, O_WRONLY },
	};
	/* clang-format on */

	(void)state;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		if (flags_from_portable(cases[i].pflags) != cases[i].flags) {
			print_error("pflags 0x%x: 0%o, want 0%o\n",
			    cases[i].pflags,
			    (unsigned)flags_from_portable(cases[i].pflags),
			    (unsigned)cases[i].flags);
			fail();
		}
	}
}

static void
test_copy_hit_eof_at_chunk_bounds(void **state)
{
	/* clang-format off */
	static const struct {
		uint64_t done, len;
		int eof;
	} cases[] = {
		/* An empty file: EOF only when more than a chunk was asked. */
		{ 0, 1, 0 },
		{ 0, OPENSSH_CHUNK, 0 },
		{ 0, OPENSSH_CHUNK + 1, 1 },
		/* Ends inside chunk 0: EOF from two chunks on. */
		{ 1, OPENSSH_CHUNK, 0 },
		{ 1, 2 * OPENSSH_CHUNK, 0 },
		{ 1, 2 * OPENSSH_CHUNK + 1, 1 },
		{ OPENSSH_CHUNK - 1, 2 * OPENSSH_CHUNK, 0 },
		{ OPENSSH_CHUNK - 1, 2 * OPENSSH_CHUNK + 1, 1 },
		/* Ends at the end of chunk 0. */
		{ OPENSSH_CHUNK, OPENSSH_CHUNK + 1, 0 },
		{ OPENSSH_CHUNK, 2 * OPENSSH_CHUNK, 0 },
		{ OPENSSH_CHUNK, 2 * OPENSSH_CHUNK + 1, 1 },
		/* Ends inside chunk 1. */
		{ OPENSSH_CHUNK + 1, 3 * OPENSSH_CHUNK, 0 },
		{ OPENSSH_CHUNK + 1, 3 * OPENSSH_CHUNK + 1, 1 },
		/* Far from the start, and the largest lengths. */
		{ 1ULL << 62, (1ULL << 62) + OPENSSH_CHUNK, 0 },
		{ 1ULL << 62, (1ULL << 62) + OPENSSH_CHUNK + 1, 1 },
		{ 0, UINT64_MAX, 1 },
		{ UINT64_MAX - OPENSSH_CHUNK, UINT64_MAX, 0 },
		{ UINT64_MAX - 2 * OPENSSH_CHUNK, UINT64_MAX, 1 },
	};
	/* clang-format on */

	(void)state;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		if (copy_hit_eof(cases[i].done, cases[i].len) !=
		    cases[i].eof) {
			print_error("done %llu of %llu: %d, want %d\n",
			    (unsigned long long)cases[i].done,
			    (unsigned long long)cases[i].len,
			    copy_hit_eof(cases[i].done, cases[i].len),
			    cases[i].eof);
			fail();
		}
	}
}

/*
 * OpenSSH's copy-data loop over a file that ends after done bytes: chunks
 * of up to OPENSSH_CHUNK, EOF when a chunk reads nothing, success all the
 * same when that chunk was the last one asked for.
 */
static int
openssh_copy_eof(uint64_t done, uint64_t len)
{
	uint64_t left = len, avail = done, want, got;

	while (left > 0) {
		want = left < OPENSSH_CHUNK ? left : OPENSSH_CHUNK;
		left -= want;
		got = want < avail ? want : avail;
		avail -= got;
		if (got == 0)
			return left > 0;
	}
	return 0;
}

static void
test_copy_hit_eof_as_openssh_loop(void **state)
{
	static const uint64_t near[] = { 0, 1, 2, OPENSSH_CHUNK / 2 };
	uint64_t done, len;
	int checked = 0;

	(void)state;
	/* Every length around each chunk bound, up to five chunks. */
	for (uint64_t dc = 0; dc <= 5; dc++) {
		for (size_t i = 0; i < sizeof near / sizeof near[0]; i++) {
			for (int sign = -1; sign <= 1; sign += 2) {
				if (dc == 0 && sign < 0 && near[i] > 0)
					continue;
				done = dc * OPENSSH_CHUNK + (uint64_t)sign *
				    near[i];
				for (uint64_t lc = dc; lc <= dc + 3; lc++) {
					for (size_t j = 0; j < 3; j++) {
						len = lc * OPENSSH_CHUNK +
						    near[j] - 1;
						if (len <= done)
							continue;
						if (copy_hit_eof(done, len) !=
						    openssh_copy_eof(done,
						    len)) {
							print_error("done %llu"
							    " len %llu\n",
							    (unsigned long long)
							    done,
							    (unsigned long long)
							    len);
							fail();
						}
						checked++;
					}
				}
			}
		}
	}
	assert_true(checked > 300);
}

static void
test_bad_offset_range_and_seek(void **state)
{
	struct {
		int fd;
		uint64_t off;
		int bad;
		int e;
	} cases[] = {
		/* Below 2^40 no call is made: a closed descriptor passes. */
		{ -1, 0, 0, 0 },
		{ -1, (1ULL << 40) - 1, 0, 0 },
		/* From 2^40 on the offset is sought. */
		{ -1, 1ULL << 40, 1, EBADF },
		{ 0, 1ULL << 40, 0, 0 },		/* a file */
		{ 1, (1ULL << 40) - 1, 0, 0 },		/* a pipe */
		{ 1, 1ULL << 40, 1, ESPIPE },
		/* Past INT64_MAX: EINVAL without a call. */
		{ 0, (uint64_t)INT64_MAX + 1, 1, EINVAL },
		{ -1, (uint64_t)INT64_MAX + 1, 1, EINVAL },
		{ -1, UINT64_MAX, 1, EINVAL },
	};
	struct handle h;
	int fds[2], file, r, e;

	(void)state;
	file = open("file", O_RDWR | O_CREAT, 0600);
	assert_true(file != -1);
	assert_int_equal(pipe(fds), 0);
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		memset(&h, 0, sizeof h);
		h.fd = cases[i].fd == 0 ? file : cases[i].fd == 1 ? fds[0] :
		    -1;
		errno = 0;
		r = bad_offset(&h, cases[i].off);
		e = errno;
		if (r != cases[i].bad || (r && e != cases[i].e)) {
			print_error("case %zu, offset %llu: %d (%s), want %d "
			    "(%s)\n", i, (unsigned long long)cases[i].off, r,
			    strerror(e), cases[i].bad, strerror(cases[i].e));
			fail();
		}
	}
	assert_int_equal(close(file), 0);
	assert_int_equal(close(fds[0]), 0);
	assert_int_equal(close(fds[1]), 0);
}

static const struct CMUnitTest fixed_tests[] = {
	cmocka_unit_test(test_bodies_every_row_has_one),
	cmocka_unit_test(test_bodies_each_names_a_row),
	cmocka_unit_test(test_check_file_rows_read),
	cmocka_unit_test_setup_teardown(
	    test_requests_before_init_end_the_session, setup_fixture,
	    teardown_fixture),
	cmocka_unit_test_setup_teardown(
	    test_init_without_version_ends_the_session, setup_fixture,
	    teardown_fixture),
	cmocka_unit_test_setup_teardown(test_unknown_type_is_op_unsupported,
	    setup_fixture, teardown_fixture),
	cmocka_unit_test_setup_teardown(
	    test_unknown_extension_is_op_unsupported, setup_fixture,
	    teardown_fixture),
	cmocka_unit_test_setup_teardown(test_open_under_R_by_flags,
	    setup_fixture, teardown_fixture),
	cmocka_unit_test(test_errno_to_status_every_mapping),
	cmocka_unit_test(test_in_list_exact_names_and_empty_entries),
	cmocka_unit_test(test_in_list_40_entries_at_most_when_strict),
	cmocka_unit_test(test_flags_from_portable_every_flag),
	cmocka_unit_test(test_copy_hit_eof_at_chunk_bounds),
	cmocka_unit_test(test_copy_hit_eof_as_openssh_loop),
	unit_test_in_tmpdir(test_bad_offset_range_and_seek),
};

/* The tests of every row, each with the row's index as its state. */
static const struct {
	const char *suffix;
	CMUnitTestFunction fn;
} row_tests[] = {
	{ "valid", test_row_valid },
	{ "truncated", test_row_truncated },
	{ "under_R", test_row_under_R },
	{ "denied_by_P", test_row_denied_by_P },
	{ "not_allowed_by_p", test_row_not_allowed_by_p },
	{ "allowed_by_p", test_row_allowed_by_p },
	{ "under_P_read", test_row_under_P_read },
	{ "under_P_open", test_row_under_P_open },
};
#define NROW_TESTS	(sizeof row_tests / sizeof row_tests[0])
#define NFIXED		(sizeof fixed_tests / sizeof fixed_tests[0])

int
main(int argc, char **argv)
{
	static size_t rows[NREQUESTS];
	static char names[NREQUESTS * NROW_TESTS][128];
	struct CMUnitTest tests[NFIXED + NREQUESTS * NROW_TESTS];
	size_t n = 0;
	int len;

	if (unit_args(argc, argv) != 0)
		return 2;
	/* The server's log would go to syslog. */
	log_init("test_requests", LOG_LEVEL_QUIET, LOG_USER, 1);
	for (size_t i = 0; i < NFIXED; i++)
		tests[n++] = fixed_tests[i];
	for (size_t i = 0; i < NREQUESTS; i++) {
		rows[i] = i;
		for (size_t j = 0; j < NROW_TESTS; j++) {
			len = snprintf(names[n - NFIXED], sizeof names[0],
			    "test_%s_%s", row_key(&requests[i]),
			    row_tests[j].suffix);
			if (len < 0 || (size_t)len >= sizeof names[0])
				return 1;
			tests[n].name = names[n - NFIXED];
			tests[n].test_func = row_tests[j].fn;
			tests[n].setup_func = setup_fixture;
			tests[n].teardown_func = teardown_fixture;
			tests[n].initial_state = &rows[i];
			n++;
		}
	}
	return _cmocka_run_group_tests("test_requests", tests, n, NULL, NULL);
}
