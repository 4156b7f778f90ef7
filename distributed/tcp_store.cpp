// Note [TCPStore design]
// The master (rank 0) runs one server thread: a poll() loop over the listening socket, every
// client connection and a self-pipe that the destructor writes to stop it. The store's data
// lives only on that thread, so it needs no lock. A get/wait whose keys are missing is parked
// as a waiter with a deadline; each write answers the waiters it completes and the poll
// timeout is the nearest deadline, so a parked request ends either with its keys or with a
// timeout reply naming the missing ones, and the server never sleeps on one client.
//
// Wire format (both ends are kiln on the same architecture, so integers are native-endian):
// every message is a u32 byte count followed by the body; request bodies start with a Cmd
// byte, replies with a Status byte; fields are i64 or u32-length-prefixed byte strings. The
// first request on a connection is Hello with a magic number, so a stray client (a port
// scanner, a PyTorch TCPStore) is dropped instead of being misparsed.
//
// A client TCPStore keeps a small pool of connections: one request is in flight per
// connection, and a thread blocked in get() would otherwise stall another thread's set() of
// the very key it waits for. Only the first connection counts as a worker for
// wait_for_workers. A client's read of a reply is bounded too (the request's own timeout plus
// a margin), and a closed connection fails at once naming the master, so a dead rank 0 makes
// every other rank fail fast instead of hanging.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <list>
#include <map>
#include <thread>

#include "core/error.h"
#include "distributed/store_protocol.h"
#include "distributed/stores.h"

