/* The compiled core of the linearizability search (checkers/linearizability.py).
 *
 * The same algorithm as search_py, on the same integer tables: events in a
 * doubly linked list, a stack of linearized calls, and a memo of
 * (linearized bitset, state id) in an open-addressing hash set. The bitset's
 * hash is kept incrementally (an XOR of one random word per op), so a step
 * costs O(1) unless two configurations collide. Model steps stay in Python:
 * for the built-in register and kv models the step is native too; other
 * models call the Python stepper once per (op, state) and cache the answer.
 * The search is resumable: run(max_steps) returns None when the slice ends,
 * so the Python driver can interleave partitions and enforce its time limit.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    PyObject_HEAD
    int nev, n, head, nwords;
    int *ev_op, *ev_call, *ret_of, *call_of, *nxt, *prv, *req;
    /* Pooled ops: never-completed ops in classes of identical ones, used in invocation order; the
     * k-th of a class (rank k) may be linearized once k of its class are. A configuration is
     * (bits of the other ops, state, counts per class), and fewer used ops dominate more. */
    int *pool, *rank, *pool_pos, nclasses; uint16_t *counts;
    int *mem_start, *mem_len, *mem;  /* members of each class by rank */
    int lim, blk;                    /* while trying pooled classes: the first pending return, its op */
    PyObject *stepper;
    /* generic models: transitions cached in a hash map keyed by (op, state) */
    uint64_t *tkeys; int *tvals; size_t tcap, tcount;
    /* native models: 0 generic (Python stepper), 1 register family, 2 kv strings */
    int kind; int *okind, *oa, *ob, *oout;
    /* kv: interned strings and a trie of states (parent node, appended string) */
    int nstr; char **str; Py_ssize_t *slen; uint64_t *shash, *spow; uint64_t **sprefix;
    int nnodes, capnodes; int *nparent, *ntok; Py_ssize_t *nlen; uint64_t *nhash;
    uint64_t *nkeys; int *nvals; size_t ncap;
    uint64_t *zob, *bits;
    uint64_t hash;
    int state, remaining, cur, done;
    int *stk_ev, *stk_state, *stk_lim, *stk_blk, *stk_op; int depth;
    /* memo */
    uint64_t *arena; size_t arena_cap, mkeys;       /* keys of (nwords + 1) words: bits, state */
    uint32_t *table; size_t table_cap;              /* key index + 1; 0 empty */
    uint64_t *hashes;                               /* per key hash */
    uint32_t *khead;                                /* per key: first count vector + 1 */
    uint16_t *vecs; uint32_t *vnext; size_t nvecs, vecs_cap;
    size_t count;                                   /* configurations stored */
    long long steps;
    int best_len, best_block; int *best; int *best_states; int nbest_states, cap_best_states;
} Search;

