/* Writes the seed corpus of the fuzz targets (the files in fuzz/corpus were made by it):
 *
 *     fuzz_make_corpus OUT      writes OUT/safetensors, OUT/config, OUT/midi
 *
 * Valid files come from minigrad's own writers (mg_safetensors_write, the music example's MIDI
 * writer and generator); the odd ones are made by cutting those short or by hand, each aimed at
 * one check of a reader. Every file is small: the fuzzer mutates them, it does not need them big. */
#include "minigrad/safetensors.h"
#include "music.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *out_root;

static void die(const char *what) {
    fprintf(stderr, "fuzz_make_corpus: %s: %s\n", what, mg_last_error());
    exit(1);
}

static const char *path_of(const char *dir, const char *name) {
    static char p[4096];
    snprintf(p, sizeof p, "%s/%s/%s", out_root, dir, name);
    return p;
}

static void make_dir(const char *dir) {
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", out_root, dir);
    if (mkdir(p, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "fuzz_make_corpus: mkdir %s: %s\n", p, strerror(errno));
        exit(1);
    }
}

static void put(const char *dir, const char *name, const void *bytes, size_t n) {
    const char *p = path_of(dir, name);
    FILE *fp = fopen(p, "wb");
    if (!fp || fwrite(bytes, 1, n, fp) != n || fclose(fp) != 0) {
        fprintf(stderr, "fuzz_make_corpus: writing %s: %s\n", p, strerror(errno));
        exit(1);
    }
}

static uint8_t *slurp(const char *p, size_t *n) {
    FILE *fp = fopen(p, "rb");
    if (!fp) die(p);
    static uint8_t buf[1 << 16];
    *n = fread(buf, 1, sizeof buf, fp);
    fclose(fp);
    return buf;
}

/* ---- safetensors ---- */

/* A file of the given JSON header (not padded) and `data_len` data bytes. */
static void st_raw(const char *name, const char *json, size_t data_len) {
    size_t hl = strlen(json);
    uint8_t *b = calloc(8 + hl + data_len + 1, 1);
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)((uint64_t)hl >> (8 * i));
    memcpy(b + 8, json, hl);
    for (size_t i = 0; i < data_len; i++) b[8 + hl + i] = (uint8_t)(i * 37);
    put("safetensors", name, b, 8 + hl + data_len);
    free(b);
}