namespace kiln::distributed {
namespace {

using Clock = std::chrono::steady_clock;
using store_protocol::Cmd;
using store_protocol::kMagic;
using store_protocol::kMaxMessage;
using store_protocol::Reader;
using store_protocol::Request;
using store_protocol::Status;
using store_protocol::Writer;
// How much longer than a request's own timeout a client waits for the server's reply.
constexpr Millis kReplyMargin(10000);

std::string errno_text(int err) { return std::strerror(err); }

// Deadlines far in the future (a timedelta.max timeout) must not overflow the clock.
Clock::time_point deadline_after(Millis timeout) {
  constexpr Millis kYear(365LL * 24 * 3600 * 1000);
  return Clock::now() + std::min(std::max(timeout, Millis(0)), kYear);
}

int ms_until(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<Millis>(deadline - Clock::now()).count() + 1;
  return static_cast<int>(std::clamp<int64_t>(left, 0, 1 << 30));
}

bool send_all(int fd, const Bytes& data) {
  size_t sent = 0;
  while (sent < data.size()) {
    ssize_t n = ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  return true;
}

// --- server --------------------------------------------------------------------------------

class Server {
 public:
  explicit Server(int port);
  ~Server();
  int port() const { return port_; }
  // Blocks until `count` workers said hello or `timeout` passed; returns how many did.
  int64_t wait_for_workers(int64_t count, Millis timeout);

 private:
  struct Waiter {
    int fd;
    Cmd cmd;
    std::vector<std::string> keys;
    Clock::time_point deadline;
  };

  void loop();
  void accept_client();
  // Reads what arrived and handles each complete message; false when the client is gone.
  bool read_client(int fd, Bytes& in);
  bool handle(int fd, Request& q);
  bool reply(int fd, Writer& w) { return send_all(fd, w.frame()); }
  bool all_present(const std::vector<std::string>& keys) const;
  // Answers a waiter whose keys all exist.
  void complete(const Waiter& w);
  void serve_waiters();
  void expire_waiters();

  int listen_fd_ = -1;
  int wake_[2] = {-1, -1};
  int port_ = 0;
  struct Client {
    Bytes in;  // received but not yet handled
    bool said_hello = false;
  };
  std::map<int, Client> clients_;  // by fd
  std::list<Waiter> waiters_;
  std::unordered_map<std::string, Bytes> data_;
  std::mutex workers_mu_;
  std::condition_variable workers_cv_;
  int64_t workers_ = 0;
  std::thread thread_;
};

Server::Server(int port) {
  // Dual-stack where IPv6 exists, so clients reach it through either family; else IPv4.
  int fd = ::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1, zero = 0;
  bool bound = false;
  int err = 0;
  if (fd >= 0) {
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
    sockaddr_in6 addr{};
    addr.sin6_family = AF_INET6;
    addr.sin6_addr = in6addr_any;
    addr.sin6_port = htons(static_cast<uint16_t>(port));
    bound = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    if (!bound) err = errno, ::close(fd);
  }
  if (!bound && err != EADDRINUSE) {
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    KILN_CHECK(fd >= 0, Runtime, "[TCPStore] cannot create a socket: ", errno_text(errno));
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    bound = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    if (!bound) err = errno, ::close(fd);
  }
  KILN_CHECK(bound, Runtime, "[TCPStore] the master cannot listen on port ", port, ": ",
             errno_text(err),
             err == EADDRINUSE ? " (another job or an earlier run still uses it: pick another "
                                 "MASTER_PORT or port 0)"
                               : "");
  if (::listen(fd, 1024) != 0) {
    err = errno;
    ::close(fd);
    fail(ErrorKind::Runtime, "[TCPStore] listen on port ", port, " failed: ", errno_text(err));
  }
  sockaddr_storage local{};
  socklen_t len = sizeof(local);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len);
  port_ = ntohs(local.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&local)->sin6_port
                                            : reinterpret_cast<sockaddr_in*>(&local)->sin_port);
  listen_fd_ = fd;
  if (::pipe2(wake_, O_CLOEXEC) != 0) {
    ::close(listen_fd_);
    fail(ErrorKind::Runtime, "[TCPStore] pipe failed: ", errno_text(errno));
  }
  thread_ = std::thread([this] { loop(); });
}

Server::~Server() {
  char c = 0;
  while (::write(wake_[1], &c, 1) < 0 && errno == EINTR) {
  }
  thread_.join();
  for (auto& [fd, client] : clients_) ::close(fd);
  ::close(listen_fd_);
  ::close(wake_[0]);
  ::close(wake_[1]);
}

int64_t Server::wait_for_workers(int64_t count, Millis timeout) {
  std::unique_lock<std::mutex> lock(workers_mu_);
  workers_cv_.wait_until(lock, deadline_after(timeout), [&] { return workers_ >= count; });
  return workers_;
}

void Server::loop() {
  std::vector<pollfd> fds;
  while (true) {
    fds.clear();
    fds.push_back({wake_[0], POLLIN, 0});
    fds.push_back({listen_fd_, POLLIN, 0});
    for (auto& [fd, client] : clients_) fds.push_back({fd, POLLIN, 0});
    int timeout = -1;
    for (const auto& w : waiters_) {
      int left = ms_until(w.deadline);
      timeout = timeout < 0 ? left : std::min(timeout, left);
    }
    int n = ::poll(fds.data(), fds.size(), timeout);
    if (n < 0 && errno != EINTR) return;
    if (n > 0) {
      if (fds[0].revents) return;
      if (fds[1].revents & POLLIN) accept_client();
      for (size_t i = 2; i < fds.size(); ++i) {
        if (!fds[i].revents) continue;
        int fd = fds[i].fd;
        if (!read_client(fd, clients_[fd].in)) {
          ::close(fd);
          clients_.erase(fd);
          waiters_.remove_if([fd](const Waiter& w) { return w.fd == fd; });
        }
      }
    }
    expire_waiters();
  }
}

void Server::accept_client() {
  int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
  if (fd < 0) return;
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  // A client that stops reading must not stall the server forever.
  timeval tv{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  clients_[fd];
}

bool Server::read_client(int fd, Bytes& in) {
  uint8_t chunk[65536];
  ssize_t n = ::recv(fd, chunk, sizeof(chunk), MSG_DONTWAIT);
  if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
  if (n == 0) return false;
  in.insert(in.end(), chunk, chunk + n);
  return store_protocol::split_frames(in, [&](const uint8_t* body, size_t len) {
    std::optional<Request> q = store_protocol::decode_request(body, len);
    return q && handle(fd, *q);
  });
}

bool Server::all_present(const std::vector<std::string>& keys) const {
  return std::all_of(keys.begin(), keys.end(), [&](const auto& k) { return data_.count(k); });
}

bool Server::handle(int fd, Request& q) {
  if (!clients_[fd].said_hello) {
    if (q.cmd != Cmd::Hello || q.magic != kMagic) return false;
    clients_[fd].said_hello = true;
    if (q.counted) {
      std::lock_guard<std::mutex> lock(workers_mu_);
      ++workers_;
      workers_cv_.notify_all();
    }
    Writer ok(uint8_t(Status::Ok));
    return reply(fd, ok);
  }
  Writer ok(uint8_t(Status::Ok));
  switch (q.cmd) {
    case Cmd::Set:
      data_[q.key] = std::move(q.value);
      serve_waiters();
      return reply(fd, ok);
    case Cmd::Get:
    case Cmd::Wait: {
      Waiter w{fd, q.cmd, std::move(q.keys), deadline_after(Millis(q.timeout_ms))};
      if (all_present(w.keys)) {
        complete(w);
      } else {
        waiters_.push_back(std::move(w));
      }
      return true;
    }
    case Cmd::Add: {
      auto it = data_.find(q.key);
      std::string error;
      int64_t sum = add_counter(q.key, it == data_.end() ? nullptr : &it->second, q.delta, &error);
      if (!error.empty()) {
        Writer w(uint8_t(Status::Error));
        return reply(fd, w.str(error));
      }
      std::string text = std::to_string(sum);
      data_[q.key] = Bytes(text.begin(), text.end());
      serve_waiters();
      return reply(fd, ok.i64(sum));
    }
    case Cmd::CompareSet: {
      auto it = data_.find(q.key);
      if (it == data_.end() && !q.expected.empty()) return reply(fd, ok.bytes(q.expected));
      if (it != data_.end() && it->second != q.expected) return reply(fd, ok.bytes(it->second));
      data_[q.key] = q.desired;
      serve_waiters();
      return reply(fd, ok.bytes(q.desired));
    }
    case Cmd::Check:
      return reply(fd, ok.i64(all_present(q.keys)));
    case Cmd::Delete:
      return reply(fd, ok.i64(data_.erase(q.key) > 0));
    case Cmd::NumKeys:
      return reply(fd, ok.i64(static_cast<int64_t>(data_.size())));
    case Cmd::Hello:
      break;
  }
  return false;
}

void Server::complete(const Waiter& w) {
  Writer ok(uint8_t(Status::Ok));
  if (w.cmd == Cmd::Get) ok.bytes(data_.at(w.keys[0]));
  // A failed send surfaces as a hang-up on the next poll, which drops the client.
  reply(w.fd, ok);
}

void Server::serve_waiters() {
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    if (all_present(it->keys)) {
      complete(*it);
      it = waiters_.erase(it);
    } else {
      ++it;
    }
  }
}

void Server::expire_waiters() {
  auto now = Clock::now();
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    if (it->deadline > now) {
      ++it;
      continue;
    }
    std::vector<std::string> missing;
    for (const auto& k : it->keys)
      if (!data_.count(k)) missing.push_back(k);
    Writer w(uint8_t(Status::Timeout));
    w.i64(static_cast<int64_t>(missing.size()));
    for (const auto& k : missing) w.str(k);
    reply(it->fd, w);
    it = waiters_.erase(it);
  }
}

