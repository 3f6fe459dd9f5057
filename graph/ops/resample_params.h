/* Params structs of the resampling and geometry group (Resize, Upsample, GridSample,
 * AffineGrid, RoiAlign, NonMaxSuppression, CenterCropPad, DepthToSpace, SpaceToDepth, Pad).
 *
 * graph/ops/resample.c fills them from node attributes; the CPU kernels in kernels/resample*.c
 * read them. Plain old data without pointers (compiled models store them byte for byte), so
 * every parse function zeroes the whole struct first and padding bytes stay zero. */
#ifndef MIXRT_GRAPH_OPS_RESAMPLE_PARAMS_H
#define MIXRT_GRAPH_OPS_RESAMPLE_PARAMS_H

#include <stdint.h>

#include "mixrt/shape.h"

/* --- Pad and CenterCropPad ------------------------------------------------------------------- */

typedef enum mx_pad_mode {
  MX_PAD_CONSTANT = 0,
  MX_PAD_REFLECT = 1,
  MX_PAD_EDGE = 2,
  MX_PAD_WRAP = 3
} mx_pad_mode;

typedef struct mx_pad_params {
  int64_t pads[2 * MX_MAX_RANK]; /* opsets before 11: [begin..., end...] from the attribute */
  double value;                  /* opsets before 11: the constant */
  int32_t mode;                  /* mx_pad_mode */
  int32_t from_attrs;            /* 1: opset < 11 (pads/value are attributes); 0: inputs */
  int32_t n_pads;                /* entries in pads when from_attrs */
  int32_t reserved;              /* always 0 */
} mx_pad_params;

typedef struct mx_center_crop_pad_params {
  int64_t axes[MX_MAX_RANK]; /* may be negative */
  int32_t n_axes;            /* 0: every axis */
  int32_t reserved;          /* always 0 */
} mx_center_crop_pad_params;

/* --- DepthToSpace / SpaceToDepth ------------------------------------------------------------- */

typedef struct mx_depth_space_params {
  int64_t blocksize; /* >= 1 */
  int32_t crd;       /* DepthToSpace: 1 for mode CRD, 0 for DCR */
  int32_t reserved;  /* always 0 */
} mx_depth_space_params;

/* --- Resize and Upsample --------------------------------------------------------------------- */

typedef enum mx_resize_mode {
  MX_RESIZE_NEAREST = 0,
  MX_RESIZE_LINEAR = 1,
  MX_RESIZE_CUBIC = 2
} mx_resize_mode;

typedef enum mx_resize_coord {
  MX_COORD_HALF_PIXEL = 0,
  MX_COORD_HALF_PIXEL_SYMMETRIC = 1,
  MX_COORD_PYTORCH_HALF_PIXEL = 2,
  MX_COORD_ALIGN_CORNERS = 3,
  MX_COORD_ASYMMETRIC = 4,
  MX_COORD_TF_CROP_AND_RESIZE = 5,
  MX_COORD_TF_HALF_PIXEL_FOR_NN = 6
} mx_resize_coord;

typedef enum mx_resize_nearest {
  MX_NEAREST_ROUND_PREFER_FLOOR = 0,
  MX_NEAREST_ROUND_PREFER_CEIL = 1,
  MX_NEAREST_FLOOR = 2,
  MX_NEAREST_CEIL = 3
} mx_resize_nearest;

typedef enum mx_resize_aspect {
  MX_ASPECT_STRETCH = 0,
  MX_ASPECT_NOT_LARGER = 1,
  MX_ASPECT_NOT_SMALLER = 2
} mx_resize_aspect;

typedef struct mx_resize_params {
  int64_t axes[MX_MAX_RANK];      /* normalized at run time; may be negative here */
  float attr_scales[MX_MAX_RANK]; /* Upsample before opset 9: the scales attribute */
  float cubic_coeff_a;
  float extrapolation_value;
  int32_t n_axes;          /* 0: every axis */
  int32_t n_attr_scales;   /* > 0 when the scales come from the attribute */
  int32_t mode;            /* mx_resize_mode */
  int32_t coord;           /* mx_resize_coord */
  int32_t nearest;         /* mx_resize_nearest */
  int32_t aspect;          /* mx_resize_aspect */
  int32_t antialias;       /* 1: stretch the linear/cubic filter when downscaling */
  int32_t exclude_outside; /* 1: weights of taps outside the input are dropped */
  int32_t roi_input;       /* input index of roi, -1 when the op has none */
  int32_t scales_input;    /* input index of scales, -1 when the op has none */
  int32_t sizes_input;     /* input index of sizes, -1 when the op has none */
  int32_t reserved;        /* always 0 */
} mx_resize_params;

/* --- GridSample, AffineGrid, RoiAlign, NonMaxSuppression ------------------------------------- */

typedef enum mx_grid_padding {
  MX_GRID_ZEROS = 0,
  MX_GRID_BORDER = 1,
  MX_GRID_REFLECTION = 2
} mx_grid_padding;

typedef struct mx_grid_sample_params {
  int32_t mode;          /* mx_resize_mode (nearest, linear, cubic) */
  int32_t padding;       /* mx_grid_padding */
  int32_t align_corners; /* 0 or 1 */
  int32_t reserved;      /* always 0 */
} mx_grid_sample_params;

typedef struct mx_affine_grid_params {
  int32_t align_corners; /* 0 or 1 */
  int32_t reserved;      /* always 0 */
} mx_affine_grid_params;

typedef struct mx_roi_align_params {
  int64_t output_height;
  int64_t output_width;
  int64_t sampling_ratio; /* 0: adaptive (ceil of the bin size) */
  float spatial_scale;
  int32_t max_mode;   /* 1: mode "max", 0: "avg" */
  int32_t half_pixel; /* 1: coordinate_transformation_mode "half_pixel" */
  int32_t reserved;   /* always 0 */
} mx_roi_align_params;

typedef struct mx_nms_params {
  int32_t center_point_box; /* 1: boxes are [x_center, y_center, width, height] */
  int32_t reserved;         /* always 0 */
} mx_nms_params;

#endif /* MIXRT_GRAPH_OPS_RESAMPLE_PARAMS_H */