static void safetensors_seeds(void) {
    make_dir("safetensors");
    const float w[6] = {1, -2, 0.5f, 3, 1e-3f, -0.0f}, s = 7, v[24] = {0};
    mg_st_entry t[] = {
        {"h.0.attn.c_attn.weight", 2, {2, 3}, w},
        {"scale", 0, {0}, &s},
        {"empty", 1, {0}, NULL},
        {"wpe.weight", 4, {1, 2, 3, 4}, v},
    };
    mg_st_meta m[] = {{"format", "minigrad-gpt"}, {"n_layer", "1"}, {"pos", "learned"}, {"note", "caf\xc3\xa9 \"q\"\n"}};
    if (mg_safetensors_write(path_of("safetensors", "valid_small.safetensors"), t, 4, m, 4) != MG_OK) die("write");
    if (mg_safetensors_write(path_of("safetensors", "valid_no_meta.safetensors"), t, 2, NULL, 0) != MG_OK) die("write");
    if (mg_safetensors_write(path_of("safetensors", "valid_empty.safetensors"), NULL, 0, NULL, 0) != MG_OK) die("write");
    if (mg_safetensors_write(path_of("safetensors", "valid_meta_only.safetensors"), NULL, 0, m, 2) != MG_OK) die("write");

    /* cut short: in the length, in the header, in the data */
    size_t n;
    uint8_t *b = slurp(path_of("safetensors", "valid_small.safetensors"), &n);
    uint8_t *copy = malloc(n);
    memcpy(copy, b, n);
    put("safetensors", "cut_in_length.safetensors", copy, 5);
    put("safetensors", "cut_in_header.safetensors", copy, 8 + 40);
    put("safetensors", "cut_in_data.safetensors", copy, n - 6);
    /* one more byte of data than the tensors claim */
    uint8_t *longer = calloc(n + 1, 1);
    memcpy(longer, copy, n);
    put("safetensors", "trailing_byte.safetensors", longer, n + 1);
    free(longer);
    /* the header length field says more than the file holds, and an absurd length */
    copy[0] = 0xFF, copy[1] = 0x7F;
    put("safetensors", "length_past_end.safetensors", copy, n);
    memset(copy, 0xFF, 8);
    put("safetensors", "length_absurd.safetensors", copy, n);
    free(copy);

    /* hand-made headers, one check each */
    st_raw("gap.safetensors", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8);
    st_raw("overlap.safetensors",
           "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
           "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
           8);
    st_raw("zero_size_inside.safetensors",
           "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
           "\"z\":{\"dtype\":\"F32\",\"shape\":[0,5],\"data_offsets\":[4,4]}}",
           8);
    st_raw("duplicate_name.safetensors",
           "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
           "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
           8);
    st_raw("dtype_f16.safetensors", "{\"a\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[0,4]}}", 4);
    st_raw("shape_mismatch.safetensors", "{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8);
    st_raw("shape_huge.safetensors",
           "{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,0]}}", 0);
    st_raw("shape_5d.safetensors", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1],\"data_offsets\":[0,4]}}", 4);
    st_raw("float_numbers.safetensors", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2.0],\"data_offsets\":[0,8.0]}}", 8);
    st_raw("negative.safetensors", "{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4);
    st_raw("offsets_reversed.safetensors", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,0]}}", 4);
    st_raw("meta_not_string.safetensors", "{\"__metadata__\":{\"k\":1},\"a\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]}}", 4);
    st_raw("meta_twice.safetensors", "{\"__metadata__\":{},\"__metadata__\":{\"k\":\"v\"}}", 0);
    st_raw("escaped_nul.safetensors", "{\"__metadata__\":{\"k\":\"a\\u0000b\"}}", 0);
    st_raw("escapes.safetensors",
           "{\"__metadata__\":{\"\\u00e9\\\\\":\"\\ud83d\\ude00\\t\\\"\"},"
           "\"a\\/b\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]}}",
           4);
    st_raw("not_utf8.safetensors", "{\"__metadata__\":{\"k\":\"\xc3\x28\"}}", 0);
    st_raw("trailing_garbage.safetensors", "{} x", 0);
    st_raw("not_object.safetensors", "[1,2,3]", 0);
    st_raw("nested.safetensors", "{\"a\":{\"dtype\":\"F32\",\"shape\":[[[[[[[[1]]]]]]]],\"data_offsets\":{\"x\":[0,4]}}}", 4);
    st_raw("deep_numbers.safetensors",
           "{\"a\":{\"dtype\":\"F32\",\"shape\":[9007199254740993],\"data_offsets\":[0,1e400]}}", 0);
}

/* ---- config files ---- */

static void cfg(const char *name, const char *text) {
    put("config", name, text, strlen(text));
}

