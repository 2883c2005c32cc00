/* Helpers shared by the music library's files; not part of its API. */
#ifndef MUSIC_INTERNAL_H
#define MUSIC_INTERNAL_H

#include "music.h"

/* Makes room for `need` elements of `elem` bytes in *p (capacity *cap), growing geometrically.
 * MG_ERR_NOMEM (with a message) on overflow or allocation failure; *p is then unchanged. */
mg_status music_grow(void **p, size_t *cap, size_t need, size_t elem);

/* Big-endian fields of SMF chunks. */
static inline uint32_t music_be32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static inline uint16_t music_be16(const uint8_t *p) {
    return (uint16_t)(p[0] << 8 | p[1]);
}

/* Reads a whole file (at most max_bytes) into a malloc'ed buffer. MG_ERR_IO names the path. */
mg_status music_read_file(const char *path, size_t max_bytes, uint8_t **buf, size_t *len);
/* Writes bytes to path whole, through a temporary file beside it (minigrad/file.h): a failed write
 * (a full disk) leaves no partial file and MG_ERR_IO naming path and the reason. */
mg_status music_write_file(const char *path, const uint8_t *buf, size_t len);

#endif
