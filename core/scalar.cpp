#include "core/scalar.h"

#include <cmath>
#include <limits>

#include "core/error.h"

namespace kiln {

namespace {

template <typename T>
bool fits_integer(Scalar value) {
  using Limits = std::numeric_limits<T>;
  if (value.is_integral()) {
    const int64_t v = value.to_int();
    const auto max = static_cast<int64_t>(Limits::max());
    return v <= max && v >= (Limits::is_signed ? static_cast<int64_t>(Limits::lowest()) : -max);
  }
  const double v = value.to_double();
  // Fails for NaN. The last bound is 2**63, which int64's max rounds up to as a
  // double, and converting 2**63 itself to int64 is undefined.
  return v >= static_cast<double>(Limits::lowest()) && v <= static_cast<double>(Limits::max()) &&
         v < 9223372036854775808.0;
}

bool fits_floating(Scalar value, double max) {
  const double v = value.to_double();
  return !std::isfinite(v) || std::fabs(v) <= max;
}

}  // namespace

bool scalar_fits(Scalar value, DType dtype) {
  if (value.is_bool()) return true;
  switch (dtype) {
    case DType::Bool:
      return true;
    case DType::UInt8:
      return fits_integer<uint8_t>(value);
    case DType::Int8:
      return fits_integer<int8_t>(value);
    case DType::Int16:
      return fits_integer<int16_t>(value);
    case DType::Int32:
      return fits_integer<int32_t>(value);
    case DType::Int64:
      return fits_integer<int64_t>(value);
    case DType::Float16:
      return fits_floating(value, static_cast<float>(std::numeric_limits<Eigen::half>::max()));
    case DType::BFloat16:
      return fits_floating(value, static_cast<float>(std::numeric_limits<Eigen::bfloat16>::max()));
    case DType::Float32:
      return fits_floating(value, std::numeric_limits<float>::max());
    case DType::Float64:
      return true;
  }
  return true;
}

void check_scalar_fits(Scalar value, DType dtype, const char* op) {
  if (scalar_fits(value, dtype)) return;
  if (value.is_integral()) {
    fail(ErrorKind::Runtime, "[", op, "] value cannot be converted to type ", dtype,
         " without overflow (got ", value.to_int(), ")");
  }
  fail(ErrorKind::Runtime, "[", op, "] value cannot be converted to type ", dtype,
       " without overflow (got ", value.to_double(), ")");
}

}  // namespace kiln
