/* The text generator example: tokenizers (round trips with non-ASCII text, strict UTF-8, the
 * checkpoint table), corpus files and the default corpus, the 90/10 split, seeded batches, fixed
 * validation windows; then, once the GPT model is built, the `textgen` program end to end: a
 * short run that learns, exact resume, deterministic sampling, the loss PNG, evaluation, and
 * every bad input giving a clear message and a non-zero exit. */
#include "harness.h"
#include "textgen.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- helpers ---- */

static char tmpdir[256];

static void make_tmpdir(void) {
    const char *base = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/mg_textgen_XXXXXX", base && *base ? base : "/tmp");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

/* Removes tmpdir and everything below it (tests only make files and directories). */
static void remove_tree(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    char p[1024];
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            if (unlink(p) != 0) remove_tree(p);
        }
    closedir(d);
    rmdir(dir);
}

static void remove_tmpdir(void) { remove_tree(tmpdir); }

static const char *tmp_path(const char *name) {
    static char p[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", tmpdir, name);
    return p[k];
}

static void write_bytes(const char *path, const char *data, size_t n) {
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(data, 1, n, f), n);
    ck_assert_int_eq(fclose(f), 0);
}

static void write_file(const char *path, const char *text) { write_bytes(path, text, strlen(text)); }

static void assert_error_has(const char *part) {
    const char *e = mg_last_error();
    ck_assert_msg(strstr(e, part) != NULL, "error message '%s' lacks '%s'", e, part);
}

static const char *const MIXED = "Hello, w\xC3\xB6rld \xE2\x80\x94 \xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E "
                                 "\xF0\x9F\x8E\x89\n\ttab \xC3\xA9t\xC3\xA9\r\n";

/* ---- UTF-8 ---- */

START_TEST(utf8_every_code_point_round_trips) {
    for (uint32_t cp = 0; cp <= 0x10FFFF; cp++) {
        char buf[4];
        int n = mg_utf8_encode(cp, buf);
        if (cp >= 0xD800 && cp <= 0xDFFF) {
            ck_assert_int_eq(n, 0);
            continue;
        }
        ck_assert_int_eq(n, cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4);
        uint32_t back = 0xFFFFFFFF;
        ck_assert_int_eq(mg_utf8_decode((const unsigned char *)buf, (size_t)n, &back), n);
        ck_assert_uint_eq(back, cp);
        if (n > 1) ck_assert_int_eq(mg_utf8_decode((const unsigned char *)buf, (size_t)n - 1, &back), 0);
    }
    ck_assert_int_eq(mg_utf8_encode(0x110000, (char[4]){0}), 0);
}
END_TEST

START_TEST(utf8_rejects_malformed) {
    static const char *const bad[] = {
        "\x80",             /* stray continuation */
        "\xC0\x80",         /* overlong NUL */
        "\xC1\xBF",         /* overlong */
        "\xE0\x80\x80",     /* overlong 3-byte */
        "\xED\xA0\x80",     /* surrogate D800 */
        "\xF0\x80\x80\x80", /* overlong 4-byte */
        "\xF4\x90\x80\x80", /* past U+10FFFF */
        "\xF5\x80\x80\x80", "\xFF", "\xC3\x28", "\xE2\x82",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint32_t cp;
        ck_assert_msg(mg_utf8_decode((const unsigned char *)bad[i], strlen(bad[i]), &cp) == 0, "case %zu", i);
    }
}
END_TEST

/* ---- tokenizers ---- */

START_TEST(char_tokenizer_round_trips_non_ascii) {
    mg_text_vocab v;
    size_t n = strlen(MIXED);
    ck_assert_int_eq(mg_text_vocab_build(&v, MG_TOKENIZER_CHAR, MIXED, n, "mixed"), MG_OK);
    /* Distinct code points, counted independently: H e l o , space w ö r d — 日 本 語 🎉 \n \t t a b é \r */
    ck_assert_int_eq(v.size, 22);
    for (int32_t i = 1; i < v.size; i++) ck_assert_uint_lt(v.cps[i - 1], v.cps[i]);
    ck_assert_uint_eq(v.cps[0], '\t');
    ck_assert_uint_eq(v.cps[v.size - 1], 0x1F389);
    ck_assert_int_eq(mg_text_vocab_id(&v, 0xE9), 15);  /* 'é' after the 15 ASCII characters */
    ck_assert_int_eq(mg_text_vocab_id(&v, 0x65E5), 18); /* 日 after é ö — */
    ck_assert_int_eq(mg_text_vocab_id(&v, 'z'), -1);
    int32_t ids[128];
    size_t k;
    ck_assert_int_eq(mg_text_encode(&v, MIXED, n, ids, &k, "mixed"), MG_OK);
    ck_assert_uint_eq(k, 31); /* characters, not bytes */
    ck_assert_int_eq(ids[8], mg_text_vocab_id(&v, 0xF6));
    char *back = mg_text_decode(&v, ids, k);
    ck_assert_str_eq(back, MIXED);
    free(back);
    mg_text_vocab_free(&v);
}
END_TEST

