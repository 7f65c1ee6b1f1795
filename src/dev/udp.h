/*
 * The multipath UDP device: softub over real sockets.
 *
 * One non-blocking UDP socket per path. The UDP source port is the entropy
 * value: path i's socket is bound to the configured local IP at base + i
 * (or to an ephemeral port when the base is 0), so ECMP hashes in the
 * network spread the paths, and every path socket both sends and receives.
 * dev->local is path 0's address: the address peers send to.
 *
 * Addressing and replies: recv reports addr = the datagram's real source
 * (ip, source port) and path = the index of the local socket it arrived on.
 * A reply sent to that address reaches the peer's path socket the request
 * left from, so both directions of an exchange pin the same path pair.
 *
 * Send: packet p leaves through socket p->path % num_paths to p->addr.
 * Packets are grouped per socket (order kept within a socket) into
 * sendmmsg batches; consecutive packets of one socket with the same
 * destination, ECN codepoint and size go out as one UDP GSO super-datagram
 * (the last segment may be shorter). Packets larger than the MTU are
 * refused: the call stops there (UB_ELENGTH if the first is too big).
 *
 * Receive: recvmmsg straight into pool buffers, or, with UDP GRO, into a
 * run of pool buffers per message (each segment lands in its own buffer
 * when the segments are a buffer's room: full-size packets at a matching
 * MTU), else into device staging buffers split by the segment size into
 * pool buffers.
 * Sockets are drained round-robin. An empty pool stops the call (counted;
 * the data stays in the kernel, or in staging with GRO). Datagrams larger
 * than a pool buffer are dropped and counted.
 *
 * ECN: every socket sends ECT(0) by default (IP_TOS / IPV6_TCLASS set once
 * per socket, so the common case needs no cmsg and GSO stays possible); a
 * packet whose ecn is non-zero and differs gets a per-packet TOS/TCLASS
 * cmsg. Received TOS / traffic class fills pkt->ecn, so CE reaches the
 * engine.
 *
 * Connected socket: a device of one path sends a lone packet to its first peer through a
 * second socket bound to the path's port (SO_REUSEPORT) and connected to that peer: no
 * destination to look up per send. The kernel then delivers that peer's datagrams to it, so
 * it is read too (path 0); the path socket keeps every other peer. 64 datagrams in a row from
 * other peers retire it (the next lone packet connects anew). `connect=0` disables it.
 * Connected to a loopback peer it does not read TOS: nothing on the way could mark CE.
 *
 * Packet ring (`ring=1`, CAP_NET_RAW): datagrams of up to UB_UDP_RING_SMALL bytes
 * are read from a PACKET_RX_RING the kernel fills during the sender's system call, with no
 * receive system call; the sockets drop them (a filter) and keep the larger ones, which the
 * ring notes so that the sockets are read then (udp_ring.c).
 *
 * fd() is one epoll fd holding every socket (level triggered).
 * Single-threaded like the engine driving it; no allocation after open.
 */
#ifndef UB_DEV_UDP_H
#define UB_DEV_UDP_H

#include <stdbool.h>
#include <stdint.h>

#include "core/addr.h"
#include "dev/dev.h"

#define UB_UDP_MAX_PATHS       64
#define UB_UDP_DEFAULT_PATHS   8
#define UB_UDP_LOOPBACK_PATHS  1    /* ... bound to a loopback address: one link */
#define UB_UDP_DEFAULT_MTU     1452 /* one 1500-byte Ethernet frame, IPv4 or IPv6 */
#define UB_UDP_LOOPBACK_MTU    9000 /* ... bound to a loopback address: a jumbo frame */
#define UB_UDP_MIN_MTU         64
#define UB_UDP_MAX_MTU         65507 /* largest IPv4 UDP payload */
#define UB_UDP_DEFAULT_SOCKBUF (4u << 20)
#define UB_UDP_MAX_SOCKBUF     (1u << 30)
#define UB_UDP_BATCH           64 /* messages per sendmmsg / recvmmsg */
/* Bytes of one GSO super-datagram (below the 64 KiB IP datagram limit, either family): also
 * what a context over udp sprays on one path before choosing another (docs/device-udp.md). */
#define UB_UDP_GSO_MAX_BYTES 65000
#define UB_UDP_SPEC_MAX      256
#define UB_UDP_RING_SMALL    548 /* ring=1: payloads up to this (576 bytes of IP) */

/*
 * Zero fields take the defaults. local: family UB_AF_INET or UB_AF_INET6,
 * ip (and scope_id), port = base port of path 0 (0: ephemeral ports).
 */
struct ub__udp_cfg {
    struct ub__addr local;
    uint32_t num_paths; /* 1..UB_UDP_MAX_PATHS; 0: 8 (loopback: 1) */
    uint32_t mtu;       /* largest datagram send accepts; 0: UB_UDP_DEFAULT_MTU (loopback:
                           UB_UDP_LOOPBACK_MTU) */
    uint32_t rcvbuf;    /* SO_RCVBUF per socket, bytes; 0: UB_UDP_DEFAULT_SOCKBUF */
    uint32_t sndbuf;    /* SO_SNDBUF per socket, bytes; 0: UB_UDP_DEFAULT_SOCKBUF */
    uint8_t dscp;       /* DSCP in the TOS / traffic class (0..63) */
    bool no_gso;        /* never use UDP GSO on send */
    bool no_gro;        /* never enable UDP GRO on receive */
    bool no_ecn;        /* send every datagram Not-ECT instead of ECT(0) */
    bool no_connect;    /* one path: no socket connected to the first peer */
    bool ring;          /* small datagrams from a packet ring (CAP_NET_RAW) */
};

