// libFuzzer target: kiln::load_safetensors (runtime/safetensors.h) on arbitrary file contents.
// Every input either loads or raises kiln::Error; loaded tensors fit in the file.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "runtime/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // One in-memory file for the whole run, rewritten per input: no disk traffic.
  static const int fd = memfd_create("kiln-fuzz-safetensors", 0);
  static const std::string path = "/proc/self/fd/" + std::to_string(fd);
  if (fd < 0 || ftruncate(fd, 0) != 0) __builtin_trap();
  for (size_t done = 0; done < size;) {
    ssize_t n = pwrite(fd, data + done, size - done, static_cast<off_t>(done));
    if (n <= 0) __builtin_trap();
    done += static_cast<size_t>(n);
  }
  try {
    kiln::SafetensorsFile f = kiln::load_safetensors(path);
    size_t bytes = 0;
    for (const auto& [key, t] : f.tensors) bytes += static_cast<size_t>(t.numel()) * t.itemsize();
    if (bytes > size) __builtin_trap();
  } catch (const kiln::Error&) {
  }
  return 0;
}
