/* The session's side of a first build, compiled (retrieval/tree_build.py, retrieval/bm25.py).
 *
 * map_words gives a batch's words their numbers in the whole vocabulary with one dictionary
 * lookup a word (the Python path asks twice: whether it is new, then its number).
 * sort_postings orders a segment's postings by word, then document, and sums a repeated
 * (word, document) pair, in two counting sorts (by document, then, stably, by word): O(n) where
 * numpy's argsort of the pairs' keys is O(n log n). pack_segment makes Segment.to_obj's stored
 * arrays in one pass over the postings (the vocabulary sorted by qsort, each word's first bytes
 * compared first; no Python bytes object a word, no gathered copy of the postings). pairs_arrays
 * makes a worker's batch of postings (tree_build.pairs_of) in one pass over its records. Each
 * gives exactly what its Python path gives; tests/test_tree_native.py holds them to each other.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define MAX_QUANTITY 0x7FFFFFFFu /* bm25.MAX_QUANTITY: 2**31-1 */

/* map_words(ids, words) -> bytes: each word's number in ids (a new word given len(ids)), as
 * native uint32s. */
static PyObject *map_words(PyObject *self, PyObject *args) {
    PyObject *ids, *words;
    if (!PyArg_ParseTuple(args, "O!O!:map_words", &PyDict_Type, &ids, &PyList_Type, &words))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(words);
    PyObject *out = PyBytes_FromStringAndSize(NULL, n * (Py_ssize_t)sizeof(uint32_t));
    if (out == NULL) return NULL;
    uint32_t *got = (uint32_t *)PyBytes_AS_STRING(out);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *w = PyList_GET_ITEM(words, i);
        PyObject *v = PyDict_GetItemWithError(ids, w); /* borrowed */
        Py_ssize_t id;
        if (v == NULL) {
            if (PyErr_Occurred()) goto fail;
            id = PyDict_GET_SIZE(ids);
            PyObject *num = PyLong_FromSsize_t(id);
            if (num == NULL) goto fail;
            int bad = PyDict_SetItem(ids, w, num);
            Py_DECREF(num);
            if (bad) goto fail;
        } else {
            id = PyLong_AsSsize_t(v);
            if (id == -1 && PyErr_Occurred()) goto fail;
        }
        if (id < 0 || id > (Py_ssize_t)UINT32_MAX) {
            PyErr_SetString(PyExc_OverflowError, "a word's number does not fit 32 bits");
            goto fail;
        }
        got[i] = (uint32_t)id;
    }
    return out;
fail:
    Py_DECREF(out);
    return NULL;
}

