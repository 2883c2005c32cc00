/* The music example's model half: the split by piece, padded and augmented windows, uniform batch
 * starts, the validation windows, the piano roll, music checkpoints; then the `music` program end
 * to end (a subprocess per command): a short run that learns, exact resume, Ctrl-C, deterministic
 * sampling with and without a prompt, evaluation against a plain reference, the alibi plugin,
 * audio through timidity when it is installed, and every bad input giving a clear message and no
 * crash. */
#include "test_util.h"
#include "cmd_model.h"
#include "music_model.h"

#include "minigrad/safetensors.h"

#include <math.h>
#include <stb_image.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* ======================================================================================
 * helpers
 * ====================================================================================== */

static char tmpdir[256];

static void make_tmpdir(void) {
    tu_make_tmpdir(tmpdir, sizeof tmpdir, "music_test");
}

static void remove_tmpdir(void) {
    tu_remove_tree(tmpdir);
}

static const char *tmp_path(const char *name) {
    return tu_path_in(tmpdir, name);
}

static bool is_shift(int32_t t) {
    return t >= MUSIC_PERF_TIME_SHIFT && t < MUSIC_PERF_VELOCITY;
}

static bool is_note(int32_t t) {
    return t >= 0 && t < MUSIC_PERF_TIME_SHIFT;
}

/* The first `n` pieces of the generated corpus, with their tokens. */
static void gen_corpus(uint32_t n, music_corpus *c) {
    music_load_opts lo = {.keep_tokens = true};
    TU_OK(music_generate_corpus(n, 1, &lo, c));
    ck_assert_uint_eq(c->n_ok, n);
}

/* ======================================================================================
 * training data
 * ====================================================================================== */

START_TEST(split_is_by_piece_deterministic_and_spread) {
    music_corpus c;
    gen_corpus(25, &c);
    music_data d;
    TU_OK(music_data_make(&d, &c, "gen"));
    ck_assert_uint_eq(d.n, 25);
    /* 25 pieces: round(2.5) = 3 validation pieces, at i where floor((i+1)3/25) > floor(3i/25) */
    ck_assert_uint_eq(d.n_val, 3);
    ck_assert_uint_eq(d.n_train, 22);
    for (size_t i = 0; i < d.n; i++) {
        ck_assert_msg(d.pieces[i].val == (i == 8 || i == 16 || i == 24), "piece %zu", i);
        ck_assert_str_eq(d.pieces[i].name, c.items[i].path);
        ck_assert_uint_eq(d.pieces[i].n, c.items[i].encoding.n);
        ck_assert_mem_eq(d.pieces[i].tok, c.items[i].encoding.v, d.pieces[i].n * sizeof(int32_t));
        ck_assert_int_eq(d.pieces[i].tok[0], MUSIC_PERF_START);
        ck_assert_int_eq(d.pieces[i].tok[d.pieces[i].n - 1], MUSIC_PERF_END);
    }
    ck_assert_uint_eq(d.train_tokens + d.val_tokens, c.tokens);
    /* the prefix sums count every start that has a target: n - 1 per train piece */
    uint64_t starts = 0;
    for (size_t k = 0; k < d.n_train; k++) {
        ck_assert(!d.pieces[d.train_idx[k]].val);
        ck_assert_uint_eq(d.train_cum[k], starts);
        starts += d.pieces[d.train_idx[k]].n - 1;
    }
    ck_assert_uint_eq(d.train_cum[d.n_train], starts);
    ck_assert_uint_eq(starts, d.train_tokens - d.n_train);
    music_data_free(&d);
    music_corpus_free(&c);

    /* small corpora: 1 piece has no validation, up to 14 give 1 (the last), 15 give 2 (the 8th
     * and the last) */
    static const struct {
        uint32_t n;
        size_t val, val_at;
    } small[] = {{1, 0, 99}, {2, 1, 1}, {10, 1, 9}, {14, 1, 13}, {15, 2, 7}};
    for (size_t k = 0; k < sizeof small / sizeof small[0]; k++) {
        gen_corpus(small[k].n, &c);
        TU_OK(music_data_make(&d, &c, "gen"));
        ck_assert_uint_eq(d.n_val, small[k].val);
        if (small[k].val_at < d.n) ck_assert(d.pieces[small[k].val_at].val);
        music_data_free(&d);
        music_corpus_free(&c);
    }
}
END_TEST

START_TEST(data_make_names_what_is_missing) {
    music_corpus c = {0};
    music_data d;
    ck_assert_int_eq(music_data_make(&d, &c, "songs/"), MG_ERR_NOT_FOUND);
    tu_assert_error_has("songs/: no MIDI files (.mid or .midi) found");
    static const uint8_t junk[] = "MThd\0\0\0\6\0\1\0\5";
    TU_OK(music_corpus_add(&c, "songs/bad.mid", junk, sizeof junk - 1, NULL));
    ck_assert_int_eq(music_data_make(&d, &c, "songs/"), MG_ERR_NOT_FOUND);
    tu_assert_error_has(
        "songs/: none of the 1 MIDI files found could be used (the first: songs/bad.mid");
    music_corpus_free(&c);
    /* a corpus loaded without its tokens is a programming error, named */
    TU_OK(music_generate_corpus(2, 1, NULL, &c));
    ck_assert_int_eq(music_data_make(&d, &c, "gen"), MG_ERR_INVALID);
    tu_assert_error_has("loaded without its tokens");
    music_corpus_free(&c);
}
END_TEST

START_TEST(windows_pad_past_the_end_of_a_piece) {
    const int32_t tok[] = {MUSIC_PERF_START, 10, 300, 140, MUSIC_PERF_END};
    int32_t ids[8], tg[8];
    TU_OK(music_window(tok, 5, 0, 3, NULL, NULL, NULL, ids, tg));
    ck_assert_mem_eq(ids, ((int32_t[]){MUSIC_PERF_START, 10, 300}), 3 * sizeof(int32_t));
    ck_assert_mem_eq(tg, ((int32_t[]){10, 300, 140}), 3 * sizeof(int32_t));
    TU_OK(music_window(tok, 5, 2, 8, NULL, NULL, NULL, ids, tg));
    static const int32_t want_ids[8] = {300,         140,         MUSIC_PERF_END, MUSIC_PERF_END,
                                        MUSIC_PERF_END, MUSIC_PERF_END, MUSIC_PERF_END, MUSIC_PERF_END};
    static const int32_t want_tg[8] = {140, MUSIC_PERF_END, -1, -1, -1, -1, -1, -1};
    ck_assert_mem_eq(ids, want_ids, sizeof want_ids);
    ck_assert_mem_eq(tg, want_tg, sizeof want_tg);
    /* the last start with a target: the END is predicted, nothing after it */
    TU_OK(music_window(tok, 5, 3, 2, NULL, NULL, NULL, ids, tg));
    ck_assert_mem_eq(ids, ((int32_t[]){140, MUSIC_PERF_END}), 2 * sizeof(int32_t));
    ck_assert_mem_eq(tg, ((int32_t[]){MUSIC_PERF_END, -1}), 2 * sizeof(int32_t));
    ck_assert_int_eq(music_window(tok, 5, 4, 2, NULL, NULL, NULL, ids, tg), MG_ERR_INVALID);
    tu_assert_error_has("start 4 of a 5-token piece leaves nothing to predict");
}
END_TEST

/* The T + 1 tokens a window holds (ids, then the last target unless it is padding). */
static size_t window_tokens(const int32_t *ids, const int32_t *tg, int64_t T, int32_t *out) {
    size_t m = 0;
    for (int64_t i = 0; i < T; i++)
        if (i == 0 || tg[i - 1] >= 0) out[m++] = ids[i];
    if (tg[T - 1] >= 0) out[m++] = tg[T - 1];
    return m;
}

