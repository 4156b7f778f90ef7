// Note [Rendezvous stores]
// Three stores share one interface (store.h):
//  - HashStore: a map under a mutex; waiters sleep on one condition variable that every write
//    signals, with a deadline, so a wait can only end in success or a timeout error.
//  - PrefixStore: rewrites keys to "<prefix>/<key>" and forwards; process groups and launcher
//    restarts get their own key spaces inside one TCPStore this way.
//  - TCPStore (tcp_store.cpp): the master process runs a poll() server thread; every process,
//    the master included, is a client. Blocking reads (get/wait) are parked on the server and
//    answered when the keys appear or their deadline passes, so no client polls.
// Semantics follow PyTorch's c10d stores: values are bytes, add() keeps decimal text,
// compare_set on a missing key with a non-empty expected value returns the expected value and
// stores nothing. Every failure is a kiln Error (Python RuntimeError) whose message starts with
// "[store]" or "[TCPStore]" and names the keys, the timeout and, for TCP, host:port.
#include <algorithm>
#include <chrono>
#include <utility>

#include "core/error.h"
#include "distributed/stores.h"

namespace kiln::distributed {

std::string format_keys(const std::vector<std::string>& keys) {
  std::string out = "[";
  for (size_t i = 0; i < keys.size(); ++i) out += (i ? ", '" : "'") + keys[i] + "'";
  return out + "]";
}

namespace {

// Reads add()'s decimal counter; on a non-integer value returns 0 and sets *error.
int64_t parse_counter(const std::string& key, const Bytes& value, std::string* error) {
  std::string text(value.begin(), value.end());
  size_t used = 0;
  int64_t v = 0;
  try {
    v = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (text.empty() || used != text.size()) {
    // Values are arbitrary bytes: show a printable, bounded rendering.
    std::string shown;
    for (size_t i = 0; i < value.size() && i < 40; ++i) {
      char c = static_cast<char>(value[i]);
      if (c >= 32 && c < 127 && c != '\\') {
        shown += c;
      } else {
        static const char* hex = "0123456789abcdef";
        shown += std::string("\\x") + hex[value[i] >> 4] + hex[value[i] & 15];
      }
    }
    if (value.size() > 40) shown += "...";
    *error = "add: the value of key '" + key + "' is not an integer: '" + shown + "'";
  }
  return v;
}

}  // namespace

int64_t add_counter(const std::string& key, const Bytes* current, int64_t delta,
                    std::string* error) {
  const int64_t value = current ? parse_counter(key, *current, error) : 0;
  if (!error->empty()) return 0;
  int64_t sum = 0;
  if (__builtin_add_overflow(value, delta, &sum)) {
    *error = "add: the counter of key '" + key + "' (" + std::to_string(value) + ") plus " +
             std::to_string(delta) + " overflows int64";
    return 0;
  }
  return sum;
}

namespace {

Bytes counter_bytes(int64_t v) {
  std::string s = std::to_string(v);
  return Bytes(s.begin(), s.end());
}

}  // namespace

// --- HashStore -----------------------------------------------------------------------------

void HashStore::set(const std::string& key, const Bytes& value) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    data_[key] = value;
  }
  changed_.notify_all();
}

void HashStore::wait_locked(std::unique_lock<std::mutex>& lock,
                            const std::vector<std::string>& keys, Millis timeout) {
  if (timeout.count() < 0) timeout = timeout_;
  // A timedelta.max timeout must not overflow the clock inside wait_for.
  timeout = std::min(timeout, Millis(365LL * 24 * 3600 * 1000));
  auto missing = [&] {
    std::vector<std::string> out;
    for (const auto& k : keys)
      if (!data_.count(k)) out.push_back(k);
    return out;
  };
  bool done = changed_.wait_for(lock, timeout, [&] { return missing().empty(); });
  KILN_CHECK(done, Runtime, "[store] timed out after ", timeout.count(), " ms waiting for keys ",
             format_keys(keys), " (missing: ", format_keys(missing()), ")");
}

