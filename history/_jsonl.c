/* The usual line of our JSONL, and the pairing of invocations with completions, compiled
 * (history/__init__.py, _parse_jsonl and check_pairs).
 *
 * take(block, i, decode, types, ops, max_depth, seen) decodes block[i], block[i + 1], ... with `decode` (msgspec's),
 * and appends each op that is already in the history format (a map whose type is one of `types`, f a str,
 * process and index ints, a value) to `ops`, its type and f replaced by their shared strings, as the Python
 * loop does. It stops before the first line that is anything else (a line msgspec refuses, a blank line,
 * brackets enough to nest deeper than max_depth, an op to normalise or refuse) and returns how many lines it
 * took: the Python loop handles that line, with its error and its line number, then calls take again.
 * Inside the value's lists, equal exact ints and short exact strs become one object (`share`, through the
 * dict `seen` the caller keeps for the file): equal values of these immutable types are interchangeable, so
 * nothing read changes but the memory it takes (half the pages of a list-append history, whose reads repeat
 * the same numbers) and the time later passes spend comparing them. So
 * what is read never depends on whether this module is built (tests/test_history.py compares both).
 * pairs(ops) does check_pairs's loop for a history that pairs well, and answers None for anything else, when
 * the Python loop runs from the start and reports the first problem with its line.
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


/* Replaces, inside the lists of `v` (to a depth of 4), each exact int and short exact str by the one equal
 * object kept in `seen` (the first of its value): a long history repeats the same few names and, in reads,
 * the same numbers millions of times, and one object each is memory that is touched once. 0 or -1. */
static int share(PyObject *v, PyObject *seen, int depth) {
    if (!PyList_CheckExact(v) || depth > 4)
        return 0;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(v); i++) {
        PyObject *x = PyList_GET_ITEM(v, i);
        if (PyLong_CheckExact(x) || (PyUnicode_CheckExact(x) && PyUnicode_GET_LENGTH(x) <= 16)) {
            PyObject *kept = PyDict_SetDefault(seen, x, x);
            if (kept == NULL)
                return -1;
            if (kept != x) {
                Py_INCREF(kept);
                PyList_SET_ITEM(v, i, kept);
                Py_DECREF(x);
            }
        } else if (PyList_CheckExact(x) && share(x, seen, depth + 1) < 0) {
            return -1;
        }
    }
    return 0;
}

static PyObject *take(PyObject *self, PyObject *args) {
    PyObject *block, *decode, *types, *ops, *seen;
    Py_ssize_t i, max_depth;
    if (!PyArg_ParseTuple(args, "O!nOO!O!nO!", &PyList_Type, &block, &i, &decode, &PyDict_Type, &types, &PyList_Type,
                          &ops, &max_depth, &PyDict_Type, &seen))
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
        if (rc == 1) {
            PyObject *value = PyDict_GetItemWithError(op, keys[3]);
            rc = value == NULL || share(value, seen, 1) < 0 || PyList_Append(ops, op) < 0 ? -1 : 1;
        }
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


/* Whether a (borrowed) value is absent or None. */
#define NONE(x) ((x) == NULL || (x) == Py_None)

/* One op of check_pairs: 0 if it pairs as it should, -1 to bail out (an error to report, or anything
 * unusual: a process that is not an int, ...). */
static int pair_one(PyObject *ops, Py_ssize_t i, PyObject *busy, PyObject **keys) {
    /* keys: type, f, process, key, invoke, nemesis */
    PyObject *op = PyList_GET_ITEM(ops, i);
    if (!PyDict_CheckExact(op))
        return -1;
    PyObject *proc = PyDict_GetItemWithError(op, keys[2]);
    if (proc == NULL || !PyLong_CheckExact(proc)) {
        if (proc != NULL && PyUnicode_CheckExact(proc) && PyUnicode_Compare(proc, keys[5]) == 0)
            return 0;
        return -1;
    }
    PyObject *typ = PyDict_GetItemWithError(op, keys[0]);
    if (typ == NULL || !PyUnicode_CheckExact(typ))
        return -1;
    PyObject *j = PyDict_GetItemWithError(busy, proc);
    if (j == NULL && PyErr_Occurred())
        return -1;
    if (typ == keys[4] || PyUnicode_Compare(typ, keys[4]) == 0) {
        if (j != NULL)
            return -1;  /* invokes while busy */
        PyObject *pos = PyLong_FromSsize_t(i);
        int rc = pos == NULL ? -1 : PyDict_SetItem(busy, proc, pos);
        Py_XDECREF(pos);
        return rc;
    }
    if (j == NULL)
        return -1;  /* a completion without an invocation */
    Py_ssize_t at = PyLong_AsSsize_t(j);
    if (at < 0 || at >= PyList_GET_SIZE(ops) || !PyDict_CheckExact(PyList_GET_ITEM(ops, at)))
        return -1;
    PyObject *inv = PyList_GET_ITEM(ops, at);
    for (int k = 1; k <= 3; k += 2) {  /* f, then key */
        PyObject *a = PyDict_GetItemWithError(inv, keys[k]);
        PyObject *b = a != NULL || !PyErr_Occurred() ? PyDict_GetItemWithError(op, keys[k]) : NULL;
        if (PyErr_Occurred())
            return -1;
        if ((k == 3 || a != b) && !NONE(a) && !NONE(b)) {  /* f is f; a key is compared with != alone */
            PyObject *ne = PyObject_RichCompare(a, b, Py_NE);
            int differ = ne == NULL ? -1 : PyObject_IsTrue(ne);
            Py_XDECREF(ne);
            if (differ != 0)
                return -1;  /* a mismatch, or an error */
        }
    }
    return PyDict_DelItem(busy, proc);
}

/* pairs(ops) -> True if every client completion follows an invocation of its process with the same f and
 * key and no process invokes while busy, or None: then check_pairs's Python loop runs, and reports. */
static PyObject *pairs(PyObject *self, PyObject *args) {
    PyObject *ops;
    if (!PyArg_ParseTuple(args, "O!", &PyList_Type, &ops))
        return NULL;
    static const char *names[] = {"type", "f", "process", "key", "invoke", "nemesis"};
    PyObject *keys[6] = {NULL};
    PyObject *busy = PyDict_New();
    int bad = busy == NULL;
    for (int k = 0; k < 6 && !bad; k++)
        bad = (keys[k] = PyUnicode_InternFromString(names[k])) == NULL;
    for (Py_ssize_t i = 0; !bad && i < PyList_GET_SIZE(ops); i++)
        bad = pair_one(ops, i, busy, keys) < 0;
    Py_XDECREF(busy);
    for (int k = 0; k < 6; k++)
        Py_XDECREF(keys[k]);
    PyErr_Clear();
    if (bad)
        Py_RETURN_NONE;
    Py_RETURN_TRUE;
}

static PyMethodDef methods[] = {
    {"pairs", pairs, METH_VARARGS, "check_pairs for a history that pairs well, or None (then the Python loop)"},
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
