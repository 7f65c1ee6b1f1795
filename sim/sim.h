/*
 * softub-sim: a packet-level fabric simulator that runs the real engine.
 *
 * Everything the simulator knows lives in one struct ub_sim (no global
 * state): the event queue, the packet descriptor pool, the fabric (hosts,
 * switches and their egress ports), routing tables, flows and counters.
 *
 * Time is integer picoseconds. Events fire in (time, sequence) order, and
 * every random draw comes from a ub__rng forked from the simulation's seed
 * per component, so equal seeds and inputs give byte-identical output.
 *
 * Packets are small descriptors (struct ub_sim_pkt): switches move them
 * without ever touching payload bytes. A descriptor may carry a reference to
 * a real softub datagram (struct ub__pkt) when the host runs the engine.
 */
#ifndef UB_SIM_SIM_H
#define UB_SIM_SIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cms/cc.h"
#include "core/pktbuf.h"
#include "core/rand.h"

#define UB_SIM_NEVER     UINT64_MAX
#define UB_SIM_PS_PER_NS UINT64_C(1000)
#define UB_SIM_PS_PER_US UINT64_C(1000000)
#define UB_SIM_PS_PER_S  UINT64_C(1000000000000)
#define UB_SIM_NONE      UINT32_MAX

#define UB_SIM_CONTAINER_OF(ptr, type, member) \
    ((type *)(void *)((char *)(ptr)-offsetof(type, member)))

/* ---- events ----------------------------------------------------------------------------- */

struct ub_sim;
struct ub_sim_event;
typedef void ub_sim_event_fn(struct ub_sim *sim, struct ub_sim_event *ev);

/*
 * An event embedded in its owner. The heap holds (time, seq, event) entries;
 * an event has at most one live entry, named by its seq. Re-arming later than
 * the live entry only moves `time` (the entry re-queues itself when it pops),
 * re-arming earlier pushes a new entry and orphans the old one; cancelling
 * clears `armed`. No back-pointer into the heap is kept, so sifting never
 * touches the events themselves (cache-friendly).
 */
struct ub_sim_event {
    uint64_t time;  /* when it should fire */
    uint64_t qtime; /* time of its live heap entry */
    uint64_t seq;   /* sequence of its live heap entry */
    ub_sim_event_fn *fn;
    bool armed;
};

struct ub_sim_heap_ent {
    uint64_t time;
    uint64_t seq;
    struct ub_sim_event *ev;
};

/* A 4-ary min-heap: shallower than a binary heap, and its children share a cache line. */
struct ub_sim_evq {
    struct ub_sim_heap_ent *h;
    uint32_t n, cap;
    uint64_t seq;
    uint64_t now;
    uint64_t fired;   /* handlers run */
    uint64_t orphans; /* entries skipped because re-armed or cancelled */
};

static inline void ub_sim_event_init(struct ub_sim_event *ev, ub_sim_event_fn *fn)
{
    ev->time = ev->qtime = ev->seq = 0;
    ev->fn = fn;
    ev->armed = false;
}

int ub_sim_evq_init(struct ub_sim_evq *q, uint32_t cap_hint);
void ub_sim_evq_fini(struct ub_sim_evq *q);
/* Arms (or re-arms) ev for time t >= now; the latest call wins. */
void ub_sim_at(struct ub_sim *sim, struct ub_sim_event *ev, uint64_t t);
void ub_sim_cancel(struct ub_sim_event *ev);
/* Time of the next live entry (orphans may make it early), UB_SIM_NEVER if none. */
uint64_t ub_sim_evq_peek(const struct ub_sim_evq *q);
/* Runs events with time <= until; returns true if the queue ran dry or sim->stop was set. */
bool ub_sim_run(struct ub_sim *sim, uint64_t until);

static inline uint64_t ub_sim_now(const struct ub_sim *sim);

/* ---- packet descriptors ----------------------------------------------------------------- */

