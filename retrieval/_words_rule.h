/* The word rule of retrieval/words.py in the compiled pass, in one translation unit with
 * retrieval/_words_native.c, which includes this file after the memo's own functions (this file
 * uses them: the slots, the arena, file ids, the table's multi) and before Memo.record, which calls
 * table_code_of for a run its memo does not hold:
 *
 *   word_id_of:       a word's table id, through the memo's cache of the table's word_id;
 *   ascii_words:      the words of an ASCII run seen for the first time, numbered into the table;
 *   table_code_of:    a run's code from the table, else ascii_words, else the table's __missing__
 *                     (table_code: the same without a memo, for the fold's count_texts);
 *   definition_terms: the definition terms of a file's defined names (Memo.definition_terms).
 */
/* The word rule of retrieval/words.py for a run of ASCII bytes, done here without a call into
 * Python: what WordTable.__missing__ gives a run of [A-Za-z0-9_-] seen for the first time.
 *
 * The run's tokens are those of words._TOKEN (runs of [A-Za-z0-9_] in which a single "-" may
 * join two; a double "-" or one at either end separates them), each stripped of "_" and "-" at
 * both ends (words._expand). A token gives, lowercased, each once, in this order
 * (words._expand_ascii): itself whole, unless past MAX_WORD_BYTES; then, when it holds "_" or
 * "-", each of its parts split at them ("" left out, and a part past MAX_WORD_BYTES left out with
 * its pieces); and after each part (or after the whole, for a token of one part, which gives
 * nothing at all past MAX_WORD_BYTES) its camel-case pieces (words._ASCII_CAMEL). The tokens'
 * words follow each other, a word that two tokens give given twice (``a--a``).
 *
 * Each word's id is found in table.word_id or appended (to table.words and table.word_id), in
 * that order; two or more ids are appended to table.multi as a tuple; no id is NO_WORDS; and the
 * code is kept in the table as __missing__ keeps it (runs up to MAX_KEPT_RUN). 1 when done (*code
 * set), 0 when the run is not for this rule (a byte past ASCII, a run past MAX_RULE_RUN, a token
 * of more than MAX_TOKEN_WORDS words: __missing__ expands those), -1 on an error.
 * tests/test_words_native.py holds this to __missing__ on runs made to find its edges. */
#define MAX_WORD_BYTES 64   /* retrieval.words.MAX_WORD_BYTES */
#define MAX_RULE_RUN 1024   /* a longer run is left to __missing__ (and kept by neither memo) */
#define MAX_TOKEN_WORDS 256 /* the words of one token are compared pairwise: at most this many */
#define MAX_RUN_WORDS 512   /* the words of all a run's tokens */

/* The id the memo's word cache keeps for the word w[0:n] (hash h) into *id: 1 when it keeps one. */
static int word_cached(const Memo *m, const unsigned char *w, size_t n, uint64_t h, int64_t *id) {
    if (!m->w_cap) return 0;
    uint64_t head = head_of(w, n);
    size_t j = h & (m->w_cap - 1);
    for (int probes = 0; probes < MAX_PROBE; probes++) {
        const Slot *sl = &m->w_slots[j];
        if (!sl->hash) return 0;
        if (sl->hash == h && sl->len == n && sl->head == head &&
            (n <= 8 || memcmp(m->arena + sl->off + 8, w + 8, n - 8) == 0)) {
            *id = sl->code;
            return 1;
        }
        j = (j + 1) & (m->w_cap - 1);
    }
    return 0;
}

/* The word w[0:n] (hash h) and its table id kept in the memo's word cache, its bytes in the
 * arena; left out, as memo_put leaves a run out, when no slot near its own is free. 0, or -1
 * with MemoryError set. */
