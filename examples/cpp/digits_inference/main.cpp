// Runs the MLP that examples/train_digits.py trains, in C++, from its checkpoint.
//
//   digits_inference out/digits_mlp.safetensors features.f32 [predictions.safetensors]
//
// The checkpoint is what kiln.save({"model": model.state_dict(), ...}) wrote: an
// nn.Sequential of Linear layers with a ReLU between each pair, so its tensors are
// "model.<i>.weight" and "model.<i>.bias". The features file is raw little-endian float32 in
// row-major order, as NumPy writes it with features.astype(np.float32).tofile(path); its
// number of columns is the first layer's in_features (64 for the 8x8 digits), so the number
// of rows follows from the file size. One line per row is printed: the predicted class, a
// tab, then the logits. With a third argument the logits and predictions are also saved there
// as a safetensors file, which Python reads with kiln.load.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "runtime/safetensors.h"
#include "ops/copy.h"
#include "ops/creation.h"
#include "ops/nn_functional.h"
#include "ops/reduce.h"
#include "ops/unary.h"

namespace {

struct Linear {
  kiln::Tensor weight, bias;
};

// The Linear layers of the checkpoint's "model" state dict, in module order.
std::vector<Linear> read_layers(const kiln::SafetensorsFile& file) {
  std::map<long, Linear> by_index;
  const std::string prefix = "model.";
  for (const auto& [key, tensor] : file.tensors) {
    if (key.compare(0, prefix.size(), prefix) != 0) continue;
    size_t dot = key.find('.', prefix.size());
    if (dot == std::string::npos) continue;
    const std::string index = key.substr(prefix.size(), dot - prefix.size());
    const std::string name = key.substr(dot + 1);
    if (index.empty() || index.find_first_not_of("0123456789") != std::string::npos) continue;
    kiln::Tensor t = kiln::to_dtype(tensor, kiln::DType::Float32);
    if (name == "weight") by_index[std::stol(index)].weight = t;
    if (name == "bias") by_index[std::stol(index)].bias = t;
  }
  std::vector<Linear> layers;
  for (auto& [index, layer] : by_index) {
    KILN_CHECK(layer.weight.defined() && layer.weight.dim() == 2, Value,
               "[digits_inference] model.", index, " has no 2-d weight");
    KILN_CHECK(layers.empty() || layers.back().weight.size(0) == layer.weight.size(1), Value,
               "[digits_inference] model.", index, ".weight of shape ", layer.weight.sizes(),
               " does not take the previous layer's ", layers.back().weight.size(0), " outputs");
    layers.push_back(layer);
  }
  KILN_CHECK(!layers.empty(), Value, "[digits_inference] the checkpoint holds no model.<i>.weight");
  return layers;
}

kiln::Tensor read_features(const std::string& path, int64_t columns) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  KILN_CHECK(f.is_open(), Runtime, "[digits_inference] cannot open ", path);
  const int64_t bytes = f.tellg();
  const int64_t row_bytes = columns * static_cast<int64_t>(sizeof(float));
  KILN_CHECK(bytes % row_bytes == 0, Value, "[digits_inference] ", path, " holds ", bytes,
             " bytes, not a whole number of rows of ", columns, " float32 values");
  kiln::Tensor x = kiln::empty({bytes / row_bytes, columns}, kiln::DType::Float32);
  f.seekg(0);
  f.read(static_cast<char*>(x.data_ptr()), bytes);
  KILN_CHECK(f.good(), Runtime, "[digits_inference] reading ", path, " failed");
  return x;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 && argc != 4) {
    std::cerr << "usage: " << argv[0]
              << " CHECKPOINT.safetensors FEATURES.f32 [PREDICTIONS.safetensors]\n";
    return 2;
  }
  try {
    const std::vector<Linear> layers = read_layers(kiln::load_safetensors(argv[1]));
    kiln::Tensor h = read_features(argv[2], layers.front().weight.size(1));
    for (size_t i = 0; i < layers.size(); ++i) {
      const Linear& l = layers[i];
      h = kiln::linear(h, l.weight,
                       l.bias.defined() ? std::optional<kiln::Tensor>(l.bias) : std::nullopt);
      if (i + 1 < layers.size()) h = kiln::relu(h);
    }
    const kiln::Tensor logits = kiln::contiguous(h);
    const kiln::Tensor predictions = kiln::argmax(logits, 1);
    for (int64_t r = 0; r < logits.size(0); ++r) {
      std::printf("%lld\t", static_cast<long long>(predictions.data<int64_t>()[r]));
      for (int64_t c = 0; c < logits.size(1); ++c)
        std::printf(c ? " %.9g" : "%.9g", logits.data<float>()[r * logits.size(1) + c]);
      std::printf("\n");
    }
    if (argc == 4)
      kiln::save_safetensors(argv[3], {{"logits", logits}, {"predictions", predictions}},
                             R"({"producer":"examples/cpp/digits_inference"})");
  } catch (const kiln::Error& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
  return 0;
}
