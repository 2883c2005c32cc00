/* The character-level and byte-level tokenizers, and strict UTF-8. */
#include "textgen.h"

#include "minigrad/safetensors.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int tg_utf8_decode(const unsigned char *s, size_t n, uint32_t *cp) {
    unsigned c = s[0];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    int len;
    uint32_t v, min;
    if (c >= 0xC2 && c <= 0xDF) len = 2, v = c & 0x1F, min = 0x80;
    else if (c >= 0xE0 && c <= 0xEF) len = 3, v = c & 0x0F, min = 0x800;
    else if (c >= 0xF0 && c <= 0xF4) len = 4, v = c & 0x07, min = 0x10000;
    else return 0; /* continuation byte, C0/C1 (always overlong), F5..FF */
    if ((size_t)len > n) return 0;
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        v = v << 6 | (s[i] & 0x3F);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return 0;
    *cp = v;
    return len;
}

int tg_utf8_encode(uint32_t cp, char out[4]) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | cp >> 6);
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp >= 0xD800 && cp <= 0xDFFF) return 0;
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | cp >> 12);
        out[1] = (char)(0x80 | (cp >> 6 & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    if (cp > 0x10FFFF) return 0;
    out[0] = (char)(0xF0 | cp >> 18);
    out[1] = (char)(0x80 | (cp >> 12 & 0x3F));
    out[2] = (char)(0x80 | (cp >> 6 & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

char *tg_char_name(uint32_t cp, char *buf, size_t n) {
    static const char *const esc[] = {['\n'] = "\\n", ['\t'] = "\\t", ['\r'] = "\\r"};
    char u[5] = {0};
    if (cp < sizeof esc / sizeof esc[0] && esc[cp])
        snprintf(buf, n, "'%s'", esc[cp]);
    else if (cp >= 0x20 && cp < 0x7F)
        snprintf(buf, n, "'%c'", (char)cp);
    else if (cp < 0x20 || cp == 0x7F || (cp >= 0x80 && cp < 0xA0) || !tg_utf8_encode(cp, u))
        snprintf(buf, n, "U+%04X", (unsigned)cp);
    else
        snprintf(buf, n, "U+%04X '%s'", (unsigned)cp, u);
    return buf;
}

mg_status tg_tokenizer_parse(const char *name, tg_tokenizer_kind *out) {
    if (name && strcmp(name, "char") == 0) *out = TG_TOKENIZER_CHAR;
    else if (name && strcmp(name, "byte") == 0) *out = TG_TOKENIZER_BYTE;
    else return mg_set_error(MG_ERR_INVALID, "unknown tokenizer '%s' (known: char, byte)", name ? name : "");
    return MG_OK;
}

const char *tg_tokenizer_name(tg_tokenizer_kind k) { return k == TG_TOKENIZER_BYTE ? "byte" : "char"; }

void tg_vocab_free(tg_vocab *v) {
    free(v->cps);
    free(v->chars);
    memset(v, 0, sizeof *v);
}

/* Fills low[] and chars from cps[0, size). */
static mg_status vocab_finish(tg_vocab *v) {
    for (int i = 0; i < 256; i++) v->low[i] = -1;
    if (v->kind == TG_TOKENIZER_BYTE) {
        for (int i = 0; i < 256; i++) v->low[i] = i;
        return MG_OK;
    }
    v->chars = malloc((size_t)v->size * 4 + 1);
    if (!v->chars) return mg_set_error(MG_ERR_NOMEM, "out of memory for a vocabulary of %d characters", (int)v->size);
    size_t off = 0;
    for (int32_t i = 0; i < v->size; i++) {
        if (v->cps[i] < 256) v->low[v->cps[i]] = i;
        off += (size_t)tg_utf8_encode(v->cps[i], v->chars + off);
    }
    v->chars[off] = 0;
    return MG_OK;
}

static mg_status utf8_error(const char *name, const unsigned char *s, size_t n, size_t off) {
    if (s[off] == 0)
        return mg_set_error(MG_ERR_FORMAT, "%s: byte offset %zu: NUL byte: this is not a text file "
                            "(a character vocabulary needs UTF-8 text; --tokenizer byte takes any bytes)", name, off);
    char bytes[32] = "";
    size_t k = 0;
    for (size_t i = off; i < n && i < off + 4; i++) k += (size_t)snprintf(bytes + k, sizeof bytes - k, " %02X", s[i]);
    return mg_set_error(MG_ERR_FORMAT, "%s: byte offset %zu: invalid UTF-8 (bytes%s): a character vocabulary "
                        "needs UTF-8 text; convert the file (e.g. iconv -f latin1 -t utf-8) or use --tokenizer byte",
                        name, off, bytes);
}

mg_status tg_vocab_build(tg_vocab *v, tg_tokenizer_kind kind, const char *text, size_t n,
                              const char *name) {
    memset(v, 0, sizeof *v);
    v->kind = kind;
    if (n == 0) return mg_set_error(MG_ERR_FORMAT, "%s: the text is empty", name);
    if (kind == TG_TOKENIZER_BYTE) {
        v->size = 256;
        return vocab_finish(v);
    }
    /* A bitmap of every code point seen: 136 KiB, and one pass over the text. */
    enum { NCP = 0x110000 };
    uint64_t *seen = calloc(NCP / 64, sizeof *seen);
    if (!seen) return mg_set_error(MG_ERR_NOMEM, "%s: out of memory building the vocabulary", name);
    const unsigned char *s = (const unsigned char *)text;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        int len = s[i] ? tg_utf8_decode(s + i, n - i, &cp) : 0;
        if (!len) {
            free(seen);
            return utf8_error(name, s, n, i);
        }
        seen[cp >> 6] |= 1ull << (cp & 63);
        i += (size_t)len;
    }
    int32_t count = 0;
    for (size_t w = 0; w < NCP / 64; w++) count += __builtin_popcountll(seen[w]);
    v->cps = malloc((size_t)count * sizeof *v->cps);
    if (!v->cps) {
        free(seen);
        return mg_set_error(MG_ERR_NOMEM, "%s: out of memory building the vocabulary", name);
    }
    for (uint32_t cp = 0; cp < NCP; cp++)
        if (seen[cp >> 6] >> (cp & 63) & 1) v->cps[v->size++] = cp;
    free(seen);
    mg_status st = vocab_finish(v);
    if (st != MG_OK) tg_vocab_free(v);
    return st;
}

mg_status tg_vocab_from_meta(tg_vocab *v, const char *tokenizer, const char *chars,
                                  int64_t vocab_size, const char *origin) {
    memset(v, 0, sizeof *v);
    tg_tokenizer_kind kind = TG_TOKENIZER_CHAR;
    if (tokenizer && tg_tokenizer_parse(tokenizer, &kind) != MG_OK)
        return mg_set_error(MG_ERR_FORMAT, "%s: metadata '%s': unknown tokenizer '%s' (known: char, byte)", origin,
                            TG_META_TOKENIZER, tokenizer);
    v->kind = kind;
    if (kind == TG_TOKENIZER_BYTE) {
        if (vocab_size != 256)
            return mg_set_error(MG_ERR_FORMAT, "%s: metadata 'vocab_size' is %lld but a byte tokenizer has 256 ids",
                                origin, (long long)vocab_size);
        v->size = 256;
        return vocab_finish(v);
    }
    if (!chars)
        return mg_set_error(MG_ERR_FORMAT, "%s: metadata '%s' is missing: the checkpoint does not say which "
                            "characters its ids stand for", origin, TG_META_CHARS);
    size_t n = strlen(chars);
    v->cps = malloc((n + 1) * sizeof *v->cps);
    if (!v->cps) return mg_set_error(MG_ERR_NOMEM, "%s: out of memory reading the vocabulary", origin);
    const unsigned char *s = (const unsigned char *)chars;
    mg_status st = MG_OK;
    for (size_t i = 0; i < n && st == MG_OK;) {
        uint32_t cp;
        int len = tg_utf8_decode(s + i, n - i, &cp);
        if (!len)
            st = mg_set_error(MG_ERR_FORMAT, "%s: metadata '%s': invalid UTF-8 at byte %zu", origin, TG_META_CHARS, i);
        else if (v->size > 0 && cp <= v->cps[v->size - 1])
            st = mg_set_error(MG_ERR_FORMAT, "%s: metadata '%s': the characters must be distinct and in ascending "
                              "order, but character %d (U+%04X) follows U+%04X", origin, TG_META_CHARS,
                              (int)v->size, (unsigned)cp, (unsigned)v->cps[v->size - 1]);
        else
            v->cps[v->size++] = cp, i += (size_t)len;
    }
    if (st == MG_OK && v->size != vocab_size)
        st = mg_set_error(MG_ERR_FORMAT, "%s: metadata '%s' holds %d characters but 'vocab_size' is %lld", origin,
                          TG_META_CHARS, (int)v->size, (long long)vocab_size);
    if (st == MG_OK) st = vocab_finish(v);
    if (st != MG_OK) tg_vocab_free(v);
    return st;
}

int32_t tg_vocab_id(const tg_vocab *v, uint32_t cp) {
    if (cp < 256) return v->low[cp];
    if (v->kind == TG_TOKENIZER_BYTE) return -1;
    size_t lo = 0, hi = (size_t)v->size;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (v->cps[mid] < cp) lo = mid + 1;
        else hi = mid;
    }
    return lo < (size_t)v->size && v->cps[lo] == cp ? (int32_t)lo : -1;
}

mg_status tg_encode(const tg_vocab *v, const char *text, size_t n, int32_t *out, size_t *n_out,
                         const char *name) {
    const unsigned char *s = (const unsigned char *)text;
    size_t k = 0;
    if (v->kind == TG_TOKENIZER_BYTE) {
        for (size_t i = 0; i < n; i++) out[i] = s[i];
        *n_out = n;
        return MG_OK;
    }
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        int32_t id;
        int len;
        if (s[i] < 0x80) { /* the common case, without a call */
            cp = s[i], len = 1;
        } else if (!(len = tg_utf8_decode(s + i, n - i, &cp))) {
            *n_out = k;
            return utf8_error(name, s, n, i);
        }
        if ((id = tg_vocab_id(v, cp)) < 0) {
            char cn[48];
            *n_out = k;
            return mg_set_error(MG_ERR_INVALID, "%s: byte offset %zu: the character %s is not in the vocabulary "
                                "(%d characters)", name, i, tg_char_name(cp, cn, sizeof cn), (int)v->size);
        }
        out[k++] = id;
        i += (size_t)len;
    }
    *n_out = k;
    return MG_OK;
}

int tg_decode_one(const tg_vocab *v, int32_t id, char out[4]) {
    if (id < 0 || id >= v->size) return 0;
    if (v->kind == TG_TOKENIZER_BYTE) {
        out[0] = (char)id;
        return 1;
    }
    return tg_utf8_encode(v->cps[id], out);
}

char *tg_decode(const tg_vocab *v, const int32_t *ids, size_t n) {
    char *s = malloc(n * 4 + 1);
    if (!s) return NULL;
    size_t off = 0;
    for (size_t i = 0; i < n; i++) off += (size_t)tg_decode_one(v, ids[i], s + off);
    s[off] = 0;
    return s;
}

mg_status tg_vocab_for_run(tg_vocab *v, const mg_st_file *saved, const char *ckpt, tg_tokenizer_kind kind,
                           const char *text, size_t n, const char *label) {
    mg_status st;
    if (saved) {
        const char *size = mg_st_meta_get(saved, "vocab_size");
        st = tg_vocab_from_meta(v, mg_st_meta_get(saved, TG_META_TOKENIZER), mg_st_meta_get(saved, TG_META_CHARS),
                                size ? strtoll(size, NULL, 10) : -1, ckpt);
    } else {
        st = tg_vocab_build(v, kind, text, n, label);
    }
    if (st == MG_OK && v->kind != kind)
        st = mg_set_error(MG_ERR_INVALID, "%s: the run uses the %s tokenizer, not --tokenizer %s", ckpt,
                          tg_tokenizer_name(v->kind), tg_tokenizer_name(kind));
    return st;
}
