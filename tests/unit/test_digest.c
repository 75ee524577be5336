/*
 * Unit tests of digest.c: the published test vectors of each algorithm,
 * every way of splitting the input between updates, the length field of
 * inputs beyond 4 GiB, the CRC tables against the polynomial, and the
 * lookup of the draft's names.
 *
 * The expected digests were computed with Python's hashlib and zlib and
 * checked against the examples of FIPS 180-4, the test suite of RFC 1321
 * (A.5) and the CRC-32 check value of "123456789".
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* cmocka 1.1.5 needs the four headers above it. */
#include <cmocka.h>

#include "../../digest.c"
#include "unit.h"

/* The FIPS 180-4 examples of 448 and 896 bits. */
#define MSG448	"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"
#define MSG896	"abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmn" \
		"hijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu"

/* A message, repeated, and its digest in hex. */
struct vector {
	const char	*algo;
	const char	*msg;
	size_t		 repeat;
	const char	*hex;
};

static const struct vector vectors[] = {
	/* RFC 1321, A.5. */
	{ "md5", "", 1, "d41d8cd98f00b204e9800998ecf8427e" },
	{ "md5", "a", 1, "0cc175b9c0f1b6a831c399e269772661" },
	{ "md5", "abc", 1, "900150983cd24fb0d6963f7d28e17f72" },
	{ "md5", "message digest", 1, "f96b697d7cb7938d525a2f31aaf161d0" },
	{ "md5", "abcdefghijklmnopqrstuvwxyz", 1,
	    "c3fcd3d76192e4007dfb496cca67e13b" },
	{ "md5", "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	    "0123456789", 1, "d174ab98d277d9f5a5611c2c9f419d9f" },
	{ "md5", "1234567890", 8, "57edf4a22be3c955ac49da2e2107b67a" },
	{ "md5", "a", 1000000, "7707d6ae4e027c70eea2a935c2296f21" },

	/* FIPS 180-4 examples, the empty message and a million 'a's. */
	{ "sha1", "", 1, "da39a3ee5e6b4b0d3255bfef95601890afd80709" },
	{ "sha1", "abc", 1, "a9993e364706816aba3e25717850c26c9cd0d89d" },
	{ "sha1", MSG448, 1, "84983e441c3bd26ebaae4aa1f95129e5e54670f1" },
	{ "sha1", MSG896, 1, "a49b2446a02c645bf419f995b67091253a04a259" },
	{ "sha1", "a", 1000000, "34aa973cd4c4daa4f61eeb2bdbad27316534016f" },

	{ "sha224", "", 1,
	    "d14a028c2a3a2bc9476102bb288234c415a2b01f828ea62ac5b3e42f" },
	{ "sha224", "abc", 1,
	    "23097d223405d8228642a477bda255b32aadbce4bda0b3f7e36c9da7" },
	{ "sha224", MSG448, 1,
	    "75388b16512776cc5dba5da1fd890150b0c6455cb4f58b1952522525" },
	{ "sha224", MSG896, 1,
	    "c97ca9a559850ce97a04a96def6d99a9e0e0e2ab14e6b8df265fc0b3" },
	{ "sha224", "a", 1000000,
	    "20794655980c91d8bbb4c1ea97618a4bf03f42581948b2ee4ee7ad67" },

	{ "sha256", "", 1, "e3b0c44298fc1c149afbf4c8996fb924"
	    "27ae41e4649b934ca495991b7852b855" },
	{ "sha256", "abc", 1, "ba7816bf8f01cfea414140de5dae2223"
	    "b00361a396177a9cb410ff61f20015ad" },
	{ "sha256", MSG448, 1, "248d6a61d20638b8e5c026930c3e6039"
	    "a33ce45964ff2167f6ecedd419db06c1" },
	{ "sha256", MSG896, 1, "cf5b16a778af8380036ce59e7b049237"
	    "0b249b11e8f07a51afac45037afee9d1" },
	{ "sha256", "a", 1000000, "cdc76e5c9914fb9281a1c7e284d73e67"
	    "f1809a48a497200e046d39ccc7112cd0" },

	{ "sha384", "", 1, "38b060a751ac96384cd9327eb1b1e36a"
	    "21fdb71114be07434c0cc7bf63f6e1da"
	    "274edebfe76f65fbd51ad2f14898b95b" },
	{ "sha384", "abc", 1, "cb00753f45a35e8bb5a03d699ac65007"
	    "272c32ab0eded1631a8b605a43ff5bed"
	    "8086072ba1e7cc2358baeca134c825a7" },
	{ "sha384", MSG448, 1, "3391fdddfc8dc7393707a65b1b470939"
	    "7cf8b1d162af05abfe8f450de5f36bc6"
	    "b0455a8520bc4e6f5fe95b1fe3c8452b" },
	{ "sha384", MSG896, 1, "09330c33f71147e83d192fc782cd1b47"
	    "53111b173b3b05d22fa08086e3b0f712"
	    "fcc7c71a557e2db966c3e9fa91746039" },
	{ "sha384", "a", 1000000, "9d0e1809716474cb086e834e310a4a1c"
	    "ed149e9c00f248527972cec5704c2a5b"
	    "07b8b3dc38ecc4ebae97ddd87f3d8985" },

	{ "sha512", "", 1, "cf83e1357eefb8bdf1542850d66d8007"
	    "d620e4050b5715dc83f4a921d36ce9ce"
	    "47d0d13c5d85f2b0ff8318d2877eec2f"
	    "63b931bd47417a81a538327af927da3e" },
	{ "sha512", "abc", 1, "ddaf35a193617abacc417349ae204131"
	    "12e6fa4e89a97ea20a9eeee64b55d39a"
	    "2192992a274fc1a836ba3c23a3feebbd"
	    "454d4423643ce80e2a9ac94fa54ca49f" },
	{ "sha512", MSG448, 1, "204a8fc6dda82f0a0ced7beb8e08a416"
	    "57c16ef468b228a8279be331a703c335"
	    "96fd15c13b1b07f9aa1d3bea57789ca0"
	    "31ad85c7a71dd70354ec631238ca3445" },
	{ "sha512", MSG896, 1, "8e959b75dae313da8cf4f72814fc143f"
	    "8f7779c6eb9f7fa17299aeadb6889018"
	    "501d289e4900f7e4331b99dec4b5433a"
	    "c7d329eeb6dd26545e96e55b874be909" },
	{ "sha512", "a", 1000000, "e718483d0ce769644e2e42c7bc15b463"
	    "8e1f98b13b2044285632a803afa973eb"
	    "de0ff244877ea60a4cb0432ce577c31b"
	    "eb009c5c2c49aa2e4eadb217ad8cc09b" },

	/* The check value of CRC-32/ISO-HDLC, and zlib.crc32(). */
	{ "crc32", "123456789", 1, "cbf43926" },
	{ "crc32", "", 1, "00000000" },
	{ "crc32", "a", 1, "e8b7be43" },
	{ "crc32", "abc", 1, "352441c2" },
	{ "crc32", "a", 1000000, "dc25bfbc" },
};

#define NVECTORS	(sizeof(vectors) / sizeof(vectors[0]))

static const char *const all_names[] = {
	"md5", "sha1", "sha224", "sha256", "sha384", "sha512", "crc32"
};

#define NNAMES		(sizeof(all_names) / sizeof(all_names[0]))

/* The split test's message: long enough for several SHA-512 blocks. */
#define SPLIT_LEN	1000

static const struct digest_algo *
must_find(const char *name)
{
	const struct digest_algo *algo;

	algo = digest_by_name(name, strlen(name));
	assert_non_null(algo);
	return algo;
}

static void
to_hex(const uint8_t *md, size_t len, char *hex)
{
	static const char digits[] = "0123456789abcdef";
	size_t i;

	for (i = 0; i < len; i++) {
		hex[2 * i] = digits[md[i] >> 4];
		hex[2 * i + 1] = digits[md[i] & 15];
	}
	hex[2 * len] = '\0';
}

/* The digest of data in one update. */
static void
digest_once(const struct digest_algo *algo, const void *data, size_t len,
    uint8_t *md)
{
	struct digest_ctx ctx;

	digest_init(&ctx, algo);
	digest_update(&ctx, data, len);
	digest_final(&ctx, md);
}

/* Checks every vector of one algorithm. */
static void
check_vectors(const char *name)
{
	const struct digest_algo *algo = must_find(name);
	struct digest_ctx ctx;
	uint8_t md[DIGEST_MAX_LEN];
	char hex[2 * DIGEST_MAX_LEN + 1];
	size_t i, r, seen = 0;

	for (i = 0; i < NVECTORS; i++) {
		if (strcmp(vectors[i].algo, name) != 0)
			continue;
		/* Act: the message, repeated, one copy per update. */
		digest_init(&ctx, algo);
		for (r = 0; r < vectors[i].repeat; r++)
			digest_update(&ctx, vectors[i].msg,
			    strlen(vectors[i].msg));
		digest_final(&ctx, md);
		/* Check. */
		to_hex(md, digest_len(algo), hex);
		assert_string_equal(hex, vectors[i].hex);
		seen++;
	}
	assert_true(seen >= 4);
}

static void
test_md5_rfc1321_suite(void **state)
{
	(void)state;
	check_vectors("md5");
}

static void
test_sha1_fips_examples(void **state)
{
	(void)state;
	check_vectors("sha1");
}

static void
test_sha224_fips_examples(void **state)
{
	(void)state;
	check_vectors("sha224");
}

static void
test_sha256_fips_examples(void **state)
{
	(void)state;
	check_vectors("sha256");
}

static void
test_sha384_fips_examples(void **state)
{
	(void)state;
	check_vectors("sha384");
}

static void
test_sha512_fips_examples(void **state)
{
	(void)state;
	check_vectors("sha512");
}

static void
test_crc32_check_value(void **state)
{
	(void)state;
	check_vectors("crc32");
}

/* Deterministic bytes that are not all alike. */
static void
fill_pattern(uint8_t *buf, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++)
		buf[i] = (uint8_t)(i * 131 + 7);
}

