/* music_model.h: the model half of the music Transformer example, as a small library beside the
 * MIDI one (music.h):
 *
 *   corpus (music.h) --music_data_make--> token streams, one per piece, split 90/10 by piece
 *   train pieces --music_batch--> random (B,T) windows, augmented, padded past a piece's end
 *   validation pieces --music_val_windows--> a fixed set of windows (no randomness)
 *   checkpoint --music_load--> a GPT that is known to speak the performance encoding
 *   notes --music_pianoroll--> a PNG piano roll (prompt and continuation told apart)
 *
 * Windows. A piece is one stream START ... END (music.h). A window of T positions starting at
 * offset s holds ids tok[s .. s+T) and targets tok[s+1 .. s+T+1); positions past the piece's end
 * hold END as input and -1 as target (the loss ignores them), so a window never runs into the
 * next piece and the model learns where pieces end. Training windows start anywhere a target
 * exists (s in [0, n-2]), every such start equally likely across the train pieces.
 *
 * Errors: functions that read outside input return an mg_status with mg_last_error() naming the
 * file, directory or metadata key. Ownership: each struct that holds memory is filled by one
 * function and released by its _free, which accepts a zeroed struct; pointer arguments are
 * borrowed and never kept.
 */
#ifndef MUSIC_MODEL_H
#define MUSIC_MODEL_H

#include "evaluator.h"
#include "music.h"

#include "minigrad/gpt.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Checkpoint metadata that marks a music model: "tokenizer" = "midi-performance" (the same key
 * textgen uses for its "char" / "byte"), with vocab_size 390. */
#define MUSIC_META_TOKENIZER "tokenizer"
#define MUSIC_TOKENIZER "midi-performance"

/* ---- training data ---- */

typedef struct music_piece {
    int32_t *tok; /* START ... END */
    size_t n;
    char *name; /* the file's path (or the generated piece's name) */
    bool val;   /* in the validation split */
} music_piece;

typedef struct music_data {
    music_piece *pieces; /* the corpus's usable files, in its (path) order */
    size_t n;
    size_t n_train, n_val;           /* pieces */
    size_t train_tokens, val_tokens; /* tokens, START and END included */
    size_t *train_idx;               /* indices of the train pieces */
    uint64_t *train_cum;             /* n_train + 1 prefix sums of the window starts (n - 1 each) */
} music_data;

/* Copies the token streams of the corpus's usable files (loaded with keep_tokens) and splits them
 * by piece, deterministically: with N pieces, V = round(N / 10) (at least 1 once N >= 2, 0 for a
 * single piece) are validation, spread evenly through the path order (piece i is validation when
 * floor((i+1)V/N) > floor(iV/N)). MG_ERR_NOT_FOUND names `label` when the corpus has no usable
 * piece (no MIDI files, or all skipped: the message says which). */
mg_status music_data_make(music_data *d, const music_corpus *c, const char *label);
void music_data_free(music_data *d);

/* Reusable buffers for augmenting windows. */
typedef struct music_scratch {
    music_tokens aug;
} music_scratch;
void music_scratch_free(music_scratch *s);

/* One window of T positions from tok[0, n) starting at `start` (< n - 1), as described above.
 * With aug non-NULL the window is augmented first: a transposition and a stretch are drawn from
 * rng (music_augment_tokens: the shift keeps every pitch of the window in range) and applied to the
 * tokens from `start` on, so the window holds T + 1 augmented tokens (fewer at the piece's end,
 * then padded). Without aug, rng is not used and may be NULL. */
mg_status music_window(const int32_t *tok, size_t n, size_t start, int64_t T,
                          const music_augment_opts *aug, mg_rng *rng, music_scratch *s,
                          int32_t *ids, int32_t *targets);

/* Fills B training windows (row-major (B,T) ids and targets): for each, one 64-bit draw from rng
 * picks a start uniformly among all starts of all train pieces, then music_window (with aug,
 * when non-NULL, drawing from the same rng). MG_ERR_INVALID when there are no train pieces. */
mg_status music_batch(const music_data *d, int64_t B, int64_t T, const music_augment_opts *aug,
                         mg_rng *rng, music_scratch *s, int32_t *ids, int32_t *targets);

/* A fixed set of windows (piece index, start). */
typedef struct music_windows {
    size_t *piece, *start;
    size_t count;
    size_t targets; /* targets they score (positions that are not padding) */
} music_windows;

/* The validation windows: each validation piece cut into consecutive windows of T starting at
 * 0, T, 2T, ... (together they predict every token after the first of every validation piece
 * once); when there are more than max_count (> 0), max_count of them evenly spread (window
 * floor(i * total / max_count)). No validation pieces: count 0. */
mg_status music_val_windows(const music_data *d, int64_t T, size_t max_count,
                               music_windows *w);
void music_windows_free(music_windows *w);

/* ---- checkpoints and evaluation ---- */

/* Loads a checkpoint written by `music train` (mg_gpt_from_checkpoint), refusing one that is not a
 * music model (or one whose block_size is below the 2 generation needs): the message names the
 * file, the metadata key and what it holds instead (a textgen checkpoint says tokenizer "char" or
 * "byte"). *file_out (optional) receives the open file for more
 * metadata; the caller closes it. On failure nothing is left to free. */
mg_status music_load(const char *path, mg_gpt **g, mg_st_file **file_out);

/* Mean loss over the windows (B per forward pass, no augmentation), in nats per scored token, with
 * the examples' shared evaluator (examples/common/evaluator.h: buffers and an arena made once):
 * *nats gets the sum, *tokens the count (either may be NULL). */
mg_status music_eval_windows(ex_evaluator *e, mg_gpt *g, const music_data *d,
                                const music_windows *w, double *nats, int64_t *tokens);

/* ---- the piano roll ---- */

typedef struct music_pianoroll_opts {
    int width, height; /* pixels; 0 = 1200 x 600; each 300..8192 */
    double prompt_end; /* seconds: notes starting before it are the prompt (<= 0: no prompt) */
    const char *title; /* NULL or "" for none */
} music_pianoroll_opts;

/* Draws the notes as a piano roll and saves it as a PNG (atomically): time in seconds along x
 * with ticks, pitch along y with a label at every C (C4 = MIDI 60) and darker rows for the black
 * keys, each note a bar whose opacity follows its velocity; prompt notes in grey-blue, the
 * continuation in orange, with a marked boundary and a legend. An empty note list draws an empty
 * roll. Errors: MG_ERR_INVALID for a bad size, otherwise those of mg_canvas_save_png. */
mg_status music_pianoroll(const char *path, const music_notes *notes, const music_pianoroll_opts *o);

#ifdef __cplusplus
}
#endif
#endif