static int u32_buffer(PyObject *obj, Py_buffer *view, const char *what) {
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) return -1;
    if (view->itemsize != 4 || view->format == NULL ||
        (strcmp(view->format, "I") != 0 && strcmp(view->format, "=I") != 0 &&
         strcmp(view->format, "<I") != 0 && strcmp(view->format, "L") != 0)) {
        PyErr_Format(PyExc_TypeError, "%s is not an array of uint32", what);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

/* sort_postings(word, doc, tf, n_words, n_docs[, renumber]) -> (counts, docs, tfs, lengths): the
 * pairs, a document d read as renumber[d] when renumber (n_docs uint32s) is given (then sorted by
 * document first, the word's sort alone not tried),
 * (uint32 arrays of one length) ordered by word then document, a repeated pair's frequencies
 * summed, each frequency capped at 2**31-1 after its sum; counts (n_words int64s) each word's
 * postings, lengths (n_docs uint32s) each document's sum of its capped frequencies, capped. */
static PyObject *sort_postings(PyObject *self, PyObject *args) {
    PyObject *word_o, *doc_o, *tf_o, *renumber_o = Py_None;
    Py_ssize_t n_words, n_docs;
    if (!PyArg_ParseTuple(args, "OOOnn|O:sort_postings", &word_o, &doc_o, &tf_o, &n_words, &n_docs,
                          &renumber_o))
        return NULL;
    if (n_words < 0 || n_docs < 0 || n_words > (Py_ssize_t)UINT32_MAX ||
        n_docs > (Py_ssize_t)UINT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "n_words and n_docs must be counts that fit 32 bits");
        return NULL;
    }
    Py_buffer wv, dv, tv;
    if (u32_buffer(word_o, &wv, "word") < 0) return NULL;
    if (u32_buffer(doc_o, &dv, "doc") < 0) {
        PyBuffer_Release(&wv);
        return NULL;
    }
    if (u32_buffer(tf_o, &tv, "tf") < 0) {
        PyBuffer_Release(&wv);
        PyBuffer_Release(&dv);
        return NULL;
    }
    Py_buffer rv = {0};
    int have_r = 0;
    const uint32_t *renumber = NULL;
    if (renumber_o != Py_None) {
        if (u32_buffer(renumber_o, &rv, "renumber") < 0) {
            PyBuffer_Release(&wv);
            PyBuffer_Release(&dv);
            PyBuffer_Release(&tv);
            return NULL;
        }
        have_r = 1;
        renumber = (const uint32_t *)rv.buf;
    }
    PyObject *result = NULL, *counts_o = NULL, *docs_o = NULL, *tfs_o = NULL, *lengths_o = NULL;
    uint32_t *w1 = NULL, *d1 = NULL, *t1 = NULL, *d2 = NULL, *t2 = NULL;
    int64_t *start = NULL;
    Py_ssize_t n = wv.len / 4;
    if (dv.len / 4 != n || tv.len / 4 != n) {
        PyErr_SetString(PyExc_ValueError, "word, doc and tf differ in length");
        goto done;
    }
    if (have_r && rv.len / 4 != n_docs) {
        PyErr_SetString(PyExc_ValueError, "renumber does not give a number to each document");
        goto done;
    }
    const uint32_t *word = (const uint32_t *)wv.buf, *doc = (const uint32_t *)dv.buf;
    const uint32_t *tf = (const uint32_t *)tv.buf;
    Py_ssize_t m = 0; /* the postings once repeated pairs are summed */
    counts_o = PyBytes_FromStringAndSize(NULL, n_words * (Py_ssize_t)sizeof(int64_t));
    lengths_o = PyBytes_FromStringAndSize(NULL, n_docs * (Py_ssize_t)sizeof(uint32_t));
    if (counts_o == NULL || lengths_o == NULL) goto done;
    int64_t *counts = (int64_t *)PyBytes_AS_STRING(counts_o);
    uint32_t *lengths = (uint32_t *)PyBytes_AS_STRING(lengths_o);
    Py_ssize_t big = (n_words > n_docs ? n_words : n_docs) + 1;
    start = PyMem_Calloc((size_t)big, sizeof(int64_t));
    d2 = PyMem_Malloc((size_t)(n ? n : 1) * sizeof(uint32_t));
    t2 = PyMem_Malloc((size_t)(n ? n : 1) * sizeof(uint32_t));
    if (start == NULL || d2 == NULL || t2 == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (word[i] >= (uint64_t)n_words || doc[i] >= (uint64_t)n_docs) {
            PyErr_SetString(PyExc_ValueError, "a pair names a word or a document past the end");
            goto done;
        }
    }
    for (Py_ssize_t d = 0; have_r && d < n_docs; d++) {
        if (renumber[d] >= (uint64_t)n_docs) {
            PyErr_SetString(PyExc_ValueError, "renumber names a document past the end");
            goto done;
        }
    }
    int sorted_words = 0, nomem = 0;
    Py_BEGIN_ALLOW_THREADS
    /* By word, stably. Within a word the documents then ascend when the pairs came in document
     * order, or as runs each in document order, one after the other (a first build's batches,
     * each sorted when added): checked, and put in order below. */
    for (int attempt = have_r; attempt < 2 && !sorted_words && !nomem; attempt++) {
        const uint32_t *ws = word, *ds = doc, *ts = tf;
        if (attempt) {
            w1 = PyMem_RawMalloc((size_t)(n ? n : 1) * sizeof(uint32_t));
            d1 = PyMem_RawMalloc((size_t)(n ? n : 1) * sizeof(uint32_t));
            t1 = PyMem_RawMalloc((size_t)(n ? n : 1) * sizeof(uint32_t));
            if (w1 == NULL || d1 == NULL || t1 == NULL) {
                nomem = 1;
                break;
            }
            memset(start, 0, (size_t)big * sizeof(int64_t));
            for (Py_ssize_t i = 0; i < n; i++) start[(renumber ? renumber[doc[i]] : doc[i]) + 1]++;
            for (Py_ssize_t d = 0; d < n_docs; d++) start[d + 1] += start[d];
            for (Py_ssize_t i = 0; i < n; i++) {
                uint32_t d = renumber ? renumber[doc[i]] : doc[i];
                int64_t at = start[d]++;
                w1[at] = word[i];
                d1[at] = d;
                t1[at] = tf[i];
            }
            ws = w1, ds = d1, ts = t1;
        }
        memset(start, 0, (size_t)big * sizeof(int64_t));
        for (Py_ssize_t i = 0; i < n; i++) start[ws[i] + 1]++;
        for (Py_ssize_t w = 0; w < n_words; w++) start[w + 1] += start[w];
        for (Py_ssize_t i = 0; i < n; i++) {
            int64_t at = start[ws[i]]++;
            d2[at] = ds[i];
            t2[at] = ts[i];
        }
        /* start[w] is now where word w's pairs end. A word whose runs overlap a little (two
         * batches' documents interleaved at their edges) is put in order by insertion, within a
         * budget of n moves in all; past it, the pairs are sorted by document first. */
        sorted_words = 1;
        int64_t a = 0, moves = 0;
        for (Py_ssize_t w = 0; w < n_words && sorted_words; w++) {
            for (int64_t i = a + 1; i < start[w] && sorted_words; i++) {
                if (d2[i - 1] <= d2[i]) continue;
                uint32_t d = d2[i], t = t2[i];
                int64_t j = i;
                while (j > a && d2[j - 1] > d) {
                    d2[j] = d2[j - 1];
                    t2[j] = t2[j - 1];
                    j--;
                    if (++moves > n) {
                        sorted_words = 0; /* the pairs are sorted again from the start */
                        break;
                    }
                }
                d2[j] = d;
                t2[j] = t;
            }
            a = start[w];
        }
    }
    if (sorted_words) {
        /* A repeated document is summed into the one before it, in place (the write position
         * never passes the read position), each sum capped once whole. */
        memset(lengths, 0, (size_t)n_docs * sizeof(uint32_t));
        uint64_t *sums = (uint64_t *)start; /* free once the loop below has read each word's end */
        int64_t a = 0;
        for (Py_ssize_t w = 0; w < n_words; w++) {
            int64_t b = start[w], first = m;
            for (int64_t i = a; i < b;) {
                uint32_t d = d2[i];
                uint64_t sum = t2[i++];
                while (i < b && d2[i] == d) sum += t2[i++];
                d2[m] = d;
                t2[m] = (uint32_t)(sum > MAX_QUANTITY ? MAX_QUANTITY : sum);
                m++;
            }
            counts[w] = m - first;
            a = b;
        }
        memset(sums, 0, (size_t)big * sizeof(uint64_t));
        for (Py_ssize_t i = 0; i < m; i++) sums[d2[i]] += t2[i];
        for (Py_ssize_t d = 0; d < n_docs; d++)
            lengths[d] = (uint32_t)(sums[d] > MAX_QUANTITY ? MAX_QUANTITY : sums[d]);
    }
    Py_END_ALLOW_THREADS
    if (nomem || !sorted_words) { /* sorted by document first, every word's documents ascend */
        PyErr_NoMemory();
        goto done;
    }
    docs_o = PyBytes_FromStringAndSize((const char *)d2, m * (Py_ssize_t)sizeof(uint32_t));
    tfs_o = PyBytes_FromStringAndSize((const char *)t2, m * (Py_ssize_t)sizeof(uint32_t));
    if (docs_o == NULL || tfs_o == NULL) goto done;
    result = PyTuple_Pack(4, counts_o, docs_o, tfs_o, lengths_o);
done:
    Py_XDECREF(counts_o);
    Py_XDECREF(docs_o);
    Py_XDECREF(tfs_o);
    Py_XDECREF(lengths_o);
    PyMem_Free(start);
    PyMem_RawFree(w1);
    PyMem_RawFree(d1);
    PyMem_RawFree(t1);
    PyMem_Free(d2);
    PyMem_Free(t2);
    PyBuffer_Release(&wv);
    PyBuffer_Release(&dv);
    PyBuffer_Release(&tv);
    if (have_r) PyBuffer_Release(&rv);
    return result;
}

