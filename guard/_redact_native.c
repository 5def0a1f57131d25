/* Redaction's scan for places, compiled (guard/_places.py; the rules are guard/redact.py's).
 *
 * build(literals, entries) makes one trie of every locator (lowercase ASCII literals) and of the
 * case-sensitive prefixes of the rules without one, lowered; scan(text) walks a str once, in its
 * own storage (no encoding, no lowered copy), folding ASCII letters to lowercase and the two
 * characters whose lowercase is an ASCII letter ("\u0130" to "i", "\u212a" to "k"): the places
 * found are those an automaton finds in the lowered text, at the same offsets. Most offsets are
 * passed by one look at a table of the literals' first three characters (two for a literal of
 * two, which every third character passes); at the few others the trie is walked.
 *
 * Each literal carries entries (code, rule, filter, back, class, raw): where a place of the
 * literal goes (a provider's place, a generic shape's, the assignment rule's, a Kubernetes
 * Secret's, a prefix of a rule without a locator) and a test of one character that its rule's
 * expression needs there (the character before the match not in, or in, a class; the one after
 * the literal in a class). raw, when given, is the literal's case-sensitive text. A place whose
 * test fails cannot match: a generic or prefix place is dropped, a provider's is kept apart
 * (redact.py tries it only when a credential glued before it is taken). An assignment's place is
 * kept when the name around it is followed by what can begin an operator (guard/_assignment.py's
 * _OPERATOR) or a blank: a superset of judgeable(), which redact.py then asks.
 *
 * scan gives None when no place is kept, else six lists: provider (at, rule), provider places
 * kept apart (at, rule), generic (at, rule), assignment places (at), Secrets (at), prefix places
 * (at, rule) in text order. guard/_places.py's Python path gives the same lists.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { C_PROVIDER = 0, C_GENERIC = 1, C_ASSIGN = 2, C_K8S = 3, C_DIRECT = 4 };
enum { F_NONE = 0, F_NOT_BEFORE = 1, F_BEFORE = 2 };

typedef struct {
    int code;
    Py_ssize_t rule;
    int filter;
    Py_ssize_t back;
    unsigned char cls[16];
    char *raw; /* NUL-terminated ASCII, or NULL */
    unsigned char run[16];
    Py_ssize_t run_min;
} entry;

typedef struct {
    Py_ssize_t len;
    Py_ssize_t n_entries;
    entry *entries;
} literal;

static int n_classes = 0;
static int fold[256];      /* a byte's class: ASCII folded to lowercase; 0 for any other */
static int32_t *trie = NULL;      /* nodes x classes: the next node, or -1 */
static int32_t *node_lit = NULL;  /* the literal a node ends, or -1 */
static uint64_t pairs[64 * 64]; /* by the classes of two characters: bit k when a literal begins
                                  with them and a character of class k, every bit when they are
                                  a literal */
static int n_states = 0;
static literal *lits = NULL;
static Py_ssize_t n_lits = 0;
static int class_i = 0, class_k = 0;

static void release(void) {
    if (lits != NULL) {
        for (Py_ssize_t i = 0; i < n_lits; i++) {
            for (Py_ssize_t j = 0; j < lits[i].n_entries; j++) free(lits[i].entries[j].raw);
            free(lits[i].entries);
        }
    }
    free(lits);
    free(trie);
    free(node_lit);
    lits = NULL;
    trie = node_lit = NULL;
    n_lits = 0;
    n_states = 0;
}

static int lower_ascii(int c) { return (c >= 'A' && c <= 'Z') ? c + 32 : c; }

