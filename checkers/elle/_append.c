/* The hot loops of the list-append checker (checkers/elle/append.py) and of detect_kind
 * (checkers/elle/txns.py), compiled.
 *
 * Each function does, for the usual history, exactly what its Python twin does, in the same order (so the
 * same dicts, lists and edges come out, in the same insertion order), and answers None without changing
 * anything the caller gave it when it meets anything else: a micro-op that is not a list of three, a name
 * that is not an exact str, a read of something else than a list, an anomaly to report, an error of any
 * kind. The caller then runs the Python twin from the start, which reports the case as it always did. So
 * a verdict never depends on whether this module is built; tests/test_fast_paths.py compares both on
 * random histories. append.py runs the Python twins alone when this module is not built.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define APPEND_ABI 1

enum { OK = 0, INFO = 1, FAIL = 2 };
enum { F_OTHER = 0, F_APPEND, F_R, F_W };

/* Which micro-op name `f` is; -1 if it is not an exact str (the caller bails out). */
static int mop_name(PyObject *f) {
    if (!PyUnicode_CheckExact(f))
        return -1;
    Py_ssize_t n = PyUnicode_GET_LENGTH(f);
    if (n == 1) {
        Py_UCS4 c = PyUnicode_READ_CHAR(f, 0);
        return c == 'r' ? F_R : c == 'w' ? F_W : F_OTHER;
    }
    if (n == 6 && PyUnicode_CompareWithASCIIString(f, "append") == 0)
        return F_APPEND;
    return F_OTHER;
}

/* Sets d[key] = value; *grew says whether the dict gained an entry. */
static int set_counting(PyObject *d, PyObject *key, PyObject *value, int *grew) {
    Py_ssize_t n0 = PyDict_GET_SIZE(d);
    if (PyDict_SetItem(d, key, value) < 0)
        return -1;
    *grew = PyDict_GET_SIZE(d) != n0;
    return 0;
}

static int push3(PyObject *list, PyObject *a, PyObject *b, PyObject *c) {
    PyObject *t = PyTuple_Pack(3, a, b, c);
    if (t == NULL)
        return -1;
    int rc = PyList_Append(list, t);
    Py_DECREF(t);
    return rc;
}

/* One transaction of _scan (append.py). Returns 0, or -1 to bail out (error or not the usual case). */
static int scan_one(PyObject *tid, long typ, PyObject *mops, PyObject *writer, PyObject *failed,
                    PyObject *inter, PyObject *reads, PyObject *longest, PyObject *dups, PyObject *internal) {
    if (!PyList_CheckExact(mops))
        return -1;
    Py_ssize_t n = PyList_GET_SIZE(mops);
    PyObject *appended = NULL, *keys = NULL;
    int rc = -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *m = PyList_GET_ITEM(mops, i);
        if (!PyList_CheckExact(m) || PyList_GET_SIZE(m) != 3)
            goto done;
        PyObject *k = PyList_GET_ITEM(m, 1), *v = PyList_GET_ITEM(m, 2);
        int f = mop_name(PyList_GET_ITEM(m, 0));
        if (f == F_APPEND) {
            PyObject *kv = PyTuple_Pack(2, k, v);
            int grew;
            if (kv == NULL || set_counting(typ == FAIL ? failed : writer, kv, tid, &grew) < 0) {
                Py_XDECREF(kv);
                goto done;
            }
            Py_DECREF(kv);
            if (!grew && push3(dups, tid, k, v) < 0)
                goto done;
            if (typ == FAIL)
                continue;
            if (appended == NULL && (appended = PyDict_New()) == NULL)
                goto done;
            PyObject *before = PyDict_GetItemWithError(appended, k);
            if (before != NULL) {
                PyObject *key = PyTuple_Pack(2, k, before);
                if (key == NULL || PyDict_SetItem(inter, key, tid) < 0) {
                    Py_XDECREF(key);
                    goto done;
                }
                Py_DECREF(key);
            } else if (PyErr_Occurred()) {
                goto done;
            }
            if (PyDict_SetItem(appended, k, v) < 0)
                goto done;
        } else if (f == F_R) {
            if (typ != OK)
                continue;
            PyObject *val = v;
            if (v == Py_None) {
                if ((val = PyList_New(0)) == NULL)
                    goto done;
            } else if (PyList_CheckExact(v)) {
                Py_INCREF(val);
            } else {
                goto done;
            }
            int bad = push3(reads, tid, k, val) < 0;
            if (!bad) {
                PyObject *cur = PyDict_GetItemWithError(longest, k);
                if (cur == NULL && PyErr_Occurred())
                    bad = 1;
                else if (cur == NULL || !PyList_CheckExact(cur) || PyList_GET_SIZE(val) > PyList_GET_SIZE(cur))
                    bad = cur != NULL && !PyList_CheckExact(cur) ? 1 : PyDict_SetItem(longest, k, val) < 0;
            }
            Py_DECREF(val);
            if (bad)
                goto done;
        } else if (f == F_W && typ == FAIL) {
            continue;
        } else {
            goto done;  /* a write, or an unknown name: append.py says which */
        }
    }
    if (typ == OK && n > 1) {
        if ((keys = PySet_New(NULL)) == NULL)
            goto done;
        for (Py_ssize_t i = 0; i < n; i++)
            if (PySet_Add(keys, PyList_GET_ITEM(PyList_GET_ITEM(mops, i), 1)) < 0)
                goto done;
        if (PySet_GET_SIZE(keys) < n && PyList_Append(internal, tid) < 0)
            goto done;
    }
    rc = 0;
