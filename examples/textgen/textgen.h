/* textgen.h: the data side of the text generator example, as a small library.
 *
 *   text files --tg_read_files--> bytes --tg_vocab_build--> vocabulary (char or byte)
 *   bytes --tg_encode--> token ids --tg_data_split--> 90% train | 10% validation
 *   train split --tg_batch--> random (B,T) windows drawn from an explicit mg_rng
 *   validation split --tg_val_windows--> a fixed set of windows (no randomness)
 *
 * Two tokenizers:
 *  - char: one id per Unicode code point of the UTF-8 corpus, ids in code-point order. The table
 *    travels in the checkpoint metadata (TG_META_TOKENIZER = "char", TG_META_CHARS = the
 *    characters in id order as UTF-8) so a checkpoint alone can encode prompts and decode samples.
 *    The corpus must be valid UTF-8 (no overlong forms, surrogates or values past U+10FFFF) without
 *    NUL bytes: anything else is an error naming the file and the byte offset, never a silent
 *    replacement, because a replaced character would be trained on as if it were text.
 *  - byte: ids 0..255 are the bytes themselves; any file is accepted.
 *
 * Errors: functions that read outside input return an mg_status and set mg_last_error() to a
 * message naming the file (or the metadata key), the byte offset and the offending character.
 * Ownership: each struct that holds memory is filled by one function and released by its _free,
 * which accepts a zeroed struct. Pointer arguments are borrowed and never kept.
 */
#ifndef TG_H
#define TG_H

#include "evaluator.h"

#include "minigrad/base.h"
#include "minigrad/gpt.h"
#include "minigrad/rng.h"
#include "minigrad/train.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TG_META_TOKENIZER "tokenizer" /* "char" | "byte" */
#define TG_META_CHARS "chars"         /* char tokenizer: the characters in id order */

/* ---- UTF-8 ---- */

/* Decodes one well-formed UTF-8 sequence at s[0..n). Returns its length (1..4) and the code point
 * in *cp, or 0 if s does not start a valid sequence (truncated, overlong, surrogate, > U+10FFFF,
 * stray continuation byte). n must be >= 1. */
int tg_utf8_decode(const unsigned char *s, size_t n, uint32_t *cp);
/* Encodes cp (<= U+10FFFF, not a surrogate) into out (room for 4); returns the length, 0 if cp is
 * not encodable. */
int tg_utf8_encode(uint32_t cp, char out[4]);
/* "'a'", "'\n'" (escaped), "U+00E9 'é'": for messages; returns buf. */
char *tg_char_name(uint32_t cp, char *buf, size_t n);

/* ---- vocabulary ---- */

typedef enum { TG_TOKENIZER_CHAR = 0, TG_TOKENIZER_BYTE = 1 } tg_tokenizer_kind;

typedef struct tg_vocab {
    tg_tokenizer_kind kind;
    int32_t size;   /* number of ids */
    uint32_t *cps;  /* char: the code points in id order (ascending); byte: NULL */
    int32_t low[256]; /* char: id of each code point below 256, -1 if absent */
    char *chars;    /* char: the table as one NUL-terminated UTF-8 string (the metadata value) */
} tg_vocab;

/* Parses "char" or "byte"; an error names the value. */
mg_status tg_tokenizer_parse(const char *name, tg_tokenizer_kind *out);
const char *tg_tokenizer_name(tg_tokenizer_kind k);

/* Builds the vocabulary of a corpus. char: every distinct code point, sorted; an error names
 * `name` and the byte offset of the first invalid UTF-8 sequence or NUL byte. byte: always 256.
 * An empty text is an error. */
mg_status tg_vocab_build(tg_vocab *v, tg_tokenizer_kind kind, const char *text, size_t n,
                              const char *name);
/* Rebuilds a vocabulary from checkpoint metadata values: tokenizer (NULL means "char") and chars
 * (required for char). `vocab_size` must match; `origin` (a file name) prefixes messages, which
 * name the key at fault. */