static void config_seeds(void) {
    make_dir("config");
    cfg("gpt.cfg",
        "# A small GPT\n[gpt]\nvocab_size = 256      # 256\nblock_size = 128\nn_layer    = 4\nn_head     = 4\n"
        "n_embd     = 128\npos        = learned  # learned | rope | alibi\npos_opts   = base=10000,std=0.02\n"
        "dropout    = 0.0\ncausal     = true\ngelu       = tanh\nemb_scale  = sqrt\nhead       = linear\n"
        "head_bias  = true\ninit_std   = 0.02\n");
    cfg("model.cfg",
        "[embedding]\nvocab = 11\ndim = 8\nname = wte\n\n[learned_pos]\nmax_len = 16\ndim = 8\n\n"
        "[decoder_block]\ndim = 8\nn_head = 2\nhidden = 32\ndropout = 0.1\n\n[layernorm]\ndim = 8\neps = 1e-5\n"
        "\n[linear]\nin = 8\nout = 11\nbias = false\n");
    cfg("crlf_comments.cfg", "\r\n; leading comment\r\n[x]\r\nk = v ; comment\r\nname=a#b\r\n[y] # after\r\nz=1\r\n");
    cfg("values.cfg",
        "[v]\nint = -9223372036854775808\nbig = 9223372036854775808\nhex = 0x10\nfloat = 1e308\ninf = inf\n"
        "nan = nan\nyes = YES\noff = Off\nempty_list = ,,,\nlist = a=1, b = 2 ,c=\nspaces =   padded   \n");
    cfg("names.cfg", "[a.b+c-d_e]\nk.1+2-3_4 = =\n[gpt]\nn_embd = 130\nn_head = 4\n");
    cfg("bad_section.cfg", "[linear\nin = 3\n");
    cfg("bad_key.cfg", "[x]\nthis is wrong\n");
    cfg("key_first.cfg", "in = 3\n[x]\n");
    cfg("dup_key.cfg", "[x]\n\n k = 1\nk=2\n");
    cfg("no_value.cfg", "[x]\nk =   # nothing\n");
    cfg("text_after.cfg", "[x] junk\n");
    cfg("empty_section.cfg", "[]\n");
    cfg("no_newline.cfg", "[x]\nk=v");
    /* a line of 1023 characters (the longest allowed) and one of 1024 */
    char line[1100];
    memset(line, 'v', sizeof line);
    memcpy(line, "[x]\nk=", 6);
    line[4 + 1023] = '\n';
    line[4 + 1024] = 0;
    cfg("line_1023.cfg", line);
    line[4 + 1023] = 'v';
    line[4 + 1024] = '\n';
    line[4 + 1025] = 0;
    cfg("line_1024.cfg", line);
    put("config", "nul_byte.cfg", "[x]\nk=1\0\nj=2\n", 13);
}

/* ---- MIDI ---- */

static void midi_file(const char *name, const music_midi_file *f, bool plain) {
    music_midi_write_opts o = {.no_running_status = plain};
    if (music_midi_write(path_of("midi", name), f, &o) != MG_OK) die(name);
}