done:
    Py_XDECREF(appended);
    Py_XDECREF(keys);
    return rc;
}

/* scan(mops, types, writer, failed, inter, reads, longest, dups, internal) -> True, or None to bail out.
 * The loop of append._scan: fills the empty containers given; `internal` gets the transactions whose
 * micro-ops name a key twice (append._internal's to look at, in order). */
static PyObject *scan(PyObject *self, PyObject *args) {
    PyObject *mops, *types, *writer, *failed, *inter, *reads, *longest, *dups, *internal;
    if (!PyArg_ParseTuple(args, "O!O!O!O!O!O!O!O!O!", &PyList_Type, &mops, &PyList_Type, &types, &PyDict_Type,
                          &writer, &PyDict_Type, &failed, &PyDict_Type, &inter, &PyList_Type, &reads,
                          &PyDict_Type, &longest, &PyList_Type, &dups, &PyList_Type, &internal))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(mops);
    if (PyList_GET_SIZE(types) != n)
        Py_RETURN_NONE;
    for (Py_ssize_t t = 0; t < n; t++) {
        long typ = PyLong_AsLong(PyList_GET_ITEM(types, t));
        PyObject *tid = PyLong_FromSsize_t(t);
        int rc = tid == NULL ? -1 : scan_one(tid, typ, PyList_GET_ITEM(mops, t), writer, failed, inter, reads,
                                             longest, dups, internal);
        Py_XDECREF(tid);
        if (rc < 0) {
            PyErr_Clear();
            Py_RETURN_NONE;
        }
    }
    Py_RETURN_TRUE;
}

/* d.setdefault(key, []).append(value) */
static int add_to(PyObject *d, PyObject *key, PyObject *value) {
    PyObject *lst = PyDict_GetItemWithError(d, key);
    if (lst == NULL) {
        if (PyErr_Occurred() || (lst = PyList_New(0)) == NULL)
            return -1;
        int rc = PyDict_SetItem(d, key, lst);
        Py_DECREF(lst);
        if (rc < 0)
            return -1;
    }
    return PyList_Append(lst, value);
}

/* Whether read `v` (n > 0 elements) is a prefix of `full` (append._reads's `compatible`): 1, 0, or -1. */
static int is_prefix(PyObject *v, PyObject *full) {
    Py_ssize_t n = PyList_GET_SIZE(v);
    if (v == full)
        return 1;
    if (n > PyList_GET_SIZE(full))
        return 0;
    /* `v[-1] == full[n - 1]`: ==, without the identity shortcut of the list comparison that follows */
    PyObject *last = PyObject_RichCompare(PyList_GET_ITEM(v, n - 1), PyList_GET_ITEM(full, n - 1), Py_EQ);
    int eq = last == NULL ? -1 : PyObject_IsTrue(last);
    Py_XDECREF(last);
    for (Py_ssize_t i = 0; eq == 1 && i < n; i++)
        eq = PyObject_RichCompareBool(PyList_GET_ITEM(v, i), PyList_GET_ITEM(full, i), Py_EQ);
    return eq;
}

