/* CPU kernels of the resampling and geometry group: Resize, Upsample, GridSample, AffineGrid, RoiAlign, NonMaxSuppression, CenterCropPad, DepthToSpace, SpaceToDepth, Pad. */
#include "kernels/groups.h"

const mx_kernel_def *const mx__kernels_resample[] = {
    NULL,
};
