/*
 * launch.h — one process per rank: torchrun's environment and mcir's
 * rendezvous (docs/parallel.md, "One process per rank").
 *
 * A launcher (torchrun, or any that sets the same variables) starts one
 * process per rank with RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and
 * MASTER_PORT. Rank 0 listens on MASTER_ADDR at the rendezvous port
 * ($MCIR_RENDEZVOUS_PORT, else MASTER_PORT + 1: torchrun's own store holds
 * MASTER_PORT); the others connect to it. Over those connections:
 *  - rank 0's NCCL unique id goes to every rank (ncclCommInitRank);
 *  - the CPU reference and the emulated device run their collectives as
 *    a star: every rank sends its buffer to rank 0, which checks that all
 *    ranks called the same collective (a mismatch is an error naming the
 *    ranks), combines them and sends each its result.
 * A rank that does not come within $MCIR_RENDEZVOUS_TIMEOUT seconds (120)
 * is an error naming it, never a hang.
 */
#ifndef MCIR_LAUNCH_H
#define MCIR_LAUNCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct mcir_launch {
    int rank, world, local_rank;
    char addr[256];
    int port;            /* the rendezvous port */
    double timeout_s;
} mcir_launch;

/* The launcher's variables: 1 with *l filled where WORLD_SIZE is set, 0
 * where it is not (no launcher), -1 with why where a value is bad. */
int mcir_launch_from_env(mcir_launch *l, char *why, size_t n);

typedef struct mcir_rdv mcir_rdv;

/* Connects the ranks (rank 0 accepts the others); NULL and why. */
mcir_rdv *mcir_rdv_open(const mcir_launch *l, char *why, size_t n);
void mcir_rdv_close(mcir_rdv *r);
const mcir_launch *mcir_rdv_launch(const mcir_rdv *r);

/* What every rank must agree on for one exchange. */
typedef struct mcir_rdv_call {
    uint32_t kind;      /* the caller's: which collective */
    uint32_t dtype, op;
    uint32_t pad;       /* 0 (the ranks' calls are compared bytewise) */
    uint64_t count;
    uint64_t send_bytes, recv_bytes;
} mcir_rdv_call;

/* At rank 0: every rank's send buffer (ins[r]) and its result (outs[r],
 * recv_bytes each) to fill; false with why to fail every rank. */
typedef bool (*mcir_rdv_combine_fn)(void *ctx, const mcir_rdv_call *c, int ranks, const void *const *ins,
                                    void *const *outs, char *why, size_t n);

/* One star exchange: this rank's send buffer to rank 0, its result back
 * into recv. describe(kind) names a kind in messages. False and why
 * (every rank gets rank 0's reason) on a mismatch, a timeout or a lost
 * rank; the rendezvous is unusable after. */
bool mcir_rdv_star(mcir_rdv *r, const mcir_rdv_call *c, const void *send, void *recv, mcir_rdv_combine_fn combine,
                   void *ctx, const char *(*describe)(uint32_t kind), char *why, size_t n);

/* Rank 0's bytes to every rank. */
bool mcir_rdv_broadcast(mcir_rdv *r, void *buf, size_t bytes, char *why, size_t n);

/* The rendezvous as an mcir_group (mcir.h) of the reference interpreter:
 * g->rank this process's rank; each collective node a star exchange of
 * its value-typed buffers, combined at rank 0 by mcir_collective_run. */
struct mcir_group;
void mcir_rdv_group(mcir_rdv *r, struct mcir_group *g);

#endif /* MCIR_LAUNCH_H */