static int word_cache_put(Memo *m, uint64_t h, const unsigned char *w, size_t n, int64_t id) {
    if ((m->w_used + 1) * 2 > m->w_cap) {
        size_t cap = m->w_cap ? m->w_cap * 2 : 1 << 15;
        Slot *slots = calloc(cap, sizeof(Slot));
        if (!slots) { PyErr_NoMemory(); return -1; }
        for (size_t i = 0; i < m->w_cap; i++) {
            Slot *sl = &m->w_slots[i];
            if (!sl->hash) continue;
            size_t j = sl->hash & (cap - 1), probes = 0;
            while (slots[j].hash && ++probes < MAX_PROBE) j = (j + 1) & (cap - 1);
            if (slots[j].hash) { m->w_used--; continue; }
            slots[j] = *sl;
        }
        free(m->w_slots);
        m->w_slots = slots;
        m->w_cap = cap;
    }
    if (m->arena_len + n > UINT32_MAX) return 0;
    if (grow((void **)&m->arena, &m->arena_cap, m->arena_len + n, 1) < 0) return -1;
    size_t j = h & (m->w_cap - 1), probes = 0;
    while (m->w_slots[j].hash && ++probes < MAX_PROBE) j = (j + 1) & (m->w_cap - 1);
    if (m->w_slots[j].hash) return 0;
    memcpy(m->arena + m->arena_len, w, n);
    m->w_slots[j] = (Slot){h, id, head_of(w, n), (uint32_t)m->arena_len, (uint32_t)n};
    m->arena_len += n;
    m->w_used++;
    return 0;
}

/* The table id of the ASCII word w[0:n]: the memo's word cache's (m, when given), else
 * table.word_id's, else a new one appended to table.words and table.word_id; then kept in the
 * cache. */
static int word_id_of(Memo *m, const unsigned char *w, size_t n, PyObject *words,
                      PyObject *word_id, long long *out) {
    uint64_t h = 0;
    if (m) {
        int64_t id;
        h = hash_bytes(w, n);
        if (word_cached(m, w, n, h, &id)) {
            *out = id;
            return 0;
        }
    }
    PyObject *word = PyUnicode_DecodeASCII((const char *)w, (Py_ssize_t)n, NULL);
    if (!word) return -1;
    PyObject *got = PyDict_GetItemWithError(word_id, word); /* borrowed */
    if (got) {
        *out = PyLong_AsLongLong(got);
        Py_DECREF(word);
        if (*out == -1 && PyErr_Occurred()) return -1;
        return m ? word_cache_put(m, h, w, n, *out) : 0;
    }
    if (PyErr_Occurred()) { Py_DECREF(word); return -1; }
    Py_ssize_t id = PyList_GET_SIZE(words);
    PyObject *idobj = PyLong_FromSsize_t(id);
    if (!idobj) { Py_DECREF(word); return -1; }
    int rc = PyDict_SetItem(word_id, word, idobj) < 0 || PyList_Append(words, word) < 0 ? -1 : 0;
    Py_DECREF(idobj);
    Py_DECREF(word);
    *out = id;
    if (rc == 0 && m) rc = word_cache_put(m, h, w, n, id);
    return rc;
}

/* The ids of the table's multi[k] (k the memo's m_count: the one just appended) copied into the
 * memo as memo_sync_multi would copy them from the tuple. 0, or -1 with MemoryError set. */
static int memo_add_multi(Memo *m, const long long *ids, size_t ni) {
    size_t k = m->m_count;
    if (grow((void **)&m->m_start, &m->m_cap, k + 1, sizeof(int64_t)) < 0) return -1;
    int64_t *p = realloc(m->m_size, m->m_cap * sizeof(int64_t));
    if (!p) { PyErr_NoMemory(); return -1; }
    m->m_size = p;
    if (grow((void **)&m->m_flat, &m->m_flat_cap, m->m_flat_len + ni, sizeof(int64_t)) < 0)
        return -1;
    m->m_start[k] = (int64_t)m->m_flat_len;
    m->m_size[k] = (int64_t)ni;
    for (size_t i = 0; i < ni; i++) m->m_flat[m->m_flat_len++] = ids[i];
    m->m_count = k + 1;
    return 0;
}

static inline int is_upper(unsigned char c) { return c >= 'A' && c <= 'Z'; }
static inline int is_lower(unsigned char c) { return c >= 'a' && c <= 'z'; }
static inline int is_lower_or_digit(unsigned char c) {
    return is_lower(c) || (c >= '0' && c <= '9');
}
static inline int is_word_byte(unsigned char c) {
    return is_upper(c) || is_lower_or_digit(c) || c == '_';
}