START_TEST(augmented_windows_transpose_and_stretch_the_piece) {
    music_corpus c;
    gen_corpus(1, &c);
    const int32_t *tok = c.items[0].encoding.v;
    size_t n = c.items[0].encoding.n;
    enum { T = 96 };
    int32_t ids[T], tg[T], ids2[T], tg2[T], win[T + 1];
    music_augment_opts aug = music_augment_defaults();
    music_scratch s = {0};
    int shifts[7] = {0}, stretches[5] = {0};
    const double factors[5] = {0.95, 0.975, 1.0, 1.025, 1.05};
    for (int trial = 0; trial < 120; trial++) {
        size_t start = (size_t)(trial * 37) % (n - 1);
        mg_rng r = mg_rng_make(1000 + (uint64_t)trial), r2 = r;
        TU_OK(music_window(tok, n, start, T, &aug, &r, &s, ids, tg));
        /* the window depends only on the generator's state */
        TU_OK(music_window(tok, n, start, T, &aug, &r2, &s, ids2, tg2));
        ck_assert_mem_eq(ids, ids2, sizeof ids);
        ck_assert_mem_eq(tg, tg2, sizeof tg);
        ck_assert_uint_eq(r.s, r2.s);
        size_t m = window_tokens(ids, tg, T, win);
        for (size_t i = 0; i < m; i++) ck_assert(win[i] >= 0 && win[i] < MUSIC_PERF_VOCAB);
        /* the events are the piece's from `start` on, notes shifted by one d, and each sits at
         * round(f * its original time) for one factor f */
        int d = 99;
        int64_t t_aug = 0, t_raw = 0;
        size_t j = start;
        bool f_ok[5] = {true, true, true, true, true};
        for (size_t i = 0; i < m; i++) {
            if (is_shift(win[i])) {
                t_aug += win[i] - MUSIC_PERF_TIME_SHIFT + 1;
                continue;
            }
            while (is_shift(tok[j])) t_raw += tok[j++] - MUSIC_PERF_TIME_SHIFT + 1;
            int32_t raw = tok[j++];
            if (is_note(raw)) {
                ck_assert(is_note(win[i]) &&
                          (raw < MUSIC_PERF_NOTE_OFF) == (win[i] < MUSIC_PERF_NOTE_OFF));
                if (d == 99) d = win[i] - raw;
                ck_assert_int_eq(win[i] - raw, d);
            } else {
                ck_assert_int_eq(win[i], raw);
            }
            for (int k = 0; k < 5; k++) f_ok[k] &= t_aug == llround((double)t_raw * factors[k]);
        }
        int nf = 0;
        for (int k = 0; k < 5; k++) nf += f_ok[k];
        ck_assert_msg(nf >= 1, "trial %d: no stretch factor explains the timing", trial);
        if (d != 99) {
            ck_assert(d >= -3 && d <= 3);
            shifts[d + 3]++;
        }
        if (nf == 1)
            for (int k = 0; k < 5; k++) stretches[k] += f_ok[k];
        /* full windows unless the piece ended */
        ck_assert(m == T + 1 || win[m - 1] == MUSIC_PERF_END);
    }
    for (int k = 0; k < 7; k++) ck_assert_msg(shifts[k] > 0, "shift %d never drawn", k - 3);
    for (int k = 0; k < 5; k++)
        ck_assert_msg(stretches[k] > 0, "stretch %g never seen", factors[k]);
    music_scratch_free(&s);
    music_corpus_free(&c);
}
END_TEST

START_TEST(batches_draw_every_train_start_alike) {
    int32_t a[] = {MUSIC_PERF_START, 10, 11, MUSIC_PERF_END};
    int32_t v[] = {MUSIC_PERF_START, 20, MUSIC_PERF_END};
    int32_t b[] = {MUSIC_PERF_START, 30, 31, 32, 33, MUSIC_PERF_END};
    music_piece pieces[3] = {{a, 4, "a", false}, {v, 3, "v", true}, {b, 6, "b", false}};
    size_t train_idx[2] = {0, 2};
    uint64_t cum[3] = {0, 3, 8};
    music_data d = {.pieces = pieces,
                       .n = 3,
                       .n_train = 2,
                       .n_val = 1,
                       .train_idx = train_idx,
                       .train_cum = cum};
    enum { B = 8000 };
    static int32_t ids[B * 2], tg[B * 2];
    mg_rng r = mg_rng_make(5);
    TU_OK(music_batch(&d, B, 2, NULL, &r, NULL, ids, tg));
    /* without augmentation: one draw per window */
    ck_assert_uint_eq(r.s, 5 + (uint64_t)B * 0x9E3779B97F4A7C15ULL);
    int count[8] = {0};
    for (int i = 0; i < B; i++) {
        int32_t x = ids[2 * i], y = ids[2 * i + 1];
        ck_assert_int_ne(x, 20);
        ck_assert_int_ne(y, 20);
        int k = x == MUSIC_PERF_START ? (y == 10 ? 0 : 3) : x == 10 ? 1 : x == 11 ? 2 : 4 + (x - 30);
        ck_assert(k >= 0 && k < 8);
        count[k]++;
        /* targets are the next tokens, -1 past the end */
        if (x == 11) ck_assert_int_eq(tg[2 * i + 1], -1);
        if (x == 33) ck_assert_int_eq(tg[2 * i + 1], -1);
        if (x == MUSIC_PERF_START) ck_assert_int_eq(tg[2 * i], y);
    }
    for (int k = 0; k < 8; k++)
        ck_assert_msg(count[k] > 850 && count[k] < 1150, "start %d: %d", k, count[k]);
    /* no train pieces: an error, not a hang or a crash */
    d.n_train = 0;
    ck_assert_int_eq(music_batch(&d, 1, 2, NULL, &r, NULL, ids, tg), MG_ERR_INVALID);
    tu_assert_error_has("no training pieces");
}
END_TEST

START_TEST(validation_windows_cover_each_target_once) {
    int32_t t1[] = {MUSIC_PERF_START, 1, 2, MUSIC_PERF_END};
    int32_t t2[] = {MUSIC_PERF_START, 3, 4, 5, 6, MUSIC_PERF_END};
    int32_t t3[] = {MUSIC_PERF_START, 7, MUSIC_PERF_END};
    music_piece pieces[3] = {{t1, 4, "a", true}, {t3, 3, "t", false}, {t2, 6, "b", true}};
    music_data d = {.pieces = pieces, .n = 3, .n_val = 2};
    music_windows w;
    TU_OK(music_val_windows(&d, 2, 0, &w));
    /* 3 targets in 2 windows, 5 targets in 3 windows; the train piece has none */
    ck_assert_uint_eq(w.count, 5);
    ck_assert_uint_eq(w.targets, 8);
    const size_t piece[5] = {0, 0, 2, 2, 2}, start[5] = {0, 2, 0, 2, 4};
    ck_assert_mem_eq(w.piece, piece, sizeof piece);
    ck_assert_mem_eq(w.start, start, sizeof start);
    music_windows_free(&w);
    /* at most 2: the first and the third (floor(k * 5 / 2)) */
    TU_OK(music_val_windows(&d, 2, 2, &w));
    ck_assert_uint_eq(w.count, 2);
    ck_assert_uint_eq(w.piece[0], 0);
    ck_assert_uint_eq(w.start[0], 0);
    ck_assert_uint_eq(w.piece[1], 2);
    ck_assert_uint_eq(w.start[1], 0);
    ck_assert_uint_eq(w.targets, 4);
    music_windows_free(&w);
    /* one window per piece when T is long */
    TU_OK(music_val_windows(&d, 2048, 16, &w));
    ck_assert_uint_eq(w.count, 2);
    ck_assert_uint_eq(w.targets, 8);
    music_windows_free(&w);
    d.pieces[0].val = d.pieces[2].val = false;
    TU_OK(music_val_windows(&d, 2, 0, &w));
    ck_assert_uint_eq(w.count, 0);
    music_windows_free(&w);
}
END_TEST

