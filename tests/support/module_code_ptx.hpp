// A module whose code and globals the driver must find room for on the device, as PTX both drivers read:
// two kernels, code_a and code_b, of `statements` dependent multiply-adds each (the compiler cannot fold
// them, so their code is as long as the text says), and a 32 MiB module-scope global. What each step of
// loading it takes is in docs/DRIVER.md, "Module code and globals".
#pragma once

#include <string>

namespace cumemaudit::program {

inline constexpr unsigned long long kModuleGlobalBytes = 32ull << 20;

inline std::string module_code_ptx(int statements) {
    std::string ptx = ".version 7.0\n.target sm_52\n.address_size 64\n.visible .global .align 4 .b8 big_global[" +
                      std::to_string(kModuleGlobalBytes) + "];\n";
    for (const char* name : {"code_a", "code_b"}) {
        ptx += std::string(".visible .entry ") + name +
               "(.param .u64 out, .param .u32 m)\n{\n.reg .u32 %r<3>;\n.reg .u64 %p;\n"
               "ld.param.u64 %p, [out];\nld.param.u32 %r1, [m];\nmov.u32 %r2, %r1;\n";
        for (int i = 0; i < statements; ++i) ptx += "mad.lo.u32 %r2, %r2, %r1, " + std::to_string(i * 7 + 1) + ";\n";
        ptx += "st.global.u32 [%p], %r2;\nret;\n}\n";
    }
    return ptx;
}

}  // namespace cumemaudit::program
