#include "object_roles.hpp"

#include "paths.hpp"

namespace cumemaudit::object_roles {

bool passes_on(std::string_view object) {
    const std::string_view base = basename(object);
    return base.starts_with("libcumemaudit.so") || base.starts_with("libcuda.so") || base.starts_with("libcudart") ||
           base.starts_with("libcupti");
}

bool passes_on_function(std::string_view function) {
    if (function.starts_with("p")) function.remove_prefix(1);  // NCCL_API's profiling alias, same address
    return function == "ncclMemAlloc" || function == "ncclMemFree";
}

bool is_python_binding(std::string_view object) {
    const std::string_view base = basename(object);
    for (const char* prefix : {"libffi.so", "_ctypes.", "_cffi_backend.", "libpython"})
        if (base.starts_with(prefix)) return true;
    if (base.starts_with("python") &&  // the executable: python, python3, python3.12
        base.find_first_not_of("0123456789.", 6) == std::string_view::npos)
        return true;
    return object.find("-packages/cuda/bindings/") != std::string_view::npos;
}

}  // namespace cumemaudit::object_roles
