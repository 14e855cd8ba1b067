/*
 * launch.c — one process per rank: the launcher's environment and the
 * rendezvous over TCP (launch.h says what each does).
 *
 * Messages are a fixed header and a payload, host byte order (the ranks
 * of one job run the same build on one kind of machine):
 *   hello    rank -> 0   {magic, rank, world}
 *   welcome  0 -> rank   {magic, status, text bytes} + text on failure
 *   call     rank -> 0   {magic, seq, mcir_rdv_call} + send_bytes
 *   result   0 -> rank   {magic, status, bytes} + recv_bytes, or the error text
 */
#define _GNU_SOURCE
#include "runtime/launch.h"

#include "mcir/mcir.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAGIC 0x5652434du   /* "MCRV" */

struct mcir_rdv {
    mcir_launch l;
    int *fd;         /* rank 0: one per other rank (fd[0] unused); others: fd[0] to rank 0 */
    uint64_t seq;
    bool broken;
};

typedef struct {
    uint32_t magic;
    uint32_t a, b;
    uint32_t pad;
    uint64_t bytes;
} small_header;

typedef struct {
    uint32_t magic;
    uint32_t pad;
    uint64_t seq;
    mcir_rdv_call call;
} call_header;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static bool parse_int(const char *s, long lo, long hi, long *out) {
    if (!s || !*s) return false;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < lo || v > hi) return false;
    *out = v;
    return true;
}

int mcir_launch_from_env(mcir_launch *l, char *why, size_t n) {
    memset(l, 0, sizeof *l);
    const char *world = getenv("WORLD_SIZE");
    if (!world || !*world) return 0;
    long v;
    if (!parse_int(world, 1, 1024, &v)) {
        snprintf(why, n, "WORLD_SIZE=%s is not a number of ranks (1 to 1024)", world);
        return -1;
    }
    l->world = (int)v;
    const char *rank = getenv("RANK");
    if (!parse_int(rank, 0, l->world - 1, &v)) {
        snprintf(why, n, "RANK=%s: not a rank of WORLD_SIZE %d (0 to %d)", rank ? rank : "(unset)", l->world,
                 l->world - 1);
        return -1;
    }
    l->rank = (int)v;
    const char *local = getenv("LOCAL_RANK");
    l->local_rank = l->rank;
    if (local && *local) {
        if (!parse_int(local, 0, 1023, &v)) {
            snprintf(why, n, "LOCAL_RANK=%s is not a rank", local);
            return -1;
        }
        l->local_rank = (int)v;
    }
    const char *addr = getenv("MASTER_ADDR");
    snprintf(l->addr, sizeof l->addr, "%s", addr && *addr ? addr : "127.0.0.1");
    const char *port = getenv("MCIR_RENDEZVOUS_PORT");
    if (port && *port) {
        if (!parse_int(port, 1, 65535, &v)) {
            snprintf(why, n, "MCIR_RENDEZVOUS_PORT=%s is not a port", port);
            return -1;
        }
        l->port = (int)v;
    } else {
        port = getenv("MASTER_PORT");
        if (!parse_int(port, 1, 65534, &v)) {
            snprintf(why, n, "MASTER_PORT=%s is not a port (mcir's rendezvous listens on MASTER_PORT + 1, "
                     "or on MCIR_RENDEZVOUS_PORT)", port ? port : "(unset)");
            return -1;
        }
        l->port = (int)v + 1;
    }
    l->timeout_s = 120;
    const char *t = getenv("MCIR_RENDEZVOUS_TIMEOUT");
    if (t && *t) {
        if (!parse_int(t, 1, 86400, &v)) {
            snprintf(why, n, "MCIR_RENDEZVOUS_TIMEOUT=%s is not a number of seconds (1 to 86400)", t);
            return -1;
        }
        l->timeout_s = (double)v;
    }
    return 1;
}

