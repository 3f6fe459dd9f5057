/* Op definitions of the resampling and geometry group: Resize, Upsample, GridSample, AffineGrid, RoiAlign, NonMaxSuppression, CenterCropPad, DepthToSpace, SpaceToDepth, Pad. */
#include "graph/ops/groups.h"

const mx_op_def *const mx__ops_resample[] = {
    NULL,
};
