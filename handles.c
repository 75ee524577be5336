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
handle_limit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == -1 || rl.rlim_cur == RLIM_INFINITY)
		return HANDLE_CAP;
	if (rl.rlim_cur <= 6)
		return 1;
	if (rl.rlim_cur - 5 > HANDLE_CAP)
		return HANDLE_CAP;
	return (uint32_t)(rl.rlim_cur - 5);
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
	h->pflags = 0;
	len = strlen(path);
	if (len >= sizeof h->path)
		len = sizeof h->path - 1;
	memcpy(h->path, path, len);
	h->path[len] = '\0';
	return h;
}

static void
put_u32(uint8_t *p, uint32_t v)
{
	p[0] = v >> 24;
	p[1] = v >> 16;
	p[2] = v >> 8;
	p[3] = v;
}

static uint32_t
get_u32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	    (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

void
handle_encode(const struct handle_table *t, const struct handle *h,
    uint8_t out[HANDLE_LEN])
{
	(void)t;
	put_u32(out, h->index);
	put_u32(out + 4, h->gen);
}

struct handle *
handle_lookup(struct handle_table *t, const uint8_t *s, size_t len,
    enum handle_kind kind)
{
	struct handle *h;
	uint32_t i;

	if (len != HANDLE_LEN)
		return NULL;
	i = get_u32(s);
	if (i >= t->fresh)
		return NULL;
	h = slot(t, i);
	if (h->kind == HANDLE_FREE || h->gen != get_u32(s + 4))
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