/* One read of append._reads; -1 to bail out. */
static int read_one(PyObject *r, PyObject *longest, PyObject *writer, PyObject *inter, PyObject *fmin,
                    PyObject *init, PyObject *wr_s, PyObject *wr_d, PyObject *readers) {
    if (!PyTuple_CheckExact(r) || PyTuple_GET_SIZE(r) != 3)
        return -1;
    PyObject *t = PyTuple_GET_ITEM(r, 0), *k = PyTuple_GET_ITEM(r, 1), *v = PyTuple_GET_ITEM(r, 2);
    if (!PyList_CheckExact(v))
        return -1;
    Py_ssize_t n = PyList_GET_SIZE(v);
    PyObject *kv = PyTuple_Pack(2, k, n ? PyList_GET_ITEM(v, n - 1) : init);
    if (kv == NULL)
        return -1;
    int rc = -1;
    if (n == 0) {
        rc = add_to(readers, kv, t);
        goto done;
    }
    PyObject *full = PyDict_GetItemWithError(longest, k);
    if (full == NULL || !PyList_CheckExact(full) || is_prefix(v, full) != 1)
        goto done;  /* an incompatible order: append.py reports it */
    PyObject *w = PyDict_GetItemWithError(writer, kv);
    if (w != NULL) {
        int same = PyObject_RichCompareBool(w, t, Py_EQ);
        if (same < 0 || (!same && (PyList_Append(wr_s, w) < 0 || PyList_Append(wr_d, t) < 0)))
            goto done;
    } else if (PyErr_Occurred()) {
        goto done;
    }
    PyObject *i = PyDict_GET_SIZE(inter) ? PyDict_GetItemWithError(inter, kv) : NULL;
    if (i != NULL) {
        if (PyObject_RichCompareBool(i, t, Py_EQ) != 1)
            goto done;  /* G1b, or an error */
    } else if (PyErr_Occurred()) {
        goto done;
    }
    PyObject *fm = PyDict_GET_SIZE(fmin) ? PyDict_GetItemWithError(fmin, k) : NULL;
    if (fm != NULL) {
        long m = PyLong_AsLong(fm);
        if ((m == -1 && PyErr_Occurred()) || n > m)
            goto done;  /* may have read an aborted append (G1a) */
    } else if (PyErr_Occurred()) {
        goto done;
    }
    rc = add_to(readers, kv, t);
done:
    Py_DECREF(kv);
    return rc;
}

/* reads(reads, longest, writer, inter, fmin, INIT, wr_s, wr_d, readers) -> True, or None to bail out.
 * The loop of append._reads for a history whose reads are all prefixes of the longest one, with no G1a
 * or G1b: the wr edges go onto the (empty) lists wr_s/wr_d, the readers of each version into `readers`. */
static PyObject *reads(PyObject *self, PyObject *args) {
    PyObject *rs, *longest, *writer, *inter, *fmin, *init, *wr_s, *wr_d, *readers;
    if (!PyArg_ParseTuple(args, "O!O!O!O!O!OO!O!O!", &PyList_Type, &rs, &PyDict_Type, &longest, &PyDict_Type,
                          &writer, &PyDict_Type, &inter, &PyDict_Type, &fmin, &init, &PyList_Type, &wr_s,
                          &PyList_Type, &wr_d, &PyDict_Type, &readers))
        return NULL;
    for (Py_ssize_t j = 0; j < PyList_GET_SIZE(rs); j++) {
        if (read_one(PyList_GET_ITEM(rs, j), longest, writer, inter, fmin, init, wr_s, wr_d, readers) < 0) {
            PyErr_Clear();
            Py_RETURN_NONE;
        }
    }
    Py_RETURN_TRUE;
}

/* The rw edges from the readers of version `prev` to the writer `w` of the next; 0 or -1. */
static int rw_edges(PyObject *readers, PyObject *prev, PyObject *w, PyObject *rw_s, PyObject *rw_d) {
    PyObject *rs = PyDict_GetItemWithError(readers, prev);
    if (rs == NULL)
        return PyErr_Occurred() ? -1 : 0;
    if (!PyList_CheckExact(rs))
        return -1;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(rs); i++) {
        PyObject *r = PyList_GET_ITEM(rs, i);
        int same = PyObject_RichCompareBool(r, w, Py_EQ);
        if (same < 0 || (!same && (PyList_Append(rw_s, r) < 0 || PyList_Append(rw_d, w) < 0)))
            return -1;
    }
    return 0;
}

static int ww_edge(PyObject *a, PyObject *b, PyObject *ww_s, PyObject *ww_d) {
    int same = PyObject_RichCompareBool(a, b, Py_EQ);
    if (same < 0 || (!same && (PyList_Append(ww_s, a) < 0 || PyList_Append(ww_d, b) < 0)))
        return -1;
    return 0;
}

