/* The compiled pass of retrieval.analyze: a file's runs split, looked up and counted in one pass.
 *
 * What it computes is what the pure-Python path of retrieval/analyze.py computes from the same
 * translated bytes (tests/test_words_native.py holds the two to each other and to a plain
 * reference of the words' rule): the runs of each chunk, as bytes.split() cuts them; each run's
 * code in the thread's word table (retrieval.words.WordTable, a dict of run -> code whose
 * __missing__ expands a run seen for the first time); each word's file id, in order of first
 * appearance; and each chunk's (word, count, count in its first line) pairs in ascending file id.
 *
 * A run this memo has not seen is looked up in the table; a run the table has not seen either is
 * expanded here when it is ASCII (ascii_words, in retrieval/_words_rule.h, included below with
 * the definition terms' call: the word rule of retrieval/words.py, its words
 * numbered into the table as WordTable.__missing__ numbers them), else by the table's
 * __missing__. Its code is kept here, keyed by the run's bytes, so that a run seen again costs
 * a hash and a compare rather than a bytes object and a dict lookup.
 * A Memo belongs to one WordTable (retrieval/words.py keeps it beside the table, which is one a
 * thread) and is dropped with it. Runs longer than the table keeps are not kept here either.
 *
 * The conversation's fold (store.mem_fold, store.mem_encode) has its own calls beside record(),
 * in retrieval/_fold_native.h, included below in this one translation unit; a file's whole record
 * in one call (record(), which also finds the file's lines and chunks and cuts the runs from the
 * untranslated bytes) is in retrieval/_words_file.h.
 *
 * No numpy headers: arrays come in through the buffer protocol and go out as bytes of int64.
 */
#define PY_SSIZE_T_CLEAN
#define _GNU_SOURCE /* memmem */
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_KEPT_RUN 128 /* retrieval.words._MEMO_MAX_RUN */
/* A run is kept within this many slots of its hash's own, and looked for no further: the hash is
 * not keyed, so a file written to make many runs share one slot (a hostile clone's) would
 * otherwise make every lookup walk them all. A run that finds no room is not kept here; it is
 * looked up in the word table (a dict, whose hash is keyed), which gives the same code. */
#define MAX_PROBE 32

typedef struct {
    uint64_t hash;    /* 0: an empty slot */
    int64_t code;
    uint64_t head;    /* the run's first 8 bytes (zero-padded): a short run is compared here */
    uint32_t off;     /* where the run's bytes begin in the arena */
    uint32_t len;
} Slot;

typedef struct {
    PyObject_HEAD
    Slot *slots;
    size_t cap;       /* a power of two */
    /* a chunk's runs (start, length, hash), cut before they are looked up so that their slots
     * are fetched from memory ahead of the lookups (most of a lookup's cost was that wait) */
    int64_t *r_start, *r_len;
    uint64_t *r_hash;
    size_t r_cap;
    size_t used;
    char *arena;
    size_t arena_len, arena_cap;
    /* the table's word_id as far as this pass has asked it: a word's UTF-8 bytes (in the arena)
     * -> its id, so that a word the table holds costs no str and no dict lookup (a table's ids
     * never change: it only appends, and is replaced with its memo) */
    Slot *w_slots;
    size_t w_cap, w_used;
    /* the table's multi list during a call of record() or definition_terms() (a new reference,
     * dropped at its end), so that a run of several words does not look the attribute up */
    PyObject *cur_multi;
    /* the word ids of multi[k], as the table's multi list gave them */
    int64_t *m_start, *m_size;
    size_t m_count, m_cap;
    int64_t *m_flat;
    size_t m_flat_len, m_flat_cap;
    /* by table word id: the file id of the call whose stamp it holds (one slot, one cache line) */
    struct FidSlot { uint64_t stamp; int64_t fid; } *lut;
    size_t lut_cap;
    uint64_t call;
    /* A file's work, kept from call to call so that a file costs no allocation (and no page
     * faults) once the largest so far has been seen: each run's word occurrence (file id,
     * whether in its chunk's first line), where each chunk's occurrences end, the definition
     * terms' file ids and their order by chunk, the counts by file id (kept zero between
     * chunks), a chunk's distinct file ids, the pairs and the offsets. */
    int64_t *o_fid;
    unsigned char *o_first;
    size_t o_n, o_cap;
    int64_t *c_end, *offsets;
    size_t c_cap;
    int64_t *d_fid, *d_order, *d_per;
    size_t d_cap, dp_cap;
    int64_t *cnt, *cnt_first;
    size_t cnt_cap;
    int64_t *touched;
    size_t t_cap;
    int64_t *pw, *pb, *pf;
    size_t p_cap, n_pairs;
    int64_t *distinct;
    size_t n_distinct, dist_cap;
    /* a file's layout (retrieval/_words_file.h): line starts, chunks' first lines, bounds */
    int64_t *ls, *lows, *bd, *fe;
    size_t ls_cap, lows_cap, bd_cap, fe_cap;
} Memo;

