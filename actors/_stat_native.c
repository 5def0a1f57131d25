/* The refresher's stat of a tree's listed files, compiled (actors/_stat.py).
 *
 * lstat_all(base, paths) gives, for each path, (size, mtime_ns, inode) when base + path is a
 * regular file (links are not followed), and None when it is gone, is not a regular file, cannot
 * be stat-ed, or cannot be a path (a NUL in it, a name the file system's encoding cannot hold).
 * These are the answers of actors/_stat.py's Python path, which uses os.lstat.
 *
 * add_watches(fd, root, prefix, dirs, mask) adds an inotify watch on each directory (root for "",
 * prefix + dir otherwise) and gives each one's watch descriptor, or minus the error number; it
 * stops after the first error other than ENOENT and ENOTDIR (actors/_watch.py's Python path).
 *
 * The names are encoded while the GIL is held; the system calls are made without it, so another
 * thread of the process (the snapshot's load) runs meanwhile; the answers are built with it.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/types.h>

typedef struct {
    int ok;
    long long size;
    long long sec;
    long long nsec;
    unsigned long long ino;
} one_stat;

static PyObject *mtime_ns(long long sec, long long nsec) {
    /* sec * 10**9 + nsec, exact for every time (past int64's range as a Python int). */
    if (sec > -9000000000LL && sec < 9000000000LL) {
        return PyLong_FromLongLong(sec * 1000000000LL + nsec);
    }
    PyObject *s = PyLong_FromLongLong(sec);
    PyObject *g = PyLong_FromLong(1000000000L);
    PyObject *n = PyLong_FromLongLong(nsec);
    PyObject *out = NULL;
    if (s && g && n) {
        PyObject *m = PyNumber_Multiply(s, g);
        if (m) {
            out = PyNumber_Add(m, n);
            Py_DECREF(m);
        }
    }
    Py_XDECREF(s);
    Py_XDECREF(g);
    Py_XDECREF(n);
    return out;
}

static PyObject *lstat_all(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *base_obj, *paths_obj;
    if (!PyArg_ParseTuple(args, "UO:lstat_all", &base_obj, &paths_obj)) {
        return NULL;
    }
    PyObject *seq = PySequence_Fast(paths_obj, "lstat_all: paths is a sequence of str");
    if (seq == NULL) {
        return NULL;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!PyUnicode_Check(items[i])) {
            PyErr_Format(PyExc_TypeError, "lstat_all: a path is a str, got %.100s",
                         Py_TYPE(items[i])->tp_name);
            Py_DECREF(seq);
            return NULL;
        }
    }
    PyObject *out = PyList_New(n);
    if (out == NULL) {
        Py_DECREF(seq);
        return NULL;
    }
    PyObject *base = PyUnicode_EncodeFSDefault(base_obj);
    if (base == NULL) {
        /* os.lstat raises ValueError (UnicodeEncodeError) for every path: each is None. */
        PyErr_Clear();
        for (Py_ssize_t i = 0; i < n; i++) {
            Py_INCREF(Py_None);
            PyList_SET_ITEM(out, i, Py_None);
        }
        Py_DECREF(seq);
        return out;
    }
    const char *bp = PyBytes_AS_STRING(base);
    size_t blen = (size_t)PyBytes_GET_SIZE(base);
    int base_ok = strlen(bp) == blen;
    PyObject **names = (PyObject **)calloc((size_t)(n ? n : 1), sizeof(PyObject *));
    one_stat *res = (one_stat *)calloc((size_t)(n ? n : 1), sizeof(one_stat));
    if (names == NULL || res == NULL) {
        free(names);
        free(res);
        Py_DECREF(base);
        Py_DECREF(out);
        Py_DECREF(seq);
        return PyErr_NoMemory();
    }
    size_t longest = 0;
    for (Py_ssize_t i = 0; i < n && base_ok; i++) {
        PyObject *b = PyUnicode_EncodeFSDefault(items[i]);
        if (b == NULL) {
            PyErr_Clear(); /* not a path here: None, as os.lstat's ValueError */
            continue;
        }
        size_t len = (size_t)PyBytes_GET_SIZE(b);
        if (strlen(PyBytes_AS_STRING(b)) != len) {
            Py_DECREF(b); /* an embedded NUL: None, as os.lstat's ValueError */
            continue;
        }
        names[i] = b;
        if (len > longest) {
            longest = len;
        }
    }
    char *buf = (char *)malloc(blen + longest + 1);
    if (buf == NULL) {
        for (Py_ssize_t i = 0; i < n; i++) {
            Py_XDECREF(names[i]);
        }
        free(names);
        free(res);
        Py_DECREF(base);
        Py_DECREF(out);
        Py_DECREF(seq);
        return PyErr_NoMemory();
    }
    memcpy(buf, bp, blen);
    buf[blen] = 0;
    Py_BEGIN_ALLOW_THREADS
    /* Relative to a descriptor of base, which is then walked once, not once a file; a name that
     * would not be relative to it (absolute) is stat-ed by its whole path, as is every name when
     * base does not end with a separator or cannot be opened as a directory. */
    int dfd = base_ok && blen && bp[blen - 1] == '/'
                  ? open(buf, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
                  : -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (names[i] == NULL) {
            continue;
        }
        const char *name = PyBytes_AS_STRING(names[i]);
        size_t len = (size_t)PyBytes_GET_SIZE(names[i]);
        struct stat st;
        int rc;
        if (dfd >= 0 && len && name[0] != '/') {
            rc = fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW);
        } else {
            memcpy(buf + blen, name, len + 1);
            rc = lstat(buf, &st);
        }
        if (rc != 0 || !S_ISREG(st.st_mode)) {
            continue;
        }
        res[i].ok = 1;
        res[i].size = (long long)st.st_size;
        res[i].sec = (long long)st.st_mtim.tv_sec;
        res[i].nsec = (long long)st.st_mtim.tv_nsec;
        res[i].ino = (unsigned long long)st.st_ino;
    }
    if (dfd >= 0) {
        close(dfd);
    }
    Py_END_ALLOW_THREADS
    free(buf);
    int failed = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_XDECREF(names[i]);
        PyObject *item = Py_None;
        if (res[i].ok && !failed) {
            PyObject *size = PyLong_FromLongLong(res[i].size);
            PyObject *mt = mtime_ns(res[i].sec, res[i].nsec);
            PyObject *ino = PyLong_FromUnsignedLongLong(res[i].ino);
            item = (size && mt && ino) ? PyTuple_Pack(3, size, mt, ino) : NULL;
            Py_XDECREF(size);
            Py_XDECREF(mt);
            Py_XDECREF(ino);
            if (item == NULL) {
                failed = 1;
                item = Py_None;
            } else {
                /* Three ints hold no reference to anything: the cyclic collector need not look
                 * at the tuple (it would untrack it itself at its first look), and 12,000 of
                 * them no longer bring a full collection into a new session's first search. */
                PyObject_GC_UnTrack(item);
                PyList_SET_ITEM(out, i, item);
                continue;
            }
        }
        Py_INCREF(Py_None);
        PyList_SET_ITEM(out, i, item);
    }
    free(names);
    free(res);
    Py_DECREF(base);
    Py_DECREF(seq);
    if (failed) {
        Py_DECREF(out);
        return NULL;
    }
    return out;
}