static bool write_all(int fd, const void *buf, size_t bytes) {
    const char *p = buf;
    while (bytes) {
        ssize_t k = send(fd, p, bytes, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return false;
        p += k;
        bytes -= (size_t)k;
    }
    return true;
}

/* 1: read; 0: the peer closed; -1: the deadline passed; -2: an error. */
static int read_all(int fd, void *buf, size_t bytes, double deadline) {
    char *p = buf;
    while (bytes) {
        double left = deadline - now_s();
        if (left <= 0) return -1;
        struct pollfd pf = {fd, POLLIN, 0};
        int ms = left > 1e6 ? 1000000000 : (int)(left * 1000) + 1;
        int k = poll(&pf, 1, ms);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) return -2;
        if (k == 0) continue;
        ssize_t got = recv(fd, p, bytes, 0);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) return -2;
        if (got == 0) return 0;
        p += got;
        bytes -= (size_t)got;
    }
    return 1;
}

static int resolve(const mcir_launch *l, struct addrinfo **res, bool listen_any, char *why, size_t n) {
    char port[16];
    snprintf(port, sizeof port, "%d", l->port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = listen_any ? AI_PASSIVE : 0};
    int rc = getaddrinfo(l->addr, port, &hints, res);
    if (rc != 0) {
        snprintf(why, n, "rendezvous: MASTER_ADDR %s: %s", l->addr, gai_strerror(rc));
        return -1;
    }
    return 0;
}

static void nodelay(int fd) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

static void close_all(mcir_rdv *r) {
    int count = r->l.rank == 0 ? r->l.world : 1;
    for (int i = 0; r->fd && i < count; i++)
        if (r->fd[i] >= 0) close(r->fd[i]);
    free(r->fd);
    r->fd = NULL;
}

static void send_status(int fd, uint32_t status, const char *text) {
    small_header h = {MAGIC, status, 0, 0, text ? strlen(text) : 0};
    if (write_all(fd, &h, sizeof h) && text) write_all(fd, text, h.bytes);
}

/* Reads a status header (and its text on failure) from fd. */
static bool read_status(int fd, double deadline, const char *what, char *why, size_t n, uint64_t *bytes) {
    small_header h;
    int k = read_all(fd, &h, sizeof h, deadline);
    if (k != 1 || h.magic != MAGIC) {
        snprintf(why, n, "rendezvous: %s: %s", what,
                 k == 0 ? "rank 0 closed its connection (it failed or exited)"
                 : k == -1 ? "no answer from rank 0 in time" : "a bad message from rank 0");
        return false;
    }
    if (h.a != 0) {
        char text[512] = "";
        size_t take = h.bytes < sizeof text - 1 ? (size_t)h.bytes : sizeof text - 1;
        if (read_all(fd, text, take, deadline) == 1) text[take] = 0;
        snprintf(why, n, "%s", text[0] ? text : "rank 0 reported a failure");
        return false;
    }
    if (bytes) *bytes = h.bytes;
    return true;
}