enum {
    UB_SIM_PF_TRIMMED = 1u << 0, /* payload cut by a switch: header only, a loss signal */
    UB_SIM_PF_CTRL = 1u << 1,    /* control (ACK/NACK/credit): may use the priority queue */
    UB_SIM_PF_ACK = 1u << 2,     /* reference transport: acknowledgement */
    UB_SIM_PF_NACK = 1u << 3,    /* reference transport: negative ack (trim seen) */
    UB_SIM_PF_ECE = 1u << 4,     /* reference transport: echo of a CE mark */
    UB_SIM_PF_CORRUPT = 1u << 5, /* bit errors on the last link: the receiver discards it */
    UB_SIM_PF_DOWN = 1u << 6,    /* up/down routing: has taken a down link (no more up links) */
};

/* The bit a host adapter sets in struct ub__pkt.flags on a trimmed softub datagram. */
#define UB_SIM_TRIMMED 0x80u
/* Bytes a trimmed packet keeps (htsim's header size). */
#define UB_SIM_TRIM_SIZE 64u

/* C-AQM fields of a request (struct ub_sim_pkt.aqm): the softub extension header's I and C. */
#define UB_SIM_AQM_VALID 0x1u /* the packet carries C-AQM fields: switches may mark it */
#define UB_SIM_AQM_I     0x2u /* increase requested (request) / granted (echo on an ACK) */
#define UB_SIM_AQM_C     0x4u /* congestion: the hint is a switch's suggested rate */

#define UB_SIM_ECN_NOT_ECT 0u
#define UB_SIM_ECN_ECT1    1u
#define UB_SIM_ECN_ECT0    2u
#define UB_SIM_ECN_CE      3u

/*
 * 56 bytes: what a switch needs and nothing more. With the softub transport the
 * C-AQM fields are copied from the datagram's extension header when it leaves
 * its host and written back when it arrives (switches never parse datagrams).
 */
struct ub_sim_pkt {
    struct ub_sim_pkt *next; /* the one queue it is on */
    uint64_t t;              /* on a wire: arrival time at the far end */
    struct ub__pkt *buf;     /* engine datagram (one reference), or NULL */
    uint32_t src, dst;       /* host ids */
    uint32_t flow;           /* flow index */
    uint32_t seq;            /* transport sequence number */
    uint32_t size;           /* bytes on the wire */
    uint16_t ev;             /* entropy value: ECMP hashes it */
    uint8_t ecn;             /* IP ECN codepoint */
    uint8_t flags;           /* UB_SIM_PF_* */
    uint32_t in_port;        /* lossless: 1 + the port it came in on while a switch holds it */
    uint8_t aqm;             /* UB_SIM_AQM_* */
    uint16_t hint;           /* C-AQM hint (ub__caqm_hint_encode units) */
};

struct ub_sim_pktq {
    struct ub_sim_pkt *head, *tail;
    uint32_t n;
};

static inline void ub_sim_pktq_push(struct ub_sim_pktq *q, struct ub_sim_pkt *p)
{
    p->next = NULL;
    if (q->tail)
        q->tail->next = p;
    else
        q->head = p;
    q->tail = p;
    q->n++;
}

static inline struct ub_sim_pkt *ub_sim_pktq_pop(struct ub_sim_pktq *q)
{
    struct ub_sim_pkt *p = q->head;
    if (p) {
        q->head = p->next;
        if (!q->head)
            q->tail = NULL;
        q->n--;
    }
    return p;
}

/* Descriptors come from slabs carved once and recycled: no malloc per packet. */
struct ub_sim_pool {
    struct ub_sim_pkt *free;
    void **slabs;
    uint32_t nslabs, cap_slabs;
    uint64_t out; /* descriptors handed out and not yet returned */
    uint64_t total;
};

struct ub_sim_pkt *ub_sim_pkt_alloc(struct ub_sim *sim);
/* Returns the descriptor, dropping its engine buffer reference if it holds one. */
void ub_sim_pkt_free(struct ub_sim *sim, struct ub_sim_pkt *p);
void ub_sim_pool_fini(struct ub_sim_pool *pool);