/* One key's version order (the first loop of append._versions); -1 to bail out (garbage, or an error). */
static int order_one(PyObject *k, PyObject *order, PyObject *writer, PyObject *failed, PyObject *readers,
                     PyObject *init, PyObject *ww_s, PyObject *ww_d, PyObject *rw_s, PyObject *rw_d) {
    if (!PyList_CheckExact(order))
        return -1;
    PyObject *prev_w = NULL;  /* borrowed from writer */
    PyObject *prev = PyTuple_Pack(2, k, init);
    if (prev == NULL)
        return -1;
    int rc = -1;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(order); i++) {
        PyObject *kv = PyTuple_Pack(2, k, PyList_GET_ITEM(order, i));
        if (kv == NULL)
            goto done;
        PyObject *w = PyDict_GetItemWithError(writer, kv);
        if (w == NULL) {
            /* garbage (a value no one appended) is append.py's to report; a failed append is skipped */
            if (PyErr_Occurred() || PyDict_Contains(failed, kv) != 1) {
                Py_DECREF(kv);
                goto done;
            }
        } else if ((prev_w != NULL && ww_edge(prev_w, w, ww_s, ww_d) < 0) ||
                   rw_edges(readers, prev, w, rw_s, rw_d) < 0) {
            Py_DECREF(kv);
            goto done;
        }
        prev_w = w;
        Py_SETREF(prev, kv);
    }
    rc = 0;
done:
    Py_DECREF(prev);
    return rc;
}

/* One append no read saw (the second loop of append._versions); 0, or -1 to bail out. */
static int unseen_one(PyObject *kv, PyObject *w, PyObject *writer, PyObject *order, PyObject *pos,
                      PyObject *readers, PyObject *init, PyObject *ww_s, PyObject *ww_d, PyObject *rw_s,
                      PyObject *rw_d) {
    if (!PyTuple_CheckExact(kv) || PyTuple_GET_SIZE(kv) != 2)
        return -1;
    PyObject *k = PyTuple_GET_ITEM(kv, 0), *v = PyTuple_GET_ITEM(kv, 1);
    PyObject *p = PyDict_GetItemWithError(pos, k);
    if (p == NULL && PyErr_Occurred())
        return -1;
    if (p != NULL) {
        int in = PyDict_Contains(p, v);
        if (in < 0)
            return -1;
        if (in)
            return 0;
    }
    PyObject *ko = PyDict_GetItemWithError(order, k);
    if (ko == NULL && PyErr_Occurred())
        return -1;
    if (ko != NULL && !PyList_CheckExact(ko))
        return -1;
    int has = ko != NULL && PyList_GET_SIZE(ko) > 0;
    PyObject *prev = PyTuple_Pack(2, k, has ? PyList_GET_ITEM(ko, PyList_GET_SIZE(ko) - 1) : init);
    if (prev == NULL)
        return -1;
    int rc = -1;
    PyObject *pw = has ? PyDict_GetItemWithError(writer, prev) : NULL;
    if (pw == NULL && PyErr_Occurred())
        goto done;
    if (pw != NULL && ww_edge(pw, w, ww_s, ww_d) < 0)
        goto done;
    rc = rw_edges(readers, prev, w, rw_s, rw_d);
done:
    Py_DECREF(prev);
    return rc;
}

/* versions(order, pos, writer, failed, readers, INIT, ww_s, ww_d, rw_s, rw_d) -> True, or None to bail out.
 * append._versions for a history without garbage reads: the ww and rw edges onto the (empty) lists. */
static PyObject *versions(PyObject *self, PyObject *args) {
    PyObject *order, *pos, *writer, *failed, *readers, *init, *ww_s, *ww_d, *rw_s, *rw_d;
    if (!PyArg_ParseTuple(args, "O!O!O!O!O!OO!O!O!O!", &PyDict_Type, &order, &PyDict_Type, &pos, &PyDict_Type,
                          &writer, &PyDict_Type, &failed, &PyDict_Type, &readers, &init, &PyList_Type, &ww_s,
                          &PyList_Type, &ww_d, &PyList_Type, &rw_s, &PyList_Type, &rw_d))
        return NULL;
    Py_ssize_t i = 0;
    PyObject *k, *o;
    while (PyDict_Next(order, &i, &k, &o)) {
        if (order_one(k, o, writer, failed, readers, init, ww_s, ww_d, rw_s, rw_d) < 0)
            goto bail;
    }
    i = 0;
    while (PyDict_Next(writer, &i, &k, &o)) {
        if (unseen_one(k, o, writer, order, pos, readers, init, ww_s, ww_d, rw_s, rw_d) < 0)
            goto bail;
    }
    Py_RETURN_TRUE;
bail:
    PyErr_Clear();
    Py_RETURN_NONE;
}

