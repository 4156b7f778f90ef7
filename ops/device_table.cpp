// Host-built tables (pooling windows, interpolation weights, index lists) on
// the device that uses them, cached by content so a repeated call (every
// training step) costs no host-to-device copy.
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>

#include "core/error.h"
#include "ops/conv.h"
#include "ops/copy.h"
#include "ops/creation.h"

namespace kiln {

Tensor device_table(const Tensor& host, Device device) {
  if (device == host.device()) return host;
  std::string key = str_cat(device, host.dtype(), host.sizes());
  key.append(static_cast<const char*>(host.data_ptr()),
             static_cast<size_t>(host.numel()) * host.itemsize());
  // Leaked on purpose: device tensors must not be freed after the runtime shuts down.
  static auto* cache = new std::unordered_map<std::string, Tensor>();
  static auto* mutex = new std::mutex();
  static size_t bytes = 0;
  std::lock_guard<std::mutex> lock(*mutex);
  auto it = cache->find(key);
  if (it != cache->end()) return it->second;
  if (cache->size() >= 512 || bytes > (size_t{256} << 20)) {
    cache->clear();
    bytes = 0;
  }
  bytes += key.size();
  Tensor t = to_device(host, device);
  cache->emplace(std::move(key), t);
  return t;
}

Tensor index_table(const std::vector<int64_t>& values, const Shape& shape, Device device) {
  Tensor t = empty(shape, DType::Int64);
  if (!values.empty()) std::memcpy(t.data_ptr(), values.data(), values.size() * sizeof(int64_t));
  return device_table(t, device);
}

}  // namespace kiln