/* ======================================================================================
 * the piano roll
 * ====================================================================================== */

START_TEST(piano_roll_png_decodes_with_both_parts) {
    make_tmpdir();
    music_notes notes = {0};
    for (int i = 0; i < 40; i++) {
        music_note n = {.on = i * 0.25,
                     .off = i * 0.25 + 0.4,
                     .pitch = (uint8_t)(48 + (i * 7) % 24),
                     .velocity = (uint8_t)(30 + 2 * i)};
        TU_OK(music_notes_push(&notes, n));
    }
    music_pianoroll_opts o = {.prompt_end = 5.0, .title = "test roll"};
    TU_OK(music_pianoroll(tmp_path("roll.png"), &notes, &o));
    int w, h, ch;
    unsigned char *px = stbi_load(tmp_path("roll.png"), &w, &h, &ch, 3);
    ck_assert_ptr_nonnull(px);
    ck_assert_int_eq(w, 1200);
    ck_assert_int_eq(h, 600);
    /* prompt notes (before 5 s, left half of the roll) blue, the continuation orange */
    int blue_left = 0, blue_right = 0, orange_left = 0, orange_right = 0;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            const unsigned char *p = px + 3 * (y * w + x);
            bool blue = p[2] > p[0] + 40, orange = p[0] > p[2] + 80 && p[1] > p[2];
            /* the time axis ends between 10 and 12 s: the boundary lies between x 530 and 624 */
            bool left = (x < 300);
            bool right = (x > 900);
            blue_left += blue && left, blue_right += blue && right && y > 60;
            orange_left += orange && left && y > 60, orange_right += orange && right;
        }
    ck_assert_int_gt(blue_left, 300);
    ck_assert_int_gt(orange_right, 300);
    ck_assert_int_lt(blue_right, 20);
    ck_assert_int_lt(orange_left, 20);
    stbi_image_free(px);
    /* other sizes, no prompt, no notes */
    o = (music_pianoroll_opts){.width = 640, .height = 320};
    music_notes none = {0};
    TU_OK(music_pianoroll(tmp_path("empty.png"), &none, &o));
    px = stbi_load(tmp_path("empty.png"), &w, &h, &ch, 3);
    ck_assert_ptr_nonnull(px);
    ck_assert_int_eq(w, 640);
    ck_assert_int_eq(h, 320);
    stbi_image_free(px);
    o.width = 100;
    ck_assert_int_eq(music_pianoroll(tmp_path("small.png"), &notes, &o), MG_ERR_INVALID);
    tu_assert_error_has("small.png: piano roll size 100 x 320 is outside 300..8192");
    ck_assert_int_ne(access(tmp_path("small.png"), F_OK), 0);
    ck_assert_int_ne(music_pianoroll("/nonexistent/dir/r.png", &notes, NULL), MG_OK);
    tu_assert_error_has("/nonexistent/dir/r.png");
    music_notes_free(&notes);
    remove_tmpdir();
}
END_TEST

/* ======================================================================================
 * checkpoints
 * ====================================================================================== */

static void save_model(const char *path, int64_t vocab, const mg_st_meta *meta, int n_meta) {
    mg_gpt_config cfg = mg_gpt_config_default();
    cfg.vocab_size = vocab, cfg.block_size = 16, cfg.n_layer = 1, cfg.n_head = 2, cfg.n_embd = 16;
    mg_rng r = mg_rng_make(1);
    mg_gpt *g;
    TU_OK(mg_gpt_new(&cfg, &r, &g));
    TU_OK(mg_gpt_save(g, path, meta, n_meta));
    mg_gpt_free(g);
}

START_TEST(load_refuses_what_is_not_a_music_model) {
    make_tmpdir();
    mg_gpt *g;
    mg_st_file *f;
    save_model(tmp_path("text.safetensors"), 4,
               (mg_st_meta[]){{"tokenizer", "char"}, {"chars", "abcd"}}, 2);
    ck_assert_int_eq(music_load(tmp_path("text.safetensors"), &g, &f), MG_ERR_FORMAT);
    ck_assert_ptr_null(g);
    ck_assert_ptr_null(f);
    tu_assert_error_has("text.safetensors: not a music model: metadata 'tokenizer' is 'char' (a "
                        "textgen checkpoint?), a music checkpoint has 'midi-performance'");
    save_model(tmp_path("bare.safetensors"), MUSIC_PERF_VOCAB, NULL, 0);
    ck_assert_int_eq(music_load(tmp_path("bare.safetensors"), &g, NULL), MG_ERR_FORMAT);
    tu_assert_error_has("bare.safetensors: not a music model: metadata 'tokenizer' is missing");
    save_model(tmp_path("v.safetensors"), 100, (mg_st_meta[]){{"tokenizer", MUSIC_TOKENIZER}},
               1);
    ck_assert_int_eq(music_load(tmp_path("v.safetensors"), &g, NULL), MG_ERR_FORMAT);
    tu_assert_error_has(
        "v.safetensors: metadata 'vocab_size' is 100, the performance encoding has 390");
    tu_write_bytes(tmp_path("junk.safetensors"), "not a checkpoint at all", 23);
    ck_assert_int_ne(music_load(tmp_path("junk.safetensors"), &g, NULL), MG_OK);
    tu_assert_error_has("junk.safetensors");
    ck_assert_int_ne(music_load(tmp_path("none.safetensors"), &g, NULL), MG_OK);
    tu_assert_error_has("none.safetensors");
    /* and a real one loads, with its file */
    save_model(tmp_path("m.safetensors"), MUSIC_PERF_VOCAB,
               (mg_st_meta[]){{"tokenizer", MUSIC_TOKENIZER}}, 1);
    TU_OK(music_load(tmp_path("m.safetensors"), &g, &f));
    ck_assert_int_eq(mg_gpt_cfg(g)->vocab_size, MUSIC_PERF_VOCAB);
    ck_assert_str_eq(mg_st_meta_get(f, "tokenizer"), MUSIC_TOKENIZER);
    mg_st_close(f);
    mg_gpt_free(g);

    /* a parameter-free scheme swapped for another in the metadata (rope -> none: the same
     * tensors, another model) is refused, naming the file */
    mg_gpt_config cfg = mg_gpt_config_default();
    cfg.vocab_size = MUSIC_PERF_VOCAB, cfg.block_size = 16, cfg.n_layer = 1, cfg.n_head = 2, cfg.n_embd = 16;
    snprintf(cfg.pos, sizeof cfg.pos, "rope");
    mg_rng r = mg_rng_make(2);
    TU_OK(mg_gpt_new(&cfg, &r, &g));
    const char *rope = tmp_path("rope.safetensors");
    TU_OK(mg_gpt_save(g, rope, (mg_st_meta[]){{"tokenizer", MUSIC_TOKENIZER}}, 1));
    mg_gpt_free(g);
    TU_OK(music_load(rope, &g, NULL));
    ck_assert_str_eq(mg_gpt_cfg(g)->pos, "rope");
    mg_gpt_free(g);
    size_t n;
    char *b = tu_read_file(rope, &n), *at = strstr(b + 8, "\"pos\":\"rope\"");
    ck_assert_ptr_nonnull(at);
    memcpy(at, "\"pos\":\"none\"", 12);
    tu_write_bytes(rope, b, n);
    free(b);
    g = (mg_gpt *)1;
    ck_assert_int_eq(music_load(rope, &g, NULL), MG_ERR_FORMAT);
    ck_assert_ptr_null(g);
    tu_assert_error_has("rope.safetensors: checksum mismatch");
    /* a flipped bit in a weight, likewise */
    save_model(tmp_path("m.safetensors"), MUSIC_PERF_VOCAB, (mg_st_meta[]){{"tokenizer", MUSIC_TOKENIZER}}, 1);
    tu_flip_bit(tmp_path("m.safetensors"), -1000, 6);
    ck_assert_int_eq(music_load(tmp_path("m.safetensors"), &g, NULL), MG_ERR_FORMAT);
    tu_assert_error_has("m.safetensors: checksum mismatch");
    remove_tmpdir();
}
END_TEST

