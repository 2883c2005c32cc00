/* Helpers the model subcommands share: the corpus, generation into MIDI / PNG / WAV. */
#include "cmd_model.h"

#include "minigrad/checked.h"

#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

mg_status music_load_corpus(const char *prog, const char *dir, int64_t pieces, FILE *out,
                            music_corpus *c, char *label, size_t label_n) {
    music_load_opts lo = {.keep_tokens = true};
    mg_status st;
    if (dir && dir[0]) {
        snprintf(label, label_n, "%s", dir);
        st = music_load_dir(dir, &lo, c);
    } else {
        snprintf(label, label_n, "generated corpus (%lld pieces)", (long long)pieces);
        st = music_generate_corpus((uint32_t)pieces, MUSIC_GEN_SEED, &lo, c);
    }
    if (st != MG_OK) return st;
    if (out) {
        fprintf(out, "%s: %s: ", prog, label);
        music_corpus_summary(c, out);
        fflush(out);
    }
    return MG_OK;
}

/* ---- generation ---- */

typedef struct {
    const music_gen_req *req;
    int64_t made, steps; /* tokens so far; 10 ms steps of music so far */
    bool ended, tty;
    double t0, last;
} gen_state;

static void progress_line(gen_state *s, bool final) {
    double dt = mg_time() - s->t0;
    fprintf(stderr, "\r%s: %lld/%lld tokens, %.1f s of music, %.1f tokens/s%s", s->req->prog,
            (long long)s->made, (long long)s->req->tokens, (double)s->steps * MUSIC_PERF_STEP_SECONDS,
            dt > 0 ? (double)s->made / dt : 0.0, final ? "\n" : "\033[K");
    fflush(stderr);
}

static bool on_token(void *user, int64_t step, int32_t tok, const float *logits, int64_t vocab) {
    (void)step, (void)logits, (void)vocab;
    gen_state *s = user;
    s->made++;
    s->steps += music_perf_shift_steps(tok);
    if (s->tty && mg_time() - s->last > 0.2) {
        s->last = mg_time();
        progress_line(s, false);
    }
    if (tok == MUSIC_PERF_END) s->ended = true;
    return !s->ended;
}

bool music_have_timidity(void) {
    const char *path = getenv("PATH");
    if (!path) return false;
    char buf[4200];
    for (const char *p = path; *p;) {
        const char *e = strchr(p, ':');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        snprintf(buf, sizeof buf, "%.*s/timidity", (int)len, len ? p : ".");
        if (access(buf, X_OK) == 0) return true;
        if (!e) break;
        p = e + 1;
    }
    return false;
}

/* timidity renders to a temporary file that is renamed over `wav`, so a failure leaves no half
 * file. It is chatty even when all is well: its output is kept aside, and quoted only when it
 * fails (a missing sound font is the usual reason). */
