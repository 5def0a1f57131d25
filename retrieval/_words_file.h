/* A file's record in one call, in one translation unit with retrieval/_words_native.c, which
 * includes this file after the memo's functions (count_pairs, the slots, file ids) and the
 * fold's (may_hold_blob, in retrieval/_fold_native.h):
 *
 *   chunk_bounds: a file's lines and chunks (ADR 0050 §6), as retrieval/analyze.py's Python path
 *                 finds them (chunks.declaration_offsets_utf8, chunks.cut);
 *   Memo.record:  the file's lines, chunks, runs, words and pairs, and the record's arrays, in
 *                 one call instead of a dozen numpy and Python steps a file.
 *
 * retrieval/analyze.py's Python path stays the reference: tests/test_words_file.py holds
 * chunk_bounds to it on hostile lines and both paths' records to each other.
 */
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

/* record(table, data, blanked, def_at, def_counts, def_word)
 *   -> (vocab, starts, ends, offsets, word, body, first), or None.
 * data: the file's UTF-8 bytes; its lines and chunks are found here (file_layout). blanked:
 * None, or data with its blobs blanked (retrieval.blobs.blank_blobs, the same length), whose
 * runs are then cut instead of data's; given None, a file that may hold a blob (may_hold_blob,
 * the fold's first looks) gets None back, for the caller to blank it and call again. The runs
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
        if (may_hold_blob(d, n)) {
            result = Py_None;
            Py_INCREF(result);
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