/* ======================================================================================
 * the music program, end to end
 * ====================================================================================== */

static tu_program music = {
    .name = "music", .rel = "examples/music/music", .max_status = 128, .interrupt_ok = true};

/* Runs `music ARGS` in tmpdir with stdout and stderr captured. Returns the exit status; a crash
 * (signal) fails the test. */
static int run_env(const char *env, const char *args) {
    return tu_run_in(&music, tmpdir, env, args);
}
static int run(const char *args) {
    return run_env("", args);
}

/* A model small enough to train in well under a second per hundred steps on one thread. */
#define TINY                                                                                       \
    "--pieces 16 --block-size 64 --n-embd 32 --n-layer 1 --n-head 2 --batch 8 --lr 1e-2 "          \
    "--warmup 10 --threads 1"

/* Reads a MIDI file back into notes through the library's reader. */
static void read_notes(const char *path, music_notes *n) {
    music_midi_file f;
    TU_OK(music_midi_read(path, &f));
    TU_OK(music_midi_to_notes(&f, path, NULL, n, NULL));
    music_midi_free(&f);
}

static void png_size(const char *path, int *w, int *h) {
    int ch;
    unsigned char *px = stbi_load(path, w, h, &ch, 3);
    ck_assert_msg(px != NULL, "%s does not decode: %s", path, stbi_failure_reason());
    stbi_image_free(px);
}

START_TEST(training_learns_the_generated_corpus) {
    tu_find_program(&music);
    make_tmpdir();
    ck_assert_int_eq(
        run("train --out run " TINY " --steps 300 --eval-every 100 --sample-tokens 64"), 0);
    tu_run_log lg;
    tu_read_log(tmp_path("run/log.jsonl"), &lg, NULL);
    ck_assert_int_eq(lg.n, 300);
    for (int i = 0; i < lg.n; i++) ck_assert_int_eq(lg.step[i], i + 1);
    /* an untrained model guesses among 390 tokens: ln 390 = 5.97 */
    ck_assert_double_gt(lg.loss[0], 5.7);
    ck_assert_double_lt(lg.loss[0], 6.2);
    /* The stated bound: below the corpus's unigram entropy (5.02 nats) by a margin, on held-out
     * pieces and on the last 20 training steps (seeds 1-5 end at val 4.2-4.3). */
    double tail = 0;
    for (int i = lg.n - 20; i < lg.n; i++) tail += lg.loss[i] / 20;
    ck_assert_double_lt(tail, 4.6);
    ck_assert_int_eq(lg.nv, 3);
    ck_assert_int_eq(lg.val_step[2], 300);
    ck_assert_double_lt(lg.val[2], 4.6);
    ck_assert_double_lt(lg.val[2], lg.val[0]);
    tu_assert_stdout_has(&music, "no --data given: learning 16 generated piano pieces");
    tu_assert_stdout_has(&music, "14 train pieces");
    tu_assert_stdout_has(&music, "2 validation pieces");
    tu_assert_stdout_has(&music, "context 64, pos rope, vocabulary 390");
    tu_assert_stdout_has(&music, "tokens/s");
    tu_assert_stdout_has(&music, "peak RSS");
    tu_assert_stdout_has(&music, "activations (arena peak)");
    tu_assert_stdout_has(&music, "run/sample.mid");
    tu_assert_stdout_has(&music, "run/loss.png");
    char more[1200]; /* the command for more music names the program as it was started */
    snprintf(more, sizeof more, "music: more music: %s sample --ckpt run/model.safetensors --out piece.mid", music.bin);
    tu_assert_stdout_has(&music, more);
    int w, h;
    png_size(tmp_path("run/loss.png"), &w, &h);
    ck_assert_int_eq(w, 800);
    ck_assert_int_eq(h, 500);
    png_size(tmp_path("run/sample.png"), &w, &h);
    ck_assert_int_eq(w, 1200);
    ck_assert_int_eq(h, 600);
    music_notes notes = {0};
    read_notes(tmp_path("run/sample.mid"), &notes);
    music_notes_free(&notes);
    /* the checkpoint says what it is and how it was trained */
    mg_st_file *f;
    TU_OK(mg_safetensors_open(tmp_path("run/model.safetensors"), &f));
    ck_assert_str_eq(mg_st_meta_get(f, "format"), "minigrad-gpt");
    ck_assert_str_eq(mg_st_meta_get(f, "tokenizer"), "midi-performance");
    ck_assert_str_eq(mg_st_meta_get(f, "vocab_size"), "390");
    ck_assert_str_eq(mg_st_meta_get(f, "pos"), "rope");
    ck_assert_str_eq(mg_st_meta_get(f, "music.pieces"), "16");
    ck_assert_str_eq(mg_st_meta_get(f, "music.data"), "");
    ck_assert_str_eq(mg_st_meta_get(f, "music.steps"), "300");
    mg_st_close(f);
    remove_tmpdir();
}
END_TEST

START_TEST(resume_continues_exactly) {
    tu_find_program(&music);
    make_tmpdir();
    /* augmentation and dropout on, so the data generator and the dropout one must both resume */
    const char *common =
        TINY " --steps 24 --eval-every 5 --ckpt-every 0 --dropout 0.1 --sample-tokens 0";
    char args[1024];
    snprintf(args, sizeof args, "train --out straight %s", common);
    ck_assert_int_eq(run(args), 0);
    snprintf(args, sizeof args, "train --out pieces %s --stop-after 12", common);
    ck_assert_int_eq(run(args), 0);
    tu_assert_stdout_has(&music, "stopped after 12 steps");
    tu_assert_stdout_has(&music, "music train --resume --out pieces");
    ck_assert_int_eq(run("train --out pieces --resume --sample-tokens 0 --threads 2"), 0);
    tu_assert_stdout_has(&music, "resumed at step 12");
    static const char *const wkeys[] = {"tokenizer",    "vocab_size", "music.steps",
                                        "music.pieces", "music.data", NULL};
    tu_assert_resumed_exactly(tmpdir, "straight", "pieces", wkeys, 24, 12, NULL);
    /* a finished run has nothing left to do; a contradicting model size is named */
    ck_assert_int_eq(run("train --out pieces --resume --sample-tokens 0"), 0);
    ck_assert_int_eq(run("train --out pieces --resume --steps 30 --n-embd 64 --sample-tokens 0"),
                     1);
    tu_assert_stderr_has(&music, "n_embd");
    remove_tmpdir();
}
END_TEST

