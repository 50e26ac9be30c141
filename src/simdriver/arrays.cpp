// CUDA arrays and mipmapped arrays: device memory by descriptor, in whole pages (common/array_bytes), owned
// by the context current at their creation (a context's end frees them: tear_down).
// The answers follow the H200's (docs/DRIVER.md, "Arrays").
#include "state.hpp"
#include "state_impl.hpp"

#include "common/array_bytes.hpp"

#include <bit>

namespace cumemaudit::sim {

namespace {

// The device's texture limits (an H100/H200's cuDeviceGetAttribute answers): widest 1D, 2D and 3D
// extents, and layers.
constexpr std::uint64_t kMax1d = 131072, kMax2dWidth = 131072, kMax2dHeight = 65536, kMax3d = 16384,
                        kMaxLayered = 32768, kMaxLayers = 2048;

CUresult check_extent(const CUDA_ARRAY3D_DESCRIPTOR& d) {
    if (d.Width == 0 || (d.Height == 0 && d.Depth != 0)) return CUDA_ERROR_INVALID_VALUE;
    const bool layered = (d.Flags & (CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_CUBEMAP)) != 0;
    if (layered) {
        if (d.Width > kMaxLayered || d.Height > kMaxLayered || d.Depth > kMaxLayers * 6) return CUDA_ERROR_INVALID_VALUE;
        return CUDA_SUCCESS;
    }
    if (d.Height == 0) return d.Width <= kMax1d ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    if (d.Depth == 0) return d.Width <= kMax2dWidth && d.Height <= kMax2dHeight ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    return d.Width <= kMax3d && d.Height <= kMax3d && d.Depth <= kMax3d ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

}  // namespace

CUresult SimState::Impl::book_array(const CUDA_ARRAY3D_DESCRIPTOR& desc, unsigned levels, SimArray rec, const void* object) {
    Impl& s = *this;
    int dev = 0;
    if (CUresult r = s.current_device(&dev); r != CUDA_SUCCESS) return r;
    if (CUresult r = check_extent(desc); r != CUDA_SUCCESS) return r;
    const std::uint64_t widest = std::max<std::uint64_t>({desc.Width, desc.Height, desc.Depth});
    if (levels == 0 || levels > static_cast<unsigned>(std::bit_width(widest))) return CUDA_ERROR_INVALID_VALUE;
    const std::optional<std::uint64_t> bytes = array_bytes(desc, levels);
    if (!bytes) return CUDA_ERROR_NOT_SUPPORTED;  // a format whose layout is not modelled
    rec.charged = *bytes;
    rec.device = dev;
    rec.ctx = tls_current;
    SimNode::Lock node(*s.node);
    s.reap_all();
    if (!s.room_for(dev, rec.charged)) return CUDA_ERROR_OUT_OF_MEMORY;
    s.node->charge_classic(dev, rec.charged);
    s.arrays.emplace(object, std::move(rec));
    return CUDA_SUCCESS;
}

CUresult SimState::array_create(CUarray* out, const CUDA_ARRAY3D_DESCRIPTOR& desc) {
    std::lock_guard lock(impl_->mu);
    SimArray rec;
    rec.array = std::make_unique<CUarray_st>(CUarray_st{desc});
    CUarray a = rec.array.get();
    if (CUresult r = impl_->book_array(desc, 1, std::move(rec), a); r != CUDA_SUCCESS) return r;
    *out = a;
    return CUDA_SUCCESS;
}

CUresult SimState::mipmapped_create(CUmipmappedArray* out, const CUDA_ARRAY3D_DESCRIPTOR& desc, unsigned levels) {
    std::lock_guard lock(impl_->mu);
    SimArray rec;
    rec.mipmap = std::make_unique<CUmipmappedArray_st>();
    const bool layered = (desc.Flags & (CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_CUBEMAP)) != 0;
    for (unsigned l = 0; l < levels; ++l) {
        CUDA_ARRAY3D_DESCRIPTOR level = desc;
        level.Width = std::max<std::size_t>(desc.Width >> l, 1);
        level.Height = desc.Height == 0 ? 0 : std::max<std::size_t>(desc.Height >> l, 1);
        level.Depth = desc.Depth == 0 || layered ? desc.Depth : std::max<std::size_t>(desc.Depth >> l, 1);
        rec.mipmap->levels.push_back(std::make_unique<CUarray_st>(CUarray_st{level}));
    }
    CUmipmappedArray m = rec.mipmap.get();
    if (CUresult r = impl_->book_array(desc, levels, std::move(rec), m); r != CUDA_SUCCESS) return r;
    *out = m;
    return CUDA_SUCCESS;
}

// The H200 crashed on a destroy of a handle already destroyed (it reads the freed object); a simulated
// driver cannot answer that, and says the handle is not one.
CUresult SimState::Impl::destroy_array(const void* object, bool mipmap) {
    Impl& s = *this;
    if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
    auto it = s.arrays.find(object);
    if (it == s.arrays.end() || (it->second.mipmap != nullptr) != mipmap) return CUDA_ERROR_INVALID_HANDLE;
    SimNode::Lock node(*s.node);
    s.node->uncharge_classic(it->second.device, it->second.charged);
    s.arrays.erase(it);
    return CUDA_SUCCESS;
}

CUresult SimState::array_destroy(CUarray a) {
    std::lock_guard lock(impl_->mu);
    return impl_->destroy_array(a, false);
}

CUresult SimState::mipmapped_destroy(CUmipmappedArray m) {
    std::lock_guard lock(impl_->mu);
    return impl_->destroy_array(m, true);
}

CUresult SimState::array_descriptor(CUDA_ARRAY3D_DESCRIPTOR* out, CUarray a) {
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
    if (auto it = s.arrays.find(a); it != s.arrays.end() && it->second.array != nullptr) {
        *out = a->desc;
        return CUDA_SUCCESS;
    }
    for (const auto& [object, rec] : s.arrays)  // a level of a mipmapped array
        if (rec.mipmap != nullptr)
            for (const auto& level : rec.mipmap->levels)
                if (level.get() == a) {
                    *out = a->desc;
                    return CUDA_SUCCESS;
                }
    return CUDA_ERROR_INVALID_HANDLE;
}

CUresult SimState::mipmapped_level(CUarray* out, CUmipmappedArray m, unsigned level) {
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
    auto it = s.arrays.find(m);
    if (it == s.arrays.end() || it->second.mipmap == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    if (level >= m->levels.size()) return CUDA_ERROR_INVALID_VALUE;
    *out = m->levels[level].get();
    return CUDA_SUCCESS;
}

}  // namespace cumemaudit::sim
