#!/usr/bin/env python3
"""Regenerates the fuzz seed corpus under tests/fuzz/corpus/ (deterministic).

Every seed is built from the byte vectors of docs/wire-format.md (the same
ones the unit tests assert), plus a few near-valid variants (a reserved value,
a cut) so the fuzzers start next to the interesting edges.

    python3 tests/fuzz/make_corpus.py
"""
import os

HERE = os.path.dirname(os.path.abspath(__file__))


def h(s):
    return bytes.fromhex(s.replace(" ", ""))


# ---- PDS (docs/wire-format.md section 3) ----------------------------------
RUD_REQ = h("1188 fffe 01020304 1122 3344")
ROD_SYN = h("1894 0005 a0b0c0d0 0007 8123")
RUD_CC = h("6900 0000 00000001 0002 0003 44 556677")
RUDI_RESP = h("2a30 0000 deadbeef")
UUD = h("3180 0000")
LINK = h("ff81 0000 0a0b0c0d")  # softub: shm without a PDC; ROD, the receiver's incarnation
ACK = h("3a24 0003 00000100 0102 0304")
ACK_OWN = h("3f81 0003 00000100 0102 0304")
ACK_EPSN = h("3840 0000 00000010 0001 0002 12345678")
ACK_CC_NSCC = h("4298 beef 11223344 5566 7788 00 40 ffff 8000000000000001 1234 85 abcdef 0009")
ACK_CC_RCCC = h("4000 0000 00000000 0000 0000 10 08 0010 00000000000000ff 0a0b0c 000000 0102")
ACK_CCX = h("4800 0000 00000000 0000 0000 e0 01 0002 0000000000000003") + bytes(range(16))
NACK = h("5010 01 00 00000400 0001 0002 00000401")
NACK_CCX = h("6008 07 99 cafebabe 0000 0000 00000000") + bytes(range(0x30, 0x40))
CTRL_PROBE = h("5b28 4321 00001000 0a0a 0b0b 00000fff")
CTRL_NEG = h("5c94 0000 cdef0123 cdef 8876 00000000")

# ---- SES (section 4) --------------------------------------------------------
STD_SOM = h("01 2d 1234 77 abcdef 0678 09ab fedcba9876543210 fedcba98 1122334455667788"
            " aabbccddeeff0011 00010000")
STD_MID = h("05 02 0001 00 000001 0001 0001 0000000000000000 00000002 0000000000000003"
            " 00000100 00001000 00001100")
SMALL = h("01 23 0100 01 000002 0003 0004 0000000000001000")
MEDIUM = h("09 07 2000 00 000005 0006 0007 0102030405060708 0a0b0c0d f0f0f0f0f0f0f0f0")
RSP = h("41 01 1234 05 060708 00000400")
RSP_DATA = h("02 01 0010 00 000001 0020 0800 00000800 00002000")
RSP_DATA_SMALL = h("02 00 0040 00 00abcd 11111111")
ATOMIC = h("02 07 01 00")
CSWAP = h("0d 05 03 00") + bytes(range(0x10, 0x20)) + bytes(range(0x20, 0x30))
RNDV = h("00001000 12345678 1122334455667788 99aabbccddeeff00")

# ---- TSS (section 5) ----------------------------------------------------------
TSS = h("09123456 0001 000000000102")
TSS_SSI = h("0cabcdef 11223344 ffff ffffffffffff")

# ---- softub extension (section 6) ----------------------------------------------
EXT_RO = h("03 04 78 00 0064 0102 0a0b0c0d deadbeef")
# version 1, REQ_STD next, 7 units (16 + SES's 12-byte tail: so_delta, ro_count, send_seq, aux)
LINK_EXT_TAIL = h("13 07 00 00 0000 0102 00000010 deadbeef 0000 0000 00000003 04000001")
EXT_SO = h("04 04 84 00 ffff 0000 ffffffff 00000001")
EXT_V1 = h("13 06 78 00 0064 0102 0a0b0c0d deadbeef c0c1c2c3c4c5c6c7")


# ---- IPv4 + UDP, as the udp device's packet ring gets it ---------------------
IP4_UDP = h("4500 0022 0000 4000 4011 0000 7f000001 7f000001"
            " 03e8 12b7 000e 9bea") + b"softub"