/* Ctrl-C (SIGINT), and SIGTERM as `kill`, `timeout` or a job scheduler sends it */
START_TEST(signal_saves_a_resumable_checkpoint) {
    static const int sigs[] = {SIGINT, SIGTERM};
    static const char *const said[] = {"interrupted (Ctrl-C): saved step", "interrupted (SIGTERM): saved step"};
    tu_find_program(&music);
    make_tmpdir();
    /* interrupted once it is training: the log has a few steps */
    int st = tu_run_signalled(
        &music, tmpdir,
        (char *[]){music.bin,     "train", "--out",        "int", "--pieces",  "16",
                   "--block-size", "64",    "--n-embd",     "32",  "--n-layer", "1",
                   "--n-head",     "2",     "--threads",    "1",   "--steps",   "1000000",
                   "--ckpt-every", "0",     "--eval-every", "0",   NULL},
        "int/log.jsonl", 300, sigs[_i]);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 128 + sigs[_i],
                  "status %d; stdout %.1000s; stderr %.1000s", st, music.out, music.err);
    tu_assert_stdout_has(&music, said[_i]);
    tu_assert_stderr_has(&music, "music: stopping after this step, then saving (a second signal ends it at once)");
    char hint[1200]; /* the program as it was started */
    snprintf(hint, sizeof hint, "music: continue with: %s train --resume --out int\n", music.bin);
    tu_assert_stdout_has(&music, hint);
    tu_run_log lg;
    tu_read_log(tmp_path("int/log.jsonl"), &lg, NULL);
    ck_assert_int_gt(lg.n, 0);
    char args[256], want[64];
    snprintf(args, sizeof args, "train --out int --resume --steps %d --sample-tokens 0", lg.n + 2);
    ck_assert_int_eq(run(args), 0);
    snprintf(want, sizeof want, "resumed at step %d", lg.n);
    tu_assert_stdout_has(&music, want);
    tu_read_log(tmp_path("int/log.jsonl"), &lg, NULL);
    ck_assert_int_eq(lg.step[lg.n - 1], lg.n);
    remove_tmpdir();
}
END_TEST

/* A generated piece written as a MIDI file, to be a prompt. */
static void write_prompt(const char *path, uint32_t index) {
    music_midi_file f;
    TU_OK(music_generate_piece(9, index, &f));
    TU_OK(music_midi_write(path, &f, NULL));
    music_midi_free(&f);
}

START_TEST(sampling_is_deterministic_and_continues_a_prompt) {
    tu_find_program(&music);
    make_tmpdir();
    ck_assert_int_eq(run("train --out run " TINY " --steps 40 --sample-tokens 0"), 0);
    const char *args = "sample --ckpt run/model.safetensors --tokens 150 --seed 7 --threads 1 "
                       "--out a.mid --png a.png";
    ck_assert_int_eq(run(args), 0);
    tu_assert_stdout_has(&music, "(seed 7, temperature 1)");
    tu_assert_stdout_has(&music, "wrote a.mid, a.png");
    size_t na, nb;
    uint8_t *ma = tu_read_file(tmp_path("a.mid"), &na);
    ck_assert_int_eq(run("sample --ckpt run/model.safetensors --tokens 150 --seed 7 --threads 2 "
                         "--out b.mid --quiet"),
                     0);
    /* the piano roll goes beside the .mid by default, and only there; --no-png skips it */
    tu_assert_stdout_has(&music, "wrote b.mid, b.png");
    int bw, bh;
    png_size(tmp_path("b.png"), &bw, &bh);
    ck_assert_int_eq(bw, 1200);
    ck_assert_int_eq(run("sample --ckpt run/model.safetensors --tokens 20 --seed 7 --out d.mid --no-png"), 0);
    ck_assert_int_ne(access(tmp_path("d.png"), F_OK), 0);
    ck_assert_int_eq(run("sample --ckpt run/model.safetensors --out e.mid --png e.png --no-png"), 2);
    ck_assert_int_ne(access(tmp_path("e.mid"), F_OK), 0);
    uint8_t *mb = tu_read_file(tmp_path("b.mid"), &nb);
    ck_assert_uint_eq(na, nb);
    ck_assert_mem_eq(ma, mb, na);
    free(mb);
    ck_assert_int_eq(run("sample --ckpt run/model.safetensors --tokens 150 --seed 8 --out c.mid"),
                     0);
    mb = tu_read_file(tmp_path("c.mid"), &nb);
    ck_assert(nb != na || memcmp(ma, mb, na) != 0);
    free(mb);
    free(ma);
    /* what was written parses back, with the note count reported */
    music_notes notes = {0};
    read_notes(tmp_path("a.mid"), &notes);
    char want[64];
    snprintf(want, sizeof want, "music: %zu notes", notes.n);
    ck_assert_int_eq(run(args), 0);
    tu_assert_stdout_has(&music, want);
    music_notes_free(&notes);
    int w, h;
    png_size(tmp_path("a.png"), &w, &h);
    ck_assert_int_eq(w, 1200);
    ck_assert_int_eq(h, 600);

    /* a prompt: its notes come first, unchanged but for the 10 ms grid; it is longer than the
     * context (64 tokens), so the model sees its last half block */
    write_prompt(tmp_path("prompt.mid"), 0);
    ck_assert_int_eq(run("sample --ckpt run/model.safetensors --prompt prompt.mid --tokens 100 "
                         "--seed 1 --out p.mid --png p.png"),
                     0);
    tu_assert_stderr_has(&music, "the model sees its last 32 (context 64)");
    music_notes prompt = {0}, q = {0}, piece = {0};
    music_tokens pt = {0};
    read_notes(tmp_path("prompt.mid"), &prompt);
    TU_OK(music_perf_encode(prompt.v, prompt.n, &pt));
    TU_OK(music_perf_decode(pt.v, pt.n, &q));
    read_notes(tmp_path("p.mid"), &piece);
    ck_assert_uint_ge(piece.n, q.n);
    snprintf(want, sizeof want, "the prompt's %zu notes", q.n);
    tu_assert_stdout_has(&music, want);
    double prompt_end = 0;
    for (size_t i = 0; i < q.n; i++) prompt_end = q.v[i].off > prompt_end ? q.v[i].off : prompt_end;
    size_t in_prompt = 0;
    for (size_t i = 0; i < piece.n; i++) in_prompt += piece.v[i].on < prompt_end - 0.005;
    ck_assert_uint_ge(in_prompt, q.n);
    for (size_t i = 0, j = 0; i < q.n; i++) {
        /* each prompt note is there (ticks of 480 per quarter at 120 bpm: ~1 ms) */
        while (j < piece.n &&
               !(piece.v[j].pitch == q.v[i].pitch && fabs(piece.v[j].on - q.v[i].on) < 0.002))
            j++;
        ck_assert_msg(j < piece.n, "prompt note %zu (pitch %d at %.3f s) is missing", i,
                      q.v[i].pitch, q.v[i].on);
    }
    music_notes_free(&prompt);
    music_notes_free(&q);
    music_notes_free(&piece);
    music_tokens_free(&pt);
    png_size(tmp_path("p.png"), &w, &h);
    ck_assert_int_eq(w, 1200);

    /* greedy decoding ignores the seed */
    ck_assert_int_eq(run("sample --ckpt run/model.safetensors --tokens 60 --temperature 0 --seed 1 "
                         "--out g1.mid"),
                     0);
    ck_assert_int_eq(
        run("sample --ckpt run/model.safetensors --tokens 60 --top-k 1 --seed 2 --out g2.mid"), 0);
    ma = tu_read_file(tmp_path("g1.mid"), &na);
    mb = tu_read_file(tmp_path("g2.mid"), &nb);
    ck_assert_uint_eq(na, nb);
    ck_assert_mem_eq(ma, mb, na);
    free(ma);
    free(mb);
    remove_tmpdir();
}
END_TEST

