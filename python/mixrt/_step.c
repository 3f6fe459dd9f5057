/* mixrt._step: the per-step path of mixrt.Session.run in C (optional CPython extension).
 *
 * The ctypes path of session.py spends about 1.3 us per input packing its mx_tensor record and
 * about 1.3 us per output wrapping it as a NumPy array; this module does both loops in C, so a
 * step costs one Python call plus the mixrt call. It is only a fast path: whenever a step is
 * anything but the common case (a feed that is not a C-contiguous, aligned, native-order ndarray
 * of a type mixrt takes, a missing or unknown name, rank beyond MX_MAX_RANK), Runner.run returns
 * NotImplemented and session.py takes the ctypes path, which converts or raises the error.
 *
 * The module does not link libmixrt.so: the functions it calls come as addresses from the
 * library ctypes loaded (configure()), so both paths drive the same library instance wherever it
 * was found. Only the mx_tensor layout and the version number come from mixrt's headers at build
 * time; configure() refuses a library of another version, and session.py then stays on ctypes. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>

#include "mixrt/session.h"
#include "mixrt/version.h"

typedef mx_status (*mx__py_run_fn)(mx_session *, const mx_tensor *, size_t, mx_tensor *, size_t);
typedef void (*mx__py_release_fn)(mx_tensor *);
typedef const char *(*mx__py_last_error_fn)(const mx_session *);

/* Set once by configure(). */
static mx__py_run_fn mx__py_run;
static mx__py_release_fn mx__py_release;
static mx__py_last_error_fn mx__py_last_error;
static PyObject *mx__py_error_class; /* mixrt.MixrtError(status, message) */

/* The mixrt dtype of an array's element type, 0 when mixrt has none for it. By kind and size,
 * since NumPy has two type numbers for 64-bit integers on LP64 systems. */
static int mx__py_dtype_code(PyArray_Descr *d) {
  switch (d->kind) {
    case 'f':
      return d->elsize == 4 ? MX_FLOAT32 : d->elsize == 2 ? MX_FLOAT16 : d->elsize == 8 ? MX_FLOAT64 : 0;
    case 'i':
      return d->elsize == 1   ? MX_INT8
             : d->elsize == 2 ? MX_INT16
             : d->elsize == 4 ? MX_INT32
             : d->elsize == 8 ? MX_INT64
                              : 0;
    case 'u':
      return d->elsize == 1   ? MX_UINT8
             : d->elsize == 2 ? MX_UINT16
             : d->elsize == 4 ? MX_UINT32
             : d->elsize == 8 ? MX_UINT64
                              : 0;
    case 'b': return d->elsize == 1 ? MX_BOOL : 0;
    default: return 0;
  }
}

/* The NumPy type of a mixrt dtype, -1 when NumPy has none (bfloat16, strings, float8, ...). */
static int mx__py_numpy_type(mx_dtype code) {
  switch (code) {
    case MX_FLOAT32: return NPY_FLOAT32;
    case MX_UINT8: return NPY_UINT8;
    case MX_INT8: return NPY_INT8;
    case MX_UINT16: return NPY_UINT16;
    case MX_INT16: return NPY_INT16;
    case MX_INT32: return NPY_INT32;
    case MX_INT64: return NPY_INT64;
    case MX_BOOL: return NPY_BOOL;
    case MX_FLOAT16: return NPY_FLOAT16;
    case MX_FLOAT64: return NPY_FLOAT64;
    case MX_UINT32: return NPY_UINT32;
    case MX_UINT64: return NPY_UINT64;
    default: return -1;
  }
}

/* --- StepOutputs: owns the host tensors of one step's outputs ------------------------------- */

/* The base object of every array a step returns: the tensors are freed together when the last
 * of those arrays is gone (one owner per step keeps the wrapping cheap). */
typedef struct {
  PyObject_HEAD size_t count;
  mx_tensor records[];
} mx__py_step_outputs;

static void mx__py_step_outputs_dealloc(PyObject *self) {
  mx__py_step_outputs *o = (mx__py_step_outputs *)self;
  for (size_t k = 0; k < o->count; k++)
    if (o->records[k].data) mx__py_release(&o->records[k]);
  Py_TYPE(self)->tp_free(self);
}

static PyTypeObject mx__py_step_outputs_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "mixrt._step.StepOutputs",
    .tp_basicsize = sizeof(mx__py_step_outputs),
    .tp_itemsize = sizeof(mx_tensor),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_dealloc = mx__py_step_outputs_dealloc,
    .tp_doc = "The host tensors of one step's outputs, freed with the last array over them.",
};

/* --- Runner: one session's records, reused step after step ---------------------------------- */

