/*
 * The handle table: a fixed array of slots allocated at start, a LIFO free
 * list, and a generation per slot bumped at every release.
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
	/*
	 * Slots are handed out in order before any is reused, so the pages of
	 * slots never used are never touched: calloc of this size maps zero
	 * pages, and the table costs memory only for the handles a client opens.
	 */
	if (n == 0 || (t->slots = calloc(n, sizeof *t->slots)) == NULL)
		return -1;
	t->nslots = n;
	t->free_head = HANDLE_NONE;
	return 0;
}

void
handle_table_free(struct handle_table *t)
{
	free(t->slots);
	memset(t, 0, sizeof *t);
}

struct handle *
handle_new(struct handle_table *t, enum handle_kind kind, const char *path)
{
	struct handle *h;
	size_t len;

	if (kind == HANDLE_FREE)
		return NULL;
	if (t->free_head != HANDLE_NONE) {
		h = &t->slots[t->free_head];
		t->free_head = h->next_free;
	} else if (t->fresh < t->nslots) {
		h = &t->slots[t->fresh++];
	} else {
		return NULL;
	}
	t->used++;
	h->kind = kind;
	h->fd = -1;
	h->dir = NULL;
	h->flags = 0;
	h->bytes_read = h->bytes_written = 0;
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
	put_u32(out, (uint32_t)(h - t->slots));
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
	h = &t->slots[i];
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
	t->free_head = (uint32_t)(h - t->slots);
	t->used--;
}

struct handle *
handle_at(struct handle_table *t, uint32_t i)
{
	if (i >= t->fresh || t->slots[i].kind == HANDLE_FREE)
		return NULL;
	return &t->slots[i];
}
