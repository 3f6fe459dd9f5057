/* The files `mixrt bench llm` writes into its work folder: the decode-step model as ONNX, a
 * point's inputs as .npy files for the ONNX Runtime peer, and removing the folder at the end. */
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "bench/llm/llm_impl.h"
#include "mixrt/onnx.h"

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st, (void)flag, (void)ftw;
  return remove(path);
}

void mx__llm_remove_tree(const char *dir) { nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS); }

mx_status mx__llm_write_inputs(mx_session *s, const char *dir, const mx_tensor *in, size_t n, mx_error *err) {
  if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
    snprintf(err->message, sizeof err->message, "cannot create %s: %s", dir, strerror(errno));
    return MX_ERR_IO;
  }
  for (size_t i = 0; i < n; i++) {
    mx_io_info info;
    mx_session_input_info(s, i, &info);
    char path[1200];
    snprintf(path, sizeof path, "%s/%s.npy", dir, info.name);
    mx_status st = mx_tensor_save_npy(path, &in[i], err);
    if (st != MX_OK) return st;
  }
  return MX_OK;
}

mx_status mx__llm_write_model(const mx_llama_config *cfg, const char *path, size_t *nodes, mx_error *err) {
  mx_graph *g;
  mx_status st = mx_model_llama(cfg, &g, err);
  if (st != MX_OK) return st;
  if ((st = mx_graph_infer(g)) != MX_OK) {
    snprintf(err->message, sizeof err->message, "inferring the model: %s", mx_graph_last_error(g));
    goto destroy_graph;
  }
  *nodes = mx_graph_node_count(g);
  st = mx_onnx_save_file(g, path, err);
destroy_graph:
  mx_graph_destroy(g);
  return st;
}
