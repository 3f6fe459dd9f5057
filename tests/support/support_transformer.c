/* Test fixture: the exported-transformer-style encoder layer (see transformer_fixture.h), which
 * is mixrt's built-in encoder generator with its default configuration. */
#include "mixrt/models.h"
#include "support/transformer_fixture.h"

mx_status mxt_transformer_build(mx_graph **out) {
  mx_encoder_config cfg;
  mx_encoder_config_default(&cfg);
  cfg.hidden = MXT_TRANSFORMER_HIDDEN;
  cfg.heads = MXT_TRANSFORMER_HEADS;
  cfg.max_pos = MXT_TRANSFORMER_MAX_POS;
  return mx_model_encoder(&cfg, out, NULL);
}
