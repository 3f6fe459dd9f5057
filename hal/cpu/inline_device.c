/* The inline device: every command runs synchronously in the calling thread.
 *
 * Same semantics as the CPU device (sequence numbers, sticky errors, skipped commands on a
 * failed stream, fault injection, models with patch steps) without any thread: useful on 1-2
 * core machines and for debugging, since a failing kernel's stack is the caller's. Events are
 * trivially satisfied when one thread drives the device, because everything submitted has
 * already run; a wait checks whether the recording stream failed before the event (and, if
 * another host thread is still running the recorded work, waits for it). Models run their items
 * in add order, which is a valid schedule because every internal wait follows its record. A
 * stream's submit lock is held while its command runs, so one stream's commands never run
 * concurrently. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/fail_cause.h"
#include "hal/hal_impl.h"

/* Starts a command: takes the submit lock (held while the command runs) and returns the
 * command's sequence number. end_cmd publishes its completion and releases the lock. */
static uint64_t begin_cmd(mx_stream *s) {
  pthread_mutex_lock(&s->submit_lock);
  uint64_t seq = atomic_load_explicit(&s->chan->submitted, memory_order_relaxed) + 1;
  atomic_store_explicit(&s->chan->submitted, seq, memory_order_relaxed);
  return seq;
}

static void end_cmd(mx_stream *s, uint64_t seq) {
  atomic_store(&s->chan->completed, seq);
  pthread_mutex_unlock(&s->submit_lock);
  mx__waitq_notify(&s->dev->host_wq, &s->chan->completed, seq);
}

/* An inline stream keeps a scratch buffer for argument blocks larger than the stack copy, so
 * repeated large launches allocate only when a block is larger than any before. */
typedef struct inline_stream {
  struct mx_stream base;  /* must stay first */
  unsigned char *scratch; /* argument copies (owned, under the submit lock) */
  size_t scratch_cap;     /* bytes */
} inline_stream;

static mx_status inline_call_named(mx_stream *s, mx_hal_fn fn, const void *args, size_t size, bool kernel,
                                   const char *name) {
  inline_stream *is = (inline_stream *)s;
  mx_device *dev = s->dev;
  /* The function may modify its block, so it gets a copy, as on the CPU device. */
  _Alignas(16) unsigned char local[MX_HAL_INLINE_ARGS];
  uint64_t seq = begin_cmd(s);
  void *copy = local;
  if (size > sizeof local) {
    if (size > is->scratch_cap) {
      unsigned char *grown = realloc(is->scratch, size);
      if (!grown) {
        /* Nothing ran: give the sequence number to an empty command. */
        end_cmd(s, seq);
        return mx__device_fail(dev, MX_ERR_OUT_OF_MEMORY,
                               "launch: out of host memory for a %zu-byte argument block", size);
      }
      is->scratch = grown;
      is->scratch_cap = size;
    }
    copy = is->scratch;
  }
  if (size) memcpy(copy, args, size);
  if (!mx__stream_failed(s)) {
    if (kernel && dev->fault_nth[MX_FAULT_KERNEL] != 0 && mx__fault_hit(dev, MX_FAULT_KERNEL)) {
      mx__stream_fail(s, seq, MX_ERR_KERNEL, -1, -1,
                      "command %" PRIu64 " (kernel%s%s%s) failed: injected fault (kernel:%" PRIu64 ")",
                      mx__cmd_no(s->chan, seq), MX__QUOTE(name), dev->fault_nth[MX_FAULT_KERNEL]);
    } else {
      mx_status st = fn(copy, size);
      if (st != MX_OK) {
        /* A kernel's cause (value, position, bound) was left on this thread. */
        char cause[MX_FAIL_CAUSE_MAX + 1];
        bool has_cause = kernel && mx__fail_cause_take(cause, sizeof cause);
        mx__stream_fail(s, seq, st, -1, -1, "command %" PRIu64 " (%s%s%s%s) failed: %s%s%s",
                        mx__cmd_no(s->chan, seq), kernel ? "kernel" : "host callback", MX__QUOTE(name),
                        mx_status_string(st), has_cause ? ": " : "", has_cause ? cause : "");
      }
    }
  }
  end_cmd(s, seq);
  return MX_OK;
}

static mx_status inline_call(mx_stream *s, mx_hal_fn fn, const void *args, size_t size, bool kernel) {
  return inline_call_named(s, fn, args, size, kernel, NULL);
}