// --- client --------------------------------------------------------------------------------

// One connection to the server; not thread-safe (the store hands each to one caller at a time).
class Connection {
 public:
  // `master_seen`: this store reached the master before, so a refused connection means the
  // master has exited (nothing listens on its port any more) and is not retried; before
  // that, refusals are retried until `timeout` because the master may start after us.
  Connection(const std::string& host, int port, Millis timeout, bool counted,
             bool master_seen = false);
  ~Connection() { ::close(fd_); }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Sends `request` and returns the reply body (status byte first), waiting for it until
  // `deadline`. `what` names the operation in errors.
  Bytes call(Writer& request, Clock::time_point deadline, const std::string& what);

 private:
  void receive(uint8_t* out, size_t n, Clock::time_point deadline, const std::string& what);
  std::string where() const { return host_ + ":" + std::to_string(port_); }

  std::string host_;
  int port_;
  int fd_ = -1;
};

// Tries every address of host:port once; returns a connected blocking socket or -1 (*err set,
// *refused true when every address refused the connection).
int try_connect(const std::string& host, int port, Clock::time_point deadline, std::string* err,
                bool* refused) {
  *refused = false;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
  if (rc != 0) {
    *err = std::string("cannot resolve host: ") + ::gai_strerror(rc);
    return -1;
  }
  int result = -1;
  bool all_refused = true;
  for (addrinfo* a = found; a && result < 0; a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) continue;
    int r = ::connect(fd, a->ai_addr, a->ai_addrlen);
    if (r != 0 && errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      int ready = ::poll(&p, 1, ms_until(deadline));
      int so_error = ETIMEDOUT;
      socklen_t len = sizeof(so_error);
      if (ready > 0) ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &so_error, &len);
      r = so_error == 0 ? 0 : -1;
      errno = so_error;
    }
    if (r == 0) {
      ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      result = fd;
    } else {
      all_refused = all_refused && errno == ECONNREFUSED;
      *err = errno_text(errno);
      ::close(fd);
    }
  }
  ::freeaddrinfo(found);
  *refused = result < 0 && all_refused;
  return result;
}

