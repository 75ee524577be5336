/*
 * What the unit tests share: see unit.h.
 */
#include <sys/types.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* cmocka 1.1.5 needs the four headers above it. */
#include <cmocka.h>

#include "unit.h"

int
unit_args(int argc, char **argv)
{
	if (argc == 1)
		return 0;
	if (argc == 2 && argv[1][0] != '-') {
		cmocka_set_test_filter(argv[1]);
		return 0;
	}
	fprintf(stderr, "usage: %s [test-name-pattern]\n"
	    "  The pattern picks tests by name; \"*\" and \"?\" are "
	    "wildcards.\n", argv[0]);
	return -1;
}

void
wb_put(struct wbuf *w, const void *p, size_t n)
{
	uint8_t *np;
	size_t ncap;

	if (n > w->cap - w->len) {
		ncap = w->cap == 0 ? 256 : w->cap;
		while (n > ncap - w->len)
			ncap *= 2;
		np = realloc(w->p, ncap);
		assert_non_null(np);
		w->p = np;
		w->cap = ncap;
	}
	if (n > 0)
		memcpy(w->p + w->len, p, n);
	w->len += n;
}

void
wb_u8(struct wbuf *w, uint8_t v)
{
	wb_put(w, &v, 1);
}

void
wb_u32(struct wbuf *w, uint32_t v)
{
	uint8_t b[4] = { v >> 24, v >> 16, v >> 8, v };

	wb_put(w, b, sizeof b);
}

void
wb_u64(struct wbuf *w, uint64_t v)
{
	wb_u32(w, (uint32_t)(v >> 32));
	wb_u32(w, (uint32_t)v);
}

void
wb_string(struct wbuf *w, const void *s, size_t n)
{
	wb_u32(w, (uint32_t)n);
	wb_put(w, s, n);
}

void
wb_cstring(struct wbuf *w, const char *s)
{
	wb_string(w, s, strlen(s));
}

void
wb_attrs(struct wbuf *w, const struct sftp_attrs *a)
{
	wb_u32(w, a->flags);
	if (a->flags & SSH_FILEXFER_ATTR_SIZE)
		wb_u64(w, a->size);
	if (a->flags & SSH_FILEXFER_ATTR_UIDGID) {
		wb_u32(w, a->uid);
		wb_u32(w, a->gid);
	}
	if (a->flags & SSH_FILEXFER_ATTR_PERMISSIONS)
		wb_u32(w, a->perm);
	if (a->flags & SSH_FILEXFER_ATTR_ACMODTIME) {
		wb_u32(w, a->atime);
		wb_u32(w, a->mtime);
	}
}

void
wb_free(struct wbuf *w)
{
	free(w->p);
	memset(w, 0, sizeof *w);
}

uint8_t *
exact_copy(const void *src, size_t n, struct cursor *c)
{
	uint8_t *p = malloc(n);

	if (n > 0) {
		assert_non_null(p);
		memcpy(p, src, n);
	}
	c->p = p;
	c->left = n;
	return p;
}

void
rm_tree(const char *path)
{
	char sub[PATH_MAX];
	struct dirent *de;
	struct stat st;
	DIR *d;

	if (lstat(path, &st) != 0)
		return;
	if (S_ISDIR(st.st_mode) && (d = opendir(path)) != NULL) {
		while ((de = readdir(d)) != NULL) {
			if (strcmp(de->d_name, ".") == 0 ||
			    strcmp(de->d_name, "..") == 0)
				continue;
			if ((size_t)snprintf(sub, sizeof sub, "%s/%s", path,
			    de->d_name) >= sizeof sub)
				continue;
			rm_tree(sub);
		}
		(void)closedir(d);
		(void)rmdir(path);
	} else {
		(void)unlink(path);
	}
}

int
unit_tmpdir_setup(void **state)
{
	char tmpl[PATH_MAX];
	struct tmpdir *t;
	const char *base;

	if ((base = getenv("TMPDIR")) == NULL || *base == '\0')
		base = "/tmp";
	if ((t = calloc(1, sizeof *t)) == NULL)
		return -1;
	if ((size_t)snprintf(tmpl, sizeof tmpl, "%s/unit.XXXXXX", base) >=
	    sizeof tmpl || mkdtemp(tmpl) == NULL)
		goto fail;
	if (realpath(tmpl, t->path) == NULL) {
		rm_tree(tmpl);
		goto fail;
	}
	if ((t->oldcwd = open(".", O_RDONLY | O_DIRECTORY)) == -1) {
		rm_tree(t->path);
		goto fail;
	}
	if (chdir(t->path) != 0) {
		(void)close(t->oldcwd);
		rm_tree(t->path);
		goto fail;
	}
	*state = t;
	return 0;
fail:
	free(t);
	return -1;
}

int
unit_tmpdir_teardown(void **state)
{
	struct tmpdir *t = *state;
	int r = 0;

	if (fchdir(t->oldcwd) != 0)
		r = -1;
	(void)close(t->oldcwd);
	rm_tree(t->path);
	free(t);
	return r;
}

void
join(char *out, size_t size, const char *a, const char *b)
{
	int n = snprintf(out, size, "%s%s", a, b);

	assert_true(n >= 0 && (size_t)n < size);
}

void
make_file(const char *name)
{
	FILE *f = fopen(name, "w");

	assert_non_null(f);
	assert_int_equal(fclose(f), 0);
}

void
make_link(const char *target, const char *name)
{
	assert_int_equal(symlink(target, name), 0);
}

int
unit_resident(const void *p, size_t n)
{
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	uintptr_t from = (uintptr_t)p / page * page;
	size_t pages = ((uintptr_t)p + n - from + page - 1) / page;
	unsigned char vec[2048];

	assert_true(pages <= sizeof vec);
	assert_int_equal(mincore((void *)from, pages * page, vec), 0);
	for (size_t i = 0; i < pages; i++)
		if (!(vec[i] & 1))
			return 0;
	return 1;
}

/*
 * Whether advice on the first of two fresh pages shows (shows()) there
 * and not on the second.
 */
static int
advice_shows(int advice, int (*shows)(const void *p, size_t n))
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	void *p;
	int works;

	p = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(p != MAP_FAILED);
	works = madvise(p, page, advice) == 0 && shows(p, page) == 1 &&
	    shows((uint8_t *)p + page, page) == 0;
	(void)munmap(p, 2 * page);
	return works;
}

int
unit_populate_works(void)
{
	return advice_shows(23 /* MADV_POPULATE_WRITE */, unit_resident);
}

int
unit_vm_flag(const void *p, const char *flag)
{
	char line[512];
	uintptr_t lo, hi, at = (uintptr_t)p;
	int in = 0, found = -1;
	FILE *f;

	if ((f = fopen("/proc/self/smaps", "r")) == NULL)
		return -1;
	while (fgets(line, sizeof line, f) != NULL) {
		/* A mapping's first line: its range. */
		if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR, &lo, &hi) == 2) {
			in = at >= lo && at < hi;
			continue;
		}
		if (in && strncmp(line, "VmFlags:", 8) == 0) {
			char *t, *save = NULL;

			found = 0;
			for (t = strtok_r(line + 8, " \n", &save); t != NULL;
			    t = strtok_r(NULL, " \n", &save))
				if (strcmp(t, flag) == 0)
					found = 1;
			break;
		}
	}
	(void)fclose(f);
	return found;
}

static int
huge_advised(const void *p, size_t n)
{
	(void)n;
	return unit_vm_flag(p, "hg");
}

int
unit_huge_advice_works(void)
{
	return advice_shows(14 /* MADV_HUGEPAGE */, huge_advised);
}