static PyObject *add_watches(PyObject *self, PyObject *args) {
    (void)self;
    int fd;
    unsigned int mask;
    PyObject *root_obj, *prefix_obj, *dirs_obj;
    if (!PyArg_ParseTuple(args, "iUUOI:add_watches", &fd, &root_obj, &prefix_obj, &dirs_obj,
                          &mask)) {
        return NULL;
    }
    PyObject *seq = PySequence_Fast(dirs_obj, "add_watches: dirs is a sequence of str");
    if (seq == NULL) {
        return NULL;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    /* Every path encoded first, as os.fsencode does (its error raised, no watch added). */
    PyObject *paths = PyList_New(n);
    if (paths == NULL) {
        Py_DECREF(seq);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *d = items[i];
        if (!PyUnicode_Check(d)) {
            PyErr_Format(PyExc_TypeError, "add_watches: a directory is a str, got %.100s",
                         Py_TYPE(d)->tp_name);
            Py_DECREF(paths);
            Py_DECREF(seq);
            return NULL;
        }
        PyObject *full = PyUnicode_GET_LENGTH(d) ? PyUnicode_Concat(prefix_obj, d)
                                                 : Py_NewRef(root_obj);
        PyObject *b = full ? PyUnicode_EncodeFSDefault(full) : NULL;
        Py_XDECREF(full);
        if (b == NULL) {
            Py_DECREF(paths);
            Py_DECREF(seq);
            return NULL;
        }
        if (strlen(PyBytes_AS_STRING(b)) != (size_t)PyBytes_GET_SIZE(b)) {
            Py_DECREF(b);
            PyErr_SetString(PyExc_ValueError, "embedded null byte");
            Py_DECREF(paths);
            Py_DECREF(seq);
            return NULL;
        }
        PyList_SET_ITEM(paths, i, b);
    }
    Py_DECREF(seq);
    long *wds = (long *)calloc((size_t)(n ? n : 1), sizeof(long));
    if (wds == NULL) {
        Py_DECREF(paths);
        return PyErr_NoMemory();
    }
    Py_ssize_t done = 0;
    Py_BEGIN_ALLOW_THREADS
    for (; done < n;) {
        int wd = inotify_add_watch(fd, PyBytes_AS_STRING(PyList_GET_ITEM(paths, done)), mask);
        int err = errno;
        wds[done++] = wd >= 0 ? (long)wd : -(long)err;
        if (wd < 0 && err != ENOENT && err != ENOTDIR) {
            break;
        }
    }
    Py_END_ALLOW_THREADS
    Py_DECREF(paths);
    PyObject *out = PyList_New(done);
    if (out == NULL) {
        free(wds);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < done; i++) {
        PyObject *v = PyLong_FromLong(wds[i]);
        if (v == NULL) {
            free(wds);
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, i, v);
    }
    free(wds);
    return out;
}

static PyMethodDef methods[] = {
    {"lstat_all", lstat_all, METH_VARARGS,
     "lstat_all(base, paths, /)\n--\n\n"
     "For each path, (size, mtime_ns, inode) when base + path is a regular file (links not "
     "followed), else None."},
    {"add_watches", add_watches, METH_VARARGS,
     "add_watches(fd, root, prefix, dirs, mask, /)\n--\n\n"
     "An inotify watch on each directory; each one's descriptor, or minus the error number."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_stat_native", "The refresher's stat of listed files, compiled.", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__stat_native(void) { return PyModule_Create(&module); }
