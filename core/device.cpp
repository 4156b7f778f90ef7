#include "core/device.h"

#include <cctype>

#include "core/error.h"

namespace kiln {

Device::Device(const std::string& spec) {
  std::string kind = spec;
  int idx = -1;
  auto colon = spec.find(':');
  if (colon != std::string::npos) {
    kind = spec.substr(0, colon);
    std::string num = spec.substr(colon + 1);
    bool digits = !num.empty() && num.size() < 4;
    for (char c : num) digits = digits && std::isdigit(static_cast<unsigned char>(c));
    KILN_CHECK(digits, Runtime, "[device] Invalid device string: '", spec,
               "' (the index after ':' must be a non-negative integer)");
    idx = std::stoi(num);
    KILN_CHECK(idx <= 127, Runtime, "[device] Invalid device string: '", spec,
               "' (device index ", idx, " is out of range)");
  }
  if (kind == "cpu") {
    KILN_CHECK(idx <= 0, Value, "[device] invalid device string '", spec, "': cpu has only index 0");
    type = DeviceType::CPU;
    index = -1;
  } else if (kind == "cuda") {
    type = DeviceType::CUDA;
    index = static_cast<int8_t>(idx);
  } else {
    fail(ErrorKind::Runtime, "[device] expected one of cpu, cuda device type at start of device string: ",
         spec);
  }
}

std::string Device::str() const {
  if (is_cpu()) return "cpu";
  return index < 0 ? "cuda" : "cuda:" + std::to_string(index);
}

std::ostream& operator<<(std::ostream& os, const Device& d) { return os << d.str(); }

}  // namespace kiln
