/* The compiled pass's calls for the conversation's fold (store.mem_fold, store.mem_encode), in
 * one translation unit with retrieval/_words_native.c, which includes this file after the memo's
 * own functions (this file uses them: the slots, the arena, file ids) and before the tables of
 * methods that name these calls:
 *
 *   Memo.count_texts: the words of many texts in one call, with the memo shared with record() and
 *                     the word rule of an ASCII run (ascii_words) with it;
 *   blob_hints:       which texts may hold a blob (retrieval.blobs.may_hold_blobs);
 *   postings_bytes:   a .mem's postings section.
 */
/* count_texts(table, tdata, bounds) -> (distinct, offsets, word, count), each bytes of native
 * int64: the words of many texts in one call (store.mem_fold). bounds: n_texts + 1 byte offsets
 * into tdata (translated as retrieval.words.translate does); each text's runs are cut as
 * bytes.split() cuts them and looked up as record() looks them up (this memo, else the table), and
 * each text's words counted: word[offsets[i]:offsets[i+1]] are text i's words as indices into
 * distinct (the table ids in order of first appearance), each once, in order of first
 * appearance in the text, with their counts beside them. */
static PyObject *Memo_count_texts(Memo *m, PyObject *args) {
    PyObject *table;
    Py_buffer data = {0}, bounds = {0};
    if (!PyArg_ParseTuple(args, "O!y*y*:count_texts", &PyDict_Type, &table, &data, &bounds))
        return NULL;
    PyObject *result = NULL, *words = NULL, *word_id = NULL;
    Ids distinct = {0};
    int64_t *offsets = NULL, *pw = NULL, *pc = NULL, *cnt = NULL;
    size_t n_pairs = 0, pair_cap = 0, cnt_cap = 0;

    if (bounds.len % 8 || bounds.len < 8) {
        PyErr_SetString(PyExc_ValueError, "count_texts: text bounds of int64 expected");
        goto done;
    }
    size_t n_texts = (size_t)bounds.len / 8 - 1;
    const unsigned char *t = data.buf;
    const int64_t *bd = bounds.buf;
    for (size_t c = 0; c < n_texts; c++) {
        if (bd[c] < 0 || bd[c] > bd[c + 1] || bd[c + 1] > data.len) {
            PyErr_SetString(PyExc_ValueError, "count_texts: text bounds out of order or range");
            goto done;
        }
    }
    words = PyObject_GetAttrString(table, "words");
    if (!words) goto done;
    word_id = PyObject_GetAttrString(table, "word_id");
    if (!word_id) goto done;
    if (!PyList_Check(words) || !PyDict_Check(word_id)) {
        PyErr_SetString(PyExc_TypeError, "count_texts: the table's words and word_id are a list "
                                         "and a dict");
        goto done;
    }
    if (!m->cur_multi && !(m->cur_multi = table_multi(table))) goto done;
    offsets = malloc((n_texts + 1) * sizeof(int64_t));
    if (!offsets) { PyErr_NoMemory(); goto done; }
    m->call++;
    offsets[0] = 0;
    for (size_t c = 0; c < n_texts; c++) {
        Py_ssize_t p = (Py_ssize_t)bd[c], end = (Py_ssize_t)bd[c + 1];
        size_t text_first = n_pairs;
        /* 1. The text's runs, each run's slot fetched ahead (as record() does). */
        Py_ssize_t got = cut_runs(m, t, p, end);
        if (got < 0) goto done;
        size_t nr = (size_t)got;
        /* 2. Each run's code (this memo, else the table), and its words counted for the text. */
        for (size_t k = 0; k < nr; k++) {
            const unsigned char *run = t + m->r_start[k];
            size_t n = (size_t)m->r_len[k];
            uint64_t h = m->r_hash[k];
            int64_t code = 0;
            int found = memo_find(m, run, n, h, &code);
            /* a new run kept in this memo's caches, as record() keeps it (table_code_of) */
            if (!found && table_code_of(m, table, run, n, words, word_id, &code) < 0) goto done;
            int64_t one[1];
            const int64_t *ids = one;
            int64_t n_ids = 1;
            if (code >= 0) {
                one[0] = code;
            } else if (code <= -2) {
                size_t mk = (size_t)(-2 - code);
                if (mk >= m->m_count && memo_sync_multi(m, table, mk) < 0) goto done;
                ids = m->m_flat + m->m_start[mk];
                n_ids = m->m_size[mk];
            } else if (code == -1) {
                continue;
            } else {
                PyErr_SetString(PyExc_ValueError, "count_texts: a run's code is out of range");
                goto done;
            }
            for (int64_t i = 0; i < n_ids; i++) {
                int64_t f = file_id(m, ids[i], &distinct);
                if (f < 0) goto done;
                if ((size_t)f >= cnt_cap) {
                    size_t old = cnt_cap;
                    if (grow((void **)&cnt, &cnt_cap, (size_t)f + 1, sizeof(int64_t)) < 0)
                        goto done;
                    memset(cnt + old, 0, (cnt_cap - old) * sizeof(int64_t));
                }
                /* cnt[f] is 1 + the index of f's last pair: a pair of this text when it lies at
                 * or past text_first (the pairs of earlier texts lie below it) */
                int64_t at = cnt[f] - 1;
                if (at >= (int64_t)text_first) {
                    pc[at]++;
                } else {
                    if (n_pairs == pair_cap) {
                        size_t cap = pair_cap ? pair_cap * 2 : 4096;
                        int64_t *a = realloc(pw, cap * sizeof(int64_t));
                        if (!a) { PyErr_NoMemory(); goto done; }
                        pw = a;
                        int64_t *b = realloc(pc, cap * sizeof(int64_t));
                        if (!b) { PyErr_NoMemory(); goto done; }
                        pc = b;
                        pair_cap = cap;
                    }
                    pw[n_pairs] = f;
                    pc[n_pairs] = 1;
                    cnt[f] = (int64_t)n_pairs + 1;
                    n_pairs++;
                }
            }
        }
        offsets[c + 1] = (int64_t)n_pairs;
    }
    result = Py_BuildValue("(NNNN)", bytes_of(distinct.ids ? distinct.ids : offsets, distinct.n),
                           bytes_of(offsets, n_texts + 1), bytes_of(pw ? pw : offsets, n_pairs),
                           bytes_of(pc ? pc : offsets, n_pairs));
done:
    Py_CLEAR(m->cur_multi);
    PyBuffer_Release(&data);
    PyBuffer_Release(&bounds);
    Py_XDECREF(words);
    Py_XDECREF(word_id);
    free(distinct.ids);
    free(offsets);
    free(pw);
    free(pc);
    free(cnt);
    return result;
}

