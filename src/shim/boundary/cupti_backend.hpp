// cupti_backend: audit without LD_PRELOAD. InitializeInjection (exported; CUDA_INJECTION64_PATH) subscribes to
// CUPTI's driver-API callbacks for the entry points of hooks.inc and feeds the same record() functions.
// backend=cupti keeps the preloaded wrappers in standby (they record only if CUPTI is taken by another
// tool); backend=both records through both, each call once.
#pragma once

#include <cupti_callbacks.h>

namespace cumemaudit::shim {

class Recorder;

// One driver-API callback, as CUPTI delivers it, recorded into `into` (the process's recorder when null;
// a unit test passes its own and feeds recorded structs).
void dispatch_cupti(Recorder* into, CUpti_CallbackDomain, CUpti_CallbackId, const void* callback_data) noexcept;

}  // namespace cumemaudit::shim
