/*
 * File I/O engines: whole reads and writes, a copy between two descriptors
 * and a digest over a range of one.  They know descriptors and bytes, not the
 * protocol: each returns bytes or 0, -1 with errno, FILEIO_EOF or FILEIO_STOP,
 * and logs nothing.
 *
 * The copy and the digest move data through one scratch buffer, mapped on
 * first use and kept; fileio_release() gives its pages back when the session
 * goes idle, as the input buffer and the reply queue do.
 *
 * Threads: the whole reads and writes keep no state, and a storage worker
 * (jobs.h) may run them ("any thread").  The copy and the digest share the
 * scratch buffer and call the loop's stop check: they are the loop's alone.
 */
#ifndef FILEIO_H
#define FILEIO_H

#include <sys/types.h>

#include <stddef.h>
#include <stdint.h>

#include "digest.h"

/* The input ended before the length asked for. */
#define FILEIO_EOF	(-2)
/* The stop check (fileio_set_stop()) said the session must stop. */
#define FILEIO_STOP	(-3)
/* In place of an output offset: write at the end (an O_APPEND descriptor). */
#define FILEIO_APPEND	((off_t)-1)
/* How much the copy and the digest read at a time. */
#define FILEIO_CHUNK	(256 * 1024)

/*
 * Reads until len bytes or end of file, retrying short reads and EINTR, at
 * off with pread(2).  Returns the bytes read (short only at end of file, or
 * when an error follows some data), or -1 with errno.  Any thread.
 */
ssize_t	fileio_read_full(int fd, void *buf, size_t len, off_t off);
/*
 * Writes all of buf at off, or at the end for FILEIO_APPEND.  Returns 0, or
 * -1 with errno.  *written grows by every byte the kernel took, failure or
 * not: bytes before a failure may be on disk.  Any thread.
 */
int	fileio_write_full(int fd, const void *buf, size_t len, off_t off,
	    uint64_t *written);

/* What a copy moved, counted also when it fails. */
struct fileio_copied {
	uint64_t read;
	uint64_t written;
};

/*
 * Copies len bytes (0: to the end of in) from in at inoff to out at outoff
 * (or FILEIO_APPEND): with copy_file_range(2) while the kernel can, by hand
 * through the scratch buffer otherwise.  Returns 0 when done, FILEIO_EOF
 * when in ended before len bytes, FILEIO_STOP when the stop check said so,
 * or -1 with errno.  The loop's (the scratch buffer, the stop check).
 */
int	fileio_copy(int in, off_t inoff, int out, off_t outoff, uint64_t len,
	    struct fileio_copied *);
/*
 * The digest of len bytes of fd from off, with algo, into md.  Returns 0,
 * FILEIO_EOF when the file ends first, FILEIO_STOP as above, or -1 with
 * errno.  *hashed grows by the bytes read.  The loop's, as the copy.
 */
int	fileio_digest(int fd, off_t off, uint64_t len,
	    const struct digest_algo *algo, uint8_t *md, uint64_t *hashed);

/*
 * The stop check: the copy and the digest call stop() between chunks; when
 * it returns non-zero they end with FILEIO_STOP.  NULL (the default) never
 * stops them.  The loop's, at start.
 */
void	fileio_set_stop(int (*stop)(void));
/*
 * Gives back the scratch buffer's pages; they read as zeros when next used.
 * The loop's.
 */
void	fileio_release(void);

#endif /* FILEIO_H */