mg_status tg_vocab_from_meta(tg_vocab *v, const char *tokenizer, const char *chars,
                                  int64_t vocab_size, const char *origin);
void tg_vocab_free(tg_vocab *v);
/* The vocabulary of a training run: the one saved in `saved` (a checkpoint read from `ckpt`, for
 * --resume; a missing vocab_size reads as -1, an error naming the key) or, when saved is NULL, the
 * one built from the corpus text[0, n) named `label`. Either way it must be of tokenizer `kind`: an
 * error names the checkpoint and both tokenizers. */
mg_status tg_vocab_for_run(tg_vocab *v, const mg_st_file *saved, const char *ckpt, tg_tokenizer_kind kind,
                           const char *text, size_t n, const char *label);

/* The id of code point cp (char) or byte cp (byte), -1 if it has none. */
int32_t tg_vocab_id(const tg_vocab *v, uint32_t cp);

/* Encodes text into ids. out: room for n ids (a text never has more tokens than bytes); the count
 * goes to *n_out. Errors name `name`, the byte offset and the character (invalid UTF-8, or a
 * character the vocabulary lacks). */
mg_status tg_encode(const tg_vocab *v, const char *text, size_t n, int32_t *out,
                         size_t *n_out, const char *name);
/* Writes the text of one id to out (room for 4 bytes); returns its length in bytes, 0 for an id
 * out of range. */
int tg_decode_one(const tg_vocab *v, int32_t id, char out[4]);
/* Decodes ids into a new NUL-terminated string (caller frees); NULL if memory runs out. Ids out
 * of range are skipped. */
char *tg_decode(const tg_vocab *v, const int32_t *ids, size_t n);

/* ---- corpus files ---- */

/* The largest text file read by default, and the most --max-file-mib may allow, in MiB. */
#define TG_MAX_FILE_MIB 1024
#define TG_MAX_FILE_MIB_LIMIT (1 << 20)

/* Reads and concatenates files (a newline is put between two files when the first does not end
 * with one), each of at most max_file_bytes. Errors: a file that cannot be opened or read (the
 * path and the system's reason), an empty file (its path), a file larger than the cap
 * (MG_ERR_INVALID naming the file and the cap: a regular file by its size before it is read, a
 * pipe or device such as /dev/zero once that much has been read). *out is a new buffer with a NUL
 * after the n bytes; the caller frees it. */
mg_status tg_read_files_max(const char *const *paths, int n_paths, size_t max_file_bytes, char **out,
                            size_t *n_out);
/* tg_read_files_max with the default cap of TG_MAX_FILE_MIB MiB. */
mg_status tg_read_files(const char *const *paths, int n_paths, char **out, size_t *n_out);


/* The default corpus: the King James Bible from Debian's bible-kjv, one verse per line with the
 * references stripped (4,137,850 bytes). If `path` exists it is used as is; otherwise it is made
 * from the `bible` program and written atomically (temporary file + rename, directories created).
 * Missing program: MG_ERR_NOT_FOUND with a message saying to install bible-kjv or pass --data. */
mg_status tg_kjv_make(const char *path);
/* Where the default corpus is kept: $XDG_CACHE_HOME/minigrad/kjv.txt, else
 * $HOME/.cache/minigrad/kjv.txt, else ./kjv.txt. Returns buf. */
char *tg_kjv_path(char *buf, size_t n);

/* The corpus of a run: the files (tg_read_files_max with a cap of max_file_mib MiB), or the
 * default corpus (tg_kjv_make at tg_kjv_path) when n is 0. label gets a short name for messages:
 * the first file's base name, "+ N more" when there are several. */
mg_status tg_read_corpus(const char *const *files, int n, int64_t max_file_mib, char **text, size_t *len,
                         char *label, size_t label_n);

/* The inputs of a training command, checked: the file of --data (`data`, when not NULL) is put
 * before the FILE arguments files[0, *n_files) (room for 64), and the --tokenizer value is parsed
 * into *kind. Returns 0, or 2 after a message on stderr that starts with `prog`. */
int tg_train_inputs(const char *prog, const char *data, const char **files, int *n_files, const char *tokenizer,
                    tg_tokenizer_kind *kind);