typedef struct {
  PyObject_HEAD mx_session *session;
  size_t n_in, n_out;
  mx_tensor *ins, *outs;   /* PyMem arrays of n_in / n_out records */
  PyObject **held;         /* 2 * n_in: the feeds' names and arrays, referenced through a step */
  PyObject *output_names;  /* tuple of str, the model's order */
  PyObject *output_index;  /* dict str -> int */
  PyObject *output_cnames; /* tuple of bytes: the names the output records point into */
} mx__py_runner;

static void mx__py_runner_dealloc(PyObject *self) {
  mx__py_runner *r = (mx__py_runner *)self;
  PyMem_Free(r->ins);
  PyMem_Free(r->outs);
  PyMem_Free(r->held);
  Py_XDECREF(r->output_names);
  Py_XDECREF(r->output_index);
  Py_XDECREF(r->output_cnames);
  Py_TYPE(self)->tp_free(self);
}

/* Runner(session_address, n_inputs, output_names) */
static int mx__py_runner_init(PyObject *self, PyObject *args, PyObject *kwargs) {
  mx__py_runner *r = (mx__py_runner *)self;
  unsigned long long address;
  Py_ssize_t n_in;
  PyObject *names;
  (void)kwargs;
  if (!mx__py_run) {
    PyErr_SetString(PyExc_RuntimeError, "mixrt._step: configure() was not called");
    return -1;
  }
  if (!PyArg_ParseTuple(args, "KnO!", &address, &n_in, &PyTuple_Type, &names)) return -1;
  if (!address || n_in < 0) {
    PyErr_SetString(PyExc_ValueError, "mixrt._step.Runner: no session");
    return -1;
  }
  Py_ssize_t n_out = PyTuple_GET_SIZE(names);
  r->session = (mx_session *)(uintptr_t)address;
  r->n_in = (size_t)n_in;
  r->n_out = (size_t)n_out;
  r->ins = PyMem_Calloc(n_in ? (size_t)n_in : 1, sizeof(mx_tensor));
  r->outs = PyMem_Calloc(n_out ? (size_t)n_out : 1, sizeof(mx_tensor));
  r->held = PyMem_Calloc(n_in ? 2 * (size_t)n_in : 1, sizeof(PyObject *));
  r->output_index = PyDict_New();
  r->output_cnames = PyTuple_New(n_out);
  if (!r->ins || !r->outs || !r->held || !r->output_index || !r->output_cnames) {
    PyErr_NoMemory();
    return -1;
  }
  Py_INCREF(names);
  r->output_names = names;
  for (Py_ssize_t k = 0; k < n_out; k++) {
    PyObject *name = PyTuple_GET_ITEM(names, k);
    PyObject *encoded = PyUnicode_Check(name) ? PyUnicode_AsUTF8String(name) : NULL;
    if (!encoded) {
      if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "mixrt._step.Runner: output names must be str");
      return -1;
    }
    PyTuple_SET_ITEM(r->output_cnames, k, encoded);
    PyObject *index = PyLong_FromSsize_t(k);
    int failed = !index || PyDict_SetItem(r->output_index, name, index) < 0;
    Py_XDECREF(index);
    if (failed) return -1;
  }
  return 0;
}

/* Fills input record k from one feed; false when the feed is not one the fast path takes. */
static bool mx__py_pack_input(mx_tensor *t, PyObject *name, PyObject *value) {
  if (!PyUnicode_Check(name) || !PyArray_CheckExact(value)) return false;
  PyArrayObject *a = (PyArrayObject *)value;
  int rank = PyArray_NDIM(a);
  if (!PyArray_IS_C_CONTIGUOUS(a) || !PyArray_ISALIGNED(a) || !PyArray_ISNOTSWAPPED(a) || rank > MX_MAX_RANK)
    return false;
  int code = mx__py_dtype_code(PyArray_DESCR(a));
  const char *cname = code ? PyUnicode_AsUTF8(name) : NULL; /* cached in the str: no copy */
  if (!cname) {
    PyErr_Clear();
    return false;
  }
  npy_intp *dims = PyArray_DIMS(a);
  t->dtype = (mx_dtype)code;
  t->rank = rank;
  for (int d = 0; d < rank; d++) t->dims[d] = dims[d];
  t->data = PyArray_DATA(a);
  t->placement = MX_HOST;
  t->name = cname;
  return true;
}

