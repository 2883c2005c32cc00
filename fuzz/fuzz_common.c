/* Linked into every fuzz target, under libFuzzer and under the replay driver alike. */

/* Undefined behaviour is a finding too: stop at the first report instead of logging on. */
const char *__ubsan_default_options(void);
const char *__ubsan_default_options(void) {
    return "halt_on_error=1:print_stacktrace=1";
}