START_TEST(long_samples_and_every_positional_scheme) {
    tu_find_program(&music);
    make_tmpdir();
    /* a learned table of 64 rows: 300 tokens go on past it from the last half block; alibi comes
     * from the plugin beside the program */
    static const char *const schemes[] = {"learned", "alibi", "none", "sinusoidal",
                                          "learned+sinusoidal"};
    for (size_t i = 0; i < sizeof schemes / sizeof schemes[0]; i++) {
        char args[512];
        snprintf(args, sizeof args,
                 "train --out r%zu " TINY " --steps 8 --pos %s --sample-tokens 0 "
                 "--eval-every 0",
                 i, schemes[i]);
        ck_assert_msg(run(args) == 0, "%s: %s", schemes[i], music.err);
        /* the model may end a piece early (END): some seed goes the whole way */
        bool whole = false;
        for (int seed = 3; seed < 10 && !whole; seed++) {
            snprintf(args, sizeof args,
                     "sample --ckpt r%zu/model.safetensors --tokens 300 --seed %d --out s%zu.mid "
                     "--temperature 0.7",
                     i, seed, i);
            ck_assert_msg(run(args) == 0, "%s: %s", schemes[i], music.err);
            whole = strstr(music.out, "music: 300 tokens in") != NULL;
        }
        ck_assert_msg(whole, "%s: no sample went past the context: %s", schemes[i], music.out);
        snprintf(args, sizeof args, "eval --ckpt r%zu/model.safetensors", i);
        ck_assert_msg(run(args) == 0, "%s: %s", schemes[i], music.err);
        tu_assert_stdout_has(&music, "val_loss ");
    }
    remove_tmpdir();
}
END_TEST

/* The loss of every validation target, one window at a time, from the token arrays directly. */
static double reference_val_loss(const char *ckpt, uint32_t pieces, int64_t *count) {
    mg_gpt *g;
    TU_OK(music_load(ckpt, &g, NULL));
    int64_t T = mg_gpt_cfg(g)->block_size;
    music_corpus c;
    gen_corpus(pieces, &c);
    music_data d;
    TU_OK(music_data_make(&d, &c, "gen"));
    mg_ctx *ctx = mg_ctx_new(0);
    double sum = 0;
    *count = 0;
    for (size_t p = 0; p < d.n; p++) {
        if (!d.pieces[p].val) continue;
        const int32_t *t = d.pieces[p].tok;
        int64_t n = (int64_t)d.pieces[p].n;
        for (int64_t s = 0; s + 1 < n; s += T) {
            int64_t len = n - 1 - s < T ? n - 1 - s : T;
            mg_ctx_reset(ctx);
            mg_tensor *x = mg_tensor_wrap(ctx, MG_I32, 2, (int64_t[]){1, len}, (void *)(t + s));
            mg_tensor *y = mg_tensor_wrap(ctx, MG_I32, 2, (int64_t[]){1, len}, (void *)(t + s + 1));
            sum += (double)mg_gpt_loss(g, ctx, x, y, NULL)->data[0] * (double)len;
            *count += len;
        }
    }
    mg_ctx_free(ctx);
    music_data_free(&d);
    music_corpus_free(&c);
    mg_gpt_free(g);
    return sum / (double)*count;
}

START_TEST(eval_reports_the_validation_loss) {
    tu_find_program(&music);
    make_tmpdir();
    ck_assert_int_eq(run("train --out run " TINY " --steps 30 --sample-tokens 0"), 0);
    ck_assert_int_eq(run("eval --ckpt run/model.safetensors --windows 0 --batch 3 --threads 1"), 0);
    const char *vl = strstr(music.out, "\nval_loss "),
               *bits = strstr(music.out, "\nbits_per_token "),
               *tok = strstr(music.out, "\ntokens ");
    ck_assert_msg(vl && bits && tok, "%.1500s", music.out);
    double loss = strtod(vl + 10, NULL);
    ck_assert_double_eq_tol(strtod(bits + 16, NULL), loss / log(2.0), 1e-5);
    int64_t count;
    double ref = reference_val_loss(tmp_path("run/model.safetensors"), 16, &count);
    ck_assert_double_eq_tol(loss, ref, 2e-5);
    ck_assert_int_eq(strtoll(tok + 8, NULL, 10), count);
    tu_assert_stdout_has(&music,
                         "data generated corpus (16 pieces)\npieces 16\nvalidation_pieces 2\n");
    /* the run's own window count by default (8), and the same loss in any batch size (up to the
     * order of float sums) */
    ck_assert_int_eq(run("eval --ckpt run/model.safetensors --batch 1"), 0);
    tu_assert_stdout_has(&music, "\nwindows 8\n");
    /* what it scores first, then progress (plain lines at each tenth when not on a terminal),
     * then the numbers */
    const char *head = strstr(music.out, "\nwindow_length "), *line = strstr(music.out, "music eval: 1/8 windows (12%), loss so far "),
               *res = strstr(music.out, "\ntokens ");
    ck_assert_msg(head && line && res && head < line && line < res, "%.1500s", music.out);
    double one = strtod(strstr(music.out, "\nval_loss ") + 10, NULL);
    ck_assert_int_eq(run("eval --ckpt run/model.safetensors --batch 5"), 0);
    ck_assert_double_eq_tol(strtod(strstr(music.out, "\nval_loss ") + 10, NULL), one, 1e-5);
    remove_tmpdir();
}
END_TEST

START_TEST(wav_through_timidity_when_installed) {
    tu_find_program(&music);
    make_tmpdir();
    ck_assert_int_eq(run("train --out run " TINY " --steps 5 --sample-tokens 0 --eval-every 0"), 0);
    /* without timidity on PATH: a clear message before any work, nothing written */
    ck_assert_int_eq(run_env("env PATH=/nonexistent",
                             "sample --ckpt run/model.safetensors --out x.mid --wav x.wav"),
                     1);
    tu_assert_stderr_has(
        &music, "--wav needs timidity, which is not installed (Debian: apt-get install timidity)");
    ck_assert_int_ne(access(tmp_path("x.mid"), F_OK), 0);
    /* a timidity that fails (here a stand-in without a sound font): its complaint is quoted, no
     * WAV (nor its temporary files) is left */
    ck_assert_int_eq(mkdir(tmp_path("bin"), 0777), 0);
    const char *fake = "#!/bin/sh\necho '/etc/timidity/none.cfg: No such file or directory' >&2\n"
                       "exit 1\n";
    tu_write_bytes(tmp_path("bin/timidity"), fake, strlen(fake));
    ck_assert_int_eq(chmod(tmp_path("bin/timidity"), 0755), 0);
    char env[700];
    snprintf(env, sizeof env, "env PATH='%s/bin':\"$PATH\"", tmpdir);
    ck_assert_int_eq(
        run_env(env, "sample --ckpt run/model.safetensors --tokens 20 --out f.mid --wav f.wav"), 1);
    tu_assert_stderr_has(&music, "f.wav: timidity failed to render f.mid (exit status 1): "
                                 "/etc/timidity/none.cfg: No such file or directory");
    tu_assert_stderr_has(&music, "apt-get install fluid-soundfont-gm");
    ck_assert_int_ne(access(tmp_path("f.wav"), F_OK), 0);
    ck_assert_int_ne(access(tmp_path("f.wav.tmp"), F_OK), 0);
    ck_assert_int_ne(access(tmp_path("f.wav.timidity.log"), F_OK), 0);
    /* with it (and a sound font it can use), a WAV file */
    char probe[1024];
    ck_assert_int_eq(run("gen --out g --pieces 1"), 0);
    snprintf(probe, sizeof probe,
             "timidity -Ow -o '%s/probe.wav' '%s/g/gen_1_0000.mid' >/dev/null 2>&1", tmpdir,
             tmpdir);
    if (system(probe) != 0) {
        fprintf(stderr,
                "# timidity with a sound font is not installed: WAV rendering not tested\n");
        remove_tmpdir();
        return;
    }
    ck_assert_int_eq(
        run("sample --ckpt run/model.safetensors --tokens 80 --seed 2 --out w.mid --wav w.wav"), 0);
    tu_assert_stdout_has(&music, "wrote w.mid, w.png, w.wav");
    size_t n;
    uint8_t *b = tu_read_file(tmp_path("w.wav"), &n);
    ck_assert_uint_gt(n, 44);
    ck_assert_mem_eq(b, "RIFF", 4);
    ck_assert_mem_eq(b + 8, "WAVE", 4);
    free(b);
    ck_assert_int_ne(access(tmp_path("w.wav.tmp"), F_OK), 0);
    remove_tmpdir();
}
END_TEST

