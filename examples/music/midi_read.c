/* Standard MIDI File reader. Every read is checked against the bytes left, every error names the
 * file and the byte offset (from the start of the file) where the problem was seen, and the work
 * is linear in the file size, so no input can crash it, hang it or make it allocate much more
 * than the file itself. */
#include "music_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_FILE_BYTES ((size_t)256 << 20)

typedef struct reader {
    const uint8_t *buf;
    size_t len;
    const char *name;
    music_midi_file *f;
} reader;

#define FAIL(off, ...) fail(r, (size_t)(off), __VA_ARGS__)

static mg_status fail(reader *r, size_t off, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static mg_status fail(reader *r, size_t off, const char *fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return mg_set_error(MG_ERR_FORMAT, "%s: offset %zu: %s", r->name, off, msg);
}

/* A variable-length quantity: 7 bits per byte, high bit = more follows, at most 4 bytes (so at
 * most 0x0FFFFFFF). *p advances past it; `end` is the end of the chunk it lives in. */
static mg_status read_vlq(reader *r, size_t *p, size_t end, size_t track, const char *what,
                          uint32_t *out) {
    size_t start = *p;
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        if (*p >= end)
            return FAIL(start,
                        "%s (variable-length quantity) runs past the end of track %zu, which "
                        "ends at offset %zu",
                        what, track, end);
        uint8_t b = r->buf[(*p)++];
        v = v << 7 | (b & 0x7F);
        if (!(b & 0x80)) {
            *out = v;
            return MG_OK;
        }
    }
    return FAIL(start, "%s (variable-length quantity) is longer than 4 bytes", what);
}

static mg_status add_event(reader *r, size_t track, music_midi_event e, const uint8_t *payload) {
    music_midi_file *f = r->f;
    if (payload) {
        mg_status s = music_grow((void **)&f->blob, &f->blob_cap, f->blob_len + e.len + 1, 1);
        if (s) return mg_wrap_error(s, "%s", r->name);
        memcpy(f->blob + f->blob_len, payload, e.len);
        e.off = (uint32_t)f->blob_len;
        f->blob_len += e.len;
    }
    music_midi_track *t = &f->tracks[track];
    mg_status s = music_grow((void **)&t->ev, &t->cap, t->n + 1, sizeof *t->ev);
    if (s) return mg_wrap_error(s, "%s", r->name);
    t->ev[t->n++] = e;
    return MG_OK;
}

static mg_status read_track(reader *r, size_t track, size_t p, size_t end) {
    const uint8_t *b = r->buf;
    uint64_t tick = 0;
    uint8_t running = 0;
    music_midi_track *t = &r->f->tracks[track];
    while (p < end) {
        uint32_t delta = 0, len = 0;
        mg_status s = read_vlq(r, &p, end, track, "delta time", &delta);
        if (s) return s;
        tick += delta;
        if (p >= end) return FAIL(p, "track %zu ends after a delta time, with no event", track);
        size_t ev_off = p;
        uint8_t status = b[p];
        if (status & 0x80) {
            p++;
            if (status < 0xF0) running = status;
        } else {
            if (!running)
                return FAIL(p, "data byte 0x%02x in track %zu with no running status to use",
                            status, track);
            status = running;
        }
        if (status < 0xF0) {
            uint8_t kind = status & 0xF0;
            int ndata = (kind == MUSIC_MIDI_PROGRAM || kind == MUSIC_MIDI_CHANNEL_PRESSURE) ? 1 : 2;
            if (end - p < (size_t)ndata)
                return FAIL(ev_off,
                            "channel message 0x%02x needs %d data bytes; track %zu ends at "
                            "offset %zu",
                            status, ndata, track, end);
            uint8_t d[2] = {b[p], ndata == 2 ? b[p + 1] : 0};
            for (int i = 0; i < ndata; i++)
                if (d[i] & 0x80)
                    return FAIL(p + (size_t)i,
                                "data byte 0x%02x of channel message 0x%02x has its "
                                "top bit set",
                                d[i], status);
            p += (size_t)ndata;
            s = add_event(r, track,
                          (music_midi_event){.tick = tick, .status = status, .d1 = d[0], .d2 = d[1]},
                          NULL);
            if (s) return s;
        } else if (status == MUSIC_MIDI_META) {
            if (p >= end)
                return FAIL(ev_off, "meta event with no type byte at the end of track %zu", track);
            uint8_t type = b[p++];
            if (type & 0x80) return FAIL(p - 1, "meta event type 0x%02x has its top bit set", type);
            s = read_vlq(r, &p, end, track, "meta event length", &len);
            if (s) return s;
            if (len > end - p)
                return FAIL(ev_off,
                            "meta event 0x%02x of %u bytes runs past the end of track %zu, "
                            "which ends at offset %zu",
                            type, len, track, end);
            /* a tempo of 0 us per quarter would put every later event at the same instant */
            if (type == MUSIC_MIDI_META_TEMPO && len == 3 && !(b[p] | b[p + 1] | b[p + 2]))
                return FAIL(ev_off,
                            "tempo meta event (0x51) sets 0 microseconds per quarter note; a tempo "
                            "is at least 1");
            if (type == MUSIC_MIDI_META_END_OF_TRACK) {
                t->end_tick = tick;
                return MG_OK; /* bytes after End-of-Track in the chunk are not events */
            }
            s = add_event(r, track,
                          (music_midi_event){.tick = tick, .status = status, .type = type, .len = len},
                          b + p);
            if (s) return s;
            p += len;
        } else if (status == MUSIC_MIDI_SYSEX || status == MUSIC_MIDI_SYSEX_ESCAPE) {
            s = read_vlq(r, &p, end, track, "sysex length", &len);
            if (s) return s;
            if (len > end - p)
                return FAIL(ev_off,
                            "sysex event of %u bytes runs past the end of track %zu, which "
                            "ends at offset %zu",
                            len, track, end);
            s = add_event(r, track, (music_midi_event){.tick = tick, .status = status, .len = len},
                          b + p);
            if (s) return s;
            p += len;
        } else {
            return FAIL(ev_off,
                        "status byte 0x%02x is a real-time or system-common message, which "
                        "a MIDI file cannot hold",
                        status);
        }
        t->end_tick = tick;
    }
    t->end_tick = tick; /* no End-of-Track: the chunk's end ends the track */
    return MG_OK;
}

