/* A file's pairs and record, in one translation unit with retrieval/_words_native.c, which
 * includes this file after the memo's functions (the slots, the runs' cut, file ids), the word
 * rule's (table_code) and the fold's (may_hold_blob, in retrieval/_fold_native.h):
 *
 *   count_pairs:  a file's runs looked up and counted into (chunk, word) pairs;
 *   chunk_bounds: a file's lines and chunks (ADR 0050 §6), as retrieval/analyze.py's Python path
 *                 finds them (chunks.declaration_offsets_utf8, chunks.cut);
 *   Memo.record:  the file's lines, chunks, runs, words and pairs, and the record's arrays, in
 *                 one call instead of a dozen numpy and Python steps a file.
 *
 * retrieval/analyze.py's Python path stays the reference: tests/test_words_file.py holds
 * chunk_bounds to it on hostile lines and both paths' records to each other.
 */
/* a[0:n] in ascending order (distinct values): insertion sort for few, else quicksort on the
 * larger side's loop (no function pointer a compare, as qsort has). */
static void sort_i64(int64_t *a, size_t n) {
    while (n > 24) {
        int64_t x = a[0], y = a[n / 2], z = a[n - 1];
        int64_t pivot = x < y ? (y < z ? y : (x < z ? z : x)) : (x < z ? x : (y < z ? z : y));
        size_t i = 0, j = n - 1;
        for (;;) {
            while (a[i] < pivot) i++;
            while (a[j] > pivot) j--;
            if (i >= j) break;
            int64_t t = a[i];
            a[i] = a[j];
            a[j] = t;
            i++;
            j--;
        }
        /* a[0:j+1] <= pivot <= a[j+1:n] */
        size_t left = j + 1;
        if (left < n - left) {
            sort_i64(a, left);
            a += left;
            n -= left;
        } else {
            sort_i64(a + left, n - left);
            n = left;
        }
    }
    for (size_t i = 1; i < n; i++) {
        int64_t v = a[i];
        size_t j = i;
        while (j > 0 && a[j - 1] > v) {
            a[j] = a[j - 1];
            j--;
        }
        a[j] = v;
    }
}

/* One occurrence of file id f in the current chunk, in its first line or not. */
static inline int occ_add(Memo *m, int64_t f, unsigned char first) {
    if (m->o_n == m->o_cap) {
        size_t cap = m->o_cap ? m->o_cap * 2 : 4096;
        int64_t *a = realloc(m->o_fid, cap * sizeof(int64_t));
        if (!a) { PyErr_NoMemory(); return -1; }
        m->o_fid = a;
        unsigned char *c = realloc(m->o_first, cap);
        if (!c) { PyErr_NoMemory(); return -1; }
        m->o_first = c;
        m->o_cap = cap;
    }
    m->o_fid[m->o_n] = f;
    m->o_first[m->o_n] = first;
    m->o_n++;
    return 0;
}

/* One file's pairs into the memo's scratch (m->distinct[0:n_distinct], m->offsets[0:n_chunks+1],
 * m->pw, m->pb, m->pf [0:n_pairs]): the runs of t within the chunk bounds bd (n_chunks + 1
 * offsets; a run before fe[c] is in chunk c's first line), cut at sep, each looked up (this memo,
 * else the table, which expands a new run) and numbered in order of first appearance; then the
 * definition terms (chunk dc[i], table id dw[i], outside any first line) after every run; then
 * each chunk's (file id, count, count in the first line) in ascending file id. The bounds are
 * the caller's to check. 0, or -1 with the error set. */
/* The pair of file id f at position at (its counts, then its counters cleared for the next chunk). */
static inline void emit_pair(Memo *m, size_t at, int64_t f, int64_t *cnt, int64_t *cnt_first) {
    m->pw[at] = f;
    m->pb[at] = cnt[f];
    m->pf[at] = cnt_first[f];
    cnt[f] = 0;
    cnt_first[f] = 0;
}