/*
 * Parses "[udp:]IP:PORT[?key=value&...]" into cfg (zeroed first). IP is a
 * dotted IPv4 address or a bracketed IPv6 one ("[::1]", "[fe80::1%eth0]").
 * PORT is the base port, 0 for ephemeral. Keys: paths, mtu, rcvbuf,
 * sndbuf, dscp, gso=0|1, gro=0|1, ecn=0|1, connect=0|1, ring=0|1. UB_EINVAL for anything else,
 * out of range or longer than UB_UDP_SPEC_MAX.
 */
int ub__udp_cfg_parse(const char *spec, struct ub__udp_cfg *cfg);

/*
 * Opens the device. UB_EINVAL for a bad cfg, UB_ERANGE when base + paths
 * passes 65535, UB_EBUSY when a path's port is already taken, UB_EACCESS
 * for a privileged port (or ring=1 without CAP_NET_RAW), UB_ENOTSUP when the
 * family is unavailable, UB_EIO for other socket errors. Nothing is left open
 * on failure.
 */
int ub__udp_open(const struct ub__udp_cfg *cfg, struct ub__dev **out);

struct ub__udp_path_stats {
    uint64_t tx_pkts, tx_bytes;
    uint64_t rx_pkts, rx_bytes;
};

struct ub__udp_stats {
    uint64_t tx_pkts, tx_bytes; /* handed to the kernel */
    uint64_t tx_batches;        /* sendmmsg calls that sent something */
    uint64_t tx_gso_msgs;       /* super-datagrams (two segments or more) */
    uint64_t tx_gso_segs;       /* packets carried in them */
    uint64_t tx_gso_fallbacks;  /* GSO switched off after the kernel refused a super-datagram */
    uint64_t tx_too_big;        /* send calls stopped at a packet larger than the MTU */
    uint64_t tx_full;           /* socket send buffer full (EAGAIN, ENOBUFS): socket skipped */
    uint64_t tx_full_dropped;   /* accepted packets dropped because their socket was full */
    uint64_t tx_bad_addr;       /* accepted packets dropped: address not of the device's family */
    /* Send errors by class; each drops the packets of the refused message. */
    uint64_t tx_err_msgsize; /* EMSGSIZE */
    uint64_t tx_err_unreach; /* ENETUNREACH, EHOSTUNREACH, ECONNREFUSED, EADDRNOTAVAIL, ... */
    uint64_t tx_err_perm;    /* EPERM, EACCES (firewall) */
    uint64_t tx_err_inval;   /* EINVAL */
    uint64_t tx_err_other;
    uint64_t tx_err_dropped; /* packets dropped by those errors */

    uint64_t rx_pkts, rx_bytes; /* handed to the caller */
    uint64_t rx_batches;        /* receive calls that returned something */
    uint64_t rx_single;         /* of those, single receives (recvmsg): the socket's last batch
                                   held at most one datagram (a ping-pong's), and it was the
                                   only one readable */
    uint64_t rx_polls;          /* epoll calls asking which sockets are readable (several) */
    uint64_t rx_gro_msgs;       /* coalesced receives split into packets */
    uint64_t rx_gro_segs;       /* packets they held */
    uint64_t rx_direct;       /* of those, received straight into pool buffers (no staging copy) */
    uint64_t rx_copied;       /* packets copied out of staging (GRO trains, batches) */
    uint64_t rx_truncated;    /* datagrams (or GRO segments) larger than a pool buffer: dropped */
    uint64_t rx_pool_empty;   /* recv calls stopped by an empty pool */
    uint64_t rx_kernel_drops; /* datagrams the kernel dropped (socket buffer full: SO_MEMINFO;
                                 ring=1: the ring full, PACKET_STATISTICS) */
    uint64_t rx_ce;           /* packets received with CE */
    uint64_t rx_errors;       /* recvmmsg errors other than EAGAIN */
    uint64_t tx_connected;    /* packets sent through the connected socket */
    uint64_t rx_connected;    /* datagrams received on it (a GRO train counts once) */
    uint64_t conn_retired;    /* connected sockets closed: 64 datagrams in a row from others */
    uint64_t rx_ring;         /* packets taken from the packet ring (ring=1) */
    uint64_t rx_ring_notes;   /* its notes of larger datagrams, read from the sockets */
    uint64_t rx_ring_bad;     /* its frames dropped: malformed, bad checksum, too large */

    bool gso, gro;           /* offloads in use now */
    bool epoll_live;         /* the sockets are in the epoll set (several paths, or fd() asked) */
    bool connected;          /* a socket connected to `peer` is in use */
    bool conn_tos_off;       /* ... which does not read TOS (peer on loopback: no ECN marks) */
    bool ring;               /* small datagrams arrive through the packet ring */
    struct ub__addr peer;    /* its peer */
    uint32_t num_paths, mtu; /* as configured */
    uint32_t rcvbuf, sndbuf; /* what the kernel granted (path 0, as getsockopt reports it) */
    struct ub__udp_path_stats path[UB_UDP_MAX_PATHS];
};

/* Copies dev's counters. UB_EINVAL when dev is not a UDP device. */
int ub__udp_stats(const struct ub__dev *dev, struct ub__udp_stats *out);

/* The local address of path i's socket. UB_EINVAL when not a UDP device, UB_ERANGE for i. */
int ub__udp_path_addr(const struct ub__dev *dev, uint32_t path, struct ub__addr *out);

#endif
