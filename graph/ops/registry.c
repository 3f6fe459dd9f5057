/* The op registry: every op definition of every group, found by (domain, op type).
 *
 * Each group file (elementwise.c, reduce.c, ...) exports a NULL-terminated array of definitions.
 * The lookup table is built once, on first use, under pthread_once, so lookups are safe from
 * any thread. */
#include <pthread.h>
#include <string.h>

#include "common/strmap.h"
#include "graph/ir.h"
#include "graph/ops/groups.h"
#include "graph/ops/op.h"

static const mx_op_def *const *const groups[] = {
    mx__ops_elementwise, mx__ops_reduce,   mx__ops_nn,      mx__ops_linalg, mx__ops_shape,
    mx__ops_index,       mx__ops_conv,     mx__ops_pool,    mx__ops_norm,   mx__ops_activation,
    mx__ops_loss,        mx__ops_resample, mx__ops_tensor,  mx__ops_quant,  mx__ops_rnn,
    mx__ops_signal,      mx__ops_llm,      mx__ops_random,  mx__ops_string, mx__ops_ml,
    mx__ops_training,    mx__ops_mixrt,    mx__ops_control, mx__ops_image,
    mx__ops_collective,
};

static mx_strmap by_name;               /* "domain\x1fop" -> index into all_defs */
static const mx_op_def *all_defs[1024]; /* every definition in group order */
static size_t n_defs;
static char keys[1024][96]; /* storage for the map's keys */
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void make_key(char *buf, size_t cap, const char *domain, const char *op) {
  size_t dl = strlen(domain), ol = strlen(op);
  if (dl + ol + 2 > cap) {
    buf[0] = '\0';
    return;
  }
  memcpy(buf, domain, dl);
  buf[dl] = '\x1f';
  memcpy(buf + dl + 1, op, ol + 1);
}

static void build_table(void) {
  mx__strmap_init(&by_name);
  for (size_t g = 0; g < sizeof groups / sizeof groups[0]; g++) {
    for (const mx_op_def *const *d = groups[g]; *d; d++) {
      if (n_defs >= sizeof all_defs / sizeof all_defs[0]) return;
      make_key(keys[n_defs], sizeof keys[n_defs], (*d)->domain ? (*d)->domain : "", (*d)->name);
      all_defs[n_defs] = *d;
      /* A failed insert only makes that op unfindable; lookups stay correct. */
      mx__strmap_put(&by_name, keys[n_defs], (uint32_t)n_defs);
      n_defs++;
    }
  }
}

const mx_op_def *mx__op_find(const char *domain, const char *op_type) {
  if (!op_type) return NULL;
  if (!domain || strcmp(domain, "ai.onnx") == 0) domain = "";
  pthread_once(&once, build_table);
  char key[96];
  make_key(key, sizeof key, domain, op_type);
  uint32_t idx;
  if (!key[0] || !mx__strmap_get(&by_name, key, &idx)) return NULL;
  return all_defs[idx];
}

size_t mx__op_count(void) {
  pthread_once(&once, build_table);
  return n_defs;
}

const mx_op_def *mx__op_at(size_t index) {
  pthread_once(&once, build_table);
  return index < n_defs ? all_defs[index] : NULL;
}

bool mx__node_keeps_bytes(const mx_graph *g, const mx_node *nd) {
  if (!nd->def || nd->n_inputs == 0 || nd->inputs[0] == MX_NO_VALUE || nd->n_outputs == 0) return false;
  if (nd->def->flags & MX_OP_ALIAS) return true;
  return nd->def->keeps_bytes && nd->params &&
         nd->def->keeps_bytes(nd->params, &g->values[nd->inputs[0]].shape);
}