/* Whether op's f is "txn" or None and its process not "nemesis" (txns._is_txn); -1 on error. */
static int is_txn(PyObject *op, PyObject *s_f, PyObject *s_process, PyObject *s_txn, PyObject *s_nemesis) {
    PyObject *f = PyDict_GetItemWithError(op, s_f);
    if (f == NULL && PyErr_Occurred())
        return -1;
    if (f != NULL && f != Py_None) {
        int eq = PyObject_RichCompareBool(f, s_txn, Py_EQ);
        if (eq <= 0)
            return eq;
    }
    PyObject *p = PyDict_GetItemWithError(op, s_process);
    if (p == NULL)
        return PyErr_Occurred() ? -1 : 1;
    int nem = PyObject_RichCompareBool(p, s_nemesis, Py_EQ);
    return nem < 0 ? -1 : !nem;
}

/* detect(ops) -> (seen, has_append, has_w, list_reads), False when a transaction's value is not a list of
 * [f k v] micro-ops (detect_kind's None), or None to bail out (an op that is not a dict, a name that is not
 * an exact str, an error): the scan of txns.detect_kind. */
static PyObject *detect(PyObject *self, PyObject *args) {
    PyObject *ops;
    if (!PyArg_ParseTuple(args, "O!", &PyList_Type, &ops))
        return NULL;
    PyObject *s_f = PyUnicode_InternFromString("f"), *s_process = PyUnicode_InternFromString("process"),
             *s_value = PyUnicode_InternFromString("value"), *s_txn = PyUnicode_InternFromString("txn"),
             *s_nemesis = PyUnicode_InternFromString("nemesis");
    PyObject *result = NULL;
    int seen = 0, has_append = 0, has_w = 0, list_reads = 0, bad = 0;
    if (!s_f || !s_process || !s_value || !s_txn || !s_nemesis)
        goto bail;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(ops) && !bad; i++) {
        PyObject *op = PyList_GET_ITEM(ops, i);
        if (!PyDict_CheckExact(op))
            goto bail;
        int txn = is_txn(op, s_f, s_process, s_txn, s_nemesis);
        if (txn < 0)
            goto bail;
        if (!txn)
            continue;
        PyObject *value = PyDict_GetItemWithError(op, s_value);
        if (value == NULL && PyErr_Occurred())
            goto bail;
        if (value == NULL || value == Py_None || (PyList_CheckExact(value) && PyList_GET_SIZE(value) == 0))
            continue;
        if (!PyList_CheckExact(value)) {
            if (PyList_Check(value) || PyTuple_Check(value))
                goto bail;  /* a subclass, or a tuple: the Python scan */
            bad = 1;
            break;
        }
        for (Py_ssize_t j = 0; j < PyList_GET_SIZE(value); j++) {
            PyObject *m = PyList_GET_ITEM(value, j);
            if (!PyList_CheckExact(m) && !PyTuple_CheckExact(m)) {
                if (PyList_Check(m) || PyTuple_Check(m))
                    goto bail;
                bad = 1;
                break;
            }
            if (PySequence_Fast_GET_SIZE(m) != 3) {
                bad = 1;
                break;
            }
            PyObject *mf = PySequence_Fast_GET_ITEM(m, 0);
            int f = mop_name(mf);
            if (f < 0)
                goto bail;
            if (f == F_OTHER) {
                bad = 1;
                break;
            }
            has_append |= f == F_APPEND;
            has_w |= f == F_W;
            if (f == F_R && !list_reads) {
                PyObject *v = PySequence_Fast_GET_ITEM(m, 2);
                list_reads = PyList_Check(v) || PyTuple_Check(v);
            }
        }
        seen = 1;
    }
    result = bad ? Py_NewRef(Py_False) : Py_BuildValue("(iiii)", seen, has_append, has_w, list_reads);
    goto done;
bail:
    PyErr_Clear();
    result = Py_NewRef(Py_None);
done:
    Py_XDECREF(s_f);
    Py_XDECREF(s_process);
    Py_XDECREF(s_value);
    Py_XDECREF(s_txn);
    Py_XDECREF(s_nemesis);
    return result;
}


/* Whether `s` is an exact str equal to the ASCII text `what`. */
static int is_text(PyObject *s, const char *what) {
    return PyUnicode_CheckExact(s) && PyUnicode_CompareWithASCIIString(s, what) == 0;
}

/* A transaction's micro-ops (txns._mops) when they are a list or None; NULL (no error set) otherwise. */
static PyObject *mops_of(PyObject *op, PyObject *s_value) {
    PyObject *v = PyDict_GetItemWithError(op, s_value);
    if (v != NULL && PyList_CheckExact(v))
        return Py_NewRef(v);
    if ((v == NULL && !PyErr_Occurred()) || v == Py_None)
        return PyList_New(0);
    return NULL;
}