static mcir_rdv *open_root(mcir_rdv *r, char *why, size_t n) {
    const mcir_launch *l = &r->l;
    struct addrinfo *res;
    if (resolve(l, &res, true, why, n)) return NULL;
    int s = -1;
    for (struct addrinfo *a = res; a && s < 0; a = a->ai_next) {
        s = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
        if (s < 0) continue;
        int one = 1;
        setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(s, a->ai_addr, a->ai_addrlen) != 0 || listen(s, l->world) != 0) {
            snprintf(why, n, "rendezvous: rank 0 cannot listen on %s:%d: %s (set MCIR_RENDEZVOUS_PORT to a free "
                     "port)", l->addr, l->port, strerror(errno));
            close(s);
            s = -1;
        }
    }
    freeaddrinfo(res);
    if (s < 0) return NULL;
    double deadline = now_s() + l->timeout_s;
    int joined = 1;
    while (joined < l->world) {
        double left = deadline - now_s();
        struct pollfd pf = {s, POLLIN, 0};
        int k = left > 0 ? poll(&pf, 1, (int)(left * 1000) + 1) : 0;
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) {
            char missing[256] = "";
            size_t used = 0;
            for (int q = 1; q < l->world && used < sizeof missing - 8; q++)
                if (r->fd[q] < 0) used += (size_t)snprintf(missing + used, sizeof missing - used, "%s%d",
                                                           used ? ", " : "", q);
            snprintf(why, n, "rendezvous: %d of %d ranks joined rank 0 on %s:%d within %.0f s; missing rank%s %s",
                     joined, l->world, l->addr, l->port, l->timeout_s, l->world - joined > 1 ? "s" : "", missing);
            close(s);
            return NULL;
        }
        int c = accept(s, NULL, NULL);
        if (c < 0) continue;
        nodelay(c);
        small_header hello;
        if (read_all(c, &hello, sizeof hello, deadline) != 1 || hello.magic != MAGIC) {
            close(c);   /* not one of ours: a port scanner, a stale job */
            continue;
        }
        int q = (int)hello.a;
        if ((int)hello.b != l->world || q < 1 || q >= l->world || r->fd[q] >= 0) {
            char text[200];
            snprintf(text, sizeof text, "rendezvous: rank %d of WORLD_SIZE %u joined rank 0 of WORLD_SIZE %d%s", q,
                     hello.b, l->world, q >= 1 && q < l->world && r->fd[q] >= 0 ? " twice" : "");
            send_status(c, 1, text);
            close(c);
            continue;
        }
        r->fd[q] = c;
        joined++;
    }
    close(s);
    for (int q = 1; q < l->world; q++) send_status(r->fd[q], 0, NULL);
    return r;
}

static mcir_rdv *open_rank(mcir_rdv *r, char *why, size_t n) {
    const mcir_launch *l = &r->l;
    double deadline = now_s() + l->timeout_s;
    char last[256] = "";
    for (;;) {
        struct addrinfo *res;
        if (resolve(l, &res, false, why, n)) return NULL;
        int s = -1;
        for (struct addrinfo *a = res; a && s < 0; a = a->ai_next) {
            s = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
            if (s < 0) continue;
            if (connect(s, a->ai_addr, a->ai_addrlen) != 0) {
                snprintf(last, sizeof last, "%s", strerror(errno));
                close(s);
                s = -1;
            }
        }
        freeaddrinfo(res);
        if (s >= 0) {
            nodelay(s);
            small_header hello = {MAGIC, (uint32_t)l->rank, (uint32_t)l->world, 0, 0};
            r->fd[0] = s;
            if (!write_all(s, &hello, sizeof hello)) {
                snprintf(why, n, "rendezvous: rank %d: the connection to rank 0 failed", l->rank);
                return NULL;
            }
            return read_status(s, deadline, "joining", why, n, NULL) ? r : NULL;
        }
        if (now_s() > deadline) {
            snprintf(why, n, "rendezvous: rank %d found no rank 0 on %s:%d within %.0f s (%s)", l->rank, l->addr,
                     l->port, l->timeout_s, last);
            return NULL;
        }
        usleep(50 * 1000);
    }
}

mcir_rdv *mcir_rdv_open(const mcir_launch *l, char *why, size_t n) {
    mcir_rdv *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->l = *l;
    int count = l->rank == 0 ? l->world : 1;
    r->fd = malloc(sizeof(int) * (size_t)count);
    if (!r->fd) {
        free(r);
        return NULL;
    }
    for (int i = 0; i < count; i++) r->fd[i] = -1;
    if (l->world == 1) return r;
    mcir_rdv *ok = l->rank == 0 ? open_root(r, why, n) : open_rank(r, why, n);
    if (!ok) mcir_rdv_close(r);
    return ok;
}

void mcir_rdv_close(mcir_rdv *r) {
    if (!r) return;
    close_all(r);
    free(r);
}

const mcir_launch *mcir_rdv_launch(const mcir_rdv *r) { return &r->l; }

static const char *kind_text(const char *(*describe)(uint32_t), uint32_t kind, char *buf, size_t n) {
    if (describe) return describe(kind);
    snprintf(buf, n, "exchange kind %u", kind);
    return buf;
}

