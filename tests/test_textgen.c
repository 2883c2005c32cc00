/* The text generator example: tokenizers (round trips with non-ASCII text, strict UTF-8, the
 * checkpoint table), corpus files and the default corpus, the 90/10 split, seeded batches, fixed
 * validation windows; then, once the GPT model is built, the `textgen` program end to end: a
 * short run that learns, exact resume, deterministic sampling, the loss PNG, evaluation, and
 * every bad input giving a clear message and a non-zero exit. */
#include "gpt_opts.h" /* ex_precision_banner */
#include "test_util.h"
#include "textgen.h"
#include "minigrad/testing.h"

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

static void make_tmpdir(void) { tu_make_tmpdir(tmpdir, sizeof tmpdir, "mg_textgen"); }

static void remove_tmpdir(void) { tu_remove_tree(tmpdir); }

static const char *tmp_path(const char *name) { return tu_path_in(tmpdir, name); }

static const char *const MIXED = "Hello, w\xC3\xB6rld \xE2\x80\x94 \xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E "
                                 "\xF0\x9F\x8E\x89\n\ttab \xC3\xA9t\xC3\xA9\r\n";

/* ---- UTF-8 ---- */

START_TEST(utf8_every_code_point_round_trips) {
    for (uint32_t cp = 0; cp <= 0x10FFFF; cp++) {
        char buf[4];
        int n = tg_utf8_encode(cp, buf);
        if (cp >= 0xD800 && cp <= 0xDFFF) {
            ck_assert_int_eq(n, 0);
            continue;
        }
        ck_assert_int_eq(n, cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4);
        uint32_t back = 0xFFFFFFFF;
        ck_assert_int_eq(tg_utf8_decode((const unsigned char *)buf, (size_t)n, &back), n);
        ck_assert_uint_eq(back, cp);
        if (n > 1) ck_assert_int_eq(tg_utf8_decode((const unsigned char *)buf, (size_t)n - 1, &back), 0);
    }
    ck_assert_int_eq(tg_utf8_encode(0x110000, (char[4]){0}), 0);
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
        ck_assert_msg(tg_utf8_decode((const unsigned char *)bad[i], strlen(bad[i]), &cp) == 0, "case %zu", i);
    }
}
END_TEST

/* ---- tokenizers ---- */

START_TEST(char_tokenizer_round_trips_non_ascii) {
    tg_vocab v;
    size_t n = strlen(MIXED);
    ck_assert_int_eq(tg_vocab_build(&v, TG_TOKENIZER_CHAR, MIXED, n, "mixed"), MG_OK);
    /* Distinct code points, counted independently: H e l o , space w ö r d — 日 本 語 🎉 \n \t t a b é \r */
    ck_assert_int_eq(v.size, 22);
    for (int32_t i = 1; i < v.size; i++) ck_assert_uint_lt(v.cps[i - 1], v.cps[i]);
    ck_assert_uint_eq(v.cps[0], '\t');
    ck_assert_uint_eq(v.cps[v.size - 1], 0x1F389);
    ck_assert_int_eq(tg_vocab_id(&v, 0xE9), 15);  /* 'é' after the 15 ASCII characters */
    ck_assert_int_eq(tg_vocab_id(&v, 0x65E5), 18); /* 日 after é ö — */
    ck_assert_int_eq(tg_vocab_id(&v, 'z'), -1);
    int32_t ids[128];
    size_t k;
    ck_assert_int_eq(tg_encode(&v, MIXED, n, ids, &k, "mixed"), MG_OK);
    ck_assert_uint_eq(k, 31); /* characters, not bytes */
    ck_assert_int_eq(ids[8], tg_vocab_id(&v, 0xF6));
    char *back = tg_decode(&v, ids, k);
    ck_assert_str_eq(back, MIXED);
    free(back);
    tg_vocab_free(&v);
}
END_TEST

START_TEST(byte_tokenizer_round_trips_any_bytes) {
    char all[512];
    for (int i = 0; i < 512; i++) all[i] = (char)(i * 7 + 3);
    tg_vocab v;
    ck_assert_int_eq(tg_vocab_build(&v, TG_TOKENIZER_BYTE, all, sizeof all, "bytes"), MG_OK);
    ck_assert_int_eq(v.size, 256);
    int32_t ids[512];
    size_t k;
    ck_assert_int_eq(tg_encode(&v, all, sizeof all, ids, &k, "bytes"), MG_OK);
    ck_assert_uint_eq(k, sizeof all);
    for (int i = 0; i < 512; i++) ck_assert_int_eq(ids[i], (unsigned char)all[i]);
    char *back = tg_decode(&v, ids, k);
    ck_assert_mem_eq(back, all, sizeof all);
    free(back);
    /* Non-ASCII text: one id per byte, and decoding the bytes gives the text back. */
    size_t n = strlen(MIXED);
    ck_assert_int_eq(tg_encode(&v, MIXED, n, ids, &k, "mixed"), MG_OK);
    ck_assert_uint_eq(k, n);
    back = tg_decode(&v, ids, k);
    ck_assert_str_eq(back, MIXED);
    free(back);
    tg_vocab_free(&v);
}
END_TEST

START_TEST(vocab_survives_metadata) {
    /* Control characters and every UTF-8 length go through the metadata string and back. */
    const char *text = "\x01\x1F\n\r\t\"\\ \x7F\xC2\x80\xDF\xBF\xE0\xA0\x80\xEF\xBF\xBD\xF0\x90\x80\x80\xF4\x8F\xBF\xBF";
    tg_vocab a, b;
    ck_assert_int_eq(tg_vocab_build(&a, TG_TOKENIZER_CHAR, text, strlen(text), "t"), MG_OK);
    ck_assert_int_eq(tg_vocab_from_meta(&b, "char", a.chars, a.size, "ckpt"), MG_OK);
    ck_assert_int_eq(b.size, a.size);
    ck_assert_mem_eq(b.cps, a.cps, (size_t)a.size * sizeof *a.cps);
    ck_assert_mem_eq(b.low, a.low, sizeof a.low);
    tg_vocab_free(&b);
    /* tokenizer absent means char (older files) */
    ck_assert_int_eq(tg_vocab_from_meta(&b, NULL, a.chars, a.size, "ckpt"), MG_OK);
    tg_vocab_free(&b);
    ck_assert_int_eq(tg_vocab_from_meta(&b, "byte", NULL, 256, "ckpt"), MG_OK);
    ck_assert_int_eq(b.kind, TG_TOKENIZER_BYTE);
    ck_assert_int_eq(tg_vocab_id(&b, 0xFF), 255);
    tg_vocab_free(&b);

    ck_assert_int_eq(tg_vocab_from_meta(&b, "char", NULL, 5, "m.st"), MG_ERR_FORMAT);
    tu_assert_error_has("m.st: metadata 'chars' is missing");
    ck_assert_int_eq(tg_vocab_from_meta(&b, "char", a.chars, a.size + 1, "m.st"), MG_ERR_FORMAT);
    tu_assert_error_has("'vocab_size' is");
    ck_assert_int_eq(tg_vocab_from_meta(&b, "char", "ba", 2, "m.st"), MG_ERR_FORMAT);
    tu_assert_error_has("ascending");
    ck_assert_int_eq(tg_vocab_from_meta(&b, "char", "aa", 2, "m.st"), MG_ERR_FORMAT);
    tu_assert_error_has("distinct");
    ck_assert_int_eq(tg_vocab_from_meta(&b, "char", "a\xC3", 2, "m.st"), MG_ERR_FORMAT);
    tu_assert_error_has("invalid UTF-8 at byte 1");
    ck_assert_int_eq(tg_vocab_from_meta(&b, "word", "a", 1, "m.st"), MG_ERR_FORMAT);
    tu_assert_error_has("unknown tokenizer 'word'");
    ck_assert_int_eq(tg_vocab_from_meta(&b, "byte", NULL, 65, "m.st"), MG_ERR_FORMAT);
    tu_assert_error_has("256");
    tg_vocab_free(&a);
}
END_TEST