typedef struct {
    PyObject *types, *mops, *inv, *cmp, *inv_index, *process, *ops;
} TxLists;

/* Appends one transaction's entries to the parallel lists; 0 or -1. */
static int tx_append(TxLists *tx, long typ, PyObject *mops, Py_ssize_t inv, PyObject *index, PyObject *proc,
                     PyObject *op) {
    PyObject *ty = PyLong_FromLong(typ), *iv = PyLong_FromSsize_t(inv), *cm = PyLong_FromLong(-1);
    int rc = -1;
    if (ty && iv && cm && PyList_Append(tx->types, ty) == 0 && PyList_Append(tx->mops, mops) == 0 &&
        PyList_Append(tx->inv, iv) == 0 && PyList_Append(tx->cmp, cm) == 0 &&
        PyList_Append(tx->inv_index, index) == 0 && PyList_Append(tx->process, proc) == 0 &&
        PyList_Append(tx->ops, op) == 0)
        rc = 0;
    Py_XDECREF(ty);
    Py_XDECREF(iv);
    Py_XDECREF(cm);
    return rc;
}

/* One completion of txns.parse: pairs it with its process's open invocation; 0 or -1 to bail out. */
static int complete(TxLists *tx, Py_ssize_t pos, PyObject *op, long code, PyObject *proc, PyObject *pending,
                    PyObject *s_value) {
    PyObject *t = PyDict_GetItemWithError(pending, proc);
    if (t == NULL && PyErr_Occurred())
        return -1;
    if (t != NULL) {
        Py_INCREF(t);
        if (PyDict_DelItem(pending, proc) < 0) {
            Py_DECREF(t);
            return -1;
        }
    }
    Py_ssize_t ti;
    if (t == NULL) {  /* a completion alone (txns._completion_only) */
        PyObject *m = mops_of(op, s_value);
        if (m == NULL)
            return -1;
        int rc = tx_append(tx, INFO, m, -1, Py_None, proc, op);
        Py_DECREF(m);
        if (rc < 0)
            return -1;
        ti = PyList_GET_SIZE(tx->types) - 1;
    } else {
        ti = PyLong_AsSsize_t(t);
        Py_DECREF(t);
        if (ti < 0)
            return -1;
    }
    PyObject *c = PyLong_FromLong(code);
    if (c == NULL || PyList_SetItem(tx->types, ti, c) < 0 || PyList_SetItem(tx->ops, ti, Py_NewRef(op)) < 0)
        return -1;
    if (code == INFO)
        return 0;
    PyObject *p = PyLong_FromSsize_t(pos);
    if (p == NULL || PyList_SetItem(tx->cmp, ti, p) < 0)
        return -1;
    if (code != OK)
        return 0;
    PyObject *m = mops_of(op, s_value);
    return m == NULL ? -1 : PyList_SetItem(tx->mops, ti, m);
}

/* One op of txns.parse; 0, 1 if it is not a transaction, or -1 to bail out. */
static int parse_one(TxLists *tx, Py_ssize_t pos, PyObject *op, PyObject *pending, PyObject **keys) {
    /* keys: f, process, type, value, index, txn, nemesis */
    if (!PyDict_CheckExact(op))
        return -1;
    PyObject *f = PyDict_GetItemWithError(op, keys[0]);
    PyObject *proc = f != NULL || !PyErr_Occurred() ? PyDict_GetItemWithError(op, keys[1]) : NULL;
    if (PyErr_Occurred())
        return -1;
    if (proc == NULL)
        proc = Py_None;
    int nemesis = PyObject_RichCompareBool(proc, keys[6], Py_EQ);
    if (nemesis < 0 || (f != NULL && f != Py_None && !is_text(f, "txn") && PyUnicode_CheckExact(f) == 0))
        return -1;  /* an f that is not a str: the Python loop */
    if (nemesis || (f != NULL && f != Py_None && !is_text(f, "txn")))
        return nemesis ? 2 : 1;
    PyObject *typ = PyDict_GetItemWithError(op, keys[2]);
    if (typ == NULL || !PyUnicode_CheckExact(typ))
        return -1;
    if (is_text(typ, "invoke")) {
        PyObject *idx = PyDict_GetItemWithError(op, keys[4]);
        if (idx == NULL && PyErr_Occurred())
            return -1;
        PyObject *pidx = idx == NULL ? PyLong_FromSsize_t(pos) : Py_NewRef(idx);
        PyObject *t = PyLong_FromSsize_t(PyList_GET_SIZE(tx->types));
        PyObject *m = mops_of(op, keys[3]);
        int rc = -1;
        if (pidx && t && m && PyDict_SetItem(pending, proc, t) == 0 && tx_append(tx, INFO, m, pos, pidx, proc, op) == 0)
            rc = 0;
        Py_XDECREF(pidx);
        Py_XDECREF(t);
        Py_XDECREF(m);
        return rc;
    }
    long code = is_text(typ, "ok") ? OK : is_text(typ, "info") ? INFO : is_text(typ, "fail") ? FAIL : -1;
    if (code < 0)
        return -1;  /* txns.parse names the op */
    return complete(tx, pos, op, code, proc, pending, keys[3]);
}