/* The words found so far: (start, length) in the lowercased run; a token's begin at `first`. */
typedef struct {
    uint16_t start[MAX_RUN_WORDS], len[MAX_RUN_WORDS];
    size_t n, first;
    const unsigned char *low;
} Found;

/* low[s:s+l] added unless the token gave it already: 1, or 0 when past a bound. */
static int found_add(Found *f, size_t s, size_t l) {
    for (size_t k = f->first; k < f->n; k++)
        if (f->len[k] == l && memcmp(f->low + f->start[k], f->low + s, l) == 0) return 1;
    if (f->n - f->first >= MAX_TOKEN_WORDS || f->n >= MAX_RUN_WORDS) return 0;
    f->start[f->n] = (uint16_t)s;
    f->len[f->n] = (uint16_t)l;
    f->n++;
    return 1;
}

/* The camel-case pieces of the part r[a:b] (letters and digits), as words._ASCII_CAMEL finds
 * them: capitals that end before a capital and a lowercase letter that is not a lone plural "s";
 * else capitals, if any, then lowercase letters and digits; else capitals. */
static int camel_pieces(Found *f, const unsigned char *r, size_t a, size_t b) {
    size_t i = a;
    while (i < b) {
        size_t k = i;
        if (is_upper(r[i])) {
            size_t j = i;
            while (j < b && is_upper(r[j])) j++;
            if (j - i >= 2 && j < b && is_lower(r[j]) &&
                !(r[j] == 's' && (j + 1 == b || !is_lower(r[j + 1])))) {
                k = j - 1; /* all the capitals but the last, which begins the next piece */
            } else {
                k = j;
                while (k < b && is_lower_or_digit(r[k])) k++;
            }
        } else {
            while (k < b && is_lower_or_digit(r[k])) k++;
        }
        if (!found_add(f, i, k - i)) return 0;
        i = k;
    }
    return 1;
}

/* The words of the token r[a:b] (stripped, non-empty) added: 1, or 0 when past a bound. */
static int token_words(Found *f, const unsigned char *r, size_t a, size_t b) {
    int sep = 0, upper = 0;
    for (size_t i = a; i < b; i++) {
        sep |= r[i] == '_' || r[i] == '-';
        upper |= is_upper(r[i]);
    }
    f->first = f->n;
    if (!sep) {
        if (b - a > MAX_WORD_BYTES) return 1;
        if (!found_add(f, a, b - a)) return 0;
        return upper ? camel_pieces(f, r, a, b) : 1;
    }
    if (b - a <= MAX_WORD_BYTES && !found_add(f, a, b - a)) return 0;
    for (size_t p = a; p < b;) {
        size_t q = p;
        while (q < b && r[q] != '_' && r[q] != '-') q++;
        if (q > p && q - p <= MAX_WORD_BYTES) {
            if (!found_add(f, p, q - p)) return 0;
            int part_upper = 0;
            for (size_t i = p; i < q; i++) part_upper |= is_upper(r[i]);
            if (part_upper && !camel_pieces(f, r, p, q)) return 0;
        }
        p = q + 1;
    }
    return 1;
}