static int grow(void **buf, size_t *cap, size_t need, size_t item) {
    if (need <= *cap) return 0;
    size_t n = *cap ? *cap : 1024;
    while (n < need) n *= 2;
    void *p = realloc(*buf, n * item);
    if (!p) { PyErr_NoMemory(); return -1; }
    *buf = p;
    *cap = n;
    return 0;
}

static inline uint64_t head_of(const unsigned char *p, size_t n) {
    uint64_t v = 0;
    memcpy(&v, p, n < 8 ? n : 8);
    return v;
}

static inline uint64_t hash_bytes(const unsigned char *p, size_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ (n * 0xC2B2AE3D27D4EB4FULL);
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        h = (h ^ v) * 0xFF51AFD7ED558CCDULL;
        h ^= h >> 32;
        p += 8;
        n -= 8;
    }
    uint64_t v = 0;
    memcpy(&v, p, n);
    h = (h ^ v) * 0xC4CEB9FE1A85EC53ULL;
    h ^= h >> 29;
    h *= 0x9E3779B97F4A7C15ULL;
    h ^= h >> 32;
    return h ? h : 1;
}

static int memo_rehash(Memo *m, size_t cap) {
    Slot *slots = calloc(cap, sizeof(Slot));
    if (!slots) { PyErr_NoMemory(); return -1; }
    for (size_t i = 0; i < m->cap; i++) {
        Slot *s = &m->slots[i];
        if (!s->hash) continue;
        size_t j = s->hash & (cap - 1), probes = 0;
        while (slots[j].hash && ++probes < MAX_PROBE) j = (j + 1) & (cap - 1);
        if (slots[j].hash) {
            m->used--; /* no room near its slot: left out, as memo_put leaves it */
            continue;
        }
        slots[j] = *s;
    }
    free(m->slots);
    m->slots = slots;
    m->cap = cap;
    return 0;
}

/* The run p[0:n] (hash h) kept with its code: 1, or 0 when it is not kept (no room near its
 * slot, MAX_PROBE), or -1 with MemoryError set. */
static int memo_put(Memo *m, uint64_t h, const unsigned char *p, size_t n, int64_t code) {
    if ((m->used + 1) * 2 > m->cap && memo_rehash(m, m->cap ? m->cap * 2 : 1 << 16) < 0) return -1;
    if (m->arena_len + n > UINT32_MAX) return 0; /* never in practice: the table is bounded */
    if (grow((void **)&m->arena, &m->arena_cap, m->arena_len + n, 1) < 0) return -1;
    size_t j = h & (m->cap - 1), probes = 0;
    while (m->slots[j].hash && ++probes < MAX_PROBE) j = (j + 1) & (m->cap - 1);
    if (m->slots[j].hash) return 0; /* no room near its slot: not kept (MAX_PROBE) */
    memcpy(m->arena + m->arena_len, p, n);
    m->slots[j].hash = h;
    m->slots[j].code = code;
    m->slots[j].head = head_of(p, n);
    m->slots[j].off = (uint32_t)m->arena_len;
    m->slots[j].len = (uint32_t)n;
    m->arena_len += n;
    m->used++;
    return 1;
}

/* The table's list of several-word runs (a new reference), or NULL with the error set. */
static PyObject *table_multi(PyObject *table) {
    PyObject *multi = PyObject_GetAttrString(table, "multi");
    if (multi && !PyList_Check(multi)) {
        Py_DECREF(multi);
        PyErr_SetString(PyExc_TypeError, "the word table's multi is not a list");
        return NULL;
    }
    return multi;
}

