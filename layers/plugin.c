/* The plugin loader: the one search path (minigrad/plugin.h), loading a plugin (dlopen, find
 * mg_plugin_init, let it register through a host table that collects its vtables, then commit them
 * all or none), the scan that finds a layer or scheme by name in any plugin, and the listing. */
#include "registry_internal.h"

#include <dirent.h>
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_PENDING 64

typedef struct {
    const mg_layer_vtable *vts[MAX_PENDING];
    int n;
    mg_status err;
    char msg[1024];
} pending;

typedef struct {
    char *path;
    void *handle;
} loaded;

/* A file of the search path that did not load (why), or that was shadowed (why = the first). */
typedef struct {
    char *dir, *path, *why;
} note;

typedef struct {
    note *v;
    int n, cap;
} notes;

/* One directory of the search path. */
typedef struct {
    char *dir;
    const char *role;
    bool exists;
} sdir;

typedef struct {
    sdir *v;
    int n;
} spath;

/* Recursive: a plugin's init may itself load a plugin it builds on, or look a scheme up. */
static pthread_mutex_t plug_lock = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
static loaded *plugins;
static int n_plugins, cap_plugins;
static char **dirs; /* added with mg_plugin_add_dir */
static int n_dirs;
static bool use_defaults = true;
static notes failed, shadowed;
/* The plugins whose init is running, outermost first: a plugin may load another it builds on. A
 * nested scan leaves them alone; a nested load of one of them is a cycle, refused. */
typedef struct {
    char *path;    /* real path */
    bool in_cycle; /* it is part of a cycle, */
    char *cycle;   /* this one ("a -> b -> a"); malloc'ed, NULL if there was no memory for it */
} initing;
static initing in_init[16];
static int n_in_init;

static mg_status plugin_register(const mg_plugin_host *host, const mg_layer_vtable *vt) {
    pending *p = host->host_data;
    mg_status s = mg_reg_validate(vt, host->origin);
    if (s == MG_OK && p->n == MAX_PENDING)
        s = mg_set_error(MG_ERR_INVALID, "%s: registers more than %d layers", host->origin, MAX_PENDING);
    if (s != MG_OK) {
        if (p->err == MG_OK) p->err = s, snprintf(p->msg, sizeof p->msg, "%s", mg_last_error());
        return s;
    }
    p->vts[p->n++] = vt;
    return MG_OK;
}

mg_status mg_plugin_add_dir(const char *dir) {
    if (!dir || !*dir) return mg_set_error(MG_ERR_INVALID, "mg_plugin_add_dir: empty directory name");
    pthread_mutex_lock(&plug_lock);
    mg_status st = MG_OK;
    for (int i = 0; i < n_dirs; i++)
        if (strcmp(dirs[i], dir) == 0) goto out;
    char **d = realloc(dirs, (size_t)(n_dirs + 1) * sizeof *d);
    if (!d || !(d[n_dirs] = strdup(dir))) {
        if (d) dirs = d;
        st = mg_set_error(MG_ERR_NOMEM, "mg_plugin_add_dir: out of memory");
        goto out;
    }
    dirs = d;
    n_dirs++;
out:
    pthread_mutex_unlock(&plug_lock);
    return st;
}

void mg_plugin_use_default_dirs(bool on) {
    pthread_mutex_lock(&plug_lock);
    use_defaults = on;
    pthread_mutex_unlock(&plug_lock);
}

/* ---- the search path ---- */

static void spath_free(spath *p) {
    for (int i = 0; i < p->n; i++) free(p->v[i].dir);
    free(p->v);
    p->v = NULL, p->n = 0;
}

/* Appends dir (len bytes of it) unless it is already there (same text or same real directory). */
static void spath_add(spath *p, const char *dir, size_t len, const char *role) {
    if (len == 0 || len >= PATH_MAX) return;
    char d[PATH_MAX], real[PATH_MAX];
    memcpy(d, dir, len);
    d[len] = 0;
    struct stat sb;
    bool exists = stat(d, &sb) == 0 && S_ISDIR(sb.st_mode);
    bool have_real = exists && realpath(d, real);
    for (int i = 0; i < p->n; i++) {
        if (strcmp(p->v[i].dir, d) == 0) return;
        char other[PATH_MAX];
        if (have_real && p->v[i].exists && realpath(p->v[i].dir, other) && strcmp(other, real) == 0) return;
    }
    sdir *v = realloc(p->v, (size_t)(p->n + 1) * sizeof *v);
    if (!v) return;
    p->v = v;
    if (!(v[p->n].dir = strdup(d))) return;
    v[p->n].role = role;
    v[p->n].exists = exists;
    p->n++;
}

/* Whether dir (a real path) lies in the build tree minigrad was built in. */
static bool in_build_tree(const char *dir) {
    char root[PATH_MAX];
    if (!mg_plugin_build_root[0] || !realpath(mg_plugin_build_root, root)) return false;
    size_t rl = strlen(root);
    return strncmp(dir, root, rl) == 0 && (dir[rl] == '/' || dir[rl] == 0);
}

/* The folder of the running program, and whether it lies in the build tree minigrad was built in. */
static bool program_dir(char *buf, size_t n, bool *in_build) {
    *in_build = false;
    char exe[PATH_MAX];
    ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (k <= 0) return false;
    exe[k] = 0;
    snprintf(buf, n, "%s", dirname(exe));
    *in_build = in_build_tree(buf);
    return true;
}