static int ascii_words(Memo *m, PyObject *table, PyObject *key, const unsigned char *run,
                       size_t n, PyObject *words, PyObject *word_id, int64_t *code) {
    if (n == 0 || n > MAX_RULE_RUN) return 0;
    unsigned char low[MAX_RULE_RUN];
    for (size_t i = 0; i < n; i++) {
        unsigned char c = run[i];
        if (!is_word_byte(c) && c != '-') return 0;
        low[i] = is_upper(c) ? (unsigned char)(c + ('a' - 'A')) : c;
    }
    Found found, *f = &found; /* 2 KB, on the stack: a malloc a new run was a tenth of its cost */
    f->n = f->first = 0;
    f->low = low;
    /* The tokens of words._TOKEN: \w+(?:-\w+)*, each then stripped of "_" and "-". */
    for (size_t p = 0; p < n;) {
        if (!is_word_byte(run[p])) { p++; continue; }
        size_t e = p;
        for (;;) {
            while (e < n && is_word_byte(run[e])) e++;
            if (e + 1 < n && run[e] == '-' && is_word_byte(run[e + 1])) e++;
            else break;
        }
        size_t a = p, b = e;
        while (a < b && (run[a] == '_' || run[a] == '-')) a++;
        while (b > a && (run[b - 1] == '_' || run[b - 1] == '-')) b--;
        if (a < b && !token_words(f, run, a, b)) return 0;
        p = e;
    }
    long long ids[MAX_RUN_WORDS];
    size_t ni = f->n;
    for (size_t k = 0; k < ni; k++)
        if (word_id_of(m, low + f->start[k], f->len[k], words, word_id, &ids[k]) < 0) return -1;
    long long v = -1; /* retrieval.words.NO_WORDS */
    if (ni == 1) {
        v = ids[0];
    } else if (ni > 1) {
        PyObject *multi = m && m->cur_multi ? m->cur_multi : table_multi(table);
        if (!multi) return -1;
        if (multi == (m ? m->cur_multi : NULL)) Py_INCREF(multi);
        PyObject *tup = PyTuple_New((Py_ssize_t)ni);
        if (!tup) { Py_DECREF(multi); return -1; }
        for (size_t k = 0; k < ni; k++) {
            PyObject *o = PyLong_FromLongLong(ids[k]);
            if (!o) { Py_DECREF(tup); Py_DECREF(multi); return -1; }
            PyTuple_SET_ITEM(tup, (Py_ssize_t)k, o);
        }
        size_t k = (size_t)PyList_GET_SIZE(multi);
        v = -2 - (long long)k;
        int rc = PyList_Append(multi, tup);
        Py_DECREF(tup);
        Py_DECREF(multi);
        if (rc < 0) return -1;
        /* the memo's copy of multi, when it holds every tuple before this one: this one's ids */
        if (m && m->m_count == k && memo_add_multi(m, ids, ni) < 0) return -1;
    }
    if (n <= MAX_KEPT_RUN) {
        /* Kept by the memo when there is one (the run is then in the table's own memo, the two
         * being one table: retrieval.words.WordTable.full counts both), else in the table. */
        int kept = m ? memo_put(m, hash_bytes(run, n), run, n, v) : 0;
        if (kept < 0) return -1;
        if (!kept) {
            PyObject *cobj = PyLong_FromLongLong(v);
            if (!cobj) return -1;
            int rc = PyDict_SetItem(table, key, cobj);
            Py_DECREF(cobj);
            if (rc < 0) return -1;
        }
    }
    *code = v;
    return 1;
}

/* The code of a run the memo does not keep: the table's (a dict lookup, no call into Python),
 * else the word rule's for an ASCII run (ascii_words), else the table's own lookup, whose
 * __missing__ expands the run. words and word_id are the table's, fetched by the caller (NULL
 * when the table is not a dict with them: then only its own lookup is asked). Given a memo (m),
 * the run's code is kept there by this call (a run up to MAX_KEPT_RUN bytes, when it has room);
 * one the word rule expanded here is then not kept in the table as well (only where the memo
 * has no room), which saved a bytes object, an int and a dict entry a new run. Without one
 * (table_code), the caller keeps it in its memo and the table keeps it too. -1 with the error
 * set, else 0. */
static int table_code_of(Memo *m, PyObject *table, const unsigned char *run, size_t n,
                         PyObject *words, PyObject *word_id, int64_t *code) {
    PyObject *key = PyBytes_FromStringAndSize((const char *)run, (Py_ssize_t)n);
    if (!key) return -1;
    long long v = 0;
    int done_here = 0, got_from_table = 0;
    if (words) {
        PyObject *got = PyDict_GetItemWithError(table, key); /* borrowed */
        if (got) {
            v = PyLong_AsLongLong(got);
            done_here = got_from_table = 1;
        } else if (!PyErr_Occurred()) {
            int64_t c64 = 0;
            done_here = ascii_words(m, table, key, run, n, words, word_id, &c64);
            v = c64;
        }
    }
    int in_memo = done_here == 1 && !got_from_table;
    if (done_here == 0 && !PyErr_Occurred()) {
        PyObject *got = PyObject_GetItem(table, key); /* __missing__ expands the run */
        if (got) {
            v = PyLong_AsLongLong(got);
            Py_DECREF(got);
        }
    }
    Py_DECREF(key);
    if (PyErr_Occurred()) return -1;
    /* ascii_words kept its run in the memo; a code the table gave is kept there here */
    if (m && !in_memo && n <= MAX_KEPT_RUN && memo_put(m, hash_bytes(run, n), run, n, v) < 0)
        return -1;
    *code = v;
    return 0;
}

