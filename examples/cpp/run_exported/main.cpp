// Runs a model exported from Python with kiln.export.save, with no Python and no model code.
//
//   run_exported MODEL.kiln INPUTS.safetensors [--device cuda:0] [--out OUTPUTS.safetensors]
//                [--repeat N] [--threads T]
//
// INPUTS holds one tensor per program input, named like the input (the names the export
// gave: the forward's parameter names). The program's outputs are printed (shape and first
// values) with the median and mean latency of N runs, each timed until its results are
// ready; --out saves them as "output0", "output1", ... (a
// safetensors file kiln.load reads). --threads T runs the one loaded program from T threads at
// once, N times each, and exits 1 unless every thread's outputs equal the single-threaded ones.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "runtime/safetensors.h"
#include "ops/binary.h"
#include "ops/copy.h"
#include "ops/reduce.h"
#include "runtime/program.h"

#ifdef KILN_WITH_CUDA
#include "cuda/runtime.h"
#endif

namespace {

struct Options {
  std::string model, inputs, out, device = "cpu";
  int repeat = 1, threads = 0;
};

Options parse(int argc, char** argv) {
  Options o;
  std::vector<std::string> positional;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::runtime_error("missing value after " + a);
      return argv[++i];
    };
    if (a == "--device") {
      o.device = value();
    } else if (a == "--out") {
      o.out = value();
    } else if (a == "--repeat") {
      o.repeat = std::max(1, std::atoi(value().c_str()));
    } else if (a == "--threads") {
      o.threads = std::max(0, std::atoi(value().c_str()));
    } else {
      positional.push_back(a);
    }
  }
  if (positional.size() != 2)
    throw std::runtime_error(
        "usage: run_exported MODEL.kiln INPUTS.safetensors [--device D] [--out F] [--repeat N] "
        "[--threads T]");
  o.model = positional[0];
  o.inputs = positional[1];
  return o;
}

void synchronize(kiln::Device d) {
#ifdef KILN_WITH_CUDA
  if (d.is_cuda()) kiln::cuda::synchronize(d.index < 0 ? 0 : d.index);
#endif
  (void)d;
}

bool same(const std::vector<kiln::Tensor>& a, const std::vector<kiln::Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t k = 0; k < a.size(); ++k)
    if (!kiln::equal(kiln::to_device(a[k], kiln::Device()), kiln::to_device(b[k], kiln::Device())))
      return false;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options o = parse(argc, argv);
    const kiln::Device device(o.device);
    kiln::runtime::Program program = kiln::runtime::Program::load(o.model, device);
    kiln::SafetensorsFile file = kiln::load_safetensors(o.inputs);
    std::vector<kiln::Tensor> inputs;
    for (const std::string& name : program.input_names()) {
      auto it = file.tensors.find(name);
      if (it == file.tensors.end())
        throw std::runtime_error(o.inputs + " has no tensor '" + name + "'");
      inputs.push_back(kiln::to_device(it->second, device));
    }

    std::vector<kiln::Tensor> outputs = program.run(inputs);  // also the warm-up
    synchronize(device);
    // Each run is timed on its own, up to its results being ready (the latency a caller
    // sees); the median is robust to the odd slow run, the mean shows the tail.
    std::vector<double> run_ms;
    for (int r = 0; r < o.repeat; ++r) {
      auto start = std::chrono::steady_clock::now();
      outputs = program.run(inputs);
      synchronize(device);
      run_ms.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
              .count());
    }
    const double mean = std::accumulate(run_ms.begin(), run_ms.end(), 0.0) / o.repeat;
    std::nth_element(run_ms.begin(), run_ms.begin() + o.repeat / 2, run_ms.end());
    const double median = run_ms[static_cast<size_t>(o.repeat / 2)];

    std::map<std::string, kiln::Tensor> saved;
    for (size_t k = 0; k < outputs.size(); ++k) {
      kiln::Tensor host = kiln::to_device(outputs[k], kiln::Device());
      std::cout << "output" << k << ": " << host.dtype() << " " << host.sizes() << "\n";
      saved["output" + std::to_string(k)] = host;
    }
    std::cout << "latency: " << median << " ms median, " << mean << " ms mean per run on " << device
              << " (" << o.repeat << " runs)\n";
    if (!o.out.empty()) kiln::save_safetensors(o.out, saved);

    if (o.threads > 0) {
      std::vector<int> ok(static_cast<size_t>(o.threads), 1);
      std::vector<std::thread> pool;
      for (int t = 0; t < o.threads; ++t)
        pool.emplace_back([&, t] {
          try {
            for (int r = 0; r < o.repeat; ++r)
              if (!same(program.run(inputs), outputs)) ok[static_cast<size_t>(t)] = 0;
          } catch (const std::exception& e) {
            std::cerr << "thread " << t << ": " << e.what() << "\n";
            ok[static_cast<size_t>(t)] = 0;
          }
        });
      for (auto& th : pool) th.join();
      for (int t = 0; t < o.threads; ++t)
        if (!ok[static_cast<size_t>(t)]) {
          std::cerr << "thread " << t << " computed different outputs\n";
          return 1;
        }
      std::cout << o.threads << " threads x " << o.repeat << " runs: same outputs\n";
    }
  } catch (const std::exception& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
  return 0;
}
