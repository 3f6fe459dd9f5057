/* Which binding states are appended in place (state.c): the state's rows stay in one device
 * buffer padded to the capacity along the growing axis, the step's kernels read them there
 * (strides) and the op producing the state's next value writes only the new rows after them.
 *
 * That takes knowing every reader of the state's rows and the writer of its next value: the rows
 * must be read only by dynamic partitions, and there only by Attention as past_key / past_value
 * (the fused kernel reads padded layouts) or by Shape (dims only); the next value must come from
 * the present_key / present_value output of an Attention whose past is this very state, and be
 * read by nothing but the graph output. Other graphs keep the copying path (two buffers). The
 * dynamic partitions involved stay specializable, but their specializations are all split ones
 * whose dynamic runs hold every op reading the rows or writing the next value (a static model
 * would read the rows as contiguous; spec_split.c hands the padding on as strides); a partition
 * already holding specializations keeps the copying path. */
#include <stdlib.h>
#include <string.h>

#include "graph/ir.h"
#include "partitioner/partitioner.h"
#include "v2runtime/binding_impl.h"
#include "v2runtime/spec.h"

/* The call running root node nid, or -1. */
static int64_t call_of_node(const mx_program *p, mx_node_id nid) {
  for (size_t c = 0; c < p->n_calls; c++)
    if (p->calls[c].node == nid) return (int64_t)c;
  return -1;
}

/* Body input of call node n fed with root value named `name`, or MX_NO_VALUE. */
static mx_value_id body_input(const mx_graph *body, const char *name) {
  for (size_t i = 0; i < body->n_inputs; i++)
    if (strcmp(body->values[body->inputs[i]].name, name) == 0) return body->inputs[i];
  return MX_NO_VALUE;
}

static bool is_attention(const mx_node *n) {
  return strcmp(n->op_type, "Attention") == 0 && (!n->domain || !n->domain[0]);
}

/* Whether every reader of body value bv is an Attention past (slot 4 or 5) or a Shape. */
static bool readers_fit(const mx_graph *body, mx_value_id bv) {
  for (size_t k = 0; k < body->n_nodes; k++) {
    const mx_node *n = &body->nodes[k];
    if (n->flags & MX_NODE_DEAD) continue;
    for (uint32_t j = 0; j < n->n_inputs; j++) {
      if (n->inputs[j] != bv) continue;
      bool ok = (is_attention(n) && (j == 4 || j == 5)) || strcmp(n->op_type, "Shape") == 0;
      if (!ok) return false;
    }
  }
  for (size_t o = 0; o < body->n_outputs; o++)
    if (body->outputs[o] == bv) return false; /* handed on as it is */
  return true;
}

/* Notes body value bv of call c as padded (its ops go to dynamic runs of the call's splits). */
static bool note_padded(mx_spec_call *sc, mx_value_id bv) {
  for (uint32_t i = 0; i < sc->n_padded; i++)
    if (sc->padded[i] == bv) return true;
  mx_value_id *grown = realloc(sc->padded, (sc->n_padded + 1) * sizeof *grown);
  if (!grown) return false;
  sc->padded = grown;
  sc->padded[sc->n_padded++] = bv;
  return true;
}

/* Whether body value bv (MX_NO_VALUE: none) is noted padded on sc. */
static bool noted(const mx_spec_call *sc, mx_value_id bv) {
  for (uint32_t i = 0; bv != MX_NO_VALUE && i < sc->n_padded; i++)
    if (sc->padded[i] == bv) return true;
  return bv == MX_NO_VALUE;
}

/* Whether call c may read the padded rows bv and append the next value bo (body values, or
 * MX_NO_VALUE): a specializable call must not hold specializations made without knowing them
 * (a whole static model reads its inputs packed). Values noted already (another binding's
 * states) were noted before the call's first specialization, so all of them know. With commit
 * the values are noted, so every later specialization keeps their ops dynamic. */
static bool keep_dynamic(mx_program *p, size_t c, mx_value_id bv, mx_value_id bo, bool commit) {
  if (!p->spec || c >= p->spec->n_calls) return true;
  mx_spec_call *sc = &p->spec->calls[c];
  if (!sc->specializable) return true;
  if (sc->n_entries > 0) return noted(sc, bv) && noted(sc, bo);
  if (!commit) return true;
  return (bv == MX_NO_VALUE || note_padded(sc, bv)) && (bo == MX_NO_VALUE || note_padded(sc, bo));
}

/* The checks, and with commit the padded values noted on the calls' specialization state. */
static bool fits(mx_program *p, mx_value_id vin, mx_value_id vout, bool commit) {
  const mx_graph *root = p->root;
  const char *in_name = root->values[vin].name;
  for (size_t o = 0, seen = 0; o < root->n_outputs; o++) {
    if (root->outputs[o] == vin) return false;
    if (root->outputs[o] == vout && ++seen > 1) return false;
  }
  bool produced = false;
  for (size_t k = 0; k < root->n_nodes; k++) {
    const mx_node *n = &root->nodes[k];
    if (n->flags & MX_NODE_DEAD) continue;
    bool reads = false;
    for (uint32_t j = 0; j < n->n_inputs; j++) {
      if (n->inputs[j] == vout) return false; /* the next value is read within the step */
      reads |= n->inputs[j] == vin;
    }
    int64_t out_at = -1;
    for (uint32_t j = 0; j < n->n_outputs; j++)
      if (n->outputs[j] == vout) out_at = j;
    if (!reads && out_at < 0) continue;
    int64_t c = call_of_node(p, (mx_node_id)k);
    if (c < 0 || !p->calls[c].unknown) return false;
    const mx_graph *body = mx__part_call_body(n);
    if (!body) return false;
    mx_value_id bv = reads ? body_input(body, in_name) : MX_NO_VALUE;
    if (reads && (bv == MX_NO_VALUE || !readers_fit(body, bv))) return false;
    mx_value_id bo = MX_NO_VALUE;
    if (out_at >= 0) {
      /* The producer: an Attention's present whose past is this state's rows in the same call. */
      if (!reads || (size_t)out_at >= body->n_outputs) return false;
      bo = body->outputs[out_at];
      bool found = false;
      for (size_t q = 0; q < body->n_nodes && !found; q++) {
        const mx_node *a = &body->nodes[q];
        if ((a->flags & MX_NODE_DEAD) || !is_attention(a)) continue;
        for (uint32_t j = 1; j <= 2 && j < a->n_outputs; j++)
          if (a->outputs[j] == bo && a->n_inputs > 3 + j && a->inputs[3 + j] == bv) found = true;
      }
      if (!found) return false;
      produced = true;
    }
    if (!keep_dynamic(p, (size_t)c, bv, bo, commit)) return false;
  }
  return produced;
}

bool mx__state_append_fits(mx_program *p, const mx_bind_state *x) {
  const mx_value *v = &p->root->values[p->root->inputs[x->in]];
  if (v->shape.rank != 4 || x->axis != 2) return false; /* Attention's sequence axis */
  mx_value_id vin = p->root->inputs[x->in], vout = p->root->outputs[x->out];
  if (!fits(p, vin, vout, false)) return false;
  return fits(p, vin, vout, true);
}