/* A full disk under what music writes: the log, the final sample of a training run, a sample's
 * MIDI file and piano roll, standard output; a WAV target that is a device is refused before
 * timidity would write beside it. Each fails the command with the file's name and the reason. */
START_TEST(outputs_on_a_full_disk_fail_by_name) {
    tu_find_program(&music);
    make_tmpdir();
    ck_assert_int_eq(mkdir(tmp_path("full"), 0755), 0);
    ck_assert_int_eq(symlink("/dev/full", tmp_path("full/log.jsonl")), 0);
    ck_assert_int_eq(run("train --out full " TINY " --steps 5 --sample-tokens 0 --eval-every 0"), 1);
    tu_assert_stderr_has(&music, "step 1: full/log.jsonl: cannot write the log file: No space left on device");
    ck_assert_int_eq(mkdir(tmp_path("run"), 0755), 0);
    ck_assert_int_eq(symlink("/dev/full", tmp_path("run/sample.mid")), 0);
    ck_assert_int_eq(run("train --out run " TINY " --steps 5 --sample-tokens 20 --eval-every 0"), 1);
    tu_assert_stderr_has(&music, "run/sample.mid: write failed: No space left on device");
    ck_assert_int_eq(access(tmp_path("run/model.safetensors"), F_OK), 0);

    ck_assert_int_eq(run("sample --ckpt run/model.safetensors --tokens 20 --out /dev/full --no-png"), 1);
    tu_assert_stderr_has(&music, "/dev/full: write failed: No space left on device");
    ck_assert_int_eq(run("sample --ckpt run/model.safetensors --tokens 20 --out p.mid --png /dev/full"), 1);
    tu_assert_stderr_has(&music, "/dev/full: write failed: No space left on device");
    ck_assert_int_eq(access(tmp_path("p.mid"), F_OK), 0);
    ck_assert_int_eq(tu_run_stdout_to(&music, tmpdir, "sample --ckpt run/model.safetensors --tokens 20 --out q.mid",
                                      "/dev/full"),
                     1);
    tu_assert_stderr_has(&music, "music: standard output: write failed: No space left on device");

    ck_assert_int_eq(mkdir(tmp_path("bin"), 0777), 0);
    const char *fake = "#!/bin/sh\nexit 0\n";
    tu_write_bytes(tmp_path("bin/timidity"), fake, strlen(fake));
    ck_assert_int_eq(chmod(tmp_path("bin/timidity"), 0755), 0);
    char env[700];
    snprintf(env, sizeof env, "env PATH='%s/bin':\"$PATH\"", tmpdir);
    ck_assert_int_eq(run_env(env, "sample --ckpt run/model.safetensors --tokens 20 --out w.mid --wav /dev/null"), 1);
    tu_assert_stderr_has(&music, "/dev/null: not a regular file");
    struct stat sb;
    ck_assert_int_eq(lstat("/dev/null", &sb), 0);
    ck_assert(S_ISCHR(sb.st_mode));
    tu_assert_dev_full_intact();
    remove_tmpdir();
}
END_TEST

START_TEST(bad_inputs_give_clear_errors) {
    tu_find_program(&music);
    make_tmpdir();
    ck_assert_int_eq(mkdir(tmp_path("empty"), 0777), 0);
    ck_assert_int_eq(mkdir(tmp_path("junk"), 0777), 0);
    ck_assert_int_eq(mkdir(tmp_path("one"), 0777), 0);
    tu_write_bytes(tmp_path("empty/notes.txt"), "not music", 9);
    /* a header chunk that claims 6 bytes and stops after 2 */
    tu_write_bytes(tmp_path("junk/broken.mid"), "MThd\0\0\0\6\0\1", 10);
    tu_write_bytes(tmp_path("corrupt.mid"), "MThd\0\0\0\6\0\0\0\1\0\x60MTrk\0\0\x10\0\0\x90", 25);
    write_prompt(tmp_path("one/only.mid"), 1);
    /* a well-formed file with no notes */
    music_midi_file silent;
    music_midi_init(&silent, 0, 480);
    size_t tr;
    TU_OK(music_midi_add_track(&silent, &tr));
    TU_OK(music_midi_add_tempo(&silent, tr, 0, 500000));
    TU_OK(music_midi_write(tmp_path("silent.mid"), &silent, NULL));
    music_midi_free(&silent);
    /* a checkpoint of another kind: a textgen-style character model */
    save_model(tmp_path("text.safetensors"), 4,
               (mg_st_meta[]){{"tokenizer", "char"}, {"chars", "abcd"}}, 2);
    ck_assert_int_eq(mkdir(tmp_path("textrun"), 0777), 0);
    save_model(tmp_path("textrun/model.safetensors"), 4,
               (mg_st_meta[]){{"tokenizer", "char"}, {"chars", "abcd"}}, 2);
    ck_assert_int_eq(run("train --out run " TINY " --steps 3 --sample-tokens 0 --eval-every 0"), 0);
    static const tu_bad_run cases[] = {
        {"train --data missing --out r", 1,
         "missing: cannot open directory: No such file or directory"},
        {"train --data empty --out r", 1, "empty: no MIDI files (.mid or .midi) found"},
        {"train --data junk --out r", 1,
         "junk: none of the 1 MIDI files found could be used (the first: junk/broken.mid: offset"},
        {"train --out r --nope", 2, "unknown option '--nope'"},
        {"train --out r --steps many", 2, "--steps expects an integer in 1..1000000000, got 'many'"},
        {"train --out r --steps 0", 2, "--steps: 0 is out of range 1..1000000000"},
        {"train --out r --lr -1", 2, "--lr: -1 is out of range 0..10"},
        {"train --out r --stretch 0.9", 2, "--stretch: 0.9 is out of range 0..0.5"},
        {"train --out r --block-size 1", 2, "--block-size: 1 is out of range 2..1048576"},
        {"train --out r --batch 65536 --block-size 1024", 2,
         "--batch 65536 x --block-size 1024 is too large (at most 16777216 tokens a step)"},
        {"train --out r --batch 1152921504606846977", 2,
         "--batch: 1152921504606846977 is out of range 1..65536"},
        {"train --out r --threads 4294967297", 2, "--threads: 4294967297 is out of range 0..1024"},
        {"train --out r --pieces 4294967297", 2, "--pieces: 4294967297 is out of range 1..100000"},
        {"train --data /dev/zero --out r", 1, "/dev/zero: cannot open directory: Not a directory"},
        {"train --out r " TINY " --n-head 3", 2, "music train: --n-embd 32 is not a multiple of --n-head 3\n"},
        {"train --out r " TINY " --pos nosuchscheme", 1, "nosuchscheme"},
        {"train --out nothing --resume", 1, "nothing holds no checkpoint"},
        {"train --out textrun --resume", 1, "textrun/model.safetensors: not a music model"},
        {"train --out run " TINY " --steps 3", 1, "run already holds a run"},
        {"sample --ckpt missing.safetensors", 1,
         "train a model first (music train) or pass --ckpt FILE"},
        {"sample --ckpt corrupt.mid", 1, "corrupt.mid"},
        {"sample --ckpt text.safetensors --out t.mid", 1,
         "text.safetensors: not a music model: metadata 'tokenizer' is 'char' (a textgen "
         "checkpoint?)"},
        {"sample --ckpt run/model.safetensors --prompt corrupt.mid", 1, "corrupt.mid: offset"},
        {"sample --ckpt run/model.safetensors --prompt nope.mid", 1, "nope.mid"},
        {"sample --ckpt run/model.safetensors --prompt silent.mid", 1,
         "silent.mid: no notes to continue"},
        {"sample --ckpt run/model.safetensors --top-p 2", 2, "--top-p: 2 is out of range 0..1"},
        {"sample --ckpt run/model.safetensors --tokens 0", 2, "--tokens: 0 is out of range 1..16777216"},
        {"sample --ckpt run/model.safetensors --tokens 4611686018427387904", 2,
         "--tokens: 4611686018427387904 is out of range 1..16777216"},
        {"sample --ckpt run/model.safetensors --temperature -1", 2,
         "--temperature: -1 is out of range 0..100"},
        {"sample --ckpt run/model.safetensors --out nodir/x.mid", 1, "nodir/x.mid"},
        {"sample --ckpt run/model.safetensors --out x.mid --png nodir/x.png", 1, "nodir/x.png"},
        {"eval --ckpt text.safetensors", 1, "not a music model"},
        {"eval --ckpt missing.safetensors", 1, "train a model first"},
        {"eval --ckpt run/model.safetensors --data empty", 1, "empty: no MIDI files"},
        {"eval --ckpt run/model.safetensors --data missing", 1, "missing: cannot open directory"},
        {"eval --ckpt run/model.safetensors --data one", 1,
         "one: 1 piece: no validation split to evaluate"},
        {"eval --ckpt run/model.safetensors --batch 0", 2, "--batch: 0 is out of range 1..65536"},
        /* batch x block once wrapped in the evaluator */
        {"eval --ckpt run/model.safetensors --windows 0 --batch 288230376151711745", 2,
         "--batch: 288230376151711745 is out of range 1..65536"},
        {"eval --ckpt run/model.safetensors --windows -1", 2, "--windows: -1 is out of range 0..1048576"},
        {"eval --ckpt run/model.safetensors --threads 4294967297", 2,
         "--threads: 4294967297 is out of range 0..1024"},
        {"frobnicate", 2, "unknown command 'frobnicate'"},
    };
    tu_expect_bad_runs(&music, tmpdir, cases, sizeof cases / sizeof cases[0]);
    /* nothing half-written by the failures */
    ck_assert_int_ne(access(tmp_path("nodir"), F_OK), 0);
    ck_assert_int_ne(access(tmp_path("t.mid"), F_OK), 0);
    /* --force replaces a run; --help lists the options */
    ck_assert_int_eq(run("train --out run " TINY " --steps 3 --force --sample-tokens 0"), 0);
    ck_assert_int_eq(run("train --help"), 0);
    tu_assert_stdout_has(&music, "--block-size");
    tu_assert_stdout_has(&music, "--no-augment");
    tu_assert_stdout_has(&music, "(default rope)");
    tu_assert_stdout_has(&music, "--transpose N");
    tu_assert_stdout_has(&music, "(0..24, default 3)");
    ck_assert_int_eq(run("help"), 0);
    tu_assert_stdout_has(&music, "sample [--ckpt FILE] [--prompt FILE.mid]");
    /* a resumed run's remembered settings are held to the options' ranges */
    ck_assert_int_eq(run("train --out res " TINY " --steps 6 --stop-after 2 --sample-tokens 0 --eval-every 0"), 0);
    tu_set_meta(tmp_path("res/model.safetensors"), "music.transpose", "99");
    ck_assert_int_eq(run("train --out res --resume --sample-tokens 0"), 2);
    tu_assert_stderr_has(&music, "--transpose: 99 is out of range 0..24 (the value saved in res/model.safetensors)");
    tu_set_meta(tmp_path("res/model.safetensors"), "music.transpose", "3");
    tu_set_meta(tmp_path("res/model.safetensors"), "music.stretch", "nan");
    ck_assert_int_eq(run("train --out res --resume --sample-tokens 0"), 2);
    tu_assert_stderr_has(&music, "--stretch: nan is out of range 0..0.5");
    remove_tmpdir();
}
END_TEST

