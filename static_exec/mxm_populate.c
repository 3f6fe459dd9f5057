/* Populating the page tables of a loaded .mxm's weights mapping ahead of the first step.
 *
 * The load maps the weights without MAP_POPULATE (populating the whole mapping inside the load
 * made the load itself slow) and checks them with pread, so without this the first step takes a
 * page fault for every run of pages it touches. Here a background thread asks the kernel to map
 * the section in MX__MXM_POPULATE_PIECE pieces (MADV_POPULATE_READ, Linux 5.14+), in file order,
 * which is about the order the plans use their weights. The thread is started once the weights
 * are checked, never waited for by a step (a step faulting a page the thread has not reached
 * maps it itself, and the thread then skips it), and stopped between two pieces and joined when
 * the mapping is released, on every path (a refused load, the model freed).
 *
 * A section larger than half the memory is not populated. MIXRT_MXM_POPULATE chooses:
 * "background" (the default), "load" (the whole section populated inside the load, before it
 * returns), "off" (pages mapped by the steps' own faults). */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "static_exec/mxm_info.h"

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22 /* Linux 5.14 */
#endif

#define MX__MXM_POPULATE_PIECE ((size_t)16 << 20)

struct mx__mxm_populater {
  const unsigned char *data;
  size_t size;
  atomic_bool stop;
  pthread_t thread;
};

mx__mxm_populate_mode mx__mxm_populate_mode_from_env(void) {
  const char *v = getenv("MIXRT_MXM_POPULATE");
  if (!v || !*v || strcmp(v, "background") == 0) return MX__MXM_POPULATE_BACKGROUND;
  if (strcmp(v, "load") == 0) return MX__MXM_POPULATE_LOAD;
  return MX__MXM_POPULATE_OFF; /* "off", and anything unknown: what the steps would do anyway */
}

/* Populates [data, data + size) piece by piece until done, refused or stop is set. */
static void populate_pieces(const unsigned char *data, size_t size, atomic_bool *stop) {
  for (size_t at = 0; at < size; at += MX__MXM_POPULATE_PIECE) {
    if (stop && atomic_load_explicit(stop, memory_order_relaxed)) return;
    size_t len = size - at < MX__MXM_POPULATE_PIECE ? size - at : MX__MXM_POPULATE_PIECE;
    /* A kernel without MADV_POPULATE_READ (EINVAL) or short of memory: the steps fault the
     * rest in themselves, as they would with the mode off. */
    if (madvise((void *)(data + at), len, MADV_POPULATE_READ) != 0 && errno != EINTR) return;
  }
}

static void *populate_thread(void *arg) {
  mx__mxm_populater *p = arg;
  populate_pieces(p->data, p->size, &p->stop);
  return NULL;
}

/* The mapping starts on a page (the whole file, or the weights section at a page-aligned
 * offset); madvise wants the address page-aligned: a section that is not is left alone. */
static bool page_aligned(const unsigned char *data) {
  return ((uintptr_t)data & (uintptr_t)4095) == 0;
}

/* A section larger than half the machine's memory is left to the steps: populating it would read
 * from disk pages that evict the ones populated before them. */
static bool fits_in_memory(size_t size) {
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return true;
  return (uint64_t)size <= (uint64_t)pages * (uint64_t)page / 2;
}

mx__mxm_populater *mx__mxm_populate_start(const unsigned char *data, size_t size, mx__mxm_populate_mode mode) {
  if (!data || !size || mode == MX__MXM_POPULATE_OFF || !page_aligned(data) || !fits_in_memory(size))
    return NULL;
  if (mode == MX__MXM_POPULATE_LOAD) {
    populate_pieces(data, size, NULL);
    return NULL;
  }
  mx__mxm_populater *p = malloc(sizeof *p);
  if (!p) return NULL; /* the steps fault the pages in themselves */
  p->data = data;
  p->size = size;
  atomic_init(&p->stop, false);
  if (pthread_create(&p->thread, NULL, populate_thread, p) != 0) {
    free(p);
    return NULL;
  }
  return p;
}

void mx__mxm_populate_stop(mx__mxm_populater *p) {
  if (!p) return;
  atomic_store(&p->stop, true);
  pthread_join(p->thread, NULL);
  free(p);
}
