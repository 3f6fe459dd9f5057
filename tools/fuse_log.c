/* The Stage 2 compile log and the --passes option (see fuse_log.h). */
#include <string.h>

#include "tools/cli.h"
#include "tools/fuse_log.h"

int mx_cli_check_passes(const char *cmd, const char *passes) {
  if (strcmp(passes, "list") == 0) {
    mx_cli_print_rules(stdout);
    return MX_EXIT_USAGE;
  }
  /* Validate on an empty graph: mx_graph_fuse names an unknown rule. */
  mx_graph *g;
  if (mx_graph_create("passes", &g) != MX_OK) return MX_EXIT_USAGE;
  int rc = 0;
  if (mx_graph_fuse(g, passes, NULL) != MX_OK) rc = mx_cli_usage_error(cmd, "%s", mx_graph_last_error(g));
  mx_graph_destroy(g);
  return rc;
}

void mx_cli_print_rules(FILE *out) {
  const char *what;
  bool def;
  int width = 0; /* the longest rule name sets the column */
  for (size_t i = 0; mx_fuse_rule_name(i, NULL, NULL); i++) {
    int n = (int)strlen(mx_fuse_rule_name(i, NULL, NULL));
    if (n > width) width = n;
  }
  fprintf(out, "rewrite rules (--passes none|default|all|RULE,-RULE,...):\n");
  for (size_t i = 0; mx_fuse_rule_name(i, &what, &def); i++)
    fprintf(out, "  %-*s %s%s\n", width, mx_fuse_rule_name(i, NULL, NULL), what,
            def ? "" : " (not in default)");
}

void mx_cli_print_fuse_report(FILE *out, const mx_fuse_report *r) {
  fprintf(out, "stage 2 (rewrite rules): %zu ops before, %zu after\n", r->ops_before, r->ops_after);
  for (size_t i = 0; i < r->n_rules; i++)
    if (r->rules[i].enabled) fprintf(out, "  rule %-17s %zu hits\n", r->rules[i].name, r->rules[i].hits);
  bool any = false;
  for (size_t i = 0; i < r->n_op_types; i++) {
    if (r->op_types[i].before == r->op_types[i].after) continue;
    fprintf(out, "%s %s %zu->%zu", any ? "," : "  ops changed:", r->op_types[i].op_type,
            r->op_types[i].before, r->op_types[i].after);
    any = true;
  }
  if (any) fputc('\n', out);
}

void mx_cli_print_fuse_report_json(FILE *out, const mx_fuse_report *r) {
  fprintf(out, "{\"ops_before\": %zu, \"ops_after\": %zu, \"rules\": {", r->ops_before, r->ops_after);
  bool first = true;
  for (size_t i = 0; i < r->n_rules; i++) {
    if (!r->rules[i].enabled) continue;
    fprintf(out, "%s\"%s\": %zu", first ? "" : ", ", r->rules[i].name, r->rules[i].hits);
    first = false;
  }
  fprintf(out, "}, \"ops\": {");
  for (size_t i = 0; i < r->n_op_types; i++)
    fprintf(out, "%s\"%s\": [%zu, %zu]", i ? ", " : "", r->op_types[i].op_type, r->op_types[i].before,
            r->op_types[i].after);
  fprintf(out, "}}");
}
