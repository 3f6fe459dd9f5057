/* `--tp N` of `mixrt run` and `mixrt demo` (tools/cmd_tp.c): joining the MPI world, taking this
 * rank's shard of the model in memory, attaching the communicator to the session, and the
 * per-rank time split (compute, communication, waiting) rank 0 prints. Without libmixrt_mpi
 * every entry refuses --tp with a message saying so. */
#ifndef MIXRT_TOOLS_CMD_TP_H
#define MIXRT_TOOLS_CMD_TP_H

#include <stdbool.h>
#include <stdint.h>

#include "graph/ir.h"
#include "mixrt/models.h"
#include "mixrt/session.h"

typedef struct mx_cli_tp mx_cli_tp;

/* Joins the MPI world (mx_comm_create_world) and checks that it has exactly tp ranks (refused
 * naming both otherwise). Ranks other than 0 have their standard output silenced: rank 0 prints
 * the outputs and the gathered time split; errors still reach every rank's stderr. Returns an
 * exit code; *out is the context (released by mx_cli_tp_end). */
int mx_cli_tp_begin(const char *cmd, int64_t tp, mx_cli_tp **out);
int mx_cli_tp_rank(const mx_cli_tp *t);
int mx_cli_tp_size(const mx_cli_tp *t);
/* Folds and fuses g as a session compiles it, then rewrites it in place into this rank's shard
 * (mx__shard_graph). Returns an exit code; the refusal names the node. */
int mx_cli_tp_shard(const char *cmd, const mx_cli_tp *t, mx_graph *g);
/* Gives the communicator to the loaded session (a collective: every rank calls it) and starts
 * counting exchanges from here, so the model check of the load is not part of any step. */
int mx_cli_tp_attach(const char *cmd, mx_cli_tp *t, mx_session *s);
/* Every rank calls it after its steps (a collective): gathers each rank's step time (the sum of
 * the caller-timed steps, steps_ns), its time in exchanges and its bytes, and rank 0 prints one
 * line per rank: compute (the step minus the exchanges), communication (the shortest exchange
 * time of any rank: the rank that arrived last waited least, so its time is the transfer) and
 * waiting (this rank's exchange time beyond that). */
void mx_cli_tp_report(const mx_cli_tp *t, uint64_t steps_ns, int64_t steps);
/* Rank 0: runs the unsharded llama cfg through the reference interpreter for n steps fed with
 * first_token and then tokens[0..n-2] (the sharded run's own choices), and compares its logits
 * with logits[0..n) within the conformance tolerances (rtol 1e-3, atol 1e-4; the shards add in
 * another order, so bits may differ) and its tokens exactly. Other ranks return true. */
bool mx_cli_tp_check_llama(const mx_cli_tp *t, const mx_llama_config *cfg, int64_t first_token,
                           const int64_t *tokens, const mx_tensor *logits, int64_t n, char *why, size_t cap);
/* Releases the communicator and finalizes MPI; after the sessions are destroyed. NULL is fine. */
void mx_cli_tp_end(mx_cli_tp *t);

#endif /* MIXRT_TOOLS_CMD_TP_H */
