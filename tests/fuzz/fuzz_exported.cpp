// libFuzzer target: the exported-program loader (runtime/program.h) on arbitrary file contents:
// the safetensors container, the graph JSON in its metadata, and the graph compiler that checks
// every node, argument, value id, dim, size expression, autocast region and constant. Every
// input either loads or raises kiln::Error; a program that loads has its recorded inputs.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "runtime/program.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // One in-memory file for the whole run, rewritten per input: no disk traffic.
  static const int fd = memfd_create("kiln-fuzz-exported", 0);
  static const std::string path = "/proc/self/fd/" + std::to_string(fd);
  if (fd < 0 || ftruncate(fd, 0) != 0) __builtin_trap();
  for (size_t done = 0; done < size;) {
    ssize_t n = pwrite(fd, data + done, size - done, static_cast<off_t>(done));
    if (n <= 0) __builtin_trap();
    done += static_cast<size_t>(n);
  }
  try {
    kiln::runtime::Program program = kiln::runtime::Program::load(path);
    if (program.graph_json().empty()) __builtin_trap();
    for (const std::string& name : program.input_names()) (void)name.size();
  } catch (const kiln::Error&) {
  }
  return 0;
}
