/* The tmux shim's fast path (tests/harness/tmux_shim.py is the shim; docs/runtime.md §6.3).
 *
 * Every tmux call of a test goes through the shim, and a Python start costs ~19 ms of CPU a
 * call, tens of thousands of calls a run. This program does the common case itself: a call
 * addressing a server inside the harness directory, no fault rules, ASCII arguments. It logs
 * the same JSON line the Python shim logs (one write, O_APPEND) and execs the real tmux. Any
 * other call (a guard violation, fault rules, a socket it cannot resolve, non-ASCII text)
 * execs the Python shim, installed beside it as `tmux-py`, which decides as before.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

static char here[PATH_MAX]; /* the directory holding this program */
static char root[PATH_MAX]; /* its parent: the harness directory */

static void fall_back(char **argv) {
    char shim[PATH_MAX + 16];
    snprintf(shim, sizeof shim, "%s/tmux-py", here);
    argv[0] = shim;
    execv(shim, argv);
    perror("tmux fast shim: exec tmux-py");
    _exit(127);
}

/* A growing buffer for the log line. */
static char *buf;
static size_t len, cap;

static int put(const char *s, size_t n) {
    if (len + n + 1 > cap) {
        size_t want = (len + n + 1) * 2;
        char *grown = realloc(buf, want);
        if (grown == NULL) return -1;
        buf = grown;
        cap = want;
    }
    memcpy(buf + len, s, n);
    len += n;
    buf[len] = 0;
    return 0;
}

static int puts_(const char *s) { return put(s, strlen(s)); }

/* A JSON string; -1 for a byte outside ASCII (the Python shim writes those). */
static int put_json(const char *s) {
    if (s == NULL) return puts_("null");
    if (puts_("\"")) return -1;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        char esc[8];
        if (*p >= 0x80) return -1;
        if (*p == '"' || *p == '\\') {
            esc[0] = '\\';
            esc[1] = (char)*p;
            if (put(esc, 2)) return -1;
        } else if (*p < 0x20 || *p == 0x7f) {
            snprintf(esc, sizeof esc, "\\u%04x", *p);
            if (puts_(esc)) return -1;
        } else if (put((const char *)p, 1)) {
            return -1;
        }
    }
    return puts_("\"");
}

/* realpath() of a path that may not exist yet: its directory's real path plus its name. */
static int real_path(const char *path, char *out) {
    char a[PATH_MAX], b[PATH_MAX], dir[PATH_MAX];
    if (strlen(path) >= PATH_MAX) return -1;
    strcpy(a, path);
    strcpy(b, path);
    if (realpath(path, out) != NULL) return 0;
    if (realpath(dirname(a), dir) == NULL) return -1;
    if (snprintf(out, PATH_MAX, "%s/%s", dir, basename(b)) >= PATH_MAX) return -1;
    return 0;
}

int main(int argc, char **argv) {
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) return 127;
    self[n] = 0;
    strcpy(here, self);
    strcpy(here, dirname(here));
    strcpy(root, here);
    strcpy(root, dirname(root));

    const char *faults = getenv("CAFLEET_TMUX_FAULTS");
    const char *real = getenv("CAFLEET_REAL_TMUX");
    if ((faults != NULL && *faults && access(faults, F_OK) == 0) || real == NULL || !*real)
        fall_back(argv);

    /* tmux's global options, as the Python shim's parse(): flags c f L S T take a value. */
    const char *opt_S = NULL, *opt_L = NULL;
    int version = 0, i = 1;
    while (i < argc) {
        const char *arg = argv[i];
        if (strcmp(arg, "--") == 0) {
            i++;
            break;
        }
        if (arg[0] != '-' || strcmp(arg, "-") == 0) break;
        for (int j = 1; arg[j]; j++) {
            char letter = arg[j];
            if (strchr("cfLST", letter) != NULL) {
                const char *value = arg + j + 1;
                if (!*value) {
                    i++;
                    value = i < argc ? argv[i] : "";
                }
                if (letter == 'S') opt_S = value;
                if (letter == 'L') opt_L = value;
                break;
            }
            if (letter == 'V') version = 1;
        }
        i++;
    }
    const char *command = i < argc ? argv[i] : NULL;
    const char *target = NULL;
    for (int k = i + 1; k < argc - 1; k++) {
        if (strcmp(argv[k], "-t") == 0) {
            target = argv[k + 1];
            break;
        }
    }

    char socket[PATH_MAX];
    const char *tmpdir = getenv("TMUX_TMPDIR");
    if (tmpdir == NULL || !*tmpdir) tmpdir = "/tmp";
    const char *tmux_env = getenv("TMUX");
    if (opt_S != NULL) {
        if (snprintf(socket, sizeof socket, "%s", opt_S) >= (int)sizeof socket) fall_back(argv);
    } else if (opt_L != NULL) {
        snprintf(socket, sizeof socket, "%s/tmux-%u/%s", tmpdir, (unsigned)getuid(), opt_L);
    } else if (tmux_env != NULL && *tmux_env) {
        snprintf(socket, sizeof socket, "%s", tmux_env);
        char *comma = strchr(socket, ',');
        if (comma != NULL) *comma = 0;
    } else {
        snprintf(socket, sizeof socket, "%s/tmux-%u/default", tmpdir, (unsigned)getuid());
    }
    if (!version) {
        char real_root[PATH_MAX], real_socket[PATH_MAX];
        if (realpath(root, real_root) == NULL || real_path(socket, real_socket) != 0)
            fall_back(argv);
        size_t r = strlen(real_root);
        int inside = strcmp(real_socket, real_root) == 0 ||
                     (strncmp(real_socket, real_root, r) == 0 && real_socket[r] == '/');
        if (!inside) fall_back(argv); /* the Python shim logs and refuses it */
    }

    struct timeval now;
    gettimeofday(&now, NULL);
    char head[64];
    snprintf(head, sizeof head, "{\"t\": %ld.%06ld, \"argv\": [", (long)now.tv_sec,
             (long)now.tv_usec);
    int bad = puts_(head);
    for (int k = 1; k < argc && !bad; k++) {
        if (k > 1) bad |= puts_(", ");
        bad |= put_json(argv[k]);
    }
    bad |= puts_("], \"command\": ");
    bad |= put_json(command);
    bad |= puts_(", \"target\": ");
    bad |= put_json(target);
    bad |= puts_(", \"socket\": ");
    bad |= put_json(socket);
    char tail[96];
    snprintf(tail, sizeof tail,
             ", \"rule\": null, \"action\": null, \"guard\": \"ok\", \"pid\": %d, \"ppid\": %d}\n",
             (int)getpid(), (int)getppid());
    bad |= puts_(tail);
    if (bad) fall_back(argv);

    char log_path[PATH_MAX + 32];
    snprintf(log_path, sizeof log_path, "%s/tmux-calls.jsonl", root);
    int fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
        ssize_t w = write(fd, buf, len);
        (void)w;
        close(fd);
    }
    argv[0] = (char *)real;
    execv(real, argv);
    perror("tmux fast shim: exec");
    return 127;
}
