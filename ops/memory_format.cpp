#include "ops/memory_format.h"

#include "core/error.h"
#include "ops/copy.h"
#include "ops/view.h"

namespace kiln {

const char* memory_format_name(MemoryFormat f) {
  switch (f) {
    case MemoryFormat::Contiguous: return "contiguous_format";
    case MemoryFormat::ChannelsLast: return "channels_last";
    case MemoryFormat::ChannelsLast3d: return "channels_last_3d";
    case MemoryFormat::Preserve: return "preserve_format";
  }
  return "?";
}

std::vector<int64_t> memory_order(MemoryFormat f, int64_t dim) {
  std::vector<int64_t> order;
  if (f == MemoryFormat::ChannelsLast || f == MemoryFormat::ChannelsLast3d) {
    order.push_back(0);
    for (int64_t d = 2; d < dim; ++d) order.push_back(d);
    order.push_back(1);
  } else {
    for (int64_t d = 0; d < dim; ++d) order.push_back(d);
  }
  return order;
}

std::vector<int64_t> inverse_permutation(const std::vector<int64_t>& perm) {
  std::vector<int64_t> inv(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inv[static_cast<size_t>(perm[i])] = static_cast<int64_t>(i);
  return inv;
}

namespace {

int64_t rank_of(MemoryFormat f) {
  return f == MemoryFormat::ChannelsLast ? 4 : f == MemoryFormat::ChannelsLast3d ? 5 : -1;
}

void check_rank(const Tensor& t, MemoryFormat f, const char* op) {
  const int64_t rank = rank_of(f);
  KILN_CHECK(rank < 0 || t.dim() == rank, Runtime, "[", op, "] required rank ", rank,
             " tensor to use ", memory_format_name(f), " format, got a tensor of shape ",
             t.sizes());
}

}  // namespace

bool is_contiguous(const Tensor& t, MemoryFormat f) {
  if (f == MemoryFormat::Contiguous || f == MemoryFormat::Preserve) return t.is_contiguous();
  if (t.dim() != rank_of(f)) return false;
  const std::vector<int64_t> order = memory_order(f, t.dim());
  int64_t expected = 1;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const int64_t size = t.size(*it);
    if (size != 1 && t.stride(*it) != expected) return false;
    expected *= size;
  }
  return true;
}

MemoryFormat suggest_memory_format(const Tensor& t) {
  if (t.is_contiguous()) return MemoryFormat::Contiguous;
  if (t.dim() == 4 && is_contiguous(t, MemoryFormat::ChannelsLast))
    return MemoryFormat::ChannelsLast;
  if (t.dim() == 5 && is_contiguous(t, MemoryFormat::ChannelsLast3d))
    return MemoryFormat::ChannelsLast3d;
  return MemoryFormat::Contiguous;
}

Tensor contiguous(const Tensor& t, MemoryFormat f, const char* op) {
  if (f == MemoryFormat::Preserve) f = suggest_memory_format(t);
  check_rank(t, f, op);
  if (is_contiguous(t, f)) return t;
  if (f == MemoryFormat::Contiguous) return contiguous(t);
  const std::vector<int64_t> order = memory_order(f, t.dim());
  return permute(contiguous(permute(t, order)), inverse_permutation(order));
}

Tensor clone(const Tensor& t, MemoryFormat f) {
  if (f == MemoryFormat::Preserve) f = suggest_memory_format(t);
  check_rank(t, f, "clone");
  if (f == MemoryFormat::Contiguous) return clone(t);
  const std::vector<int64_t> order = memory_order(f, t.dim());
  return permute(clone(permute(t, order)), inverse_permutation(order));
}

Tensor from_memory_order(const Tensor& t_m, const std::vector<int64_t>& order) {
  const std::vector<int64_t> inverse = inverse_permutation(order);
  Shape sizes, strides;
  for (int64_t d : inverse) {
    sizes.push_back(t_m.size(d));
    strides.push_back(t_m.stride(d));
  }
  return make_tensor_from_storage(t_m.storage(), sizes, strides, t_m.storage_offset(),
                                  t_m.dtype());
}

Tensor empty_in_memory_order(const Shape& sizes, DType dtype, Device device,
                             const std::vector<int64_t>& order) {
  Shape in_order;
  for (int64_t d : order) in_order.push_back(sizes[static_cast<size_t>(d)]);
  return from_memory_order(make_tensor(in_order, dtype, device), order);
}

}  // namespace kiln