/* Rank 0's side of one exchange. */
static bool star_root(mcir_rdv *r, const mcir_rdv_call *c, const void *send, void *recv, mcir_rdv_combine_fn combine,
                      void *ctx, const char *(*describe)(uint32_t), char *why, size_t n) {
    int W = r->l.world;
    const void **ins = calloc((size_t)W, sizeof *ins);
    void **outs = calloc((size_t)W, sizeof *outs);
    bool ok = ins && outs;
    ins[0] = send;
    outs[0] = recv;
    double deadline = now_s() + r->l.timeout_s;
    char k0[64], k1[64];
    for (int q = 1; ok && q < W; q++) {
        call_header h;
        int k = read_all(r->fd[q], &h, sizeof h, deadline);
        if (k != 1 || h.magic != MAGIC) {
            snprintf(why, n, "rank %d %s %s (exchange %llu at rank 0)", q,
                     k == 0 ? "closed its connection (it failed or exited) before" :
                     k == -1 ? "did not reach" : "sent a bad message for",
                     kind_text(describe, c->kind, k0, sizeof k0), (unsigned long long)r->seq);
            if (k == -1) {
                size_t used = strlen(why);
                snprintf(why + used, n > used ? n - used : 0, " within %.0f s", r->l.timeout_s);
            }
            ok = false;
            break;
        }
        if (h.seq != r->seq || memcmp(&h.call, c, sizeof *c) != 0) {
            snprintf(why, n, "rank %d called %s (%llu elements, type %u, op %u) where rank 0 called %s (%llu, "
                     "type %u, op %u): the ranks' programs disagree", q, kind_text(describe, h.call.kind, k1, sizeof k1),
                     (unsigned long long)h.call.count, h.call.dtype, h.call.op,
                     kind_text(describe, c->kind, k0, sizeof k0), (unsigned long long)c->count, c->dtype, c->op);
            ok = false;
            break;
        }
        void *in = malloc(c->send_bytes + 1), *out = malloc(c->recv_bytes + 1);
        ins[q] = in;
        outs[q] = out;
        if (!in || !out || read_all(r->fd[q], in, c->send_bytes, deadline) != 1) {
            snprintf(why, n, "rank %d: its %s data did not arrive", q, kind_text(describe, c->kind, k0, sizeof k0));
            ok = false;
        }
    }
    if (ok) ok = combine(ctx, c, W, ins, outs, why, n);
    for (int q = 1; q < W; q++) {
        if (ok) {
            small_header h = {MAGIC, 0, 0, 0, c->recv_bytes};
            if (!write_all(r->fd[q], &h, sizeof h) || !write_all(r->fd[q], outs[q], c->recv_bytes)) {
                snprintf(why, n, "rank %d: its %s result could not be sent (it failed or exited)", q,
                         kind_text(describe, c->kind, k0, sizeof k0));
                ok = false;
            }
        } else {
            send_status(r->fd[q], 1, why);
        }
    }
    for (int q = 1; ins && outs && q < W; q++) {
        free((void *)ins[q]);
        free(outs[q]);
    }
    free(ins);
    free(outs);
    return ok;
}

bool mcir_rdv_star(mcir_rdv *r, const mcir_rdv_call *c, const void *send, void *recv, mcir_rdv_combine_fn combine,
                   void *ctx, const char *(*describe)(uint32_t kind), char *why, size_t n) {
    if (r->broken) {
        snprintf(why, n, "rendezvous: an earlier exchange failed");
        return false;
    }
    bool ok;
    if (r->l.world == 1) {
        const void *ins[1] = {send};
        void *outs[1] = {recv};
        ok = combine(ctx, c, 1, ins, outs, why, n);
    } else if (r->l.rank == 0) {
        ok = star_root(r, c, send, recv, combine, ctx, describe, why, n);
    } else {
        call_header h = {MAGIC, 0, r->seq, *c};
        int fd = r->fd[0];
        ok = write_all(fd, &h, sizeof h) && write_all(fd, send, c->send_bytes);
        uint64_t bytes = 0;
        /* rank 0 may wait its whole timeout for another rank first */
        double deadline = now_s() + 2 * r->l.timeout_s + 5;
        char k0[64];
        if (!ok) {
            snprintf(why, n, "rank %d: %s: the connection to rank 0 failed (it failed or exited)", r->l.rank,
                     kind_text(describe, c->kind, k0, sizeof k0));
        } else if (!read_status(fd, deadline, kind_text(describe, c->kind, k0, sizeof k0), why, n, &bytes)) {
            ok = false;
        } else if (bytes != c->recv_bytes || read_all(fd, recv, c->recv_bytes, deadline) != 1) {
            snprintf(why, n, "rank %d: %s: rank 0's result did not arrive", r->l.rank,
                     kind_text(describe, c->kind, k0, sizeof k0));
            ok = false;
        }
    }
    r->seq++;
    if (!ok) r->broken = true;
    return ok;
}