Connection::Connection(const std::string& host, int port, Millis timeout, bool counted,
                       bool master_seen)
    : host_(host), port_(port) {
  auto deadline = deadline_after(timeout);
  std::string err = "no address";
  auto backoff = Millis(10);
  bool refused = false;
  // The master may start after its clients: refused connections are retried until the timeout.
  while ((fd_ = try_connect(host, port, deadline, &err, &refused)) < 0 &&
         Clock::now() < deadline) {
    KILN_CHECK(!(refused && master_seen), Runtime, "[TCPStore] the store at ", where(),
               " refused a new connection: its master (rank 0) has exited or failed");
    std::this_thread::sleep_for(std::min<Millis>(backoff, Millis(ms_until(deadline))));
    backoff = std::min(backoff * 2, Millis(500));
  }
  KILN_CHECK(fd_ >= 0, Runtime, "[TCPStore] could not connect to the store at ", where(),
             " within ", timeout.count(), " ms (last error: ", err,
             "); is the master (rank 0) running, and are MASTER_ADDR/MASTER_PORT right?");
  try {
    Writer hello(uint8_t(Cmd::Hello));
    hello.i64(kMagic).u8(counted);
    call(hello, deadline, "connect");
  } catch (...) {
    ::close(fd_);
    throw;
  }
}

void Connection::receive(uint8_t* out, size_t n, Clock::time_point deadline,
                         const std::string& what) {
  size_t got = 0;
  while (got < n) {
    pollfd p{fd_, POLLIN, 0};
    int ready = ::poll(&p, 1, ms_until(deadline));
    if (ready < 0 && errno == EINTR) continue;
    KILN_CHECK(ready > 0, Runtime, "[TCPStore] ", what, ": no reply from the store at ", where(),
               " in time (is the master (rank 0) stuck?)");
    ssize_t r = ::recv(fd_, out + got, n - got, 0);
    if (r < 0 && errno == EINTR) continue;
    KILN_CHECK(r > 0, Runtime, "[TCPStore] ", what, ": the connection to the store at ", where(),
               " was closed (did the master, rank 0, exit or fail?)",
               r < 0 ? ": " + errno_text(errno) : std::string());
    got += static_cast<size_t>(r);
  }
}

Bytes Connection::call(Writer& request, Clock::time_point deadline, const std::string& what) {
  KILN_CHECK(send_all(fd_, request.frame()), Runtime, "[TCPStore] ", what,
             ": sending to the store at ", where(), " failed: ", errno_text(errno),
             " (did the master, rank 0, exit?)");
  uint32_t len = 0;
  receive(reinterpret_cast<uint8_t*>(&len), 4, deadline, what);
  KILN_CHECK(len >= 1 && len <= kMaxMessage, Runtime, "[TCPStore] ", what,
             ": malformed reply from the store at ", where());
  Bytes body(len);
  receive(body.data(), len, deadline, what);
  return body;
}

}  // namespace

// --- TCPStore ------------------------------------------------------------------------------

struct TCPStore::Impl {
  std::string host;
  int port = 0;
  std::unique_ptr<Server> server;  // declared first: destroyed after the connections
  std::mutex pool_mu;
  std::vector<std::unique_ptr<Connection>> idle;

  std::string where() const { return host + ":" + std::to_string(port); }

  // Sends one request on an idle (or new) connection and returns the reply after its status
  // byte; a Timeout or Error reply becomes an error naming `what`, `keys` and `wait`.
  Bytes request(Writer& w, Millis wait, Millis store_timeout, const std::string& what,
                const std::vector<std::string>& keys, Cmd cmd);
};

Bytes TCPStore::Impl::request(Writer& w, Millis wait, Millis store_timeout, const std::string& what,
                              const std::vector<std::string>& keys, Cmd cmd) {
  std::unique_ptr<Connection> conn;
  {
    std::lock_guard<std::mutex> lock(pool_mu);
    if (!idle.empty()) conn = std::move(idle.back()), idle.pop_back();
  }
  if (!conn)
    conn = std::make_unique<Connection>(server ? "127.0.0.1" : host, port, store_timeout, false,
                                        /*master_seen=*/true);
  bool blocking = cmd == Cmd::Get || cmd == Cmd::Wait;
  Bytes body =
      conn->call(w, deadline_after((blocking ? wait : store_timeout) + kReplyMargin), what);
  {
    std::lock_guard<std::mutex> lock(pool_mu);
    idle.push_back(std::move(conn));
  }
  Reader r(body.data(), body.size());
  auto status = static_cast<Status>(r.u8());
  if (status == Status::Timeout) {
    std::vector<std::string> missing;
    int64_t n = r.i64();
    for (int64_t i = 0; i < n && !r.bad(); ++i) missing.push_back(r.str());
    fail(ErrorKind::Runtime, "[TCPStore] ", what, ": timed out after ", wait.count(),
         " ms waiting for keys ", format_keys(keys), " (missing: ", format_keys(missing),
         ") in the store at ", where());
  }
  if (status == Status::Error)
    fail(ErrorKind::Runtime, "[TCPStore] ", r.str(), " (store at ", where(), ")");
  return Bytes(body.begin() + 1, body.end());
}

