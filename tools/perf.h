/*
 * softub-perf internals: the configuration both sides share, the endpoint, the control
 * protocol over the bootstrap channel and the result records. See tools/softub_perf.c.
 */
#ifndef SOFTUB_PERF_H
#define SOFTUB_PERF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <softub/softub.h>

#define PERF_MAGIC     0x50455246u /* "PERF" */
#define PERF_VERSION   7u
#define PERF_MAX_JETTY 64u
#define PERF_MIN_SWEEP 2u
#define PERF_MAX_SIZE  (8u << 20)
/* The options' bounds: the client's parsing and the server's check of what it is sent. */
#define PERF_MAX_DURATION  86400u /* -D, seconds */
#define PERF_MAX_WARMUP    (1u << 30)
#define PERF_MAX_DEPTH     4096u /* -t, -r */
#define PERF_MAX_CQ_MOD    1024u
#define PERF_MAX_POST_LIST 64u
#define PERF_MAX_INLINE    65536u
#define PERF_MAX_PATHS     64u
#define PERF_MIN_MTU       64u
#define PERF_MAX_MTU       65507u
#define PERF_TOKEN         0x5eedf00dull
#define PERF_TAG           0x7a66ull /* --tagged: every message's tag, and every buffer's */
#define PERF_CTL_MAX       65536u
/* udp MTU towards a loopback peer unless --mtu is given (docs/benchmarks.md; usage()). */
#define PERF_LOOPBACK_MTU 9000u

enum perf_test {
    T_READ_LAT = 0,
    T_WRITE_LAT,
    T_SEND_LAT,
    T_ATOMIC_LAT,
    T_READ_BW,
    T_WRITE_BW,
    T_SEND_BW,
    T_ATOMIC_BW,
    T_COUNT
};

enum perf_dev { DEV_UDP = 0, DEV_SHM = 1 };

/* What the client decides and ships to the server (same binary on both sides). */
struct perf_cfg {
    uint32_t magic, version;
    uint32_t test;      /* enum perf_test */
    uint32_t dev;       /* enum perf_dev */
    uint64_t size;      /* bytes per operation (without sweep) */
    uint32_t sweep;     /* -a: 2 B .. 8 MiB */
    uint32_t max_size;  /* --max-size for the sweep */
    uint64_t iters;     /* -n (0: default) */
    uint32_t duration;  /* -D seconds (0: by iterations) */
    uint32_t jettys;    /* -q */
    uint32_t tx_depth;  /* -t */
    uint32_t rx_depth;  /* -r */
    uint32_t post_list; /* -l */
    uint32_t cq_mod;    /* -Q: bandwidth tests, one completion record every cq_mod requests */
    uint32_t inline_sz; /* -I */
    uint32_t order;     /* 0 NO, 1 RO, 2 SO */
    uint32_t tm;        /* 0 RUD, 1 ROD */
    uint32_t paths;     /* udp paths (0: 1) */
    uint32_t event;     /* -e: automatic progress + completion events */
    uint32_t spin;      /* --spin: polling never yields the CPU */
    uint32_t huge;      /* --huge: buffers of 2 MiB or more on transparent huge pages */
    uint32_t bidir;     /* -b */
    uint32_t mtu;       /* --mtu: the engine's largest datagram (0: the device's) */
    uint32_t warmup;    /* lat: unmeasured iterations first */
    uint32_t burst;     /* --burst: ub_context_attr.spray_burst (0: the context's default) */
    uint32_t tagged;    /* --tagged: send tests as tagged sends into tag-matching JFRs */
    uint32_t cma_min;   /* --cma-min: ub_context_attr.cma_min (0: measured; UB_CMA_OFF: off) */
    char cc[16], lb[16];
    char server_ip[64]; /* the address the client reached the server at (udp binds there) */
    char udp_opts[96];  /* --udp-opts: extra keys for the udp URI (docs/device-udp.md) */
};

/* Control messages over the bootstrap connection. */
enum perf_msg { M_CFG = 1, M_DESC, M_RUN, M_READY, M_DONE, M_RESULT, M_QUIT, M_ERROR };

struct perf_run {
    uint32_t type; /* M_RUN */
    uint32_t pad;
    uint64_t size, iters;
    uint32_t duration_ms, pad2;
};

struct perf_result {
    uint32_t type; /* M_RESULT */
    uint32_t ok;
    uint64_t ops, bytes, ns;
    double peak_mbs;
};

