/* Count one byte value in a buffer: the line numbers of diagnose's scan.

   CPython's bytes.count(b"\n") checks a limit after every match, which keeps the compiler from vectorising its
   loop: 3.4 GB/s here, a third of diagnose's CPU on a big log (profiled, bench/realscan.py). This loop compares
   16 bytes at a time. The extension is optional: without a compiler, breakglass.logs.newlines falls back to
   bytes.count, with the same answers (tests/test_newlines.py checks both against each other). */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

static Py_ssize_t
count_byte(const unsigned char *p, Py_ssize_t n, unsigned char c)
{
    Py_ssize_t total = 0;
#if defined(__SSE2__)
    const __m128i needle = _mm_set1_epi8((char)c);
    const __m128i zero = _mm_setzero_si128();
    while (n >= 16) {
        /* 8-bit counters: at most 255 blocks before they are summed */
        Py_ssize_t blocks = n / 16 < 255 ? n / 16 : 255;
        __m128i acc = zero;
        for (Py_ssize_t i = 0; i < blocks; i++, p += 16) {
            acc = _mm_sub_epi8(acc, _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)p), needle));
        }
        __m128i sums = _mm_sad_epu8(acc, zero);
        total += _mm_cvtsi128_si32(sums) + _mm_extract_epi16(sums, 4);
        n -= blocks * 16;
    }
#endif
    for (; n > 0; n--, p++) {
        total += (*p == c);
    }
    return total;
}

/* count(buffer, start=0, end=None): like bytes(buffer).count(b"\n", start, end), without the copy */
static PyObject *
newlines_count(PyObject *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t start = 0, end = PY_SSIZE_T_MAX;
    PyObject *end_obj = Py_None;
    if (!PyArg_ParseTuple(args, "y*|nO:count", &view, &start, &end_obj)) {
        return NULL;
    }
    if (end_obj != Py_None) {
        end = PyNumber_AsSsize_t(end_obj, PyExc_OverflowError);
        if (end == -1 && PyErr_Occurred()) {
            PyBuffer_Release(&view);
            return NULL;
        }
    }
    Py_ssize_t len = view.len;
    /* slice rules, as bytes.count applies them */
    if (start < 0 && (start += len) < 0) start = 0;
    if (end < 0 && (end += len) < 0) end = 0;
    if (end > len) end = len;
    Py_ssize_t found = 0;
    if (start < end) {
        Py_BEGIN_ALLOW_THREADS
        found = count_byte((const unsigned char *)view.buf + start, end - start, '\n');
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&view);
    return PyLong_FromSsize_t(found);
}

static PyMethodDef methods[] = {
    {"count", newlines_count, METH_VARARGS, "count(buffer, start=0, end=None) -> newlines in buffer[start:end]"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_newlines", NULL, -1, methods};

PyMODINIT_FUNC
PyInit__newlines(void)
{
    return PyModule_Create(&module);
}