/* The multi[k] of the table, k >= m_count, copied here (the table only appends to it). */
static int memo_sync_multi(Memo *m, PyObject *table, size_t k) {
    PyObject *multi = table_multi(table);
    if (!multi) return -1;
    Py_ssize_t total = PyList_GET_SIZE(multi);
    if ((Py_ssize_t)k >= total) {
        Py_DECREF(multi);
        PyErr_SetString(PyExc_ValueError, "a code names a run of several words the table lacks");
        return -1;
    }
    if (grow((void **)&m->m_start, &m->m_cap, (size_t)total, sizeof(int64_t)) < 0) goto fail;
    {
        size_t cap = m->m_cap - 0; /* m_size shares m_start's capacity */
        int64_t *p = realloc(m->m_size, cap * sizeof(int64_t));
        if (!p) { PyErr_NoMemory(); goto fail; }
        m->m_size = p;
    }
    for (Py_ssize_t i = (Py_ssize_t)m->m_count; i < total; i++) {
        PyObject *ids = PyList_GET_ITEM(multi, i);
        if (!PyTuple_Check(ids)) {
            PyErr_SetString(PyExc_TypeError, "an entry of the word table's multi is not a tuple");
            goto fail;
        }
        Py_ssize_t n = PyTuple_GET_SIZE(ids);
        if (grow((void **)&m->m_flat, &m->m_flat_cap, m->m_flat_len + (size_t)n, sizeof(int64_t)) < 0)
            goto fail;
        m->m_start[i] = (int64_t)m->m_flat_len;
        m->m_size[i] = n;
        for (Py_ssize_t j = 0; j < n; j++) {
            long long v = PyLong_AsLongLong(PyTuple_GET_ITEM(ids, j));
            if (v == -1 && PyErr_Occurred()) goto fail;
            if (v < 0) {
                PyErr_SetString(PyExc_ValueError, "a word id is negative");
                goto fail;
            }
            m->m_flat[m->m_flat_len++] = v;
        }
        m->m_count = (size_t)i + 1;
    }
    Py_DECREF(multi);
    return 0;
fail:
    Py_DECREF(multi);
    return -1;
}

static void Memo_dealloc(Memo *m) {
    Py_CLEAR(m->cur_multi);
    free(m->slots);
    free(m->w_slots);
    free(m->arena);
    free(m->m_start);
    free(m->m_size);
    free(m->m_flat);
    free(m->lut);
    free(m->o_fid);
    free(m->o_first);
    free(m->c_end);
    free(m->offsets);
    free(m->d_fid);
    free(m->d_order);
    free(m->d_per);
    free(m->cnt);
    free(m->cnt_first);
    free(m->touched);
    free(m->pw);
    free(m->pb);
    free(m->pf);
    free(m->distinct);
    free(m->ls);
    free(m->lows);
    free(m->bd);
    free(m->fe);
    free(m->r_start);
    free(m->r_len);
    free(m->r_hash);
    Py_TYPE(m)->tp_free((PyObject *)m);
}

static PyObject *Memo_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    if (PyTuple_GET_SIZE(args) || (kwds && PyDict_GET_SIZE(kwds))) {
        PyErr_SetString(PyExc_TypeError, "Memo() takes no arguments");
        return NULL;
    }
    Memo *m = (Memo *)type->tp_alloc(type, 0);
    return (PyObject *)m;
}

static PyObject *Memo_len(Memo *m, PyObject *Py_UNUSED(ignored)) {
    return PyLong_FromSize_t(m->used);
}

typedef struct {
    int64_t *ids;
    size_t n, cap;
} Ids;

/* The file id of table word id w, a new one (its id appended to distinct) if first seen. */
static inline int64_t file_id(Memo *m, int64_t w, Ids *distinct) {
    if ((uint64_t)w >= m->lut_cap) {
        size_t old = m->lut_cap;
        size_t cap = old;
        if (grow((void **)&m->lut, &cap, (size_t)w + 1, sizeof(struct FidSlot)) < 0) return -1;
        memset(m->lut + old, 0, (cap - old) * sizeof(struct FidSlot));
        m->lut_cap = cap;
    }
    struct FidSlot *slot = &m->lut[w];
    if (slot->stamp == m->call) return slot->fid;
    if (distinct->n == distinct->cap) {
        size_t cap = distinct->cap ? distinct->cap * 2 : 1024;
        int64_t *p = realloc(distinct->ids, cap * sizeof(int64_t));
        if (!p) { PyErr_NoMemory(); return -1; }
        distinct->ids = p;
        distinct->cap = cap;
    }
    int64_t f = (int64_t)distinct->n;
    distinct->ids[distinct->n++] = w;
    slot->stamp = m->call;
    slot->fid = f;
    return f;
}

static PyObject *bytes_of(const int64_t *a, size_t n) {
    return PyBytes_FromStringAndSize((const char *)a, (Py_ssize_t)(n * sizeof(int64_t)));
}

static int is_space(unsigned char c) {
    /* bytes.split()'s whitespace: ASCII space, \t, \n, \v, \f, \r */
    return c == ' ' || (c >= 0x09 && c <= 0x0D);
}

/* Two tables of the bytes that end a run. SPLIT_SEP: bytes.split()'s whitespace, for bytes
 * already translated (retrieval.words.translate). RAW_SEP: every byte but [A-Za-z0-9_-] and
 * those past ASCII, which is what splitting translate(data) cuts at, on data itself: translate
 * makes every other ASCII byte a space or leaves a newline, and leaves a run's own bytes as
 * they are, so the runs of the one are the runs of the other, byte for byte. */
static unsigned char SPLIT_SEP[256], RAW_SEP[256];

static void sep_tables(void) {
    for (int c = 0; c < 256; c++) {
        SPLIT_SEP[c] = (unsigned char)is_space((unsigned char)c);
        int keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                   c == '_' || c == '-' || c >= 0x80;
        RAW_SEP[c] = (unsigned char)!keep;
    }
}