/* The installed plugin folder as seen from the library this code was loaded from
 * (<its folder>/minigrad/plugins): the one that came with it, even where the prefix has been moved
 * since it was configured. False when that library is the program itself (linked statically) or lies
 * in the build tree, which has a plugins folder of its own. */
static bool library_plugin_dir(char *buf, size_t n) {
    Dl_info info;
    struct link_map *map = NULL;
    char lib[PATH_MAX];
    /* the loader's own record of the object holding this code: the program itself has an empty
     * name there (dladdr's dli_fname would be argv[0], which realpath resolves against the current
     * folder for a program started through PATH) */
    if (!dladdr1(&plug_lock, &info, (void **)&map, RTLD_DL_LINKMAP) || !map || !map->l_name || !map->l_name[0] ||
        !realpath(map->l_name, lib))
        return false;
    const char *dir = dirname(lib);
    if (in_build_tree(dir)) return false;
    int w = snprintf(buf, n, "%s/%s", dir, mg_plugin_lib_subdir);
    return w > 0 && (size_t)w < n;
}

/* Whether a and b name the same directory (same text, or the same real directory). */
static bool same_dir(const char *a, const char *b) {
    if (strcmp(a, b) == 0) return true;
    char ra[PATH_MAX], rb[PATH_MAX];
    return realpath(a, ra) && realpath(b, rb) && strcmp(ra, rb) == 0;
}

/* Builds the search path (minigrad/plugin.h); the caller holds plug_lock. */
static void search_path(spath *p) {
    p->v = NULL, p->n = 0;
    const char *env = getenv(MG_PLUGIN_PATH_ENV);
    for (const char *s = env; s && *s;) {
        const char *end = strchr(s, ':');
        size_t len = end ? (size_t)(end - s) : strlen(s);
        spath_add(p, s, len, MG_PLUGIN_PATH_ENV);
        s += len + (end ? 1 : 0);
    }
    if (use_defaults) {
        char exe_dir[PATH_MAX];
        bool in_build;
        bool have_exe = program_dir(exe_dir, sizeof exe_dir, &in_build);
        if (in_build) {
            spath_add(p, mg_plugin_build_dir, strlen(mg_plugin_build_dir), "build tree");
        } else {
            /* the plugins that came with the loaded library first; where the prefix has not moved
             * that is the configured folder, named as such */
            char lib_dir[PATH_MAX];
            if (library_plugin_dir(lib_dir, sizeof lib_dir) && !same_dir(lib_dir, mg_plugin_install_dir))
                spath_add(p, lib_dir, strlen(lib_dir), "beside the library");
            spath_add(p, mg_plugin_install_dir, strlen(mg_plugin_install_dir), "installed");
        }
        if (have_exe && !in_build) {
            spath_add(p, exe_dir, strlen(exe_dir), "program folder");
            char sub[PATH_MAX + 16];
            snprintf(sub, sizeof sub, "%s/plugins", exe_dir);
            spath_add(p, sub, strlen(sub), "program folder");
        }
    }
    for (int i = 0; i < n_dirs; i++) spath_add(p, dirs[i], strlen(dirs[i]), "added");
}

/* Appends to a message buffer, cutting what does not fit. */
static void append(char *buf, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void append(char *buf, size_t n, const char *fmt, ...) {
    size_t len = strlen(buf);
    if (len + 1 >= n) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + len, n - len, fmt, ap);
    va_end(ap);
}

/* "MINIGRAD_PLUGIN_PATH=/a:/b, /usr/lib/minigrad/plugins (installed, missing), /x (added)". */
static void describe(const spath *p, char *buf, size_t n) {
    buf[0] = 0;
    const char *env = getenv(MG_PLUGIN_PATH_ENV);
    if (env && *env)
        append(buf, n, "%s=%s", MG_PLUGIN_PATH_ENV, env);
    else
        append(buf, n, "%s (not set)", MG_PLUGIN_PATH_ENV);
    for (int i = 0; i < p->n; i++)
        if (strcmp(p->v[i].role, MG_PLUGIN_PATH_ENV) != 0)
            append(buf, n, ", %s (%s%s)", p->v[i].dir, p->v[i].role, p->v[i].exists ? "" : ", missing");
}

int mg_plugin_search_path(char *buf, size_t n) {
    pthread_mutex_lock(&plug_lock);
    spath p;
    search_path(&p);
    if (n) buf[0] = 0;
    for (int i = 0; i < p.n && n; i++) append(buf, n, "%s%s", i ? ":" : "", p.v[i].dir);
    int count = p.n;
    spath_free(&p);
    pthread_mutex_unlock(&plug_lock);
    return count;
}

/* Where the plugin `name` is in `dir`: its path (malloc'd) or NULL (not there, or no memory). */
static char *try_dir(const char *dir, const char *name) {
    static const char *const pat[] = {"%s/lib%s.so", "%s/%s.so"};
    for (int k = 0; k < 2; k++) {
        int w = snprintf(NULL, 0, pat[k], dir, name);
        char *path = w > 0 ? malloc((size_t)w + 1) : NULL;
        if (!path) return NULL;
        snprintf(path, (size_t)w + 1, pat[k], dir, name);
        if (access(path, R_OK) == 0) return path;
        free(path);
    }
    return NULL;
}