TCPStore::TCPStore(const TCPStoreOptions& options)
    : Store(options.timeout), impl_(std::make_unique<Impl>()) {
  KILN_CHECK(options.port >= 0 && options.port <= 65535, Value, "[TCPStore] port ", options.port,
             " is out of range [0, 65535]");
  KILN_CHECK(options.is_master || options.port != 0, Value,
             "[TCPStore] a client needs the master's port; port 0 (pick a free one) is only "
             "valid with is_master=True");
  impl_->host = options.host;
  impl_->port = options.port;
  if (options.is_master) {
    impl_->server = std::make_unique<Server>(options.port);
    impl_->port = impl_->server->port();
  }
  // The master's own client reaches its server over loopback whatever host names it.
  impl_->idle.push_back(std::make_unique<Connection>(options.is_master ? "127.0.0.1" : options.host,
                                                     impl_->port, options.timeout, true));
  if (options.is_master && options.wait_for_workers && options.world_size > 0) {
    int64_t seen = impl_->server->wait_for_workers(options.world_size, options.timeout);
    KILN_CHECK(seen >= options.world_size, Runtime, "[TCPStore] timed out after ",
               options.timeout.count(), " ms waiting for world_size=", options.world_size,
               " clients to connect to the master at ", impl_->where(), ": ", seen,
               " connected (did some ranks not start, or use another MASTER_ADDR/MASTER_PORT?)");
  }
}

TCPStore::~TCPStore() = default;

const std::string& TCPStore::host() const { return impl_->host; }
int TCPStore::port() const { return impl_->port; }

void TCPStore::set(const std::string& key, const Bytes& value) {
  Writer w(uint8_t(Cmd::Set));
  w.str(key).bytes(value);
  impl_->request(w, timeout_, timeout_, "set('" + key + "')", {key}, Cmd::Set);
}

Bytes TCPStore::get(const std::string& key) {
  Writer w(uint8_t(Cmd::Get));
  w.i64(timeout_.count()).i64(1).str(key);
  Bytes body = impl_->request(w, timeout_, timeout_, "get('" + key + "')", {key}, Cmd::Get);
  Reader r(body.data(), body.size());
  return r.bytes();
}

int64_t TCPStore::add(const std::string& key, int64_t delta) {
  Writer w(uint8_t(Cmd::Add));
  w.str(key).i64(delta);
  Bytes body = impl_->request(w, timeout_, timeout_, "add('" + key + "')", {key}, Cmd::Add);
  return Reader(body.data(), body.size()).i64();
}

Bytes TCPStore::compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) {
  Writer w(uint8_t(Cmd::CompareSet));
  w.str(key).bytes(expected).bytes(desired);
  Bytes body =
      impl_->request(w, timeout_, timeout_, "compare_set('" + key + "')", {key}, Cmd::CompareSet);
  return Reader(body.data(), body.size()).bytes();
}

bool TCPStore::check(const std::vector<std::string>& keys) {
  Writer w(uint8_t(Cmd::Check));
  w.i64(static_cast<int64_t>(keys.size()));
  for (const auto& k : keys) w.str(k);
  Bytes body = impl_->request(w, timeout_, timeout_, "check", keys, Cmd::Check);
  return Reader(body.data(), body.size()).i64() != 0;
}

void TCPStore::wait(const std::vector<std::string>& keys, Millis timeout) {
  if (timeout.count() < 0) timeout = timeout_;
  Writer w(uint8_t(Cmd::Wait));
  w.i64(timeout.count()).i64(static_cast<int64_t>(keys.size()));
  for (const auto& k : keys) w.str(k);
  impl_->request(w, timeout, timeout_, "wait", keys, Cmd::Wait);
}

bool TCPStore::delete_key(const std::string& key) {
  Writer w(uint8_t(Cmd::Delete));
  w.str(key);
  Bytes body =
      impl_->request(w, timeout_, timeout_, "delete_key('" + key + "')", {key}, Cmd::Delete);
  return Reader(body.data(), body.size()).i64() != 0;
}

int64_t TCPStore::num_keys() {
  Writer w(uint8_t(Cmd::NumKeys));
  Bytes body = impl_->request(w, timeout_, timeout_, "num_keys", {}, Cmd::NumKeys);
  return Reader(body.data(), body.size()).i64();
}

}  // namespace kiln::distributed