/* The code the memo keeps for the run (its n bytes, hash h) into *code: 1 when it keeps one,
   0 when not (at most MAX_PROBE slots looked at: a run past them is looked up in the table). */
static int memo_find(const Memo *m, const unsigned char *run, size_t n, uint64_t h,
                     int64_t *code) {
    if (!m->cap) return 0;
    uint64_t head = head_of(run, n);
    size_t j = h & (m->cap - 1);
    for (int probes = 0; probes < MAX_PROBE; probes++) {
        const Slot *sl = &m->slots[j];
        if (!sl->hash) return 0;
        if (sl->hash == h && sl->len == n && sl->head == head &&
            (n <= 8 || memcmp(m->arena + sl->off + 8, run + 8, n - 8) == 0)) {
            *code = sl->code;
            return 1;
        }
        j = (j + 1) & (m->cap - 1);
    }
    return 0;
}

/* The run bytes of the 64 bytes at b as a mask (bit k for b[k]): those RAW_SEP keeps when raw,
 * else those SPLIT_SEP keeps (what is not bytes.split()'s whitespace). The same mask as the loop
 * over the table in cut_runs_at, 16 bytes at a time where SSE2 is (every x86-64), which was
 * most of the cut's cost a byte at a time; tests/test_words_simd.py holds the two to each other
 * on every byte value in every position of a block. */
#if defined(__SSE2__)
#include <emmintrin.h>
/* 0xFF where lo <= v <= hi (unsigned), else 0. */
static inline __m128i in_range(__m128i v, unsigned char lo, unsigned char hi) {
    __m128i t = _mm_sub_epi8(v, _mm_set1_epi8((char)lo));
    return _mm_cmpeq_epi8(_mm_min_epu8(t, _mm_set1_epi8((char)(hi - lo))), t);
}
static inline uint64_t keep_mask64(const unsigned char *b, int raw) {
    uint64_t keep = 0;
    for (int k = 0; k < 64; k += 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)(b + k));
        uint64_t bits;
        if (raw) {
            /* [A-Za-z] (a byte with 0x20 set in a-z), [0-9], "_", "-", and every byte past
             * ASCII (its high bit, which movemask reads as it is) */
            __m128i w = _mm_or_si128(in_range(_mm_or_si128(v, _mm_set1_epi8(0x20)), 'a', 'z'),
                                     in_range(v, '0', '9'));
            w = _mm_or_si128(w, _mm_cmpeq_epi8(v, _mm_set1_epi8('_')));
            w = _mm_or_si128(w, _mm_cmpeq_epi8(v, _mm_set1_epi8('-')));
            bits = (uint64_t)(unsigned)_mm_movemask_epi8(_mm_or_si128(w, v));
        } else {
            __m128i w = _mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8(' ')),
                                     in_range(v, 0x09, 0x0D));
            bits = (uint64_t)(unsigned)(~_mm_movemask_epi8(w) & 0xFFFF);
        }
        keep |= bits << k;
    }
    return keep;
}
#else
static inline uint64_t keep_mask64(const unsigned char *b, int raw) {
    const unsigned char *sep = raw ? RAW_SEP : SPLIT_SEP;
    uint64_t keep = 0;
    for (size_t k = 0; k < 64; k++) keep |= (uint64_t)(sep[b[k]] ^ 1) << k;
    return keep;
}
#endif

/* The index of the lowest set bit of v (v != 0). */
static inline unsigned low_bit(uint64_t v) {
#if defined(_MSC_VER) && !defined(__clang__)
    unsigned long i;
    _BitScanForward64(&i, v);
    return (unsigned)i;
#else
    return (unsigned)__builtin_ctzll(v);
#endif
}

/* The runs of t[p:end], cut at the bytes sep marks (bytes.split() cuts tdata at SPLIT_SEP's), into
   the memo's run arrays (start, length, hash), each run's slot fetched ahead (half of a lookup
   was waiting on memory): their number, or -1 with MemoryError set. The bytes are classified 64
   at a time into a mask of run bytes, whose rises and falls are the runs' starts and ends: a
   loop a byte that stops at each run's edges mispredicts a branch at most of them. */