START_TEST(char_corpus_must_be_utf8_text) {
    tg_vocab v;
    const char latin1[] = "caf\xE9 au lait";
    ck_assert_int_eq(tg_vocab_build(&v, TG_TOKENIZER_CHAR, latin1, sizeof latin1 - 1, "menu.txt"), MG_ERR_FORMAT);
    tu_assert_error_has("menu.txt: byte offset 3: invalid UTF-8 (bytes E9 20 61 75)");
    tu_assert_error_has("--tokenizer byte");
    const char nul[] = "ab\0cd";
    ck_assert_int_eq(tg_vocab_build(&v, TG_TOKENIZER_CHAR, nul, 5, "bin"), MG_ERR_FORMAT);
    tu_assert_error_has("bin: byte offset 2: NUL byte");
    const char cut[] = "ok \xE2\x80";
    ck_assert_int_eq(tg_vocab_build(&v, TG_TOKENIZER_CHAR, cut, sizeof cut - 1, "cut"), MG_ERR_FORMAT);
    tu_assert_error_has("cut: byte offset 3");
    ck_assert_int_eq(tg_vocab_build(&v, TG_TOKENIZER_CHAR, "", 0, "none"), MG_ERR_FORMAT);
    tu_assert_error_has("none: the text is empty");
    /* the same bytes are fine for the byte tokenizer */
    ck_assert_int_eq(tg_vocab_build(&v, TG_TOKENIZER_BYTE, latin1, sizeof latin1 - 1, "menu.txt"), MG_OK);
    tg_vocab_free(&v);
    tg_tokenizer_kind k;
    ck_assert_int_eq(tg_tokenizer_parse("word", &k), MG_ERR_INVALID);
    tu_assert_error_has("unknown tokenizer 'word' (known: char, byte)");
}
END_TEST

START_TEST(encode_names_unknown_characters) {
    tg_vocab v;
    ck_assert_int_eq(tg_vocab_build(&v, TG_TOKENIZER_CHAR, "abc \n", 5, "c"), MG_OK);
    int32_t ids[16];
    size_t k;
    ck_assert_int_eq(tg_encode(&v, "ab caf\xC3\xA9", 8, ids, &k, "the prompt"), MG_ERR_INVALID);
    tu_assert_error_has("the prompt: byte offset 5: the character 'f' is not in the vocabulary (5 characters)");
    ck_assert_int_eq(tg_encode(&v, "a\xC3\xA9", 3, ids, &k, "the prompt"), MG_ERR_INVALID);
    tu_assert_error_has("byte offset 1: the character U+00E9 '\xC3\xA9' is not in the vocabulary");
    ck_assert_int_eq(tg_encode(&v, "a\t", 2, ids, &k, "p"), MG_ERR_INVALID);
    tu_assert_error_has("the character '\\t'");
    ck_assert_int_eq(tg_encode(&v, "a\xFF", 2, ids, &k, "p"), MG_ERR_FORMAT);
    tu_assert_error_has("p: byte offset 1: invalid UTF-8");
    tg_vocab_free(&v);
}
END_TEST

/* ---- split, batches, windows ---- */

static void make_counting_data(tg_data *d, size_t n) {
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
    tg_vocab v;
    ck_assert_int_eq(tg_vocab_build(&v, TG_TOKENIZER_CHAR, text, 1000, "t"), MG_OK);
    tg_data a, b;
    ck_assert_int_eq(tg_data_make(&a, &v, text, 1000, 16, "t"), MG_OK);
    ck_assert_int_eq(tg_data_make(&b, &v, text, 999, 16, "t"), MG_OK);
    ck_assert_uint_eq(a.n, 1000);
    ck_assert_uint_eq(a.n_train, 900);
    ck_assert_uint_eq(tg_val_len(&a), 100);
    ck_assert_uint_eq(b.n_train, 899); /* rounded down */
    for (size_t i = 0; i < a.n; i++) ck_assert_int_eq(a.ids[i], tg_vocab_id(&v, (unsigned char)text[i]));
    ck_assert_int_eq(tg_val(&a)[0], tg_vocab_id(&v, (unsigned char)text[900]));
    tg_data_free(&b);
    ck_assert_int_eq(tg_data_make(&b, &v, text, 1000, 16, "t"), MG_OK);
    ck_assert_mem_eq(a.ids, b.ids, a.n * sizeof *a.ids);
    ck_assert_uint_eq(a.n_train, b.n_train);
    tg_data_free(&a);
    tg_data_free(&b);
    tg_vocab_free(&v);
}
END_TEST

START_TEST(split_refuses_text_shorter_than_a_context) {
    tg_vocab v;
    const char *t = "0123456789012345678"; /* 19 chars: a train split of 17 */
    ck_assert_int_eq(tg_vocab_build(&v, TG_TOKENIZER_CHAR, t, strlen(t), "t"), MG_OK);
    tg_data d;
    ck_assert_int_eq(tg_data_make(&d, &v, t, strlen(t), 17, "short.txt"), MG_ERR_FORMAT);
    tu_assert_error_has("short.txt: too short: 19 tokens give a training split (the first 90%) of 17");
    tu_assert_error_has("--block-size (at most 16 here)");
    ck_assert_ptr_null(d.ids);
    ck_assert_int_eq(tg_data_make(&d, &v, t, strlen(t), 16, "short.txt"), MG_OK);
    tg_data_free(&d);
    /* too short for any context length: said so, without suggesting one */
    ck_assert_int_eq(tg_data_make(&d, &v, t, 1, 1, "one.txt"), MG_ERR_FORMAT);
    tu_assert_error_has("one.txt: the text is too short: 1 byte (1 token); training needs at least 3 tokens");
    ck_assert_msg(!strstr(mg_last_error(), "--block-size"), "%s", mg_last_error());
    ck_assert_ptr_null(d.ids);
    ck_assert_int_eq(tg_data_make(&d, &v, t, 2, 8, "two.txt"), MG_ERR_FORMAT);
    tu_assert_error_has("two.txt: the text is too short: 2 bytes (2 tokens)");
    ck_assert_int_eq(tg_data_make(&d, &v, t, 3, 1, "three.txt"), MG_OK);
    tg_data_free(&d);
    ck_assert_int_eq(tg_data_make(&d, &v, t, 3, 2, "three.txt"), MG_ERR_FORMAT);
    tu_assert_error_has("--block-size (at most 1 here)");
    ck_assert_int_eq(tg_data_make(&d, &v, "0x", 2, 1, "odd.txt"), MG_ERR_INVALID);
    tu_assert_error_has("odd.txt: byte offset 1: the character 'x'");
    tg_vocab_free(&v);
}
END_TEST

