/* Columnar tf.train.Example encoder: Arrow-style buffers in, serialized (and
 * optionally TFRecord-framed) Examples out.  A plain C ABI called through
 * ctypes (which releases the GIL), so it needs neither TensorFlow nor Python
 * headers: tfpipe/records/columnar.py builds it with the system C compiler.
 *
 * The bytes equal tfpipe.records._wire / codec.encode_example (protobuf's
 * SerializeToString(deterministic=True)): entries in the order the caller
 * gives (it sorts the keys by their UTF-8 bytes), packed numeric lists, a
 * missing value (null) as an empty list.  tests/records/test_columnar.py
 * compares the two on every supported column type.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) || defined(_M_X64)
#include <nmmintrin.h>
#define TFP_X86 1
#endif

enum { K_CONST = 0, K_INT = 1, K_FLOAT = 2, K_BYTES = 3 };

typedef struct {
    int32_t kind;                 /* K_CONST, K_INT (int64), K_FLOAT (float32), K_BYTES */
    int32_t is_list;              /* 0: value index = row; 1: values [row_offsets[r], row_offsets[r+1]) */
    const uint8_t *key;           /* 0x0A varint(len) name; for K_CONST the whole map entry */
    int64_t key_len;
    const uint8_t *valid;         /* per-row byte mask (0 = null: an empty list), or NULL */
    const int32_t *row_offsets;   /* is_list: rows + 1 offsets into the values */
    const void *values;           /* int64_t[], float[] or the bytes of K_BYTES */
    const int32_t *value_offsets; /* K_BYTES: values + 1 offsets into `values` */
} tfp_column;

/* ------------------------------------------------------------------ crc32c */
static uint32_t crc_table[8][256];
static int crc_ready = 0;
static int crc_hw_ok = 0;

static void crc_init(void) {
    if (crc_ready) return;
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        crc_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xFF];
#ifdef TFP_X86
    __builtin_cpu_init();
    crc_hw_ok = __builtin_cpu_supports("sse4.2");
#endif
    crc_ready = 1; /* benign race: every thread computes the same tables */
}

static uint32_t crc_sw(uint32_t crc, const uint8_t *p, size_t n) {
    while (n >= 8) {
        uint32_t lo = crc ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                             (uint32_t)p[3] << 24);
        crc = crc_table[7][lo & 0xFF] ^ crc_table[6][(lo >> 8) & 0xFF] ^
              crc_table[5][(lo >> 16) & 0xFF] ^ crc_table[4][lo >> 24] ^ crc_table[3][p[4]] ^
              crc_table[2][p[5]] ^ crc_table[1][p[6]] ^ crc_table[0][p[7]];
        p += 8;
        n -= 8;
    }
    while (n--) crc = crc_table[0][(crc ^ *p++) & 0xFF] ^ (crc >> 8);
    return crc;
}

#ifdef TFP_X86
__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t crc, const uint8_t *p,
                                                         size_t n) {
    uint64_t c = crc;
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c = _mm_crc32_u64(c, v);
        p += 8;
        n -= 8;
    }
    uint32_t c32 = (uint32_t)c;
    while (n--) c32 = _mm_crc32_u8(c32, *p++);
    return c32;
}
#endif

static uint32_t masked_crc(const uint8_t *p, size_t n) {
    uint32_t crc;
#ifdef TFP_X86
    if (crc_hw_ok)
        crc = ~crc_hw(0xFFFFFFFFu, p, n);
    else
#endif
        crc = ~crc_sw(0xFFFFFFFFu, p, n);
    return ((crc >> 15) | (crc << 17)) + 0xA282EAD8u;
}

uint32_t tfp_masked_crc32c(const uint8_t *p, int64_t n) {
    crc_init();
    return masked_crc(p, (size_t)n);
}