/* -- the stored form of a segment (Segment.to_obj) ------------------------------------------ */

typedef struct {
    uint64_t head; /* the word's first 8 bytes, big-endian, zeros past its end */
    const char *p;
    Py_ssize_t n;
    Py_ssize_t i;
} word_ref;

/* The words' order by their bytes. Most comparisons end at the heads, which lie in the array
 * being sorted: a word's own bytes, scattered over the heap with its str object, are read only
 * when two heads are equal (a first build's vocabulary, in no order, spent most of its sort in
 * those reads). Two heads differ as the words' bytes do: zeros past a word's end sort it before
 * a longer word with the same start, as its shortness does; a word that goes on with zeros has
 * the head of the shorter one, and the full comparison tells them apart. */
static int by_bytes(const void *x, const void *y) {
    const word_ref *a = x, *b = y;
    if (a->head != b->head) return a->head < b->head ? -1 : 1;
    Py_ssize_t n = a->n < b->n ? a->n : b->n;
    int c = memcmp(a->p, b->p, (size_t)n);
    if (c) return c;
    if (a->n != b->n) return a->n < b->n ? -1 : 1;
    return a->i < b->i ? -1 : a->i > b->i; /* equal words keep their order, as sorted() does */
}

typedef struct {
    char *buf;
    Py_ssize_t len, cap;
} grow;