/* table_code_of without a memo's caches (the fold's count_texts, retrieval/_fold_native.h). */
static int table_code(PyObject *table, const unsigned char *run, size_t n, PyObject *words,
                      PyObject *word_id, int64_t *code) {
    return table_code_of(NULL, table, run, n, words, word_id, code);
}

/* The table's words and word_id into *words, *word_id (new references), when the table is a
 * dict and they are a list and a dict; else both NULL (the table's own lookups are asked). -1
 * with the error set when fetching one fails otherwise than by its absence. */
static int table_lists(PyObject *table, PyObject **words, PyObject **word_id) {
    *words = *word_id = NULL;
    if (!PyDict_Check(table)) return 0;
    PyObject *w = PyObject_GetAttrString(table, "words");
    PyObject *d = w ? PyObject_GetAttrString(table, "word_id") : NULL;
    if (w && d && PyList_Check(w) && PyDict_Check(d)) {
        *words = w;
        *word_id = d;
        return 0;
    }
    Py_XDECREF(w);
    Py_XDECREF(d);
    if (PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return -1;
        PyErr_Clear();
    }
    return 0;
}

/* definition_terms(table, names, prefix) -> (ids, counts), each bytes of native int64: the
 * definition terms of defined names (retrieval.analyze._definition_ids, in one call for a file's
 * names). names: a list of bytes; for each, its runs (its bytes translated as
 * retrieval.words.translate does, cut as bytes.split() cuts them) are looked up as record() looks
 * them up, and each word of each run gives the term prefix + word, found in table.word_id or
 * appended to table.words and table.word_id right after the run's own words; a name's terms are
 * kept once each, in order of first appearance, as a tuple in table.defined (a name found there
 * is not looked at again). ids holds the names' terms one name after another, counts how many
 * each has. */
