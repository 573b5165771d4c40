/* occtune's native launcher: one C call per top-k call for every kernel launch of a plan.
 *
 * cuda-python's cuLaunchKernel wraps each argument in Python objects on every call; this module
 * calls the driver's own launch function, whose address Python passes in (no state here):
 * cuLaunchKernel (libcuda) or hipModuleLaunchKernel (libamdhip64), which take the same
 * arguments: function, grid x/y/z, block x/y/z, dynamic shared bytes, stream, void** params,
 * void** extra. Built and loaded by occtune/native.py (no torch or CUDA headers needed).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

typedef int (*launch_fn)(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                         unsigned bz, unsigned smem, void *stream, void **params, void **extra);

/* launch_all(function, launches, stream) -> None or (i, code): the driver's launch function (an
 * int address), then a tuple of (kernel, grid, block, shared bytes, params address) tuples of
 * ints, each launched in order on a 1-D grid on one stream; the first failure stops there and
 * says which launch (i) and its error code; None when all started. */
static PyObject *launch_all(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  (void)self;
  if (nargs != 3 || !PyTuple_Check(args[1])) {
    PyErr_SetString(PyExc_TypeError, "launch_all(function: int, launches: tuple, stream: int)");
    return NULL;
  }
  const launch_fn launch = (launch_fn)PyLong_AsVoidPtr(args[0]);
  void *stream = PyLong_AsVoidPtr(args[2]);
  if (PyErr_Occurred()) return NULL;
  if (launch == NULL) {
    PyErr_SetString(PyExc_ValueError, "launch_all: the launch function's address is 0");
    return NULL;
  }
  const Py_ssize_t n = PyTuple_GET_SIZE(args[1]);
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject *t = PyTuple_GET_ITEM(args[1], i);
    if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 5) {
      PyErr_SetString(PyExc_TypeError, "launch_all: each launch is (kernel, grid, block, smem, params)");
      return NULL;
    }
    void *f = PyLong_AsVoidPtr(PyTuple_GET_ITEM(t, 0));
    const unsigned long grid = PyLong_AsUnsignedLong(PyTuple_GET_ITEM(t, 1));
    const unsigned long block = PyLong_AsUnsignedLong(PyTuple_GET_ITEM(t, 2));
    const unsigned long smem = PyLong_AsUnsignedLong(PyTuple_GET_ITEM(t, 3));
    void **params = (void **)PyLong_AsVoidPtr(PyTuple_GET_ITEM(t, 4));
    if (PyErr_Occurred()) return NULL;
    if (grid > 0xFFFFFFFFul || block > 0xFFFFFFFFul || smem > 0xFFFFFFFFul) {
      PyErr_SetString(PyExc_OverflowError, "launch_all: grid, block or shared bytes over 32 bits");
      return NULL;
    }
    const int rc = launch(f, (unsigned)grid, 1u, 1u, (unsigned)block, 1u, 1u, (unsigned)smem, stream, params,
                          NULL);
    if (rc != 0) return Py_BuildValue("(ni)", i, rc);
  }
  Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"launch_all", (PyCFunction)(void (*)(void))launch_all, METH_FASTCALL,
     "launch_all(function, launches, stream) -> None, or (index of the failed launch, error code)"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_occtune_launch", NULL, -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__occtune_launch(void) { return PyModule_Create(&module); }
