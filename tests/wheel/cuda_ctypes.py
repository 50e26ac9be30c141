"""The driver API through ctypes, as a Python program without CUDA bindings reaches it: libcuda.so.1 from the
library path (the simulated driver here), a primary context, and VMM create/release."""
import ctypes

MiB = 1 << 20


class _Prop(ctypes.Structure):  # CUmemAllocationProp
    _fields_ = [("type", ctypes.c_int), ("requested_handle_types", ctypes.c_int), ("location_type", ctypes.c_int),
                ("location_id", ctypes.c_int), ("win32_metadata", ctypes.c_void_p),
                ("compression", ctypes.c_ubyte), ("rdma", ctypes.c_ubyte), ("usage", ctypes.c_ushort),
                ("reserved", ctypes.c_ubyte * 4)]


class Driver:
    def __init__(self):
        self.cuda = ctypes.CDLL("libcuda.so.1")
        dev, ctx = ctypes.c_int(), ctypes.c_void_p()
        self.check(self.cuda.cuInit(0), "cuInit")
        self.check(self.cuda.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
        self.check(self.cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
        self.check(self.cuda.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")

    @staticmethod
    def check(rc, what):
        if rc != 0:
            raise RuntimeError(f"{what} failed with CUresult {rc}")

    def create(self, nbytes):
        """cuMemCreate of pinned device memory: one reference, released only by release()."""
        prop = _Prop(type=1, location_type=1, location_id=0)  # PINNED, on DEVICE 0
        handle = ctypes.c_uint64()
        self.check(self.cuda.cuMemCreate(ctypes.byref(handle), ctypes.c_size_t(nbytes), ctypes.byref(prop),
                                         ctypes.c_uint64(0)), "cuMemCreate")
        return handle.value

    def release(self, handle):
        self.check(self.cuda.cuMemRelease(ctypes.c_uint64(handle)), "cuMemRelease")