/* parse(history, types, mops, inv, cmp, inv_index, process, ops) -> the count of skipped client ops, or None
 * to bail out: txns.parse's loop, filling the (empty) parallel lists of a Txns. */
static PyObject *parse(PyObject *self, PyObject *args) {
    PyObject *history;
    TxLists tx;
    if (!PyArg_ParseTuple(args, "O!O!O!O!O!O!O!O!", &PyList_Type, &history, &PyList_Type, &tx.types, &PyList_Type,
                          &tx.mops, &PyList_Type, &tx.inv, &PyList_Type, &tx.cmp, &PyList_Type, &tx.inv_index,
                          &PyList_Type, &tx.process, &PyList_Type, &tx.ops))
        return NULL;
    static const char *names[] = {"f", "process", "type", "value", "index", "txn", "nemesis"};
    PyObject *keys[7] = {NULL};
    PyObject *pending = PyDict_New(), *result = NULL;
    int ok = pending != NULL;
    for (int i = 0; i < 7 && ok; i++)
        ok = (keys[i] = PyUnicode_InternFromString(names[i])) != NULL;
    Py_ssize_t skipped = 0;
    for (Py_ssize_t pos = 0; ok && pos < PyList_GET_SIZE(history); pos++) {
        int rc = parse_one(&tx, pos, PyList_GET_ITEM(history, pos), pending, keys);
        ok = rc >= 0;
        skipped += rc == 1;
    }
    if (ok)
        result = PyLong_FromSsize_t(skipped);
    if (result == NULL) {
        PyErr_Clear();
        result = Py_NewRef(Py_None);
    }
    Py_XDECREF(pending);
    for (int i = 0; i < 7; i++)
        Py_XDECREF(keys[i]);
    return result;
}

/* Whether list `got` holds `x` (`x in got`): 1, 0, or -1. */
static int holds(PyObject *got, PyObject *x) {
    return PySequence_Contains(got, x);
}

/* Whether a committed transaction agrees with its own reads and appends (append._internal), its updates
 * noted in `found` as (key, version length, last element or INIT); 1 if it does, 0 if append.py has an
 * anomaly to report (or anything unusual), -1 on error. */
