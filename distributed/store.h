// The rendezvous key-value store processes of one job meet through (PyTorch's c10d Store):
// rank 0 hosts a TCPStore server, every rank is a client. Process groups exchange their
// bootstrap data through it (NCCL's unique id, Gloo's addresses), the launcher and
// init_process_group count ranks in with it, and a rank that fails writes its error there so
// the others can name it instead of hanging.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kiln::distributed {

using Bytes = std::vector<uint8_t>;
using Millis = std::chrono::milliseconds;

// Every wait is bounded by the store's timeout; running out raises a kiln Error
// (ErrorKind::Runtime, "[store] ... timed out after N ms waiting for keys [...]"), never hangs.
class Store {
 public:
  explicit Store(Millis timeout) : timeout_(timeout) {}
  virtual ~Store() = default;

  virtual void set(const std::string& key, const Bytes& value) = 0;
  // Waits (up to timeout()) for the key to exist, then returns its value.
  virtual Bytes get(const std::string& key) = 0;
  // Atomically adds delta to the integer stored at key (missing counts as 0); returns the sum.
  // The value is stored as decimal text, as PyTorch does, so get() reads it back as "3".
  virtual int64_t add(const std::string& key, int64_t delta) = 0;
  // Sets key to desired if its current value is expected (a missing key matches an empty
  // expected); returns the value after the call.
  virtual Bytes compare_set(const std::string& key, const Bytes& expected,
                            const Bytes& desired) = 0;
  // True when every key exists, without waiting.
  virtual bool check(const std::vector<std::string>& keys) = 0;
  // Waits until every key exists, up to `timeout` (timeout() when negative).
  virtual void wait(const std::vector<std::string>& keys, Millis timeout = Millis(-1)) = 0;
  virtual bool delete_key(const std::string& key) = 0;
  virtual int64_t num_keys() = 0;

  Millis timeout() const { return timeout_; }
  void set_timeout(Millis timeout) { timeout_ = timeout; }

 protected:
  Millis timeout_;
};

// An in-process store (threads of one process share it): for tests and world_size 1.
std::shared_ptr<Store> make_hash_store(Millis timeout = Millis(300000));

// Keys of `inner` under "<prefix>/": groups and retries keep their bootstrap keys apart.
std::shared_ptr<Store> make_prefix_store(const std::string& prefix, std::shared_ptr<Store> inner);

struct TCPStoreOptions {
  std::string host = "127.0.0.1";
  int port = 29500;  // 0 with is_master: pick a free port (see tcp_store_port)
  bool is_master = false;
  // With is_master, the constructor waits for this many clients (itself included) to connect
  // when wait_for_workers is set; -1: don't wait.
  int64_t world_size = -1;
  bool wait_for_workers = true;
  Millis timeout = Millis(300000);
};

// The master runs the server on a background thread and is also a client of it. A client
// retries connecting until the timeout, then fails naming host:port.
std::shared_ptr<Store> make_tcp_store(const TCPStoreOptions& options);
// The port a TCPStore listens on / connected to (the chosen one when created with port 0).
int tcp_store_port(const Store& store);

}  // namespace kiln::distributed
