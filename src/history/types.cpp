#include "history/types.hpp"

namespace cumemaudit::history {

const char* to_string(AlarmKind k) {
    switch (k) {
        case AlarmKind::growth: return "growth";
        case AlarmKind::leak: return "leak";
        case AlarmKind::modules: return "modules";
    }
    return "growth";
}

const char* to_string(PartKind k) {
    switch (k) {
        case PartKind::live: return "live";
        case PartKind::leaked: return "leaked";
        case PartKind::graph: return "graph";
        case PartKind::async_pool_idle: return "async_pool_idle";
        case PartKind::graph_memory: return "graph_memory";
        case PartKind::other_process: return "other_process";
        case PartKind::unattributed: return "unattributed";
        case PartKind::context: return "context";
        case PartKind::local_memory: return "local_memory";
        case PartKind::malloc_heap: return "malloc_heap";
        case PartKind::dma_buf_pinned: return "dma_buf_pinned";
        case PartKind::managed_resident: return "managed_resident";
        case PartKind::held_unmapped: return "held_unmapped";
        case PartKind::module_code: return "module_code";
    }
    return "";
}

}  // namespace cumemaudit::history