static PyObject *Memo_definition_terms(Memo *m, PyObject *args) {
    PyObject *table, *names, *prefix;
    if (!PyArg_ParseTuple(args, "O!O!U:definition_terms", &PyDict_Type, &table, &PyList_Type,
                          &names, &prefix))
        return NULL;
    PyObject *result = NULL, *words = NULL, *word_id = NULL, *defined = NULL;
    Ids out = {0}, terms = {0};
    unsigned char *buf = NULL;
    size_t buf_cap = 0;
    Py_ssize_t n_names = PyList_GET_SIZE(names);
    int64_t *counts = malloc((size_t)(n_names ? n_names : 1) * sizeof(int64_t));
    if (!counts) { PyErr_NoMemory(); goto done; }
    if (table_lists(table, &words, &word_id) < 0) goto done;
    defined = PyObject_GetAttrString(table, "defined");
    if (!defined) goto done;
    if (!words || !PyDict_Check(defined)) {
        PyErr_SetString(PyExc_TypeError, "definition_terms: the table's words, word_id and "
                                         "defined are a list and two dicts");
        goto done;
    }
    if (!m->cur_multi && !(m->cur_multi = table_multi(table))) goto done;
    for (Py_ssize_t i = 0; i < n_names; i++) {
        PyObject *name = PyList_GET_ITEM(names, i);
        if (!PyBytes_Check(name)) {
            PyErr_SetString(PyExc_TypeError, "definition_terms: a name is not bytes");
            goto done;
        }
        size_t before = out.n;
        PyObject *got = PyDict_GetItemWithError(defined, name); /* borrowed */
        if (!got && PyErr_Occurred()) goto done;
        if (got && !PyTuple_Check(got)) {
            PyErr_SetString(PyExc_TypeError, "definition_terms: a defined name's terms are not "
                                             "a tuple");
            goto done;
        }
        if (!got) {
            /* The name's terms, found in order: `terms` holds them once each (the stamps of a
             * call of their own mark the ones already there). */
            m->call++;
            terms.n = 0;
            size_t len = (size_t)PyBytes_GET_SIZE(name);
            const unsigned char *raw = (const unsigned char *)PyBytes_AS_STRING(name);
            if (grow((void **)&buf, &buf_cap, len + 1, 1) < 0) goto done;
            for (size_t k = 0; k < len; k++) {
                unsigned char c = raw[k];
                buf[k] = (is_word_byte(c) || c == '-' || c >= 0x80) ? c : ' ';
            }
            for (size_t p = 0; p < len;) {
                if (is_space(buf[p])) { p++; continue; }
                size_t s0 = p;
                while (p < len && !is_space(buf[p])) p++;
                size_t n = p - s0;
                uint64_t h = hash_bytes(buf + s0, n);
                int64_t code = 0;
                if (!memo_find(m, buf + s0, n, h, &code) &&
                    table_code_of(m, table, buf + s0, n, words, word_id, &code) < 0)
                    goto done;
                int64_t one = code, n_ids = 1;
                const int64_t *ids = &one;
                if (code == -1) continue;
                if (code <= -2) {
                    size_t mk = (size_t)(-2 - code);
                    if (mk >= m->m_count && memo_sync_multi(m, table, mk) < 0) goto done;
                    ids = m->m_flat + m->m_start[mk];
                    n_ids = m->m_size[mk];
                }
                for (int64_t k = 0; k < n_ids; k++) {
                    if (ids[k] < 0 || ids[k] >= PyList_GET_SIZE(words)) {
                        PyErr_SetString(PyExc_ValueError, "definition_terms: a word id is out "
                                                          "of range");
                        goto done;
                    }
                    PyObject *term = PyUnicode_Concat(prefix, PyList_GET_ITEM(words, ids[k]));
                    if (!term) goto done;
                    long long j = 0;
                    PyObject *at = PyDict_GetItemWithError(word_id, term); /* borrowed */
                    if (at) {
                        j = PyLong_AsLongLong(at);
                    } else if (!PyErr_Occurred()) {
                        j = PyList_GET_SIZE(words);
                        PyObject *jobj = PyLong_FromLongLong(j);
                        if (!jobj || PyDict_SetItem(word_id, term, jobj) < 0 ||
                            PyList_Append(words, term) < 0) {
                            Py_XDECREF(jobj);
                            Py_DECREF(term);
                            goto done;
                        }
                        Py_DECREF(jobj);
                    }
                    Py_DECREF(term);
                    if (PyErr_Occurred()) goto done;
                    if (file_id(m, (int64_t)j, &terms) < 0) goto done;
                }
            }
            PyObject *tup = PyTuple_New((Py_ssize_t)terms.n);
            if (!tup) goto done;
            for (size_t k = 0; k < terms.n; k++) {
                PyObject *o = PyLong_FromLongLong(terms.ids[k]);
                if (!o) { Py_DECREF(tup); goto done; }
                PyTuple_SET_ITEM(tup, (Py_ssize_t)k, o);
            }
            int rc = PyDict_SetItem(defined, name, tup);
            Py_DECREF(tup);
            if (rc < 0) goto done;
            got = PyDict_GetItemWithError(defined, name);
            if (!got) {
                if (!PyErr_Occurred())
                    PyErr_SetString(PyExc_RuntimeError, "definition_terms: a name kept is gone");
                goto done;
            }
        }
        Py_ssize_t nt = PyTuple_GET_SIZE(got);
        if (grow((void **)&out.ids, &out.cap, out.n + (size_t)nt, sizeof(int64_t)) < 0) goto done;
        for (Py_ssize_t k = 0; k < nt; k++) {
            long long v = PyLong_AsLongLong(PyTuple_GET_ITEM(got, k));
            if (v == -1 && PyErr_Occurred()) goto done;
            out.ids[out.n++] = v;
        }
        counts[i] = (int64_t)(out.n - before);
    }
    result = Py_BuildValue("(NN)", bytes_of(out.ids ? out.ids : counts, out.n),
                           bytes_of(counts, (size_t)n_names));
done:
    Py_CLEAR(m->cur_multi);
    Py_XDECREF(words);
    Py_XDECREF(word_id);
    Py_XDECREF(defined);
    free(out.ids);
    free(terms.ids);
    free(buf);
    free(counts);
    return result;
}

