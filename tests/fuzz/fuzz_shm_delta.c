/*
 * Fuzz target: the shm lanes' delta decoder (src/dev/shm_delta.c). The input is a run of
 * 51-byte slots for one lane's consumer: byte 0 the length (49 + (b & 0x7f) % 80) and whether
 * the datagram came whole (0x80: the body, repeated, is the datagram), bytes 1-2 the word
 * mask, then the 48-byte body. Invariants: a delta decodes or is refused with UB_EBADMSG and
 * nothing changed; a producer holding the consumer's state before it, sending the decoded
 * datagram, writes a slot that decodes to the same bytes and leaves both states equal.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <softub/errors.h>
#include "dev/shm_delta.h"
#include "fuzz.h"

#define REC (3 + UB_SHM_DELTA_BODY)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct ub__shm_delta con, before, pro, again;
    memset(&con, 0, sizeof(con));
    for (size_t off = 0; off + REC <= size && off < 64 * REC; off += REC) {
        const uint8_t *r = data + off, *body = r + 3;
        uint32_t len = UB_SHM_DELTA_MIN + (r[0] & 0x7fu) % 80u;
        uint16_t mask = (uint16_t)(r[1] | r[2] << 8);
        uint8_t dg[UB_SHM_DELTA_MAX], out[UB_SHM_DELTA_MAX], slot[UB_SHM_DELTA_MAX];
        before = con;
        if (r[0] & 0x80) {
            for (uint32_t i = 0; i < len; i++)
                dg[i] = body[i % UB_SHM_DELTA_BODY];
            ub__shm_delta_note(&con, dg, len);
            pro = before;
            uint16_t m = 0;
            (void)ub__shm_delta_encode(&pro, dg, len, slot, &m);
            CHECK(memcmp(&pro, &con, sizeof(con)) == 0);
            continue;
        }
        int rc = ub__shm_delta_decode(&con, len, mask, body, out, sizeof(out));
        CHECK(rc == 0 || rc == UB_EBADMSG);
        if (rc) {
            CHECK(memcmp(&before, &con, sizeof(con)) == 0);
            continue;
        }
        /* The producer's side of the same slot. A consumer's context can hold bytes past a
         * datagram's end that no producer would (a hostile body): compare up to len only. */
        pro = before;
        uint16_t m = 0;
        uint32_t n = ub__shm_delta_encode(&pro, out, len, slot, &m);
        CHECK(n % 8 == 0 && n <= UB_SHM_DELTA_BODY);
        if (n) {
            again = before;
            uint8_t out2[UB_SHM_DELTA_MAX];
            CHECK(ub__shm_delta_decode(&again, len, m, slot, out2, sizeof(out2)) == 0);
            CHECK(memcmp(out, out2, len) == 0);
        }
        /* From here on the consumer is what a producer sending `out` makes of it. */
        ub__shm_delta_note(&con, out, len);
        CHECK(memcmp(&pro, &con, sizeof(con)) == 0);
    }
    return 0;
}
