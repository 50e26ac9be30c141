#include "shim/services/module_image.hpp"

#include <elf.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstring>

namespace cumemaudit::shim {
namespace {

// nvcc's fatbin: a 16-byte header (magic, version, header size, the bytes that follow it).
constexpr std::uint32_t kFatbinMagic = 0xBA55ED50u;
struct FatbinHeader {
    std::uint32_t magic;
    std::uint16_t version, header_bytes;
    std::uint64_t fat_bytes;
};
// What cudart registers (and passes to the driver) around a fatbin: a magic, a version and the fatbin.
constexpr std::uint32_t kWrapperMagic = 0x466243B1u;
struct FatbinWrapper {
    std::uint32_t magic, version;
    const void* data;
    const void* filename_or_fatbins;
};

std::uint64_t elf_bytes(const unsigned char* p) {
    if (p[EI_CLASS] == ELFCLASS64) {
        Elf64_Ehdr h;
        std::memcpy(&h, p, sizeof h);
        const std::uint64_t sections = h.e_shoff + std::uint64_t{h.e_shnum} * h.e_shentsize;
        const std::uint64_t segments = h.e_phoff + std::uint64_t{h.e_phnum} * h.e_phentsize;
        return std::max<std::uint64_t>({sections, segments, sizeof h});
    }
    Elf32_Ehdr h;
    std::memcpy(&h, p, sizeof h);
    const std::uint64_t sections = h.e_shoff + std::uint64_t{h.e_shnum} * h.e_shentsize;
    const std::uint64_t segments = h.e_phoff + std::uint64_t{h.e_phnum} * h.e_phentsize;
    return std::max<std::uint64_t>({sections, segments, sizeof h});
}

}  // namespace

std::uint64_t module_image_bytes(const void* image) {
    if (image == nullptr) return 0;
    const auto* p = static_cast<const unsigned char*>(image);
    std::uint32_t magic = 0;
    std::memcpy(&magic, p, sizeof magic);
    if (magic == kWrapperMagic) {
        FatbinWrapper w;
        std::memcpy(&w, p, sizeof w);
        return w.data == image ? 0 : module_image_bytes(w.data);
    }
    if (magic == kFatbinMagic) {
        FatbinHeader h;
        std::memcpy(&h, p, sizeof h);
        return std::uint64_t{h.header_bytes} + h.fat_bytes;
    }
    if (std::memcmp(p, ELFMAG, SELFMAG) == 0) return elf_bytes(p);
    return std::strlen(reinterpret_cast<const char*>(p)) + 1;  // PTX text and its NUL
}

std::uint64_t module_file_bytes(const char* path) {
    struct stat st {};
    return path != nullptr && ::stat(path, &st) == 0 && S_ISREG(st.st_mode) ? static_cast<std::uint64_t>(st.st_size) : 0;
}

}  // namespace cumemaudit::shim