/*
 * Every prefix of 0 to 300 bytes, digested in one update; the digests
 * concatenated and hashed with SHA-256.  This crosses every padding
 * boundary (55/56 and 64 bytes; 111/112 and 128 bytes) of every algorithm.
 * The expected values come from the same computation in Python.
 */
static void
test_update_every_prefix_length(void **state)
{
	static const struct {
		const char	*algo;
		const char	*hex;
	} chains[] = {
		{ "md5", "7da9a6efd97813ac220494bd0b5f51c7"
		    "fa07959f52a1495996db5cfc8be472f3" },
		{ "sha1", "1a3828d1d5b9d58dbef7b9cda32e27c5"
		    "8d7ab383b55e1ad473c5debcd815ae58" },
		{ "sha224", "ba55e0a59397ba174cb0360263426311"
		    "0e20fdc06690d0e81b56baaa620e76ea" },
		{ "sha256", "7722024365d27836079cbf29de35d060"
		    "b9383d7c713083199661392f983216d4" },
		{ "sha384", "3cbaed8f97b996300499f1236ef6a578"
		    "faa9f7d7c2cd55c695882125a5ff8790" },
		{ "sha512", "90babf173b8af36079187d2c526d7882"
		    "bc7ebcea36a9f744d207d09d26c1dc1f" },
		{ "crc32", "dbcf1150e023073f902ab5e35eeb7cfe"
		    "1727540050e74b57cb97d57683634bd1" },
	};
	const struct digest_algo *algo, *outer_algo = must_find("sha256");
	struct digest_ctx outer;
	uint8_t data[300], md[DIGEST_MAX_LEN];
	char hex[2 * DIGEST_MAX_LEN + 1];
	size_t i, len;

	(void)state;
	fill_pattern(data, sizeof(data));
	for (i = 0; i < sizeof(chains) / sizeof(chains[0]); i++) {
		algo = must_find(chains[i].algo);
		digest_init(&outer, outer_algo);
		for (len = 0; len <= sizeof(data); len++) {
			digest_once(algo, data, len, md);
			digest_update(&outer, md, digest_len(algo));
		}
		digest_final(&outer, md);
		to_hex(md, digest_len(outer_algo), hex);
		assert_string_equal(hex, chains[i].hex);
	}
}