/* blob_hints(data, bounds) -> bytes, one a text: 1 where the text data[bounds[i]:bounds[i+1]]
 * may hold a blob, 0 where retrieval.blobs.blob_spans finds none. The looks are blob_spans' own
 * first looks, which it makes before any expression runs, all in one pass here: a text shorter
 * than MIN_RUN (40) holds none; else it may hold one when it holds a run of 40 characters of the
 * base64 alphabet ([A-Za-z0-9+/]), "ata:" or "ATA:", a line of 1,000 bytes or more, or a hex
 * dump's hint: with hex digits as "h", blanks (" ", "\t") as " " and the rest as ".", one of
 * "hh hh hh hh", "hhhh hhhh hhhh", "hhhhhhhh hhhhhhhh" (blobs._DUMP_HINTS).
 * tests/test_blobs_native.py holds this to blobs.may_hold_blobs. */
#define BLOB_MIN_RUN 40    /* retrieval.blobs.MIN_RUN */
#define BLOB_MIN_LINE 1000 /* retrieval.blobs.MIN_MINIFIED */

/* Each byte's classes for blob_hints: base64's alphabet, a hex digit, a blank. */
#define B_ALPHA 1
#define B_HEX 2
#define B_BLANK 4
static unsigned char blob_class[256];

static void blob_classes(void) {
    for (int b = 0; b < 256; b++) {
        unsigned char c = 0;
        if ((b >= 'A' && b <= 'Z') || (b >= 'a' && b <= 'z') || (b >= '0' && b <= '9') ||
            b == '+' || b == '/')
            c |= B_ALPHA;
        if ((b >= '0' && b <= '9') || (b >= 'a' && b <= 'f') || (b >= 'A' && b <= 'F')) c |= B_HEX;
        if (b == ' ' || b == '\t') c |= B_BLANK;
        blob_class[b] = c;
    }
}

/* Whether a dump's hint (groups of `width` hex digits, `groups` of them, one blank between
 * each) begins at p[i - width], its first blank being p[i]. */