static int count_pairs(Memo *m, PyObject *table, const unsigned char *t, const int64_t *bd,
                       const int64_t *fe, size_t n_chunks, const int64_t *dc, const int64_t *dw,
                       size_t n_def, const unsigned char *sep) {
    PyObject *words = NULL, *word_id = NULL; /* the table's, fetched at the first new run */
    int fetched = 0, rc = -1;
    Ids distinct = {m->distinct, 0, m->dist_cap};
    m->call++;
    m->o_n = 0;
    if (grow((void **)&m->c_end, &m->c_cap, n_chunks + 1, sizeof(int64_t)) < 0) goto done;
    {
        size_t cap = m->c_cap;
        int64_t *p = realloc(m->offsets, cap * sizeof(int64_t));
        if (!p) { PyErr_NoMemory(); goto done; }
        m->offsets = p;
    }
    for (size_t c = 0; c < n_chunks; c++) {
        Py_ssize_t fend = (Py_ssize_t)fe[c];
        /* 1. The chunk's runs; each run's slot fetched ahead. */
        Py_ssize_t got = cut_runs_at(m, t, (Py_ssize_t)bd[c], (Py_ssize_t)bd[c + 1], sep);
        if (got < 0) goto done;
        size_t nr = (size_t)got;
        /* 2. Each run's code: from this memo, else from the table (which expands a new run). */
        for (size_t k = 0; k < nr; k++) {
            Py_ssize_t s0 = (Py_ssize_t)m->r_start[k];
            const unsigned char *run = t + s0;
            size_t n = (size_t)m->r_len[k];
            unsigned char first = s0 < fend;
            uint64_t h = m->r_hash[k];
            int64_t code = 0;
            if (!memo_find(m, run, n, h, &code)) {
                if (!fetched) {
                    if (table_lists(table, &words, &word_id) < 0) goto done;
                    if (words && !m->cur_multi && !(m->cur_multi = table_multi(table))) goto done;
                    fetched = 1;
                }
                if (table_code_of(m, table, run, n, words, word_id, &code) < 0) goto done;
            }
            if (code >= 0) {
                int64_t f = file_id(m, code, &distinct);
                if (f < 0 || occ_add(m, f, first) < 0) goto done;
            } else if (code <= -2) {
                size_t mk = (size_t)(-2 - code);
                if (mk >= m->m_count && memo_sync_multi(m, table, mk) < 0) goto done;
                for (int64_t i = 0; i < m->m_size[mk]; i++) {
                    int64_t f = file_id(m, m->m_flat[m->m_start[mk] + i], &distinct);
                    if (f < 0 || occ_add(m, f, first) < 0) goto done;
                }
            } else if (code != -1) {
                PyErr_SetString(PyExc_ValueError, "scan: a run's code is out of range");
                goto done;
            }
        }
        m->c_end[c] = (int64_t)m->o_n;
    }
    /* The definition terms, after every run, grouped by chunk (a counting sort, stable). */
    if (n_def) {
        PyObject *tw = PyObject_GetAttrString(table, "words");
        if (!tw) goto done;
        Py_ssize_t n_table_words = PyObject_Length(tw);
        Py_DECREF(tw);
        if (n_table_words < 0) goto done;
        if (grow((void **)&m->d_fid, &m->d_cap, n_def, sizeof(int64_t)) < 0) goto done;
        {
            int64_t *p = realloc(m->d_order, m->d_cap * sizeof(int64_t));
            if (!p) { PyErr_NoMemory(); goto done; }
            m->d_order = p;
        }
        if (grow((void **)&m->d_per, &m->dp_cap, n_chunks + 1, sizeof(int64_t)) < 0) goto done;
        memset(m->d_per, 0, (n_chunks + 1) * sizeof(int64_t));
        for (size_t i = 0; i < n_def; i++) {
            if (dc[i] < 0 || (size_t)dc[i] >= n_chunks || dw[i] < 0 || dw[i] >= n_table_words) {
                PyErr_SetString(PyExc_ValueError,
                                "scan: a definition term's chunk or id is out of range");
                goto done;
            }
            int64_t f = file_id(m, dw[i], &distinct);
            if (f < 0) goto done;
            m->d_fid[i] = f;
            m->d_per[dc[i] + 1]++;
        }
        for (size_t c = 0; c < n_chunks; c++) m->d_per[c + 1] += m->d_per[c];
        for (size_t i = 0; i < n_def; i++) m->d_order[m->d_per[dc[i]]++] = (int64_t)i;
        /* d_per[c] is now where chunk c + 1's terms begin: shift back by one chunk */
        memmove(m->d_per + 1, m->d_per, n_chunks * sizeof(int64_t));
        m->d_per[0] = 0;
    }

    /* 3. Pairs: each chunk's file ids counted in an array by file id (kept zero between chunks)
     * and emitted in ascending order: by a walk over their range when it is narrow (a chunk of
     * new words: consecutive ids), else sorted. */
    size_t n_occ = m->o_n, n_vocab = distinct.n;
    if (n_vocab > m->cnt_cap) {
        size_t old = m->cnt_cap, cap = old;
        if (grow((void **)&m->cnt, &cap, n_vocab, sizeof(int64_t)) < 0) goto done;
        int64_t *p = realloc(m->cnt_first, cap * sizeof(int64_t));
        if (!p) { PyErr_NoMemory(); goto done; }
        m->cnt_first = p;
        memset(m->cnt + old, 0, (cap - old) * sizeof(int64_t));
        memset(m->cnt_first + old, 0, (cap - old) * sizeof(int64_t));
        m->cnt_cap = cap;
    }
    if (grow((void **)&m->touched, &m->t_cap, n_vocab ? n_vocab : 1, sizeof(int64_t)) < 0)
        goto done;
    if (n_occ + n_def + 1 > m->p_cap) {
        size_t cap = m->p_cap;
        if (grow((void **)&m->pw, &cap, n_occ + n_def + 1, sizeof(int64_t)) < 0) goto done;
        int64_t *b = realloc(m->pb, cap * sizeof(int64_t));
        if (!b) { PyErr_NoMemory(); goto done; }
        m->pb = b;
        int64_t *f = realloc(m->pf, cap * sizeof(int64_t));
        if (!f) { PyErr_NoMemory(); goto done; }
        m->pf = f;
        m->p_cap = cap;
    }
    int64_t *cnt = m->cnt, *cnt_first = m->cnt_first, *touched = m->touched;
    size_t n_pairs = 0, k = 0;
    m->offsets[0] = 0;
    for (size_t c = 0; c < n_chunks; c++) {
        size_t nt = 0;
        int64_t lo = INT64_MAX, hi = -1;
        for (size_t end = (size_t)m->c_end[c]; k < end; k++) {
            int64_t f = m->o_fid[k];
            if (!cnt[f]) {
                touched[nt++] = f;
                if (f < lo) lo = f;
                if (f > hi) hi = f;
            }
            cnt[f]++;
            cnt_first[f] += m->o_first[k];
        }
        if (n_def) {
            for (int64_t d = m->d_per[c]; d < m->d_per[c + 1]; d++) {
                int64_t f = m->d_fid[m->d_order[d]];
                if (!cnt[f]) {
                    touched[nt++] = f;
                    if (f < lo) lo = f;
                    if (f > hi) hi = f;
                }
                cnt[f]++;
            }
        }
        if (nt && (size_t)(hi - lo) < 4 * nt + 64) {
            for (int64_t f = lo; f <= hi; f++) {
                if (!cnt[f]) continue;
                emit_pair(m, n_pairs++, f, cnt, cnt_first);
            }
        } else {
            sort_i64(touched, nt);
            for (size_t i = 0; i < nt; i++) {
                int64_t f = touched[i];
                emit_pair(m, n_pairs++, f, cnt, cnt_first);
            }
        }
        m->offsets[c + 1] = (int64_t)n_pairs;
    }
    m->n_pairs = n_pairs;
    rc = 0;
done:
    m->distinct = distinct.ids;
    m->dist_cap = distinct.cap;
    m->n_distinct = distinct.n;
    if (rc < 0) {
        /* the counts may be left mid-chunk: zero them for the next call */
        if (m->cnt) memset(m->cnt, 0, m->cnt_cap * sizeof(int64_t));
        if (m->cnt_first) memset(m->cnt_first, 0, m->cnt_cap * sizeof(int64_t));
    }
    Py_XDECREF(words);
    Py_XDECREF(word_id);
    Py_CLEAR(m->cur_multi);
    return rc;
}