static Py_ssize_t cut_runs_at(Memo *m, const unsigned char *t, Py_ssize_t p, Py_ssize_t end,
                              const unsigned char *sep) {
    size_t most = (size_t)(end - p) / 2 + 1; /* a run and a separator at least, but the last */
    if (most > m->r_cap) {
        size_t cap = m->r_cap ? m->r_cap : 1024;
        while (cap < most) cap *= 2;
        int64_t *a = realloc(m->r_start, cap * sizeof(int64_t));
        if (!a) { PyErr_NoMemory(); return -1; }
        m->r_start = a;
        int64_t *b = realloc(m->r_len, cap * sizeof(int64_t));
        if (!b) { PyErr_NoMemory(); return -1; }
        m->r_len = b;
        uint64_t *hh = realloc(m->r_hash, cap * sizeof(uint64_t));
        if (!hh) { PyErr_NoMemory(); return -1; }
        m->r_hash = hh;
        m->r_cap = cap;
    }
    int64_t *rs = m->r_start, *rl = m->r_len;
    size_t nr = 0;
    uint64_t before = 0; /* whether the byte before the block is a run's */
    for (Py_ssize_t base = p; base < end; base += 64) {
        size_t width = (size_t)(end - base) < 64 ? (size_t)(end - base) : 64;
        const unsigned char *b = t + base;
        uint64_t keep = 0;
        if (width == 64 && (sep == RAW_SEP || sep == SPLIT_SEP))
            keep = keep_mask64(b, sep == RAW_SEP);
        else
            for (size_t k = 0; k < width; k++) keep |= (uint64_t)(sep[b[k]] ^ 1) << k;
        uint64_t prev = (keep << 1) | before;
        uint64_t rises = keep & ~prev, falls = ~keep & prev;
        if (width < 64) falls &= ((uint64_t)1 << width) - 1;
        before = (keep >> (width - 1)) & 1;
        /* A run's start comes before its end: the falls in this block close the run open before
         * it first, if any, then each rise's. */
        while (rises | falls) {
            uint64_t r = rises ? low_bit(rises) : 64, f = falls ? low_bit(falls) : 64;
            if (r < f) {
                rs[nr++] = base + (Py_ssize_t)r;
                rises &= rises - 1;
            } else {
                rl[nr - 1] = base + (Py_ssize_t)f - rs[nr - 1];
                falls &= falls - 1;
            }
        }
    }
    if (before) rl[nr - 1] = end - rs[nr - 1]; /* the last run ends with the bytes */
    for (size_t k = 0; k < nr; k++) {
        uint64_t h = hash_bytes(t + rs[k], (size_t)rl[k]);
        m->r_hash[k] = h;
        if (m->cap) __builtin_prefetch(&m->slots[h & (m->cap - 1)]);
    }
    return (Py_ssize_t)nr;
}

/* cut_runs_at, at bytes.split()'s whitespace (count_texts' texts are translated). */
static Py_ssize_t cut_runs(Memo *m, const unsigned char *t, Py_ssize_t p, Py_ssize_t end) {
    return cut_runs_at(m, t, p, end, SPLIT_SEP);
}

#include "_words_rule.h" /* the word rule of an ASCII run, and the definition terms */

#include "_fold_native.h" /* the fold's calls: count_texts, blob_hints, postings_bytes */
#include "_words_file.h"  /* a file's pairs and record: Memo.record, chunk_bounds */