/* Copies path into buf (n bytes); a buffer too small for it is MG_ERR_INVALID, with buf left empty. */
static mg_status give_path(const char *path, char *buf, size_t n) {
    size_t len = strlen(path);
    if (len < n) {
        memcpy(buf, path, len + 1);
        return MG_OK;
    }
    if (n) buf[0] = '\0';
    return mg_set_error(MG_ERR_INVALID, "mg_plugin_find: the buffer of %zu bytes is too small for the path '%s' "
                                        "(%zu bytes with its terminating NUL)", n, path, len + 1);
}

mg_status mg_plugin_find(const char *name, char *buf, size_t n) {
    if (!name || !*name) return mg_set_error(MG_ERR_INVALID, "mg_plugin_find: empty plugin name");
    if (n && !buf) return mg_set_error(MG_ERR_INVALID, "mg_plugin_find: buf is NULL but n is %zu", n);
    if (strchr(name, '/')) return give_path(name, buf, n);
    pthread_mutex_lock(&plug_lock);
    spath p;
    search_path(&p);
    char *found = NULL;
    for (int i = 0; i < p.n && !found; i++) found = p.v[i].exists ? try_dir(p.v[i].dir, name) : NULL;
    char where[768];
    if (!found) describe(&p, where, sizeof where);
    spath_free(&p);
    pthread_mutex_unlock(&plug_lock);
    if (found) {
        mg_status st = give_path(found, buf, n);
        free(found);
        return st;
    }
    return mg_set_error(MG_ERR_NOT_FOUND,
                        "plugin '%s' not found: looked for lib%s.so and %s.so in %s (set %s to the directory that "
                        "holds it)",
                        name, name, name, where, MG_PLUGIN_PATH_ENV);
}

/* ---- the ELF check ---- */

/* This host's ELF machine; 0 where this file does not know the architecture (then dlopen judges). */
#if defined(__x86_64__)
#define HOST_MACHINE EM_X86_64
#elif defined(__aarch64__)
#define HOST_MACHINE EM_AARCH64
#elif defined(__i386__)
#define HOST_MACHINE EM_386
#elif defined(__arm__)
#define HOST_MACHINE EM_ARM
#elif defined(__riscv)
#define HOST_MACHINE EM_RISCV
#elif defined(__powerpc64__)
#define HOST_MACHINE EM_PPC64
#elif defined(__s390x__)
#define HOST_MACHINE EM_S390
#else
#define HOST_MACHINE 0
#endif
#define HOST_CLASS (__ELF_NATIVE_CLASS == 64 ? ELFCLASS64 : ELFCLASS32)
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define HOST_DATA ELFDATA2MSB
#else
#define HOST_DATA ELFDATA2LSB
#endif

static const char *machine_name(unsigned m) {
    switch (m) {
    case EM_X86_64: return "x86-64";
    case EM_AARCH64: return "AArch64";
    case EM_386: return "i386";
    case EM_ARM: return "32-bit ARM";
    case EM_RISCV: return "RISC-V";
    case EM_PPC64: return "64-bit PowerPC";
    case EM_S390: return "s390";
    default: return "another machine";
    }
}

static const char *elf_type_name(unsigned t) {
    switch (t) {
    case ET_REL: return "a relocatable object (.o)";
    case ET_EXEC: return "an executable";
    case ET_CORE: return "a core dump";
    default: return "an ELF file of no known type";
    }
}

/* Bytes [off, off + n) lie inside a file of `size` bytes. */
static bool within(uint64_t off, uint64_t n, uint64_t size) { return off <= size && n <= size - off; }

static bool read_at(int fd, void *buf, size_t n, uint64_t off) {
    for (size_t got = 0; got < n;) {
        ssize_t r = pread(fd, (char *)buf + got, n - got, (off_t)(off + got));
        if (r < 0 && errno == EINTR) continue;
        if (r == 0) errno = 0; /* the file ended early */
        if (r <= 0) return false;
        got += (size_t)r;
    }
    return true;
}

typedef unsigned long long ull;

/* Refuses, before dlopen sees it, a file that is not a whole ELF shared object for this host:
 * dlopen maps each loadable segment's file bytes without reading them first, so in a file cut short
 * the dynamic loader faults (SIGBUS) on the first page past the end. Reads the ELF header (magic,
 * class, byte order, type, machine), checks that the program header table and the section header
 * table lie inside the file, and that so do the file bytes of every PT_LOAD segment. */