/* The digest of data fed in pieces of chunk bytes. */
static void
digest_chunked(const struct digest_algo *algo, const uint8_t *data,
    size_t len, size_t chunk, uint8_t *md)
{
	struct digest_ctx ctx;
	size_t off, n;

	digest_init(&ctx, algo);
	for (off = 0; off < len; off += n) {
		n = len - off < chunk ? len - off : chunk;
		digest_update(&ctx, data + off, n);
	}
	digest_final(&ctx, md);
}

/*
 * The same bytes split in every way tried: one byte at a time, odd sizes
 * that straddle block boundaries, and the sizes around the padding limits.
 */
static void
test_update_split_sizes_agree(void **state)
{
	static const size_t lens[] = {
		0, 1, 3, 55, 56, 57, 63, 64, 65, 111, 112, 113, 119, 120,
		127, 128, 129, 255, 256, 257, SPLIT_LEN
	};
	static const size_t chunks[] = {
		1, 2, 3, 5, 7, 13, 17, 31, 55, 56, 63, 64, 65, 111, 112,
		127, 128, 129, 200, 999
	};
	const struct digest_algo *algo;
	uint8_t data[SPLIT_LEN], want[DIGEST_MAX_LEN], got[DIGEST_MAX_LEN];
	size_t a, l, c;

	(void)state;
	fill_pattern(data, sizeof(data));
	for (a = 0; a < NNAMES; a++) {
		algo = must_find(all_names[a]);
		for (l = 0; l < sizeof(lens) / sizeof(lens[0]); l++) {
			digest_once(algo, data, lens[l], want);
			for (c = 0; c < sizeof(chunks) / sizeof(chunks[0]);
			    c++) {
				digest_chunked(algo, data, lens[l], chunks[c],
				    got);
				assert_memory_equal(got, want,
				    digest_len(algo));
			}
		}
	}
}