/* tg_read_corpus for a training run of program `prog`, which first says on stdout when it learns
 * the default corpus (n is 0). */
mg_status tg_read_train_text(const char *prog, const char *const *files, int n, int64_t max_file_mib, char **text,
                             size_t *len, char *label, size_t label_n);

/* ---- train / validation data ---- */

typedef struct tg_data {
    int32_t *ids; /* the whole corpus */
    size_t n;
    size_t n_train; /* ids[0, n_train) train, ids[n_train, n) validation */
} tg_data;

/* Encodes text with v and splits it 90/10, contiguous, first 90% (rounded down) train. block is
 * the context length: the train split needs at least block + 1 ids (one window and its shifted
 * targets); shorter is an error naming `name`, the counts and what to do. The validation split
 * may be shorter (see tg_val_windows). */
mg_status tg_data_make(tg_data *d, const tg_vocab *v, const char *text, size_t n,
                            int64_t block, const char *name);
void tg_data_free(tg_data *d);
static inline const int32_t *tg_val(const tg_data *d) { return d->ids + d->n_train; }
static inline size_t tg_val_len(const tg_data *d) { return d->n - d->n_train; }

/* Fills ids and targets (B*T each, row-major (B,T)) with B windows of the train split, each
 * starting at an offset drawn uniformly from [0, n_train - T - 1] (64 random bits times the
 * number of offsets, high half); targets are the ids shifted by one. Exactly B draws from rng; no
 * allocation. T must not exceed the block the data was made for. */
void tg_batch(const tg_data *d, int64_t B, int64_t T, mg_rng *rng, int32_t *ids,
                   int32_t *targets);

/* A fixed set of windows over a token range: window i covers ids[start[i], start[i] + len) and
 * predicts ids[start[i] + 1, start[i] + len + 1). */
typedef struct tg_windows {
    size_t *start;
    size_t count;
    int64_t len;
} tg_windows;

/* `count` windows of length min(T, n - 1) spread evenly over ids[0, n) (first at 0, last ending
 * at the end; fewer when the range has fewer distinct starts). n < 2 gives no windows. */
mg_status tg_val_windows(tg_windows *w, size_t n, int64_t T, size_t count);
/* Non-overlapping windows that predict every id of ids[1, n) exactly once: window i starts at
 * i * T; all have length T (w->len) except the last, whose length (<= T) goes to *last_len.
 * For evaluating a whole split. */
mg_status tg_cover_windows(tg_windows *w, size_t n, int64_t T, int64_t *last_len);
void tg_windows_free(tg_windows *w);

/* ---- the model side (model.c, built once the GPT model exists) ---- */

/* The vocabulary as checkpoint metadata: tokenizer, and chars for a char vocabulary. The values
 * point into v. Returns the number of entries (1 or 2). */
int tg_vocab_meta(const tg_vocab *v, mg_st_meta meta[2]);

/* Loads a checkpoint written by `textgen train`: the model from its metadata and weights, and the
 * vocabulary from its tokenizer keys. *file_out (optional) receives the open file for more
 * metadata (the caller closes it). On failure nothing is left to free. */
mg_status tg_load(const char *path, mg_gpt **g, tg_vocab *v, mg_st_file **file_out);

typedef struct tg_loss {
    double nats;    /* summed cross-entropy */
    int64_t tokens; /* targets scored */
    int64_t chars;  /* characters among them (byte tokenizer: bytes that start a UTF-8 sequence) */
} tg_loss;

/* Scores every target of the windows over ids (w->len each; the last one last_len when
 * last_len > 0), B windows per forward pass, from position 0 in each window, with the examples'
 * shared evaluator (examples/common/evaluator.h: buffers and an arena made once). Adds into *sum. */
mg_status tg_eval_windows(ex_evaluator *e, mg_gpt *g, const tg_vocab *v, const int32_t *ids,
                               const tg_windows *w, int64_t last_len, tg_loss *sum);


#ifdef __cplusplus
}
#endif
#endif