Bytes HashStore::get(const std::string& key) {
  std::unique_lock<std::mutex> lock(mu_);
  wait_locked(lock, {key}, timeout_);
  return data_.at(key);
}

int64_t HashStore::add(const std::string& key, int64_t delta) {
  int64_t sum;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = data_.find(key);
    std::string error;
    sum = add_counter(key, it == data_.end() ? nullptr : &it->second, delta, &error);
    KILN_CHECK(error.empty(), Runtime, "[store] ", error);
    data_[key] = counter_bytes(sum);
  }
  changed_.notify_all();
  return sum;
}

Bytes HashStore::compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) {
  std::unique_lock<std::mutex> lock(mu_);
  auto it = data_.find(key);
  if (it == data_.end() && !expected.empty()) return expected;
  if (it != data_.end() && it->second != expected) return it->second;
  data_[key] = desired;
  lock.unlock();
  changed_.notify_all();
  return desired;
}

bool HashStore::check(const std::vector<std::string>& keys) {
  std::lock_guard<std::mutex> lock(mu_);
  return std::all_of(keys.begin(), keys.end(), [&](const auto& k) { return data_.count(k); });
}

void HashStore::wait(const std::vector<std::string>& keys, Millis timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  wait_locked(lock, keys, timeout);
}

bool HashStore::delete_key(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  return data_.erase(key) > 0;
}

int64_t HashStore::num_keys() {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int64_t>(data_.size());
}

// --- PrefixStore ---------------------------------------------------------------------------

PrefixStore::PrefixStore(std::string prefix, std::shared_ptr<Store> inner)
    : Store(inner ? inner->timeout() : Millis(0)),
      prefix_(std::move(prefix)),
      inner_(std::move(inner)) {
  KILN_CHECK(inner_ != nullptr, Value, "[store] PrefixStore('", prefix_,
             "'): the underlying store is None");
}

std::vector<std::string> PrefixStore::full(const std::vector<std::string>& keys) const {
  std::vector<std::string> out;
  out.reserve(keys.size());
  for (const auto& k : keys) out.push_back(full(k));
  return out;
}

void PrefixStore::set(const std::string& key, const Bytes& value) { inner_->set(full(key), value); }

Bytes PrefixStore::get(const std::string& key) {
  // Waits with this store's timeout, which may differ from the inner store's.
  inner_->wait({full(key)}, timeout_);
  return inner_->get(full(key));
}

int64_t PrefixStore::add(const std::string& key, int64_t delta) {
  return inner_->add(full(key), delta);
}

Bytes PrefixStore::compare_set(const std::string& key, const Bytes& expected,
                               const Bytes& desired) {
  return inner_->compare_set(full(key), expected, desired);
}

bool PrefixStore::check(const std::vector<std::string>& keys) { return inner_->check(full(keys)); }

void PrefixStore::wait(const std::vector<std::string>& keys, Millis timeout) {
  inner_->wait(full(keys), timeout.count() < 0 ? timeout_ : timeout);
}

bool PrefixStore::delete_key(const std::string& key) { return inner_->delete_key(full(key)); }

int64_t PrefixStore::num_keys() { return inner_->num_keys(); }

// --- factories -----------------------------------------------------------------------------

std::shared_ptr<Store> make_hash_store(Millis timeout) {
  return std::make_shared<HashStore>(timeout);
}

std::shared_ptr<Store> make_prefix_store(const std::string& prefix, std::shared_ptr<Store> inner) {
  return std::make_shared<PrefixStore>(prefix, std::move(inner));
}

std::shared_ptr<Store> make_tcp_store(const TCPStoreOptions& options) {
  return std::make_shared<TCPStore>(options);
}

int tcp_store_port(const Store& store) {
  auto* tcp = dynamic_cast<const TCPStore*>(&store);
  KILN_CHECK(tcp != nullptr, Runtime, "[TCPStore] tcp_store_port: the store is not a TCPStore");
  return tcp->port();
}

}  // namespace kiln::distributed
