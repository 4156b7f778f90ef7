#include "ops/generator.h"

#include <algorithm>
#include <map>
#include <optional>
#include <random>

#include "core/error.h"
#include "core/graph_capture.h"
#include "ops/philox_capture.h"

namespace kiln {

Generator::Generator(Device device, uint64_t seed) : device_(device), seed_(seed) {}

void Generator::manual_seed(uint64_t seed) {
  std::lock_guard<std::mutex> lock(mutex_);
  seed_ = seed;
  offset_ = 0;
}

uint64_t Generator::seed() {
  std::random_device rd;
  const uint64_t s = (uint64_t{rd()} << 32) ^ rd();
  manual_seed(s);
  return s;
}

uint64_t Generator::initial_seed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return seed_;
}

PhiloxState Generator::reserve(uint64_t n) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (capture_base_) {
    PhiloxState s = relative_philox(capture_base_, capture_offset_);
    capture_offset_ += n;
    return s;
  }
  // A generator the capturing graph does not know would hand the graph fixed counters: every
  // replay would draw the same numbers.
  KILN_CHECK(!device_.is_cuda() || !graph_capture_underway(device_.index < 0 ? 0 : device_.index),
             Runtime, "[Generator] a random op drew from a generator on ", device_,
             " that the capturing CUDA graph does not know; register it first with "
             "CUDAGraph.register_generator_state(generator)");
  PhiloxState s{seed_, offset_};
  offset_ += n;
  return s;
}

void Generator::begin_capture(const uint64_t* base, uint64_t offset) {
  std::lock_guard<std::mutex> lock(mutex_);
  KILN_CHECK(!capture_base_, Runtime, "[CUDAGraph.capture_begin] the generator on ", device_,
             " is already registered with a graph that is capturing");
  capture_base_ = base;
  capture_offset_ = offset;
}

uint64_t Generator::end_capture() {
  std::lock_guard<std::mutex> lock(mutex_);
  capture_base_ = nullptr;
  return capture_offset_;
}

PhiloxState Generator::replay_state(uint64_t increment) {
  std::lock_guard<std::mutex> lock(mutex_);
  PhiloxState s{seed_, offset_};
  offset_ += increment;
  return s;
}

bool Generator::capturing() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return capture_base_ != nullptr;
}

std::vector<uint8_t> Generator::get_state() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<uint8_t> out(16);
  for (int i = 0; i < 8; ++i) {
    out[i] = static_cast<uint8_t>(seed_ >> (8 * i));
    out[8 + i] = static_cast<uint8_t>(offset_ >> (8 * i));
  }
  return out;
}

void Generator::set_state(const std::vector<uint8_t>& state) {
  KILN_CHECK(state.size() == 16, Runtime, "[set_state] expected a generator state of 16 bytes, "
             "got ", state.size());
  uint64_t seed = 0, offset = 0;
  for (int i = 0; i < 8; ++i) {
    seed |= uint64_t{state[i]} << (8 * i);
    offset |= uint64_t{state[8 + i]} << (8 * i);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  seed_ = seed;
  offset_ = offset;
}

namespace {

// Default generators: the CPU one plus one per CUDA device, made on first use.
struct DefaultGenerators {
  std::mutex mutex;
  GeneratorPtr cpu = std::make_shared<Generator>(Device());
  std::map<int, GeneratorPtr> cuda;
  std::optional<uint64_t> seed;  // the last manual_seed, for CUDA generators made later
};

DefaultGenerators& defaults() {
  static DefaultGenerators* d = new DefaultGenerators();  // outlives static destructors
  return *d;
}

}  // namespace

const GeneratorPtr& default_generator(Device device) {
  DefaultGenerators& d = defaults();
  if (device.is_cpu()) return d.cpu;
  std::lock_guard<std::mutex> lock(d.mutex);
  const int index = std::max<int>(device.index, 0);
  GeneratorPtr& g = d.cuda[index];
  if (!g) {
    g = std::make_shared<Generator>(Device(DeviceType::CUDA, index),
                                    d.seed.value_or(Generator::kDefaultSeed));
  }
  return g;
}

void manual_seed(uint64_t seed) {
  DefaultGenerators& d = defaults();
  d.cpu->manual_seed(seed);
  std::lock_guard<std::mutex> lock(d.mutex);
  d.seed = seed;
  for (auto& kv : d.cuda) kv.second->manual_seed(seed);
}

}  // namespace kiln