static mx_status inline_submit(mx_stream *s, const mx__op *op) {
  mx_device *dev = s->dev;
  /* Single-threaded use always finds the event reached. When another host thread is still
   * running the recorded work on its stream, the caller waits: here the caller is the device. */
  if (op->kind == MX__OP_WAIT)
    mx__waitq_wait_ge(&dev->host_wq, &op->chan->completed, op->target, dev->spin_ns);
  uint64_t seq = begin_cmd(s);
  if (mx__stream_failed(s)) goto done;
  switch (op->kind) {
    case MX__OP_COPY:
      if (op->inject)
        mx__stream_fail(s, seq, MX_ERR_DEVICE, -1, -1,
                        "command %" PRIu64
                        " (asynchronous copy of %zu bytes%s%s%s%s) failed: injected "
                        "fault (copy:%" PRIu64 ")",
                        mx__cmd_no(s->chan, seq), op->n, op->name ? " of" : "", MX__QUOTE(op->name),
                        dev->fault_nth[MX_FAULT_COPY]);
      else if (op->n)
        memmove(op->dst, op->src, op->n);
      break;
    case MX__OP_MEMSET:
      if (op->inject)
        mx__stream_fail(s, seq, MX_ERR_DEVICE, -1, -1,
                        "command %" PRIu64
                        " (asynchronous memset of %zu bytes%s%s%s%s) failed: injected "
                        "fault (copy:%" PRIu64 ")",
                        mx__cmd_no(s->chan, seq), op->n, op->name ? " of" : "", MX__QUOTE(op->name),
                        dev->fault_nth[MX_FAULT_COPY]);
      else if (op->n)
        memset(op->dst, op->value, op->n);
      break;
    case MX__OP_FREE: {
      char why[256];
      if (!mx__mem_free(dev, op->dst, why, sizeof why))
        mx__stream_fail(s, seq, MX_ERR_INVALID_ARGUMENT, -1, -1,
                        "command %" PRIu64 " (stream-ordered free) failed: %s", mx__cmd_no(s->chan, seq),
                        why);
      break;
    }
    case MX__OP_WAIT: mx__stream_check_wait(s, seq, op->chan, op->target); break;
    case MX__OP_FAIL:
      mx__stream_fail(s, seq, op->status, -1, -1,
                      "command %" PRIu64 " (launch) failed: injected fault (launch:%" PRIu64 ")",
                      mx__cmd_no(s->chan, seq), dev->fault_nth[MX_FAULT_LAUNCH]);
      break;
  }
done:
  end_cmd(s, seq);
  return MX_OK;
}

static mx_status inline_model_execute(mx_hal_model *m, mx_stream *s, uint64_t exec, uint64_t patch_start,
                                      uint32_t patch_count) {
  uint64_t seq = begin_cmd(s);
  mx__model_begin(m, exec, patch_start, patch_count, mx__stream_failed(s));
  atomic_store(&m->started, exec);
  mx__model_run_in_order(m, exec);
  for (uint32_t i = 1; i < m->desc.n_streams; i++) atomic_store(&m->part_done[i], exec);
  mx__model_end(m, exec, s, seq);
  end_cmd(s, seq);
  return MX_OK;
}

static mx_status inline_init(mx_device *dev, mx_error *err) {
  (void)err;
  dev->impl = NULL;
  return MX_OK;
}

static void inline_fini(mx_device *dev) { (void)dev; }
static mx_status inline_stream_init(mx_stream *s) {
  (void)s;
  return MX_OK;
}
static void inline_stream_fini(mx_stream *s) {
  inline_stream *is = (inline_stream *)s;
  free(is->scratch);
  is->scratch = NULL;
}
static mx_status inline_model_prepare(mx_hal_model *m) {
  (void)m;
  return MX_OK;
}
static void inline_model_release(mx_hal_model *m) { (void)m; }
static void inline_notify(mx_device *dev) { (void)dev; /* no worker to wake */ }

static void inline_info(const mx_device *dev, mx_device_info *info) {
  (void)dev;
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  info->pinning = MX_PIN_NONE;
  info->processing_units = online > 0 ? (uint32_t)online : 1;
  info->workers = 0;
  info->pinned_workers = 0;
}

const mx__device_ops mx__inline_device_ops = {
    .api_version = MX_HAL_API_VERSION,
    .name = "inline",
    .stream_size = sizeof(inline_stream),
    .init = inline_init,
    .fini = inline_fini,
    .stream_init = inline_stream_init,
    .stream_fini = inline_stream_fini,
    .call = inline_call,
    .submit = inline_submit,
    .model_prepare = inline_model_prepare,
    .model_release = inline_model_release,
    .model_execute = inline_model_execute,
    .notify = inline_notify,
    .info = inline_info,
    .call_named = inline_call_named,
};