static void midi_seeds(void) {
    make_dir("midi");
    /* a little of everything the reader knows, in format 0 and format 1 */
    for (int format = 0; format < 2; format++) {
        music_midi_file f;
        size_t t0, t1;
        music_midi_init(&f, format, 96);
        if (music_midi_add_track(&f, &t0)) die("track");
        t1 = t0;
        if (format == 1 && music_midi_add_track(&f, &t1)) die("track");
        static const uint8_t ts[4] = {4, 2, 24, 8}, gm_on[5] = {0x7E, 0x7F, 0x09, 0x01, 0xF7}, esc[2] = {0xF3, 1};
        music_midi_add_meta(&f, t0, 0, MUSIC_MIDI_META_TRACK_NAME, "seed", 4);
        music_midi_add_meta(&f, t0, 0, MUSIC_MIDI_META_TIME_SIGNATURE, ts, 4);
        music_midi_add_sysex(&f, t0, 0, MUSIC_MIDI_SYSEX, gm_on, 5);
        music_midi_add_tempo(&f, t0, 0, 500000);
        music_midi_add_tempo(&f, t0, 192, 300000);
        music_midi_add_channel(&f, t1, 0, 0xC0, 0, 0);
        music_midi_add_channel(&f, t1, 0, 0xB0, 64, 127); /* pedal down */
        music_midi_add_channel(&f, t1, 0, 0x90, 60, 100);
        music_midi_add_channel(&f, t1, 48, 0x90, 64, 90);
        music_midi_add_channel(&f, t1, 96, 0x80, 60, 0);
        music_midi_add_channel(&f, t1, 96, 0x90, 64, 0); /* velocity 0: off */
        music_midi_add_channel(&f, t1, 100, 0xE0, 0, 0x40);
        music_midi_add_channel(&f, t1, 110, 0xD0, 30, 0);
        music_midi_add_sysex(&f, t1, 120, MUSIC_MIDI_SYSEX_ESCAPE, esc, 2);
        music_midi_add_channel(&f, t1, 144, 0xB0, 64, 0); /* pedal up */
        music_midi_add_channel(&f, t1, 150, 0x99, 36, 120);
        music_midi_add_channel(&f, t1, 160, 0x89, 36, 0);
        music_midi_add_channel(&f, t1, 192, 0x90, 67, 80); /* never released */
        f.tracks[t1].end_tick = 240;
        midi_file(format ? "features_f1.mid" : "features_f0_running.mid", &f, false);
        if (!format) midi_file("features_f0_plain.mid", &f, true);
        music_midi_free(&f);
    }
    /* the first bar of two generated pieces */
    for (uint32_t i = 0; i < 2; i++) {
        music_midi_file f;
        if (music_generate_piece(3, i, &f)) die("generate");
        for (size_t t = 0; t < f.ntracks; t++) {
            music_midi_sort_track(&f.tracks[t]);
            size_t k = 0;
            while (k < f.tracks[t].n && f.tracks[t].ev[k].tick < 480) k++;
            f.tracks[t].n = k;
            f.tracks[t].end_tick = 480;
        }
        char name[32];
        snprintf(name, sizeof name, "gen_%u.mid", i);
        midi_file(name, &f, false);
        music_midi_free(&f);
    }
    /* hand-made bytes */
    static const uint8_t smpte[] = {'M', 'T', 'h', 'd', 0, 0, 0, 6, 0, 0, 0, 1, 0xE7, 40,  /* 25 fps, 40 ticks */
                                    'M', 'T', 'r', 'k', 0, 0, 0, 12, 0, 0x90, 60, 100, 10, 60, 0, 0, 0xFF, 0x2F, 0, 0};
    put("midi", "smpte.mid", smpte, sizeof smpte);
    static const uint8_t long_header[] = {'M', 'T', 'h', 'd', 0, 0, 0, 8, 0, 1, 0, 2, 0, 96, 0xAB, 0xCD,
                                          'X', 'Y', 'Z', 'W', 0, 0, 0, 2, 1, 2, /* unknown chunk, skipped */
                                          'M', 'T', 'r', 'k', 0, 0, 0, 4, 0, 0xFF, 0x2F, 0,
                                          'M', 'T', 'r', 'k', 0, 0, 0, 9, 0x81, 0x80, 0x80, 0x00, 0x90, 60, 1, 0, 0xF0};
    put("midi", "chunks.mid", long_header, sizeof long_header);
    static const uint8_t vlq5[] = {'M', 'T', 'h', 'd', 0, 0, 0, 6, 0, 0, 0, 1, 0, 96,
                                   'M', 'T', 'r', 'k', 0, 0, 0, 8, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F, 0x90, 60, 1};
    put("midi", "vlq_too_long.mid", vlq5, sizeof vlq5);
    static const uint8_t no_running[] = {'M', 'T', 'h', 'd', 0, 0, 0, 6, 0, 0, 0, 1, 0, 96,
                                         'M', 'T', 'r', 'k', 0, 0, 0, 4, 0, 60, 100, 0};
    put("midi", "no_running_status.mid", no_running, sizeof no_running);
    static const uint8_t many_tracks[] = {'M', 'T', 'h', 'd', 0, 0, 0, 6, 0, 1, 0xFF, 0xFF, 0, 96,
                                          'M', 'T', 'r', 'k', 0, 0, 0, 0};
    put("midi", "many_tracks.mid", many_tracks, sizeof many_tracks);
    /* a valid file cut short */
    size_t n;
    uint8_t *b = slurp(path_of("midi", "features_f1.mid"), &n);
    put("midi", "cut.mid", b, n - 7);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s OUT\n  writes the fuzz seed corpus to OUT/safetensors, OUT/config and OUT/midi\n", argv[0]);
        return 2;
    }
    out_root = argv[1];
    if (mkdir(out_root, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "fuzz_make_corpus: mkdir %s: %s\n", out_root, strerror(errno));
        return 1;
    }
    safetensors_seeds();
    config_seeds();
    midi_seeds();
    printf("fuzz_make_corpus: wrote the seed corpus to %s\n", out_root);
    return 0;
}
