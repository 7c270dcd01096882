/* The usual line of our JSONL, compiled (history/__init__.py, _parse_jsonl).
 *
 * take(block, i, decode, types, ops, max_depth) decodes block[i], block[i + 1], ... with `decode` (msgspec's),
 * and appends each op that is already in the history format (a map whose type is one of `types`, f a str,
 * process and index ints, a value) to `ops`, its type and f replaced by their shared strings, as the Python
 * loop does. It stops before the first line that is anything else (a line msgspec refuses, a blank line,
 * brackets enough to nest deeper than max_depth, an op to normalise or refuse) and returns how many lines it
 * took: the Python loop handles that line, with its error and its line number, then calls take again. So
 * what is read never depends on whether this module is built (tests/test_history_io.py compares both).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

#define JSONL_ABI 1

/* Brackets that open a list or a map in `raw` (bytes.count's, both). */
static Py_ssize_t openers(const char *s, Py_ssize_t n) {
    Py_ssize_t c = 0;
    for (Py_ssize_t i = 0; i < n; i++)
        c += s[i] == '[' || s[i] == '{';
    return c;
}

/* 1 if `op` is in the history format (then normalised in place), 0 if not, -1 on error. */
static int usual(PyObject *op, PyObject *types, PyObject **keys) {
    /* keys: type, f, process, value, index */
    if (!PyDict_CheckExact(op))
        return 0;
    PyObject *t = PyDict_GetItemWithError(op, keys[0]);
    PyObject *f = t != NULL ? PyDict_GetItemWithError(op, keys[1]) : NULL;
    if (f == NULL || !PyUnicode_CheckExact(t) || !PyUnicode_CheckExact(f))
        return PyErr_Occurred() ? -1 : 0;
    PyObject *p = PyDict_GetItemWithError(op, keys[2]);
    if (p == NULL || !PyLong_CheckExact(p))
        return PyErr_Occurred() ? -1 : 0;
    int has = PyDict_Contains(op, keys[3]);
    if (has <= 0)
        return has;
    PyObject *idx = PyDict_GetItemWithError(op, keys[4]);
    if (idx == NULL || !PyLong_CheckExact(idx))
        return PyErr_Occurred() ? -1 : 0;
    PyObject *shared = PyDict_GetItemWithError(types, t);
    if (shared == NULL)
        return PyErr_Occurred() ? -1 : 0;
    Py_INCREF(f);
    PyUnicode_InternInPlace(&f);
    int rc = PyDict_SetItem(op, keys[0], shared) < 0 || PyDict_SetItem(op, keys[1], f) < 0 ? -1 : 1;
    Py_DECREF(f);
    return rc;
}

static PyObject *take(PyObject *self, PyObject *args) {
    PyObject *block, *decode, *types, *ops;
    Py_ssize_t i, max_depth;
    if (!PyArg_ParseTuple(args, "O!nOO!O!n", &PyList_Type, &block, &i, &decode, &PyDict_Type, &types, &PyList_Type,
                          &ops, &max_depth))
        return NULL;
    static const char *names[] = {"type", "f", "process", "value", "index"};
    PyObject *keys[5] = {NULL};
    Py_ssize_t start = i;
    int failed = 0;
    for (int k = 0; k < 5 && !failed; k++)
        failed = (keys[k] = PyUnicode_InternFromString(names[k])) == NULL;
    for (; !failed && i < PyList_GET_SIZE(block); i++) {
        PyObject *raw = PyList_GET_ITEM(block, i);
        if (!PyBytes_CheckExact(raw))
            break;
        Py_ssize_t len = PyBytes_GET_SIZE(raw);
        if (len > 2 * max_depth && openers(PyBytes_AS_STRING(raw), len) > max_depth)
            break;
        PyObject *op = PyObject_CallOneArg(decode, raw);
        if (op == NULL) {  /* the Python loop decodes it again, and says what is wrong */
            PyErr_Clear();
            break;
        }
        int rc = usual(op, types, keys);
        if (rc == 1)
            rc = PyList_Append(ops, op) < 0 ? -1 : 1;
        Py_DECREF(op);
        if (rc < 0)
            failed = 1;
        if (rc != 1)
            break;
    }
    for (int k = 0; k < 5; k++)
        Py_XDECREF(keys[k]);
    if (failed)
        return NULL;
    return PyLong_FromSsize_t(i - start);
}

static PyMethodDef methods[] = {
    {"take", take, METH_VARARGS, "the usual lines of a block, decoded and normalised (module comment)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_jsonl", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__jsonl(void) {
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && PyModule_AddIntConstant(m, "ABI", JSONL_ABI) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
