#include "python_frames.hpp"

#include <deque>
#include <mutex>
#include <unordered_map>

namespace cumemaudit::ledger {

struct PythonFrames::Impl {
    mutable std::mutex mu;
    std::deque<PythonFrame> frames;  // id - 1 → frame
    std::unordered_map<std::string, Pc> index;  // file \0 function \0 line → tagged pc
};

PythonFrames::PythonFrames() : impl_(std::make_unique<Impl>()) {}
PythonFrames::~PythonFrames() = default;

Pc PythonFrames::intern(std::string_view file, std::string_view function, std::uint32_t line) {
    std::string key;
    key.reserve(file.size() + function.size() + 12);
    key.append(file).push_back('\0');
    key.append(function).push_back('\0');
    key.append(std::to_string(line));
    std::lock_guard lock(impl_->mu);
    auto [it, inserted] = impl_->index.try_emplace(std::move(key), 0);
    if (inserted) {
        impl_->frames.push_back(PythonFrame{std::string(file), std::string(function), line});
        it->second = kPythonTag | impl_->frames.size();
    }
    return it->second;
}

PythonFrame PythonFrames::frame(Pc pc) const {
    const Pc id = pc & ~kPythonTag;
    std::lock_guard lock(impl_->mu);
    if (!is_python(pc) || id == 0 || id > impl_->frames.size()) return {};
    return impl_->frames[id - 1];
}

void PythonFrames::reset() {
    // Called in a fork child, where another thread of the parent may have held the lock at fork: a fresh
    // table instead of taking it (the old one is left behind, once per fork).
    (void)impl_.release();
    impl_ = std::make_unique<Impl>();
}

}  // namespace cumemaudit::ledger
