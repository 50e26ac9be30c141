"""The CUDA driver through ctypes, as the test programs here use it: ctypes.CDLL releases the GIL around
each call, ctypes.PyDLL keeps it. Only what the scenarios need."""
import ctypes

MiB = 1 << 20


class Location(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class AllocFlags(ctypes.Structure):
    _fields_ = [("compressionType", ctypes.c_ubyte), ("gpuDirectRDMACapable", ctypes.c_ubyte),
                ("usage", ctypes.c_ushort), ("reserved", ctypes.c_ubyte * 4)]


class AllocationProp(ctypes.Structure):  # CUmemAllocationProp
    _fields_ = [("type", ctypes.c_int), ("requestedHandleTypes", ctypes.c_int), ("location", Location),
                ("win32HandleMetaData", ctypes.c_void_p), ("allocFlags", AllocFlags)]


class Driver:
    def __init__(self, keep_gil=False):
        self.lib = (ctypes.PyDLL if keep_gil else ctypes.CDLL)("libcuda.so.1")
        self.check(self.lib.cuInit(0))
        dev = ctypes.c_int()
        self.check(self.lib.cuDeviceGet(ctypes.byref(dev), 0))
        ctx = ctypes.c_void_p()
        self.check(self.lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev))
        self.check(self.lib.cuCtxSetCurrent(ctx))

    @staticmethod
    def check(r):
        if r != 0:
            raise RuntimeError(f"CUDA error {r}")

    def create(self, size):
        prop = AllocationProp()
        prop.type = 1           # CU_MEM_ALLOCATION_TYPE_PINNED
        prop.location.type = 1  # CU_MEM_LOCATION_TYPE_DEVICE
        handle = ctypes.c_ulonglong()
        size, flags = ctypes.c_size_t(size), ctypes.c_ulonglong(0)
        self.check(self.lib.cuMemCreate(ctypes.byref(handle), size, ctypes.byref(prop), flags))  # CREATE
        return handle.value

    def release(self, handle):
        self.check(self.lib.cuMemRelease(ctypes.c_ulonglong(handle)))

    def alloc(self, size):
        ptr = ctypes.c_ulonglong()
        self.check(self.lib.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(size)))  # ALLOC
        return ptr.value
