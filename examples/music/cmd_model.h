/* The model subcommands of `music` (train, sample, eval: one file each) and the helpers they share
 * (cmd_model.c). Their conventions follow the text generator's (examples/textgen): the same option
 * names, an output directory holding model.safetensors, its .state file, log.jsonl and loss.png,
 * and the exit statuses 0 done, 1 failed (message printed), 2 bad usage, 130 interrupted by
 * Ctrl-C (checkpoint saved). */
#ifndef MUSIC_CMD_MODEL_H
#define MUSIC_CMD_MODEL_H

#include "music_model.h"

#include <stdio.h>

int music_cmd_train(int argc, char **argv);
int music_cmd_sample(int argc, char **argv);
int music_cmd_eval(int argc, char **argv);

#define MUSIC_DEFAULT_OUT "out/music"
#define MUSIC_DEFAULT_CKPT MUSIC_DEFAULT_OUT "/model.safetensors"
/* The default corpus: pieces 0..N-1 of `music gen --seed 1`. */
#define MUSIC_GEN_SEED 1

/* Checkpoint metadata the train command adds besides the model config and the tokenizer. */
#define MUSIC_META_DATA "music.data"     /* the corpus directory (absolute); "" = generated */
#define MUSIC_META_PIECES "music.pieces" /* pieces of the generated corpus */

/* Loads a corpus with its tokens: every MIDI file under `dir`, or (dir NULL or "") the first
 * `pieces` procedural pieces. Prints "PROG: LABEL: <summary>" and a line per skipped file to
 * `out` (NULL: quiet). label receives the directory or "generated corpus (N pieces)". */
mg_status music_load_corpus(const char *prog, const char *dir, int64_t pieces, FILE *out,
                            music_corpus *c, char *label, size_t label_n);

/* What a generated piece is made into. */
typedef struct music_gen_req {
    const char *prog;
    int64_t tokens; /* new tokens at most (the model may end the piece sooner with END) */
    float temperature, top_p;
    int64_t top_k;
    const char *mid, *png, *wav; /* outputs (png, wav may be NULL) */
    const char *title;           /* of the piano roll */
    bool quiet;                  /* no live progress line */
    mg_precision precision;      /* of the products (mg_gen_opts.precision) */
} music_gen_req;

typedef struct music_gen_result {
    int64_t made; /* tokens generated */
    bool ended;   /* the model produced END */
    size_t notes, prompt_notes;
    double seconds, prompt_seconds; /* length of the piece, and of the prompt part */
    double gen_seconds;             /* wall time of the generation */
} music_gen_result;

/* Continues prompt[0..n_prompt) (START first; no END) for up to req->tokens tokens, drawing from
 * rng, and writes the piece (prompt + continuation) as MIDI, then the piano roll and the audio if
 * asked. The model sees at most block_size tokens: when the piece outgrows that, it goes on from
 * the last half block (re-run once), so a long piece costs one extra prompt pass per half block
 * rather than one per token. */
mg_status music_generate(mg_gpt *g, const int32_t *prompt, int64_t n_prompt,
                         const music_gen_req *req, mg_rng *rng, music_gen_result *res);

/* True when `timidity` is on PATH (what --wav needs). */
bool music_have_timidity(void);


#endif