static PyObject *build(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *literals, *entries;
    if (!PyArg_ParseTuple(args, "O!O!", &PyList_Type, &literals, &PyList_Type, &entries)) {
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(literals);
    if (PyList_GET_SIZE(entries) != n) {
        PyErr_SetString(PyExc_ValueError, "one list of entries a literal");
        return NULL;
    }
    release();
    /* The alphabet: each byte a literal holds (lowercase), one class each. */
    memset(fold, 0, sizeof fold);
    n_classes = 1;
    Py_ssize_t total = 1;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *s = PyList_GET_ITEM(literals, i);
        if (!PyUnicode_Check(s) || !PyUnicode_IS_ASCII(s) || PyUnicode_GET_LENGTH(s) == 0) {
            PyErr_SetString(PyExc_ValueError, "a literal is a non-empty ASCII str");
            return NULL;
        }
        const char *b = (const char *)PyUnicode_DATA(s);
        Py_ssize_t len = PyUnicode_GET_LENGTH(s);
        total += len;
        for (Py_ssize_t k = 0; k < len; k++) {
            int c = (unsigned char)b[k];
            if (c != lower_ascii(c)) {
                PyErr_SetString(PyExc_ValueError, "a literal is lowercase");
                return NULL;
            }
            if (fold[c] == 0) fold[c] = n_classes++;
        }
    }
    if (n_classes > 64) {
        PyErr_SetString(PyExc_ValueError, "the literals hold 63 characters at most");
        return NULL;
    }
    for (int c = 'A'; c <= 'Z'; c++) fold[c] = fold[c + 32];
    memset(pairs, 0, sizeof pairs);
    class_i = fold['i'];
    class_k = fold['k'];
    int nc = n_classes;
    /* The trie, and the first two or three characters of each literal. */
    trie = malloc(sizeof(int32_t) * (size_t)total * (size_t)nc);
    node_lit = malloc(sizeof(int32_t) * (size_t)total);
    lits = calloc((size_t)(n ? n : 1), sizeof(literal));
    if (!trie || !node_lit || !lits) {
        release();
        return PyErr_NoMemory();
    }
    n_lits = n;
    for (Py_ssize_t i = 0; i < total * nc; i++) trie[i] = -1;
    n_states = 1;
    node_lit[0] = -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *s = PyList_GET_ITEM(literals, i);
        const char *b = (const char *)PyUnicode_DATA(s);
        Py_ssize_t len = PyUnicode_GET_LENGTH(s);
        if (len < 2) {
            PyErr_SetString(PyExc_ValueError, "a literal has two characters or more");
            goto fail_built;
        }
        int32_t st = 0;
        for (Py_ssize_t k = 0; k < len; k++) {
            int c = fold[(unsigned char)b[k]];
            if (trie[st * nc + c] < 0) {
                node_lit[n_states] = -1;
                trie[st * nc + c] = n_states++;
            }
            st = trie[st * nc + c];
        }
        if (node_lit[st] >= 0) {
            PyErr_SetString(PyExc_ValueError, "the literals are distinct");
            goto fail_built;
        }
        node_lit[st] = (int32_t)i;
        lits[i].len = len;
        size_t pi = (size_t)fold[(unsigned char)b[0]] << 6 | (size_t)fold[(unsigned char)b[1]];
        pairs[pi] |= len == 2 ? ~(uint64_t)0 : (uint64_t)1 << fold[(unsigned char)b[2]];
    }
    /* The entries. */
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *lst = PyList_GET_ITEM(entries, i);
        if (!PyList_Check(lst)) {
            PyErr_SetString(PyExc_ValueError, "entries: a list a literal");
            goto fail_built;
        }
        Py_ssize_t m = PyList_GET_SIZE(lst);
        lits[i].entries = calloc((size_t)(m ? m : 1), sizeof(entry));
        if (lits[i].entries == NULL) {
            PyErr_NoMemory();
            goto fail_built;
        }
        lits[i].n_entries = m;
        for (Py_ssize_t j = 0; j < m; j++) {
            entry *e = &lits[i].entries[j];
            int code, filter;
            Py_ssize_t rule, back;
            const char *cls, *run;
            Py_ssize_t cls_len, run_len, run_min;
            PyObject *raw;
            if (!PyArg_ParseTuple(PyList_GET_ITEM(lst, j), "ininy#Oy#n", &code, &rule, &filter,
                                  &back, &cls, &cls_len, &raw, &run, &run_len, &run_min)) {
                goto fail_built;
            }
            if (cls_len != 16 || run_len != 16 || run_min < 0 || back < 0 || code < C_PROVIDER ||
                code > C_DIRECT || filter < F_NONE || filter > F_BEFORE) {
                PyErr_SetString(PyExc_ValueError,
                                "an entry: (code, rule, test, back, 16 bytes, raw, 16 bytes, least)");
                goto fail_built;
            }
            memcpy(e->run, run, 16);
            e->run_min = run_min;
            e->code = code;
            e->rule = rule;
            e->filter = filter;
            e->back = back;
            memcpy(e->cls, cls, 16);
            e->raw = NULL;
            if (raw != Py_None) {
                if (!PyUnicode_Check(raw) || !PyUnicode_IS_ASCII(raw) ||
                    PyUnicode_GET_LENGTH(raw) != lits[i].len) {
                    PyErr_SetString(PyExc_ValueError, "raw: the literal's ASCII text");
                    goto fail_built;
                }
                e->raw = strdup((const char *)PyUnicode_DATA(raw));
                if (e->raw == NULL) {
                    PyErr_NoMemory();
                    goto fail_built;
                }
            }
        }
    }
    Py_RETURN_NONE;