/* The NumPy array over output k of `owner` (a new reference), or NULL with an exception. */
static PyObject *mx__py_wrap_output(mx__py_runner *r, mx__py_step_outputs *owner, size_t k) {
  mx_tensor *t = &owner->records[k];
  int type = mx__py_numpy_type(t->dtype);
  if (type < 0) {
    PyObject *name = PyTuple_GET_ITEM(r->output_names, (Py_ssize_t)k);
    PyObject *message = PyUnicode_FromFormat(
        "mixrt: output '%U' has element type code %d, which NumPy cannot hold", name, (int)t->dtype);
    if (message) {
      PyObject *exc = PyObject_CallFunction(mx__py_error_class, "iO", (int)MX_ERR_UNSUPPORTED, message);
      if (exc) PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
      Py_XDECREF(exc);
      Py_DECREF(message);
    }
    return NULL;
  }
  npy_intp dims[MX_MAX_RANK];
  npy_intp count = 1;
  for (int d = 0; d < t->rank; d++) {
    dims[d] = (npy_intp)t->dims[d];
    count *= dims[d];
  }
  if (count == 0 || !t->data) return PyArray_SimpleNew(t->rank, dims, type);
  PyObject *array = PyArray_SimpleNewFromData(t->rank, dims, type, t->data);
  if (!array) return NULL;
  Py_INCREF(owner);
  if (PyArray_SetBaseObject((PyArrayObject *)array, (PyObject *)owner) < 0) {
    Py_DECREF(array);
    return NULL;
  }
  return array;
}

/* Runner.run(output_names or None, feeds) -> list of arrays, or NotImplemented (see the top). */
static PyObject *mx__py_runner_run(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  mx__py_runner *r = (mx__py_runner *)self;
  if (nargs != 2 || !PyDict_Check(args[1])) Py_RETURN_NOTIMPLEMENTED;
  PyObject *wanted_names = args[0], *feeds = args[1];
  if ((size_t)PyDict_GET_SIZE(feeds) != r->n_in) Py_RETURN_NOTIMPLEMENTED;

  /* Which outputs, by index, in the caller's order; NULL wanted_names: all of them. */
  Py_ssize_t n_wanted = (Py_ssize_t)r->n_out;
  PyObject *wanted_seq = NULL;
  if (wanted_names != Py_None) {
    wanted_seq = PySequence_Fast(wanted_names, "");
    if (!wanted_seq) {
      PyErr_Clear();
      Py_RETURN_NOTIMPLEMENTED;
    }
    n_wanted = PySequence_Fast_GET_SIZE(wanted_seq);
  }
  Py_ssize_t stack_index[16];
  Py_ssize_t *wanted = n_wanted <= 16 ? stack_index : PyMem_Malloc((size_t)n_wanted * sizeof *wanted);
  PyObject *result = NULL;
  mx__py_step_outputs *owner = NULL;
  size_t n_held = 0;
  if (!wanted) {
    PyErr_NoMemory();
    goto done;
  }
  for (Py_ssize_t i = 0; i < n_wanted; i++) {
    if (!wanted_seq) {
      wanted[i] = i;
      continue;
    }
    PyObject *index = PyDict_GetItemWithError(r->output_index, PySequence_Fast_GET_ITEM(wanted_seq, i));
    if (!index) {
      PyErr_Clear();
      result = Py_NewRef(Py_NotImplemented);
      goto done;
    }
    wanted[i] = PyLong_AsSsize_t(index);
  }

  PyObject *name, *value;
  Py_ssize_t pos = 0;
  size_t k = 0;
  while (PyDict_Next(feeds, &pos, &name, &value)) {
    if (!mx__py_pack_input(&r->ins[k++], name, value)) {
      result = Py_NewRef(Py_NotImplemented);
      goto done;
    }
    /* Referenced through the call: another thread may change the dict while mixrt reads the
     * arrays and their names without the GIL. */
    r->held[n_held++] = Py_NewRef(name);
    r->held[n_held++] = Py_NewRef(value);
  }
  for (size_t j = 0; j < r->n_out; j++) {
    memset(&r->outs[j], 0, sizeof(mx_tensor));
    r->outs[j].name = PyBytes_AS_STRING(PyTuple_GET_ITEM(r->output_cnames, (Py_ssize_t)j));
  }

  /* The caller (the session's lock) keeps other threads off these records. */
  mx_status status;
  Py_BEGIN_ALLOW_THREADS status = mx__py_run(r->session, r->ins, r->n_in, r->outs, r->n_out);
  Py_END_ALLOW_THREADS if (status != MX_OK) {
    const char *message = mx__py_last_error(r->session);
    PyObject *exc = PyObject_CallFunction(mx__py_error_class, "is", (int)status, message ? message : "");
    if (exc) PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
    Py_XDECREF(exc);
    goto done;
  }

  owner = PyObject_NewVar(mx__py_step_outputs, &mx__py_step_outputs_type, (Py_ssize_t)r->n_out);
  if (!owner) {
    for (size_t j = 0; j < r->n_out; j++)
      if (r->outs[j].data) mx__py_release(&r->outs[j]);
    goto done;
  }
  owner->count = r->n_out;
  memcpy(owner->records, r->outs, r->n_out * sizeof(mx_tensor));
  if (wanted_seq) {
    /* An output nobody asked for is freed now rather than with the step's arrays. */
    for (size_t j = 0; j < r->n_out; j++) {
      bool asked = false;
      for (Py_ssize_t i = 0; i < n_wanted && !asked; i++) asked = wanted[i] == (Py_ssize_t)j;
      if (!asked && owner->records[j].data) mx__py_release(&owner->records[j]);
    }
  }
  result = PyList_New(n_wanted);
  for (Py_ssize_t i = 0; result && i < n_wanted; i++) {
    PyObject *array = NULL;
    for (Py_ssize_t e = 0; e < i && !array; e++) /* an output asked for twice: the same array */
      if (wanted[e] == wanted[i]) array = Py_NewRef(PyList_GET_ITEM(result, e));
    if (!array) array = mx__py_wrap_output(r, owner, (size_t)wanted[i]);
    if (!array)
      Py_CLEAR(result);
    else
      PyList_SET_ITEM(result, i, array);
  }

done:
  for (size_t h = 0; h < n_held; h++) Py_DECREF(r->held[h]);
  Py_XDECREF((PyObject *)owner);
  Py_XDECREF(wanted_seq);
  if (wanted && wanted != stack_index) PyMem_Free(wanted);
  return result;
}