/* ---- fabric: ports (egress queue + serializer + link) ------------------------------------- */

struct ub_sim_port_stats {
    uint64_t enq, deq;    /* packets accepted into / served from the queues */
    uint64_t tx_bytes;    /* bytes serialized onto the link */
    uint64_t drops;       /* tail drops (queue full, or header queue full) */
    uint64_t trims;       /* packets cut to a header */
    uint64_t marks;       /* CE marks at dequeue */
    uint64_t fail_drops;  /* dropped because the link was down */
    uint64_t corrupt;     /* damaged on the wire, discarded at the far end */
    uint64_t max_qbytes;  /* high-water mark of the data queue */
    uint64_t pauses;      /* PFC: PAUSE frames this port received (it was told to stop) */
    uint64_t llr_retries; /* link-level retry: corrupted frames this port sent again */
    uint64_t caqm_c;      /* C-AQM: requests this port set C on (queue above kmax) */
    uint64_t caqm_hold;   /* C-AQM: increase requests refused (I cleared) */
};

/* Lossless link-level flow control. */
enum ub_sim_fc {
    UB_SIM_FC_NONE = 0, /* lossy: drop-tail or trimming */
    UB_SIM_FC_PFC,      /* priority flow control: PAUSE above xoff, RESUME below xon */
    UB_SIM_FC_CBFC,     /* credit-based: a sender spends credits, the receiver returns them */
};

/* Traffic classes for flow control: data, and (with prio_ctrl) control and headers. */
#define UB_SIM_NCLASS 2

/*
 * One direction of a link: the egress queue at its sending node, the
 * serializer, and the wire (a FIFO of descriptors with arrival times: the
 * far end sees them in order, so one event per wire suffices). A packet
 * joins the wire when its serialization starts (arriving `delay` after its
 * last bit leaves); the serializer is busy until `busy_until`, and tx_ev is
 * armed only when something waits for it, so an uncongested hop costs one
 * event per packet.
 */
struct ub_sim_port {
    struct ub_sim_event tx_ev; /* the serializer frees up and a packet is waiting */
    struct ub_sim_event rx_ev; /* the wire's head reaches the peer */
    struct ub_sim_pktq q;      /* data, FIFO */
    struct ub_sim_pktq hq;     /* headers and control, strict priority */
    struct ub_sim_pktq wire;   /* serializing or propagating */
    uint64_t busy_until;
    uint64_t qbytes, hbytes;
    uint64_t rate;        /* bit/s */
    uint64_t ps_per_byte; /* 8e12 / rate when exact, else 0 */
    uint64_t delay;       /* propagation, ps */
    uint64_t limit;       /* data queue bytes */
    uint64_t hlimit;      /* header queue bytes */
    uint64_t kmin, kmax;  /* ECN marking band, bytes; kmax 0 = no marking */
    uint32_t node;        /* owner */
    uint32_t peer;        /* node at the far end */
    uint32_t loss_ppm;    /* per-packet corruption probability */
    bool up;
    bool nic;                   /* a host's port: pulls from the transport instead of queueing */
    bool trim;                  /* trim instead of dropping data */
    bool prio_ctrl;             /* control and trimmed headers go to hq */
    bool caqm;                  /* C-AQM marking of requests that carry the fields */
    bool paused[UB_SIM_NCLASS]; /* PFC: the far end told this port to stop the class */
    bool pause_sent[UB_SIM_NCLASS]; /* PFC: this port's far end was told to stop */
    uint32_t rev;                   /* the port of the opposite direction (at `peer`) */
    uint64_t ibytes[UB_SIM_NCLASS]; /* lossless: bytes that came in on this link, held here */
    int64_t credits[UB_SIM_NCLASS]; /* CBFC: bytes the far end can still take */
    struct ub_sim_pktq fcq;         /* flow-control messages travelling to `peer` */
    struct ub_sim_event fc_ev;      /* the head of fcq arrives */
    struct ub_sim_pktq llrq;        /* LLR: corrupted frames waiting for their retry */
    struct ub_sim_event llr_ev;     /* the head of llrq is due to go again */
    uint64_t llr_delay;             /* LLR: ps from the bad frame's arrival to its resend; 0 off */
    uint64_t wd_deq;                /* deadlock watchdog: st.deq at the last check */
    bool wd_wait;                   /* deadlock watchdog: packets were waiting at the last check */
    struct ub__rng rng;
    struct ub__caqm_port caqm_band; /* C-AQM thresholds: the ECN band (kmin, kmax) */
    struct ub_sim_port_stats st;
};