static int put_u32(grow *g, uint32_t v) {
    if (g->len + 4 > g->cap) {
        Py_ssize_t cap = g->cap ? 2 * g->cap : 4096;
        char *b = PyMem_Realloc(g->buf, (size_t)cap);
        if (b == NULL) return -1;
        g->buf = b, g->cap = cap;
    }
    unsigned char *q = (unsigned char *)g->buf + g->len;
    q[0] = (unsigned char)v, q[1] = (unsigned char)(v >> 8);
    q[2] = (unsigned char)(v >> 16), q[3] = (unsigned char)(v >> 24);
    g->len += 4;
    return 0;
}

static void le16(unsigned char *q, uint32_t v) { q[0] = (unsigned char)v, q[1] = (unsigned char)(v >> 8); }

static void le32(unsigned char *q, uint32_t v) {
    q[0] = (unsigned char)v, q[1] = (unsigned char)(v >> 8);
    q[2] = (unsigned char)(v >> 16), q[3] = (unsigned char)(v >> 24);
}

/* refs[i] for each of the nw words of seq (a PySequence_Fast): its UTF-8 bytes (the str's own,
 * valid while seq holds it), its index and its head; the bytes' total and the longest word's
 * length. -1 with the error set when a word is not a str. */
static int word_refs(PyObject *seq, word_ref *refs, Py_ssize_t nw, Py_ssize_t *total,
                     Py_ssize_t *top_len) {
    for (Py_ssize_t i = 0; i < nw; i++) {
        PyObject *w = PySequence_Fast_GET_ITEM(seq, i);
        if (!PyUnicode_Check(w)) {
            PyErr_SetString(PyExc_TypeError, "a word is not a str");
            return -1;
        }
        refs[i].p = PyUnicode_AsUTF8AndSize(w, &refs[i].n);
        if (refs[i].p == NULL) return -1;
        refs[i].i = i;
        uint64_t head = 0;
        for (Py_ssize_t j = 0; j < 8; j++)
            head = head << 8 | (j < refs[i].n ? (unsigned char)refs[i].p[j] : 0u);
        refs[i].head = head;
        *total += refs[i].n;
        if (refs[i].n > *top_len) *top_len = refs[i].n;
    }
    return 0;
}

/* A vocabulary's stored order, made by vocab_order for one tuple of words and kept for
 * pack_segment: the words' refs, sorted. It holds the tuple, which holds each str and so the
 * bytes the refs point at; a tuple cannot change, so the order is that tuple's for as long as it
 * lives, and pack_segment takes it, unchecked, only for that very tuple (any other words are
 * sorted there). */
typedef struct {
    PyObject_HEAD
    PyObject *words; /* the tuple sorted */
    word_ref *refs;  /* its words' refs in by_bytes' order */
    Py_ssize_t nw, total, top_len;
} VocabOrder;

static void VocabOrder_dealloc(VocabOrder *o) {
    Py_XDECREF(o->words);
    PyMem_Free(o->refs);
    Py_TYPE(o)->tp_free((PyObject *)o);
}

static PyObject *VocabOrder_indices(VocabOrder *o, PyObject *Py_UNUSED(ignored)) {
    PyObject *out = PyBytes_FromStringAndSize(NULL, o->nw * (Py_ssize_t)sizeof(int64_t));
    if (out == NULL) return NULL;
    int64_t *q = (int64_t *)PyBytes_AS_STRING(out);
    for (Py_ssize_t j = 0; j < o->nw; j++) q[j] = (int64_t)o->refs[j].i;
    return out;
}

static PyObject *VocabOrder_words(VocabOrder *o, void *Py_UNUSED(closure)) {
    Py_INCREF(o->words);
    return o->words;
}

