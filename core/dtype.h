// The dtype list. Every property of a dtype (C++ type, name, size, category)
// comes from KILN_FORALL_DTYPES, so adding a dtype is one line here.
#pragma once

#include <Eigen/Core>
#include <cstdint>
#include <ostream>
#include <string>

namespace kiln {

// _(C++ type, enum name, Python name)
#define KILN_FORALL_DTYPES(_)          \
  _(bool, Bool, bool)                  \
  _(uint8_t, UInt8, uint8)             \
  _(int8_t, Int8, int8)                \
  _(int16_t, Int16, int16)             \
  _(int32_t, Int32, int32)             \
  _(int64_t, Int64, int64)             \
  _(Eigen::half, Float16, float16)     \
  _(Eigen::bfloat16, BFloat16, bfloat16) \
  _(float, Float32, float32)           \
  _(double, Float64, float64)

enum class DType : int8_t {
#define KILN_ENUM_ENTRY(ctype, name, pyname) name,
  KILN_FORALL_DTYPES(KILN_ENUM_ENTRY)
#undef KILN_ENUM_ENTRY
};

constexpr int kNumDTypes = 0
#define KILN_COUNT_ENTRY(ctype, name, pyname) +1
    KILN_FORALL_DTYPES(KILN_COUNT_ENTRY)
#undef KILN_COUNT_ENTRY
    ;

// Maps a C++ scalar type to its DType.
template <typename T>
struct dtype_of;
#define KILN_DTYPE_OF(ctype, name, pyname) \
  template <>                              \
  struct dtype_of<ctype> {                 \
    static constexpr DType value = DType::name; \
  };
KILN_FORALL_DTYPES(KILN_DTYPE_OF)
#undef KILN_DTYPE_OF

size_t itemsize(DType t);
// The Python-facing name, e.g. "float32".
const char* dtype_name(DType t);
// PyTorch's ScalarType name ("Float", "Long"), for messages users grep for.
const char* scalar_type_name(DType t);
bool is_floating(DType t);
bool is_integral(DType t, bool include_bool);
bool is_signed(DType t);

// PyTorch's promotion lattice for two tensors of equal standing.
DType promote_types(DType a, DType b);

// The dtype that math on integer/bool inputs computes in: exp(int) gives the
// default dtype (core/flags.h).
DType to_floating(DType t);

std::ostream& operator<<(std::ostream& os, DType t);

// Accumulation type: half-precision math is done in float.
template <typename T>
struct acc_type {
  using type = T;
};
template <>
struct acc_type<Eigen::half> {
  using type = float;
};
template <>
struct acc_type<Eigen::bfloat16> {
  using type = float;
};
template <typename T>
using acc_t = typename acc_type<T>::type;

}  // namespace kiln