static mg_status check_elf(const char *path) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a FIFO named *.so must not hang the search */
    if (fd < 0) return mg_set_error(MG_ERR_IO, "%s: cannot open plugin: %s", path, strerror(errno));
    mg_status code = MG_ERR_FORMAT;
    char why[400] = "";
    ElfW(Ehdr) eh;
    ElfW(Phdr) *ph = NULL;
    struct stat sb;
    uint64_t size = 0;
    if (fstat(fd, &sb) != 0) {
        code = MG_ERR_IO;
        snprintf(why, sizeof why, "cannot stat it: %s", strerror(errno));
        goto done;
    }
    if (!S_ISREG(sb.st_mode)) {
        code = MG_ERR_IO;
        snprintf(why, sizeof why, "not a regular file");
        goto done;
    }
    size = (uint64_t)sb.st_size;
    memset(&eh, 0, sizeof eh);
    if (!read_at(fd, eh.e_ident, size < EI_NIDENT ? (size_t)size : EI_NIDENT, 0)) {
        if (size) {
            code = MG_ERR_IO;
            snprintf(why, sizeof why, "cannot read it: %s", errno ? strerror(errno) : "it ended early");
            goto done;
        }
    }
    if (size < SELFMAG || memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0) {
        snprintf(why, sizeof why, "not an ELF shared object (%s)",
                 size ? "it does not start with the ELF magic bytes 7f 45 4c 46" : "the file is empty");
        goto done;
    }
    if (size < EI_NIDENT) {
        snprintf(why, sizeof why, "the file is %llu bytes, shorter than the ELF header: truncated", (ull)size);
        goto done;
    }
    if (eh.e_ident[EI_CLASS] != HOST_CLASS) {
        code = MG_ERR_ABI;
        snprintf(why, sizeof why, "a %s ELF object, but this host loads %d-bit ones",
                 eh.e_ident[EI_CLASS] == ELFCLASS32 ? "32-bit" : eh.e_ident[EI_CLASS] == ELFCLASS64 ? "64-bit" : "bad-class",
                 __ELF_NATIVE_CLASS);
        goto done;
    }
    if (eh.e_ident[EI_DATA] != HOST_DATA) {
        code = MG_ERR_ABI;
        snprintf(why, sizeof why, "an ELF object of the wrong byte order (EI_DATA %u, this host's is %u)",
                 eh.e_ident[EI_DATA], HOST_DATA);
        goto done;
    }
    if (size < sizeof eh || !read_at(fd, &eh, sizeof eh, 0)) {
        snprintf(why, sizeof why, "the file is %llu bytes, shorter than the %zu-byte ELF header: truncated", (ull)size,
                 sizeof eh);
        goto done;
    }
    if (eh.e_type != ET_DYN) {
        snprintf(why, sizeof why, "%s (ELF type %u), not a shared object (build a plugin with -shared)",
                 elf_type_name(eh.e_type), eh.e_type);
        goto done;
    }
    if (HOST_MACHINE && eh.e_machine != HOST_MACHINE) {
        code = MG_ERR_ABI;
        snprintf(why, sizeof why, "built for %s (ELF machine %u), but this host is %s (%u)", machine_name(eh.e_machine),
                 eh.e_machine, machine_name(HOST_MACHINE), HOST_MACHINE);
        goto done;
    }
    if (eh.e_phnum == 0 || eh.e_phentsize != sizeof(ElfW(Phdr))) {
        snprintf(why, sizeof why, "malformed ELF header: %u program headers of %u bytes (a shared object has some, of %zu bytes)",
                 eh.e_phnum, eh.e_phentsize, sizeof(ElfW(Phdr)));
        goto done;
    }
    uint64_t ph_bytes = (uint64_t)eh.e_phnum * sizeof(ElfW(Phdr));
    if (!within(eh.e_phoff, ph_bytes, size)) {
        snprintf(why, sizeof why,
                 "the program header table (file bytes %llu to %llu) runs past the end of the file (%llu bytes): "
                 "truncated",
                 (ull)eh.e_phoff, (ull)eh.e_phoff + (ull)ph_bytes, (ull)size);
        goto done;
    }
    if (eh.e_shoff != 0) {
        uint64_t n_sh = eh.e_shnum ? eh.e_shnum : 1; /* 0: the count is in section 0, which must be there */
        if (eh.e_shentsize != sizeof(ElfW(Shdr))) {
            snprintf(why, sizeof why, "malformed ELF header: section header entries of %u bytes (expected %zu)",
                     eh.e_shentsize, sizeof(ElfW(Shdr)));
            goto done;
        }
        if (within(eh.e_shoff, sizeof(ElfW(Shdr)), size) && eh.e_shnum == 0) {
            ElfW(Shdr) sh0;
            if (read_at(fd, &sh0, sizeof sh0, eh.e_shoff) && sh0.sh_size) n_sh = sh0.sh_size;
        }
        if (n_sh > size / sizeof(ElfW(Shdr)) || !within(eh.e_shoff, n_sh * sizeof(ElfW(Shdr)), size)) {
            snprintf(why, sizeof why,
                     "the section header table (%llu entries at file offset %llu) runs past the end of the file "
                     "(%llu bytes): truncated",
                     (ull)n_sh, (ull)eh.e_shoff, (ull)size);
            goto done;
        }
    }
    ph = malloc((size_t)ph_bytes);
    if (!ph) {
        code = MG_ERR_NOMEM;
        snprintf(why, sizeof why, "out of memory");
        goto done;
    }
    if (!read_at(fd, ph, (size_t)ph_bytes, eh.e_phoff)) {
        code = MG_ERR_IO;
        snprintf(why, sizeof why, "cannot read its program headers: %s", errno ? strerror(errno) : "it ended early");
        goto done;
    }
    int n_load = 0;
    for (int i = 0; i < eh.e_phnum; i++) {
        if (ph[i].p_type != PT_LOAD) continue;
        n_load++;
        if (!within(ph[i].p_offset, ph[i].p_filesz, size)) {
            snprintf(why, sizeof why,
                     "loadable segment %d (program header %d: file bytes %llu to %llu) runs past the end of the file "
                     "(%llu bytes): truncated",
                     n_load - 1, i, (ull)ph[i].p_offset, (ull)ph[i].p_offset + (ull)ph[i].p_filesz, (ull)size);
            goto done;
        }
    }
    if (n_load == 0) snprintf(why, sizeof why, "an ELF shared object with no loadable segment");