void ub_sim_port_enqueue(struct ub_sim *sim, struct ub_sim_port *port, struct ub_sim_pkt *p);
/* Serialization time of `bytes` at the port's current rate, ps. */
uint64_t ub_sim_port_ser(const struct ub_sim_port *port, uint64_t bytes);
void ub_sim_port_set_rate(struct ub_sim_port *port, uint64_t rate);
/* Takes the link down (flushing queue and wire) or up. */
void ub_sim_port_set_up(struct ub_sim *sim, struct ub_sim_port *port, bool up);

/* ---- nodes, topology, routing ------------------------------------------------------------ */

/* Nodes 0..nhosts-1 are hosts (one port each: port index == host id), then the switches. */
struct ub_sim_node {
    uint32_t port_base;
    uint32_t nports;
};

struct ub_sim_link_spec {
    uint32_t a, b;  /* nodes */
    uint64_t rate;  /* bit/s */
    uint64_t delay; /* ps */
};

struct ub_sim_group {
    uint32_t off; /* into routes.gports */
    uint32_t n;
};

enum ub_sim_routing {
    UB_SIM_ROUTE_ECMP = 0, /* every shortest path */
    UB_SIM_ROUTE_UPDOWN,   /* up*down* on a BFS spanning tree: no cyclic buffer dependency */
};

/* Next hops toward every leaf (a switch with hosts). */
struct ub_sim_routes {
    enum ub_sim_routing kind;
    uint32_t root;    /* up/down: the spanning tree's root switch */
    uint32_t nphase;  /* 1, or 2 for up/down (may still go up / down only) */
    uint8_t *is_down; /* up/down: per port, 1 if it leads away from the root */
    uint32_t nleaves;
    uint32_t *leaf_of;   /* switch index -> leaf index, UB_SIM_NONE if no hosts */
    uint32_t *leaf_sw;   /* leaf index -> switch index */
    uint32_t *host_leaf; /* host -> switch index of its leaf */
    uint32_t *host_port; /* host -> port index on its leaf facing it */
    uint32_t *grp;       /* [switch][leaf][phase] -> group index */
    struct ub_sim_group *groups;
    uint32_t ngroups;
    uint32_t *gports;
    uint64_t *salt; /* per switch: decorrelates the ECMP hash between tiers */
};

int ub_sim_routes_build(struct ub_sim *sim);
/* Rebuilds the routes with another algorithm (root: up/down's root switch index). */
int ub_sim_set_routing(struct ub_sim *sim, enum ub_sim_routing kind, uint32_t root);
void ub_sim_routes_fini(struct ub_sim_routes *rt);
/* Links on the path from host a to host b (2 when they share a leaf), 0 if unreachable. */
uint32_t ub_sim_path_links(const struct ub_sim *sim, uint32_t a, uint32_t b);
/* The egress ports along one shortest path a -> b (first ECMP member); returns their count. */
uint32_t ub_sim_path(const struct ub_sim *sim, uint32_t a, uint32_t b, uint32_t *ports,
                     uint32_t max);

/* ---- hosts and transports ---------------------------------------------------------------- */

struct ub_sim_flow {
    uint32_t id; /* user-visible id (.cm "id", else index + 1) */
    uint32_t src, dst;
    uint64_t size;  /* bytes of payload */
    uint64_t start; /* ps */
    uint64_t end;   /* ps, UB_SIM_NEVER while running */
    uint64_t ideal; /* ps: the FCT on an empty network */
    uint32_t dep;   /* flow index that must complete first (start = max(start, its end)), or NONE */
    uint32_t dep_next; /* the next flow waiting on the same flow */
};