/* ------------------------------------------------------------------ wire */
static inline uint64_t vlen(uint64_t v) {
    uint64_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static inline uint8_t *put_varint(uint8_t *p, uint64_t v) {
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

static inline void value_range(const tfp_column *c, int64_t r, int64_t *b, int64_t *e) {
    if (c->valid && !c->valid[r]) {
        *b = *e = 0;
    } else if (c->is_list) {
        *b = c->row_offsets[r];
        *e = c->row_offsets[r + 1];
    } else {
        *b = r;
        *e = r + 1;
    }
}

/* The length of the list message inside the Feature (bytes_list / int64_list /
 * float_list body); *packed gets the packed-values length for numbers. */
static inline uint64_t list_len(const tfp_column *c, int64_t b, int64_t e, uint64_t *packed) {
    uint64_t s = 0;
    switch (c->kind) {
    case K_BYTES: {
        const int32_t *o = c->value_offsets;
        for (int64_t i = b; i < e; i++) {
            uint64_t l = (uint64_t)(o[i + 1] - o[i]);
            s += 1 + vlen(l) + l;
        }
        *packed = 0;
        return s;
    }
    case K_INT: {
        const int64_t *v = (const int64_t *)c->values;
        for (int64_t i = b; i < e; i++) s += vlen((uint64_t)v[i]);
        break;
    }
    default:
        s = 4 * (uint64_t)(e - b);
    }
    *packed = s;
    return e > b ? 1 + vlen(s) + s : 0;
}

static inline uint64_t entry_len(const tfp_column *c, int64_t r) {
    if (c->kind == K_CONST) return (uint64_t)c->key_len;
    int64_t b, e;
    uint64_t packed;
    value_range(c, r, &b, &e);
    uint64_t inner = list_len(c, b, e, &packed);
    uint64_t feature = 1 + vlen(inner) + inner;
    uint64_t body = (uint64_t)c->key_len + 1 + vlen(feature) + feature;
    return 1 + vlen(body) + body;
}

static inline uint64_t example_len(const tfp_column *cols, int32_t ncols, int64_t r) {
    uint64_t body = 0;
    for (int32_t k = 0; k < ncols; k++) body += entry_len(&cols[k], r);
    return 1 + vlen(body) + body;
}

static uint8_t *put_entry(const tfp_column *c, int64_t r, uint8_t *p) {
    if (c->kind == K_CONST) {
        memcpy(p, c->key, (size_t)c->key_len);
        return p + c->key_len;
    }
    int64_t b, e;
    uint64_t packed;
    value_range(c, r, &b, &e);
    uint64_t inner = list_len(c, b, e, &packed);
    uint64_t feature = 1 + vlen(inner) + inner;
    uint64_t body = (uint64_t)c->key_len + 1 + vlen(feature) + feature;
    *p++ = 0x0A;
    p = put_varint(p, body);
    memcpy(p, c->key, (size_t)c->key_len);
    p += c->key_len;
    *p++ = 0x12;
    p = put_varint(p, feature);
    switch (c->kind) {
    case K_BYTES: {
        *p++ = 0x0A;
        p = put_varint(p, inner);
        const int32_t *o = c->value_offsets;
        const uint8_t *data = (const uint8_t *)c->values;
        for (int64_t i = b; i < e; i++) {
            uint64_t l = (uint64_t)(o[i + 1] - o[i]);
            *p++ = 0x0A;
            p = put_varint(p, l);
            memcpy(p, data + o[i], l);
            p += l;
        }
        return p;
    }
    case K_INT: {
        *p++ = 0x1A;
        p = put_varint(p, inner);
        if (e > b) {
            *p++ = 0x0A;
            p = put_varint(p, packed);
            const int64_t *v = (const int64_t *)c->values;
            for (int64_t i = b; i < e; i++) p = put_varint(p, (uint64_t)v[i]);
        }
        return p;
    }
    default: {
        *p++ = 0x12;
        p = put_varint(p, inner);
        if (e > b) {
            *p++ = 0x0A;
            p = put_varint(p, packed);
            memcpy(p, (const float *)c->values + b, 4 * (size_t)(e - b));
            p += 4 * (e - b);
        }
        return p;
    }
    }
}

/* Bytes that tfp_encode writes for rows [r0, r1). */
int64_t tfp_measure(const tfp_column *cols, int32_t ncols, int64_t r0, int64_t r1,
                    int32_t framed) {
    uint64_t total = 0;
    for (int64_t r = r0; r < r1; r++) total += example_len(cols, ncols, r) + (framed ? 16 : 0);
    return (int64_t)total;
}

/* Encode rows [r0, r1) back to back into out (cap bytes): Examples, or TFRecord
 * frames (uint64 length, masked crc32c of it, data, masked crc32c of data) when
 * `framed`.  ends[i] (if not NULL) gets the end offset of row r0 + i.  Returns
 * the bytes written, or -1 when cap is too small (nothing is valid then). */
int64_t tfp_encode(const tfp_column *cols, int32_t ncols, int64_t r0, int64_t r1,
                   int32_t framed, uint8_t *out, int64_t cap, int64_t *ends) {
    crc_init();
    uint8_t *p = out, *limit = out + cap;
    for (int64_t r = r0; r < r1; r++) {
        uint64_t blen = 0; /* the Example's body: its map entries */
        for (int32_t k = 0; k < ncols; k++) blen += entry_len(&cols[k], r);
        uint64_t n = 1 + vlen(blen) + blen;
        if ((uint64_t)(limit - p) < n + (framed ? 16 : 0)) return -1;
        if (framed) {
            for (int i = 0; i < 8; i++) p[i] = (uint8_t)(n >> (8 * i));
            uint32_t hc = masked_crc(p, 8);
            for (int i = 0; i < 4; i++) p[8 + i] = (uint8_t)(hc >> (8 * i));
            p += 12;
        }
        uint8_t *data = p;
        *p++ = 0x0A;
        p = put_varint(p, blen);
        for (int32_t k = 0; k < ncols; k++) p = put_entry(&cols[k], r, p);
        if (framed) {
            uint32_t dc = masked_crc(data, n);
            for (int i = 0; i < 4; i++) p[i] = (uint8_t)(dc >> (8 * i));
            p += 4;
        }
        if (ends) ends[r - r0] = (int64_t)(p - out);
    }
    return (int64_t)(p - out);
}

/* ------------------------------------------------------------------ canonical JSON
 * The plan digest of a table row (tfpipe.convert._plan.canonical_json of
 * [key, payload]): ["row:I",[I,{"col":value,...}]] and a newline, keys in the
 * order given (Python's sorted()), json.dumps' separators (",", ":"), a value:
 * null, an int, a float as Python's repr (NaN, Infinity, -Infinity as json
 * writes them), bytes as {"__bytes__":"<hex>"}, or a list of those.  K_DOUBLE
 * columns hold float64 values; K_INT and K_BYTES as above. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

enum { K_DOUBLE = 4 };

/* Python's float repr: the shortest digits that read back as x (the closest such
 * when several), then 'r' formatting: exponent when the decimal point would be
 * at <= -4 or > 16 digits, else positional with at least one fractional digit. */
static int shortest_digits(double x, char *digits, int *decpt) {
    char buf[40];
    for (int p = 1; p <= 17; p++) {
        snprintf(buf, sizeof buf, "%.*e", p - 1, x);
        if (strtod(buf, NULL) == x) {
            /* buf: d[.ddd]e[+-]XX */
            int n = 0;
            char *q = buf;
            for (; *q && *q != 'e'; q++)
                if (*q >= '0' && *q <= '9') digits[n++] = *q;
            digits[n] = 0;
            *decpt = atoi(q + 1) + 1;
            /* an exact power of two has a wider gap above it: a p-digit string one
             * unit higher may read back as x too while the nearest does not; the
             * loop below found the nearest at this p, so nothing shorter exists. */
            while (n > 1 && digits[n - 1] == '0') digits[--n] = 0;
            return n;
        }
        /* power-of-two case: try the p-digit decimal one unit above the nearest */
        int e2;
        double m = frexp(x, &e2);
        if (m == 0.5 && p < 17) {
            char d[24];
            int n = 0;
            char *q = buf;
            for (; *q && *q != 'e'; q++)
                if (*q >= '0' && *q <= '9') d[n++] = *q;
            int exp10 = atoi(q + 1);
            int i = n - 1;
            while (i >= 0 && d[i] == '9') d[i--] = '0';
            if (i < 0) {
                memmove(d + 1, d, (size_t)n);
                d[0] = '1';
                exp10++;
            } else {
                d[i]++;
            }
            char up[48];
            int k = snprintf(up, sizeof up, "%c.", d[0]);
            for (int j = 1; j < p; j++) up[k++] = d[j];
            snprintf(up + k, sizeof up - (size_t)k, "e%d", exp10);
            if (strtod(up, NULL) == x) {
                int m2 = 0;
                for (int j = 0; j < p; j++) digits[m2++] = d[j];
                digits[m2] = 0;
                *decpt = exp10 + 1;
                while (m2 > 1 && digits[m2 - 1] == '0') digits[--m2] = 0;
                return m2;
            }
        }
    }
    return -1; /* unreachable: 17 digits always round-trip */
}

static char *put_repr(char *p, double x) {
    if (isnan(x)) {
        memcpy(p, "NaN", 3);
        return p + 3;
    }
    if (isinf(x)) {
        if (x < 0) *p++ = '-';
        memcpy(p, "Infinity", 8);
        return p + 8;
    }
    if (signbit(x)) *p++ = '-';
    x = fabs(x);
    if (x == 0) {
        memcpy(p, "0.0", 3);
        return p + 3;
    }
    char d[24] = {0};
    int decpt = 0;
    int n = shortest_digits(x, d, &decpt);
    if (decpt <= -4 || decpt > 16) {
        *p++ = d[0];
        if (n > 1) {
            *p++ = '.';
            memcpy(p, d + 1, (size_t)(n - 1));
            p += n - 1;
        }
        int e = decpt - 1;
        p += sprintf(p, "e%c%02d", e < 0 ? '-' : '+', e < 0 ? -e : e);
        return p;
    }
    if (decpt <= 0) {
        *p++ = '0';
        *p++ = '.';
        for (int i = 0; i < -decpt; i++) *p++ = '0';
        memcpy(p, d, (size_t)n);
        return p + n;
    }
    if (n <= decpt) {
        memcpy(p, d, (size_t)n);
        p += n;
        for (int i = n; i < decpt; i++) *p++ = '0';
        memcpy(p, ".0", 2);
        return p + 2;
    }
    memcpy(p, d, (size_t)decpt);
    p += decpt;
    *p++ = '.';
    memcpy(p, d + decpt, (size_t)(n - decpt));
    return p + n - decpt;
}

static char HEX2[512]; /* "000102...ff": two hex digits per byte value */

static void hex_init(void) {
    static const char HEX[] = "0123456789abcdef";
    for (int i = 0; i < 256; i++) {
        HEX2[2 * i] = HEX[i >> 4];
        HEX2[2 * i + 1] = HEX[i & 15];
    }
}

static char *put_int(char *p, int64_t v) {
    char tmp[24];
    int n = 0;
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    do {
        tmp[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0) *p++ = '-';
    while (n) *p++ = tmp[--n];
    return p;
}

static char *put_json_value(const tfp_column *c, int64_t i, char *p) {
    switch (c->kind) {
    case K_INT:
        return put_int(p, ((const int64_t *)c->values)[i]);
    case K_DOUBLE:
        return put_repr(p, ((const double *)c->values)[i]);
    default: {
        const uint8_t *s = (const uint8_t *)c->values + c->value_offsets[i];
        int32_t l = c->value_offsets[i + 1] - c->value_offsets[i];
        memcpy(p, "{\"__bytes__\":\"", 14);
        p += 14;
        for (int32_t k = 0; k < l; k++) {
            memcpy(p, HEX2 + 2 * s[k], 2);
            p += 2;
        }
        *p++ = '"';
        *p++ = '}';
        return p;
    }
    }
}

/* The canonical JSON lines of rows [r0, r1) (row_index[r - r0]: the table row) into
 * out; returns the bytes written, or -1 when `cap` might not hold them (nothing
 * valid then: call again with more). */
int64_t tfp_json_rows(const tfp_column *cols, int32_t ncols, int64_t r0, int64_t r1,
                      const int64_t *row_index, char *out, int64_t cap) {
    char *p = out, *limit = out + cap;
    hex_init(); /* benign race: every thread writes the same table */
    for (int64_t r = r0; r < r1; r++) {
        uint64_t need = 64;
        for (int32_t k = 0; k < ncols; k++) {
            const tfp_column *c = &cols[k];
            int64_t b, e;
            need += (uint64_t)c->key_len + 8;
            value_range(c, r, &b, &e);
            if (c->kind == K_BYTES)
                need += 2 * (uint64_t)(c->value_offsets[e] - c->value_offsets[b]) +
                        17 * (uint64_t)(e - b);
            else
                need += 33 * (uint64_t)(e - b);
        }
        if ((uint64_t)(limit - p) < need) return -1;
        int64_t idx = row_index[r - r0];
        memcpy(p, "[\"row:", 6);
        p = put_int(p + 6, idx);
        memcpy(p, "\",[", 3);
        p = put_int(p + 3, idx);
        memcpy(p, ",{", 2);
        p += 2;
        for (int32_t k = 0; k < ncols; k++) {
            const tfp_column *c = &cols[k];
            if (k) *p++ = ',';
            memcpy(p, c->key, (size_t)c->key_len);
            p += c->key_len;
            if (c->valid && !c->valid[r]) {
                memcpy(p, "null", 4);
                p += 4;
                continue;
            }
            if (!c->is_list) {
                p = put_json_value(c, r, p);
                continue;
            }
            *p++ = '[';
            for (int64_t i = c->row_offsets[r]; i < c->row_offsets[r + 1]; i++) {
                if (i > c->row_offsets[r]) *p++ = ',';
                p = put_json_value(c, i, p);
            }
            *p++ = ']';
        }
        memcpy(p, "}]]\n", 4);
        p += 4;
    }
    return (int64_t)(p - out);
}

/* ------------------------------------------------------------------ sha256
 * The plan's unit_hash(seed, domain, "row:I") for many rows at once:
 * int.from_bytes(sha256(f"{seed}:{domain}:row:{I}")[:8], "big") / 2**64. */
static const uint32_t K256[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

#define ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void sha256_block(uint32_t h[8], const uint8_t *b) {
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)b[4 * i] << 24 | (uint32_t)b[4 * i + 1] << 16 |
               (uint32_t)b[4 * i + 2] << 8 | b[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = ROR(w[i - 15], 7) ^ ROR(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ROR(w[i - 2], 17) ^ ROR(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h[0], bb = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = hh + (ROR(e, 6) ^ ROR(e, 11) ^ ROR(e, 25)) + ((e & f) ^ (~e & g)) + K256[i] + w[i];
        uint32_t t2 = (ROR(a, 2) ^ ROR(a, 13) ^ ROR(a, 22)) + ((a & bb) ^ (a & c) ^ (bb & c));
        hh = g; g = f; f = e; e = d + t1; d = c; c = bb; bb = a; a = t1 + t2;
    }
    h[0] += a; h[1] += bb; h[2] += c; h[3] += d; h[4] += e; h[5] += f; h[6] += g; h[7] += hh;
}

/* The first 8 bytes (big-endian) of sha256(msg), msg shorter than 2**32 bytes. */
static uint64_t sha256_head(const uint8_t *msg, size_t n) {
    uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                     0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    size_t i = 0;
    for (; i + 64 <= n; i += 64) sha256_block(h, msg + i);
    uint8_t last[128];
    size_t rest = n - i;
    memcpy(last, msg + i, rest);
    last[rest] = 0x80;
    size_t total = rest + 9 <= 64 ? 64 : 128;
    memset(last + rest + 1, 0, total - rest - 1);
    uint64_t bits = (uint64_t)n * 8;
    for (int k = 0; k < 8; k++) last[total - 1 - k] = (uint8_t)(bits >> (8 * k));
    sha256_block(h, last);
    if (total == 128) sha256_block(h, last + 64);
    return (uint64_t)h[0] << 32 | h[1];
}

/* out[i] = unit_hash for row rows[i]: prefix is f"{seed}:{domain}:row:" (UTF-8). */
void tfp_unit_hashes(const uint8_t *prefix, int64_t prefix_len, const int64_t *rows, int64_t n,
                     double *out) {
    uint8_t buf[1024];
    if (prefix_len > 1000) return;
    memcpy(buf, prefix, (size_t)prefix_len);
    for (int64_t i = 0; i < n; i++) {
        char *end = put_int((char *)buf + prefix_len, rows[i]);
        uint64_t head = sha256_head(buf, (size_t)((uint8_t *)end - buf));
        out[i] = (double)head / 18446744073709551616.0;
    }
}
