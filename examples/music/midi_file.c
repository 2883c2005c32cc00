/* music_midi_file in memory: building, freeing, ordering tracks; whole-file I/O helpers. */
#include "music_internal.h"

#include "minigrad/file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

mg_status music_grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return MG_OK;
    size_t c = *cap ? *cap : 16;
    while (c < need) {
        if (c > SIZE_MAX / 2)
            return mg_set_error(MG_ERR_NOMEM, "music: %zu elements overflow", need);
        c *= 2;
    }
    if (c > SIZE_MAX / elem)
        return mg_set_error(MG_ERR_NOMEM, "music: %zu elements overflow", need);
    void *q = realloc(*p, c * elem);
    if (!q) return mg_set_error(MG_ERR_NOMEM, "music: out of memory for %zu bytes", c * elem);
    *p = q;
    *cap = c;
    return MG_OK;
}

void music_midi_init(music_midi_file *f, int format, int division) {
    memset(f, 0, sizeof *f);
    f->format = format;
    f->division = division;
}

void music_midi_free(music_midi_file *f) {
    if (!f) return;
    for (size_t i = 0; i < f->ntracks; i++) free(f->tracks[i].ev);
    free(f->tracks);
    free(f->blob);
    memset(f, 0, sizeof *f);
}

mg_status music_midi_add_track(music_midi_file *f, size_t *index) {
    mg_status s =
        music_grow((void **)&f->tracks, &f->tracks_cap, f->ntracks + 1, sizeof *f->tracks);
    if (s) return s;
    memset(&f->tracks[f->ntracks], 0, sizeof *f->tracks);
    if (index) *index = f->ntracks;
    f->ntracks++;
    return MG_OK;
}

static mg_status push_event(music_midi_file *f, size_t track, music_midi_event e) {
    if (track >= f->ntracks)
        return mg_set_error(MG_ERR_INVALID, "midi: track %zu does not exist (file has %zu)", track,
                            f->ntracks);
    music_midi_track *t = &f->tracks[track];
    mg_status s = music_grow((void **)&t->ev, &t->cap, t->n + 1, sizeof *t->ev);
    if (s) return s;
    t->ev[t->n++] = e;
    if (e.tick > t->end_tick) t->end_tick = e.tick;
    return MG_OK;
}

static mg_status push_payload(music_midi_file *f, const void *data, uint32_t len, uint32_t *off) {
    if (f->blob_len + len > UINT32_MAX)
        return mg_set_error(MG_ERR_INVALID, "midi: payloads exceed 4 GiB");
    mg_status s = music_grow((void **)&f->blob, &f->blob_cap, f->blob_len + len + 1, 1);
    if (s) return s;
    if (len) memcpy(f->blob + f->blob_len, data, len);
    *off = (uint32_t)f->blob_len;
    f->blob_len += len;
    return MG_OK;
}

mg_status music_midi_add_channel(music_midi_file *f, size_t track, uint64_t tick, uint8_t status,
                              uint8_t d1, uint8_t d2) {
    if (status < 0x80 || status >= 0xF0 || d1 > 127 || d2 > 127)
        return mg_set_error(MG_ERR_INVALID,
                            "midi: channel message status 0x%02x data %u %u is not valid", status,
                            d1, d2);
    uint8_t kind = status & 0xF0;
    if (kind == MUSIC_MIDI_PROGRAM || kind == MUSIC_MIDI_CHANNEL_PRESSURE) d2 = 0;
    return push_event(f, track,
                      (music_midi_event){.tick = tick, .status = status, .d1 = d1, .d2 = d2});
}

mg_status music_midi_add_meta(music_midi_file *f, size_t track, uint64_t tick, uint8_t type,
                           const void *data, uint32_t len) {
    if (type > 127)
        return mg_set_error(MG_ERR_INVALID, "midi: meta type 0x%02x is not valid", type);
    if (type == MUSIC_MIDI_META_END_OF_TRACK)
        return mg_set_error(MG_ERR_INVALID,
                            "midi: End-of-Track is written by the writer (set end_tick)");
    uint32_t off = 0;
    mg_status s = push_payload(f, data, len, &off);
    if (s) return s;
    return push_event(
        f, track,
        (music_midi_event){.tick = tick, .status = 0xFF, .type = type, .len = len, .off = off});
}

