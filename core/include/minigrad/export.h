/* minigrad/export.h: which symbols the shared libraries export.
 *
 * The libraries are built with -fvisibility=hidden; every function of the public API is declared
 * with MG_API, so it alone is visible to programs and plugins. Internal functions stay hidden and
 * can change at any time. MG_DEPRECATED(msg) marks an old name kept for compatibility: it still
 * works, and the compiler says what to call instead.
 */
#ifndef MINIGRAD_EXPORT_H
#define MINIGRAD_EXPORT_H

#if defined(__GNUC__) || defined(__clang__)
#define MG_API __attribute__((visibility("default")))
#define MG_DEPRECATED(msg) __attribute__((deprecated(msg)))
#else
#define MG_API
#define MG_DEPRECATED(msg)
#endif

#endif
