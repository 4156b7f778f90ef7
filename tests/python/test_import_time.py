"""import kiln stays fast: rarely used submodules load on first access (Note [Lazy submodules])."""

import statistics
import subprocess
import sys
import time

import kiln


def _run(code):
    return subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                          text=True).stdout


def _median_seconds(code, runs=5):
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        _run(code)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def test_import_kiln_leaves_the_lazy_submodules_and_numpy_unloaded():
    loaded = _run("import sys, kiln; print(' '.join(sorted(sys.modules)))").split()
    for name in ("kiln.distributed", "kiln.multiprocessing", "kiln.utils", "kiln.serialization",
                 "kiln.doctor", "numpy"):
        assert name not in loaded, name


def test_lazy_submodules_are_reachable_as_attributes_and_listed_by_dir():
    names = dir(kiln)
    for name in ("distributed", "multiprocessing", "utils", "doctor", "save", "load"):
        assert name in names
    assert _run("import kiln; print(kiln.distributed.is_available())").strip() in ("True", "False")
    for name in ("init_process_group", "all_reduce", "ReduceOp", "get_rank", "Backend"):
        assert hasattr(kiln.distributed, name), name
    assert callable(kiln.multiprocessing.spawn)
    assert kiln.utils.data.DataLoader.__name__ == "DataLoader"
    assert kiln.save.__module__ == kiln.load.__module__ == "kiln.serialization"
    out = _run("from kiln.distributed import get_world_size, is_initialized; "
               "print(is_initialized())")
    assert out.strip() == "False"


def test_an_unknown_attribute_still_raises_attribute_error():
    try:
        kiln.no_such_thing
    except AttributeError as error:
        assert "no_such_thing" in str(error)
    else:
        raise AssertionError("kiln.no_such_thing did not raise")


def test_import_kiln_takes_at_most_two_and_a_half_times_import_numpy():
    numpy_s = _median_seconds("import numpy")
    kiln_s = _median_seconds("import kiln")
    print(f"import numpy {numpy_s:.3f} s, import kiln {kiln_s:.3f} s")
    assert kiln_s <= 2.5 * numpy_s, (kiln_s, numpy_s)
