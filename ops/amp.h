// The GradScaler's device-side steps (kiln.amp.GradScaler calls them through
// kiln._C). The scale, growth tracker and found-inf flag stay device tensors,
// so neither step waits for the device.
#pragma once

#include <vector>

#include "core/tensor.h"

namespace kiln {

// Multiplies every gradient by inv_scale in place and sets found_inf (a
// one-element float32 tensor) to 1 if any of them held an inf or NaN; it is
// never reset here, so calls over several parameter groups accumulate.
void amp_foreach_non_finite_check_and_unscale_(const std::vector<Tensor>& grads,
                                               const Tensor& found_inf, const Tensor& inv_scale);

// One dynamic loss-scale update: after an overflow (found_inf > 0) the scale
// is multiplied by backoff_factor and the growth tracker reset; otherwise the
// tracker counts clean steps and at growth_interval the scale grows by
// growth_factor (if the result is finite) and the tracker restarts. Returns scale.
const Tensor& amp_update_scale_(const Tensor& scale, const Tensor& growth_tracker,
                                const Tensor& found_inf, double growth_factor,
                                double backoff_factor, int64_t growth_interval);

}  // namespace kiln
