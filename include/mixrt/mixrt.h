/* mixrt: a runtime for ML compute graphs whose shapes are partly static and partly dynamic.
 * The umbrella header: includes every public header. */
#ifndef MIXRT_MIXRT_H
#define MIXRT_MIXRT_H

#include "mixrt/binding.h"
#include "mixrt/dtype.h"
#include "mixrt/graph.h"
#include "mixrt/hal.h"
#include "mixrt/log.h"
#include "mixrt/models.h"
#include "mixrt/onnx.h"
#include "mixrt/partition.h"
#include "mixrt/reference.h"
#include "mixrt/sequence.h"
#include "mixrt/session.h"
#include "mixrt/shape.h"
#include "mixrt/status.h"
#include "mixrt/tensor.h"
#include "mixrt/version.h"

#endif /* MIXRT_MIXRT_H */
