// Reading and writing safetensors files from C++, without Python: the format kiln.save writes
// (python/kiln/serialization.py, Note [Checkpoint format]), so a C++ program can run a model
// trained and saved in Python.
#pragma once

#include <map>
#include <string>

#include "core/tensor.h"

namespace kiln {

struct SafetensorsFile {
  // Every tensor of the file, on the CPU, by its key. kiln.save names the tensors of a nested
  // object by their dotted path: kiln.save({"model": model.state_dict(), ...}) stores the first
  // layer's weight of an nn.Sequential as "model.0.weight".
  std::map<std::string, Tensor> tensors;
  // The file's __metadata__ object (string -> string) as compact JSON; "" when the file has
  // none. kiln.save keeps the non-tensor part of the saved object under "kiln.structure".
  std::string metadata_json;
};

// Loads and checks every field before use: the header length, the JSON header (a strict
// parser), dtype codes (F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL), shape * itemsize against
// each byte range, ranges inside the data section and not overlapping. Errors are kiln::Error
// of kind Value naming the file and the tensor key.
SafetensorsFile load_safetensors(const std::string& path);

// Writes the tensors (any device, any strides; saved contiguously in row-major order) and,
// when metadata_json is not empty, a __metadata__ JSON object of string values. The file
// replaces `path` only once it is complete.
void save_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                      const std::string& metadata_json = "");

}  // namespace kiln