#define MIN_LINES 20 /* retrieval.chunks.MIN_LINES */
#define MAX_LINES 80 /* retrieval.chunks.MAX_LINES */

/* The keywords of retrieval.chunks._START after which a word boundary must follow ("#" needs
 * none), with their lengths. */
static const struct { const char *word; size_t len; } DECL_WORDS[] = {
    {"func", 4},  {"function", 8}, {"type", 4},   {"var", 3},      {"const", 5},      {"(define", 7},
    {"class", 5}, {"export", 6},   {"def", 3},    {"\\chapter", 8}, {"\\section", 8},
};

/* Whether the character at d[q] (of d[0:n]) is not a word character of a str pattern (\w: a
 * letter or digit of unicode, or "_"), or there is none: a word boundary after a keyword. The
 * Python path decodes a line's head with errors="replace", so an invalid sequence (a lone
 * surrogate that "surrogatepass" encoded, a character cut by the text's end) is U+FFFD there,
 * which is no word character. */
static int boundary_at(const unsigned char *d, size_t n, size_t q) {
    if (q >= n) return 1;
    unsigned char c = d[q];
    if (c < 0x80) return !is_word_byte(c);
    Py_UCS4 cp;
    size_t need;
    unsigned char lo = 0x80, hi = 0xBF; /* the second byte's range */
    if (c >= 0xC2 && c <= 0xDF) { cp = c & 0x1F; need = 1; }
    else if (c >= 0xE0 && c <= 0xEF) {
        cp = c & 0x0F;
        need = 2;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F; /* past it, a surrogate */
    } else if (c >= 0xF0 && c <= 0xF4) {
        cp = c & 0x07;
        need = 3;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else
        return 1;
    if (q + need >= n) return 1; /* cut by the text's end: U+FFFD */
    for (size_t k = 1; k <= need; k++) {
        unsigned char b = d[q + k];
        unsigned char l = k == 1 ? lo : 0x80, h = k == 1 ? hi : 0xBF;
        if (b < l || b > h) return 1;
        cp = (cp << 6) | (b & 0x3F);
    }
    return !(Py_UNICODE_ISALNUM(cp) || cp == '_');
}

/* Whether the line at d[p] (after a newline) starts a chunk by §6's list: "#", or a keyword of
 * DECL_WORDS then a word boundary (retrieval.chunks.declaration_offsets_utf8). */
static int declaration_at(const unsigned char *d, size_t n, size_t p) {
    if (p >= n) return 0;
    unsigned char c = d[p];
    if (c == '#') return 1;
    if (c != 'f' && c != 't' && c != 'v' && c != 'c' && c != '(' && c != 'e' && c != 'd' &&
        c != '\\')
        return 0;
    for (size_t i = 0; i < sizeof(DECL_WORDS) / sizeof(DECL_WORDS[0]); i++) {
        size_t len = DECL_WORDS[i].len;
        if ((unsigned char)DECL_WORDS[i].word[0] == c && n - p >= len &&
            memcmp(d + p, DECL_WORDS[i].word, len) == 0 && boundary_at(d, n, p + len))
            return 1;
    }
    return 0;
}

/* The lines and chunks of d[0:n] into the memo's scratch: m->ls[0:n_lines + 1] the lines'
 * starts (the last the end), m->lows[0:n_chunks] each chunk's first line (0-based), and
 * m->bd[0:n_chunks + 1], m->fe[0:n_chunks] each chunk's byte bounds and where its first line
 * ends: what retrieval/analyze.py's Python path computes with numpy and chunks.cut. The number
 * of chunks, or -1 with MemoryError set. */
static Py_ssize_t file_layout(Memo *m, const unsigned char *d, size_t n, size_t *n_lines_out) {
    size_t n_lines = 0, n_chunks = 0, start = 0;
    if (grow((void **)&m->ls, &m->ls_cap, 1024, sizeof(int64_t)) < 0) return -1;
    if (grow((void **)&m->lows, &m->lows_cap, 64, sizeof(int64_t)) < 0) return -1;
    m->ls[0] = 0;
#define ADD_LOW(v)                                                                               \
    do {                                                                                         \
        if (n_chunks == m->lows_cap &&                                                           \
            grow((void **)&m->lows, &m->lows_cap, n_chunks + 1, sizeof(int64_t)) < 0)            \
            return -1;                                                                           \
        m->lows[n_chunks++] = (int64_t)(v);                                                      \
    } while (0)
    for (size_t p = 0; p < n;) {
        const unsigned char *nl = memchr(d + p, '\n', n - p);
        size_t next = nl ? (size_t)(nl - d) + 1 : n;
        if (n_lines + 2 > m->ls_cap &&
            grow((void **)&m->ls, &m->ls_cap, n_lines + 2, sizeof(int64_t)) < 0)
            return -1;
        m->ls[++n_lines] = (int64_t)next;
        /* line n_lines begins at next: a declaration there cuts as chunks.cut cuts */
        if (nl && declaration_at(d, n, next)) {
            size_t line = n_lines;
            while (line - start > MAX_LINES) {
                ADD_LOW(start);
                start += MAX_LINES;
            }
            if (line - start >= MIN_LINES) {
                ADD_LOW(start);
                start = line;
            }
        }
        p = next;
    }
    while (n_lines - start > MAX_LINES) {
        ADD_LOW(start);
        start += MAX_LINES;
    }
    if (start < n_lines) ADD_LOW(start);
#undef ADD_LOW
    if (grow((void **)&m->bd, &m->bd_cap, n_chunks + 1, sizeof(int64_t)) < 0) return -1;
    if (grow((void **)&m->fe, &m->fe_cap, n_chunks + 1, sizeof(int64_t)) < 0) return -1;
    for (size_t c = 0; c < n_chunks; c++) {
        m->bd[c] = m->ls[m->lows[c]];
        m->fe[c] = m->ls[m->lows[c] + 1];
    }
    m->bd[n_chunks] = m->ls[n_lines];
    *n_lines_out = n_lines;
    return (Py_ssize_t)n_chunks;
}

/* bytes of n uint32, from int64 values known to fit; NULL with the error set. */
static PyObject *u32_bytes(const int64_t *a, size_t n) {
    PyObject *b = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(n * sizeof(uint32_t)));
    if (!b) return NULL;
    uint32_t *out = (uint32_t *)PyBytes_AS_STRING(b);
    for (size_t i = 0; i < n; i++) out[i] = (uint32_t)a[i];
    return b;
}

