#include "core/promotion.h"

#include <optional>

#include "core/flags.h"

namespace kiln {

namespace {

int category(DType t) { return t == DType::Bool ? 0 : is_floating(t) ? 2 : 1; }

std::optional<DType> promote_opt(std::optional<DType> a, DType b) {
  return a ? promote_types(*a, b) : b;
}

// `higher` wins unless `lower` is of a higher category.
std::optional<DType> combine(std::optional<DType> higher, std::optional<DType> lower) {
  if (!higher) return lower;
  if (!lower) return higher;
  if (category(*lower) > category(*higher)) return promote_types(*higher, *lower);
  return higher;
}

}  // namespace

DType result_type(std::initializer_list<Tensor> tensors) {
  std::optional<DType> dim_result, zero_result, wrapped_result;
  for (const Tensor& t : tensors) {
    if (!t.defined()) continue;
    DType dt = t.dtype();
    if (t.impl()->wrapped_number_) {
      // Python floats count as the default dtype, not float64.
      if (is_floating(dt)) dt = default_dtype();
      wrapped_result = promote_opt(wrapped_result, dt);
    } else if (t.dim() == 0) {
      zero_result = promote_opt(zero_result, dt);
    } else {
      dim_result = promote_opt(dim_result, dt);
    }
  }
  auto r = combine(dim_result, combine(zero_result, wrapped_result));
  return r ? *r : default_dtype();
}

DType result_type(const Tensor& a, const Tensor& b) {
  // Two tensors of one dtype, neither a Python number: every rule gives that dtype.
  if (a.defined() && b.defined() && a.dtype() == b.dtype() && !a.impl()->wrapped_number_ &&
      !b.impl()->wrapped_number_)
    return a.dtype();
  return result_type({a, b});
}

bool can_cast(DType from, DType to) {
  if (is_floating(from) && !is_floating(to)) return false;
  if (from != DType::Bool && to == DType::Bool) return false;
  return true;
}

}  // namespace kiln
