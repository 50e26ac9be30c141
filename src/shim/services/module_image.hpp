// module_image: how many bytes a module image the driver accepted spans, read from its own header — a cubin
// (ELF), a fatbin, the wrapper cudart registers around a fatbin, or PTX text (up to its NUL). Asked only
// after the driver loaded the image, so the image is known to be one of these.
#pragma once

#include <cstdint>

namespace cumemaudit::shim {

std::uint64_t module_image_bytes(const void* image);
// A file's size (cuModuleLoad, cuLibraryLoadFromFile); 0 when it cannot be read.
std::uint64_t module_file_bytes(const char* path);

}  // namespace cumemaudit::shim
