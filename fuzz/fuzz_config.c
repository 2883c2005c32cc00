/* Fuzz target for the config file parser and the config getters (layers/config.c), and for
 * mg_gpt_config_from, which turns a section into a model config.
 *
 * The input is the text of a config file (a NUL ends it early, as it would end a C string).
 * Beyond "no crash, no hang, no leak, no undefined behaviour" it checks:
 *  - a refused file leaves an error that starts with its name;
 *  - what parses prints back as "[section]" and "key=value" lines that parse to the same
 *    sections, keys, values and order (no line grows, so none can pass the length limit);
 *  - every typed getter either takes a value or fails with an error, and once every key has been
 *    asked for, mg_config_check_used agrees that none is unknown.
 * Building layers from the sections is left out: a layer allocates what its keys ask for (a
 * sinusoidal table of max_len x dim floats, say), which measures memory, not the parser. */
#include "fuzz_util.h"

#include "minigrad/config.h"
#include "minigrad/gpt.h"

#include <stdlib.h>
#include <string.h>

#define NAME "fuzz.cfg"

static char *print_file(const mg_cfg_file *f) {
    size_t cap = 64, len = 0;
    for (int i = 0; i < mg_cfg_file_count(f); i++) {
        cap += strlen(mg_cfg_file_section(f, i)) + 3;
        const mg_config *c = mg_cfg_file_config(f, i);
        for (int k = 0; k < mg_config_len(c); k++) cap += strlen(mg_config_key(c, k)) + strlen(mg_config_value(c, k)) + 2;
    }
    char *s = malloc(cap);
    fz_expect(s != NULL, "memory for the printed file");
    for (int i = 0; i < mg_cfg_file_count(f); i++) {
        len += (size_t)snprintf(s + len, cap - len, "[%s]\n", mg_cfg_file_section(f, i));
        const mg_config *c = mg_cfg_file_config(f, i);
        for (int k = 0; k < mg_config_len(c); k++)
            len += (size_t)snprintf(s + len, cap - len, "%s=%s\n", mg_config_key(c, k), mg_config_value(c, k));
    }
    s[len] = 0;
    return s;
}

static void same_file(const mg_cfg_file *a, const mg_cfg_file *b) {
    fz_expect(mg_cfg_file_count(a) == mg_cfg_file_count(b), "the printed file has the same sections");
    for (int i = 0; i < mg_cfg_file_count(a); i++) {
        fz_expect(strcmp(mg_cfg_file_section(a, i), mg_cfg_file_section(b, i)) == 0, "section names survive printing");
        const mg_config *x = mg_cfg_file_config(a, i), *y = mg_cfg_file_config(b, i);
        fz_expect(mg_config_len(x) == mg_config_len(y), "the printed section has the same keys");
        for (int k = 0; k < mg_config_len(x); k++) {
            fz_expect(strcmp(mg_config_key(x, k), mg_config_key(y, k)) == 0, "keys survive printing");
            fz_expect(strcmp(mg_config_value(x, k), mg_config_value(y, k)) == 0, "values survive printing");
        }
    }
}

/* Asks for every key with every getter, on a copy (the getters are sticky). */
static void ask_everything(const mg_config *src) {
    static const char *const choices[] = {"tanh", "erf", "tied", "linear", NULL};
    for (int g = 0; g < 5; g++) {
        mg_config *c = mg_config_new("fuzz copy");
        fz_expect(c != NULL, "memory for a config");
        fz_expect(mg_config_copy(c, src) == MG_OK, "a config copies");
        fz_expect(mg_config_len(c) == mg_config_len(src), "a copy has every key");
        for (int k = 0; k < mg_config_len(c); k++) {
            const char *key = mg_config_key(c, k);
            fz_expect(mg_config_has(c, key), "a key of the config is in it");
            char where[256];
            mg_config_where(c, key, where, sizeof where);
            switch (g) {
            case 0: (void)mg_config_int(c, key, 0, INT64_MIN, INT64_MAX); break;
            case 1: (void)mg_config_float(c, key, 0.0, -1e300, 1e300); break;
            case 2: (void)mg_config_bool(c, key, false); break;
            case 3: fz_expect(mg_config_str(c, key, NULL) == mg_config_value(c, k), "str gives the value"); break;
            default: (void)mg_config_choice(c, key, choices, -1); break;
            }
        }
        mg_status st = mg_config_status(c);
        if (st != MG_OK) fz_expect(strstr(mg_last_error(), NAME) != NULL, "a getter error names the file");
        fz_expect(mg_config_check_used(c) == MG_OK, "keys that were asked for are not unknown");
        /* values as option lists ("a=1,b=2"), appended to the copy */
        for (int k = 0; k < mg_config_len(src); k++) (void)mg_config_set_list(c, mg_config_value(src, k));
        mg_config_free(c);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = malloc(size + 1);
    fz_expect(text != NULL, "memory for the text");
    memcpy(text, data, size);
    text[size] = 0;
    mg_cfg_file *f;
    if (mg_cfg_file_parse(text, NAME, &f) != MG_OK) {
        fz_expect(f == NULL, "a failed parse returns no file");
        fz_expect(strncmp(mg_last_error(), NAME ":", strlen(NAME) + 1) == 0, "an error names the file");
        free(text);
        return 0;
    }
    free(text);
    fz_expect(strcmp(mg_cfg_file_path(f), NAME) == 0, "the file keeps its name");
    int prev_line = 0;
    for (int i = 0; i < mg_cfg_file_count(f); i++) {
        fz_expect(mg_cfg_file_line(f, i) > prev_line, "sections come in line order");
        prev_line = mg_cfg_file_line(f, i);
        fz_expect(mg_cfg_file_section(f, i)[0] != 0, "section names are not empty");
    }
    fz_expect(mg_cfg_file_config(f, mg_cfg_file_count(f)) == NULL && mg_cfg_file_section(f, -1) == NULL,
              "out-of-range sections are NULL");

    char *printed = print_file(f);
    mg_cfg_file *g;
    if (mg_cfg_file_parse(printed, "printed.cfg", &g) != MG_OK) fz_expect(false, "a printed file parses again");
    same_file(f, g);
    mg_cfg_file_free(g);
    free(printed);

    for (int i = 0; i < mg_cfg_file_count(f); i++) {
        ask_everything(mg_cfg_file_config(f, i));
        mg_gpt_config c = mg_gpt_config_default();
        if (mg_gpt_config_from(mg_cfg_file_config(f, i), &c) == MG_OK)
            fz_expect(c.n_head > 0 && c.n_embd % c.n_head == 0 && c.pos[0] != 0, "a GPT config that reads is consistent");
    }
    mg_cfg_file_free(f);
    return 0;
}
