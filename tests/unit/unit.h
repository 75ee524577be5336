/*
 * What the unit tests share (unit.c, linked into every unit binary): the
 * test-name pattern every binary takes, builders of wire-format input, and
 * a temporary directory to work in.
 *
 * Include it after <cmocka.h> and its four headers.
 */
#ifndef UNIT_H
#define UNIT_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "../../packet.h"

/*
 * Reads the command line of a unit binary: no argument, or one pattern
 * (cmocka's test filter, "*" and "?" as wildcards) that picks the tests to
 * run by name.  Returns 0, or -1 after printing the usage.
 */
int	unit_args(int argc, char **argv);

/*
 * Whether every page of [p, p + n) is in memory (mincore(2)); and whether
 * MADV_POPULATE_WRITE makes pages so here (a kernel before 5.14 refuses
 * it; an emulator such as qemu-user takes it and does nothing).
 */
int	unit_resident(const void *p, size_t n);
int	unit_populate_works(void);
/*
 * Whether the mapping that holds p is advised for huge pages: 1 when
 * /proc/self/smaps lists flag (hg: MADV_HUGEPAGE, nh: MADV_NOHUGEPAGE) in
 * its VmFlags, 0 when not, -1 when smaps does not say.  And whether the
 * advice shows there at all (a kernel without huge pages refuses it; an
 * emulator's smaps may not list the flags).
 */
int	unit_vm_flag(const void *p, const char *flag);
int	unit_huge_advice_works(void);

/* A growable byte string in wire format, for building test input. */
struct wbuf {
	uint8_t *p;
	size_t len;
	size_t cap;
};

/* Appends to w; the test fails when memory runs out. */
void	wb_put(struct wbuf *w, const void *p, size_t n);
void	wb_u8(struct wbuf *w, uint8_t v);
void	wb_u32(struct wbuf *w, uint32_t v);
void	wb_u64(struct wbuf *w, uint64_t v);
void	wb_string(struct wbuf *w, const void *s, size_t n);
void	wb_cstring(struct wbuf *w, const char *s);
/* ATTRS: the flags, then each field its flag names (extended pairs not). */
void	wb_attrs(struct wbuf *w, const struct sftp_attrs *a);
/* Frees w and empties it. */
void	wb_free(struct wbuf *w);

/*
 * An exact-size heap copy of n bytes and a cursor over it, so that
 * AddressSanitizer reports a read past its end.  The caller frees it.
 */
uint8_t	*exact_copy(const void *src, size_t n, struct cursor *c);

/* The current directory of a test that works in a temporary directory. */
struct tmpdir {
	char path[PATH_MAX];	/* canonical, no symlink in it */
	int oldcwd;
};

/*
 * cmocka setup and teardown: a new empty directory under $TMPDIR (else
 * /tmp), made the current directory, and *state a struct tmpdir; the
 * teardown goes back and removes the directory and all it holds.
 */
int	unit_tmpdir_setup(void **state);
int	unit_tmpdir_teardown(void **state);
/* A test run in a temporary directory of its own. */
#define unit_test_in_tmpdir(f)						\
	cmocka_unit_test_setup_teardown(f, unit_tmpdir_setup,		\
	    unit_tmpdir_teardown)
/* Removes path and, for a directory, everything beneath it. */
void	rm_tree(const char *path);
/* out = a followed by b; the test fails if it does not fit. */
void	join(char *out, size_t size, const char *a, const char *b);
/* An empty file, and a symlink; the test fails when they cannot be made. */
void	make_file(const char *name);
void	make_link(const char *target, const char *name);

#endif /* UNIT_H */