done:
    free(ph);
    close(fd);
    if (!why[0]) return MG_OK;
    return mg_set_error(code, "%s: cannot load plugin: %s", path, why);
}

/* ---- loading ---- */

/* Where real is in the chain of plugins being initialised, or -1. */
static int initing_at(const char *real) {
    for (int i = 0; i < n_in_init; i++)
        if (strcmp(in_init[i].path, real) == 0) return i;
    return -1;
}

/* A plugin's init (or one it started) loads real, which is already being initialised (at k): a
 * cycle. Marks every plugin of it, so each is refused however its init goes on, and says so. */
static mg_status refuse_cycle(const char *real, int k) {
    /* "liba.so -> libb.so -> liba.so in DIR" when they share a folder, as most do; else whole paths */
    const char *slash = strrchr(real, '/');
    size_t dir_len = slash ? (size_t)(slash - real) : 0;
    bool one_dir = slash != NULL;
    for (int i = k; i < n_in_init && one_dir; i++)
        one_dir = strncmp(in_init[i].path, real, dir_len + 1) == 0 && !strchr(in_init[i].path + dir_len + 1, '/');
    size_t skip = one_dir ? dir_len + 1 : 0;
    char chain[2048] = "";
    for (int i = k; i < n_in_init; i++) append(chain, sizeof chain, "%s -> ", in_init[i].path + skip);
    append(chain, sizeof chain, "%s", real + skip);
    if (one_dir) append(chain, sizeof chain, " in %.*s", (int)dir_len, real);
    for (int i = k; i < n_in_init; i++)
        if (!in_init[i].in_cycle) in_init[i].in_cycle = true, in_init[i].cycle = strdup(chain);
    return mg_set_error(MG_ERR_INVALID,
                        "%s: refused: plugins load each other in a cycle: %s (a plugin's %s may load only plugins "
                        "that do not load it back)",
                        real, chain, MG_PLUGIN_INIT_SYMBOL);
}

static int find_loaded(const char *real) {
    for (int i = 0; i < n_plugins; i++)
        if (strcmp(plugins[i].path, real) == 0) return i;
    return -1;
}

/* The caller holds plug_lock. */
static mg_status load_path(const char *given) {
    char real[PATH_MAX];
    if (!realpath(given, real)) return mg_set_error(MG_ERR_IO, "%s: cannot open plugin: %s", given, strerror(errno));
    const char *path = real; /* messages name the file as its layers' origin does */
    if (find_loaded(real) >= 0) return MG_OK;
    int k = initing_at(real);
    if (k >= 0) return refuse_cycle(real, k);
    if (n_in_init == (int)(sizeof in_init / sizeof in_init[0]))
        return mg_set_error(MG_ERR_INVALID, "%s: plugins load each other more than %d deep", path, n_in_init);
    mg_status st = check_elf(real);
    if (st != MG_OK) return st;
    char *keep = strdup(real);
    if (!keep) return mg_set_error(MG_ERR_NOMEM, "%s: out of memory", path);
    dlerror();
    void *h = dlopen(real, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        free(keep);
        return mg_set_error(MG_ERR_IO, "%s: cannot load plugin: %s", path, e ? e : "dlopen failed");
    }
    void *sym = dlsym(h, MG_PLUGIN_INIT_SYMBOL);
    if (!sym) {
        dlclose(h);
        free(keep);
        return mg_set_error(MG_ERR_NOT_FOUND,
                            "%s: not a minigrad plugin: it does not export the symbol '%s' (declare it "
                            "MG_PLUGIN_EXPORT mg_status %s(const mg_plugin_host *))",
                            path, MG_PLUGIN_INIT_SYMBOL, MG_PLUGIN_INIT_SYMBOL);
    }
    mg_plugin_init_fn init;
    memcpy(&init, &sym, sizeof init);
    (void)mg_layer_registered_count(); /* built-ins first, so a clash with them is reported */
    pending p = {.err = MG_OK};
    mg_plugin_host host = {MG_PLUGIN_ABI_VERSION, sizeof(mg_plugin_host), keep, plugin_register, &p, {0}};
    mg_clear_error();
    in_init[n_in_init++] = (initing){keep, false, NULL};
    st = init(&host);
    initing done = in_init[--n_in_init];
    if (done.in_cycle) {
        /* whatever init made of the refusal it met, the cycle refuses this plugin too */
        st = mg_set_error(MG_ERR_INVALID, "%s: refused: its %s loads plugins in a cycle: %s", path,
                          MG_PLUGIN_INIT_SYMBOL, done.cycle ? done.cycle : "(no memory to describe it)");
        free(done.cycle);
    } else if (st != MG_OK) {
        if (p.err != MG_OK)
            mg_set_error(st, "%s", p.msg);
        else {
            char why[1024]; /* copied: mg_set_error writes the buffer mg_last_error points into */
            snprintf(why, sizeof why, "%s", *mg_last_error() ? mg_last_error() : "no message");
            mg_set_error(st, "%s: %s failed (%s): %s", path, MG_PLUGIN_INIT_SYMBOL, mg_status_str(st), why);
        }
    } else if (p.err != MG_OK) {
        st = mg_set_error(p.err, "%s", p.msg); /* init ignored a refusal: refuse the whole plugin */
    } else if (p.n == 0) {
        st = mg_set_error(MG_ERR_INVALID, "%s: %s registered no layers", path, MG_PLUGIN_INIT_SYMBOL);
    }
    if (st == MG_OK && n_plugins == cap_plugins) { /* grown only now: a nested load may have appended */
        int cap = cap_plugins ? 2 * cap_plugins : 8;
        loaded *l = realloc(plugins, (size_t)cap * sizeof *l);
        if (!l)
            st = mg_set_error(MG_ERR_NOMEM, "%s: out of memory", path);
        else
            plugins = l, cap_plugins = cap;
    }
    if (st == MG_OK) st = mg_reg_commit(p.vts, p.n, keep);
    if (st != MG_OK) {
        dlclose(h);
        free(keep);
        return st;
    }
    plugins[n_plugins++] = (loaded){keep, h};
    mg_log(MG_LOG_DEBUG, "plugin %s: %d layer(s) registered", keep, p.n);
    return MG_OK;
}