static PyMethodDef Memo_methods[] = {
    {"count_texts", (PyCFunction)Memo_count_texts, METH_VARARGS,
     "count_texts(table, tdata, bounds) -> (distinct, offsets, word, count): the words of many "
     "texts and their counts, each as bytes of native int64."},
    {"definition_terms", (PyCFunction)Memo_definition_terms, METH_VARARGS,
     "definition_terms(table, names, prefix) -> (ids, counts): the definition terms of defined "
     "names and how many each has, each as bytes of native int64."},
    {"record", (PyCFunction)Memo_record, METH_VARARGS,
     "record(table, data, blanked, def_at, def_counts, def_word) -> (vocab, starts, ends, "
     "offsets, word, body, first) or the blobs' looks (int): a file's record, its arrays bytes "
     "of native uint32."},
    {"size", (PyCFunction)Memo_len, METH_NOARGS, "How many runs the memo holds."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject MemoType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "nodwyn_retrieval.retrieval._words_native.Memo",
    .tp_basicsize = sizeof(Memo),
    .tp_dealloc = (destructor)Memo_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The codes of the runs a word table gave, keyed by the runs' bytes.",
    .tp_methods = Memo_methods,
    .tp_new = Memo_new,
};


/* definition_lines(data, first_words) -> bytes of native int64: the starts of the lines of data
 * that retrieval.chunks._DEFINITION_LINE matches, given that expression's first words
 * (first_words, a tuple of bytes): a line passes when, after its blanks, it begins with one of
 * them, or reads as one of the expression's other shapes (shape_passes). A line whose first
 * word (after its blanks, the longest run of [A-Za-z0-9_]) is one of not_words (a tuple of
 * bytes, optional) is left out whatever follows: every alternative of retrieval.chunks._DEFINITION either refuses that word
 * there (its _NOT_NAMES) or needs a modifier or a keyword there, none of which is one. */
static int is_word(unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/* Whether a line's text t[p:eol], after its blanks t[line:p], reads as one of the shapes of
 * _DEFINITION_LINE after its first words: up to its first "(" (at q) only [\w$<>[\],.? \t*&], then
 *   - [A-Za-z_][\w<>[\],.?]*[ \t*&][\w<>[\],.? \t*&]*( (no "$" before q, a blank, "*" or "&"
 *     after the first character), then "throws" before any ";", or no ";" and the line ending
 *     with ")", "{" or "," and blanks;
 *   - [A-Za-z_$][\w$]*[ \t]*( then no ";" and the line ending with "{" and blanks;
 *   - in the first column, [A-Za-z_]\w*( then no ";" and the line ending with ")", "{" or ","
 *     and blanks.
 * t[p] is known to be [A-Za-z_$]. */
static int shape_passes(const unsigned char *t, Py_ssize_t line, Py_ssize_t p, Py_ssize_t eol) {
    Py_ssize_t q = p, blank_at = -1, dollar = 0, ident_end = -1;
    while (q < eol) {
        unsigned char d = t[q];
        if (is_word(d) || d == '$' || d == '<' || d == '>' || d == '[' || d == ']' || d == ',' ||
            d == '.' || d == '?' || d == ' ' || d == '\t' || d == '*' || d == '&') {
            if (d == '$') dollar = 1;
            if ((d == ' ' || d == '\t' || d == '*' || d == '&') && blank_at < 0 && q > p)
                blank_at = q;
            if (ident_end < 0 && !is_word(d) && d != '$') ident_end = q;
            q++;
        } else
            break;
    }
    if (q >= eol || t[q] != '(') return 0;
    if (ident_end < 0) ident_end = q;
    int semi = 0, throws = 0;
    for (Py_ssize_t r = q + 1; r < eol; r++) {
        if (t[r] == ';') { semi = 1; break; }
        if (!throws && t[r] == 't' && eol - r >= 6 && memcmp(t + r, "throws", 6) == 0) throws = 1;
    }
    unsigned char last = 0;
    if (!semi) {
        Py_ssize_t e = eol;
        while (e > q + 1 && (t[e - 1] == ' ' || t[e - 1] == '\t')) e--;
        if (e > q + 1) last = t[e - 1];
    }
    int ends_list = last == ')' || last == '{' || last == ',';
    /* The first shape: no "$" up to q and a blank, "*" or "&" after the first character. */
    if (t[p] != '$' && !dollar && blank_at >= 0 && (throws || ends_list)) return 1;
    /* The second: an identifier (with "$"), then only blanks up to q. */
    if (last == '{') {
        Py_ssize_t k = ident_end;
        while (k < q && (t[k] == ' ' || t[k] == '\t')) k++;
        if (k == q) return 1;
    }
    /* The third: in the first column, a word of \w then "(" at once. */
    if (p == line && t[p] != '$' && ends_list) {
        Py_ssize_t k = p;
        while (k < q && is_word(t[k])) k++;
        if (k == q) return 1;
    }
    return 0;
}

static PyObject *definition_lines(PyObject *Py_UNUSED(mod), PyObject *args) {
    Py_buffer data = {0};
    PyObject *words, *nots = NULL;
    if (!PyArg_ParseTuple(args, "y*O!|O!:definition_lines", &data, &PyTuple_Type, &words,
                          &PyTuple_Type, &nots))
        return NULL;
    PyObject *result = NULL;
    int64_t *out = NULL;
    Py_ssize_t *word_next = NULL; /* and the not words' after the words' */
    size_t n_out = 0, cap = 0;
    Py_ssize_t n_words = PyTuple_GET_SIZE(words);
    for (Py_ssize_t i = 0; i < n_words; i++) {
        PyObject *w = PyTuple_GET_ITEM(words, i);
        if (!PyBytes_Check(w) || PyBytes_GET_SIZE(w) < 1) {
            PyErr_SetString(PyExc_TypeError, "definition_lines: first words are non-empty bytes");
            goto done;
        }
    }
    Py_ssize_t n_nots = nots ? PyTuple_GET_SIZE(nots) : 0;
    for (Py_ssize_t i = 0; i < n_nots; i++) {
        PyObject *w = PyTuple_GET_ITEM(nots, i);
        if (!PyBytes_Check(w) || PyBytes_GET_SIZE(w) < 1) {
            PyErr_SetString(PyExc_TypeError, "definition_lines: not words are non-empty bytes");
            goto done;
        }
    }
    /* Each list's words by first byte (head[c], then next[i], -1 ending it): a line is compared
     * only with the words that begin with its first byte, rather than with each word in turn. */
    Py_ssize_t word_head[256], not_head[256];
    word_next = malloc((size_t)(n_words + n_nots + 1) * sizeof(Py_ssize_t));
    if (!word_next) { PyErr_NoMemory(); goto done; }
    Py_ssize_t *not_next = word_next + n_words;
    for (int c = 0; c < 256; c++) word_head[c] = not_head[c] = -1;
    for (Py_ssize_t i = n_words - 1; i >= 0; i--) {
        unsigned char c = (unsigned char)PyBytes_AS_STRING(PyTuple_GET_ITEM(words, i))[0];
        word_next[i] = word_head[c];
        word_head[c] = i;
    }
    for (Py_ssize_t i = n_nots - 1; i >= 0; i--) {
        unsigned char c = (unsigned char)PyBytes_AS_STRING(PyTuple_GET_ITEM(nots, i))[0];
        not_next[i] = not_head[c];
        not_head[c] = i;
    }
    const unsigned char *t = data.buf;
    Py_ssize_t n = data.len, line = 0;
    while (line <= n) {
        if (line == n && n > 0 && t[n - 1] != '\n') break; /* no line after the last newline */
        const unsigned char *nl = memchr(t + line, '\n', (size_t)(n - line));
        Py_ssize_t eol = nl ? nl - t : n;
        Py_ssize_t p = line;
        int pass = 0;
        while (p < eol && (t[p] == ' ' || t[p] == '\t')) p++;
        if (p < eol && not_head[t[p]] >= 0) {
            Py_ssize_t w_end = p;
            while (w_end < eol && is_word(t[w_end])) w_end++;
            for (Py_ssize_t i = not_head[t[p]]; i >= 0; i = not_next[i]) {
                PyObject *w = PyTuple_GET_ITEM(nots, i);
                Py_ssize_t len = PyBytes_GET_SIZE(w);
                if (len == w_end - p && memcmp(PyBytes_AS_STRING(w), t + p, (size_t)len) == 0) {
                    p = eol; /* a refused first word: no alternative can match the line */
                    break;
                }
            }
        }
        if (p < eol) {
            unsigned char c = t[p];
            for (Py_ssize_t i = word_head[c]; i >= 0 && !pass; i = word_next[i]) {
                PyObject *w = PyTuple_GET_ITEM(words, i);
                Py_ssize_t len = PyBytes_GET_SIZE(w);
                const char *ws = PyBytes_AS_STRING(w);
                if ((unsigned char)ws[0] == c && len <= eol - p && memcmp(ws, t + p, (size_t)len) == 0)
                    pass = 1;
            }
            if (!pass && (is_word(c) || c == '$') && !(c >= '0' && c <= '9'))
                pass = shape_passes(t, line, p, eol);
        }
        if (pass) {
            if (grow((void **)&out, &cap, n_out + 1, sizeof(int64_t)) < 0) goto done;
            out[n_out++] = (int64_t)line;
        }
        if (!nl) break;
        line = eol + 1;
    }
    result = bytes_of(out ? out : (int64_t *)"", n_out);
done:
    PyBuffer_Release(&data);
    free(out);
    free(word_next);
    return result;
}

/* definition_heads(data, lines) -> bytes of native int64, two a line: for each line start of
 * lines (bytes of native int64, definition_lines' answer), where the name it defines begins and
 * ends when the line reads, after its blanks, "def" or "class", blanks, then [A-Za-z_]: the
 * first alternative of retrieval.chunks._DEFINITION then matches it whatever follows (no
 * modifier begins either word; the optional "<...>" and "(...)" need a "<" or a "(" where the
 * name begins), with the name the longest [A-Za-z0-9_$] run there; else -1, -1, for the
 * expression to decide. Most of a Python file's lines the filter picks are such (16,749 of
 * 19,812 in half of sympy), and the expression took about 9,000 instructions a line. */
static PyObject *definition_heads(PyObject *Py_UNUSED(mod), PyObject *args) {
    Py_buffer data = {0}, lines = {0};
    if (!PyArg_ParseTuple(args, "y*y*:definition_heads", &data, &lines)) return NULL;
    PyObject *result = NULL;
    if (lines.len % 8) {
        PyErr_SetString(PyExc_ValueError, "definition_heads: line starts of int64 expected");
        goto done;
    }
    size_t n_lines = (size_t)lines.len / 8;
    const int64_t *at = lines.buf;
    const unsigned char *t = data.buf;
    Py_ssize_t n = data.len;
    result = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(n_lines * 2 * sizeof(int64_t)));
    if (!result) goto done;
    int64_t *out = (int64_t *)PyBytes_AS_STRING(result);
    for (size_t i = 0; i < n_lines; i++) {
        int64_t a = -1, e = -1;
        Py_ssize_t p = (Py_ssize_t)at[i];
        if (p < 0 || p > n) {
            Py_CLEAR(result);
            PyErr_SetString(PyExc_ValueError, "definition_heads: a line start is out of range");
            goto done;
        }
        while (p < n && (t[p] == ' ' || t[p] == '\t')) p++;
        Py_ssize_t k = 0;
        if (n - p >= 4 && memcmp(t + p, "def", 3) == 0) k = 3;
        else if (n - p >= 6 && memcmp(t + p, "class", 5) == 0) k = 5;
        if (k && (t[p + k] == ' ' || t[p + k] == '\t')) {
            Py_ssize_t q = p + k;
            while (q < n && (t[q] == ' ' || t[q] == '\t')) q++;
            if (q < n && ((t[q] >= 'A' && t[q] <= 'Z') || (t[q] >= 'a' && t[q] <= 'z') ||
                          t[q] == '_')) {
                Py_ssize_t r = q + 1;
                while (r < n && (is_word(t[r]) || t[r] == '$')) r++;
                a = q;
                e = r;
            }
        }
        out[2 * i] = a;
        out[2 * i + 1] = e;
    }
done:
    PyBuffer_Release(&data);
    PyBuffer_Release(&lines);
    return result;
}

/* cut_runs(data, raw) -> bytes of native int64, (start, length) a run: the runs cut_runs_at cuts
 * from data, at RAW_SEP's bytes when raw is true (Memo.record's cut of untranslated bytes), else
 * at SPLIT_SEP's (bytes.split()'s, count_texts' cut). For the tests, which hold it to
 * bytes.split(); a throwaway memo's run arrays hold the work. */
static PyObject *cut_runs_py(PyObject *Py_UNUSED(mod), PyObject *args) {
    Py_buffer data = {0};
    int raw = 0;
    if (!PyArg_ParseTuple(args, "y*p:cut_runs", &data, &raw)) return NULL;
    PyObject *result = NULL;
    Memo m = {0};
    int64_t *out = NULL;
    Py_ssize_t got = cut_runs_at(&m, data.buf, 0, data.len, raw ? RAW_SEP : SPLIT_SEP);
    if (got < 0) goto done;
    out = malloc(((size_t)got * 2 + 1) * sizeof(int64_t));
    if (!out) { PyErr_NoMemory(); goto done; }
    for (Py_ssize_t k = 0; k < got; k++) {
        out[2 * k] = m.r_start[k];
        out[2 * k + 1] = m.r_len[k];
    }
    result = bytes_of(out, (size_t)got * 2);
done:
    PyBuffer_Release(&data);
    free(out);
    free(m.r_start);
    free(m.r_len);
    free(m.r_hash);
    return result;
}

static PyMethodDef module_methods[] = {
    {"blob_looks", blob_looks_py, METH_VARARGS,
     "blob_looks(data) -> int: the bits of the shapes of retrieval.blobs whose first look finds "
     "something in data (LOOK_BASE64 1, LOOK_DATA 2, LOOK_DUMP 4, LOOK_LINE 8)."},
    {"definition_heads", definition_heads, METH_VARARGS,
     "definition_heads(data, lines) -> bytes of native int64: for each line, where the name a "
     "def or class line defines begins and ends, or -1, -1 for the expression to decide."},
    {"cut_runs", cut_runs_py, METH_VARARGS,
     "cut_runs(data, raw) -> bytes of native int64: (start, length) of each run Memo.record "
     "(raw) or count_texts (not raw) cuts from data."},
    {"postings_bytes", postings_bytes, METH_VARARGS,
     "postings_bytes(docs, tfs, counts, width, dw) -> bytes: a .mem's postings section."},
    {"blob_hints", blob_hints, METH_VARARGS,
     "blob_hints(data, bounds) -> bytes: one a text, 1 where it may hold a blob "
     "(retrieval.blobs.blob_spans' first looks), 0 where it holds none."},
    {"chunk_bounds", chunk_bounds, METH_VARARGS,
     "chunk_bounds(data) -> (starts, ends, bounds, first_ends), each bytes of native int64: a "
     "file's chunks as Memo.record finds them."},
    {"definition_lines", definition_lines, METH_VARARGS,
     "definition_lines(data, first_words, not_words=()) -> bytes of native int64: the starts of "
     "the lines that retrieval.chunks._DEFINITION_LINE matches, less those of a refused first word."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT, "_words_native",
    "The compiled pass of retrieval.analyze (split, look up, count).", -1, module_methods,
};

PyMODINIT_FUNC PyInit__words_native(void) {
    blob_classes();
    sep_tables();
    if (PyType_Ready(&MemoType) < 0) return NULL;
    PyObject *mod = PyModule_Create(&moduledef);
    if (!mod) return NULL;
    Py_INCREF(&MemoType);
    if (PyModule_AddObject(mod, "Memo", (PyObject *)&MemoType) < 0) {
        Py_DECREF(&MemoType);
        Py_DECREF(mod);
        return NULL;
    }
    return mod;
}