static mg_status render_wav(const char *mid, const char *wav) {
    /* renaming over a device or a FIFO would replace it (and the files beside it land in its
     * folder, /dev): only a regular file, or a new one, is written */
    struct stat ws;
    if (stat(wav, &ws) == 0 && !S_ISREG(ws.st_mode))
        return mg_set_error(MG_ERR_IO, "%s: not a regular file: the WAV is rendered into a temporary file "
                            "beside it and renamed into place", wav);
    char tmp[4200], log[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", wav);
    snprintf(log, sizeof log, "%s.timidity.log", wav);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    char *argv[] = {"timidity", "-Ow", "-o", tmp, (char *)mid, NULL};
    pid_t pid;
    int err = posix_spawnp(&pid, "timidity", &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (err != 0) {
        unlink(log);
        return mg_set_error(MG_ERR_IO, "%s: cannot run timidity: %s", wav, strerror(err));
    }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return mg_set_error(MG_ERR_IO, "%s: timidity: %s", wav, strerror(errno));
    struct stat sb;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || stat(tmp, &sb) != 0 || sb.st_size <= 44) {
        char said[600] = "";
        FILE *f = fopen(log, "r");
        size_t k = f ? fread(said, 1, sizeof said - 1, f) : 0;
        if (f) fclose(f);
        said[k] = 0;
        for (char *c = said; *c; c++)
            if (*c == '\n') *c = ' ';
        unlink(tmp);
        unlink(log);
        return mg_set_error(
            MG_ERR_IO, "%s: timidity failed to render %s (exit status %d)%s%s%s", wav, mid,
            WIFEXITED(status) ? WEXITSTATUS(status) : -1, said[0] ? ": " : "", said,
            strstr(said, "cfg") ? " (Debian: apt-get install fluid-soundfont-gm)" : "");
    }
    unlink(log);
    if (rename(tmp, wav) != 0) {
        mg_status st =
            mg_set_error(MG_ERR_IO, "%s: cannot rename %s: %s", wav, tmp, strerror(errno));
        unlink(tmp);
        return st;
    }
    return MG_OK;
}

/* Time reached at the end of tokens (the prompt's length in seconds). */
static double tokens_seconds(const int32_t *t, int64_t n) {
    int64_t steps = 0;
    for (int64_t i = 0; i < n; i++)
        steps += music_perf_shift_steps(t[i]);
    return (double)steps * MUSIC_PERF_STEP_SECONDS;
}

mg_status music_generate(mg_gpt *g, const int32_t *prompt, int64_t n_prompt,
                         const music_gen_req *req, mg_rng *rng, music_gen_result *res) {
    memset(res, 0, sizeof *res);
    /* The model goes on from the last half block: a context of 1 would leave no room for a new
     * token (and the loop below would never end). */
    int64_t block = mg_gpt_cfg(g)->block_size, keep = block / 2;
    if (block < 2)
        return mg_set_error(MG_ERR_INVALID, "%s: the model's context (block_size %lld) must be 2 tokens or more to "
                            "generate", req->prog, (long long)block);
    int64_t cap;
    size_t bytes;
    if (n_prompt < 1 || req->tokens < 0 || mg_ckd_add_i64(&cap, n_prompt, req->tokens) ||
        mg_ckd_bytes(&bytes, cap, sizeof(int32_t)))
        return mg_set_error(MG_ERR_INVALID, "%s: a prompt of %lld tokens and %lld more to generate: too many",
                            req->prog, (long long)n_prompt, (long long)req->tokens);
    int32_t *hist = malloc(bytes);
    music_notes notes = {0};
    music_midi_file mf = {0};
    if (!hist) return mg_set_error(MG_ERR_NOMEM, "%s: out of memory", req->prog);
    memcpy(hist, prompt, (size_t)n_prompt * sizeof *hist);
    gen_state gs = {.req = req, .tty = !req->quiet && isatty(2), .t0 = mg_time()};
    gs.last = gs.t0;
    mg_status st = MG_OK;
    int64_t n = n_prompt;
    while (gs.made < req->tokens && !gs.ended && st == MG_OK) {
        /* the context: everything while it fits with room to grow, else the last half block */
        int64_t start = n < block ? 0 : n - keep, len = n - start;
        int64_t chunk = block - len < req->tokens - gs.made ? block - len : req->tokens - gs.made;
        mg_gen_opts go = {.max_new_tokens = chunk,
                          .temperature = req->temperature,
                          .top_k = req->top_k,
                          .top_p = req->top_p,
                          .max_context = block,
                          .on_token = on_token,
                          .user = &gs,
                          .precision = req->precision};
        int64_t k = 0;
        st = mg_gpt_generate(g, hist + start, len, &go, rng, hist + n, &k);
        n += k;
    }
    res->gen_seconds = mg_time() - gs.t0;
    res->made = gs.made, res->ended = gs.ended;
    if (gs.tty) progress_line(&gs, true);
    if (st != MG_OK) goto out;
    /* Decoding stops at the first END and restarts at a START: a START the model produced
     * mid-piece is dropped so the prompt survives. */
    int64_t m = 0;
    for (int64_t i = 0; i < n; i++)
        if (hist[i] != MUSIC_PERF_START || i == 0) hist[m++] = hist[i];
    if ((st = music_perf_decode(hist, (size_t)m, &notes)) != MG_OK) goto out;
    res->prompt_seconds = n_prompt > 1 ? tokens_seconds(prompt, n_prompt) : 0;
    res->notes = notes.n;
    for (size_t i = 0; i < notes.n; i++) {
        res->prompt_notes += notes.v[i].on < res->prompt_seconds;
        res->seconds = notes.v[i].off > res->seconds ? notes.v[i].off : res->seconds;
    }
    if ((st = music_notes_to_midi(&notes, NULL, &mf)) != MG_OK) goto out;
    if ((st = music_midi_write(req->mid, &mf, NULL)) != MG_OK) goto out;
    if (req->png) {
        music_pianoroll_opts po = {.prompt_end = res->prompt_seconds, .title = req->title};
        if ((st = music_pianoroll(req->png, &notes, &po)) != MG_OK) goto out;
    }
    if (req->wav) st = render_wav(req->mid, req->wav);
out:
    music_midi_free(&mf);
    music_notes_free(&notes);
    free(hist);
    return st;
}
