/*
 * spread.h: how holder.c and sessinfo.c print a set of per-session figures,
 * " NAME_min=.. NAME_median=.. NAME_max=.. NAME_total=..", which scale.sh and
 * scale-sshd.sh read.  Included by each tool's one source file.
 */
#ifndef SPREAD_H
#define SPREAD_H

#include <stdio.h>
#include <stdlib.h>

static inline int
cmp_long(const void *a, const void *b)
{
	long x = *(const long *)a, y = *(const long *)b;

	return (x > y) - (x < y);
}

/* Sorts v[0..n) in place and prints its spread. */
static inline void
print_spread(const char *name, long *v, size_t n)
{
	long total = 0;

	if (n == 0) {
		printf(" %s_min=- %s_median=- %s_max=- %s_total=0", name, name,
		    name, name);
		return;
	}
	qsort(v, n, sizeof(*v), cmp_long);
	for (size_t i = 0; i < n; i++)
		total += v[i];
	printf(" %s_min=%ld %s_median=%ld %s_max=%ld %s_total=%ld", name, v[0],
	    name, n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2, name,
	    v[n - 1], name, total);
}

#endif /* SPREAD_H */