mg_status mg_plugin_load(const char *path_or_name) {
    if (!path_or_name || !*path_or_name) return mg_set_error(MG_ERR_INVALID, "mg_plugin_load: empty plugin name or path");
    char path[PATH_MAX];
    mg_status st = mg_plugin_find(path_or_name, path, sizeof path);
    if (st != MG_OK) return st;
    pthread_mutex_lock(&plug_lock);
    st = load_path(path);
    pthread_mutex_unlock(&plug_lock);
    return st;
}

int mg_plugin_count(void) {
    pthread_mutex_lock(&plug_lock);
    int n = n_plugins;
    pthread_mutex_unlock(&plug_lock);
    return n;
}

const char *mg_plugin_path(int i) {
    pthread_mutex_lock(&plug_lock);
    const char *p = i >= 0 && i < n_plugins ? plugins[i].path : NULL;
    pthread_mutex_unlock(&plug_lock);
    return p;
}

/* ---- the scan ---- */

static const note *notes_find(const notes *ns, const char *path) {
    for (int i = 0; i < ns->n; i++)
        if (strcmp(ns->v[i].path, path) == 0) return &ns->v[i];
    return NULL;
}

static void notes_add(notes *ns, const char *dir, const char *path, const char *why) {
    if (notes_find(ns, path)) return;
    if (ns->n == ns->cap) {
        int cap = ns->cap ? 2 * ns->cap : 8;
        note *v = realloc(ns->v, (size_t)cap * sizeof *v);
        if (!v) return;
        ns->v = v, ns->cap = cap;
    }
    note *e = &ns->v[ns->n];
    e->dir = strdup(dir), e->path = strdup(path), e->why = strdup(why);
    if (!e->dir || !e->path || !e->why) {
        free(e->dir), free(e->path), free(e->why);
        return;
    }
    ns->n++;
}

static const char *base_name(const char *path) {
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* A loader's reason "/dir/libx.so: ..." as "libx.so: ...". */
static const char *short_why(const char *why) {
    const char *colon = why[0] == '/' ? strstr(why, ": ") : NULL;
    if (!colon) return why;
    const char *s = why;
    for (const char *c = why; c < colon; c++)
        if (*c == '/') s = c + 1;
    return s;
}

static bool on_path(const spath *p, const char *dir) {
    for (int i = 0; i < p->n; i++)
        if (strcmp(p->v[i].dir, dir) == 0) return true;
    return false;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* The *.so file names of dir, sorted; those named lib<want>.so or <want>.so first. */
static int list_dir(const char *dir, const char *want, char ***out) {
    *out = NULL;
    DIR *d = opendir(dir);
    if (!d) return 0;
    char **v = NULL;
    int n = 0, cap = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        if (len <= 3 || strcmp(e->d_name + len - 3, ".so") != 0) continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            char **w = realloc(v, (size_t)cap * sizeof *w);
            if (!w) break;
            v = w;
        }
        if ((v[n] = strdup(e->d_name))) n++;
    }
    closedir(d);
    if (n > 1) qsort(v, (size_t)n, sizeof *v, cmp_str); /* v is NULL when the folder holds none */
    if (want && !strchr(want, '/')) {
        char pref[2][300];
        snprintf(pref[0], sizeof pref[0], "lib%s.so", want);
        snprintf(pref[1], sizeof pref[1], "%s.so", want);
        int front = 0;
        for (int k = 0; k < 2; k++)
            for (int i = front; i < n; i++)
                if (strcmp(v[i], pref[k]) == 0) {
                    char *t = v[i];
                    memmove(v + front + 1, v + front, (size_t)(i - front) * sizeof *v);
                    v[front++] = t;
                    break;
                }
    }
    *out = v;
    return n;
}

