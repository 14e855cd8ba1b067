/*
 * coll_api.h — the collectives between ranks as one table: NCCL's own
 * (libnccl.so.2, dlopen'd by runtime/nccl.c) or the emulated device's,
 * in memory and checked (emu/coll.c), chosen per run by the driver table
 * (mcir_cu_driver.coll). Signatures and enum values are NCCL's C API
 * (nccl.h), declared here by hand: nothing includes NCCL's headers.
 *
 * A communicator (comm) is one rank's member of a clique made by
 * comm_init_all; the calls of one collective, one per rank, go between
 * group_start and group_end (one thread drives every rank). all_gather
 * and reduce_scatter move flat buffers rank by rank: rank r's part is
 * elements [r * count, (r + 1) * count) of the whole.
 */
#ifndef MCIR_COLL_API_H
#define MCIR_COLL_API_H

#include <stdbool.h>
#include <stddef.h>

/* ncclDataType_t and ncclRedOp_t values */
enum {
    MCIR_NCCL_INT8 = 0, MCIR_NCCL_UINT8 = 1, MCIR_NCCL_INT32 = 2, MCIR_NCCL_INT64 = 4,
    MCIR_NCCL_FLOAT16 = 6, MCIR_NCCL_FLOAT32 = 7, MCIR_NCCL_BFLOAT16 = 9,
};
enum { MCIR_NCCL_SUM = 0, MCIR_NCCL_MAX = 2, MCIR_NCCL_MIN = 3 };

typedef struct mcir_coll_api {
    const char *name;                     /* "NCCL 2.21.5", "emulated" */
    int (*comm_init_all)(void **comms, int ndev, const int *devlist);
    int (*comm_destroy)(void *comm);
    int (*group_start)(void);
    int (*group_end)(void);
    int (*all_reduce)(const void *send, void *recv, size_t count, int dtype, int op, void *comm, void *stream);
    int (*all_gather)(const void *send, void *recv, size_t sendcount, int dtype, void *comm, void *stream);
    int (*reduce_scatter)(const void *send, void *recv, size_t recvcount, int dtype, int op, void *comm,
                          void *stream);
    const char *(*error_string)(int rc);
    /* One rank per process (runtime/launch.h): ncclGetUniqueId at rank 0,
     * its MCIR_NCCL_ID_BYTES bytes sent to every rank, ncclCommInitRank
     * with them. The emulated device's id holds a pointer to the process's
     * mcir_coll_remote instead (get_unique_id: NULL). */
    int (*get_unique_id)(void *id);
    int (*comm_init_rank)(void **comm, int nranks, const void *id, int rank);
} mcir_coll_api;

#define MCIR_NCCL_ID_BYTES 128   /* sizeof(ncclUniqueId) */

/* The emulated device's collectives with ranks in other processes: the
 * kinds of call, and the exchange the runtime provides (every rank's send
 * buffer to a root that runs combine over them all, each rank's result
 * back into recv; false and why — a rank missing, calls that disagree —
 * otherwise). */
enum { MCIR_COLL_ALL_REDUCE, MCIR_COLL_ALL_GATHER, MCIR_COLL_REDUCE_SCATTER };
typedef bool (*mcir_coll_combine_fn)(int kind, int dtype, int op, size_t count, int ranks, const void *const *ins,
                                     void *const *outs);
typedef struct mcir_coll_remote {
    bool (*exchange)(void *ctx, int kind, int dtype, int op, size_t count, const void *send, size_t send_bytes,
                     void *recv, size_t recv_bytes, mcir_coll_combine_fn combine, char *why, size_t n);
    void *ctx;
} mcir_coll_remote;

/* NCCL loaded from $MCIR_NCCL_LIBRARY, libnccl.so.2 on the loader's path
 * or PyPI's nvidia-nccl-cu13 / -cu12 wheels; NULL and why (what to
 * install) where it is missing. */
const mcir_coll_api *mcir_nccl_load(char *why, size_t n);

#endif /* MCIR_COLL_API_H */