/* The chunks' first and last lines, 1-based (starts, ends), from the layout: uint32 bytes. */
static int chunk_lines(Memo *m, size_t n_chunks, size_t n_lines, PyObject **starts,
                       PyObject **ends) {
    *starts = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(n_chunks * sizeof(uint32_t)));
    *ends = *starts ? PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(n_chunks * sizeof(uint32_t)))
                    : NULL;
    if (!*ends) {
        Py_CLEAR(*starts);
        return -1;
    }
    uint32_t *s = (uint32_t *)PyBytes_AS_STRING(*starts), *e = (uint32_t *)PyBytes_AS_STRING(*ends);
    for (size_t c = 0; c < n_chunks; c++) {
        s[c] = (uint32_t)(m->lows[c] + 1);
        e[c] = (uint32_t)(c + 1 < n_chunks ? m->lows[c + 1] : (int64_t)n_lines);
    }
    return 0;
}

/* chunk_bounds(data) -> (starts, ends, bounds, first_ends), each bytes of native int64: a
 * file's chunks' first and last lines (1-based), their byte bounds (n_chunks + 1) and where
 * each one's first line ends, as Memo.record finds them. For the tests, which hold it to the
 * Python path; a throwaway memo's scratch holds the work. */
static PyObject *chunk_bounds(PyObject *Py_UNUSED(mod), PyObject *args) {
    Py_buffer data = {0};
    if (!PyArg_ParseTuple(args, "y*:chunk_bounds", &data)) return NULL;
    PyObject *result = NULL;
    Memo m = {0};
    int64_t *starts = NULL, *ends = NULL;
    size_t n_lines = 0;
    Py_ssize_t got = file_layout(&m, data.buf, (size_t)data.len, &n_lines);
    if (got < 0) goto done;
    size_t n_chunks = (size_t)got;
    starts = malloc((n_chunks + 1) * sizeof(int64_t));
    ends = malloc((n_chunks + 1) * sizeof(int64_t));
    if (!starts || !ends) { PyErr_NoMemory(); goto done; }
    for (size_t c = 0; c < n_chunks; c++) {
        starts[c] = m.lows[c] + 1;
        ends[c] = c + 1 < n_chunks ? m.lows[c + 1] : (int64_t)n_lines;
    }
    result = Py_BuildValue("(NNNN)", bytes_of(starts, n_chunks), bytes_of(ends, n_chunks),
                           bytes_of(m.bd, n_chunks + 1), bytes_of(m.fe, n_chunks));
done:
    PyBuffer_Release(&data);
    free(starts);
    free(ends);
    free(m.ls);
    free(m.lows);
    free(m.bd);
    free(m.fe);
    return result;
}

