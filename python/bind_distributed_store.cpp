// kiln._C._distributed stores: Store, HashStore, PrefixStore and TCPStore (distributed/store.h)
// with PyTorch's methods, plus the DistError / DistStoreError / DistNetworkError exceptions
// (RuntimeError subclasses, as in torch.distributed). Blocking calls release the GIL, so other
// Python threads (another rank's store in a test, a watchdog) keep running.
#include <pybind11/chrono.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>

#include "core/error.h"
#include "distributed/stores.h"
#include "python/bindings.h"

namespace py = pybind11;

namespace kiln::python {
namespace {

using kiln::distributed::Bytes;
using kiln::distributed::HashStore;
using kiln::distributed::Millis;
using kiln::distributed::PrefixStore;
using kiln::distributed::Store;
using kiln::distributed::TCPStore;
using kiln::distributed::TCPStoreOptions;

// Set in init_distributed_store; the module keeps them alive.
PyObject* store_error = nullptr;
PyObject* network_error = nullptr;

// Runs `f` without the GIL; a kiln Error becomes `error_type` (a DistError subclass).
template <typename F>
auto without_gil(PyObject* error_type, F&& f) -> decltype(f()) {
  try {
    py::gil_scoped_release nogil;
    return f();
  } catch (const kiln::Error& e) {
    // The GIL is back: `nogil` was destroyed when the exception left the try block.
    if (e.kind() != ErrorKind::Runtime) throw;
    PyErr_SetString(error_type, e.what());
    throw py::error_already_set();
  }
}

// PyTorch's stores take str (UTF-8) or bytes values.
Bytes to_bytes(const py::handle& value, const char* what) {
  if (py::isinstance<py::bytes>(value) || py::isinstance<py::bytearray>(value)) {
    std::string s = py::isinstance<py::bytes>(value)
                        ? value.cast<std::string>()
                        : value.cast<py::bytearray>().cast<std::string>();
    return Bytes(s.begin(), s.end());
  }
  if (py::isinstance<py::str>(value)) {
    std::string s = value.cast<std::string>();
    return Bytes(s.begin(), s.end());
  }
  throw py::type_error(std::string("[store] ") + what + ": expected str or bytes, got " +
                       py::str(py::type::of(value).attr("__name__")).cast<std::string>());
}

py::bytes to_py(const Bytes& b) {
  return py::bytes(reinterpret_cast<const char*>(b.data()), b.size());
}

py::object new_error(py::module_& m, const char* name, PyObject* base, const char* doc) {
  std::string qualified = std::string("kiln.distributed.") + name;
  auto type = py::reinterpret_steal<py::object>(
      PyErr_NewExceptionWithDoc(qualified.c_str(), doc, base, nullptr));
  if (!type) throw py::error_already_set();
  m.attr(name) = type;
  return type;
}

}  // namespace

void init_distributed_store(py::module_& m) {
  // The submodule both distributed binding files add to.
  py::module_ d = m.def_submodule("_distributed", "kiln.distributed's C++ core");

  py::object dist_error = new_error(d, "DistError", PyExc_RuntimeError,
                                    "A failure of kiln.distributed (a RuntimeError).");
  store_error = new_error(d, "DistStoreError", dist_error.ptr(),
                          "A rendezvous store operation failed or timed out.")
                    .release()
                    .ptr();
  network_error = new_error(d, "DistNetworkError", dist_error.ptr(),
                            "Connecting to or listening for the rendezvous store failed.")
                      .release()
                      .ptr();

  py::class_<Store, std::shared_ptr<Store>>(d, "Store",
                                            "A key-value store that ranks meet through.")
      .def(
          "set",
          [](Store& s, const std::string& key, py::object value) {
            Bytes v = to_bytes(value, "set");
            without_gil(store_error, [&] { s.set(key, v); });
          },
          py::arg("key"), py::arg("value"))
      .def(
          "get",
          [](Store& s, const std::string& key) {
            return to_py(without_gil(store_error, [&] { return s.get(key); }));
          },
          py::arg("key"), "Waits (up to the store's timeout) for key, then returns its bytes.")
      .def(
          "add",
          [](Store& s, const std::string& key, int64_t amount) {
            return without_gil(store_error, [&] { return s.add(key, amount); });
          },
          py::arg("key"), py::arg("amount"))
      .def(
          "compare_set",
          [](Store& s, const std::string& key, py::object expected, py::object desired) {
            Bytes e = to_bytes(expected, "compare_set"), v = to_bytes(desired, "compare_set");
            return to_py(without_gil(store_error, [&] { return s.compare_set(key, e, v); }));
          },
          py::arg("key"), py::arg("expected_value"), py::arg("desired_value"))
      .def(
          "check",
          [](Store& s, const std::vector<std::string>& keys) {
            return without_gil(store_error, [&] { return s.check(keys); });
          },
          py::arg("keys"))
      .def(
          "wait",
          [](Store& s, const std::vector<std::string>& keys, std::optional<Millis> timeout) {
            without_gil(store_error, [&] { s.wait(keys, timeout.value_or(Millis(-1))); });
          },
          py::arg("keys"), py::arg("timeout") = py::none())
      .def(
          "delete_key",
          [](Store& s, const std::string& key) {
            return without_gil(store_error, [&] { return s.delete_key(key); });
          },
          py::arg("key"))
      .def("num_keys",
           [](Store& s) { return without_gil(store_error, [&] { return s.num_keys(); }); })
      .def("set_timeout", &Store::set_timeout, py::arg("timeout"))
      .def_property_readonly("timeout", &Store::timeout);

  py::class_<HashStore, Store, std::shared_ptr<HashStore>>(d, "HashStore", "An in-process store.")
      .def(py::init([] { return std::make_shared<HashStore>(); }));

  py::class_<PrefixStore, Store, std::shared_ptr<PrefixStore>>(
      d, "PrefixStore", "Adds '<prefix>/' to every key of the underlying store.")
      .def(py::init([](const std::string& prefix, std::shared_ptr<Store> store) {
             return std::make_shared<PrefixStore>(prefix, std::move(store));
           }),
           py::arg("prefix"), py::arg("store"))
      .def_property_readonly("underlying_store", &PrefixStore::inner);

  py::class_<TCPStore, Store, std::shared_ptr<TCPStore>>(
      d, "TCPStore", "The TCP key-value store: the master hosts it, every rank connects.")
      .def(py::init([](const std::string& host_name, int port, std::optional<int64_t> world_size,
                       bool is_master, Millis timeout, bool wait_for_workers, bool use_libuv) {
             TCPStoreOptions o;
             o.host = host_name;
             o.port = port;
             o.world_size = world_size.value_or(-1);
             o.is_master = is_master;
             o.timeout = timeout;
             o.wait_for_workers = wait_for_workers;
             // use_libuv picks PyTorch's server implementation; kiln has one.
             return without_gil(network_error, [&] { return std::make_shared<TCPStore>(o); });
           }),
           py::arg("host_name"), py::arg("port"), py::arg("world_size") = py::none(),
           py::arg("is_master") = false, py::arg("timeout") = Millis(300000),
           py::arg("wait_for_workers") = true, py::arg("use_libuv") = true)
      .def_property_readonly("host", &TCPStore::host)
      .def_property_readonly("port", &TCPStore::port)
      .def_property_readonly("libuvBackend", [](const TCPStore&) { return false; });
}

}  // namespace kiln::python