static PyMethodDef VocabOrder_methods[] = {
    {"indices", (PyCFunction)VocabOrder_indices, METH_NOARGS,
     "indices(self, /)\n--\n\nThe words' indices in their stored order, as native int64 bytes."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef VocabOrder_getset[] = {
    {"words", (getter)VocabOrder_words, NULL, "The tuple of words this order is of.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject VocabOrderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "nodwyn_retrieval.retrieval._tree_native.VocabOrder",
    .tp_basicsize = sizeof(VocabOrder),
    .tp_dealloc = (destructor)VocabOrder_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A vocabulary's stored order, of one tuple of words (vocab_order).",
    .tp_methods = VocabOrder_methods,
    .tp_getset = VocabOrder_getset,
};

/* vocab_order(words) -> VocabOrder: the words' stored order (by their UTF-8 bytes, as
 * pack_segment sorts them), of the tuple of words (words itself when it is a tuple). The sort runs
 * without the GIL, so that it can go on beside the postings' sort (sort_postings) in another
 * thread; the tuple holds each str, and so the bytes the sort reads, whatever another thread does
 * meanwhile. */
static PyObject *vocab_order(PyObject *self, PyObject *args) {
    PyObject *words_o;
    if (!PyArg_ParseTuple(args, "O:vocab_order", &words_o)) return NULL;
    PyObject *seq = PySequence_Tuple(words_o);
    if (seq == NULL) return NULL;
    Py_ssize_t nw = PyTuple_GET_SIZE(seq), total = 0, top_len = 0;
    word_ref *refs = PyMem_Malloc((size_t)(nw ? nw : 1) * sizeof(word_ref));
    if (refs == NULL) {
        Py_DECREF(seq);
        return PyErr_NoMemory();
    }
    if (word_refs(seq, refs, nw, &total, &top_len) < 0) {
        PyMem_Free(refs);
        Py_DECREF(seq);
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    qsort(refs, (size_t)nw, sizeof(word_ref), by_bytes);
    Py_END_ALLOW_THREADS
    VocabOrder *o = PyObject_New(VocabOrder, &VocabOrderType);
    if (o == NULL) {
        PyMem_Free(refs);
        Py_DECREF(seq);
        return NULL;
    }
    o->words = seq, o->refs = refs, o->nw = nw, o->total = total, o->top_len = top_len;
    return (PyObject *)o;
}

/* pack_segment(words, offsets, docs, tfs) -> tuple | None: the arrays of Segment.to_obj's stored
 * form, little-endian, the vocabulary sorted by its UTF-8 bytes: (vocab, vocab_len, counts,
 * first, delta, delta_exc_at, delta_exc, tf, tf_exc_at, tf_exc). None when a word has no
 * posting (the Python path then answers). */
static PyObject *pack_segment(PyObject *self, PyObject *args) {
    PyObject *words_o, *off_o, *docs_o, *tfs_o, *order_o = Py_None;
    if (!PyArg_ParseTuple(args, "OOOO|O:pack_segment", &words_o, &off_o, &docs_o, &tfs_o,
                          &order_o))
        return NULL;
    if (order_o != Py_None && !PyObject_TypeCheck(order_o, &VocabOrderType)) {
        PyErr_SetString(PyExc_TypeError, "order is not a vocab_order");
        return NULL;
    }
    PyObject *seq = PySequence_Fast(words_o, "words must be a sequence");
    if (seq == NULL) return NULL;
    Py_buffer ov = {0}, dv = {0}, tv = {0};
    int have_o = 0, have_d = 0, have_t = 0;
    PyObject *result = NULL;
    PyObject *vocab = NULL, *lens = NULL, *counts = NULL, *first = NULL, *delta = NULL;
    PyObject *tf4 = NULL, *d_at = NULL, *d_val = NULL, *t_at = NULL, *t_val = NULL;
    word_ref *refs = NULL;
    grow ga = {0}, gv = {0}, ta = {0}, tv_ = {0};
    Py_ssize_t nw = PySequence_Fast_GET_SIZE(seq);
    if (PyObject_GetBuffer(off_o, &ov, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) goto done;
    have_o = 1;
    if (ov.itemsize != 8 || ov.format == NULL ||
        (strcmp(ov.format, "l") != 0 && strcmp(ov.format, "q") != 0)) {
        PyErr_SetString(PyExc_TypeError, "offsets is not an array of int64");
        goto done;
    }
    if (u32_buffer(docs_o, &dv, "docs") < 0) goto done;
    have_d = 1;
    if (u32_buffer(tfs_o, &tv, "tfs") < 0) goto done;
    have_t = 1;
    const int64_t *off = ov.buf;
    const uint32_t *docs = dv.buf, *tfs = tv.buf;
    Py_ssize_t n = dv.len / 4;
    if (ov.len / 8 != nw + 1 || tv.len / 4 != n || off[0] != 0 || off[nw] != n) {
        PyErr_SetString(PyExc_ValueError, "offsets do not partition the postings");
        goto done;
    }
    for (Py_ssize_t w = 0; w < nw; w++) {
        if (off[w + 1] <= off[w]) { /* a word with no posting: the Python path's */
            result = Py_None;
            Py_INCREF(result);
            goto done;
        }
    }
    Py_ssize_t total = 0, top_len = 0;
    const word_ref *sorted;
    if (order_o != Py_None && ((VocabOrder *)order_o)->words == words_o) {
        /* this very tuple's order (the caller's words, not a copy): sorted already */
        const VocabOrder *o = (const VocabOrder *)order_o;
        sorted = o->refs, total = o->total, top_len = o->top_len;
    } else {
        refs = PyMem_Malloc((size_t)(nw ? nw : 1) * sizeof(word_ref));
        if (refs == NULL) {
            PyErr_NoMemory();
            goto done;
        }
        if (word_refs(seq, refs, nw, &total, &top_len) < 0) goto done;
        qsort(refs, (size_t)nw, sizeof(word_ref), by_bytes);
        sorted = refs;
    }
    int wide_len = top_len > 0xFF;
    int64_t top_count = 0;
    for (Py_ssize_t w = 0; w < nw; w++)
        if (off[w + 1] - off[w] > top_count) top_count = off[w + 1] - off[w];
    int cw = top_count <= 0xFF ? 1 : top_count <= 0xFFFF ? 2 : 4;
    vocab = PyBytes_FromStringAndSize(NULL, total);
    lens = PyBytes_FromStringAndSize(NULL, nw * (wide_len ? 2 : 1));
    counts = PyBytes_FromStringAndSize(NULL, nw * cw);
    first = PyBytes_FromStringAndSize(NULL, nw * 4);
    delta = PyBytes_FromStringAndSize(NULL, n * 2);
    tf4 = PyBytes_FromStringAndSize(NULL, (n + 1) / 2);
    if (!vocab || !lens || !counts || !first || !delta || !tf4) goto done;
    char *vb = PyBytes_AS_STRING(vocab);
    unsigned char *lb = (unsigned char *)PyBytes_AS_STRING(lens);
    unsigned char *cb = (unsigned char *)PyBytes_AS_STRING(counts);
    unsigned char *fb = (unsigned char *)PyBytes_AS_STRING(first);
    unsigned char *db = (unsigned char *)PyBytes_AS_STRING(delta);
    unsigned char *tb = (unsigned char *)PyBytes_AS_STRING(tf4);
    if (n % 2) tb[n / 2] = 0;
    Py_ssize_t at = 0; /* the posting's position in the stored order */
    for (Py_ssize_t j = 0; j < nw; j++) {
        const word_ref *r = &sorted[j];
        memcpy(vb, r->p, (size_t)r->n);
        vb += r->n;
        if (wide_len)
            le16(lb + 2 * j, (uint32_t)r->n);
        else
            lb[j] = (unsigned char)r->n;
        int64_t a = off[r->i], b = off[r->i + 1];
        uint32_t c = (uint32_t)(b - a);
        if (cw == 1)
            cb[j] = (unsigned char)c;
        else if (cw == 2)
            le16(cb + 2 * j, c);
        else
            le32(cb + 4 * j, c);
        le32(fb + 4 * j, docs[a]);
        for (int64_t k = a; k < b; k++, at++) {
            int64_t d = k == a ? 0 : (int64_t)docs[k] - (int64_t)docs[k - 1];
            if (d >= 0xFFFF) {
                if (put_u32(&ga, (uint32_t)at) < 0 || put_u32(&gv, (uint32_t)d) < 0) goto nomem;
                le16(db + 2 * at, 0xFFFF);
            } else {
                le16(db + 2 * at, (uint32_t)(uint16_t)d);
            }
            uint32_t t = tfs[k];
            if (t > 16 || t < 1)
                if (put_u32(&ta, (uint32_t)at) < 0 || put_u32(&tv_, t) < 0) goto nomem;
            uint32_t q = (t < 1 ? 1 : t > 16 ? 16 : t) - 1;
            if (at % 2)
                tb[at / 2] |= (unsigned char)(q << 4);
            else
                tb[at / 2] = (unsigned char)q;
        }
    }
    d_at = PyBytes_FromStringAndSize(ga.buf, ga.len);
    d_val = PyBytes_FromStringAndSize(gv.buf, gv.len);
    t_at = PyBytes_FromStringAndSize(ta.buf, ta.len);
    t_val = PyBytes_FromStringAndSize(tv_.buf, tv_.len);
    if (!d_at || !d_val || !t_at || !t_val) goto done;
    result = PyTuple_Pack(10, vocab, lens, counts, first, delta, d_at, d_val, tf4, t_at, t_val);
    goto done;
nomem:
    PyErr_NoMemory();
done:
    Py_XDECREF(vocab), Py_XDECREF(lens), Py_XDECREF(counts), Py_XDECREF(first);
    Py_XDECREF(delta), Py_XDECREF(tf4), Py_XDECREF(d_at), Py_XDECREF(d_val);
    Py_XDECREF(t_at), Py_XDECREF(t_val);
    PyMem_Free(refs);
    PyMem_Free(ga.buf), PyMem_Free(gv.buf), PyMem_Free(ta.buf), PyMem_Free(tv_.buf);
    if (have_o) PyBuffer_Release(&ov);
    if (have_d) PyBuffer_Release(&dv);
    if (have_t) PyBuffer_Release(&tv);
    Py_DECREF(seq);
    return result;
}

/* -- a batch's postings in a worker (tree_build.pairs_of) ----------------------------------- */

static int attr_u32(PyObject *rec, const char *name, Py_buffer *view) {
    PyObject *a = PyObject_GetAttrString(rec, name);
    if (a == NULL) return -1;
    int bad = u32_buffer(a, view, name);
    Py_DECREF(a);
    return bad;
}

/* pairs_arrays(records, path_counts, first_weight, path_weight) -> (words, doc, word, tf): the
 * batch's vocabulary (each file's words, then its path's, first seen first) and its pairs as
 * native uint32 bytes: each file's chunks' pairs, then its path's words in every chunk, files in
 * order; a pair's frequency body + (first_weight - 1) * first, a path word's path_weight times
 * its count, each capped at 2**31-1. */
static PyObject *pairs_arrays(PyObject *self, PyObject *args) {
    PyObject *recs, *paths;
    long long first_w, path_w;
    if (!PyArg_ParseTuple(args, "O!O!LL:pairs_arrays", &PyList_Type, &recs, &PyList_Type, &paths,
                          &first_w, &path_w))
        return NULL;
    Py_ssize_t nf = PyList_GET_SIZE(recs);
    if (PyList_GET_SIZE(paths) != nf) {
        PyErr_SetString(PyExc_ValueError, "a path's counts for each record");
        return NULL;
    }
    PyObject *ids = PyDict_New(), *words = PyList_New(0), *result = NULL;
    PyObject *doc_o = NULL, *word_o = NULL, *tf_o = NULL;
    uint32_t *gid = NULL;
    Py_ssize_t gid_cap = 0;
    Py_buffer *views = NULL; /* word, body, first, offsets, starts of each file */
    Py_ssize_t held = 0;
    if (ids == NULL || words == NULL) goto done;
    views = PyMem_Calloc((size_t)(nf ? nf : 1) * 5, sizeof(Py_buffer));
    if (views == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t total = 0;
    static const char *names[5] = {"word", "body", "first", "offsets", "starts"};
    for (Py_ssize_t f = 0; f < nf; f++) {
        PyObject *rec = PyList_GET_ITEM(recs, f);
        for (int k = 0; k < 5; k++) {
            if (attr_u32(rec, names[k], &views[5 * f + k]) < 0) goto done;
            held = 5 * f + k + 1;
        }
        Py_buffer *v = &views[5 * f];
        Py_ssize_t np_ = v[0].len / 4, nc = v[4].len / 4;
        const uint32_t *off = v[3].buf;
        if (v[1].len / 4 != np_ || v[2].len / 4 != np_ || v[3].len / 4 != nc + 1 ||
            off[0] != 0 || off[nc] != (uint64_t)np_) {
            PyErr_SetString(PyExc_ValueError, "a record's arrays do not match each other");
            goto done;
        }
        for (Py_ssize_t c = 0; c < nc; c++)
            if (off[c] > off[c + 1]) {
                PyErr_SetString(PyExc_ValueError, "a record's chunk offsets go back");
                goto done;
            }
        PyObject *pc = PyList_GET_ITEM(paths, f);
        if (!PyDict_Check(pc)) {
            PyErr_SetString(PyExc_TypeError, "a path's counts are not a dict");
            goto done;
        }
        if (nc) total += np_ + nc * PyDict_GET_SIZE(pc);
    }
    doc_o = PyBytes_FromStringAndSize(NULL, total * 4);
    word_o = PyBytes_FromStringAndSize(NULL, total * 4);
    tf_o = PyBytes_FromStringAndSize(NULL, total * 4);
    if (doc_o == NULL || word_o == NULL || tf_o == NULL) goto done;
    uint32_t *pd = (uint32_t *)PyBytes_AS_STRING(doc_o), *pw = (uint32_t *)PyBytes_AS_STRING(word_o);
    uint32_t *pt = (uint32_t *)PyBytes_AS_STRING(tf_o);
    Py_ssize_t at = 0;
    uint64_t base = 0;
    for (Py_ssize_t f = 0; f < nf; f++) {
        PyObject *rec = PyList_GET_ITEM(recs, f);
        PyObject *pc = PyList_GET_ITEM(paths, f);
        PyObject *vocab = PyObject_GetAttrString(rec, "vocab");
        if (vocab == NULL) goto done;
        PyObject *vs = PySequence_Fast(vocab, "a record's vocab is not a sequence");
        Py_DECREF(vocab);
        if (vs == NULL) goto done;
        Py_ssize_t nv = PySequence_Fast_GET_SIZE(vs), npc = PyDict_GET_SIZE(pc);
        if (nv + npc > gid_cap) {
            gid_cap = 2 * (nv + npc) + 16;
            uint32_t *g = PyMem_Realloc(gid, (size_t)gid_cap * sizeof(uint32_t));
            if (g == NULL) {
                Py_DECREF(vs);
                PyErr_NoMemory();
                goto done;
            }
            gid = g;
        }
        /* The file's words, then its path's, numbered in the batch's vocabulary. */
        Py_ssize_t pos = 0, j = 0;
        PyObject *key, *value;
        for (Py_ssize_t i = 0; i < nv + npc; i++) {
            PyObject *w;
            if (i < nv) {
                w = PySequence_Fast_GET_ITEM(vs, i);
            } else if (!PyDict_Next(pc, &pos, &key, &value)) {
                Py_DECREF(vs);
                PyErr_SetString(PyExc_RuntimeError, "a path's counts changed while read");
                goto done;
            } else {
                w = key;
            }
            PyObject *v = PyDict_GetItemWithError(ids, w);
            Py_ssize_t id;
            if (v == NULL) {
                if (PyErr_Occurred()) {
                    Py_DECREF(vs);
                    goto done;
                }
                id = PyDict_GET_SIZE(ids);
                PyObject *num = PyLong_FromSsize_t(id);
                int bad = num == NULL || PyDict_SetItem(ids, w, num) || PyList_Append(words, w);
                Py_XDECREF(num);
                if (bad) {
                    Py_DECREF(vs);
                    goto done;
                }
            } else {
                id = PyLong_AsSsize_t(v);
            }
            gid[i] = (uint32_t)id;
        }
        Py_DECREF(vs);
        Py_buffer *v = &views[5 * f];
        const uint32_t *word = v[0].buf, *body = v[1].buf, *first = v[2].buf, *off = v[3].buf;
        Py_ssize_t nc = v[4].len / 4;
        if (nc == 0) continue;
        for (Py_ssize_t c = 0; c < nc; c++) {
            for (uint32_t k = off[c]; k < off[c + 1]; k++) {
                if (word[k] >= (uint64_t)nv) {
                    PyErr_SetString(PyExc_ValueError, "a record's pair names a word past its vocab");
                    goto done;
                }
                uint64_t t = (uint64_t)body[k] + (uint64_t)(first_w - 1) * first[k];
                pd[at] = (uint32_t)(base + (uint64_t)c);
                pw[at] = gid[word[k]];
                pt[at] = (uint32_t)(t > MAX_QUANTITY ? MAX_QUANTITY : t);
                at++;
            }
        }
        /* The path's words count path_weight times, in every chunk of the file. */
        for (Py_ssize_t c = 0; c < nc; c++) {
            pos = 0, j = 0;
            while (PyDict_Next(pc, &pos, &key, &value)) {
                long long cnt = PyLong_AsLongLong(value);
                if (cnt == -1 && PyErr_Occurred()) goto done;
                long long t = path_w * cnt;
                pd[at] = (uint32_t)(base + (uint64_t)c);
                pw[at] = gid[nv + j++];
                pt[at] = (uint32_t)(t > (long long)MAX_QUANTITY ? MAX_QUANTITY : t);
                at++;
            }
        }
        base += (uint64_t)nc;
    }
    result = Py_BuildValue("(OOOO)", words, doc_o, word_o, tf_o);
done:
    for (Py_ssize_t i = 0; i < held; i++) PyBuffer_Release(&views[i]);
    PyMem_Free(views);
    PyMem_Free(gid);
    Py_XDECREF(ids);
    Py_XDECREF(words);
    Py_XDECREF(doc_o);
    Py_XDECREF(word_o);
    Py_XDECREF(tf_o);
    return result;
}

static PyMethodDef methods[] = {
    {"map_words", map_words, METH_VARARGS,
     "map_words(ids, words, /)\n--\n\n"
     "Each word's number in the dict ids, a new word added with the number len(ids); the "
     "numbers as native uint32 bytes."},
    {"sort_postings", sort_postings, METH_VARARGS,
     "sort_postings(word, doc, tf, n_words, n_docs, renumber=None, /)\n--\n\n"
     "The pairs by word then document, repeated pairs summed and capped: (counts, docs, tfs, "
     "lengths) as bytes of int64, uint32, uint32 and uint32."},
    {"pack_segment", pack_segment, METH_VARARGS,
     "pack_segment(words, offsets, docs, tfs, order=None, /)\n--\n\n"
     "The stored form's arrays of a segment, its vocabulary sorted by its UTF-8 bytes (order's, "
     "vocab_order's of this very tuple of words, when given), or None when a word has no "
     "posting."},
    {"vocab_order", vocab_order, METH_VARARGS,
     "vocab_order(words, /)\n--\n\n"
     "The stored order of the tuple of words (words itself when a tuple), sorted by UTF-8 bytes "
     "without the GIL, for pack_segment."},
    {"pairs_arrays", pairs_arrays, METH_VARARGS,
     "pairs_arrays(records, path_counts, first_weight, path_weight, /)\n--\n\n"
     "A batch's vocabulary and its pairs (doc, word, tf) as native uint32 bytes."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_tree_native", "A first build's postings, compiled.", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__tree_native(void) {
    if (PyType_Ready(&VocabOrderType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    Py_INCREF(&VocabOrderType);
    if (PyModule_AddObject(m, "VocabOrder", (PyObject *)&VocabOrderType) < 0) {
        Py_DECREF(&VocabOrderType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