typedef struct {
    const char *name;
    bool scheme;
} wanted;

static bool is_registered(const wanted *w) {
    return w && (w->scheme ? mg_layer_find_pos(w->name) : mg_layer_find(w->name)) != NULL;
}

/* Loads the plugins of the search path in order until `w` is registered (every one when w is NULL).
 * Returns whether w is. The caller holds plug_lock. */
static bool scan(const spath *p, const wanted *w) {
    if (is_registered(w)) return true;
    char **seen = NULL, **seen_path = NULL; /* file names met so far, and where */
    int n_seen = 0;
    bool done = false;
    for (int i = 0; i < p->n && !done; i++) {
        if (!p->v[i].exists) continue;
        const char *dir = p->v[i].dir;
        char **files;
        int nf = list_dir(dir, w ? w->name : NULL, &files);
        char **s1 = realloc(seen, (size_t)(n_seen + nf + 1) * sizeof *s1);
        if (s1) seen = s1;
        char **s2 = realloc(seen_path, (size_t)(n_seen + nf + 1) * sizeof *s2);
        if (s2) seen_path = s2;
        for (int f = 0; f < nf && !done; f++) {
            char path[PATH_MAX + 256], real[PATH_MAX];
            snprintf(path, sizeof path, "%s/%s", dir, files[f]);
            bool have_real = realpath(path, real) != NULL;
            int first = -1;
            for (int k = 0; k < n_seen && first < 0; k++)
                if (strcmp(seen[k], files[f]) == 0) first = k;
            if (first >= 0) {
                char other[PATH_MAX];
                bool same = have_real && realpath(seen_path[first], other) && strcmp(other, real) == 0;
                if (!same) notes_add(&shadowed, dir, path, seen_path[first]);
                continue;
            }
            if (s1 && s2 && (seen[n_seen] = strdup(files[f]))) {
                if ((seen_path[n_seen] = strdup(path)))
                    n_seen++;
                else
                    free(seen[n_seen]);
            }
            if (!have_real) {
                notes_add(&failed, dir, path, strerror(errno));
                continue;
            }
            if (find_loaded(real) >= 0 || initing_at(real) >= 0 || notes_find(&failed, path)) continue;
            /* checked before dlopen sees the file at all, even to ask whether it is loaded */
            mg_status st = check_elf(real);
            void *already = st == MG_OK ? dlopen(real, RTLD_NOW | RTLD_NOLOAD) : NULL; /* e.g. libminigrad */
            if (already) {
                dlclose(already);
                continue;
            }
            if (st != MG_OK || load_path(path) != MG_OK) {
                char why[1024];
                snprintf(why, sizeof why, "%s", mg_last_error());
                notes_add(&failed, dir, path, why);
                continue;
            }
            done = is_registered(w);
        }
        for (int f = 0; f < nf; f++) free(files[f]);
        free(files);
    }
    for (int k = 0; k < n_seen; k++) free(seen[k]), free(seen_path[k]);
    free(seen);
    free(seen_path);
    return done;
}

static mg_status find_or_load(const char *name, bool scheme, const mg_layer_vtable **out) {
    const char *what = scheme ? "positional scheme" : "layer";
    if (out) *out = NULL;
    if (!name || !*name) return mg_set_error(MG_ERR_INVALID, "empty %s name", what);
    wanted w = {name, scheme};
    const mg_layer_vtable *vt = scheme ? mg_layer_find_pos(name) : mg_layer_find(name);
    if (!vt) {
        pthread_mutex_lock(&plug_lock);
        spath p;
        search_path(&p);
        int n_failed = failed.n;
        bool found = scan(&p, &w);
        if (found) {
            /* plugins that failed on the way would go unnoticed: say so (a listing shows them too) */
            for (int i = n_failed; i < failed.n; i++)
                mg_log(MG_LOG_WARN, "plugin search for %s '%s': %s", what, name, failed.v[i].why);
            mg_clear_error();
            vt = scheme ? mg_layer_find_pos(name) : mg_layer_find(name);
        } else {
            char known[512], where[1024], why[2048] = "";
            mg_reg_names(known, sizeof known, scheme);
            describe(&p, where, sizeof where);
            /* the files first, so that each is named however long the reasons run; then the reasons,
             * each under its file name (its folder is among those searched) */
            int n_why = 0;
            for (int i = 0; i < failed.n; i++)
                if (on_path(&p, failed.v[i].dir))
                    append(why, sizeof why, "%s%s", n_why++ ? ", " : "; did not load: ", base_name(failed.v[i].path));
            for (int i = 0, k = 0; i < failed.n; i++)
                if (on_path(&p, failed.v[i].dir)) {
                    k++;
                    append(why, sizeof why, "%s%s%s", k > 1 ? "; " : " (", short_why(failed.v[i].why), k == n_why ? ")" : "");
                }
            mg_set_error(MG_ERR_NOT_FOUND,
                         "%s '%s' not found: it is not registered (registered: %s) and no plugin on the search "
                         "path provides it; searched %s%s",
                         what, name, known[0] ? known : "none", where, why);
        }
        spath_free(&p);
        pthread_mutex_unlock(&plug_lock);
    }
    if (out) *out = vt;
    return vt ? MG_OK : MG_ERR_NOT_FOUND;
}

