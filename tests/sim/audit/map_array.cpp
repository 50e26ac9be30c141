// cuMemMapArrayAsync's list of handles, in audit mode and under enforce.
// Run as `audit_scenarios map-array`; checked by map_array_test.py, which finds
// each site by its `// site:NAME` marker.
#include "scenarios.hpp"

namespace {

// cuMemMapArrayAsync takes handles inside a list: with a live handle the simulated driver answers
// NOT_SUPPORTED (it has no sparse arrays), with a made-up one INVALID_VALUE. Then the handle's only mapping
// goes and its range is freed while the reference is held, the program allocates again (where enforce mode
// reclaims what that range free left unreachable), and the list is tried again. Prints each answer and
// whether the program's list came back untouched.
int map_array() {
    init_primary_context();
    CUmemAllocationProp p = props();
    CUmemGenericAllocationHandle h = 0;
    OK(cuMemCreate(&h, kGran, &p, 0));
    CUarrayMapInfo m{};
    m.resourceType = CU_RESOURCE_TYPE_ARRAY;
    m.subresourceType = CU_ARRAY_SPARSE_SUBRESOURCE_TYPE_MIPTAIL;
    m.memOperationType = CU_MEM_OPERATION_TYPE_MAP;
    m.memHandleType = CU_MEM_HANDLE_TYPE_GENERIC;
    m.memHandle.memHandle = h;
    m.deviceBitMask = 1;
    const CUresult live = cuMemMapArrayAsync(&m, 1, nullptr);
    const bool intact = m.memHandle.memHandle == h;
    m.memHandle.memHandle = h ^ 0x5a5a0000u;
    const CUresult madeup = cuMemMapArrayAsync(&m, 1, nullptr);
    m.memHandle.memHandle = h;
    CUdeviceptr va = 0;
    OK(cuMemAddressReserve(&va, kGran, 0, 0, 0));
    OK(cuMemMap(va, kGran, 0, h, 0));
    OK(cuMemUnmap(va, kGran));
    OK(cuMemAddressFree(va, kGran));
    CUmemGenericAllocationHandle next = 0;
    OK(cuMemCreate(&next, kGran, &p, 0));
    OK(cuMemRelease(next));
    const CUresult after = cuMemMapArrayAsync(&m, 1, nullptr);
    OK(cuMemRelease(h));
    std::printf("map_array: live=%s madeup=%s intact=%d after_unreachable=%s\n", result_name(live),
                result_name(madeup), intact ? 1 : 0, result_name(after));
    return 0;
}

}  // namespace

AUDIT_SCENARIO("map-array", [](int, char**) { return map_array(); });