# (test_udp_ring.c's IPv6 datagram: fe80::1 -> ::1, traffic class 1)
IP6_UDP = h("6010 0000 000e 1140 fe800000000000000000000000000001"
            " 00000000000000000000000000000001 03e8 12b7 000e 9b6a") + b"softub"


def with_nh(pds, nh):
    """The PDS header with its 4-bit next-header field replaced."""
    b = bytearray(pds)
    b[0] = (b[0] & 0xF8) | (nh >> 1)
    b[1] = (b[1] & 0x7F) | ((nh & 1) << 7)
    return bytes(b)


def desc(magic, b4, family, port, ip, tail):
    """A 64-byte descriptor: magic, byte 4, the address (family, port, scope, 16 address
    bytes), then from byte 28 what the kind puts there."""
    d = magic + bytes([b4, family]) + port.to_bytes(2, "big") + bytes(4)
    d += ip + bytes(16 - len(ip)) + tail
    return d + bytes(64 - len(d))


def cma(sel, extra, segs):
    """fuzz_cma_desc's input: selector, request length (sum of the segments plus extra),
    then valid_until, the segment count and the segments."""
    total = sum(l for _, l in segs) + extra
    d = bytes([sel]) + total.to_bytes(8, "big")
    d += (123456789).to_bytes(8, "big") + len(segs).to_bytes(2, "big") + bytes(6)
    for a, l in segs:
        d += a.to_bytes(8, "big") + l.to_bytes(8, "big")
    return d


def bundle(*pkts):
    out = bytes([0xF8])
    for p in pkts:
        out += len(p).to_bytes(2, "big") + p
    return out


def flip(b, i, mask):
    b = bytearray(b)
    b[i] ^= mask
    return bytes(b)


def atomic_std():
    b = bytearray(STD_SOM)
    b[0] = 0x04  # FETCHING_ATOMIC
    return bytes(b) + ATOMIC


def rndv_std():
    b = bytearray(STD_SOM)
    b[0] = 0x06  # RNDV_SEND
    return bytes(b) + RNDV


def shm_rec(length, mask, whole=False):
    """One slot for fuzz_shm_delta: a datagram of `length` bytes (49..128)."""
    return bytes([(0x80 if whole else 0) | (length - 49)]) + mask.to_bytes(2, "little") \
        + bytes((length + i) & 0xFF for i in range(48))


