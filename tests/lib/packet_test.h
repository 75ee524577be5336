/*
 * What packet.c keeps to itself, for the tests that #include it
 * (tests/unit/test_packet.c, tests/fuzz/fuzz_packet.c): the bytes buffered
 * that do not yet form a packet, one byte put in a reply, and the bytes of
 * the reply in construction.  Include it after packet.c.
 */
#ifndef PACKET_TEST_H
#define PACKET_TEST_H

static inline size_t
ibuf_pending(const struct ibuf *ib)
{
	return ib->end - ib->start;
}

static inline int
pkt_put_u8(struct oqueue *q, uint8_t v)
{
	return pkt_put_raw(q, &v, 1);
}

static inline size_t
pkt_reply_len(const struct oqueue *q, const struct reply *r)
{
	return q->len - r->start;
}

#endif /* PACKET_TEST_H */
