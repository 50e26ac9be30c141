/* A C extension calling the driver itself, as Cython's cydriver does: create() with the GIL held, and
 * create_nogil() between Py_BEGIN_ALLOW_THREADS and Py_END_ALLOW_THREADS (Cython's `with nogil`). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <cuda.h>
#include <pthread.h>

static PyObject* create(CUmemGenericAllocationHandle* h, size_t size, int release_gil) {
    CUmemAllocationProp prop = {0};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    CUresult r;
    if (release_gil) {
        Py_BEGIN_ALLOW_THREADS
        r = cuMemCreate(h, size, &prop, 0);
        Py_END_ALLOW_THREADS
    } else {
        r = cuMemCreate(h, size, &prop, 0);
    }
    if (r != CUDA_SUCCESS) return PyErr_Format(PyExc_RuntimeError, "cuMemCreate: %d", (int)r);
    return PyLong_FromUnsignedLongLong(*h);
}

static PyObject* py_create(PyObject* self, PyObject* arg) {
    (void)self;
    CUmemGenericAllocationHandle h = 0;
    return create(&h, PyLong_AsSize_t(arg), 0);
}

static PyObject* py_create_nogil(PyObject* self, PyObject* arg) {
    (void)self;
    CUmemGenericAllocationHandle h = 0;
    return create(&h, PyLong_AsSize_t(arg), 1);
}

/* A C++ allocator thread: started by the extension, never known to the interpreter (no thread state). */
static void* native_thread(void* arg) {
    CUmemAllocationProp prop = {0};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    CUmemGenericAllocationHandle h = 0;
    return (void*)(size_t)(cuMemCreate(&h, *(size_t*)arg, &prop, 0) == CUDA_SUCCESS);
}

static PyObject* py_create_in_native_thread(PyObject* self, PyObject* arg) {
    (void)self;
    size_t size = PyLong_AsSize_t(arg);
    pthread_t t;
    void* ok = NULL;
    Py_BEGIN_ALLOW_THREADS
    if (pthread_create(&t, NULL, native_thread, &size) == 0) pthread_join(t, &ok);
    Py_END_ALLOW_THREADS
    return PyBool_FromLong(ok != NULL);
}

static PyMethodDef methods[] = {
    {"create_in_native_thread", py_create_in_native_thread, METH_O, "cuMemCreate on a thread Python does not know"},
    {"create", py_create, METH_O, "cuMemCreate with the GIL held"},
    {"create_nogil", py_create_nogil, METH_O, "cuMemCreate with the GIL released"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "cext", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit_cext(void) { return PyModule_Create(&module); }