/* Pieces of ever-changing sizes, zero-length updates among them. */
static void
test_update_uneven_pieces_agree(void **state)
{
	const struct digest_algo *algo;
	struct digest_ctx ctx;
	uint8_t data[SPLIT_LEN], want[DIGEST_MAX_LEN], got[DIGEST_MAX_LEN];
	size_t a, off, n, step;

	(void)state;
	fill_pattern(data, sizeof(data));
	for (a = 0; a < NNAMES; a++) {
		algo = must_find(all_names[a]);
		digest_once(algo, data, sizeof(data), want);
		digest_init(&ctx, algo);
		digest_update(&ctx, NULL, 0);
		for (off = 0, step = 0; off < sizeof(data); off += n, step++) {
			n = (step * 37 + 11) % 150;
			if (n > sizeof(data) - off)
				n = sizeof(data) - off;
			digest_update(&ctx, data + off, n);
		}
		digest_final(&ctx, got);
		assert_memory_equal(got, want, digest_len(algo));
	}
}

/* Two computations interleaved do not disturb each other. */
static void
test_update_contexts_are_independent(void **state)
{
	static const char msg[] = MSG448;
	const struct digest_algo *algo = must_find("sha256");
	struct digest_ctx c1, c2;
	uint8_t md[DIGEST_MAX_LEN];
	char hex[2 * DIGEST_MAX_LEN + 1];

	(void)state;
	digest_init(&c1, algo);
	digest_init(&c2, algo);
	digest_update(&c1, "ab", 2);
	digest_update(&c2, msg, 30);
	digest_update(&c1, "c", 1);
	digest_update(&c2, &msg[30], strlen(msg) - 30);
	digest_final(&c1, md);
	to_hex(md, digest_len(algo), hex);
	assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223"
	    "b00361a396177a9cb410ff61f20015ad");
	digest_final(&c2, md);
	to_hex(md, digest_len(algo), hex);
	assert_string_equal(hex, "248d6a61d20638b8e5c026930c3e6039"
	    "a33ce45964ff2167f6ecedd419db06c1");
}

