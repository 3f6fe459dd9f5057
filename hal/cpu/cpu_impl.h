/* Private interface of the CPU device (hal/cpu/ only): processor topology and worker pinning.
 *
 * The topology is loaded once per device with hwloc. It yields an ordered list of processing
 * units for the resolved pinning policy; worker i is bound to entry i modulo the list length. */
#ifndef MIXRT_HAL_CPU_CPU_IMPL_H
#define MIXRT_HAL_CPU_CPU_IMPL_H

#include <hwloc.h>
#include <stdbool.h>
#include <stdint.h>

#include "hal/hal_impl.h"

typedef struct mx__cpu_topo {
  hwloc_topology_t topo; /* loaded topology (owned); NULL if it could not be loaded */
  mx_pinning policy;     /* resolved policy (never MX_PIN_AUTO) */
  uint32_t n_pus;        /* processing units the process may use */
  hwloc_bitmap_t *order; /* binding targets in worker order (owned, n_order entries) */
  uint32_t n_order;
} mx__cpu_topo;

/* Loads the topology and resolves `requested`. An explicit compact/scatter request fails with
 * MX_ERR_DEVICE when hwloc cannot describe the machine; AUTO and NONE fall back to no pinning. */
MX_MUST_USE mx_status mx__cpu_topo_init(mx__cpu_topo *t, mx_pinning requested, mx_error *err);

/* Binds the calling thread as worker `index`; true when a binding was applied. */
bool mx__cpu_topo_bind_self(const mx__cpu_topo *t, uint32_t index);

void mx__cpu_topo_fini(mx__cpu_topo *t);

#endif /* MIXRT_HAL_CPU_CPU_IMPL_H */