static mg_status parse(reader *r) {
    const uint8_t *b = r->buf;
    size_t len = r->len;
    if (len < 8 || memcmp(b, "MThd", 4) != 0)
        return FAIL(0, "missing MThd header: not a Standard MIDI File (%zu bytes)", len);
    uint32_t hlen = music_be32(b + 4);
    if (hlen < 6) return FAIL(4, "header chunk length %u is shorter than 6", hlen);
    if (hlen > len - 8)
        return FAIL(4, "header chunk length %u runs past the end of the file (%zu bytes)", hlen,
                    len);
    int format = music_be16(b + 8);
    size_t ntracks = music_be16(b + 10);
    uint16_t div = music_be16(b + 12);
    if (format > 2) return FAIL(8, "format %d is not 0, 1 or 2", format);
    if (ntracks == 0) return FAIL(10, "header declares no tracks");
    if (format == 0 && ntracks != 1)
        return FAIL(10, "format 0 must hold exactly one track, header declares %zu", ntracks);
    if (div & 0x8000) {
        int fps = -(int)(int8_t)(div >> 8), tpf = div & 0xFF;
        if ((fps != 24 && fps != 25 && fps != 29 && fps != 30) || tpf == 0)
            return FAIL(12, "SMPTE division 0x%04x: %d frames per second, %d ticks per frame", div,
                        fps, tpf);
    } else if (div == 0) {
        return FAIL(12, "division is 0 ticks per quarter note");
    }
    size_t p = 8 + (size_t)hlen;
    /* Each track takes at least its 8-byte chunk header: refuse an absurd count before
     * allocating anything for it. */
    if (ntracks > (len - p) / 8)
        return FAIL(10,
                    "header declares %zu tracks but only %zu bytes follow it (a track takes at "
                    "least 8)",
                    ntracks, len - p);
    music_midi_init(r->f, format, (int)(int16_t)div);
    mg_status s =
        music_grow((void **)&r->f->tracks, &r->f->tracks_cap, ntracks, sizeof *r->f->tracks);
    if (s) return mg_wrap_error(s, "%s", r->name);
    while (r->f->ntracks < ntracks) {
        if (len - p < 8) {
            if (p == len)
                return FAIL(p, "file ends after %zu of the %zu tracks its header declares",
                            r->f->ntracks, ntracks);
            return FAIL(p,
                        "truncated chunk header (%zu bytes left) where track %zu of %zu should be",
                        len - p, r->f->ntracks, ntracks);
        }
        uint32_t clen = music_be32(b + p + 4);
        if (clen > len - p - 8)
            return FAIL(p + 4, "%s chunk length %u runs past the end of the file (%zu bytes)",
                        memcmp(b + p, "MTrk", 4) == 0 ? "track" : "unknown", clen, len);
        if (memcmp(b + p, "MTrk", 4) == 0) {
            size_t t = r->f->ntracks++;
            memset(&r->f->tracks[t], 0, sizeof r->f->tracks[t]);
            s = read_track(r, t, p + 8, p + 8 + clen);
            if (s) return s;
        }
        /* Chunks of other types are skipped, as the standard asks of readers. */
        p += 8 + (size_t)clen;
    }
    return MG_OK;
}

mg_status music_midi_parse(const uint8_t *buf, size_t len, const char *name, music_midi_file *out) {
    reader r = {buf, len, name ? name : "(memory)", out};
    memset(out, 0, sizeof *out);
    if (!buf && len) return mg_set_error(MG_ERR_INVALID, "%s: no buffer", r.name);
    mg_status s = parse(&r);
    if (s) music_midi_free(out);
    return s;
}

mg_status music_midi_read(const char *path, music_midi_file *out) {
    uint8_t *buf;
    size_t len;
    memset(out, 0, sizeof *out);
    mg_status s = music_read_file(path, MAX_FILE_BYTES, &buf, &len);
    if (s) return s;
    s = music_midi_parse(buf, len, path, out);
    free(buf);
    return s;
}
