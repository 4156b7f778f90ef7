// Running a model exported by kiln.export without Python (Note [Export runtime]).
//
//   auto program = kiln::runtime::Program::load("model.kiln", kiln::Device("cuda:0"));
//   std::vector<kiln::Tensor> out = program.run({input});
//
// The file (Note [Export file format], docs/export_format.md) holds the graph and the weights;
// loading checks all of it, so a program that loads runs only ops kiln has, on values that
// exist, with weights of the recorded shapes.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/tensor.h"

namespace kiln::runtime {

// The schema version this kiln writes, and the oldest it reads (version 1 had no autocast
// regions, docs/export_format.md).
constexpr int64_t kExportVersion = 2;
constexpr int64_t kOldestExportVersion = 1;

struct ProgramData;

class Program {
 public:
  // Reads a file written by kiln.export.save and moves the weights to `device`.
  static Program load(const std::string& path, Device device = Device());
  // From the graph JSON and its constants by name (what the file holds). `where` prefixes
  // errors (the file name).
  Program(const std::string& graph_json, const std::map<std::string, Tensor>& constants,
          Device device = Device(), const std::string& where = "");

  // Runs the graph on `inputs` (in the exported order, on the program's device, with the
  // recorded dtypes and sizes within the recorded ranges) and returns its outputs. Grad mode
  // is off for the call, and each node runs under the autocast state it was recorded with
  // (off for nodes recorded outside autocast), whatever the caller's state is. Thread-safe:
  // the program is immutable after loading, and each call keeps its values on its own stack,
  // so any number of threads may run one program at once.
  std::vector<Tensor> run(const std::vector<Tensor>& inputs) const;

  Device device() const;
  const std::vector<std::string>& input_names() const;
  // The graph as loaded (compact JSON).
  const std::string& graph_json() const;

 private:
  std::shared_ptr<const ProgramData> data_;
};

// Writes a program file: the weights as safetensors tensors and the graph JSON in the
// safetensors metadata under "kiln.export". Checks the graph first (it must load).
void save_program(const std::string& path, const std::string& graph_json,
                  const std::map<std::string, Tensor>& constants);

// The graph JSON and constants of a program file, checked like Program::load checks them.
std::pair<std::string, std::map<std::string, Tensor>> read_program_file(const std::string& path);

}  // namespace kiln::runtime
