/* music sample: continues a prompt MIDI file (or starts from nothing) with a trained model and
 * writes the piece as MIDI, a piano roll and, with timidity, audio. */
#include "cli.h"
#include "cmd_model.h"
#include "gpt_opts.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define PROG "music sample"

/* The prompt as tokens: START and the encoded file, without its END so the model continues. */
static mg_status prompt_tokens(const char *path, music_tokens *out, size_t *notes) {
    music_midi_file f;
    music_notes n = {0};
    mg_status st = music_midi_read(path, &f);
    if (st != MG_OK) return st;
    st = music_midi_to_notes(&f, path, NULL, &n, NULL);
    music_midi_free(&f);
    if (st == MG_OK && n.n == 0) st = mg_set_error(MG_ERR_FORMAT, "%s: no notes to continue", path);
    if (st == MG_OK) st = music_perf_encode(n.v, n.n, out);
    if (st == MG_OK && out->n > 0 && out->v[out->n - 1] == MUSIC_PERF_END) out->n--;
    *notes = n.n;
    music_notes_free(&n);
    return st;
}

int music_cmd_sample(int argc, char **argv) {
    const char *ckpt = MUSIC_DEFAULT_CKPT, *prompt = NULL,
               *out_mid = MUSIC_DEFAULT_OUT "/sample.mid";
    const char *png = NULL, *wav = NULL;
    int64_t tokens = 1024;
    ex_sample_opts so = {.temperature = 1.0f, .top_p = 1.0f, .seed = -1};
    bool quiet = false, no_png = false;
    const char *precision = NULL;
    ex_opt table[14] = {
        EX_STR_OPT("ckpt", &ckpt, "checkpoint written by music train"),
        EX_STR_OPT("prompt", &prompt, "MIDI file to continue (default: start a new piece)"),
        EX_INT_OPT("tokens", &tokens, 1, EX_MAX_GEN_TOKENS,
                   "new tokens at most (the model may end the piece sooner)"),
    };
    int n = 3;
    n += ex_sample_rows(&so, table + n);
    const ex_opt rest[] = {
        EX_INT_OPT("seed", &so.seed, -1, INT64_MAX, "random seed (-1: from the clock; the seed used is printed)"),
        EX_STR_OPT("out", &out_mid, "the piece (prompt + continuation) as a MIDI file"),
        EX_STR_OPT("png", &png, "its piano roll (default: the --out path with .png for .mid)"),
        EX_FLAG_OPT("no-png", &no_png, "no piano roll"),
        EX_STR_OPT("wav", &wav, "also render it to this WAV file with timidity (if installed)"),
        EX_FLAG_OPT("quiet", &quiet, "no live progress line"),
        EX_INT_OPT("threads", &so.threads, 0, EX_MAX_THREADS, "threads (0: all cores)"),
        EX_STR_OPT("precision", &precision,
                   "fp32 (default) or bf16: the products in bfloat16, the weights rounded once"),
    };
    for (size_t i = 0; i < sizeof rest / sizeof rest[0]; i++) table[n++] = rest[i];
    ex_parse_result pr = ex_parse(PROG, "[--ckpt FILE] [--prompt FILE.mid] [options]", argc - 1,
                                  argv + 1, table, n, NULL, 0, NULL);
    if (pr != EX_PARSE_OK) return pr == EX_PARSE_HELP ? 0 : 2;
    mg_precision prec;
    if (!ex_precision_from(PROG, precision, &prec)) return 2;
    const char *bad = NULL;
    if (!bad && !out_mid[0]) bad = "--out must name a file";
    if (!bad && png && no_png) bad = "--png and --no-png contradict each other";
    if (bad) {
        fprintf(stderr, PROG ": %s\n", bad);
        return 2;
    }
    /* before any work: --wav without the program that renders it */
    if (wav && !music_have_timidity()) {
        fprintf(stderr,
                PROG ": --wav needs timidity, which is not installed (Debian: apt-get install "
                     "timidity); leave out --wav to get the MIDI file and the piano roll only\n");
        return 1;
    }
    /* The piano roll goes beside the .mid unless asked otherwise. */
    char png_buf[4096];
    if (!png && !no_png) {
        const char *dot = strrchr(out_mid, '.'), *slash = strrchr(out_mid, '/');
        const size_t stem = dot && (!slash || dot > slash) && (!strcasecmp(dot, ".mid") || !strcasecmp(dot, ".midi"))
                                ? (size_t)(dot - out_mid)
                                : strlen(out_mid);
        if (stem + 5 > sizeof png_buf) {
            fprintf(stderr, PROG ": --out is too long to derive the piano roll's name; pass --png\n");
            return 2;
        }
        memcpy(png_buf, out_mid, stem);
        memcpy(png_buf + stem, ".png", 5);
        png = png_buf;
    }
    mg_set_num_threads((int)so.threads);
    int64_t seed = ex_sample_seed(so.seed);

    mg_gpt *g = NULL;
    music_tokens pt = {0};
    int rc = 1;
    size_t prompt_notes = 0;
    if (prompt) {
        if (prompt_tokens(prompt, &pt, &prompt_notes) != MG_OK) return ex_fail(PROG);
    } else if (music_tokens_push(&pt, MUSIC_PERF_START) != MG_OK) {
        return ex_fail(PROG);
    }
    if (music_load(ckpt, &g, NULL) != MG_OK) {
        rc = ex_fail_load(PROG, "music train", ckpt);
        goto out_quiet;
    }
    int64_t block = mg_gpt_cfg(g)->block_size;
    if (prompt) {
        fprintf(stderr, "music: prompt %s: %zu notes, %zu tokens", prompt, prompt_notes, pt.n);
        if ((int64_t)pt.n >= block)
            fprintf(stderr, "; the model sees its last %lld (context %lld)", (long long)(block / 2),
                    (long long)block);
        fprintf(stderr, "\n");
    }
    char title[512];
    snprintf(title, sizeof title, "music sample: %s%s (seed %lld, temperature %g)",
             prompt ? "continuing " : "a new piece", prompt ? prompt : "", (long long)seed,
             (double)so.temperature);
    mg_rng rng = mg_rng_make((uint64_t)seed);
    music_gen_req req = {.prog = "music",
                         .tokens = tokens,
                         .temperature = so.temperature,
                         .top_k = so.top_k,
                         .top_p = so.top_p,
                         .mid = out_mid,
                         .png = png,
                         .wav = wav,
                         .title = title,
                         .quiet = quiet,
                         .precision = prec};
    music_gen_result res;
    if (music_generate(g, pt.v, (int64_t)pt.n, &req, &rng, &res) != MG_OK) goto out;
    printf("music: %lld tokens in %.2fs: %.1f tokens/s (seed %lld, temperature %g)%s\n",
           (long long)res.made, res.gen_seconds,
           res.gen_seconds > 0 ? (double)res.made / res.gen_seconds : 0.0, (long long)seed,
           (double)so.temperature, res.ended ? "; the model ended the piece" : "");
    if (prompt)
        printf("music: %zu notes, %.1f s: the prompt's %zu notes (%.1f s), then %zu new\n",
               res.notes, res.seconds, res.prompt_notes, res.prompt_seconds,
               res.notes - res.prompt_notes);
    else
        printf("music: %zu notes, %.1f s\n", res.notes, res.seconds);
    printf("music: wrote %s", out_mid);
    if (png) printf(", %s", png);
    if (wav) printf(", %s", wav);
    printf("\n");
    rc = 0;
out:
    if (rc) ex_fail(PROG);
out_quiet:
    music_tokens_free(&pt);
    mg_gpt_free(g);
    return rc;
}
