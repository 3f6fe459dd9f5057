/* Running a kernel task block on a device stream (see mx_kernel_task in kernel.h). */
#include <string.h>

#include "common/fail_cause.h"
#include "kernels/kernel.h"

mx_status mx__kernel_task_run(void *args, size_t size) {
  if (size < mx__kernel_task_size(0)) return MX_ERR_INTERNAL;
  mx_kernel_task *task = args;
  mx_kernel_call *call = mx__kernel_task_call(args);
  if (size < mx__kernel_task_size((uint32_t)call->n_in + call->n_out)) return MX_ERR_INTERNAL;
  mx_status st = task->run(call);
  /* The device reports the failure on this thread: leave it the kernel's explanation. */
  if (st != MX_OK) mx__fail_cause_keep(call->why);
  if (st == MX_OK && task->shape_out) {
    for (uint32_t k = 0; k < call->n_out; k++) {
      const mx_ktensor *t = &call->t[call->n_in + k];
      int64_t *rec = task->shape_out + (size_t)k * MX_KERNEL_SHAPE_RECORD;
      rec[0] = t->rank;
      memcpy(rec + 1, t->dims, sizeof t->dims);
    }
  }
  return st;
}
