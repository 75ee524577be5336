/*
 * File I/O engines (fileio.h): the loops that move or hash file data for a
 * request, apart from the protocol that asks for them.
 */
#include <sys/types.h>
#include <sys/mman.h>

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <unistd.h>

#include "digest.h"
#include "fileio.h"
#include "sys-gnu.h"

/*
 * What one copy_file_range(2) call is asked for: small enough that the stop
 * check runs several times a second, large enough that the calls cost
 * nothing against the copy.
 */
#define KERNEL_CHUNK	(16 * 1024 * 1024)

static uint8_t *scratch;	/* FILEIO_CHUNK bytes, mapped on first use */
static int (*stop_check)(void);

void
fileio_set_stop(int (*stop)(void))
{
	stop_check = stop;
}

/* Whether a long operation must stop now. */
static int
stopped(void)
{
	return stop_check != NULL && stop_check();
}

/* The scratch buffer, or NULL with errno. */
static uint8_t *
scratch_buf(void)
{
	void *p;

	if (scratch == NULL) {
		p = mmap(NULL, FILEIO_CHUNK, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			return NULL;
		scratch = p;
	}
	return scratch;
}

void
fileio_release(void)
{
	if (scratch != NULL)
		(void)madvise(scratch, FILEIO_CHUNK, MADV_DONTNEED);
}

ssize_t
fileio_read_full(int fd, void *buf, size_t len, off_t off)
{
	uint8_t *p = buf;
	size_t got = 0;
	ssize_t n;

	while (got < len) {
		n = pread(fd, p + got, len - got, off + (off_t)got);
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

int
fileio_write_full(int fd, const void *buf, size_t len, off_t off,
    uint64_t *written)
{
	const uint8_t *p = buf;
	size_t done = 0;
	ssize_t n;

	while (done < len) {
		if (off == FILEIO_APPEND)
			n = write(fd, p + done, len - done);
		else
			n = pwrite(fd, p + done, len - done, off + (off_t)done);
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
		*written += (uint64_t)n;
	}
	return 0;
}

/* The copy by hand, from where the kernel's copy stopped. */
static int
copy_by_hand(int in, off_t inoff, int out, off_t outoff, uint64_t len,
    int to_eof, struct fileio_copied *c)
{
	uint64_t done = 0;
	uint8_t *buf;
	size_t want;
	ssize_t n;

	if ((buf = scratch_buf()) == NULL)
		return -1;
	while (to_eof || done < len) {
		if (stopped())
			return FILEIO_STOP;
		want = FILEIO_CHUNK;
		if (!to_eof && len - done < want)
			want = (size_t)(len - done);
		if ((n = fileio_read_full(in, buf, want, inoff)) == -1)
			return -1;
		if (n == 0)
			return to_eof ? 0 : FILEIO_EOF;
		c->read += (uint64_t)n;
		if (fileio_write_full(out, buf, (size_t)n, outoff,
		    &c->written) == -1)
			return -1;
		inoff += n;
		if (outoff != FILEIO_APPEND)
			outoff += n;
		done += (uint64_t)n;
	}
	return 0;
}

int
fileio_copy(int in, off_t inoff, int out, off_t outoff, uint64_t len,
    struct fileio_copied *c)
{
	int to_eof = len == 0;
	uint64_t done = 0;
	size_t want;
	ssize_t n;

	c->read = c->written = 0;
	/* copy_file_range(2) refuses an O_APPEND target: by hand. */
	while (outoff != FILEIO_APPEND && (to_eof || done < len)) {
		if (stopped())
			return FILEIO_STOP;
		want = KERNEL_CHUNK;
		if (!to_eof && len - done < want)
			want = (size_t)(len - done);
		n = sys_copy_range(in, &inoff, out, &outoff, want);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1 && (errno == ENOSYS || errno == EXDEV ||
		    errno == EINVAL || errno == EOPNOTSUPP))
			break;	/* the kernel cannot: by hand */
		if (n == -1)
			return -1;
		if (n == 0)
			return to_eof ? 0 : FILEIO_EOF;
		c->read += (uint64_t)n;
		c->written += (uint64_t)n;
		done += (uint64_t)n;
	}
	if (!to_eof && done == len)
		return 0;
	return copy_by_hand(in, inoff, out, outoff, len - done, to_eof, c);
}

int
fileio_digest(int fd, off_t off, uint64_t len, const struct digest_algo *algo,
    uint8_t *md, uint64_t *hashed)
{
	struct digest_ctx ctx;
	uint8_t *buf;
	size_t want;
	ssize_t n;

	if ((buf = scratch_buf()) == NULL)
		return -1;
	digest_init(&ctx, algo);
	while (len > 0) {
		if (stopped())
			return FILEIO_STOP;
		want = len < FILEIO_CHUNK ? (size_t)len : FILEIO_CHUNK;
		if ((n = fileio_read_full(fd, buf, want, off)) == -1)
			return -1;
		if (n == 0)
			return FILEIO_EOF;	/* the file shrank meanwhile */
		digest_update(&ctx, buf, (size_t)n);
		*hashed += (uint64_t)n;
		off += n;
		len -= (uint64_t)n;
	}
	digest_final(&ctx, md);
	return 0;
}