static uint64_t splitmix(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static uint64_t mix_state(int s) {
    uint64_t x = (uint64_t)s * 0xD6E8FEB86659FD93ULL;
    return x ^ (x >> 32);
}

static int *int_list(PyObject *seq, Py_ssize_t *len) {
    PyObject *fast = PySequence_Fast(seq, "expected a sequence");
    if (!fast) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    int *out = PyMem_Calloc(n ? n : 1, sizeof(int));
    if (!out) { Py_DECREF(fast); PyErr_NoMemory(); return NULL; }
    for (Py_ssize_t i = 0; i < n; i++) {
        long v = PyLong_AsLong(PySequence_Fast_GET_ITEM(fast, i));
        if (v == -1 && PyErr_Occurred()) { PyMem_Free(out); Py_DECREF(fast); return NULL; }
        out[i] = (int)v;
    }
    Py_DECREF(fast);
    *len = n;
    return out;
}

static void Search_dealloc(Search *s) {
    PyMem_Free(s->ev_op); PyMem_Free(s->ev_call); PyMem_Free(s->ret_of); PyMem_Free(s->call_of);
    PyMem_Free(s->nxt); PyMem_Free(s->prv); PyMem_Free(s->req);
    PyMem_Free(s->pool); PyMem_Free(s->rank); PyMem_Free(s->pool_pos); PyMem_Free(s->counts);
    PyMem_Free(s->mem_start); PyMem_Free(s->mem_len); PyMem_Free(s->mem);
    PyMem_Free(s->stk_lim); PyMem_Free(s->stk_blk); PyMem_Free(s->stk_op);
    PyMem_Free(s->khead); PyMem_Free(s->vecs); PyMem_Free(s->vnext);
    PyMem_Free(s->tkeys); PyMem_Free(s->tvals);
    PyMem_Free(s->okind); PyMem_Free(s->oa); PyMem_Free(s->ob); PyMem_Free(s->oout);
    if (s->str) { for (int i = 0; i < s->nstr; i++) PyMem_Free(s->str[i]); }
    if (s->sprefix) { for (int i = 0; i < s->nstr; i++) PyMem_Free(s->sprefix[i]); }
    PyMem_Free(s->sprefix);
    PyMem_Free(s->str); PyMem_Free(s->slen); PyMem_Free(s->shash); PyMem_Free(s->spow);
    PyMem_Free(s->nparent); PyMem_Free(s->ntok); PyMem_Free(s->nlen); PyMem_Free(s->nhash);
    PyMem_Free(s->nkeys); PyMem_Free(s->nvals);
    Py_XDECREF(s->stepper);
    PyMem_Free(s->zob); PyMem_Free(s->bits);
    PyMem_Free(s->stk_ev); PyMem_Free(s->stk_state);
    PyMem_Free(s->arena); PyMem_Free(s->table); PyMem_Free(s->hashes);
    PyMem_Free(s->best); PyMem_Free(s->best_states);
    Py_TYPE(s)->tp_free((PyObject *)s);
}

static uint64_t str_hash(const char *p, Py_ssize_t n, uint64_t *pow) {
    uint64_t h = 0, pw = 1;
    for (Py_ssize_t i = 0; i < n; i++) { h = h * 1000003ULL + (unsigned char)p[i]; pw *= 1000003ULL; }
    *pow = pw;
    return h;
}

static int kv_node(Search *s, int parent, int tok);

static int load_native(Search *s, PyObject *native) {
    PyObject *okind, *oa, *ob, *oout, *strings;
    int init;
    if (!PyArg_ParseTuple(native, "iiOOOOO", &s->kind, &init, &okind, &oa, &ob, &oout, &strings)) return -1;
    Py_ssize_t n1, n2, n3, n4;
    if (!(s->okind = int_list(okind, &n1)) || !(s->oa = int_list(oa, &n2)) || !(s->ob = int_list(ob, &n3)) ||
        !(s->oout = int_list(oout, &n4)))
        return -1;
    if (n1 != s->n || n2 != s->n || n3 != s->n || n4 != s->n) {
        PyErr_SetString(PyExc_ValueError, "native op tables do not match the op count"); return -1;
    }
    if (s->kind == 1) { s->state = init; return 0; }
    if (s->kind != 2) { PyErr_SetString(PyExc_ValueError, "unknown native model kind"); return -1; }
    PyObject *fast = PySequence_Fast(strings, "strings must be a sequence of bytes");
    if (!fast) return -1;
    s->nstr = (int)PySequence_Fast_GET_SIZE(fast);
    s->str = PyMem_Calloc(s->nstr + 1, sizeof(char *)); s->slen = PyMem_Calloc(s->nstr + 1, sizeof(Py_ssize_t));
    s->shash = PyMem_Calloc(s->nstr + 1, sizeof(uint64_t)); s->spow = PyMem_Calloc(s->nstr + 1, sizeof(uint64_t));
    s->sprefix = PyMem_Calloc(s->nstr + 1, sizeof(uint64_t *));
    if (!s->str || !s->slen || !s->shash || !s->spow || !s->sprefix) { Py_DECREF(fast); PyErr_NoMemory(); return -1; }
    for (int i = 0; i < s->nstr; i++) {
        char *buf; Py_ssize_t len;
        if (PyBytes_AsStringAndSize(PySequence_Fast_GET_ITEM(fast, i), &buf, &len) < 0) { Py_DECREF(fast); return -1; }
        s->str[i] = PyMem_Malloc(len + 1);
        if (!s->str[i]) { Py_DECREF(fast); PyErr_NoMemory(); return -1; }
        memcpy(s->str[i], buf, len); s->slen[i] = len;
        s->shash[i] = str_hash(buf, len, &s->spow[i]);
    }
    Py_DECREF(fast);
    s->capnodes = 1024; s->ncap = 2048;
    s->nparent = PyMem_Calloc(s->capnodes, sizeof(int)); s->ntok = PyMem_Calloc(s->capnodes, sizeof(int));
    s->nlen = PyMem_Calloc(s->capnodes, sizeof(Py_ssize_t)); s->nhash = PyMem_Calloc(s->capnodes, sizeof(uint64_t));
    s->nkeys = PyMem_Calloc(s->ncap, sizeof(uint64_t)); s->nvals = PyMem_Calloc(s->ncap, sizeof(int));
    if (!s->nparent || !s->ntok || !s->nlen || !s->nhash || !s->nkeys || !s->nvals) { PyErr_NoMemory(); return -1; }
    if (init < 0 || init >= s->nstr) { PyErr_SetString(PyExc_ValueError, "bad initial string id"); return -1; }
    s->state = kv_node(s, -1, init);
    return s->state < 0 ? -1 : 0;
}

/* Search(ev_op, ev_call, required, pool, rank, pool_pos, stepper, native): the listed events of the
 * unpooled ops; per op: flags (1 required, 2 observer), class and rank of pooled ops, and how many
 * listed events precede a pooled op's invocation. native is None (call the stepper)
 * or (kind, init, op_kind, op_a, op_b, op_outcome, strings) for the built-in models. */
static int Search_init(Search *s, PyObject *args, PyObject *kw) {
    PyObject *ev_op, *ev_call, *req, *pool, *rank, *pool_pos, *stepper, *native;
    if (!PyArg_ParseTuple(args, "OOOOOOOO", &ev_op, &ev_call, &req, &pool, &rank, &pool_pos, &stepper, &native))
        return -1;
    Py_ssize_t nev, nev2, n, n2, n3, n4;
    if (!(s->ev_op = int_list(ev_op, &nev))) return -1;
    if (!(s->ev_call = int_list(ev_call, &nev2))) return -1;
    if (!(s->req = int_list(req, &n))) return -1;
    if (!(s->pool = int_list(pool, &n2))) return -1;
    if (!(s->rank = int_list(rank, &n3))) return -1;
    if (!(s->pool_pos = int_list(pool_pos, &n4))) return -1;
    Py_ssize_t npooled = 0;
    for (Py_ssize_t i = 0; i < n2; i++) npooled += s->pool[i] >= 0;
    if (nev != nev2 || nev != 2 * (n - npooled) || n2 != n || n3 != n || n4 != n) { PyErr_SetString(PyExc_ValueError, "inconsistent tables"); return -1; }
    s->nev = (int)nev; s->n = (int)n; s->head = (int)nev;
    s->nwords = (int)((n + 63) / 64); if (s->nwords == 0) s->nwords = 1;
    s->nxt = PyMem_Calloc(nev + 1, sizeof(int)); s->prv = PyMem_Calloc(nev + 1, sizeof(int));
    s->ret_of = PyMem_Calloc(nev + 1, sizeof(int)); s->call_of = PyMem_Calloc(n + 1, sizeof(int));
    s->tcap = 1024; s->tkeys = PyMem_Calloc(s->tcap, sizeof(uint64_t)); s->tvals = PyMem_Calloc(s->tcap, sizeof(int));
    s->zob = PyMem_Calloc(n + 1, sizeof(uint64_t)); s->bits = PyMem_Calloc(s->nwords, sizeof(uint64_t));
    s->stk_ev = PyMem_Calloc(n + 1, sizeof(int)); s->stk_state = PyMem_Calloc(n + 1, sizeof(int));
    s->stk_lim = PyMem_Calloc(n + 1, sizeof(int)); s->stk_blk = PyMem_Calloc(n + 1, sizeof(int));
    s->stk_op = PyMem_Calloc(n + 1, sizeof(int));
    if (!s->stk_lim || !s->stk_blk || !s->stk_op) { PyErr_NoMemory(); return -1; }
    s->best = PyMem_Calloc(n + 1, sizeof(int));
    s->cap_best_states = 8; s->best_states = PyMem_Calloc(8, sizeof(int));
    s->table_cap = 1024; s->table = PyMem_Calloc(s->table_cap, sizeof(uint32_t));
    s->arena_cap = 1024; s->arena = PyMem_Calloc(s->arena_cap * (s->nwords + 1), sizeof(uint64_t));
    s->hashes = PyMem_Calloc(s->arena_cap, sizeof(uint64_t));
    s->khead = PyMem_Calloc(s->arena_cap, sizeof(uint32_t));
    s->nclasses = 0;
    for (int i = 0; i < n; i++) if (s->pool[i] + 1 > s->nclasses) s->nclasses = s->pool[i] + 1;
    s->counts = PyMem_Calloc(s->nclasses + 1, sizeof(uint16_t));
    s->vecs_cap = 1024;
    s->vecs = PyMem_Calloc(s->vecs_cap * (s->nclasses + 1), sizeof(uint16_t));
    s->vnext = PyMem_Calloc(s->vecs_cap, sizeof(uint32_t));
    if (!s->khead || !s->counts || !s->vecs || !s->vnext) { PyErr_NoMemory(); return -1; }
    s->mem_start = PyMem_Calloc(s->nclasses + 1, sizeof(int)); s->mem_len = PyMem_Calloc(s->nclasses + 1, sizeof(int));
    s->mem = PyMem_Calloc(n + 1, sizeof(int));
    if (!s->mem_start || !s->mem_len || !s->mem) { PyErr_NoMemory(); return -1; }
    for (int i = 0; i < n; i++) if (s->pool[i] >= 0) s->mem_len[s->pool[i]]++;
    for (int c = 1; c < s->nclasses; c++) s->mem_start[c] = s->mem_start[c - 1] + s->mem_len[c - 1];
    for (int i = 0; i < n; i++) {
        int c = s->pool[i];
        if (c < 0) continue;
        if (s->rank[i] < 0 || s->rank[i] >= s->mem_len[c]) { PyErr_SetString(PyExc_ValueError, "bad rank"); return -1; }
        s->mem[s->mem_start[c] + s->rank[i]] = i;
    }
    if (!s->nxt || !s->prv || !s->ret_of || !s->call_of || !s->tkeys || !s->tvals || !s->zob || !s->bits || !s->stk_ev ||
        !s->stk_state || !s->best || !s->best_states || !s->table || !s->arena || !s->hashes) {
        PyErr_NoMemory(); return -1;
    }
    Py_INCREF(stepper); s->stepper = stepper;
    s->state = 0;
    if (native != Py_None) {
        if (load_native(s, native) < 0) return -1;
    }
    int *call_ev = PyMem_Calloc(n + 1, sizeof(int));
    if (!call_ev) { PyErr_NoMemory(); return -1; }
    for (int e = 0; e < s->nev; e++) {
        if (s->ev_op[e] < 0 || s->ev_op[e] >= n) { PyMem_Free(call_ev); PyErr_SetString(PyExc_ValueError, "bad op id"); return -1; }
        if (s->ev_call[e]) call_ev[s->ev_op[e]] = e;
    }
    for (int e = 0; e < s->nev; e++) if (!s->ev_call[e]) s->ret_of[call_ev[s->ev_op[e]]] = e;
    for (int i = 0; i < n; i++) s->call_of[i] = call_ev[i];
    PyMem_Free(call_ev);
    for (int e = 0; e < s->nev; e++) { s->nxt[e] = e + 1 < s->nev ? e + 1 : -1; s->prv[e] = e - 1; }
    if (s->nev) s->prv[0] = s->head;
    s->nxt[s->head] = s->nev ? 0 : -1; s->prv[s->head] = -1;
    uint64_t seed = 0x1234567ULL;
    for (int i = 0; i < n; i++) s->zob[i] = splitmix(&seed);
    s->remaining = 0;
    for (int i = 0; i < n; i++) s->remaining += (s->req[i] & 1) ? 1 : 0;
    s->cur = s->nxt[s->head]; s->hash = 0; s->depth = 0; s->best_len = -1; s->best_block = -1;
    s->lim = s->nev; s->blk = -1;
    return 0;
}

/* Doubles an open-addressing table of (key, value) slots, a value of 0 marking an empty slot (the kv trie's
 * node index and the transition cache), rehashing what it holds: 0, or -3 with MemoryError raised. */
static int table_grow(uint64_t **keys, int **vals, size_t *cap) {
    size_t nc = *cap * 2;
    uint64_t *nk = PyMem_Calloc(nc, sizeof(uint64_t)); int *nv = PyMem_Calloc(nc, sizeof(int));
    if (!nk || !nv) { PyMem_Free(nk); PyMem_Free(nv); PyErr_NoMemory(); return -3; }
    for (size_t i = 0; i < *cap; i++) {
        if (!(*vals)[i]) continue;
        size_t k = ((*keys)[i] * 0x9E3779B97F4A7C15ULL) >> 20 & (nc - 1);
        while (nv[k]) k = (k + 1) & (nc - 1);
        nk[k] = (*keys)[i]; nv[k] = (*vals)[i];
    }
    PyMem_Free(*keys); PyMem_Free(*vals); *keys = nk; *vals = nv; *cap = nc;
    return 0;
}

/* The kv trie: node = (parent node, appended string); -1 parent is a put of `tok`. */
static int kv_node(Search *s, int parent, int tok) {
    /* Appending to the empty string is a put: one node for both, so equal states share an id more often. */
    if (parent >= 0 && s->nlen[parent] == 0) parent = -1;
    uint64_t key = ((uint64_t)(uint32_t)(parent + 1) << 32) | (uint32_t)tok;
    size_t mask = s->ncap - 1, j = (key * 0x9E3779B97F4A7C15ULL) >> 20 & mask;
    while (s->nvals[j]) {
        if (s->nkeys[j] == key) return s->nvals[j] - 1;
        j = (j + 1) & mask;
    }
    if (s->nnodes == s->capnodes) {
        int c = s->capnodes * 2;
        int *p1 = PyMem_Realloc(s->nparent, c * sizeof(int)); if (!p1) { PyErr_NoMemory(); return -3; } s->nparent = p1;
        int *p2 = PyMem_Realloc(s->ntok, c * sizeof(int)); if (!p2) { PyErr_NoMemory(); return -3; } s->ntok = p2;
        Py_ssize_t *p3 = PyMem_Realloc(s->nlen, c * sizeof(Py_ssize_t)); if (!p3) { PyErr_NoMemory(); return -3; } s->nlen = p3;
        uint64_t *p4 = PyMem_Realloc(s->nhash, c * sizeof(uint64_t)); if (!p4) { PyErr_NoMemory(); return -3; } s->nhash = p4;
        s->capnodes = c;
    }
    int id = s->nnodes++;
    s->nparent[id] = parent; s->ntok[id] = tok;
    s->nlen[id] = (parent < 0 ? 0 : s->nlen[parent]) + s->slen[tok];
    s->nhash[id] = (parent < 0 ? 0 : s->nhash[parent] * s->spow[tok]) + s->shash[tok];
    s->nkeys[j] = key; s->nvals[j] = id + 1;
    if ((size_t)s->nnodes * 2 > s->ncap && table_grow(&s->nkeys, &s->nvals, &s->ncap) < 0) return -3;
    return id;
}

/* Does the string of trie node `node` equal interned string `sid`? */
static int kv_equal(Search *s, int node, int sid) {
    if (s->nlen[node] != s->slen[sid] || s->nhash[node] != s->shash[sid]) return 0;
    Py_ssize_t pos = s->slen[sid];
    const char *target = s->str[sid];
    while (node >= 0) {
        int tok = s->ntok[node];
        Py_ssize_t l = s->slen[tok];
        pos -= l;
        if (pos < 0 || memcmp(target + pos, s->str[tok], l) != 0) return 0;
        node = s->nparent[node];
    }
    return pos == 0;
}

static int cache_find(Search *s, int op, int st);
static int cache_put(Search *s, int op, int st, int v);

/* A get compares whole strings; remember each (get, state) answer. */
static int kv_get(Search *s, int op, int st, int sid) {
    int v = cache_find(s, op, st);
    if (v != -2) return v;
    return cache_put(s, op, st, kv_equal(s, st, sid) ? st : -1);
}

/* Could trie node `node` be a prefix of string `sid`? Hash-only: a mismatch is a proof
 * that it is not (equal strings hash equally); a match may rarely be a collision,
 * which only costs pruning, never a wrong verdict. */
static int kv_prefix(Search *s, int node, int sid) {
    Py_ssize_t l = s->nlen[node];
    if (l > s->slen[sid]) return 0;
    if (!s->sprefix[sid]) {
        uint64_t *ph = PyMem_Malloc((s->slen[sid] + 1) * sizeof(uint64_t));
        if (!ph) return 1;  /* no memory: just don't prune */
        ph[0] = 0;
        for (Py_ssize_t i = 0; i < s->slen[sid]; i++) ph[i + 1] = ph[i] * 1000003ULL + (unsigned char)s->str[sid][i];
        s->sprefix[sid] = ph;
    }
    return s->sprefix[sid][l] == s->nhash[node];
}

enum { OK = 0, FAIL = 1, INFO = 2 };
enum { R_READ = 1, R_WRITE = 2, R_CAS = 3, KV_GET = 4, KV_PUT = 5, KV_APPEND = 6 };

static int native_step(Search *s, int op, int st) {
    int a = s->oa[op], b = s->ob[op], out = s->oout[op];
    switch (s->okind[op]) {
    case R_READ:
        return (out == INFO || a < 0 || a == st) ? st : -1;
    case R_WRITE:
        return out == FAIL ? st : a;
    case R_CAS:
        if (out == OK) return st == a ? b : -1;
        if (out == FAIL) return st != a ? st : -1;
        return st == a ? b : st;
    case KV_GET:
        if (out == INFO || a < 0) return st;
        return kv_get(s, op, st, a);
    case KV_PUT:
        return out == FAIL ? st : kv_node(s, -1, a);
    case KV_APPEND:
        return out == FAIL ? st : kv_node(s, st, a);
    }
    PyErr_SetString(PyExc_ValueError, "unknown native op kind");
    return -3;
}

/* Next state id for (op, state); -1 illegal; -3 on a Python error. */
static int step(Search *s, int op, int st) {
    if (s->kind) return native_step(s, op, st);
    int v = cache_find(s, op, st);
    if (v != -2) return v;
    PyObject *r = PyObject_CallFunction(s->stepper, "ii", op, st);
    if (!r) return -3;
    long lv = PyLong_AsLong(r);
    Py_DECREF(r);
    if (lv == -1 && PyErr_Occurred()) return -3;
    return cache_put(s, op, st, (int)lv);
}

/* Transition cache: -2 when (op, st) is absent. */
static int cache_find(Search *s, int op, int st) {
    uint64_t key = ((uint64_t)(uint32_t)op << 32) | (uint32_t)st;
    size_t mask = s->tcap - 1, j = (key * 0x9E3779B97F4A7C15ULL) >> 20 & mask;
    while (s->tvals[j]) {
        if (s->tkeys[j] == key) return s->tvals[j] - 2;
        j = (j + 1) & mask;
    }
    return -2;
}

static int cache_put(Search *s, int op, int st, int v) {
    uint64_t key = ((uint64_t)(uint32_t)op << 32) | (uint32_t)st;
    size_t mask = s->tcap - 1, j = (key * 0x9E3779B97F4A7C15ULL) >> 20 & mask;
    while (s->tvals[j]) j = (j + 1) & mask;
    s->tkeys[j] = key; s->tvals[j] = v + 2;
    if (++s->tcount * 2 > s->tcap && table_grow(&s->tkeys, &s->tvals, &s->tcap) < 0) return -3;
    return v;
}

static int memo_grow(Search *s) {
    size_t ncap = s->table_cap * 2;
    uint32_t *nt = PyMem_Calloc(ncap, sizeof(uint32_t));
    if (!nt) { PyErr_NoMemory(); return -1; }
    for (size_t i = 0; i < s->mkeys; i++) {
        size_t j = s->hashes[i] & (ncap - 1);
        while (nt[j]) j = (j + 1) & (ncap - 1);
        nt[j] = (uint32_t)(i + 1);
    }
    PyMem_Free(s->table); s->table = nt; s->table_cap = ncap;
    return 0;
}

/* Append the current counts as a vector of key `e`. */
static int vec_push(Search *s, size_t e) {
    int m = s->nclasses;
    if (s->nvecs == s->vecs_cap) {
        size_t nc = s->vecs_cap * 2;
        uint16_t *nv = PyMem_Realloc(s->vecs, nc * (m + 1) * sizeof(uint16_t));
        if (!nv) { PyErr_NoMemory(); return -1; }
        s->vecs = nv;
        uint32_t *nn = PyMem_Realloc(s->vnext, nc * sizeof(uint32_t));
        if (!nn) { PyErr_NoMemory(); return -1; }
        s->vnext = nn; s->vecs_cap = nc;
    }
    if (s->nvecs >= 0xFFFFFFF0u) { PyErr_SetString(PyExc_MemoryError, "memo full"); return -1; }
    memcpy(s->vecs + s->nvecs * (m + 1), s->counts, m * sizeof(uint16_t));
    s->vnext[s->nvecs] = s->khead[e];
    s->khead[e] = (uint32_t)(s->nvecs + 1);
    s->nvecs++;
    return 0;
}

/* Record the configuration (bits, state, counts) unless a stored one dominates it (same bits
 * and state, no more pooled ops used): 1 recorded, 0 dominated (prune), -1 error. */
static int memo_add(Search *s, const uint64_t *bits, int st, uint64_t h) {
    int w = s->nwords, m = s->nclasses;
    size_t mask = s->table_cap - 1, j = h & mask;
    while (s->table[j]) {
        size_t e = s->table[j] - 1;
        if (s->hashes[e] == h) {
            const uint64_t *ent = s->arena + e * (w + 1);
            if (ent[w] == (uint64_t)st && memcmp(ent, bits, w * sizeof(uint64_t)) == 0) {
                if (m == 0) return 0;
                for (uint32_t v = s->khead[e]; v; v = s->vnext[v - 1]) {
                    const uint16_t *vec = s->vecs + (size_t)(v - 1) * (m + 1);
                    int le = 1;
                    for (int i = 0; i < m; i++) if (vec[i] > s->counts[i]) { le = 0; break; }
                    if (le) return 0;
                }
                /* Keep an antichain: unlink the stored vectors the new one dominates. */
                uint32_t *link = &s->khead[e];
                while (*link) {
                    uint32_t v = *link;
                    const uint16_t *vec = s->vecs + (size_t)(v - 1) * (m + 1);
                    int ge = 1;
                    for (int i = 0; i < m; i++) if (vec[i] < s->counts[i]) { ge = 0; break; }
                    if (ge) *link = s->vnext[v - 1]; else link = &s->vnext[v - 1];
                }
                if (vec_push(s, e) < 0) return -1;
                s->count++;
                return 1;
            }
        }
        j = (j + 1) & mask;
    }
    if (s->mkeys >= 0xFFFFFFF0u) { PyErr_SetString(PyExc_MemoryError, "memo full"); return -1; }
    if (s->mkeys == s->arena_cap) {
        size_t nc = s->arena_cap * 2;
        uint64_t *na = PyMem_Realloc(s->arena, nc * (w + 1) * sizeof(uint64_t));
        if (!na) { PyErr_NoMemory(); return -1; }
        s->arena = na;
        uint64_t *nh = PyMem_Realloc(s->hashes, nc * sizeof(uint64_t));
        if (!nh) { PyErr_NoMemory(); return -1; }
        s->hashes = nh;
        uint32_t *nk = PyMem_Realloc(s->khead, nc * sizeof(uint32_t));
        if (!nk) { PyErr_NoMemory(); return -1; }
        s->khead = nk; s->arena_cap = nc;
    }
    size_t e = s->mkeys;
    uint64_t *ent = s->arena + e * (w + 1);
    memcpy(ent, bits, w * sizeof(uint64_t)); ent[w] = (uint64_t)st;
    s->hashes[e] = h;
    s->khead[e] = 0;
    s->table[j] = (uint32_t)(e + 1);
    s->mkeys++;
    if (m > 0 && vec_push(s, e) < 0) return -1;
    s->count++;
    if (s->mkeys * 2 > s->table_cap && memo_grow(s) < 0) return -1;
    return 1;
}

static PyObject *int_array(const int *a, int n) {
    PyObject *l = PyList_New(n);
    if (!l) return NULL;
    for (int i = 0; i < n; i++) PyList_SET_ITEM(l, i, PyLong_FromLong(a[i]));
    return l;
}

static PyObject *result(Search *s, int valid) {
    PyObject *best, *states;
    int block;
    s->done = 1;
    if (valid) {
        int *ops = PyMem_Calloc(s->depth + 1, sizeof(int));
        for (int i = 0; i < s->depth; i++) ops[i] = s->stk_op[i];
        best = int_array(ops, s->depth); PyMem_Free(ops);
        states = int_array(&s->state, 1); block = -1;
    } else {
        best = int_array(s->best, s->best_len < 0 ? 0 : s->best_len);
        states = int_array(s->best_states, s->nbest_states); block = s->best_block;
    }
    if (!best || !states) { Py_XDECREF(best); Py_XDECREF(states); return NULL; }
    return Py_BuildValue("(OLnNiN)", valid ? Py_True : Py_False, s->steps, (Py_ssize_t)s->count, best, block, states);
}

static inline void unlink_ev(Search *s, int e) {
    int p = s->prv[e], q = s->nxt[e];
    s->nxt[p] = q;
    if (q != -1) s->prv[q] = p;
}

static inline void relink_ev(Search *s, int e) {
    int p = s->prv[e], q = s->nxt[e];
    s->nxt[p] = e;
    if (q != -1) s->prv[q] = e;
}

/* Track the deepest partial linearization: `extra` (an op linearized on top of the stack, or -1),
 * the op that blocked it, and the states seen there. Returns -1 on memory error. */
static int note_best(Search *s, int extra, int block, int state) {
    int depth = s->depth + (extra >= 0 ? 1 : 0);
    if (depth < s->best_len) return 0;
    if (depth > s->best_len) {
        s->best_len = depth;
        for (int i = 0; i < s->depth; i++) s->best[i] = s->stk_op[i];
        if (extra >= 0) s->best[s->depth] = extra;
        s->best_block = block;
        s->nbest_states = 0;
    }
    for (int i = 0; i < s->nbest_states; i++) if (s->best_states[i] == state) return 0;
    if (s->nbest_states == s->cap_best_states) {
        int *nb = PyMem_Realloc(s->best_states, 2 * s->cap_best_states * sizeof(int));
        if (!nb) { PyErr_NoMemory(); return -1; }
        s->best_states = nb; s->cap_best_states *= 2;
    }
    s->best_states[s->nbest_states++] = state;
    return 0;
}

/* kv pruning: after `curop` (a put or append) makes state `ns`, every completed get that is
 * callable now must still be satisfiable. With no unlinearized put able to precede it
 * (none invoked before the get returned), the state can only grow by appends, so `ns` must
 * be a prefix of the get's value. Returns the get that rules the configuration out, or -1. */
static int kv_dead(Search *s, int ns, int curop) {
    /* Events are numbered in time order, so a call numbered below the first return is callable. */
    int pending = 0, put_seen = 0, first_ret = -1, min_put = s->nev + 1;
    for (int c = 0; c < s->nclasses; c++) {  /* the earliest unused pooled put */
        if (s->counts[c] >= s->mem_len[c]) continue;
        int p = s->mem[s->mem_start[c] + s->counts[c]];
        if (s->okind[p] == KV_PUT && s->pool_pos[p] < min_put) min_put = s->pool_pos[p];
    }
    for (int e = s->nxt[s->head]; e >= 0; e = s->nxt[e]) {
        int op = s->ev_op[e];
        if (op == curop) continue;
        int is_get = s->okind[op] == KV_GET && s->oout[op] == OK && s->oa[op] >= 0;
        if (s->ev_call[e]) {
            if (s->okind[op] == KV_PUT) put_seen = 1;
            else if (first_ret < 0 && is_get) pending++;
            continue;
        }
        if (first_ret < 0) first_ret = e;
        if (is_get) {
            if (!put_seen && min_put > e && !kv_prefix(s, ns, s->oa[op])) return op;
            if (s->call_of[op] < first_ret) pending--;
        }
        if (pending <= 0) return -1;
    }
    return -1;
}

/* The search loop; see search_py in linearizability.py for the same steps in Python. `cur` is a
 * listed event (>= 0), -1 the end of the list, -2 "backtrack at once", or -3 - c: "try pooled
 * class c next" (after the scan reached the first pending return). */
static PyObject *Search_run(Search *s, PyObject *args) {
    long long budget;
    if (!PyArg_ParseTuple(args, "L", &budget)) return NULL;
    if (s->done) { PyErr_SetString(PyExc_RuntimeError, "search already finished"); return NULL; }
    long long stop = s->steps + budget;
    int m = s->nclasses;
    while (1) {
        if (s->remaining == 0) return result(s, 1);
        if (s->steps >= stop) Py_RETURN_NONE;
        s->steps++;
        int cur = s->cur, op;
        if (cur >= 0 && s->ev_call[cur]) {
            op = s->ev_op[cur];
        } else if (cur == -1 || cur >= 0) {
            /* The scan reached the first pending return (or the end): pooled classes next. */
            s->lim = cur >= 0 ? cur : s->nev;
            s->blk = cur >= 0 ? s->ev_op[cur] : -1;
            s->cur = -3;
            continue;
        } else if (cur <= -3 && -3 - cur < m) {
            int c = -3 - cur, k = s->counts[c];
            if (k >= s->mem_len[c] || s->pool_pos[s->mem[s->mem_start[c] + k]] > s->lim) { s->cur = cur - 1; continue; }
            op = s->mem[s->mem_start[c] + k];
        } else {
            /* All candidates tried (or a dominated configuration): backtrack. */
            if (cur != -2 && note_best(s, -1, s->blk, s->state) < 0) return NULL;
            if (s->depth == 0) return result(s, 0);
            s->depth--;
            int e = s->stk_ev[s->depth], next;
            s->state = s->stk_state[s->depth]; s->lim = s->stk_lim[s->depth]; s->blk = s->stk_blk[s->depth];
            op = s->stk_op[s->depth];
            if (e >= 0) {
                s->bits[op >> 6] &= ~(1ULL << (op & 63));
                s->hash ^= s->zob[op];
                relink_ev(s, s->ret_of[e]); relink_ev(s, e);
                next = s->nxt[e];
            } else {
                s->counts[-3 - e]--;
                next = e - 1;
            }
            if (s->req[op] & 1) s->remaining++;
            /* Popping an observer: its siblings are dominated, keep backtracking. */
            s->cur = (s->req[op] & 2) ? -2 : next;
            continue;
        }
        /* Try to linearize `op` (listed event `cur`, or pooled class -3 - cur). */
        int ns = step(s, op, s->state);
        if (ns == -3) return NULL;
        if (ns >= 0 && s->kind == 2 && s->okind[op] >= KV_PUT && ns != s->state) {
            int culprit = kv_dead(s, ns, op);
            if (culprit >= 0) {
                /* Evidence: the get that rules this out, as if the search had got that far. */
                if (note_best(s, op, culprit, ns) < 0) return NULL;
                ns = -1;
            }
        }
        int pooled = cur < 0;
        if (ns >= 0) {
            int wi = op >> 6; uint64_t bit = pooled ? 0 : 1ULL << (op & 63);
            s->bits[wi] |= bit;
            if (pooled) s->counts[-3 - cur]++;
            uint64_t hb = pooled ? s->hash : s->hash ^ s->zob[op];
            int added = memo_add(s, s->bits, ns, hb ^ mix_state(ns));
            if (added < 0) return NULL;
            if (added) {
                int d = s->depth++;
                s->stk_ev[d] = cur; s->stk_state[d] = s->state; s->stk_lim[d] = s->lim; s->stk_blk[d] = s->blk;
                s->stk_op[d] = op;
                s->hash = hb; s->state = ns;
                if (!pooled) { unlink_ev(s, cur); unlink_ev(s, s->ret_of[cur]); }
                if (s->req[op] & 1) s->remaining--;
                s->cur = s->nxt[s->head];
                continue;
            }
            s->bits[wi] &= ~bit;
            if (pooled) s->counts[-3 - cur]--;
            /* An observer that is legal here dominates its siblings: if linearizing it
             * now already failed, this configuration fails too. */
            if (s->req[op] & 2) { s->cur = -2; continue; }
        }
        s->cur = cur >= 0 ? s->nxt[cur] : cur - 1;
    }
}

static PyObject *Search_memory(Search *s, PyObject *unused) {
    size_t b = s->arena_cap * (s->nwords + 1) * 8 + s->table_cap * 4 + s->arena_cap * 12;
    b += s->vecs_cap * ((size_t)(s->nclasses + 1) * 2 + 4);
    b += s->tcap * 12 + s->ncap * 12 + (size_t)s->capnodes * 24;
    return PyLong_FromSize_t(b);
}

/* kv_string(node) -> bytes: the content of a kv trie state (for evidence). */
static PyObject *Search_kv_string(Search *s, PyObject *args) {
    int node;
    if (!PyArg_ParseTuple(args, "i", &node)) return NULL;
    if (s->kind != 2 || node < 0 || node >= s->nnodes) { PyErr_SetString(PyExc_ValueError, "not a kv state"); return NULL; }
    PyObject *out = PyBytes_FromStringAndSize(NULL, s->nlen[node]);
    if (!out) return NULL;
    char *buf = PyBytes_AS_STRING(out);
    Py_ssize_t pos = s->nlen[node];
    while (node >= 0) {
        int tok = s->ntok[node];
        pos -= s->slen[tok];
        memcpy(buf + pos, s->str[tok], s->slen[tok]);
        node = s->nparent[node];
    }
    return out;
}

static PyMethodDef Search_methods[] = {
    {"run", (PyCFunction)Search_run, METH_VARARGS, "run(max_steps) -> None if unfinished, else a result tuple"},
    {"memory", (PyCFunction)Search_memory, METH_NOARGS, "bytes held by the memo and transition cache"},
    {"kv_string", (PyCFunction)Search_kv_string, METH_VARARGS, "the bytes of a kv state id"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject SearchType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "checkers._wgl.Search",
    .tp_basicsize = sizeof(Search),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Resumable linearizability search over integer tables (see linearizability.py).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Search_init,
    .tp_dealloc = (destructor)Search_dealloc,
    .tp_methods = Search_methods,
};

static struct PyModuleDef wglmodule = {PyModuleDef_HEAD_INIT, "_wgl", "Compiled linearizability search.", -1, NULL};

PyMODINIT_FUNC PyInit__wgl(void) {
    if (PyType_Ready(&SearchType) < 0) return NULL;
    PyObject *m = PyModule_Create(&wglmodule);
    if (!m) return NULL;
    /* The Python side uses this core only if ABI matches what it passes (a stale build is ignored). */
    if (PyModule_AddIntConstant(m, "ABI", 3) < 0) { Py_DECREF(m); return NULL; }
    Py_INCREF(&SearchType);
    if (PyModule_AddObject(m, "Search", (PyObject *)&SearchType) < 0) { Py_DECREF(&SearchType); Py_DECREF(m); return NULL; }
    return m;
}