static int dump_hint_at(const unsigned char *p, size_t n, size_t i, size_t width, size_t groups) {
    if (i < width || i - width + groups * width + (groups - 1) > n) return 0;
    const unsigned char *q = p + i - width;
    for (size_t g = 0; g < groups; g++) {
        for (size_t k = 0; k < width; k++)
            if (!(blob_class[*q++] & B_HEX)) return 0;
        if (g + 1 < groups && !(blob_class[*q++] & B_BLANK)) return 0;
    }
    return 1;
}

/* The first place at or after `from` where a window of `len` bytes of the class `mask` ends (its
 * last byte's index), or n when there is none: a window's last byte outside the class moves the
 * search on by `len`, one inside it is walked back to its run's start, so a text of short runs is
 * read at a few bytes in `len`, not every byte. */
static size_t class_run_end(const unsigned char *p, size_t n, size_t from, unsigned char mask,
                            size_t len) {
    size_t i = from + len - 1;
    while (i < n) {
        if (!(blob_class[p[i]] & mask)) {
            i += len;
            continue;
        }
        size_t k = i;
        while (i - k + 1 < len && (blob_class[p[k - 1]] & mask)) k--;
        if (i - k + 1 >= len) return i;
        i = k + len - 1; /* p[k - 1] is outside the class: a window begins at k or after */
    }
    return n;
}

/* Whether a text may hold a blob (blob_hints' looks, module comment above): "ata:" or "ATA:" (at
 * each ":", which memchr finds), a line of BLOB_MIN_LINE bytes, a run of BLOB_MIN_RUN of the
 * alphabet, or a dump's hint. Every hint is hex digits and blanks only, at least 11 of them
 * ("hh hh hh hh"), so hints are looked for only inside such runs: at a blank after two hex
 * digits (a hint's first blank). */
#define BLOB_HINT_MIN 11
/* Whether p[0:n] holds a hex dump's hint: "hh hh hh hh", "hhhh hhhh hhhh" or "hhhhhhhh hhhhhhhh"
 * (blobs._DUMP_HINTS), looked for at each blank after two hex digits inside a run of hex digits and
 * blanks of BLOB_HINT_MIN or more. */
static int has_dump_hint(const unsigned char *p, size_t n) {
    const unsigned char hexblank = B_HEX | B_BLANK;
    for (size_t at = 0; (at = class_run_end(p, n, at, hexblank, BLOB_HINT_MIN)) < n;) {
        size_t s = at, e = at + 1;
        while (s > 0 && (blob_class[p[s - 1]] & hexblank)) s--;
        while (e < n && (blob_class[p[e]] & hexblank)) e++;
        for (size_t i = s + 2; i < e; i++)
            if ((blob_class[p[i]] & B_BLANK) && (blob_class[p[i - 1]] & B_HEX) &&
                (blob_class[p[i - 2]] & B_HEX) &&
                (dump_hint_at(p, n, i, 2, 4) || dump_hint_at(p, n, i, 4, 3) ||
                 dump_hint_at(p, n, i, 8, 2)))
                return 1;
        at = e; /* p[e] is outside the run: the next begins after it */
    }
    return 0;
}

static int may_hold_blob(const unsigned char *p, size_t n) {
    if (n < BLOB_MIN_RUN) return 0;
    for (const unsigned char *q = p + 3, *e = p + n; q < e;) {
        const unsigned char *colon = memchr(q, ':', (size_t)(e - q));
        if (!colon) break;
        if (!memcmp(colon - 3, "ata", 3) || !memcmp(colon - 3, "ATA", 3)) return 1;
        q = colon + 1;
    }
    for (const unsigned char *q = p, *e = p + n; q < e;) {
        const unsigned char *nl = memchr(q, '\n', (size_t)(e - q));
        const unsigned char *stop = nl ? nl : e;
        if ((size_t)(stop - q) >= BLOB_MIN_LINE) return 1;
        q = stop + 1;
    }
    if (class_run_end(p, n, 0, B_ALPHA, BLOB_MIN_RUN) < n) return 1;
    return has_dump_hint(p, n);
}