START_TEST(byte_tokenizer_round_trips_any_bytes) {
    char all[512];
    for (int i = 0; i < 512; i++) all[i] = (char)(i * 7 + 3);
    mg_text_vocab v;
    ck_assert_int_eq(mg_text_vocab_build(&v, MG_TOKENIZER_BYTE, all, sizeof all, "bytes"), MG_OK);
    ck_assert_int_eq(v.size, 256);
    int32_t ids[512];
    size_t k;
    ck_assert_int_eq(mg_text_encode(&v, all, sizeof all, ids, &k, "bytes"), MG_OK);
    ck_assert_uint_eq(k, sizeof all);
    for (int i = 0; i < 512; i++) ck_assert_int_eq(ids[i], (unsigned char)all[i]);
    char *back = mg_text_decode(&v, ids, k);
    ck_assert_mem_eq(back, all, sizeof all);
    free(back);
    /* Non-ASCII text: one id per byte, and decoding the bytes gives the text back. */
    size_t n = strlen(MIXED);
    ck_assert_int_eq(mg_text_encode(&v, MIXED, n, ids, &k, "mixed"), MG_OK);
    ck_assert_uint_eq(k, n);
    back = mg_text_decode(&v, ids, k);
    ck_assert_str_eq(back, MIXED);
    free(back);
    mg_text_vocab_free(&v);
}
END_TEST

START_TEST(vocab_survives_metadata) {
    /* Control characters and every UTF-8 length go through the metadata string and back. */
    const char *text = "\x01\x1F\n\r\t\"\\ \x7F\xC2\x80\xDF\xBF\xE0\xA0\x80\xEF\xBF\xBD\xF0\x90\x80\x80\xF4\x8F\xBF\xBF";
    mg_text_vocab a, b;
    ck_assert_int_eq(mg_text_vocab_build(&a, MG_TOKENIZER_CHAR, text, strlen(text), "t"), MG_OK);
    ck_assert_int_eq(mg_text_vocab_from_meta(&b, "char", a.chars, a.size, "ckpt"), MG_OK);
    ck_assert_int_eq(b.size, a.size);
    ck_assert_mem_eq(b.cps, a.cps, (size_t)a.size * sizeof *a.cps);
    ck_assert_mem_eq(b.low, a.low, sizeof a.low);
    mg_text_vocab_free(&b);
    /* tokenizer absent means char (older files) */
    ck_assert_int_eq(mg_text_vocab_from_meta(&b, NULL, a.chars, a.size, "ckpt"), MG_OK);
    mg_text_vocab_free(&b);
    ck_assert_int_eq(mg_text_vocab_from_meta(&b, "byte", NULL, 256, "ckpt"), MG_OK);
    ck_assert_int_eq(b.kind, MG_TOKENIZER_BYTE);
    ck_assert_int_eq(mg_text_vocab_id(&b, 0xFF), 255);
    mg_text_vocab_free(&b);

    ck_assert_int_eq(mg_text_vocab_from_meta(&b, "char", NULL, 5, "m.st"), MG_ERR_FORMAT);
    assert_error_has("m.st: metadata 'chars' is missing");
    ck_assert_int_eq(mg_text_vocab_from_meta(&b, "char", a.chars, a.size + 1, "m.st"), MG_ERR_FORMAT);
    assert_error_has("'vocab_size' is");
    ck_assert_int_eq(mg_text_vocab_from_meta(&b, "char", "ba", 2, "m.st"), MG_ERR_FORMAT);
    assert_error_has("ascending");
    ck_assert_int_eq(mg_text_vocab_from_meta(&b, "char", "aa", 2, "m.st"), MG_ERR_FORMAT);
    assert_error_has("distinct");
    ck_assert_int_eq(mg_text_vocab_from_meta(&b, "char", "a\xC3", 2, "m.st"), MG_ERR_FORMAT);
    assert_error_has("invalid UTF-8 at byte 1");
    ck_assert_int_eq(mg_text_vocab_from_meta(&b, "word", "a", 1, "m.st"), MG_ERR_FORMAT);
    assert_error_has("unknown tokenizer 'word'");
    ck_assert_int_eq(mg_text_vocab_from_meta(&b, "byte", NULL, 65, "m.st"), MG_ERR_FORMAT);
    assert_error_has("256");
    mg_text_vocab_free(&a);
}
END_TEST

