// Where a tensor's memory lives: the CPU or one CUDA device.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

namespace kiln {

enum class DeviceType : int8_t { CPU, CUDA };

struct Device {
  DeviceType type = DeviceType::CPU;
  // -1 means "unspecified" (a bare "cuda" resolves to the current device).
  int8_t index = -1;

  Device() = default;
  Device(DeviceType t, int index = -1) : type(t), index(static_cast<int8_t>(index)) {}
  // Parses "cpu", "cuda", "cuda:1"; throws ValueError naming the string otherwise.
  explicit Device(const std::string& spec);

  bool is_cpu() const { return type == DeviceType::CPU; }
  bool is_cuda() const { return type == DeviceType::CUDA; }
  std::string str() const;
  bool operator==(const Device& o) const { return type == o.type && index == o.index; }
  bool operator!=(const Device& o) const { return !(*this == o); }
};

std::ostream& operator<<(std::ostream& os, const Device& d);

}  // namespace kiln
