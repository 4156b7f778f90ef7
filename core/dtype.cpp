#include "core/dtype.h"

#include "core/flags.h"

namespace kiln {

size_t itemsize(DType t) {
  switch (t) {
#define KILN_SIZE_CASE(ctype, name, pyname) \
  case DType::name:                         \
    return sizeof(ctype);
    KILN_FORALL_DTYPES(KILN_SIZE_CASE)
#undef KILN_SIZE_CASE
  }
  return 0;
}

const char* dtype_name(DType t) {
  switch (t) {
#define KILN_NAME_CASE(ctype, name, pyname) \
  case DType::name:                         \
    return #pyname;
    KILN_FORALL_DTYPES(KILN_NAME_CASE)
#undef KILN_NAME_CASE
  }
  return "?";
}

const char* scalar_type_name(DType t) {
  switch (t) {
    case DType::Bool: return "Bool";
    case DType::UInt8: return "Byte";
    case DType::Int8: return "Char";
    case DType::Int16: return "Short";
    case DType::Int32: return "Int";
    case DType::Int64: return "Long";
    case DType::Float16: return "Half";
    case DType::BFloat16: return "BFloat16";
    case DType::Float32: return "Float";
    case DType::Float64: return "Double";
  }
  return "?";
}

bool is_floating(DType t) {
  return t == DType::Float16 || t == DType::BFloat16 || t == DType::Float32 || t == DType::Float64;
}

bool is_integral(DType t, bool include_bool) {
  if (t == DType::Bool) return include_bool;
  return !is_floating(t);
}

bool is_signed(DType t) { return t != DType::Bool && t != DType::UInt8; }

namespace {
// Rank within a category; promotion picks the higher rank.
int float_rank(DType t) {
  switch (t) {
    case DType::Float16:
    case DType::BFloat16:
      return 0;
    case DType::Float32:
      return 1;
    default:
      return 2;
  }
}
}  // namespace

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  bool fa = is_floating(a), fb = is_floating(b);
  if (fa && fb) {
    int ra = float_rank(a), rb = float_rank(b);
    if (ra == 0 && rb == 0) return DType::Float32;  // float16 with bfloat16
    return ra > rb ? a : b;
  }
  if (fa) return a;
  if (fb) return b;
  if (a == DType::Bool) return b;
  if (b == DType::Bool) return a;
  // Both integral: uint8 mixes with signed types by widening.
  if (a == DType::UInt8 || b == DType::UInt8) {
    DType other = a == DType::UInt8 ? b : a;
    return other == DType::Int8 ? DType::Int16 : other;
  }
  return itemsize(a) >= itemsize(b) ? a : b;
}

DType to_floating(DType t) { return is_floating(t) ? t : default_dtype(); }

std::ostream& operator<<(std::ostream& os, DType t) { return os << dtype_name(t); }

}  // namespace kiln