START_TEST(char_corpus_must_be_utf8_text) {
    mg_text_vocab v;
    const char latin1[] = "caf\xE9 au lait";
    ck_assert_int_eq(mg_text_vocab_build(&v, MG_TOKENIZER_CHAR, latin1, sizeof latin1 - 1, "menu.txt"), MG_ERR_FORMAT);
    assert_error_has("menu.txt: byte offset 3: invalid UTF-8 (bytes E9 20 61 75)");
    assert_error_has("--tokenizer byte");
    const char nul[] = "ab\0cd";
    ck_assert_int_eq(mg_text_vocab_build(&v, MG_TOKENIZER_CHAR, nul, 5, "bin"), MG_ERR_FORMAT);
    assert_error_has("bin: byte offset 2: NUL byte");
    const char cut[] = "ok \xE2\x80";
    ck_assert_int_eq(mg_text_vocab_build(&v, MG_TOKENIZER_CHAR, cut, sizeof cut - 1, "cut"), MG_ERR_FORMAT);
    assert_error_has("cut: byte offset 3");
    ck_assert_int_eq(mg_text_vocab_build(&v, MG_TOKENIZER_CHAR, "", 0, "none"), MG_ERR_FORMAT);
    assert_error_has("none: the text is empty");
    /* the same bytes are fine for the byte tokenizer */
    ck_assert_int_eq(mg_text_vocab_build(&v, MG_TOKENIZER_BYTE, latin1, sizeof latin1 - 1, "menu.txt"), MG_OK);
    mg_text_vocab_free(&v);
    mg_tokenizer_kind k;
    ck_assert_int_eq(mg_tokenizer_parse("word", &k), MG_ERR_INVALID);
    assert_error_has("unknown tokenizer 'word' (known: char, byte)");
}
END_TEST

START_TEST(encode_names_unknown_characters) {
    mg_text_vocab v;
    ck_assert_int_eq(mg_text_vocab_build(&v, MG_TOKENIZER_CHAR, "abc \n", 5, "c"), MG_OK);
    int32_t ids[16];
    size_t k;
    ck_assert_int_eq(mg_text_encode(&v, "ab caf\xC3\xA9", 8, ids, &k, "the prompt"), MG_ERR_INVALID);
    assert_error_has("the prompt: byte offset 5: the character 'f' is not in the vocabulary (5 characters)");
    ck_assert_int_eq(mg_text_encode(&v, "a\xC3\xA9", 3, ids, &k, "the prompt"), MG_ERR_INVALID);
    assert_error_has("byte offset 1: the character U+00E9 '\xC3\xA9' is not in the vocabulary");
    ck_assert_int_eq(mg_text_encode(&v, "a\t", 2, ids, &k, "p"), MG_ERR_INVALID);
    assert_error_has("the character '\\t'");
    ck_assert_int_eq(mg_text_encode(&v, "a\xFF", 2, ids, &k, "p"), MG_ERR_FORMAT);
    assert_error_has("p: byte offset 1: invalid UTF-8");
    mg_text_vocab_free(&v);
}
END_TEST

/* ---- split, batches, windows ---- */

static void make_counting_data(mg_text_data *d, size_t n) {
    /* Ids that say where they are, so windows can be checked for position. */
    d->ids = malloc(n * sizeof *d->ids);
    for (size_t i = 0; i < n; i++) d->ids[i] = (int32_t)i;
    d->n = n;
    d->n_train = n / 10 * 9 + n % 10 * 9 / 10;
}

