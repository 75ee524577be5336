/*
 * Message digests for the check-file extension
 * (draft-ietf-secsh-filexfer-extensions-00, section 3): MD5 (RFC 1321),
 * SHA-1, SHA-224, SHA-256, SHA-384 and SHA-512 (FIPS 180-4), and the
 * CRC-32 of ISO 3309 and ITU-T V.42, as zlib and gzip compute it.
 *
 * Nothing is allocated and nothing global changes: a struct digest_ctx
 * holds all the state of one computation and may live on the stack.  The
 * byte count is kept in 64 bits plus a carry word, so the lengths the hash
 * standards encode (64 bits, or 128 bits for SHA-384 and SHA-512) are
 * right for inputs of any size, 4 GiB and beyond.
 */
#ifndef DIGEST_H
#define DIGEST_H

#include <stddef.h>
#include <stdint.h>

/* The longest digest (SHA-512), and the longest block (SHA-384, SHA-512). */
#define DIGEST_MAX_LEN		64
#define DIGEST_MAX_BLOCK	128

/* An algorithm.  The descriptors are constant and never go away. */
struct digest_algo;

/*
 * The state of one computation.  The fields belong to digest.c; they are
 * shown only so that a caller can put a context on the stack.
 */
struct digest_ctx {
	const struct digest_algo *algo;
	union {
		uint32_t	w32[8];	/* MD5, SHA-1, SHA-224/256, CRC-32 */
		uint64_t	w64[8];	/* SHA-384/512 */
	} h;
	uint64_t	count;		/* bytes hashed, modulo 2^64 */
	uint64_t	count_hi;	/* carries out of count */
	size_t		fill;		/* bytes waiting in buf */
	uint8_t		buf[DIGEST_MAX_BLOCK];
};

/*
 * The algorithm named name, which is len bytes long and need not end in a
 * NUL.  The names are the draft's: "md5", "sha1", "sha224", "sha256",
 * "sha384", "sha512" and "crc32", matched exactly, case included.  Returns
 * NULL for any other name, a prefix of one of them included.
 */
const struct digest_algo *digest_by_name(const char *name, size_t len);
/*
 * The first algorithm of list that we support, as the server picks the
 * hash of check-file.  list is the hash-algorithm-list field: len bytes of
 * names separated by commas, without a NUL.  Returns NULL if none is
 * supported.
 */
const struct digest_algo *digest_select(const char *list, size_t len);
/* The name as the draft spells it (a static string), for the reply. */
const char	*digest_name(const struct digest_algo *);
/* The length of a digest in bytes: from 4 (crc32) to DIGEST_MAX_LEN. */
size_t		 digest_len(const struct digest_algo *);

/*
 * digest_init() starts a computation of algo in ctx.  digest_update() adds
 * len bytes; the digest does not depend on how the input is split between
 * calls, and len may be 0.  digest_final() writes digest_len(algo) bytes to
 * out.  After digest_final(), ctx must go through digest_init() again
 * before it is used.
 *
 * The CRC-32 is written as a uint32 in network byte order: the CRC of
 * "123456789" is the bytes cb f4 39 26.  The hashes are written as their
 * standards define.
 */
void	digest_init(struct digest_ctx *ctx, const struct digest_algo *algo);
void	digest_update(struct digest_ctx *ctx, const void *data, size_t len);
void	digest_final(struct digest_ctx *ctx, uint8_t *out);

#endif /* DIGEST_H */