fail_built:
    release();
    return NULL;
}

static inline Py_UCS4 at_(int kind, const void *data, Py_ssize_t i) {
    return PyUnicode_READ(kind, data, i);
}

static inline int in_class(const unsigned char *cls, Py_UCS4 c) {
    return c < 128 && (cls[c >> 3] >> (c & 7)) & 1;
}

static inline int name_char(Py_UCS4 c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-';
}

/* Whether the name around the secret word at `at` may be followed by an operator or a blank
 * (guard/_assignment.py's _after_name): a superset of what judgeable() keeps. */
static int may_judge(int kind, const void *data, Py_ssize_t n, Py_ssize_t at) {
    Py_ssize_t e = at;
    while (e < n && name_char(at_(kind, data, e))) e++;
    if (e >= n) return 0;
    Py_UCS4 c = at_(kind, data, e);
    switch (c) {
        case ' ': case '\t': case '"': case '\'': case '`': case ']': case ':': case '=':
        case '?': case ',': case '(': case '>': case '\\':
            return 1;
        case '\r': case '\n': {
            /* only [ \t]*\r?\n[ \t]*-?[ \t]*["']?value can begin here */
            Py_ssize_t j = e;
            while (j < n) {
                Py_UCS4 d = at_(kind, data, j);
                if (d != ' ' && d != '\t' && d != '\r' && d != '\n' && d != '-' && d != '"' &&
                    d != '\'')
                    break;
                j++;
            }
            static const char value[] = "value";
            if (j + 5 > n) return 0;
            for (int k = 0; k < 5; k++) {
                if (at_(kind, data, j + k) != (Py_UCS4)value[k]) return 0;
            }
            return 1;
        }
        default:
            return 0;
    }
}

typedef struct {
    PyObject *lists[6]; /* [1] unused: the count below */
    Py_ssize_t apart;
} found;

static int push(found *out, int which, Py_ssize_t at, Py_ssize_t rule, int pair) {
    if (out->lists[which] == NULL) {
        out->lists[which] = PyList_New(0);
        if (out->lists[which] == NULL) return -1;
    }
    PyObject *item = pair ? Py_BuildValue("(nn)", at, rule) : PyLong_FromSsize_t(at);
    if (item == NULL) return -1;
    int r = PyList_Append(out->lists[which], item);
    Py_DECREF(item);
    return r;
}

static int emit(found *out, int kind, const void *data, Py_ssize_t n, int32_t lit, Py_ssize_t end) {
    literal *L = &lits[lit];
    Py_ssize_t at = end - L->len;
    for (Py_ssize_t j = 0; j < L->n_entries; j++) {
        entry *e = &L->entries[j];
        if (e->raw != NULL) {
            Py_ssize_t k = 0;
            while (k < L->len && at_(kind, data, at + k) == (Py_UCS4)(unsigned char)e->raw[k]) k++;
            if (k < L->len) continue;
        }
        if (e->code == C_ASSIGN) {
            if (may_judge(kind, data, n, at) && push(out, 3, at, 0, 0) < 0) return -1;
            continue;
        }
        if (e->code == C_K8S) {
            if (push(out, 4, at, 0, 0) < 0) return -1;
            continue;
        }
        int ok = 1;
        if (e->filter != F_NONE) {
            Py_ssize_t p = at - e->back - 1;
            int inside = p >= 0 && in_class(e->cls, at_(kind, data, p));
            ok = e->filter == F_NOT_BEFORE ? !inside : inside;
        }
        if (ok && e->run_min > 0) {
            if (end + e->run_min > n) {
                ok = 0;
            } else {
                for (Py_ssize_t k = end; k < end + e->run_min; k++) {
                    if (!in_class(e->run, at_(kind, data, k))) {
                        ok = 0;
                        break;
                    }
                }
            }
        }
        if (!ok) {
            if (e->code == C_PROVIDER) out->apart++;
            continue;
        }
        int which = e->code == C_PROVIDER ? 0 : (e->code == C_GENERIC ? 2 : 5);
        if (push(out, which, at, e->rule, 1) < 0) return -1;
    }
    return 0;
}