static int internal_one(PyObject *mops, PyObject *init, PyObject *found) {
    PyObject *state = PyDict_New(), *wrote = PySet_New(NULL);  /* key -> [known, list] */
    int rc = -1;
    if (state == NULL || wrote == NULL)
        goto done;
    Py_ssize_t n = PyList_GET_SIZE(mops);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *m = PyList_GET_ITEM(mops, i);
        PyObject *k = PyList_GET_ITEM(m, 1), *v = PyList_GET_ITEM(m, 2);
        PyObject *s = PyDict_GetItemWithError(state, k);
        if (s == NULL && PyErr_Occurred())
            goto done;
        if (mop_name(PyList_GET_ITEM(m, 0)) == F_APPEND) {
            PyObject *exp = s == NULL ? PyList_New(0) : PyTuple_GET_ITEM(s, 1);
            int known = s != NULL && PyTuple_GET_ITEM(s, 0) == Py_True;
            if (s == NULL) {
                if (exp == NULL || PySet_Add(wrote, k) < 0)
                    goto done;
            } else {
                int in = PySet_Contains(wrote, k);
                if (in < 0)
                    goto done;
                if (!in) {  /* the first append of k follows a read of k: an update of that version */
                    Py_ssize_t e = PyList_GET_SIZE(exp);
                    PyObject *u = Py_BuildValue("(OnO)", k, e, e ? PyList_GET_ITEM(exp, e - 1) : init);
                    if (PySet_Add(wrote, k) < 0 || u == NULL || PyList_Append(found, u) < 0) {
                        Py_XDECREF(u);
                        goto done;
                    }
                    Py_DECREF(u);
                }
                exp = PyList_GetSlice(exp, 0, PyList_GET_SIZE(exp));
                if (exp == NULL)
                    goto done;
            }
            PyObject *ns = PyList_Append(exp, v) < 0 ? NULL : Py_BuildValue("(ON)", known ? Py_True : Py_False, exp);
            if (ns == NULL || PyDict_SetItem(state, k, ns) < 0) {
                Py_XDECREF(ns);
                goto done;
            }
            Py_DECREF(ns);
            continue;
        }
        PyObject *got = v == Py_None ? PyList_New(0) : PyList_GetSlice(v, 0, PyList_GET_SIZE(v));
        if (got == NULL)
            goto done;
        if (s != NULL) {
            PyObject *exp = PyTuple_GET_ITEM(s, 1);
            Py_ssize_t e = PyList_GET_SIZE(exp), g = PyList_GET_SIZE(got);
            int same = -1;
            if (PyTuple_GET_ITEM(s, 0) == Py_True) {
                same = PyObject_RichCompareBool(got, exp, Py_EQ);
            } else if (g < e) {
                same = 0;
            } else {
                PyObject *tail = PyList_GetSlice(got, g - e, g);
                same = tail == NULL ? -1 : PyObject_RichCompareBool(tail, exp, Py_EQ);
                Py_XDECREF(tail);
            }
            if (same != 1) {
                Py_DECREF(got);
                rc = same < 0 ? -1 : 0;
                goto done;
            }
        } else {
            for (Py_ssize_t j = i + 1; j < n; j++) {  /* a later append of k whose value this read saw */
                PyObject *later = PyList_GET_ITEM(mops, j);
                int eq = mop_name(PyList_GET_ITEM(later, 0)) == F_APPEND
                             ? PyObject_RichCompareBool(PyList_GET_ITEM(later, 1), k, Py_EQ) : 0;
                if (eq == 1)
                    eq = holds(got, PyList_GET_ITEM(later, 2));
                if (eq != 0) {
                    Py_DECREF(got);
                    rc = eq < 0 ? -1 : 0;
                    goto done;
                }
            }
        }
        PyObject *ns = Py_BuildValue("(ON)", Py_True, got);
        if (ns == NULL || PyDict_SetItem(state, k, ns) < 0) {
            Py_XDECREF(ns);
            goto done;
        }
        Py_DECREF(ns);
    }
    rc = 1;
done:
    Py_XDECREF(state);
    Py_XDECREF(wrote);
    return rc;
}

/* internal(mops, ts, start, INIT, updaters) -> i: append._internal for ts[start], ts[start + 1], ... (their
 * updates go into `updaters` in order) up to ts[i], the first one append.py must look at (an internal
 * inconsistency or a future read to report, or anything unusual), or len(ts) when none is left. */
static PyObject *internal(PyObject *self, PyObject *args) {
    PyObject *mops, *ts, *init, *updaters;
    Py_ssize_t i;
    if (!PyArg_ParseTuple(args, "O!O!nOO!", &PyList_Type, &mops, &PyList_Type, &ts, &i, &init, &PyDict_Type,
                          &updaters))
        return NULL;
    PyObject *found = PyList_New(0);
    if (found == NULL)
        return NULL;
    for (; i < PyList_GET_SIZE(ts); i++) {
        PyObject *t = PyList_GET_ITEM(ts, i);
        Py_ssize_t ti = PyLong_AsSsize_t(t);
        if (ti < 0 || ti >= PyList_GET_SIZE(mops) || !PyList_CheckExact(PyList_GET_ITEM(mops, ti)) ||
            PyList_SetSlice(found, 0, PyList_GET_SIZE(found), NULL) < 0 ||
            internal_one(PyList_GET_ITEM(mops, ti), init, found) != 1) {
            PyErr_Clear();
            break;
        }
        for (Py_ssize_t j = 0; j < PyList_GET_SIZE(found); j++) {
            if (add_to(updaters, PyList_GET_ITEM(found, j), t) < 0) {
                Py_DECREF(found);
                return NULL;
            }
        }
    }
    Py_DECREF(found);
    return PyLong_FromSsize_t(i);
}

static PyMethodDef methods[] = {
    {"scan", scan, METH_VARARGS, "append._scan's loop, or None to bail out"},
    {"reads", reads, METH_VARARGS, "append._reads's loop, or None to bail out"},
    {"versions", versions, METH_VARARGS, "append._versions, or None to bail out"},
    {"parse", parse, METH_VARARGS, "txns.parse's loop, or None to bail out"},
    {"internal", internal, METH_VARARGS, "append._internal for the usual transaction"},
    {"detect", detect, METH_VARARGS, "txns.detect_kind's scan, or None to bail out"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_append", NULL, -1, methods};

PyMODINIT_FUNC PyInit__append(void) {
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && PyModule_AddIntConstant(m, "ABI", APPEND_ABI) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
