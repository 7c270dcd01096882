/* Strongly connected components for the Elle-class checkers (checkers/elle/graph.py).
 *
 * Tarjan's algorithm, iterative (an explicit stack of (node, next edge)), over the graph given as two
 * int64 buffers of edge sources and destinations, turned into adjacency arrays by a counting sort.
 * It answers what scipy.sparse.csgraph.connected_components(connection="strong") answers, without
 * importing scipy: that import was a tenth of `faultline check`'s time on a large history, and far more
 * on a loaded machine. graph.py falls back to scipy when this module is not built.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define SCC_ABI 1

static int get_int64(PyObject *obj, Py_buffer *view, const char *what) {
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
        return -1;
    if (view->itemsize != 8 || view->format == NULL || strchr("qlQL", view->format[0]) == NULL ||
        view->format[1] != '\0') {
        PyErr_Format(PyExc_TypeError, "%s: expected a contiguous buffer of int64", what);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

/* labels(n, src, dst) -> (k, bytes of n int64 labels): the component of each node, numbered 0..k-1. */
static PyObject *scc_labels(PyObject *self, PyObject *args) {
    Py_ssize_t n;
    PyObject *src_obj, *dst_obj;
    if (!PyArg_ParseTuple(args, "nOO", &n, &src_obj, &dst_obj))
        return NULL;
    if (n < 0) {
        PyErr_SetString(PyExc_ValueError, "negative node count");
        return NULL;
    }
    Py_buffer sb, db;
    if (get_int64(src_obj, &sb, "src") < 0)
        return NULL;
    if (get_int64(dst_obj, &db, "dst") < 0) {
        PyBuffer_Release(&sb);
        return NULL;
    }
    PyObject *result = NULL, *out = NULL;
    Py_ssize_t m = sb.len / 8;
    const int64_t *src = sb.buf, *dst = db.buf;
    int64_t *start = NULL, *adj = NULL, *index = NULL, *low = NULL, *stack = NULL, *cs_node = NULL,
            *cs_edge = NULL;
    char *on = NULL;
    if (db.len != sb.len) {
        PyErr_SetString(PyExc_ValueError, "src and dst differ in length");
        goto done;
    }
    for (Py_ssize_t e = 0; e < m; e++) {
        if (src[e] < 0 || src[e] >= n || dst[e] < 0 || dst[e] >= n) {
            PyErr_SetString(PyExc_ValueError, "an edge names a node out of range");
            goto done;
        }
    }
    out = PyBytes_FromStringAndSize(NULL, n * 8);
    start = PyMem_Calloc(n + 1, sizeof(int64_t));
    adj = PyMem_Malloc((m ? m : 1) * sizeof(int64_t));
    index = PyMem_Malloc((n ? n : 1) * sizeof(int64_t));
    low = PyMem_Malloc((n ? n : 1) * sizeof(int64_t));
    stack = PyMem_Malloc((n ? n : 1) * sizeof(int64_t));
    cs_node = PyMem_Malloc((n ? n : 1) * sizeof(int64_t));
    cs_edge = PyMem_Malloc((n ? n : 1) * sizeof(int64_t));
    on = PyMem_Calloc(n ? n : 1, 1);
    if (!out || !start || !adj || !index || !low || !stack || !cs_node || !cs_edge || !on) {
        PyErr_NoMemory();
        goto done;
    }
    int64_t *label = (int64_t *)PyBytes_AS_STRING(out);
    /* adjacency by counting sort: start[v]..start[v+1] are v's successors */
    for (Py_ssize_t e = 0; e < m; e++)
        start[src[e] + 1]++;
    for (Py_ssize_t v = 0; v < n; v++)
        start[v + 1] += start[v];
    memcpy(cs_edge, start, n * sizeof(int64_t)); /* fill positions, reused as the call stack later */
    for (Py_ssize_t e = 0; e < m; e++)
        adj[cs_edge[src[e]]++] = dst[e];
    for (Py_ssize_t v = 0; v < n; v++)
        index[v] = -1;
    int64_t counter = 0, sp = 0, k = 0;
    for (Py_ssize_t root = 0; root < n; root++) {
        if (index[root] >= 0)
            continue;
        Py_ssize_t top = 0;
        cs_node[0] = root;
        cs_edge[0] = start[root];
        index[root] = low[root] = counter++;
        stack[sp++] = root;
        on[root] = 1;
        while (top >= 0) {
            int64_t v = cs_node[top];
            if (cs_edge[top] < start[v + 1]) {
                int64_t w = adj[cs_edge[top]++];
                if (index[w] < 0) {
                    index[w] = low[w] = counter++;
                    stack[sp++] = w;
                    on[w] = 1;
                    top++;
                    cs_node[top] = w;
                    cs_edge[top] = start[w];
                } else if (on[w] && index[w] < low[v]) {
                    low[v] = index[w];
                }
                continue;
            }
            if (low[v] == index[v]) { /* v roots a component: pop it */
                int64_t w;
                do {
                    w = stack[--sp];
                    on[w] = 0;
                    label[w] = k;
                } while (w != v);
                k++;
            }
            top--;
            if (top >= 0 && low[v] < low[cs_node[top]])
                low[cs_node[top]] = low[v];
        }
    }
    result = Py_BuildValue("(LO)", (long long)k, out);
done:
    Py_XDECREF(out);
    PyMem_Free(start);
    PyMem_Free(adj);
    PyMem_Free(index);
    PyMem_Free(low);
    PyMem_Free(stack);
    PyMem_Free(cs_node);
    PyMem_Free(cs_edge);
    PyMem_Free(on);
    PyBuffer_Release(&sb);
    PyBuffer_Release(&db);
    return result;
}

static PyMethodDef scc_methods[] = {
    {"labels", scc_labels, METH_VARARGS,
     "labels(n, src, dst) -> (k, bytes): each node's strongly connected component, as n int64 values 0..k-1"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef sccmodule = {PyModuleDef_HEAD_INIT, "_scc", "Strongly connected components.", -1,
                                       scc_methods};

PyMODINIT_FUNC PyInit__scc(void) {
    PyObject *m = PyModule_Create(&sccmodule);
    if (m != NULL && PyModule_AddIntConstant(m, "ABI", SCC_ABI) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
