/*
 * The table of open file and directory handles.  A handle is named by its
 * slot's index and the slot's generation, so a closed handle is never
 * mistaken for the one that reuses its slot.  handles.c knows slots, not the
 * protocol: packet.c puts the pair on the wire.
 */
#ifndef HANDLES_H
#define HANDLES_H

#include <sys/types.h>

#include <dirent.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* At most this many slots, whatever RLIMIT_NOFILE allows. */
#define HANDLE_CAP	32768
/* Slots are allocated this many at a time, when first needed. */
#define HANDLE_CHUNK	64

#define HANDLE_NONE	UINT32_MAX

struct fs_upload;

enum handle_kind {
	HANDLE_FREE = 0,
	HANDLE_FILE,
	HANDLE_DIR,
	HANDLE_PENDING,	/* a file being opened or closed by a job */
};

struct handle {
	enum handle_kind kind;
	uint32_t index;		/* its slot */
	uint32_t gen;
	uint32_t next_free;	/* free list link, while free */
	int fd;			/* file, or the descriptor of dir */
	DIR *dir;
	int flags;		/* open(2) flags of a file */
	uint32_t pflags;	/* the client's SSH_FXF_* flags */
	uint64_t bytes_read;
	uint64_t bytes_written;
	uint64_t first_off;	/* lowest byte read or written, or UINT64_MAX */
	uint64_t last_off;	/* one past the highest */
	int io_errno;		/* the first read or write error, or 0 */
	int no_nowait;		/* reads cannot be asked not to wait */
	/*
	 * Its last READ that a worker ran waited for storage: the next ones
	 * go to a worker without asking the page cache first.
	 */
	int read_waits;
	/*
	 * A storage call on it was given up as the session ended
	 * (requests_abandon()): a worker may still be in it, so the
	 * descriptor is left for the exit to close.
	 */
	int abandoned;
	/*
	 * Free space of its file system (sched.c's space_ample()): when
	 * it was last looked at (0: never), what it was, and the session's
	 * count of bytes handed off then.
	 */
	int64_t space_at;
	uint64_t space_free;
	uint64_t space_spent;
	/* The file it is, when an OPEN run by a worker asked (known). */
	int known;
	dev_t dev;
	ino_t ino;
	struct timespec opened;
	/* -A: the upload it writes, put in place by CLOSE (fs.h), or NULL. */
	struct fs_upload *up;
	/* -m: its OPEN made the file, with the option's mode */
	int mode_forced;
	char path[PATH_MAX];	/* as the client named it, for logging */
};

struct handle_table {
	struct handle **chunks;	/* HANDLE_CHUNK slots each, NULL until used */
	uint32_t nslots;
	uint32_t used;
	uint32_t fresh;		/* slots below this one have been used */
	uint32_t free_head;	/* released slots, HANDLE_NONE when none */
};

/*
 * The number of handles the process can keep open: RLIMIT_NOFILE's soft
 * limit less kept, the descriptors it may hold besides its handles (5 for
 * OpenSSH's budget), at most HANDLE_CAP, at least 1.
 */
uint32_t	handle_limit(uint32_t kept);
/*
 * Makes a table of n slots.  The slots themselves are allocated a chunk at a
 * time as the number of open handles first reaches them, and kept: memory
 * follows the most handles ever open, not the limit.  Returns 0, or -1.
 */
int	handle_table_init(struct handle_table *, uint32_t n);
void	handle_table_free(struct handle_table *);
/*
 * Takes a free slot for kind, path copied in (truncated if too long).
 * Returns NULL when every slot is in use, or a new chunk cannot be
 * allocated.  The caller sets fd or dir.
 */
struct handle	*handle_new(struct handle_table *, enum handle_kind,
		    const char *path);
/*
 * The open handle at slot index with generation gen, as the client named
 * them (any values), if it is of kind (HANDLE_FREE matches any kind).  NULL
 * for a forged, stale or wrong-kind handle.
 */
struct handle	*handle_lookup(struct handle_table *, uint32_t index,
		    uint32_t gen, enum handle_kind);
/* Returns the slot to the free list; the caller has closed what it held. */
void	handle_release(struct handle_table *, struct handle *);
/* The open handle at index i, or NULL: for closing all at exit (i < nslots). */
struct handle	*handle_at(struct handle_table *, uint32_t i);

#endif /* HANDLES_H */
