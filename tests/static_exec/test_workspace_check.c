/* An .mxm file whose plan gives a kernel less workspace than this mixrt's kernel asks for the
 * same shapes (a file written by an older mixrt, before a kernel's new algorithm needed more
 * scratch) is refused at load (static_exec/check.c), naming the task, both sizes and what to do,
 * instead of failing or writing past its scratch at the first step. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "static_exec/static_exec_impl.h"
#include "support_prepack.h"

TestSuite(static_workspace_check);

/* The first kernel task of p that has a workspace. */
static mx__ptask *task_with_workspace(mx_static_plan *p) {
  for (uint32_t t = 0; t < p->n_tasks; t++)
    if (p->tasks[t].kind == MX__TASK_KERNEL && p->tasks[t].ws_size > 0) return &p->tasks[t];
  cr_assert_fail("the plan has no task with a workspace");
  return NULL;
}

/* Saves p to memory and loads it back: the load's status, its message in err. */
static mx_status round_trip(const mx_static_plan *p, mx_error *err) {
  void *data = NULL;
  size_t size = 0;
  cr_assert_eq(mx__mxm_save_memory(p, &data, &size, err), MX_OK, "%s", err->message);
  mx_static_plan *loaded = NULL;
  mx_status st = mx__mxm_load_memory(data, size, "old.mxm", &loaded, err);
  if (st == MX_OK) mx__static_plan_destroy(loaded);
  free(data);
  return st;
}

Test(static_workspace_check, short_workspace_refused_full_one_loads) {
  mx_graph *g = pp_cnn(1, 6);
  mx_static_plan *p;
  mx_error err;
  cr_assert_eq(mx__static_compile(g, NULL, &p, &err), MX_OK, "%s", err.message);
  mx__ptask *pt = task_with_workspace(p);
  const uint64_t full = pt->ws_size;
  char name[256];
  snprintf(name, sizeof name, "'%s'", pt->name);

  const uint64_t shorter[] = {full - 1, full / 2, 0};
  for (size_t i = 0; i < sizeof shorter / sizeof shorter[0]; i++) {
    pt->ws_size = shorter[i];
    mx_status st = round_trip(p, &err);
    cr_expect_neq(st, MX_OK, "a workspace of %llu bytes (needs %llu) was accepted", (unsigned long long)shorter[i],
                  (unsigned long long)full);
    cr_expect(strstr(err.message, name) != NULL, "names the task %s: %s", name, err.message);
    cr_expect(strstr(err.message, "the kernel needs") != NULL, "%s", err.message);
    cr_expect(strstr(err.message, "compile the model again") != NULL, "%s", err.message);
  }
  pt->ws_size = full;
  cr_expect_eq(round_trip(p, &err), MX_OK, "%s", err.message);

  mx__static_plan_destroy(p);
  mx_graph_destroy(g);
}