/* The blobs' first looks one by one (may_hold_blob's, in retrieval/_fold_native.h, which says
 * whether any of them finds something): a bit for each shape of retrieval.blobs whose look finds
 * something in p[0:n], so that blob_spans runs only those shapes (each finds nothing where its
 * look does not): LOOK_BASE64 a run of BLOB_MIN_RUN of base64's alphabet, LOOK_DATA "ata:" or
 * "ATA:", LOOK_DUMP a hex dump's hint, LOOK_LINE a line of BLOB_MIN_LINE bytes or more; 0 for a
 * text shorter than BLOB_MIN_RUN. retrieval.blobs' LOOK_* are these bits; tests/test_blobs_looks.py
 * holds each to the Python look of its shape. */
#define LOOK_BASE64 1
#define LOOK_DATA 2
#define LOOK_DUMP 4
#define LOOK_LINE 8

static int blob_looks(const unsigned char *p, size_t n) {
    if (n < BLOB_MIN_RUN) return 0;
    int looks = 0;
    for (const unsigned char *q = p + 3, *e = p + n; q < e;) {
        const unsigned char *colon = memchr(q, ':', (size_t)(e - q));
        if (!colon) break;
        if (!memcmp(colon - 3, "ata", 3) || !memcmp(colon - 3, "ATA", 3)) {
            looks |= LOOK_DATA;
            break;
        }
        q = colon + 1;
    }
    if (n >= BLOB_MIN_LINE) {
        for (const unsigned char *q = p, *e = p + n; q < e;) {
            const unsigned char *nl = memchr(q, '\n', (size_t)(e - q));
            const unsigned char *stop = nl ? nl : e;
            if ((size_t)(stop - q) >= BLOB_MIN_LINE) {
                looks |= LOOK_LINE;
                break;
            }
            q = stop + 1;
        }
    }
    if (class_run_end(p, n, 0, B_ALPHA, BLOB_MIN_RUN) < n) looks |= LOOK_BASE64;
    if (has_dump_hint(p, n)) looks |= LOOK_DUMP;
    return looks;
}