START_TEST(split_is_first_ninety_percent) {
    for (size_t n = 1; n < 2000; n++) ck_assert_uint_eq(n / 10 * 9 + n % 10 * 9 / 10, n * 9 / 10);
    char text[1001];
    for (int i = 0; i < 1000; i++) text[i] = (char)('a' + (i * 31 % 26));
    text[1000] = 0;
    mg_text_vocab v;
    ck_assert_int_eq(mg_text_vocab_build(&v, MG_TOKENIZER_CHAR, text, 1000, "t"), MG_OK);
    mg_text_data a, b;
    ck_assert_int_eq(mg_text_data_make(&a, &v, text, 1000, 16, "t"), MG_OK);
    ck_assert_int_eq(mg_text_data_make(&b, &v, text, 999, 16, "t"), MG_OK);
    ck_assert_uint_eq(a.n, 1000);
    ck_assert_uint_eq(a.n_train, 900);
    ck_assert_uint_eq(mg_text_val_len(&a), 100);
    ck_assert_uint_eq(b.n_train, 899); /* rounded down */
    for (size_t i = 0; i < a.n; i++) ck_assert_int_eq(a.ids[i], mg_text_vocab_id(&v, (unsigned char)text[i]));
    ck_assert_int_eq(mg_text_val(&a)[0], mg_text_vocab_id(&v, (unsigned char)text[900]));
    mg_text_data_free(&b);
    ck_assert_int_eq(mg_text_data_make(&b, &v, text, 1000, 16, "t"), MG_OK);
    ck_assert_mem_eq(a.ids, b.ids, a.n * sizeof *a.ids);
    ck_assert_uint_eq(a.n_train, b.n_train);
    mg_text_data_free(&a);
    mg_text_data_free(&b);
    mg_text_vocab_free(&v);
}
END_TEST

START_TEST(split_refuses_text_shorter_than_a_context) {
    mg_text_vocab v;
    const char *t = "0123456789012345678"; /* 19 chars: a train split of 17 */
    ck_assert_int_eq(mg_text_vocab_build(&v, MG_TOKENIZER_CHAR, t, strlen(t), "t"), MG_OK);
    mg_text_data d;
    ck_assert_int_eq(mg_text_data_make(&d, &v, t, strlen(t), 17, "short.txt"), MG_ERR_FORMAT);
    assert_error_has("short.txt: too short: 19 tokens give a training split (the first 90%) of 17");
    assert_error_has("--block-size (at most 16 here)");
    ck_assert_ptr_null(d.ids);
    ck_assert_int_eq(mg_text_data_make(&d, &v, t, strlen(t), 16, "short.txt"), MG_OK);
    mg_text_data_free(&d);
    ck_assert_int_eq(mg_text_data_make(&d, &v, "0x", 2, 1, "odd.txt"), MG_ERR_INVALID);
    assert_error_has("odd.txt: byte offset 1: the character 'x'");
    mg_text_vocab_free(&v);
}
END_TEST

START_TEST(batches_are_windows_of_the_train_split_fixed_by_seed) {
    mg_text_data d;
    make_counting_data(&d, 1000); /* train 0..899 */
    enum { B = 8, T = 16 };
    int32_t x1[B * T], y1[B * T], x2[B * T], y2[B * T];
    mg_rng r1 = mg_rng_make(42), r2 = mg_rng_make(42), r3 = mg_rng_make(43);
    int32_t lo = 1 << 30, hi = -1;
    bool differs = false;
    for (int step = 0; step < 400; step++) {
        mg_text_batch(&d, B, T, &r1, x1, y1);
        mg_text_batch(&d, B, T, &r2, x2, y2);
        ck_assert_mem_eq(x1, x2, sizeof x1);
        ck_assert_mem_eq(y1, y2, sizeof y1);
        mg_text_batch(&d, B, T, &r3, x2, y2);
        differs |= memcmp(x1, x2, sizeof x1) != 0;
        for (int b = 0; b < B; b++) {
            int32_t s = x1[b * T];
            for (int t = 0; t < T; t++) {
                ck_assert_int_eq(x1[b * T + t], s + t);
                ck_assert_int_eq(y1[b * T + t], s + t + 1);
            }
            lo = s < lo ? s : lo;
            hi = s > hi ? s : hi;
        }
    }
    ck_assert(differs);
    /* every target stays in the train split, and 3200 draws reach both ends of the range */
    ck_assert_int_ge(lo, 0);
    ck_assert_int_le(hi, 900 - T - 1);
    ck_assert_int_le(lo, 5);
    ck_assert_int_ge(hi, 900 - T - 6);
    /* exactly B draws per batch */
    mg_rng a = mg_rng_make(7), b = mg_rng_make(7);
    mg_text_batch(&d, B, T, &a, x1, y1);
    for (int i = 0; i < B; i++) mg_rng_next(&b);
    ck_assert_uint_eq(a.s, b.s);
    mg_text_data_free(&d);
}
END_TEST