START_TEST(batches_are_windows_of_the_train_split_fixed_by_seed) {
    tg_data d;
    make_counting_data(&d, 1000); /* train 0..899 */
    enum { B = 8, T = 16 };
    int32_t x1[B * T], y1[B * T], x2[B * T], y2[B * T];
    mg_rng r1 = mg_rng_make(42), r2 = mg_rng_make(42), r3 = mg_rng_make(43);
    int32_t lo = 1 << 30, hi = -1;
    bool differs = false;
    for (int step = 0; step < 400; step++) {
        tg_batch(&d, B, T, &r1, x1, y1);
        tg_batch(&d, B, T, &r2, x2, y2);
        ck_assert_mem_eq(x1, x2, sizeof x1);
        ck_assert_mem_eq(y1, y2, sizeof y1);
        tg_batch(&d, B, T, &r3, x2, y2);
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
    tg_batch(&d, B, T, &a, x1, y1);
    for (int i = 0; i < B; i++) mg_rng_next(&b);
    ck_assert_uint_eq(a.s, b.s);
    tg_data_free(&d);
}
END_TEST

START_TEST(validation_windows_are_fixed_and_even) {
    tg_windows w;
    ck_assert_int_eq(tg_val_windows(&w, 1000, 16, 5), MG_OK);
    ck_assert_uint_eq(w.count, 5);
    ck_assert_int_eq(w.len, 16);
    size_t want[5] = {0, 245, 491, 737, 983}; /* span 983 = 1000 - 1 - 16 */
    for (int i = 0; i < 5; i++) ck_assert_uint_eq(w.start[i], want[i]);
    tg_windows_free(&w);
    /* a validation split shorter than a context gets one shorter window */
    ck_assert_int_eq(tg_val_windows(&w, 10, 16, 4), MG_OK);
    ck_assert_uint_eq(w.count, 1);
    ck_assert_int_eq(w.len, 9);
    ck_assert_uint_eq(w.start[0], 0);
    tg_windows_free(&w);
    /* no more windows than distinct starts */
    ck_assert_int_eq(tg_val_windows(&w, 20, 16, 64), MG_OK);
    ck_assert_uint_eq(w.count, 4);
    for (int i = 0; i < 4; i++) ck_assert_uint_eq(w.start[i], (size_t)i);
    tg_windows_free(&w);
    ck_assert_int_eq(tg_val_windows(&w, 1, 16, 4), MG_OK);
    ck_assert_uint_eq(w.count, 0);
    tg_windows_free(&w);
    /* windows covering a split: each target exactly once */
    for (size_t n = 2; n < 80; n++) {
        int64_t last;
        ck_assert_int_eq(tg_cover_windows(&w, n, 8, &last), MG_OK);
        int hits[80] = {0};
        for (size_t i = 0; i < w.count; i++) {
            int64_t len = i + 1 == w.count ? last : w.len;
            ck_assert_int_ge(len, 1);
            for (int64_t t = 0; t < len; t++) hits[w.start[i] + (size_t)t + 1]++;
        }
        for (size_t i = 1; i < n; i++) ck_assert_int_eq(hits[i], 1);
        ck_assert_int_eq(hits[0], 0);
        tg_windows_free(&w);
    }
}
END_TEST

/* ---- corpus files ---- */

START_TEST(read_files_concatenates_and_reports_problems) {
    make_tmpdir();
    tu_write_text(tmp_path("a.txt"), "first");
    tu_write_text(tmp_path("b.txt"), "second\n");
    tu_write_text(tmp_path("c.txt"), "third");
    tu_write_text(tmp_path("empty.txt"), "");
    const char *p3[] = {tmp_path("a.txt"), tmp_path("b.txt"), tmp_path("c.txt")};
    char *text;
    size_t n;
    ck_assert_int_eq(tg_read_files(p3, 3, &text, &n), MG_OK);
    ck_assert_str_eq(text, "first\nsecond\nthird");
    ck_assert_uint_eq(n, 18);
    free(text);
    const char *missing[] = {tmp_path("nope.txt")};
    ck_assert_int_eq(tg_read_files(missing, 1, &text, &n), MG_ERR_IO);
    tu_assert_error_has("nope.txt: cannot open: No such file or directory");
    ck_assert_ptr_null(text);
    const char *empty[] = {tmp_path("a.txt"), tmp_path("empty.txt")};
    ck_assert_int_eq(tg_read_files(empty, 2, &text, &n), MG_ERR_FORMAT);
    tu_assert_error_has("empty.txt: the file is empty");
    const char *dir[] = {tmpdir};
    ck_assert_int_eq(tg_read_files(dir, 1, &text, &n), MG_ERR_IO);
    tu_assert_error_has("is a directory");
    /* a file larger than the first buffer */
    size_t big = (3u << 20) + 17;
    char *data = malloc(big);
    for (size_t i = 0; i < big; i++) data[i] = (char)('a' + i % 23);
    tu_write_bytes(tmp_path("big.txt"), data, big);
    const char *pb[] = {tmp_path("big.txt")};
    ck_assert_int_eq(tg_read_files(pb, 1, &text, &n), MG_OK);
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
    ck_assert_str_eq(tg_kjv_path(buf, sizeof buf), "/x/cache/minigrad/kjv.txt");
    unsetenv("XDG_CACHE_HOME");
    setenv("HOME", "/home/u", 1);
    ck_assert_str_eq(tg_kjv_path(buf, sizeof buf), "/home/u/.cache/minigrad/kjv.txt");
    make_tmpdir();
    setenv("PATH", tmpdir, 1); /* no `bible` here */
    ck_assert_int_eq(tg_kjv_make(tmp_path("sub/kjv.txt")), MG_ERR_NOT_FOUND);
    tu_assert_error_has("bible-kjv");
    tu_assert_error_has("--data FILE");
    /* an existing file is used as is, whatever is installed */
    tu_write_text(tmp_path("kjv.txt"), "In the beginning\n");
    ck_assert_int_eq(tg_kjv_make(tmp_path("kjv.txt")), MG_OK);
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
    ck_assert_int_eq(tg_kjv_make(path), MG_OK);
    char *text;
    size_t n;
    ck_assert_int_eq(tg_read_files(&path, 1, &text, &n), MG_OK);
    ck_assert_uint_eq(n, 4137850);
    const char *first = "In the beginning God created the heaven and the earth.\nAnd the earth was without form";
    ck_assert_mem_eq(text, first, strlen(first));
    const char *last = "The grace of our Lord Jesus Christ be with you all. Amen.\n";
    ck_assert_mem_eq(text + n - strlen(last), last, strlen(last));
    tg_vocab v;
    ck_assert_int_eq(tg_vocab_build(&v, TG_TOKENIZER_CHAR, text, n, path), MG_OK);
    ck_assert_int_eq(v.size, 63);
    tg_vocab_free(&v);
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

/* Starts capturing what is written to fd (1 or 2) into a temporary file; capture_end puts fd back
 * and reads what came into out. */
typedef struct {
    int fd, saved;
    FILE *tmp;
} capture;

static capture capture_begin(int fd) {
    fflush(fd == 1 ? stdout : stderr);
    capture c = {fd, dup(fd), tmpfile()};
    ck_assert_ptr_nonnull(c.tmp);
    ck_assert_int_ge(c.saved, 0);
    ck_assert_int_ge(dup2(fileno(c.tmp), fd), 0);
    return c;
}

static void capture_end(capture *c, char *out, size_t cap) {
    fflush(c->fd == 1 ? stdout : stderr);
    dup2(c->saved, c->fd);
    close(c->saved);
    rewind(c->tmp);
    const size_t n = fread(out, 1, cap - 1, c->tmp);
    out[n] = 0;
    fclose(c->tmp);
}

/* The start line names the bf16 unit in use; on the software emulation it warns, once, on stderr. */
static const char *banner_with_stderr(bool bf16, char *err, size_t cap) {
    capture c = capture_begin(2);
    const char *b = ex_precision_banner("prog", bf16);
    capture_end(&c, err, cap);
    return b;
}

/* The option list --help prints (stdout captured). */
static void usage_text(const ex_opt *opts, int n, char *out, size_t cap) {
    capture c = capture_begin(1);
    ex_print_usage("prog", "[options]", opts, n);
    capture_end(&c, out, cap);
}

START_TEST(usage_shows_string_defaults_readably) {
    const char *empty = "", *nl = "\n", *mixed = "a\tb\x01", *none = NULL;
    char long_def[400];
    memset(long_def, 'x', sizeof long_def - 1);
    long_def[sizeof long_def - 1] = 0;
    const char *lng = long_def;
    const ex_opt opts[] = {
        EX_STR_OPT("empty", &empty, "E"),
        EX_STR_OPT("nl", &nl, "N"),
        EX_STR_OPT("mixed", &mixed, "M"),
        EX_STR_OPT("none", &none, "Z"),
        EX_STR_OPT("long", &lng, "L"),
    };
    char out[2048];
    usage_text(opts, 5, out, sizeof out);
    tu_assert_has("usage", out, "usage: prog [options]\n");
    tu_assert_has("usage", out, " E\n"); /* nothing after an empty default */
    tu_assert_has("usage", out, " N (default \\n)\n");
    tu_assert_has("usage", out, " M (default a\\tb\\x01)\n");
    tu_assert_has("usage", out, " Z\n");
    tu_assert_has("usage", out, "xxx...)\n"); /* cut, and said to be */
    /* an integer's default is shown where it lies in the range; outside it (-1: "not given") the
     * help text says what it means */
    int64_t given = 8, unset = -1;
    const ex_opt ints[] = {
        EX_INT_OPT("given", &given, 0, 100, "G"),
        EX_INT_OPT("unset", &unset, 1, 100, "U (default: the run's)"),
    };
    usage_text(ints, 2, out, sizeof out);
    tu_assert_has("usage", out, " G (0..100, default 8)\n");
    tu_assert_has("usage", out, " U (default: the run's) (1..100)\n");
}
END_TEST

START_TEST(precision_banner_names_the_bf16_unit) {
    char err[512];
    ck_assert_str_eq(banner_with_stderr(false, err, sizeof err), "");
    ck_assert_str_eq(err, "");
    const mg_bf16_path detected = mg_bf16_path_active();
    if (detected != MG_BF16_EMULATED) { /* the CPU's own unit, named, without a warning */
        const char *b = banner_with_stderr(true, err, sizeof err);
        ck_assert_str_eq(b, detected == MG_BF16_AMX ? ", bf16 mixed precision on AMX tiles"
                                                    : ", bf16 mixed precision on AVX512-BF16");
        ck_assert_str_eq(err, "");
    }
    ck_assert(mg_bf16_path_force(MG_BF16_EMULATED));
    ck_assert_str_eq(banner_with_stderr(true, err, sizeof err), ", bf16 mixed precision (emulated)");
    ck_assert_msg(strstr(err, "prog: the bf16 products run in a software emulation, slower than --precision fp32: ") &&
                      strstr(err, detected == MG_BF16_EMULATED ? "this CPU has no bf16 unit" : "switched off"),
                  "%s", err);
    ck_assert_str_eq(banner_with_stderr(true, err, sizeof err), ", bf16 mixed precision (emulated)");
    ck_assert_str_eq(err, ""); /* once per process */
    ck_assert(mg_bf16_path_force(detected));
}
END_TEST

/* ======================================================================================
 * The textgen program, end to end (a subprocess per command) and the evaluator in-process
 * ====================================================================================== */
#include "minigrad/op.h"
#include "minigrad/safetensors.h"

#include <stb_image.h>

static tu_program textgen = {
    .name = "textgen", .rel = "examples/textgen/textgen", .max_status = 128, .interrupt_ok = true};

/* Runs `textgen ARGS` (a shell word list) in tmpdir with stdout and stderr captured into
 * textgen.out and textgen.err. Returns the exit status; a crash (signal) fails the test. */
static int run_env(const char *env, const char *args) { return tu_run_in(&textgen, tmpdir, env, args); }
static int run(const char *args) { return run_env("", args); }

/* A tiny corpus a tiny model learns in a few dozen steps; non-ASCII on purpose. */
#define TINY_LINE "the quick brown fox jumps over the lazy d\xC3\xB6g \xE2\x80\x94 caf\xC3\xA9\n"
#define TINY_MODEL "--block-size 16 --n-embd 32 --n-layer 1 --n-head 2 --batch 8 --lr 1e-2 --warmup 5 --threads 1"

static void write_tiny(const char *name, int lines) {
    FILE *f = fopen(tmp_path(name), "wb");
    ck_assert_ptr_nonnull(f);
    for (int i = 0; i < lines; i++) fputs(TINY_LINE, f);
    ck_assert_int_eq(fclose(f), 0);
}

static void setup_run(void) {
    tu_find_program(&textgen);
    make_tmpdir();
    write_tiny("tiny.txt", 60);
}

START_TEST(training_learns_a_tiny_corpus_and_plots) {
    setup_run();
    ck_assert_int_eq(run("train --data tiny.txt --out run " TINY_MODEL " --steps 80 --eval-every 20 "
                         "--sample-tokens 40 --prompt 'the '"), 0);
    tu_run_log lg;
    tu_read_log(tmp_path("run/log.jsonl"), &lg, "\"lr\": ");
    ck_assert_int_eq(lg.n, 80);
    for (int i = 0; i < lg.n; i++) ck_assert_int_eq(lg.step[i], i + 1);
    /* 31 characters: an untrained model starts near ln 31 = 3.43 */
    ck_assert_double_gt(lg.loss[0], 3.0);
    ck_assert_double_lt(lg.loss[0], 3.8);
    /* the stated bound: after 80 steps both losses are below 0.6 nats (seeds 1-5 give 0.17-0.30) */
    ck_assert_double_lt(lg.loss[lg.n - 1], 0.6);
    ck_assert_int_eq(lg.nv, 4);
    ck_assert_int_eq(lg.val_step[3], 80);
    ck_assert_double_lt(lg.val[3], 0.6);
    ck_assert_double_lt(lg.val[3], lg.val[0]);
    tu_assert_stdout_has(&textgen, "vocabulary 31 (char)");
    tu_assert_stdout_has(&textgen, "tokens/s");
    tu_assert_stdout_has(&textgen, "ms/step");
    tu_assert_stdout_has(&textgen, "peak RSS");
    tu_assert_stdout_has(&textgen, "a sample");
    tu_assert_stdout_has(&textgen, "run/model.safetensors");
    tu_assert_stdout_has(&textgen, "run/loss.png");
    /* the PNG decodes to the chart's size and holds both curves' colours */
    int w, h, ch;
    unsigned char *px = stbi_load(tmp_path("run/loss.png"), &w, &h, &ch, 3);
    ck_assert_ptr_nonnull(px);
    ck_assert_int_eq(w, 800);
    ck_assert_int_eq(h, 500);
    int coloured = 0;
    for (int i = 0; i < w * h; i++) {
        int r = px[3 * i], g = px[3 * i + 1], b = px[3 * i + 2];
        coloured += abs(r - g) > 60 || abs(g - b) > 60 || abs(r - b) > 60;
    }
    ck_assert_int_gt(coloured, 500);
    stbi_image_free(px);
    /* the checkpoint carries the vocabulary and the run's settings */
    mg_st_file *f;
    ck_assert_int_eq(mg_safetensors_open(tmp_path("run/model.safetensors"), &f), MG_OK);
    ck_assert_str_eq(mg_st_meta_get(f, "format"), "minigrad-gpt");
    ck_assert_str_eq(mg_st_meta_get(f, "tokenizer"), "char");
    ck_assert_str_eq(mg_st_meta_get(f, "chars"), "\n abcdefghijklmnopqrstuvwxyz\xC3\xA9\xC3\xB6\xE2\x80\x94");
    ck_assert_int_eq(strlen(mg_st_meta_get(f, "chars")), 28 + 2 + 2 + 3);
    ck_assert_str_eq(mg_st_meta_get(f, "vocab_size"), "31");
    ck_assert_str_eq(mg_st_meta_get(f, "textgen.steps"), "80");
    ck_assert_ptr_nonnull(strstr(mg_st_meta_get(f, "textgen.data"), "/tiny.txt"));
    mg_st_close(f);
    remove_tmpdir();
}
END_TEST

START_TEST(resume_continues_exactly) {
    setup_run();
    /* dropout too, so its generator must be restored as well as the data's */
    const char *common = "--data tiny.txt " TINY_MODEL " --steps 24 --eval-every 5 --ckpt-every 0 --dropout 0.1 "
                         "--sample-tokens 0";
    char args[1024];
    snprintf(args, sizeof args, "train --out straight %s", common);
    ck_assert_int_eq(run(args), 0);
    snprintf(args, sizeof args, "train --out pieces %s --stop-after 12", common);
    ck_assert_int_eq(run(args), 0);
    tu_assert_stdout_has(&textgen, "stopped after 12 steps");
    tu_assert_stdout_has(&textgen, "--resume");
    ck_assert_int_eq(run("train --out pieces --resume --sample-tokens 0 --threads 1"), 0);
    tu_assert_stdout_has(&textgen, "resumed at step 12");
    static const char *const wkeys[] = {"tokenizer", "chars", "vocab_size", "textgen.steps", "textgen.data", NULL};
    tu_assert_resumed_exactly(tmpdir, "straight", "pieces", wkeys, 24, 12, "\"lr\": ");
    /* a finished run has nothing left to do */
    ck_assert_int_eq(run("train --out pieces --resume --sample-tokens 0"), 0);
    /* a resume that contradicts the checkpoint's model says which key */
    ck_assert_int_eq(run("train --out pieces --resume --steps 30 --n-embd 64 --sample-tokens 0"), 1);
    tu_assert_stderr_has(&textgen, "n_embd");
    remove_tmpdir();
}
END_TEST

START_TEST(resume_keeps_the_runs_precision) {
    setup_run();
    const char *common = "--data tiny.txt " TINY_MODEL " --steps 16 --eval-every 4 --ckpt-every 0 "
                         "--precision bf16 --sample-tokens 0 --threads 1";
    char args[1024];
    snprintf(args, sizeof args, "train --out straight %s", common);
    ck_assert_int_eq(run(args), 0);
    tu_assert_stdout_has(&textgen, "bf16 mixed precision");
    snprintf(args, sizeof args, "train --out pieces %s --stop-after 8", common);
    ck_assert_int_eq(run(args), 0);
    /* the resume names no precision: the run goes on in bf16, exactly */
    ck_assert_int_eq(run("train --out pieces --resume --sample-tokens 0 --threads 1"), 0);
    tu_assert_stdout_has(&textgen, "bf16 mixed precision");
    static const char *const wkeys[] = {"tokenizer", "chars", "vocab_size", "textgen.steps", "textgen.precision", NULL};
    tu_assert_resumed_exactly(tmpdir, "straight", "pieces", wkeys, 16, 8, "\"lr\": ");
    /* a precision the program does not know, in the metadata, is named */
    tu_set_meta(tmp_path("pieces/model.safetensors"), "textgen.precision", "fp8");
    ck_assert_int_eq(run("train --out pieces --resume --steps 20 --sample-tokens 0"), 1);
    tu_assert_stderr_has(&textgen, "metadata 'textgen.precision' is 'fp8': expected fp32 or bf16");
    remove_tmpdir();
}
END_TEST

/* MINIGRAD_BF16_PATH picks the bf16 path by name (the emulation works on every CPU); a name that is
 * no path is a warning listing the names, and the run goes on on the detected path. */
START_TEST(bf16_path_from_the_environment) {
    setup_run();
    const char *args = "train --data tiny.txt --out env " TINY_MODEL " --steps 2 --precision bf16 "
                       "--sample-tokens 0 --force";
    ck_assert_int_eq(run_env("MINIGRAD_BF16_PATH=emulated", args), 0);
    tu_assert_stdout_has(&textgen, "bf16 mixed precision (emulated)");
    tu_assert_stderr_has(&textgen, "slower than --precision fp32: MINIGRAD_BF16_PATH=emulated asks for it");
    ck_assert_int_eq(run_env("MINIGRAD_BF16_PATH=fp8", args), 0);
    char want[200];
    snprintf(want, sizeof want, "warning: MINIGRAD_BF16_PATH=fp8: not a path (emulated, avx512bf16, amx); using %s",
             mg_bf16_path_name(mg_bf16_path_detected()));
    tu_assert_stderr_has(&textgen, want);
    const char *first = strstr(textgen.err, "MINIGRAD_BF16_PATH=fp8");
    ck_assert_msg(first && !strstr(first + 1, "MINIGRAD_BF16_PATH=fp8"), "not said once: %s", textgen.err);
    tu_assert_stdout_has(&textgen, "bf16 mixed precision");
    remove_tmpdir();
}
END_TEST

START_TEST(ctrl_c_saves_a_resumable_checkpoint) {
    setup_run();
    write_tiny("big.txt", 2000);
    /* interrupted once it is training: the log has a few steps */
    int st = tu_run_interrupted(&textgen, tmpdir,
                                (char *[]){"textgen", "train", "--data", "big.txt", "--out", "int", "--block-size", "16",
                                           "--n-embd", "32", "--n-layer", "1", "--n-head", "2", "--threads", "1",
                                           "--steps", "1000000", "--ckpt-every", "0", "--eval-every", "0", NULL},
                                "int/log.jsonl", 300);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 130, "status %d; stdout %.1000s; stderr %.1000s", st, textgen.out, textgen.err);
    tu_assert_stdout_has(&textgen, "interrupted (Ctrl-C): saved step");
    tu_run_log lg;
    tu_read_log(tmp_path("int/log.jsonl"), &lg, "\"lr\": ");
    ck_assert_int_gt(lg.n, 0);
    /* the checkpoint holds the last logged step, and a resume continues after it */
    mg_st_file *f;
    ck_assert_int_eq(mg_safetensors_open(tmp_path("int/model.state.safetensors"), &f), MG_OK);
    mg_st_close(f);
    char args[256];
    snprintf(args, sizeof args, "train --out int --resume --steps %d --sample-tokens 0", lg.n + 2);
    ck_assert_int_eq(run(args), 0);
    char want[64];
    snprintf(want, sizeof want, "resumed at step %d", lg.n);
    tu_assert_stdout_has(&textgen, want);
    tu_read_log(tmp_path("int/log.jsonl"), &lg, "\"lr\": ");
    ck_assert_int_eq(lg.step[lg.n - 1], lg.n);
    remove_tmpdir();
}
END_TEST

/* A full disk under what textgen writes: the log (a link to /dev/full in the out folder), the loss
 * curve, the text on stdout. Each fails the command with a message naming the file and the reason. */
START_TEST(outputs_on_a_full_disk_fail_by_name) {
    setup_run();
    ck_assert_int_eq(mkdir(tmp_path("full"), 0755), 0);
    ck_assert_int_eq(symlink("/dev/full", tmp_path("full/log.jsonl")), 0);
    ck_assert_int_eq(run("train --data tiny.txt --out full " TINY_MODEL " --steps 10 --sample-tokens 0"), 1);
    tu_assert_stderr_has(&textgen, "step 1: full/log.jsonl: cannot write the log file: No space left on device");
    tu_assert_dev_full_intact();

    ck_assert_int_eq(mkdir(tmp_path("plot"), 0755), 0);
    ck_assert_int_eq(symlink("/dev/full", tmp_path("plot/loss.png")), 0);
    ck_assert_int_eq(run("train --data tiny.txt --out plot " TINY_MODEL " --steps 6 --sample-tokens 0"), 1);
    tu_assert_stderr_has(&textgen, "loss plot not written: plot/loss.png: write failed: No space left on device");
    tu_run_log lg;
    tu_read_log(tmp_path("plot/log.jsonl"), &lg, "\"lr\": ");
    ck_assert_int_eq(lg.n, 6); /* the run itself is whole and saved */
    ck_assert_int_eq(access(tmp_path("plot/model.safetensors"), F_OK), 0);
    struct stat sb;
    ck_assert_int_eq(lstat(tmp_path("plot/loss.png"), &sb), 0);
    ck_assert(S_ISLNK(sb.st_mode));
    tu_assert_dev_full_intact();

    ck_assert_int_eq(tu_run_stdout_to(&textgen, tmpdir, "sample --ckpt plot/model.safetensors --tokens 20", "/dev/full"), 1);
    tu_assert_stderr_has(&textgen, "textgen: standard output: write failed: No space left on device");
    ck_assert_int_eq(tu_run_stdout_to(&textgen, tmpdir, "eval --ckpt plot/model.safetensors --data tiny.txt", "/dev/full"), 1);
    tu_assert_stderr_has(&textgen, "textgen: standard output: write failed: No space left on device");
    remove_tmpdir();
}
END_TEST

START_TEST(sampling_is_deterministic_for_a_seed) {
    setup_run();
    ck_assert_int_eq(run("train --data tiny.txt --out run " TINY_MODEL " --steps 40 --sample-tokens 0"), 0);
    const char *args = "sample --ckpt run/model.safetensors --prompt 'the qu' --tokens 60 --seed 7 --threads 1";
    ck_assert_int_eq(run(args), 0);
    static char first[sizeof textgen.out];
    snprintf(first, sizeof first, "%.1500s", textgen.out);
    ck_assert_msg(strncmp(first, "the qu", 6) == 0, "%s", first);
    tu_assert_stderr_has(&textgen, "60 tokens in");
    tu_assert_stderr_has(&textgen, "tokens/s (seed 7");
    /* 60 characters after the prompt, then a newline */
    size_t chars = 0;
    for (const char *p = first; *p; p++) chars += ((unsigned char)*p & 0xC0) != 0x80;
    ck_assert_uint_eq(chars, 6 + 60 + 1);
    ck_assert_int_eq(run(args), 0);
    ck_assert_str_eq(textgen.out, first);
    /* whatever the thread count */
    ck_assert_int_eq(run("sample --ckpt run/model.safetensors --prompt 'the qu' --tokens 60 --seed 7 --threads 2"), 0);
    ck_assert_str_eq(textgen.out, first);
    ck_assert_int_eq(run("sample --ckpt run/model.safetensors --prompt 'the qu' --tokens 60 --seed 8 --threads 2"), 0);
    ck_assert_str_ne(textgen.out, first);
    /* greedy decoding does not depend on the seed; top-k 1 is greedy too */
    ck_assert_int_eq(run("sample --ckpt run/model.safetensors --prompt 'the' --tokens 30 --temperature 0 --seed 1"), 0);
    snprintf(first, sizeof first, "%.1500s", textgen.out);
    ck_assert_int_eq(run("sample --ckpt run/model.safetensors --prompt 'the' --tokens 30 --top-k 1 --seed 2"), 0);
    ck_assert_str_eq(textgen.out, first);
    /* past the context length (16) the learned table is cropped, and generation goes on */
    ck_assert_int_eq(run("sample --ckpt run/model.safetensors --tokens 100 --seed 3"), 0);
    remove_tmpdir();
}
END_TEST

/* The loss of every validation target, one window at a time, the plain way. */
static double reference_val_loss(const char *ckpt, const char *text_path) {
    mg_gpt *g;
    tg_vocab v;
    ck_assert_int_eq(tg_load(ckpt, &g, &v, NULL), MG_OK);
    char *text;
    size_t n;
    ck_assert_int_eq(tg_read_files(&text_path, 1, &text, &n), MG_OK);
    tg_data d;
    ck_assert_int_eq(tg_data_make(&d, &v, text, n, 16, "t"), MG_OK);
    const int32_t *val = tg_val(&d);
    size_t nv = tg_val_len(&d);
    mg_ctx *ctx = mg_ctx_new(0);
    double sum = 0;
    for (size_t s = 0; s + 1 < nv; s += 16) {
        int64_t len = nv - 1 - s < 16 ? (int64_t)(nv - 1 - s) : 16;
        mg_ctx_reset(ctx);
        mg_tensor *x = mg_tensor_wrap(ctx, MG_I32, 2, (int64_t[]){1, len}, (void *)(val + s));
        mg_tensor *y = mg_tensor_wrap(ctx, MG_I32, 2, (int64_t[]){1, len}, (void *)(val + s + 1));
        sum += (double)mg_gpt_loss(g, ctx, x, y, NULL)->data[0] * (double)len;
    }
    mg_ctx_free(ctx);
    double r = sum / (double)(nv - 1);
    tg_data_free(&d);
    free(text);
    tg_vocab_free(&v);
    mg_gpt_free(g);
    return r;
}

/* `textgen plugins`: every scheme --pos accepts, with where it comes from (the build tree's alibi
 * plugin is found without any setting), and the folders searched. */
START_TEST(plugins_lists_schemes_and_their_origin) {
    setup_run();
    ck_assert_int_eq(run("plugins --schemes"), 0);
    tu_assert_stdout_has(&textgen, "positional schemes (scheme, layer, origin):");
    tu_assert_stdout_has(&textgen, "built-in");
    tu_assert_stdout_has(&textgen, "libalibi.so");
    tu_assert_stdout_has(&textgen, "plugin directories searched, in order:");
    ck_assert_int_eq(run("plugins --bogus"), 2);
    remove_tmpdir();
}
END_TEST

START_TEST(eval_reports_nats_and_bits_per_character) {
    setup_run();
    write_tiny("odd.txt", 7); /* a validation split that does not fill whole windows */
    ck_assert_int_eq(run("train --data tiny.txt --out run " TINY_MODEL " --steps 30 --sample-tokens 0"), 0);
    ck_assert_int_eq(run("eval --ckpt run/model.safetensors --data odd.txt --batch 3 --threads 1"), 0);
    const char *vl = strstr(textgen.out, "\nval_loss "), *bpc = strstr(textgen.out, "\nbpc ");
    ck_assert_msg(vl && bpc, "%.1500s", textgen.out);
    double loss = strtod(vl + 10, NULL), bits = strtod(bpc + 5, NULL);
    ck_assert_double_eq_tol(bits, loss / log(2.0), 1e-5);
    double ref = reference_val_loss(tmp_path("run/model.safetensors"), tmp_path("odd.txt"));
    ck_assert_double_eq_tol(loss, ref, 2e-5);
    /* 7 lines of 51 characters: a validation split of 357 - 321 = 36 characters, 35 targets */
    tu_assert_stdout_has(&textgen, "tokens 35\n");
    tu_assert_stdout_has(&textgen, "characters 35\n");
    /* without --data: the run's own corpus */
    ck_assert_int_eq(run("eval --ckpt run/model.safetensors"), 0);
    tu_assert_stdout_has(&textgen, "data tiny.txt\nsplit val\n");
    /* another split: the loss is named after it; the header comes first, then progress lines
     * (not a terminal: plain ones at each tenth), then the numbers */
    ck_assert_int_eq(run("eval --ckpt run/model.safetensors --split train --batch 1 --threads 1"), 0);
    const char *tl = strstr(textgen.out, "\ntrain_loss "), *vl2 = strstr(textgen.out, "\nval_loss ");
    ck_assert_msg(tl && vl2 && tl < vl2, "%.1500s", textgen.out); /* val_loss stays for scripts */
    ck_assert_double_eq(strtod(tl + 12, NULL), strtod(vl2 + 10, NULL));
    const char *head = strstr(textgen.out, "data tiny.txt\nsplit train\n"),
               *line = strstr(textgen.out, "textgen eval: "), *toks = strstr(textgen.out, "\ntokens ");
    ck_assert_msg(head && line && toks && head < line && line < toks, "%.1500s", textgen.out);
    tu_assert_stdout_has(&textgen, " windows (10%), loss so far ");
    remove_tmpdir();
}
END_TEST

START_TEST(byte_tokenizer_end_to_end) {
    setup_run();
    ck_assert_int_eq(run("train --data tiny.txt --tokenizer byte --out run " TINY_MODEL " --steps 30 --sample-tokens 20"),
                     0);
    tu_assert_stdout_has(&textgen, "vocabulary 256 (byte)");
    ck_assert_int_eq(run("eval --ckpt run/model.safetensors --threads 1"), 0);
    /* bytes and characters differ for non-ASCII text: loss per character is the larger */
    const char *tok = strstr(textgen.out, "\ntokens "), *chr = strstr(textgen.out, "\ncharacters ");
    const char *nb = strstr(textgen.out, "nats_per_byte "), *vl = strstr(textgen.out, "\nval_loss ");
    ck_assert_msg(tok && chr && nb && vl, "%.1500s", textgen.out);
    ck_assert_int_gt(strtol(tok + 8, NULL, 10), strtol(chr + 12, NULL, 10));
    ck_assert_double_gt(strtod(vl + 10, NULL), strtod(nb + 14, NULL));
    /* any character can be prompted, since every byte has an id */
    ck_assert_int_eq(run("sample --ckpt run/model.safetensors --prompt '\xE6\x97\xA5 ' --tokens 5 --seed 1"), 0);
    remove_tmpdir();
}
END_TEST

START_TEST(bad_inputs_give_clear_errors) {
    setup_run();
    tu_write_text(tmp_path("empty.txt"), "");
    tu_write_text(tmp_path("short.txt"), "just a few words\n");
    tu_write_text(tmp_path("upper.txt"), "THE END\n");
    tu_write_text(tmp_path("two.txt"), "ab");
    tu_write_text(tmp_path("latin1.txt"), "caf\xE9 au lait, caf\xE9 au lait, caf\xE9 au lait, caf\xE9 au lait\n");
    static const tu_bad_run cases[] = {
        {"train --data missing.txt --out r", 1, "missing.txt: cannot open: No such file or directory"},
        {"train --data empty.txt --out r", 1, "empty.txt: the file is empty"},
        {"train --data short.txt --out r", 1, "short.txt: too short: 17 tokens give a training split"},
        {"train --data latin1.txt --out r " TINY_MODEL, 1, "latin1.txt: byte offset 3: invalid UTF-8 (bytes E9 20 61 75)"},
        {"train --data tiny.txt --out r --nope", 2, "unknown option '--nope'"},
        {"train --data tiny.txt --out r --steps many", 2, "--steps expects an integer in 1..1000000000, got 'many'"},
        {"train --data tiny.txt --out r --steps 0", 2, "--steps: 0 is out of range 1..1000000000"},
        {"train --data tiny.txt --out r --lr -1", 2, "--lr: -1 is out of range 0..10"},
        {"train --data tiny.txt --out r --lr 0", 2, "--lr must be positive"},
        {"train --data tiny.txt --out r --dropout nan", 2, "--dropout expects a number in 0..0.99, got 'nan'"},
        {"train --data tiny.txt --out r --tokenizer words", 2, "unknown tokenizer 'words' (known: char, byte)"},
        {"train --data tiny.txt --out r " TINY_MODEL " --n-head 3", 2, "textgen train: --n-embd 32 is not a multiple of --n-head 3\n"},
        {"train --data tiny.txt --out r " TINY_MODEL " --pos nosuchscheme", 1, "nosuchscheme"},
        {"train --data tiny.txt --out r " TINY_MODEL " --prompt '\xC3\xA0'", 1,
         "--prompt: byte offset 0: the character U+00E0 '\xC3\xA0' is not in the vocabulary (31 characters)"},
        {"train --out nothing --resume", 1, "nothing holds no checkpoint"},
        {"frobnicate", 2, "unknown command 'frobnicate'"},
        {"", 2, "usage: textgen COMMAND"},
        {"sample --ckpt missing.safetensors", 1, "missing.safetensors"},
        {"sample --ckpt tiny.txt", 1, "tiny.txt"},
        {"sample --ckpt run/model.safetensors --top-p 2", 2, "--top-p: 2 is out of range 0..1"},
        {"sample --ckpt run/model.safetensors --tokens -5", 2, "--tokens: -5 is out of range 0..16777216"},
        {"sample --ckpt run/model.safetensors --prompt 'the \xC3\xA0'", 1,
         "the prompt: byte offset 4: the character U+00E0 '\xC3\xA0' is not in the vocabulary (31 characters)"},
        {"sample --ckpt run/model.safetensors --prompt 'x\xFFy'", 1, "the prompt: byte offset 1: invalid UTF-8"},
        {"eval --ckpt run/model.safetensors --split test", 2, "--split must be val, train or all, got 'test'"},
        {"eval --ckpt run/model.safetensors --data empty.txt", 1, "empty.txt: the file is empty"},
        {"eval --ckpt run/model.safetensors --data latin1.txt", 1, "latin1.txt: byte offset 3: invalid UTF-8"},
        {"eval --ckpt run/model.safetensors --data upper.txt", 1, "upper.txt: byte offset 0: the character 'T' is not "
                                                                 "in the vocabulary (31 characters)"},
        {"eval --ckpt run/model.safetensors --data two.txt", 1, "two.txt: too short to evaluate"},
        {"eval --ckpt run/model.safetensors --data short.txt --split val --batch 0", 2, "--batch: 0 is out of range 1..65536"},
        {"eval --ckpt run/model.safetensors --data nope.txt", 1, "nope.txt: cannot open"},
    };
    ck_assert_int_eq(run("train --data tiny.txt --out run " TINY_MODEL " --steps 5 --sample-tokens 0"), 0);
    tu_expect_bad_runs(&textgen, tmpdir, cases, sizeof cases / sizeof cases[0]);
    /* a run already there is not replaced by accident, and --force replaces it */
    ck_assert_int_eq(run("train --data tiny.txt --out run " TINY_MODEL " --steps 5"), 1);
    tu_assert_stderr_has(&textgen, "run already holds a run");
    tu_assert_stderr_has(&textgen, "--resume");
    ck_assert_int_eq(run("train --data tiny.txt --out run " TINY_MODEL " --steps 5 --force --sample-tokens 0"), 0);
    /* --help lists the options and succeeds */
    ck_assert_int_eq(run("train --help"), 0);
    tu_assert_stdout_has(&textgen, "--block-size");
    tu_assert_stdout_has(&textgen, "--resume");
    /* the prompt's default is stated once (an empty default is not printed after it) */
    ck_assert_int_eq(run("sample --help"), 0);
    tu_assert_stdout_has(&textgen, "text to continue (default: a newline)\n");
    /* no --data and no bible-kjv: say what to install or pass */
    char env[600];
    snprintf(env, sizeof env, "env PATH=/nonexistent XDG_CACHE_HOME='%s/cache'", tmpdir);
    ck_assert_int_eq(run_env(env, "train --out r"), 1);
    tu_assert_stderr_has(&textgen, "bible-kjv");
    tu_assert_stderr_has(&textgen, "--data FILE");
    remove_tmpdir();
}
END_TEST

/* Sizes from the command line, a checkpoint's metadata or a file that once wrapped around, were
 * cut to int, or grew without bound: each is now an error naming the flag (or key, or file) and
 * its range, before anything is allocated for it. */
START_TEST(sizes_are_range_checked) {
    setup_run();
    /* a regular file over the cap (sparse: no disk is used), refused by its size before reading */
    const char *big = tmp_path("big.txt");
    FILE *f = fopen(big, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(ftruncate(fileno(f), ((off_t)1 << 20) + 1), 0);
    fclose(f);
    static const tu_bad_run cases[] = {
        /* the KV-cache history of prompt + tokens was sized (n + tokens) * 4 and wrapped */
        {"sample --ckpt run/model.safetensors --prompt a --tokens 4611686018427387904", 2,
         "--tokens: 4611686018427387904 is out of range 0..16777216"},
        {"sample --ckpt run/model.safetensors --prompt a --tokens 9223372036854775807", 2,
         "--tokens: 9223372036854775807 is out of range 0..16777216"},
        {"sample --ckpt run/model.safetensors --tokens 99999999999999999999", 2,
         "--tokens: 99999999999999999999 is out of range 0..16777216"},
        {"train --data tiny.txt --out r --sample-tokens 4611686018427387904", 2,
         "--sample-tokens: 4611686018427387904 is out of range 0..16777216"},
        /* batch x block wrapped in the evaluator and in the trainer's guard */
        {"eval --ckpt run/model.safetensors --batch 1152921504606846977", 2,
         "--batch: 1152921504606846977 is out of range 1..65536"},
        {"train --data tiny.txt --out r --batch 1152921504606846977", 2,
         "--batch: 1152921504606846977 is out of range 1..65536"},
        {"train --data tiny.txt --out r --batch 65536 --block-size 65536", 2,
         "--batch 65536 x --block-size 65536 is too large (at most 268435456 tokens a step)"},
        /* 2^32 + 1 threads became 1 through an int cast */
        {"sample --ckpt run/model.safetensors --threads 4294967297", 2, "--threads: 4294967297 is out of range 0..1024"},
        {"eval --ckpt run/model.safetensors --threads 4294967297", 2, "--threads: 4294967297 is out of range 0..1024"},
        {"train --data tiny.txt --out r --threads 4294967297", 2, "--threads: 4294967297 is out of range 0..1024"},
        {"sample --ckpt run/model.safetensors --temperature -1", 2, "--temperature: -1 is out of range 0..100"},
        {"sample --ckpt run/model.safetensors --top-k -1", 2, "--top-k: -1 is out of range 0..2147483647"},
        {"sample --ckpt run/model.safetensors --seed -2", 2, "--seed: -2 is out of range -1..9223372036854775807"},
        /* corpus files: a device read up to the cap, a regular file refused by its size */
        {"train --data /dev/zero --out r --max-file-mib 1", 1,
         "/dev/zero: more than the 1 MiB a text file may have (--max-file-mib); reading stopped there"},
        {"eval --ckpt run/model.safetensors --data /dev/zero --max-file-mib 1", 1,
         "/dev/zero: more than the 1 MiB a text file may have"},
        {"train --data big.txt --out r --max-file-mib 1", 1,
         "big.txt: 1048577 bytes, more than the 1 MiB a text file may have (--max-file-mib)"},
        {"train --data tiny.txt --out r --max-file-mib 0", 2, "--max-file-mib: 0 is out of range 1..1048576"},
    };
    ck_assert_int_eq(run("train --data tiny.txt --out run " TINY_MODEL " --steps 4 --sample-tokens 0"), 0);
    tu_expect_bad_runs(&textgen, tmpdir, cases, sizeof cases / sizeof cases[0]);
    /* the cap can be raised for a larger file */
    ck_assert_int_eq(run("eval --ckpt run/model.safetensors --data tiny.txt --max-file-mib 2"), 0);
    /* a pipe is read like a file, within the cap */
    ck_assert_int_eq(run_env("cat tiny.txt |", "eval --ckpt run/model.safetensors --data /dev/stdin"), 0);
    ck_assert_int_eq(run_env("cat tiny.txt |", "eval --ckpt run/model.safetensors --data /dev/stdin --max-file-mib 1"), 0);
    /* every numeric option lists its range */
    ck_assert_int_eq(run("train --help"), 0);
    tu_assert_stdout_has(&textgen, "--threads N");
    tu_assert_stdout_has(&textgen, "(0..1024, default 0)");
    tu_assert_stdout_has(&textgen, "(1..65536, default 32)");
    /* settings a checkpoint remembers are held to the same ranges when a run resumes */
    ck_assert_int_eq(run("train --data tiny.txt --out res " TINY_MODEL " --steps 8 --stop-after 2 --sample-tokens 0"), 0);
    size_t n_orig;
    char *orig = tu_read_file(tmp_path("res/model.safetensors"), &n_orig); /* the weights the state names */
    tu_set_meta(tmp_path("res/model.safetensors"), "textgen.batch", "1152921504606846977");
    ck_assert_int_eq(run("train --out res --resume --sample-tokens 0"), 2);
    tu_assert_stderr_has(&textgen,
                         "--batch: 1152921504606846977 is out of range 1..65536 (the value saved in res/model.safetensors)");
    tu_set_meta(tmp_path("res/model.safetensors"), "textgen.batch", "8");
    tu_set_meta(tmp_path("res/model.safetensors"), "textgen.eval_every", "4294967297");
    ck_assert_int_eq(run("train --out res --resume --sample-tokens 0"), 2);
    tu_assert_stderr_has(&textgen, "--eval-every: 4294967297 is out of range 0..1000000000");
    /* an edited weights file no longer matches its training state: the resume says so */
    ck_assert_int_ne(run("train --out res --resume --sample-tokens 0 --eval-every 4"), 0);
    tu_assert_stderr_has(&textgen, "res/model.safetensors");
    /* with the pair intact, what the command line gives wins over the saved value, and the run goes on */
    tu_write_bytes(tmp_path("res/model.safetensors"), orig, n_orig);
    free(orig);
    ck_assert_int_eq(run("train --out res --resume --sample-tokens 0 --eval-every 4"), 0);
    remove_tmpdir();
}
END_TEST

/* Overwrites the first value of a tensor in a safetensors file. */
static void poke_tensor(const char *path, const char *name, float v) {
    mg_st_file *f;
    ck_assert_int_eq(mg_safetensors_open(path, &f), MG_OK);
    int i = mg_st_find(f, name);
    ck_assert_int_ge(i, 0);
    uint64_t begin = mg_st_info(f, i)->begin;
    mg_st_close(f);
    FILE *fp = fopen(path, "r+b");
    ck_assert_ptr_nonnull(fp);
    unsigned char len8[8];
    ck_assert_uint_eq(fread(len8, 1, 8, fp), 8);
    uint64_t hlen = 0;
    for (int k = 7; k >= 0; k--) hlen = hlen << 8 | len8[k];
    ck_assert_int_eq(fseek(fp, (long)(8 + hlen + begin), SEEK_SET), 0);
    ck_assert_uint_eq(fwrite(&v, 4, 1, fp), 1);
    ck_assert_int_eq(fclose(fp), 0);
}

START_TEST(non_finite_loss_stops_and_keeps_the_last_checkpoint) {
    setup_run();
    ck_assert_int_eq(run("train --data tiny.txt --out run " TINY_MODEL " --steps 20 --stop-after 5 --sample-tokens 0"), 0);
    /* a NaN put into the saved weights: the file no longer matches its checksum */
    char *before, *after;
    size_t nb, na;
    before = tu_read_file(tmp_path("run/model.safetensors"), &nb);
    poke_tensor(tmp_path("run/model.safetensors"), "wte.weight", NAN);
    ck_assert_int_eq(run("train --out run --resume --sample-tokens 0"), 1);
    tu_assert_stderr_has(&textgen, "run/model.safetensors: checksum mismatch");
    ck_assert_int_eq(run("eval --ckpt run/model.safetensors --data tiny.txt"), 1);
    tu_assert_stderr_has(&textgen, "run/model.safetensors: checksum mismatch");
    /* ... and without one (a file as another tool writes it): refused as NaN, naming the tensor */
    tu_strip_checksum(tmp_path("run/model.safetensors"));
    ck_assert_int_eq(run("eval --ckpt run/model.safetensors --data tiny.txt"), 1);
    tu_assert_stderr_has(&textgen, "tensor 'wte.weight' holds NaN at element 0");
    tu_write_bytes(tmp_path("run/model.safetensors"), before, nb);

    /* a learning rate and weight decay that blow the weights up, a checkpoint every step: the
     * step whose update exploded is not saved, the one kept is the step before and evaluates */
    ck_assert_int_eq(run("train --data tiny.txt --out boom " TINY_MODEL " --steps 40 --lr 10 --weight-decay 10 "
                         "--ckpt-every 1 --sample-tokens 0"),
                     1);
    const char *msg = strstr(textgen.err, "the update of step ");
    ck_assert_msg(msg != NULL, "no divergence message: %s", textgen.err);
    long bad = strtol(msg + strlen("the update of step "), NULL, 10);
    char want[200];
    snprintf(want, sizeof want, "stopped without saving step %ld: the last good checkpoint (step %ld) is kept at "
             "boom/model.safetensors", bad, bad - 1);
    tu_assert_stderr_has(&textgen, want);
    tu_assert_stderr_has(&textgen, "made the weights explode");
    tu_assert_stderr_has(&textgen, "--lr");
    mg_st_file *f;
    ck_assert_int_eq(mg_safetensors_open(tmp_path("boom/model.safetensors"), &f), MG_OK);
    char step[24];
    snprintf(step, sizeof step, "%ld", bad - 1);
    ck_assert_str_eq(mg_st_meta_get(f, "train.step"), step);
    mg_st_close(f);
    ck_assert_int_eq(run("eval --ckpt boom/model.safetensors --data tiny.txt"), 0);
    const char *v = strstr(textgen.out, "val_loss ");
    ck_assert_ptr_nonnull(v);
    ck_assert_msg(isfinite(strtod(v + 9, NULL)), "the kept checkpoint evaluates to %s", v);
    /* and it resumes into the same divergence, saving nothing */
    after = tu_read_file(tmp_path("boom/model.safetensors"), &na);
    ck_assert_int_eq(run("train --out boom --resume --sample-tokens 0"), 1);
    tu_assert_stderr_has(&textgen, want);
    size_t nk;
    char *kept = tu_read_file(tmp_path("boom/model.safetensors"), &nk);
    ck_assert(nk == na && memcmp(kept, after, na) == 0);
    free(kept);
    free(after);
    after = tu_read_file(tmp_path("run/model.safetensors"), &na);
    ck_assert_uint_eq(na, nb);
    ck_assert_mem_eq(after, before, nb);
    free(before);
    free(after);
    remove_tmpdir();
}
END_TEST

static void add_model_tests(Suite *s) {
    TCase *tc = tcase_create("program");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, training_learns_a_tiny_corpus_and_plots);
    tcase_add_test(tc, resume_continues_exactly);
    tcase_add_test(tc, resume_keeps_the_runs_precision);
    tcase_add_test(tc, bf16_path_from_the_environment);
    tcase_add_test(tc, ctrl_c_saves_a_resumable_checkpoint);
    tcase_add_test(tc, sampling_is_deterministic_for_a_seed);
    tcase_add_test(tc, eval_reports_nats_and_bits_per_character);
    tcase_add_test(tc, plugins_lists_schemes_and_their_origin);
    tcase_add_test(tc, byte_tokenizer_end_to_end);
    tcase_add_test(tc, bad_inputs_give_clear_errors);
    tcase_add_test(tc, sizes_are_range_checked);
    tcase_add_test(tc, non_finite_loss_stops_and_keeps_the_last_checkpoint);
    if (tu_have_dev_full())
        tcase_add_test(tc, outputs_on_a_full_disk_fail_by_name);
    else
        fprintf(stderr, "# /dev/full not found: outputs_on_a_full_disk_fail_by_name skipped\n");
    suite_add_tcase(s, tc);
}

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
    tcase_add_test(tc, precision_banner_names_the_bf16_unit);
    tcase_add_test(tc, usage_shows_string_defaults_readably);
    suite_add_tcase(s, tc);
    add_model_tests(s);
    return s;
}

MG_TEST_MAIN(textgen_suite)