/* A checkpoint whose context is a single token: generation goes on from the last half block, so
 * there is no room for a new token; it once looped for ever making none. */
START_TEST(a_context_of_one_token_is_refused) {
    tu_find_program(&music);
    make_tmpdir();
    mg_gpt_config cfg = mg_gpt_config_default();
    cfg.vocab_size = MUSIC_PERF_VOCAB, cfg.block_size = 1, cfg.n_layer = 1, cfg.n_head = 2, cfg.n_embd = 16;
    snprintf(cfg.pos, sizeof cfg.pos, "rope");
    mg_rng r = mg_rng_make(1);
    mg_gpt *g;
    TU_OK(mg_gpt_new(&cfg, &r, &g));
    TU_OK(mg_gpt_save(g, tmp_path("one.safetensors"), (mg_st_meta[]){{"tokenizer", MUSIC_TOKENIZER}}, 1));
    int32_t start = MUSIC_PERF_START;
    music_gen_req req = {.prog = "music", .tokens = 8, .mid = tmp_path("one.mid")};
    music_gen_result res;
    ck_assert_int_eq(music_generate(g, &start, 1, &req, &r, &res), MG_ERR_INVALID);
    tu_assert_error_has("music: the model's context (block_size 1) must be 2 tokens or more to generate");
    ck_assert_int_ne(access(tmp_path("one.mid"), F_OK), 0);
    mg_gpt_free(g);
    mg_gpt *h = (mg_gpt *)1;
    ck_assert_int_eq(music_load(tmp_path("one.safetensors"), &h, NULL), MG_ERR_FORMAT);
    ck_assert_ptr_null(h);
    tu_assert_error_has("one.safetensors: metadata 'block_size' is 1, a music model needs 2 or more");
    /* the program says so too, rather than hang (timeout ends it if it does: a failure) */
    ck_assert_int_eq(run_env("timeout 60", "sample --ckpt one.safetensors --out one.mid --tokens 8"), 1);
    tu_assert_stderr_has(&music, "metadata 'block_size' is 1, a music model needs 2 or more");
    remove_tmpdir();
}
END_TEST

Suite *music_suite(void) {
    Suite *s = suite_create("music_model");
    TCase *tc = tcase_create("data");
    tcase_add_test(tc, split_is_by_piece_deterministic_and_spread);
    tcase_add_test(tc, data_make_names_what_is_missing);
    tcase_add_test(tc, windows_pad_past_the_end_of_a_piece);
    tcase_add_test(tc, augmented_windows_transpose_and_stretch_the_piece);
    tcase_add_test(tc, batches_draw_every_train_start_alike);
    tcase_add_test(tc, validation_windows_cover_each_target_once);
    tcase_add_test(tc, piano_roll_png_decodes_with_both_parts);
    tcase_add_test(tc, load_refuses_what_is_not_a_music_model);
    suite_add_tcase(s, tc);
    tc = tcase_create("program");
    tcase_add_test(tc, training_learns_the_generated_corpus);
    tcase_add_test(tc, a_context_of_one_token_is_refused);
    tcase_add_test(tc, resume_continues_exactly);
    tcase_add_loop_test(tc, signal_saves_a_resumable_checkpoint, 0, 2);
    tcase_add_test(tc, sampling_is_deterministic_and_continues_a_prompt);
    tcase_add_test(tc, long_samples_and_every_positional_scheme);
    tcase_add_test(tc, eval_reports_the_validation_loss);
    tcase_add_test(tc, wav_through_timidity_when_installed);
    tcase_add_test(tc, bad_inputs_give_clear_errors);
    if (tu_have_dev_full())
        tcase_add_test(tc, outputs_on_a_full_disk_fail_by_name);
    else
        fprintf(stderr, "# /dev/full not found: outputs_on_a_full_disk_fail_by_name skipped\n");
    suite_add_tcase(s, tc);
    return s;
}

MG_TEST_MAIN(music_suite)
