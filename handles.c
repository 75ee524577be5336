/*
 * The handle table: slots in chunks allocated as the number of open handles
 * first grows to them, a LIFO free list, and a generation per slot bumped at
 * every release.
 */
#include <sys/types.h>
#include <sys/resource.h>

#include <stdlib.h>
#include <string.h>

#include "handles.h"

uint32_t
handle_limit(uint32_t kept)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == -1 || rl.rlim_cur == RLIM_INFINITY)
		return HANDLE_CAP;
	if (rl.rlim_cur <= (rlim_t)kept + 1)
		return 1;
	if (rl.rlim_cur - kept > HANDLE_CAP)
		return HANDLE_CAP;
	return (uint32_t)(rl.rlim_cur - kept);
}

int
handle_table_init(struct handle_table *t, uint32_t n)
{
	memset(t, 0, sizeof *t);
	if (n == 0 || n > HANDLE_CAP)
		return -1;
	t->chunks = calloc((n + HANDLE_CHUNK - 1) / HANDLE_CHUNK,
	    sizeof *t->chunks);
	if (t->chunks == NULL)
		return -1;
	t->nslots = n;
	t->free_head = HANDLE_NONE;
	return 0;
}

void
handle_table_free(struct handle_table *t)
{
	for (uint32_t i = 0; i < t->fresh; i += HANDLE_CHUNK)
		free(t->chunks[i / HANDLE_CHUNK]);
	free(t->chunks);
	memset(t, 0, sizeof *t);
}

static struct handle *
slot(const struct handle_table *t, uint32_t i)
{
	return &t->chunks[i / HANDLE_CHUNK][i % HANDLE_CHUNK];
}

struct handle *
handle_new(struct handle_table *t, enum handle_kind kind, const char *path)
{
	struct handle **chunk;
	struct handle *h;
	size_t len;

	if (kind == HANDLE_FREE)
		return NULL;
	if (t->free_head != HANDLE_NONE) {
		h = slot(t, t->free_head);
		t->free_head = h->next_free;
	} else if (t->fresh < t->nslots) {
		/* Slots are handed out in order before any is reused. */
		chunk = &t->chunks[t->fresh / HANDLE_CHUNK];
		if (*chunk == NULL &&
		    (*chunk = calloc(HANDLE_CHUNK, sizeof **chunk)) == NULL)
			return NULL;
		h = slot(t, t->fresh);
		h->index = t->fresh++;
	} else {
		return NULL;
	}
	t->used++;
	h->kind = kind;
	h->fd = -1;
	h->dir = NULL;
	h->flags = 0;
	h->bytes_read = h->bytes_written = 0;
	h->first_off = UINT64_MAX;
	h->last_off = 0;
	h->io_errno = 0;
	h->no_nowait = 0;
	h->read_waits = 0;
	h->abandoned = 0;
	h->space_at = 0;
	h->space_free = 0;
	h->space_spent = 0;
	h->known = 0;
	h->pflags = 0;
	h->up = NULL;
	h->mode_forced = 0;
	len = strlen(path);
	if (len >= sizeof h->path)
		len = sizeof h->path - 1;
	memcpy(h->path, path, len);
	h->path[len] = '\0';
	return h;
}

struct handle *
handle_lookup(struct handle_table *t, uint32_t index, uint32_t gen,
    enum handle_kind kind)
{
	struct handle *h;

	if (index >= t->fresh)
		return NULL;
	h = slot(t, index);
	if (h->kind == HANDLE_FREE || h->gen != gen)
		return NULL;
	if (kind != HANDLE_FREE && h->kind != kind)
		return NULL;
	return h;
}

void
handle_release(struct handle_table *t, struct handle *h)
{
	if (h->kind == HANDLE_FREE)
		abort();
	h->kind = HANDLE_FREE;
	h->gen++;
	h->fd = -1;
	h->dir = NULL;
	h->next_free = t->free_head;
	t->free_head = h->index;
	t->used--;
}

struct handle *
handle_at(struct handle_table *t, uint32_t i)
{
	if (i >= t->fresh || slot(t, i)->kind == HANDLE_FREE)
		return NULL;
	return slot(t, i);
}