/*
 * A host's protocol side. The NIC pulls: when its serializer is free it asks
 * pull() for the next packet, so the transport chooses what goes next (ACKs
 * before data, round robin over flows) and no host queue builds up. A
 * transport with something new to send calls ub_sim_host_kick().
 */
struct ub_sim_transport_ops {
    const char *name;
    void (*start_flow)(void *ctx, struct ub_sim *sim, uint32_t flow);
    struct ub_sim_pkt *(*pull)(void *ctx, struct ub_sim *sim, uint32_t host);
    /* Consumes p. A trimmed packet carries UB_SIM_PF_TRIMMED and UB_SIM_TRIM_SIZE bytes. */
    void (*rx)(void *ctx, struct ub_sim *sim, uint32_t host, struct ub_sim_pkt *p);
    void (*destroy)(void *ctx, struct ub_sim *sim);
};

void ub_sim_host_kick(struct ub_sim *sim, uint32_t host);
/* A transport reports a flow complete. */
void ub_sim_flow_done(struct ub_sim *sim, uint32_t flow);

/* ---- configuration and the world --------------------------------------------------------- */

struct ub_sim_qcfg {
    uint64_t limit;      /* data queue bytes */
    uint64_t hlimit;     /* header queue bytes (0: same as limit) */
    uint64_t kmin, kmax; /* ECN band; kmax 0 disables marking */
    bool trim;
    bool prio_ctrl;
    uint32_t loss_ppm;
    uint64_t llr_delay; /* link-level retry of corrupted frames after this many ps (0: drop) */
    enum ub_sim_fc fc;  /* lossless modes disable trimming and drop-tail */
    uint64_t xoff;      /* PFC: PAUSE when a class's ingress bytes exceed this */
    uint64_t xon;       /* PFC: RESUME when they fall to this */
    uint64_t headroom;  /* PFC: bytes that may still arrive after PAUSE (counted if exceeded) */
    uint64_t credits;   /* CBFC: ingress buffer per link and class */
    bool caqm;          /* C-AQM: requests leaving a queue are marked (ub__caqm_switch_mark) */
    uint64_t caqm_kmin, caqm_kmax; /* C-AQM band, bytes (0: the ECN band kmin, kmax) */
};

struct ub_sim_counters {
    uint64_t injected;          /* packets a NIC put on its wire */
    uint64_t delivered;         /* packets handed to a host's transport */
    uint64_t delivered_trimmed; /* of which trimmed */
    uint64_t drops;             /* tail drops at queues */
    uint64_t fail_drops;        /* lost to a failed link */
    uint64_t corrupt_drops;     /* damaged on a wire */
    uint64_t noroute_drops;     /* no live next hop */
    uint64_t trims, marks;
    uint64_t pauses, resumes;   /* PFC frames sent */
    uint64_t headroom_overflow; /* PFC: packets that arrived beyond xoff + headroom */
    uint64_t llr_retries;       /* corrupted frames resent by their link */
    uint64_t caqm_c, caqm_hold; /* C-AQM: C set, I cleared */
};

enum ub_sim_fail_kind {
    UB_SIM_FAIL_LINK_DOWN,
    UB_SIM_FAIL_LINK_UP,
    UB_SIM_FAIL_LINK_RATE, /* degrade (or restore) to `rate` */
    UB_SIM_FAIL_SWITCH_DOWN,
};

struct ub_sim_fail {
    uint64_t time;
    enum ub_sim_fail_kind kind;
    uint32_t a, b; /* nodes: the link a<->b, or switch node a */
    uint64_t rate;
};

struct ub_sim {
    struct ub_sim_evq evq;
    struct ub_sim_pool pool;
    struct ub__rng rng; /* root: every component forks its own stream */
    uint64_t seed;

    uint32_t nhosts, nswitches, nnodes, nports;
    struct ub_sim_node *nodes;
    struct ub_sim_port *ports;
    struct ub_sim_routes rt;
    struct ub_sim_qcfg qcfg;