struct perf_ep {
    struct perf_cfg cfg;
    bool server;
    int timeout_ms; /* bound on any wait */
    char local_ip[64];
    ub_bootstrap *b;
    ub_context *ctx;
    ub_jfce *jfce;
    ub_jfc *jfc;
    ub_jetty *jetty[PERF_MAX_JETTY];
    ub_tjetty *tj[PERF_MAX_JETTY];
    ub_seg *seg;
    ub_tseg *ts;
    uint8_t *buf; /* [0, half): peers write/read/atomic here, receives land here; [half, 2 half):
                     local sources and sinks */
    size_t half;
    uint64_t rbase;    /* the peer's [0, half); its control word is at rbase + 2 half */
    uint64_t ctl_seq;  /* control flags written to the peer so far */
    uint64_t ctl_seen; /* control flags the peer wrote into ours */
    uint32_t outstanding[PERF_MAX_JETTY];
    uint64_t recvs;     /* receive records seen (RECV, RECV_WRITE_IMM) */
    uint64_t completed; /* own requests completed (a record counts those it covers, -Q) */
    uint32_t unsig[PERF_MAX_JETTY]; /* requests posted since the last signalled one (-Q) */
    uint64_t recv_posted;
    uint32_t repost[PERF_MAX_JETTY]; /* receives consumed, to post again at the next poll */
    uint32_t repost_n;               /* the sum of repost[] */
    int failed;                      /* a record with an error status came */
    uint32_t idle;                   /* polls in a row that found nothing (polling mode) */
    uint64_t idle_since;             /* ... the time the PERF_YIELD_AFTER-th of them came */
    bool idle_long;                  /* ... for PERF_YIELD_NS: each poll yields first */
    bool cpu_alone;                  /* yields return at once: nobody else wants this CPU */
    uint32_t quick_yields;           /* yields in a row that returned at once */
    /* The post list's work requests and the poll's completion records, in one allocation
     * sized by -l (perf_setup) rather than in arrays on the stack: a latency test's request
     * and records share a page, and its turn touches fewer stack pages (docs/perf-journal.md,
     * "Whose pages"). */
    struct ub_wr *wr;
    struct ub_sge *sg;
    struct ub_cr *cr;
};

/* ---- perf_run.c ---- */
int perf_setup(struct perf_ep *e);
int perf_connect_peer(struct perf_ep *e, const uint8_t *desc, size_t len);
int perf_export(struct perf_ep *e, uint8_t *desc, size_t cap);
void perf_teardown(struct perf_ep *e);
/* Client: off the server's CPU (the server's M_READY says which) when they share one. */
bool perf_part(uint32_t peer_cpu);
/* Client: one size. Latency tests fill samples (ns, one per measured iteration). */
int perf_client_lat(struct perf_ep *e, const struct perf_run *r, uint64_t **samples, size_t *n);
int perf_client_bw(struct perf_ep *e, const struct perf_run *r, struct perf_result *mine,
                   struct perf_result *peer);
/* Client: tells the server a run is over and serves until its result comes. */
int perf_client_done(struct perf_ep *e, struct perf_result *peer);
/* Server: serves one RUN (until the client's DONE); fills the result it sends back. */
int perf_server_run(struct perf_ep *e, const struct perf_run *r);

/* ---- perf_stats.c ---- */
struct perf_lat {
    double min, max, median, avg, stdev, p99, p999, p9999; /* us */
};
void perf_lat_stats(uint64_t *ns, size_t n, double scale, struct perf_lat *out);
bool perf_is_lat(enum perf_test t);
bool perf_is_half_rtt(enum perf_test t);
const char *perf_test_name(enum perf_test t);
int perf_test_parse(const char *s);
/* The options' defaults before any is given (the test's own follow from its name). */
void perf_cfg_defaults(struct perf_cfg *c);
/* What is wrong with a configuration that came over the wire (the first field out of the
 * bounds the options have), or NULL: a server runs nothing else. */
const char *perf_cfg_bad(const struct perf_cfg *c);
/* The largest operation a configuration runs: what its buffers are set up for. */
uint64_t perf_cfg_top(const struct perf_cfg *c);
/* Whether a RUN message fits the configuration (its size within the buffers set up). */
bool perf_run_fits(const struct perf_cfg *c, const struct perf_run *r);
uint64_t perf_now_ns(void);

#endif