/* blob_looks(data) -> int: the bits of blob_looks for data (retrieval.blobs.LOOK_*). */
static PyObject *blob_looks_py(PyObject *Py_UNUSED(mod), PyObject *args) {
    Py_buffer data = {0};
    if (!PyArg_ParseTuple(args, "y*:blob_looks", &data)) return NULL;
    int looks = blob_looks(data.buf, (size_t)data.len);
    PyBuffer_Release(&data);
    return PyLong_FromLong(looks);
}

/* record(table, data, blanked, def_at, def_counts, def_word)
 *   -> (vocab, starts, ends, offsets, word, body, first), or the blobs' looks (an int).
 * data: the file's UTF-8 bytes; its lines and chunks are found here (file_layout). blanked:
 * None, or data with its blobs blanked (retrieval.blobs.blank_blobs, the same length), whose
 * runs are then cut instead of data's; given None, a file that may hold a blob (blob_looks, the
 * fold's first looks one by one) gets the looks' bits back (an int), for the caller to blank it
 * with those shapes and call again. The runs
 * are cut at RAW_SEP, which is splitting retrieval.words.translate(data). def_at: where each
 * defined name begins in data, ascending; def_counts: how many definition terms each has;
 * def_word: their table ids, one name's after another's (Memo.definition_terms), each counted in
 * the chunk of its name after every run. vocab is a tuple of the table's words (str), the arrays
 * bytes of native uint32: a FileRecord's fields. */