START_TEST(validation_windows_are_fixed_and_even) {
    mg_text_windows w;
    ck_assert_int_eq(mg_text_val_windows(&w, 1000, 16, 5), MG_OK);
    ck_assert_uint_eq(w.count, 5);
    ck_assert_int_eq(w.len, 16);
    size_t want[5] = {0, 245, 491, 737, 983}; /* span 983 = 1000 - 1 - 16 */
    for (int i = 0; i < 5; i++) ck_assert_uint_eq(w.start[i], want[i]);
    mg_text_windows_free(&w);
    /* a validation split shorter than a context gets one shorter window */
    ck_assert_int_eq(mg_text_val_windows(&w, 10, 16, 4), MG_OK);
    ck_assert_uint_eq(w.count, 1);
    ck_assert_int_eq(w.len, 9);
    ck_assert_uint_eq(w.start[0], 0);
    mg_text_windows_free(&w);
    /* no more windows than distinct starts */
    ck_assert_int_eq(mg_text_val_windows(&w, 20, 16, 64), MG_OK);
    ck_assert_uint_eq(w.count, 4);
    for (int i = 0; i < 4; i++) ck_assert_uint_eq(w.start[i], (size_t)i);
    mg_text_windows_free(&w);
    ck_assert_int_eq(mg_text_val_windows(&w, 1, 16, 4), MG_OK);
    ck_assert_uint_eq(w.count, 0);
    mg_text_windows_free(&w);
    /* windows covering a split: each target exactly once */
    for (size_t n = 2; n < 80; n++) {
        int64_t last;
        ck_assert_int_eq(mg_text_cover_windows(&w, n, 8, &last), MG_OK);
        int hits[80] = {0};
        for (size_t i = 0; i < w.count; i++) {
            int64_t len = i + 1 == w.count ? last : w.len;
            ck_assert_int_ge(len, 1);
            for (int64_t t = 0; t < len; t++) hits[w.start[i] + (size_t)t + 1]++;
        }
        for (size_t i = 1; i < n; i++) ck_assert_int_eq(hits[i], 1);
        ck_assert_int_eq(hits[0], 0);
        mg_text_windows_free(&w);
    }
}
END_TEST

/* ---- corpus files ---- */

START_TEST(read_files_concatenates_and_reports_problems) {
    make_tmpdir();
    write_file(tmp_path("a.txt"), "first");
    write_file(tmp_path("b.txt"), "second\n");
    write_file(tmp_path("c.txt"), "third");
    write_file(tmp_path("empty.txt"), "");
    const char *p3[] = {tmp_path("a.txt"), tmp_path("b.txt"), tmp_path("c.txt")};
    char *text;
    size_t n;
    ck_assert_int_eq(mg_text_read_files(p3, 3, &text, &n), MG_OK);
    ck_assert_str_eq(text, "first\nsecond\nthird");
    ck_assert_uint_eq(n, 18);
    free(text);
    const char *missing[] = {tmp_path("nope.txt")};
    ck_assert_int_eq(mg_text_read_files(missing, 1, &text, &n), MG_ERR_IO);
    assert_error_has("nope.txt: cannot open: No such file or directory");
    ck_assert_ptr_null(text);
    const char *empty[] = {tmp_path("a.txt"), tmp_path("empty.txt")};
    ck_assert_int_eq(mg_text_read_files(empty, 2, &text, &n), MG_ERR_FORMAT);
    assert_error_has("empty.txt: the file is empty");
    const char *dir[] = {tmpdir};
    ck_assert_int_eq(mg_text_read_files(dir, 1, &text, &n), MG_ERR_IO);
    assert_error_has("is a directory");
    /* a file larger than the first buffer */
    size_t big = (3u << 20) + 17;
    char *data = malloc(big);
    for (size_t i = 0; i < big; i++) data[i] = (char)('a' + i % 23);
    write_bytes(tmp_path("big.txt"), data, big);
    const char *pb[] = {tmp_path("big.txt")};
    ck_assert_int_eq(mg_text_read_files(pb, 1, &text, &n), MG_OK);
    ck_assert_uint_eq(n, big);
    ck_assert_mem_eq(text, data, big);
    free(text);
    free(data);
    remove_tmpdir();
}
END_TEST

