// The concrete stores behind store.h's factories, for callers that need their type: the
// Python bindings (HashStore, PrefixStore and TCPStore are distinct Python classes) and
// tcp_store_port.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "distributed/store.h"

namespace kiln::distributed {

class HashStore final : public Store {
 public:
  explicit HashStore(Millis timeout = Millis(300000)) : Store(timeout) {}

  void set(const std::string& key, const Bytes& value) override;
  Bytes get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t delta) override;
  Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) override;
  bool check(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, Millis timeout = Millis(-1)) override;
  bool delete_key(const std::string& key) override;
  int64_t num_keys() override;

 private:
  // Waits with mu_ held (through `lock`) until every key exists; throws on timeout.
  void wait_locked(std::unique_lock<std::mutex>& lock, const std::vector<std::string>& keys,
                   Millis timeout);

  std::mutex mu_;
  std::condition_variable changed_;
  std::unordered_map<std::string, Bytes> data_;
};

// Its own timeout bounds its waits (initially the inner store's); num_keys counts every key of
// the inner store, as PyTorch's PrefixStore does.
class PrefixStore final : public Store {
 public:
  PrefixStore(std::string prefix, std::shared_ptr<Store> inner);

  void set(const std::string& key, const Bytes& value) override;
  Bytes get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t delta) override;
  Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) override;
  bool check(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, Millis timeout = Millis(-1)) override;
  bool delete_key(const std::string& key) override;
  int64_t num_keys() override;

  const std::shared_ptr<Store>& inner() const { return inner_; }
  const std::string& prefix() const { return prefix_; }

 private:
  std::string full(const std::string& key) const { return prefix_ + "/" + key; }
  std::vector<std::string> full(const std::vector<std::string>& keys) const;

  std::string prefix_;
  std::shared_ptr<Store> inner_;
};

// See Note [TCPStore design] in tcp_store.cpp.
class TCPStore final : public Store {
 public:
  explicit TCPStore(const TCPStoreOptions& options);
  ~TCPStore() override;

  void set(const std::string& key, const Bytes& value) override;
  Bytes get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t delta) override;
  Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) override;
  bool check(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, Millis timeout = Millis(-1)) override;
  bool delete_key(const std::string& key) override;
  int64_t num_keys() override;

  const std::string& host() const;
  int port() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// "['a', 'b']": how store errors list keys.
std::string format_keys(const std::vector<std::string>& keys);
// add()'s new counter: the decimal value in *current (0 when current is null) plus delta. On a
// value that is not an integer, or a sum outside int64, returns 0 and sets *error.
int64_t add_counter(const std::string& key, const Bytes* current, int64_t delta,
                    std::string* error);

}  // namespace kiln::distributed