/* Every literal starting at each offset whose first two characters are a literal, or whose first
 * three begin one: the trie walked from there. The places come in the order of their starts. */
#define FOLD(c) ((c) < 256 ? fold[(c)] : ((c) == 0x130 ? class_i : ((c) == 0x212A ? class_k : 0)))
#define TRY(i)                                                                           \
    do {                                                                                 \
        int32_t s = 0;                                                                   \
        for (Py_ssize_t j = (i); j < n; j++) {                                           \
            s = trie[(size_t)s * unc + (size_t)FOLD(d[j])];                              \
            if (s < 0) break;                                                            \
            if (node_lit[s] >= 0 && emit(&out, kind, data, n, node_lit[s], j + 1) < 0)   \
                goto fail;                                                               \
        }                                                                                \
    } while (0)
#define WALK(T)                                                                          \
    do {                                                                                 \
        const T *d = (const T *)data;                                                    \
        if (n < 2) break;                                                                \
        size_t pair = (size_t)FOLD(d[0]) << 6 | (size_t)FOLD(d[1]);                     \
        for (Py_ssize_t i = 2; i < n; i++) {                                             \
            size_t k = (size_t)FOLD(d[i]);                                               \
            if ((pairs[pair] >> k) & 1) TRY(i - 2);                                      \
            pair = (pair << 6 | k) & 4095;                                               \
        }                                                                                \
        if (pairs[pair] & 1) TRY(n - 2); /* a literal of two characters at the end */    \
    } while (0)

static PyObject *scan(PyObject *self, PyObject *text) {
    (void)self;
    if (!PyUnicode_Check(text)) {
        PyErr_SetString(PyExc_TypeError, "scan() takes a str");
        return NULL;
    }
    if (trie == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "build() first");
        return NULL;
    }
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    found out = {{NULL, NULL, NULL, NULL, NULL, NULL}, 0};
    size_t unc = (size_t)n_classes;
    if (kind == PyUnicode_1BYTE_KIND) {
        WALK(Py_UCS1);
    } else if (kind == PyUnicode_2BYTE_KIND) {
        WALK(Py_UCS2);
    } else {
        WALK(Py_UCS4);
    }
    int any = out.apart > 0;
    for (int w = 0; w < 6; w++) any |= out.lists[w] != NULL;
    if (!any) Py_RETURN_NONE;
    PyObject *tuple = PyTuple_New(6);
    if (tuple == NULL) goto fail;
    for (int w = 0; w < 6; w++) {
        PyObject *l = w == 1 ? PyLong_FromSsize_t(out.apart)
                             : (out.lists[w] != NULL ? out.lists[w] : PyList_New(0));
        if (l == NULL) {
            Py_DECREF(tuple);
            goto fail;
        }
        out.lists[w] = NULL;
        PyTuple_SET_ITEM(tuple, w, l);
    }
    return tuple;
fail:
    for (int w = 0; w < 6; w++) Py_XDECREF(out.lists[w]);
    return NULL;
}

static PyMethodDef methods[] = {
    {"build", build, METH_VARARGS, "build(literals, entries): the automaton scan() walks."},
    {"scan", scan, METH_O, "scan(text): None, or the six lists of places (guard/_places.py)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_redact_native", "Redaction's scan for places, compiled.", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__redact_native(void) { return PyModule_Create(&module); }