    const struct ub_sim_transport_ops *tp;
    void *tp_ctx;

    struct ub_sim_flow *flows;
    uint32_t nflows, cap_flows, flows_done;
    uint32_t *start_order;
    uint32_t *dep_head;          /* per flow: the first flow waiting for it */
    uint32_t next_start, nstart; /* start_order[next_start..nstart): due to start */
    struct ub_sim_event start_ev;

    struct ub_sim_fail *fails;
    uint32_t nfails, next_fail;
    struct ub_sim_event fail_ev;

    struct ub_sim_counters ctr;
    /* Deadlock watchdog: a port with packets waiting that sent nothing for `deadlock_after`. */
    uint64_t deadlock_after; /* ps; 0: no watchdog */
    struct ub_sim_event wd_ev;
    uint64_t deadlock_at; /* when it was declared, UB_SIM_NEVER if not */
    uint32_t deadlock_ports;
    bool stop_on_deadlock;

    bool stop_when_done; /* end the run the moment the last flow completes */
    bool stop;           /* ub_sim_run returns as soon as it sees this */
};

static inline uint64_t ub_sim_now(const struct ub_sim *sim)
{
    return sim->evq.now;
}

int ub_sim_init(struct ub_sim *sim, uint64_t seed);
void ub_sim_fini(struct ub_sim *sim);

/*
 * The largest fabric the simulator builds, whatever describes it (a built-in shape's
 * parameters, a topology file): hosts and switches together, and links. A fat tree of
 * k = 256 (4.2 M hosts, 12.6 M links) fits; past these a size is a typo, not a fabric.
 */
#define UB_SIM_MAX_NODES (1u << 23)
/* The longest line of the simulator's text formats (topology files, connection matrices),
 * its newline included. */
#define UB_SIM_TEXT_LINE_MAX 1023
/* Reads the next line of such a file into *buf (getline's buffer, the caller frees it): 1 a
 * line, 0 the end, -1 not a line of text (longer than the above, or holding a NUL). */
int ub_sim_text_line(FILE *f, char **buf, size_t *cap);
#define UB_SIM_MAX_LINKS (1u << 24)

/* Builds the fabric from a link list; hosts must have exactly one link. UB_ERANGE past the
 * limits above. */
int ub_sim_build(struct ub_sim *sim, uint32_t nhosts, uint32_t nswitches,
                 const struct ub_sim_link_spec *links, uint32_t nlinks,
                 const struct ub_sim_qcfg *q);

/* Applies q to every switch port (host NICs do not queue). */
void ub_sim_set_queues(struct ub_sim *sim, const struct ub_sim_qcfg *q);
void ub_sim_set_transport(struct ub_sim *sim, const struct ub_sim_transport_ops *ops, void *ctx);

/* Flows; returns the flow index or a negative error. */
int ub_sim_add_flow(struct ub_sim *sim, uint32_t id, uint32_t src, uint32_t dst, uint64_t size,
                    uint64_t start);
int ub_sim_add_fail(struct ub_sim *sim, const struct ub_sim_fail *f);
/* Schedules flow starts and failures; call once after the flows are added. */
int ub_sim_start(struct ub_sim *sim);

/* Arms the deadlock watchdog (after ub_sim_start): checks every `after` ps. */
void ub_sim_watchdog(struct ub_sim *sim, uint64_t after, bool stop);

/* Packets inside the fabric now: queued, serializing or on a wire. */
uint64_t ub_sim_in_network(const struct ub_sim *sim);

/*
 * FCT on an idle network for a transfer packetized into `mtu`-byte packets
 * carrying `hdr` bytes of headers each; ack_size 0 counts until the last byte
 * arrives, otherwise until its acknowledgement is back at the sender.
 */
uint64_t ub_sim_ideal_fct(const struct ub_sim *sim, uint32_t src, uint32_t dst, uint64_t size,
                          uint32_t mtu, uint32_t hdr, uint32_t ack_size);

#endif
