// What part a shared object plays between a program and the driver, judged from real paths: the shim, the
// driver and the runtime pass memory on; libffi, ctypes, cffi, the interpreter and cuda-python's Cython
// bindings carry a Python call; anything else is the program's own (and owns what it allocates).
#include "common/object_roles.hpp"

#include <catch2/catch.hpp>

using namespace cumemaudit;

namespace {
bool is_program(const char* path) { return !object_roles::passes_on(path) && !object_roles::is_python_binding(path); }
}  // namespace

TEST_CASE("the shim, libcuda, cudart and CUPTI pass memory on") {
    for (const char* path : {"/opt/audit/lib/libcumemaudit.so", "/usr/lib/x86_64-linux-gnu/libcuda.so.1",
                             "/venv/lib/python3.12/site-packages/nvidia/cuda_runtime/lib/libcudart.so.12",
                             "/usr/local/cuda/lib64/libcupti.so.13"}) {
        INFO(path);
        CHECK(object_roles::passes_on(path));
        CHECK_FALSE(object_roles::is_python_binding(path));
        CHECK_FALSE(is_program(path));
    }
}

TEST_CASE("libffi, ctypes, cffi, the interpreter and cuda-python's bindings carry a Python call") {
    for (const char* path : {"/lib/x86_64-linux-gnu/libffi.so.8",
                             "/usr/lib/python3.11/lib-dynload/_ctypes.cpython-311-x86_64-linux-gnu.so",
                             "/venv/lib/python3.12/site-packages/_cffi_backend.cpython-312-x86_64-linux-gnu.so",
                             "/usr/lib/x86_64-linux-gnu/libpython3.12.so.1.0", "/usr/bin/python3.11", "/usr/bin/python3",
                             "/opt/conda/bin/python",
                             "/venv/lib/python3.12/site-packages/cuda/bindings/_bindings/cydriver.cpython-312-x86_64-linux-gnu.so",
                             "/usr/lib/python3/dist-packages/cuda/bindings/driver.cpython-311-x86_64-linux-gnu.so"}) {
        INFO(path);
        CHECK(object_roles::is_python_binding(path));
        CHECK_FALSE(object_roles::passes_on(path));
        CHECK_FALSE(is_program(path));
    }
}

TEST_CASE("libraries and programs that allocate for themselves are the program's") {
    for (const char* path : {"/venv/lib/python3.12/site-packages/torch/lib/libc10_cuda.so",
                             "/venv/lib/python3.12/site-packages/deep_ep/_C.cpython-312-x86_64-linux-gnu.so",
                             "/venv/lib/python3.12/site-packages/cupy_backends/cuda/api/_driver.cpython-312-x86_64-linux-gnu.so",
                             "/venv/lib/python3.12/site-packages/cuda/core/experimental/_memory.cpython-312-x86_64-linux-gnu.so",
                             "/usr/lib/libnccl.so.2", "/home/u/train", "/usr/bin/python3-config-helper",
                             "/usr/lib/python_ext.so", "/home/u/mypython/libffi_user.so"}) {
        INFO(path);
        CHECK(is_program(path));
    }
}