static PyObject *Memo_record(Memo *m, PyObject *args) {
    PyObject *table, *blanked;
    Py_buffer data = {0}, def_at = {0}, def_counts = {0}, def_word = {0};
    if (!PyArg_ParseTuple(args, "O!y*Oy*y*y*:record", &PyDict_Type, &table, &data, &blanked,
                          &def_at, &def_counts, &def_word))
        return NULL;
    PyObject *result = NULL, *words = NULL, *vocab = NULL, *starts = NULL, *ends = NULL;
    int64_t *dc = NULL;
    const unsigned char *d = data.buf, *src = d;
    size_t n = (size_t)data.len;
    if (n >= UINT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "record: a text of 4 GiB or more");
        goto done;
    }
    if (blanked == Py_None) {
        int looks = blob_looks(d, n);
        if (looks) {
            result = PyLong_FromLong(looks);
            goto done;
        }
    } else {
        if (!PyBytes_Check(blanked) || (size_t)PyBytes_GET_SIZE(blanked) != n) {
            PyErr_SetString(PyExc_ValueError, "record: blanked is None or bytes of data's length");
            goto done;
        }
        src = (const unsigned char *)PyBytes_AS_STRING(blanked);
    }
    if (def_at.len % 8 || def_counts.len != def_at.len || def_word.len % 8) {
        PyErr_SetString(PyExc_ValueError, "record: one start and one count a name, as int64");
        goto done;
    }
    size_t n_lines = 0;
    Py_ssize_t got = file_layout(m, d, n, &n_lines);
    if (got < 0) goto done;
    size_t n_chunks = (size_t)got;
    /* Each definition term's chunk: that of its name's start (the last chunk beginning at or
     * before it), names in ascending order of their starts. */
    size_t n_names = (size_t)def_at.len / 8, n_def = (size_t)def_word.len / 8;
    const int64_t *at = def_at.buf, *counts = def_counts.buf;
    dc = malloc((n_def ? n_def : 1) * sizeof(int64_t));
    if (!dc) { PyErr_NoMemory(); goto done; }
    size_t t = 0, c = 0;
    for (size_t i = 0; i < n_names; i++) {
        if (at[i] < 0 || (size_t)at[i] >= n || (i && at[i] < at[i - 1]) || counts[i] < 0 ||
            (size_t)counts[i] > n_def - t) {
            PyErr_SetString(PyExc_ValueError, "record: the names' starts or counts are wrong");
            goto done;
        }
        while (c + 1 < n_chunks && m->bd[c + 1] <= at[i]) c++;
        for (int64_t k = 0; k < counts[i]; k++) dc[t++] = (int64_t)c;
    }
    if (t != n_def) {
        PyErr_SetString(PyExc_ValueError, "record: the names' counts do not add up to the terms");
        goto done;
    }
    if (count_pairs(m, table, src, m->bd, m->fe, n_chunks, dc, def_word.buf, n_def, RAW_SEP) < 0)
        goto done;
    words = PyObject_GetAttrString(table, "words");
    if (!words) goto done;
    if (!PyList_Check(words)) {
        PyErr_SetString(PyExc_TypeError, "record: the table's words are not a list");
        goto done;
    }
    vocab = PyTuple_New((Py_ssize_t)m->n_distinct);
    if (!vocab) goto done;
    Py_ssize_t n_words = PyList_GET_SIZE(words);
    for (size_t i = 0; i < m->n_distinct; i++) {
        int64_t w = m->distinct[i];
        if (w < 0 || w >= n_words) {
            PyErr_SetString(PyExc_ValueError, "record: a word id is past the table's words");
            goto done;
        }
        PyObject *word = PyList_GET_ITEM(words, w);
        Py_INCREF(word);
        PyTuple_SET_ITEM(vocab, (Py_ssize_t)i, word);
    }
    if (chunk_lines(m, n_chunks, n_lines, &starts, &ends) < 0) goto done;
    result = Py_BuildValue("(NNNNNNN)", vocab, starts, ends, u32_bytes(m->offsets, n_chunks + 1),
                           u32_bytes(m->pw, m->n_pairs), u32_bytes(m->pb, m->n_pairs),
                           u32_bytes(m->pf, m->n_pairs));
    vocab = starts = ends = NULL; /* stolen by Py_BuildValue's N, even when it fails */
done:
    Py_XDECREF(vocab);
    Py_XDECREF(starts);
    Py_XDECREF(ends);
    Py_XDECREF(words);
    PyBuffer_Release(&data);
    PyBuffer_Release(&def_at);
    PyBuffer_Release(&def_counts);
    PyBuffer_Release(&def_word);
    free(dc);
    return result;
}
