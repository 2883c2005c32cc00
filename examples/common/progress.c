/* Formatting for the programs' summaries. */
#include "progress.h"

#include <math.h>
#include <stdlib.h>
#include <sys/resource.h>


char *ex_fmt_bytes(double b, char *buf, size_t n) {
    if (b >= 1024.0 * 1024 * 1024)
        snprintf(buf, n, "%.2f GiB", b / (1024.0 * 1024 * 1024));
    else if (b >= 1024.0 * 1024)
        snprintf(buf, n, "%.1f MiB", b / (1024.0 * 1024));
    else
        snprintf(buf, n, "%.1f KiB", b / 1024.0);
    return buf;
}

size_t ex_peak_rss(void) {
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
    return (size_t)ru.ru_maxrss * 1024; /* KiB on Linux */
}