mg_status mg_layer_find_or_load(const char *name, const mg_layer_vtable **out) { return find_or_load(name, false, out); }

mg_status mg_layer_find_pos_or_load(const char *scheme, const mg_layer_vtable **out) {
    return find_or_load(scheme, true, out);
}

/* ---- the listing ---- */

void mg_plugin_list_free(mg_plugin_entry *list, int n) {
    if (!list) return;
    for (int i = 0; i < n; i++) {
        free((char *)list[i].name), free((char *)list[i].scheme);
        free((char *)list[i].path), free((char *)list[i].why);
    }
    free(list);
}

static bool put(mg_plugin_entry *e, mg_plugin_entry_kind kind, const char *name, const char *scheme, const char *path,
                const char *why) {
    *e = (mg_plugin_entry){kind, NULL, NULL, NULL, NULL};
    if ((name && !(e->name = strdup(name))) || (scheme && !(e->scheme = strdup(scheme))) ||
        (path && !(e->path = strdup(path))))
        return false;
    if (why && !(e->why = strdup(why))) return false;
    return true;
}

mg_status mg_plugin_list(mg_plugin_entry **out, int *n) {
    *out = NULL, *n = 0;
    pthread_mutex_lock(&plug_lock);
    spath p;
    search_path(&p);
    mg_status st = MG_OK;
    scan(&p, NULL);
    int n_layers = mg_layer_registered_count();
    int cap = p.n + n_layers + failed.n + shadowed.n;
    mg_plugin_entry *e = calloc((size_t)(cap ? cap : 1), sizeof *e);
    int k = 0;
    bool ok = e != NULL;
    for (int i = 0; ok && i < p.n; i++) {
        char role[64];
        snprintf(role, sizeof role, "%s%s", p.v[i].role, p.v[i].exists ? "" : ", missing");
        ok = put(&e[k++], MG_PLUGIN_ENTRY_DIR, NULL, NULL, p.v[i].dir, role);
    }
    for (int i = 0; ok && i < n_layers; i++) {
        const mg_layer_vtable *vt = mg_layer_registered(i);
        if (!vt) continue;
        const char *origin = mg_layer_origin(vt->name);
        ok = put(&e[k++], MG_PLUGIN_ENTRY_LAYER, vt->name, vt->pos_scheme, origin ? origin : "?", NULL);
    }
    for (int i = 0; ok && i < failed.n; i++)
        if (on_path(&p, failed.v[i].dir)) ok = put(&e[k++], MG_PLUGIN_ENTRY_FAILED, NULL, NULL, failed.v[i].path, failed.v[i].why);
    for (int i = 0; ok && i < shadowed.n; i++)
        if (on_path(&p, shadowed.v[i].dir))
            ok = put(&e[k++], MG_PLUGIN_ENTRY_SHADOWED, NULL, NULL, shadowed.v[i].path, shadowed.v[i].why);
    spath_free(&p);
    pthread_mutex_unlock(&plug_lock);
    if (!ok) {
        mg_plugin_list_free(e, k);
        st = mg_set_error(MG_ERR_NOMEM, "listing plugins: out of memory");
    } else {
        *out = e, *n = k;
    }
    return st;
}

mg_status mg_plugin_list_print(FILE *f, bool schemes_only) {
    mg_plugin_entry *e;
    int n;
    mg_status st = mg_plugin_list(&e, &n);
    if (st != MG_OK) return st;
    fprintf(f, schemes_only ? "positional schemes (scheme, layer, origin):\n"
                            : "layers (layer, positional scheme, origin):\n");
    for (int i = 0; i < n; i++) {
        if (e[i].kind != MG_PLUGIN_ENTRY_LAYER || (schemes_only && !e[i].scheme)) continue;
        if (schemes_only)
            fprintf(f, "  %-22s %-24s %s\n", e[i].scheme, e[i].name, e[i].path);
        else
            fprintf(f, "  %-24s %-22s %s\n", e[i].name, e[i].scheme ? e[i].scheme : "-", e[i].path);
    }
    static const char *const head[] = {"plugin directories searched, in order:\n", NULL,
                                       "plugins that did not load:\n",
                                       "shadowed by a file of the same name found earlier (not loaded):\n"};
    for (int kind = MG_PLUGIN_ENTRY_DIR; kind <= MG_PLUGIN_ENTRY_SHADOWED; kind++) {
        if (kind == MG_PLUGIN_ENTRY_LAYER) continue;
        int count = 0;
        for (int i = 0; i < n; i++) {
            if ((int)e[i].kind != kind) continue;
            if (count++ == 0) fputs(head[kind], f);
            if (kind == MG_PLUGIN_ENTRY_DIR)
                fprintf(f, "  %s (%s)\n", e[i].path, e[i].why);
            else if (kind == MG_PLUGIN_ENTRY_FAILED)
                fprintf(f, "  %s\n", e[i].why);
            else
                fprintf(f, "  %s (shadowed by %s)\n", e[i].path, e[i].why);
        }
        if (kind == MG_PLUGIN_ENTRY_DIR && count == 0) fputs("plugin directories searched: none\n", f);
    }
    mg_plugin_list_free(e, n);
    return MG_OK;
}