static PyMethodDef mx__py_runner_methods[] = {
    {"run", (PyCFunction)(void (*)(void))mx__py_runner_run, METH_FASTCALL,
     "run(output_names or None, feeds) -> list of arrays, or NotImplemented when the ctypes path must take "
     "the step"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject mx__py_runner_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "mixrt._step.Runner",
    .tp_basicsize = sizeof(mx__py_runner),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = mx__py_runner_init,
    .tp_dealloc = mx__py_runner_dealloc,
    .tp_methods = mx__py_runner_methods,
    .tp_doc = "Runner(session_address, n_inputs, output_names): Session.run's records for one session.",
};

/* configure(version_number, tensor_size, run, release, last_error, error_class): the addresses
 * of mx_session_run, mx_tensor_release and mx_session_last_error in the library ctypes loaded.
 * Refuses (ImportError) a library or binding whose mx_tensor this module was not built for. */
static PyObject *mx__py_configure(PyObject *module, PyObject *args) {
  unsigned long long version, run, release, last_error;
  Py_ssize_t tensor_size;
  PyObject *error_class;
  (void)module;
  if (!PyArg_ParseTuple(args, "KnKKKO", &version, &tensor_size, &run, &release, &last_error, &error_class))
    return NULL;
  if (version != MIXRT_VERSION_NUMBER || tensor_size != (Py_ssize_t)sizeof(mx_tensor)) {
    PyErr_Format(PyExc_ImportError, "mixrt._step was built for mixrt %s (mx_tensor of %zu bytes)",
                 MIXRT_VERSION, sizeof(mx_tensor));
    return NULL;
  }
  if (!run || !release || !last_error) {
    PyErr_SetString(PyExc_ValueError, "mixrt._step.configure: a function address is missing");
    return NULL;
  }
  mx__py_run = (mx__py_run_fn)(uintptr_t)run;
  mx__py_release = (mx__py_release_fn)(uintptr_t)release;
  mx__py_last_error = (mx__py_last_error_fn)(uintptr_t)last_error;
  Py_INCREF(error_class);
  Py_XSETREF(mx__py_error_class, error_class);
  Py_RETURN_NONE;
}

static PyMethodDef mx__py_module_methods[] = {
    {"configure", mx__py_configure, METH_VARARGS,
     "configure(version_number, tensor_size, run, release, last_error, error_class)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef mx__py_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "mixrt._step",
    .m_doc = "The per-step path of mixrt.Session.run in C.",
    .m_size = -1,
    .m_methods = mx__py_module_methods,
};

PyMODINIT_FUNC PyInit__step(void) {
  import_array();
  if (PyType_Ready(&mx__py_step_outputs_type) < 0 || PyType_Ready(&mx__py_runner_type) < 0) return NULL;
  PyObject *m = PyModule_Create(&mx__py_module);
  if (!m) return NULL;
  if (PyModule_AddIntConstant(m, "MIXRT_VERSION_NUMBER", MIXRT_VERSION_NUMBER) < 0 ||
      PyModule_AddObjectRef(m, "Runner", (PyObject *)&mx__py_runner_type) < 0) {
    Py_DECREF(m);
    return NULL;
  }
  return m;
}
