/* minigrad/config.h: key/value configurations for layers, and the INI-like model config file.
 *
 * An mg_config is what a layer is created from: string keys and string values plus, for each
 * entry, where it came from (file and line) so that every error can point at it. Layers read it
 * with typed getters that take a default and a range. The getters are sticky, like mg_ctx: the
 * first bad value is remembered, later getters return their defaults, and the layer checks
 * mg_config_status once at the end of its create. After create the host calls
 * mg_config_check_used: a key nobody asked for is an error (a typo never passes silently).
 *
 * Two kinds of entries:
 *  - set:   given by the user (a config file, a command line, a parent layer). Must be used.
 *  - offer: context the host makes available (a model offers `n_head`, `max_len`, `dim` to its
 *           positional scheme). A layer may ignore it; a `set` of the same key wins over an offer.
 *
 * The file format (INI-like, as in Darknet's .cfg files; docs/style.md):
 *
 *     # a comment; blank lines are ignored
 *     [embedding]          <- a section names a layer (or, for the gpt tool, the `gpt` section)
 *     vocab = 65           <- key = value; spaces around both are trimmed
 *     dim   = 64           ;  a `;` or `#` after whitespace starts a comment too
 *
 * Ownership: mg_config_new / mg_cfg_file_* return objects the caller frees (mg_config_free,
 * mg_cfg_file_free). Strings returned by getters and accessors belong to the config and stay
 * valid until it is freed or the key is set again. Setters copy their arguments.
 * Errors: setters and the file reader return mg_status and set mg_last_error; messages start with
 * "file:line: [section]" when the entry came from a file, else with the config's name.
 */
#ifndef MINIGRAD_CONFIG_H
#define MINIGRAD_CONFIG_H

#include "minigrad/export.h"

#include "minigrad/base.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mg_config mg_config;

/* `name` says what the config configures ("layer 'linear' (h.0.attn.c_attn)"), for messages. */
MG_API mg_config *mg_config_new(const char *name);
MG_API void mg_config_free(mg_config *c); /* NULL is a no-op */
MG_API const char *mg_config_name(const mg_config *c);
/* Records where the whole config came from (a file's section header), used in messages about
 * keys that are missing (and therefore have no line of their own). */
MG_API void mg_config_set_origin(mg_config *c, const char *file, int line);

MG_API mg_status mg_config_set(mg_config *c, const char *key, const char *value);
MG_API mg_status mg_config_setf(mg_config *c, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* `file` may be NULL (then line is ignored). */
MG_API mg_status mg_config_set_at(mg_config *c, const char *key, const char *value, const char *file, int line);
MG_API mg_status mg_config_offer(mg_config *c, const char *key, const char *value);
MG_API mg_status mg_config_offerf(mg_config *c, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Sets every `key=value` of a comma-separated list ("base=500000,init_range=0.05"). */
MG_API mg_status mg_config_set_list(mg_config *c, const char *list);
/* Copies every entry of `src` (its kind, file and line kept). */
MG_API mg_status mg_config_copy(mg_config *dst, const mg_config *src);

MG_API bool mg_config_has(const mg_config *c, const char *key);
/* "file:line: name" of key's entry (or of the config's origin when the key has no line, or just
 * the name) into buf; returns buf. For messages about a value that parsed but does not fit. */
MG_API const char *mg_config_where(const mg_config *c, const char *key, char *buf, size_t n);
MG_API int mg_config_len(const mg_config *c);
MG_API const char *mg_config_key(const mg_config *c, int i);   /* NULL if out of range */
MG_API const char *mg_config_value(const mg_config *c, int i); /* NULL if out of range */

/* Typed getters. An absent key gives `def`; a present key must parse completely and lie in
 * [min, max]. A default outside [min, max] makes the key required ("missing required key").
 * Booleans accept true/false/1/0/yes/no/on/off. On any problem the config records the first
 * error (see mg_config_status) and the getter returns `def`. */
MG_API int64_t mg_config_int(mg_config *c, const char *key, int64_t def, int64_t min, int64_t max);
MG_API double mg_config_float(mg_config *c, const char *key, double def, double min, double max);
MG_API bool mg_config_bool(mg_config *c, const char *key, bool def);
/* def may be NULL: then the key is required. */
MG_API const char *mg_config_str(mg_config *c, const char *key, const char *def);
/* One of `choices` (a NULL-terminated list); returns its index, or def when the key is absent. */
MG_API int mg_config_choice(mg_config *c, const char *key, const char *const *choices, int def);

/* MG_OK, or the first getter error (which it also makes the thread's mg_last_error again). */
MG_API mg_status mg_config_status(const mg_config *c);
/* MG_ERR_INVALID naming the first `set` key no getter asked for, its file and line, and the keys
 * the layer does know ("model.cfg:7: [embedding] unknown key 'dimm' (known keys: vocab, dim, ...)"). */
MG_API mg_status mg_config_check_used(const mg_config *c);

/* ---- config files ---- */

typedef struct mg_cfg_file mg_cfg_file;

/* Reads and parses a file. Syntax errors name the file and line. */
MG_API mg_status mg_cfg_file_read(const char *path, mg_cfg_file **out);
/* Parses text already in memory; `name` stands for the file name in messages. */
MG_API mg_status mg_cfg_file_parse(const char *text, const char *name, mg_cfg_file **out);
MG_API void mg_cfg_file_free(mg_cfg_file *f);

MG_API const char *mg_cfg_file_path(const mg_cfg_file *f);
MG_API int mg_cfg_file_count(const mg_cfg_file *f);                          /* sections, in file order */
MG_API const char *mg_cfg_file_section(const mg_cfg_file *f, int i);         /* its [name] */
MG_API int mg_cfg_file_line(const mg_cfg_file *f, int i);                    /* line of its header */
MG_API mg_config *mg_cfg_file_config(const mg_cfg_file *f, int i);           /* owned by the file */

#ifdef __cplusplus
}
#endif
#endif