mg_status music_midi_add_tempo(music_midi_file *f, size_t track, uint64_t tick, uint32_t us) {
    if (us == 0 || us > 0xFFFFFF)
        return mg_set_error(MG_ERR_INVALID,
                            "midi: tempo %u us per quarter out of range 1..16777215", us);
    uint8_t b[3] = {(uint8_t)(us >> 16), (uint8_t)(us >> 8), (uint8_t)us};
    return music_midi_add_meta(f, track, tick, MUSIC_MIDI_META_TEMPO, b, 3);
}

mg_status music_midi_add_sysex(music_midi_file *f, size_t track, uint64_t tick, uint8_t status,
                            const void *data, uint32_t len) {
    if (status != MUSIC_MIDI_SYSEX && status != MUSIC_MIDI_SYSEX_ESCAPE)
        return mg_set_error(MG_ERR_INVALID, "midi: sysex status 0x%02x is not 0xF0 or 0xF7",
                            status);
    uint32_t off = 0;
    mg_status s = push_payload(f, data, len, &off);
    if (s) return s;
    return push_event(f, track,
                      (music_midi_event){.tick = tick, .status = status, .len = len, .off = off});
}

/* Bottom-up merge sort: stable, O(n log n), and a single pass when the track is already sorted,
 * which is what every file read from disk is. */
void music_midi_sort_track(music_midi_track *t) {
    size_t n = t->n, i;
    for (i = 1; i < n; i++)
        if (t->ev[i].tick < t->ev[i - 1].tick) break;
    if (i >= n) return;
    music_midi_event *tmp = malloc(n * sizeof *tmp);
    if (!tmp) { /* still correct without memory: stable insertion sort */
        for (size_t a = 1; a < n; a++) {
            music_midi_event e = t->ev[a];
            size_t b = a;
            for (; b > 0 && t->ev[b - 1].tick > e.tick; b--) t->ev[b] = t->ev[b - 1];
            t->ev[b] = e;
        }
        return;
    }
    music_midi_event *src = t->ev, *dst = tmp;
    for (size_t w = 1; w < n; w *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            size_t a = lo, b = mid, k = lo;
            while (a < mid && b < hi) dst[k++] = src[b].tick < src[a].tick ? src[b++] : src[a++];
            while (a < mid) dst[k++] = src[a++];
            while (b < hi) dst[k++] = src[b++];
        }
        music_midi_event *x = src;
        src = dst;
        dst = x;
    }
    if (src != t->ev) memcpy(t->ev, src, n * sizeof *tmp);
    free(tmp);
}

mg_status music_read_file(const char *path, size_t max_bytes, uint8_t **buf, size_t *len) {
    *buf = NULL;
    *len = 0;
    FILE *fp = fopen(path, "rb");
    if (!fp) return mg_set_error(MG_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb; /* a regular file too large is refused by its size; anything else as it is read */
    if (fstat(fileno(fp), &sb) == 0 && S_ISREG(sb.st_mode) && (uint64_t)sb.st_size > (uint64_t)max_bytes) {
        fclose(fp);
        return mg_set_error(MG_ERR_IO, "%s: larger than %zu bytes: not read", path, max_bytes);
    }
    size_t cap = 0, n = 0;
    uint8_t *b = NULL;
    for (;;) {
        if (music_grow((void **)&b, &cap, n + 65536, 1)) {
            free(b);
            fclose(fp);
            return mg_wrap_error(MG_ERR_NOMEM, "%s", path);
        }
        size_t got = fread(b + n, 1, cap - n, fp);
        n += got;
        if (n > max_bytes) {
            free(b);
            fclose(fp);
            return mg_set_error(MG_ERR_IO, "%s: larger than %zu bytes: not read", path, max_bytes);
        }
        if (got == 0) break;
    }
    int bad = ferror(fp);
    fclose(fp);
    if (bad) {
        free(b);
        return mg_set_error(MG_ERR_IO, "%s: read error", path);
    }
    *buf = b;
    *len = n;
    return MG_OK;
}

mg_status music_write_file(const char *path, const uint8_t *buf, size_t len) {
    mg_outfile o;
    mg_status st = mg_outfile_open(&o, path);
    if (st != MG_OK) return st;
    fwrite(buf, 1, len, o.f); /* a short write leaves the stream's error set: the commit reports it */
    return mg_outfile_commit(&o);
}