static bool copy_root(void *ctx, const mcir_rdv_call *c, int ranks, const void *const *ins, void *const *outs,
                      char *why, size_t n) {
    (void)ctx, (void)why, (void)n;
    for (int q = 0; q < ranks; q++) memcpy(outs[q], ins[0], c->recv_bytes);
    return true;
}

static const char *describe_broadcast(uint32_t kind) {
    (void)kind;
    return "the broadcast of rank 0's NCCL id";
}

bool mcir_rdv_broadcast(mcir_rdv *r, void *buf, size_t bytes, char *why, size_t n) {
    mcir_rdv_call c = {.kind = 0xB0, .count = bytes, .send_bytes = bytes, .recv_bytes = bytes};
    void *tmp = malloc(bytes + 1);
    if (!tmp) return false;
    bool ok = mcir_rdv_star(r, &c, buf, tmp, copy_root, NULL, describe_broadcast, why, n);
    if (ok) memcpy(buf, tmp, bytes);
    free(tmp);
    return ok;
}

/* ------------------------------------------ the interpreter's group */

static bool interp_combine(void *ctx, const mcir_rdv_call *c, int ranks, const void *const *ins, void *const *outs,
                           char *why, size_t n) {
    (void)c, (void)why, (void)n;
    mcir_collective_run(ctx, ranks, ins, outs);
    return true;
}

static const char *describe_op(uint32_t kind) {
    return kind == MCIR_OP_ALL_REDUCE ? "all_reduce" : kind == MCIR_OP_ALL_GATHER ? "all_gather"
         : kind == MCIR_OP_REDUCE_SCATTER ? "reduce_scatter" : "a collective";
}

static bool group_run(void *ctx, const mcir_node *nd, const void *in, void *out, mcir_diag *d) {
    mcir_rdv *r = ctx;
    const mcir_tensor *x = nd->inputs[0], *y = nd->outputs[0];
    size_t es = mcir_value_type_size(mcir_value_type_of(x->dtype));
    const char *red = nd->op == MCIR_OP_ALL_GATHER ? "sum" : mcir_node_string(nd, "op");
    mcir_rdv_call c = {.kind = (uint32_t)nd->op, .dtype = (uint32_t)mcir_value_type_of(x->dtype),
                       .op = (uint32_t)(red[1] == 'a' ? 1 : red[1] == 'i' ? 2 : 0), .count = (uint64_t)mcir_tensor_numel(x),
                       .send_bytes = es * (uint64_t)mcir_tensor_numel(x), .recv_bytes = es * (uint64_t)mcir_tensor_numel(y)};
    char why[600];
    if (!mcir_rdv_star(r, &c, in, out, interp_combine, (void *)nd, describe_op, why, sizeof why)) {
        mcir_error(d, nd->loc, "node '%s' (%s), rank %d of %d: %s", nd->name, mcir_op_name(nd->op), r->l.rank,
                   r->l.world, why);
        return false;
    }
    return true;
}

void mcir_rdv_group(mcir_rdv *r, struct mcir_group *g) {
    g->rank = r->l.rank;
    g->run = group_run;
    g->ctx = r;
}
