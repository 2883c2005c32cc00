/* Worker processes: spawned with a pipe on stdin and one on stdout, stderr shared with ours so
 * that their own messages reach the terminal. */
#include "bench_train.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static void describe_exit(const bt_proc *p, int status) {
    if (WIFEXITED(status))
        fprintf(stderr, "bench_train: %s worker exited with status %d\n", p->name, WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        fprintf(stderr, "bench_train: %s worker was killed by signal %d (%s)%s\n", p->name,
                WTERMSIG(status), strsignal(WTERMSIG(status)),
                WTERMSIG(status) == SIGKILL ? ": out of memory?" : "");
}

/* Reads one reply line and parses it; NULL (message printed) on EOF or garbage. */
static cJSON *read_reply(bt_proc *p) {
    char *line = NULL;
    size_t cap = 0;
    const ssize_t n = getline(&line, &cap, p->from);
    if (n <= 0) {
        free(line);
        int status = 0;
        if (p->pid > 0 && waitpid(p->pid, &status, 0) == p->pid) {
            describe_exit(p, status);
            p->pid = -1;
        } else {
            fprintf(stderr, "bench_train: %s worker closed its output\n", p->name);
        }
        return NULL;
    }
    cJSON *j = cJSON_Parse(line);
    if (!j || !cJSON_IsObject(j)) {
        line[strcspn(line, "\n")] = 0;
        fprintf(stderr, "bench_train: %s worker answered something that is not a JSON object: '%.200s'\n",
                p->name, line);
        cJSON_Delete(j);
        free(line);
        return NULL;
    }
    free(line);
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(j, "error");
    if (cJSON_IsString(e)) {
        fprintf(stderr, "bench_train: %s worker: %s\n", p->name, e->valuestring);
        cJSON_Delete(j);
        return NULL;
    }
    return j;
}

bool bt_proc_start(bt_proc *p, const char *name, char *const argv[]) {
    memset(p, 0, sizeof *p);
    p->pid = -1;
    snprintf(p->name, sizeof p->name, "%s", name);
    int in[2] = {-1, -1}, out[2] = {-1, -1};
    if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0) {
        fprintf(stderr, "bench_train: %s: pipe: %s\n", name, strerror(errno));
        goto fail;
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    const int err = posix_spawn(&p->pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(in[0]), close(out[1]);
    in[0] = out[1] = -1;
    if (err != 0) {
        fprintf(stderr, "bench_train: %s: cannot run %s: %s\n", name, argv[0], strerror(err));
        p->pid = -1;
        goto fail;
    }
    p->to = fdopen(in[1], "w");
    p->from = fdopen(out[0], "r");
    if (!p->to || !p->from) goto fail;
    in[1] = out[0] = -1;
    if (!(p->hello = read_reply(p))) goto fail;
    return true;
fail:
    for (int i = 0; i < 2; i++) {
        if (in[i] >= 0) close(in[i]);
        if (out[i] >= 0) close(out[i]);
    }
    bt_proc_close(p);
    return false;
}

cJSON *bt_proc_ask(bt_proc *p, const char *fmt, ...) {
    if (!p->to || !p->from) return NULL;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(p->to, fmt, ap);
    va_end(ap);
    fputc('\n', p->to);
    if (fflush(p->to) != 0) {
        fprintf(stderr, "bench_train: %s worker: cannot send a command: %s\n", p->name, strerror(errno));
        return NULL;
    }
    return read_reply(p);
}

void bt_proc_close(bt_proc *p) {
    if (p->to) {
        fputs("quit\n", p->to);
        fclose(p->to); /* EOF ends the worker even if it missed the quit */
    }
    if (p->from) fclose(p->from);
    if (p->pid > 0) {
        int status = 0;
        if (waitpid(p->pid, &status, 0) == p->pid && !(WIFEXITED(status) && WEXITSTATUS(status) == 0))
            describe_exit(p, status);
    }
    cJSON_Delete(p->hello);
    p->to = p->from = NULL;
    p->hello = NULL;
    p->pid = -1;
}

int bt_run_quiet(char *const argv[]) {
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    for (int fd = 0; fd < 3; fd++)
        posix_spawn_file_actions_addopen(&fa, fd, "/dev/null", fd ? O_WRONLY : O_RDONLY, 0);
    pid_t pid;
    const int err = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (err != 0) return -1;
    int status = 0;
    if (waitpid(pid, &status, 0) != pid) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}