static PyObject *blob_hints(PyObject *Py_UNUSED(mod), PyObject *args) {
    Py_buffer data = {0}, bounds = {0};
    if (!PyArg_ParseTuple(args, "y*y*:blob_hints", &data, &bounds)) return NULL;
    PyObject *result = NULL;
    unsigned char *out = NULL;
    if (bounds.len % 8 || bounds.len < 8) {
        PyErr_SetString(PyExc_ValueError, "blob_hints: text bounds of int64 expected");
        goto done;
    }
    size_t n_texts = (size_t)bounds.len / 8 - 1;
    const int64_t *bd = bounds.buf;
    const unsigned char *t = data.buf;
    for (size_t c = 0; c < n_texts; c++) {
        if (bd[c] < 0 || bd[c] > bd[c + 1] || bd[c + 1] > data.len) {
            PyErr_SetString(PyExc_ValueError, "blob_hints: text bounds out of order or range");
            goto done;
        }
    }
    out = calloc(n_texts ? n_texts : 1, 1);
    if (!out) { PyErr_NoMemory(); goto done; }
    for (size_t c = 0; c < n_texts; c++) {
        const unsigned char *p = t + bd[c];
        size_t n = (size_t)(bd[c + 1] - bd[c]);
        if (n < BLOB_MIN_RUN) continue;
        out[c] = (unsigned char)may_hold_blob(p, n);
    }
    result = PyBytes_FromStringAndSize((const char *)out, (Py_ssize_t)n_texts);
done:
    PyBuffer_Release(&data);
    PyBuffer_Release(&bounds);
    free(out);
    return result;
}

/* postings_bytes(docs, tfs, counts, width, dw) -> bytes: a .mem's postings section
 * (store.mem_encode, which writes the same bytes in numpy where this pass is not built). The
 * postings come sorted by word, then document: word w's are the next counts[w] of docs and tfs.
 * Each word's block is its documents, dw bytes each, then its counts, width[w] bytes each, all
 * little-endian, the blocks laid end to end in word order. */
static PyObject *postings_bytes(PyObject *Py_UNUSED(mod), PyObject *args) {
    Py_buffer docs = {0}, tfs = {0}, counts = {0}, width = {0};
    Py_ssize_t dw;
    if (!PyArg_ParseTuple(args, "y*y*y*y*n:postings_bytes", &docs, &tfs, &counts, &width, &dw))
        return NULL;
    PyObject *result = NULL;
    if (docs.len % 8 || tfs.len != docs.len || counts.len % 8 || width.len != counts.len ||
        (dw != 2 && dw != 4)) {
        PyErr_SetString(PyExc_ValueError, "postings_bytes: arrays of int64 of consistent lengths "
                                          "and a document width of 2 or 4 expected");
        goto done;
    }
    size_t n = (size_t)docs.len / 8, n_words = (size_t)counts.len / 8;
    const int64_t *d = docs.buf, *f = tfs.buf, *c = counts.buf, *w = width.buf;
    size_t total = 0, seen = 0;
    for (size_t k = 0; k < n_words; k++) {
        if (c[k] < 0 || (w[k] != 1 && w[k] != 2 && w[k] != 4)) {
            PyErr_SetString(PyExc_ValueError, "postings_bytes: a word's count or width is out of "
                                              "range");
            goto done;
        }
        seen += (size_t)c[k];
        total += (size_t)c[k] * ((size_t)dw + (size_t)w[k]);
    }
    if (seen != n) {
        PyErr_SetString(PyExc_ValueError, "postings_bytes: the words' counts are not the postings'");
        goto done;
    }
    result = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)total);
    if (!result) goto done;
    unsigned char *o = (unsigned char *)PyBytes_AS_STRING(result);
    size_t i = 0;
    for (size_t k = 0; k < n_words; k++) {
        size_t m = (size_t)c[k], tw = (size_t)w[k];
        for (size_t r = 0; r < m; r++) {
            uint64_t v = (uint64_t)d[i + r];
            for (Py_ssize_t b = 0; b < dw; b++) *o++ = (unsigned char)(v >> (8 * b));
        }
        for (size_t r = 0; r < m; r++) {
            uint64_t v = (uint64_t)f[i + r];
            for (size_t b = 0; b < tw; b++) *o++ = (unsigned char)(v >> (8 * b));
        }
        i += m;
    }
done:
    PyBuffer_Release(&docs);
    PyBuffer_Release(&tfs);
    PyBuffer_Release(&counts);
    PyBuffer_Release(&width);
    return result;
}

