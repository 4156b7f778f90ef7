#include "ops/op_table.h"

namespace kiln {

const char* op_name(UnaryOp op) {
  switch (op) {
#define KILN_UNARY_NAME(name, kind, autocast) \
  case UnaryOp::name:                         \
    return #name;
    KILN_UNARY_OPS(KILN_UNARY_NAME)
#undef KILN_UNARY_NAME
  }
  return "?";
}

const char* op_name(BinaryOp op) {
  switch (op) {
#define KILN_BINARY_NAME(name, kind, autocast) \
  case BinaryOp::name:                         \
    return #name;
    KILN_BINARY_OPS(KILN_BINARY_NAME)
    KILN_BINARY_GRAD_OPS(KILN_BINARY_NAME)
#undef KILN_BINARY_NAME
  }
  return "?";
}

UnaryKind op_kind(UnaryOp op) {
  switch (op) {
#define KILN_UNARY_KIND(name, kind, autocast) \
  case UnaryOp::name:                         \
    return UnaryKind::kind;
    KILN_UNARY_OPS(KILN_UNARY_KIND)
#undef KILN_UNARY_KIND
  }
  return UnaryKind::Same;
}

BinaryKind op_kind(BinaryOp op) {
  switch (op) {
#define KILN_BINARY_KIND(name, kind, autocast) \
  case BinaryOp::name:                         \
    return BinaryKind::kind;
    KILN_BINARY_OPS(KILN_BINARY_KIND)
    KILN_BINARY_GRAD_OPS(KILN_BINARY_KIND)
#undef KILN_BINARY_KIND
  }
  return BinaryKind::Promote;
}

}  // namespace kiln