CORPUS = {
    "fuzz_pds": {
        "rud_req": RUD_REQ,
        "rod_syn": ROD_SYN,
        "rud_cc": RUD_CC,
        "ack": ACK,
        "ack_own": ACK_OWN,
        "ack_cc_nscc": ACK_CC_NSCC,
        "ack_ccx": ACK_CCX,
        "nack_ccx": NACK_CCX,
        "ctrl_neg": CTRL_NEG,
        "bad_reserved_type": flip(RUD_REQ, 0, 0x68),
        "cut_ack_cc": ACK_CC_NSCC[:31],
        "link": LINK,
        "link_bad_rsvd": flip(LINK, 2, 0x01),
    },
    "fuzz_ses": {
        "std_som": bytes([3]) + STD_SOM,
        "std_mid": bytes([3]) + STD_MID,
        "std_atomic": bytes([3]) + atomic_std(),
        "std_rndv": bytes([3]) + rndv_std(),
        "small": bytes([1]) + SMALL,
        "medium": bytes([2]) + MEDIUM,
        "rsp": bytes([4]) + RSP,
        "rsp_data": bytes([5]) + RSP_DATA,
        "rsp_data_small": bytes([6]) + RSP_DATA_SMALL,
        "small_cswap": bytes([1]) + h("03 03 0008 00 000002 0003 0004 0000000000001000")
        + h("12 06 00 00") + bytes(32),
    },
    "fuzz_tss": {
        "plain": bytes([0]) + TSS + RUD_REQ + bytes(16),
        "ssi_clear_pds": bytes([12]) + TSS_SSI + RUD_REQ + STD_SOM + bytes(16),
        "min": bytes([0]) + TSS + UUD + bytes(16),
        "short": bytes([0]) + TSS + UUD + bytes(15),
        "bad_rsvd": bytes([0]) + flip(TSS, 0, 0x02) + UUD + bytes(16),
    },
    "fuzz_ext": {
        "ro": EXT_RO,
        "so": EXT_SO,
        "v1_tail": EXT_V1,
        "bad_eo3": flip(EXT_SO, 2, 0x40),
        "bad_v8": flip(EXT_RO, 0, 0x80),
    },
    "fuzz_datagram": {
        "write_ext": with_nh(RUD_REQ, 15) + EXT_RO + STD_SOM + bytes([0x5C] * 16),
        "write": RUD_REQ + STD_SOM,
        "send_mid": with_nh(RUD_REQ, 3) + STD_MID + bytes(0x100),
        "read_rsp": with_nh(RUD_REQ, 5) + h("02 01 0010 00 000001 0020 0010 00000010 00000000")
        + bytes(0x10),
        "ack_rsp": with_nh(ACK, 4) + RSP,
        "ack_cc_ext": with_nh(ACK_CC_NSCC, 15) + h("00 04 04 00 0100 0000 00000000 00000001"),
        "ack_own_rsp": ACK_OWN + h("05 04 00 00 0000 0102 0a0b0c0d deadbeef")
        + h("02 01 0010 00 000001 0010 0008 00000008 00000000") + bytes(range(8)),
        # a READ's 512 bytes riding on its request's own ACK (UB_SES_RIDE_DATA)
        "ack_own_read": ACK_OWN + h("05 04 00 00 0000 0102 0a0b0c0d deadbeef")
        + h("02 01 0011 00 000001 0011 0200 00000200 00000000") + bytes(i & 0xFF for i in range(512)),
        "ctrl": CTRL_PROBE,
        "tss_write": TSS_SSI + with_nh(RUD_REQ, 15) + EXT_RO + STD_SOM + bytes(16) + bytes(16),
        "uud_small": with_nh(UUD, 1) + SMALL + bytes(0x10),
        "link_write": LINK + EXT_RO + STD_SOM + bytes([0x5C] * 16),
        # the link path's usual request (ub__wire_link_req): a whole deferrable SEND of 8 bytes,
        # the extension with SES's 12-byte tail; and one with an immediate (HD)
        "link_send": h("ff80 0000 0a0b0c0d") + LINK_EXT_TAIL
        + h("08 03 0000 00 000001 0000 0001 0000000000000005 00000002 0000000000000000"
            " 0000000000000000 00000008") + bytes(range(8)),
        "link_send_imm": h("ff80 0000 00000000") + LINK_EXT_TAIL
        + h("08 07 0000 00 000001 0000 0001 0000000000000005 00000002 0000000000000000"
            " 1122334455667788 00000008") + bytes(range(8)),
        "bad_len": with_nh(RUD_REQ, 3) + STD_MID + bytes(0xFF),
        # the link path's usual response (ub__wire_link_rsp: without and with an 8-byte value)
        # and its READ and fetching atomics (ub__wire_link_req), as their tests build them
        "link_rsp": h(
            "ff8000000a0b0c0d050400000000000100000001deadbeef020000010000000000010000"
            "0000000800000000"),
        "link_rsp_val": h(
            "ff8000000a0b0c0d050400000000000100000001deadbeef020000010000000000010008"
            "00000008000000000102030405060708"),
        "link_read": h(
            "ff8100000a0b0c0d03047800006401020a0b0c0ddeadbeef0201123477abcdef067809ab"
            "fedcba9876543210fedcba981122334455667788000000000000000000000008"),
        "link_fadd": h(
            "ff8100000a0b0c0d03047800006401020a0b0c0ddeadbeef0401123477abcdef067809ab"
            "fedcba9876543210fedcba98112233445566778800000000000000000000000802070000"
            "0000000000000005"),
        "link_cas": h(
            "ff8100000a0b0c0d03047800006401020a0b0c0ddeadbeef0401123477abcdef067809ab"
            "fedcba9876543210fedcba9811223344556677880000000000000000000000080d070000"
            "0000000000000007000000000000000000000000000000090000000000000000"),
    },
    "fuzz_udp_ring": {
        # flags byte (bit 0: the kernel checked the checksum; the rest: bytes not captured),
        # then the frame from its IP header (tests/unit/test_udp_ring.c's datagram)
        "csum_ok": bytes([0]) + IP4_UDP,
        "csum_bad": bytes([0]) + flip(IP4_UDP, 29, 0x01),
        "csum_known": bytes([1]) + flip(IP4_UDP, 29, 0x01),
        "no_csum": bytes([0]) + IP4_UDP[:26] + bytes(2) + IP4_UDP[28:],
        "options": bytes([1]) + h("46") + IP4_UDP[1:20] + bytes(4) + IP4_UDP[20:],
        "note": bytes([2 * 100 + 1]) + IP4_UDP[:24] + h("05dc") + IP4_UDP[26:],
        "cut": bytes([1]) + IP4_UDP[:27],
        "bad_ihl": bytes([1]) + h("43") + IP4_UDP[1:],
        "v6": bytes([0]) + IP6_UDP,
        "v6_ext": bytes([1]) + IP6_UDP[:6] + h("00") + IP6_UDP[7:],
        "v6_no_csum": bytes([0]) + IP6_UDP[:46] + bytes(2) + IP6_UDP[48:],
    },
    # slots of one shm lane: length byte (0x80: whole), word mask (little-endian), 48-byte body
    "fuzz_shm_delta": {
        "whole_then_delta": shm_rec(88, 0, True) + shm_rec(88, 0x0402) + shm_rec(88, 0x0001),
        "partial_word": shm_rec(89, 0, True) + shm_rec(89, 0x0800),
        "six_words": shm_rec(128, 0, True) + shm_rec(128, 0x8421 | 0x0300),
        "seven_words": shm_rec(128, 0, True) + shm_rec(128, 0x007f),
        "no_context": shm_rec(64, 0x0001),
        "past_end": shm_rec(64, 0, True) + shm_rec(64, 0x0100),
    },
    # descriptors as ub_jetty_export and ub_seg_export write them (src/api/jetty.c, seg.c)
    "fuzz_desc": {
        "jetty_v4": desc(b"UBJ1", 0, 2, 4791, bytes([127, 0, 0, 1]), h("00000007")),
        "jetty_tagged_shm": desc(b"UBJ1", 1, 4, 42, b"", h("00fffffe")),
        "jetty_id0": desc(b"UBJ1", 0, 2, 4791, bytes([10, 0, 0, 2]), h("00000000")),
        "seg_v6": desc(b"UBS1", 0x0f, 3, 5000, h("fe800000000000000000000000000001"),
                       h("00000011") + h("00007f0000001000") + h("0000000000010000")),
        "seg_bad_access": desc(b"UBS1", 0x10, 1, 3, b"", h("00000001")),
        "short": desc(b"UBJ1", 0, 2, 1, b"", h("00000001"))[:40],
    },
    # opcode selector (bit 7: the length is the segments' sum), length, then the descriptor
    "fuzz_cma_desc": {
        "write_one": cma(0x80, 0, [(0x7f0000001000, 0x100000)]),
        "read_two": cma(0x81, 0, [(0x7f0000001000, 0x1000), (0x7f0000100000, 0x2000)]),
        "send_len_off": cma(0x02, 0x10, [(0x1000, 0x20)]),
        "wraps": cma(0x80, 0, [(0xfffffffffffff000, 0x2000)]),
        "atomic": cma(0x83, 0, [(0x1000, 8)]),
        "no_segs": bytes([0x80]) + bytes(8) + bytes(8) + h("0000") + bytes(6),
    },
    "fuzz_bundle": {
        "two": h("f8 0003 400102 0001 17"),
        "one": h("f8 0001 17"),
        "nested": h("f8 0004 f8000117"),
        "ack_write": bundle(with_nh(ACK, 4) + RSP, RUD_REQ + STD_SOM),
        # An ACK carried ahead of a message's last packet, its payload copied in (engine.c).
        "ack_carried": bundle(with_nh(ACK, 4) + RSP, with_nh(RUD_REQ, 3) + STD_MID + bytes(0x100)),
    },
}


def main():
    for target, seeds in CORPUS.items():
        d = os.path.join(HERE, "corpus", target)
        os.makedirs(d, exist_ok=True)
        for name in os.listdir(d):  # the seeds only: what the fuzzers found stays
            if name.endswith(".bin"):
                os.remove(os.path.join(d, name))
        for name, data in seeds.items():
            with open(os.path.join(d, name + ".bin"), "wb") as f:
                f.write(data)
        print(f"{target}: {len(seeds)} seeds")


if __name__ == "__main__":
    main()