START_TEST(default_corpus_location_and_missing_program) {
    char buf[512];
    setenv("XDG_CACHE_HOME", "/x/cache", 1);
    ck_assert_str_eq(mg_text_kjv_path(buf, sizeof buf), "/x/cache/minigrad/kjv.txt");
    unsetenv("XDG_CACHE_HOME");
    setenv("HOME", "/home/u", 1);
    ck_assert_str_eq(mg_text_kjv_path(buf, sizeof buf), "/home/u/.cache/minigrad/kjv.txt");
    make_tmpdir();
    setenv("PATH", tmpdir, 1); /* no `bible` here */
    ck_assert_int_eq(mg_text_kjv_make(tmp_path("sub/kjv.txt")), MG_ERR_NOT_FOUND);
    assert_error_has("bible-kjv");
    assert_error_has("--data FILE");
    /* an existing file is used as is, whatever is installed */
    write_file(tmp_path("kjv.txt"), "In the beginning\n");
    ck_assert_int_eq(mg_text_kjv_make(tmp_path("kjv.txt")), MG_OK);
    remove_tmpdir();
}
END_TEST

START_TEST(default_corpus_from_bible_kjv) {
    if (access("/usr/bin/bible", X_OK) != 0 && system("command -v bible >/dev/null 2>&1") != 0) {
        printf("# bible-kjv not installed: default corpus not made\n");
        return;
    }
    make_tmpdir();
    const char *path = tmp_path("cache/minigrad/kjv.txt");
    ck_assert_int_eq(mg_text_kjv_make(path), MG_OK);
    char *text;
    size_t n;
    ck_assert_int_eq(mg_text_read_files(&path, 1, &text, &n), MG_OK);
    ck_assert_uint_eq(n, 4137850);
    const char *first = "In the beginning God created the heaven and the earth.\nAnd the earth was without form";
    ck_assert_mem_eq(text, first, strlen(first));
    const char *last = "The grace of our Lord Jesus Christ be with you all. Amen.\n";
    ck_assert_mem_eq(text + n - strlen(last), last, strlen(last));
    mg_text_vocab v;
    ck_assert_int_eq(mg_text_vocab_build(&v, MG_TOKENIZER_CHAR, text, n, path), MG_OK);
    ck_assert_int_eq(v.size, 63);
    mg_text_vocab_free(&v);
    free(text);
    /* no temporary file is left beside it */
    DIR *d = opendir(tmp_path("cache/minigrad"));
    int entries = 0;
    for (struct dirent *e; (e = readdir(d));) entries += e->d_name[0] != '.';
    closedir(d);
    ck_assert_int_eq(entries, 1);
    remove_tmpdir();
}
END_TEST

Suite *textgen_suite(void) {
    Suite *s = suite_create("textgen");
    TCase *tc = tcase_create("data");
    tcase_add_test(tc, utf8_every_code_point_round_trips);
    tcase_add_test(tc, utf8_rejects_malformed);
    tcase_add_test(tc, char_tokenizer_round_trips_non_ascii);
    tcase_add_test(tc, byte_tokenizer_round_trips_any_bytes);
    tcase_add_test(tc, vocab_survives_metadata);
    tcase_add_test(tc, char_corpus_must_be_utf8_text);
    tcase_add_test(tc, encode_names_unknown_characters);
    tcase_add_test(tc, split_is_first_ninety_percent);
    tcase_add_test(tc, split_refuses_text_shorter_than_a_context);
    tcase_add_test(tc, batches_are_windows_of_the_train_split_fixed_by_seed);
    tcase_add_test(tc, validation_windows_are_fixed_and_even);
    tcase_add_test(tc, read_files_concatenates_and_reports_problems);
    tcase_add_test(tc, default_corpus_location_and_missing_program);
    tcase_add_test(tc, default_corpus_from_bible_kjv);
    suite_add_tcase(s, tc);
    return s;
}

MG_TEST_MAIN(textgen_suite)