/* A context started again after digest_final() gives the same digest. */
static void
test_init_again_after_final(void **state)
{
	const struct digest_algo *algo;
	struct digest_ctx ctx;
	uint8_t first[DIGEST_MAX_LEN], second[DIGEST_MAX_LEN];
	size_t a;

	(void)state;
	for (a = 0; a < NNAMES; a++) {
		algo = must_find(all_names[a]);
		digest_init(&ctx, algo);
		digest_update(&ctx, MSG896, strlen(MSG896));
		digest_final(&ctx, first);
		digest_init(&ctx, algo);
		digest_update(&ctx, MSG896, strlen(MSG896));
		digest_final(&ctx, second);
		assert_memory_equal(first, second, digest_len(algo));
	}
}

/*
 * The length field of the last block, for an input of more than 4 GiB.
 * Hashing that much here would take minutes under the sanitizers, so the
 * byte count is set by hand; the final block is left in ctx->buf.
 */
static void
test_final_length_field_beyond_4gib(void **state)
{
	/* 0x123456789 bytes is 0x91a2b3c48 bits. */
	static const uint8_t be[8] = {
		0x00, 0x00, 0x00, 0x09, 0x1a, 0x2b, 0x3c, 0x48
	};
	static const uint8_t le[8] = {
		0x48, 0x3c, 0x2b, 0x1a, 0x09, 0x00, 0x00, 0x00
	};
	struct digest_ctx ctx;
	uint8_t md[DIGEST_MAX_LEN];

	(void)state;
	digest_init(&ctx, must_find("sha256"));
	ctx.count = 0x123456789;
	digest_final(&ctx, md);
	assert_int_equal(ctx.buf[0], 0x80);
	assert_memory_equal(ctx.buf + 56, be, 8);

	digest_init(&ctx, must_find("sha1"));
	ctx.count = 0x123456789;
	digest_final(&ctx, md);
	assert_memory_equal(ctx.buf + 56, be, 8);

	digest_init(&ctx, must_find("md5"));
	ctx.count = 0x123456789;
	digest_final(&ctx, md);
	assert_memory_equal(ctx.buf + 56, le, 8);
}

/*
 * SHA-384/512 encode the length in 128 bits: the bits shifted out of the
 * byte count and its carry word land in the upper half.
 */
static void
test_final_length_field_128_bits(void **state)
{
	static const uint8_t want[16] = {
		0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x2f,
		0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x08
	};
	struct digest_ctx ctx;
	uint8_t md[DIGEST_MAX_LEN];

	(void)state;
	/* (5 * 2^64 + 0xe000000000000001) bytes, times 8. */
	digest_init(&ctx, must_find("sha512"));
	ctx.count = 0xe000000000000001;
	ctx.count_hi = 5;
	digest_final(&ctx, md);
	assert_memory_equal(ctx.buf + 112, want, 16);

	digest_init(&ctx, must_find("sha384"));
	ctx.count = 0xe000000000000001;
	ctx.count_hi = 5;
	digest_final(&ctx, md);
	assert_memory_equal(ctx.buf + 112, want, 16);
}

/* The byte count carries into its upper word. */
static void
test_update_count_carries(void **state)
{
	struct digest_ctx ctx;

	(void)state;
	digest_init(&ctx, must_find("sha512"));
	ctx.count = UINT64_MAX - 2;
	digest_update(&ctx, "abcde", 5);
	assert_true(ctx.count == 2);
	assert_true(ctx.count_hi == 1);
}

/* The CRC tables hold what the polynomial gives, bit by bit. */
static void
test_crc32_tables_match_polynomial(void **state)
{
	uint32_t c;
	int k, n, bit;

	(void)state;
	for (k = 0; k < 8; k++) {
		for (n = 0; n < 256; n++) {
			c = (uint32_t)n;
			for (bit = 0; bit < 8 * (k + 1); bit++)
				c = (c >> 1) ^ ((c & 1) ? 0xedb88320 : 0);
			assert_int_equal(crc32_table[k][n], c);
		}
	}
}

