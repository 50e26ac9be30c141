#include "output_name.hpp"

#include <filesystem>

namespace cumemaudit::cli {

std::string default_output(const std::vector<std::string>& inputs, std::string_view suffix) {
    std::string name;
    if (inputs.size() == 1) {
        std::error_code ec;
        std::filesystem::path p = std::filesystem::absolute(inputs.front(), ec).lexically_normal();
        if (!p.has_filename()) p = p.parent_path();  // "audit/" and "." name their directory
        name = p.filename().string();
        if (name.size() > 5 && name.compare(name.size() - 5, 5, ".json") == 0) name.resize(name.size() - 5);
    }
    if (name.empty() || name == "/" || name == "." || name == "..") name = "cumemaudit";
    return name + std::string(suffix);
}

}  // namespace cumemaudit::cli