/* Each name the draft defines, and the digest lengths. */
static void
test_by_name_finds_draft_names(void **state)
{
	static const size_t lens[NNAMES] = { 16, 20, 28, 32, 48, 64, 4 };
	const struct digest_algo *algo;
	size_t i;

	(void)state;
	for (i = 0; i < NNAMES; i++) {
		algo = must_find(all_names[i]);
		assert_string_equal(digest_name(algo), all_names[i]);
		assert_int_equal(digest_len(algo), lens[i]);
		assert_true(digest_len(algo) <= DIGEST_MAX_LEN);
	}
	/* The name need not end in a NUL. */
	assert_ptr_equal(digest_by_name("sha256,md5", 6), must_find("sha256"));
}

static void
test_by_name_unknown_is_null(void **state)
{
	static const char *const bad[] = {
		"", "s", "sha", "sha2", "sha25", "sha2566", "SHA256", "Md5",
		"md", "md55", "crc", "crc32c", "sha-1", "sha-256", " md5",
		"md5 ", "sha512/256", "adler32"
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_null(digest_by_name(bad[i], strlen(bad[i])));
	/* A prefix of a name, by its length, and a NUL inside the length. */
	assert_null(digest_by_name("sha256", 5));
	assert_null(digest_by_name("md5\0", 4));
	assert_null(digest_by_name(NULL, 0));
}

/* The first name of the list that we support wins. */
static void
test_select_first_supported(void **state)
{
	static const struct {
		const char	*list;
		const char	*want;
	} cases[] = {
		{ "sha256", "sha256" },
		{ "md5,sha1", "md5" },
		{ "foo,sha1,md5", "sha1" },
		{ "sha-1,sha,crc32", "crc32" },
		{ ",md5", "md5" },
		{ "md5,", "md5" },
		{ ",,sha512,,", "sha512" },
		{ "sha256,sha256", "sha256" },
	};
	const struct digest_algo *algo;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		algo = digest_select(cases[i].list, strlen(cases[i].list));
		assert_non_null(algo);
		assert_string_equal(digest_name(algo), cases[i].want);
	}
	/* The list ends at its length, not at a NUL. */
	assert_string_equal(digest_name(digest_select("foo,md5,sha1", 7)),
	    "md5");
}

static void
test_select_none_supported_is_null(void **state)
{
	static const char *const lists[] = {
		"", ",", ",,", "foo", "sha", "sha2,md", "SHA1,MD5", "md5 ",
		" sha1, md5"
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(lists) / sizeof(lists[0]); i++)
		assert_null(digest_select(lists[i], strlen(lists[i])));
	/* "md5" cut to "md". */
	assert_null(digest_select("sha,md5", 6));
	assert_null(digest_select(NULL, 0));
}

int
main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_md5_rfc1321_suite),
		cmocka_unit_test(test_sha1_fips_examples),
		cmocka_unit_test(test_sha224_fips_examples),
		cmocka_unit_test(test_sha256_fips_examples),
		cmocka_unit_test(test_sha384_fips_examples),
		cmocka_unit_test(test_sha512_fips_examples),
		cmocka_unit_test(test_crc32_check_value),
		cmocka_unit_test(test_update_every_prefix_length),
		cmocka_unit_test(test_update_split_sizes_agree),
		cmocka_unit_test(test_update_uneven_pieces_agree),
		cmocka_unit_test(test_update_contexts_are_independent),
		cmocka_unit_test(test_init_again_after_final),
		cmocka_unit_test(test_final_length_field_beyond_4gib),
		cmocka_unit_test(test_final_length_field_128_bits),
		cmocka_unit_test(test_update_count_carries),
		cmocka_unit_test(test_crc32_tables_match_polynomial),
		cmocka_unit_test(test_by_name_finds_draft_names),
		cmocka_unit_test(test_by_name_unknown_is_null),
		cmocka_unit_test(test_select_first_supported),
		cmocka_unit_test(test_select_none_supported_is_null),
	};

	if (unit_args(argc, argv) != 0)
		return 2;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
