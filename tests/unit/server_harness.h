/* server_harness.h — what the server tests share: `braid serve` started as a child process on loopback with
 * --port 0 (the port it chose is read back from its log, so parallel test runs never collide), stopped with
 * SIGTERM (a clean exit is part of the check: the sanitizer build reports leaks there), and a small blocking
 * HTTP/1.1 client (one request per connection, chunked bodies decoded). */
#ifndef BRAID_TESTS_SERVER_HARNESS_H
#define BRAID_TESTS_SERVER_HARNESS_H

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    pid_t pid;
    int port;
    char log[1200];
} hs_server;

/* Starts `exe serve ARGS --port 0`, its stderr in log_path; waits (up to 60 s) for "listening on". */
static inline int hs_start(hs_server *s, const char *exe, const char *args, const char *log_path) {
    memset(s, 0, sizeof *s);
    snprintf(s->log, sizeof s->log, "%s", log_path);
    unlink(log_path);
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "exec '%s' serve --port 0 %s 2>'%s' >/dev/null", exe, args, log_path);
    pid_t pid = fork();
    if (pid < 0) return 0;
    if (pid == 0) {
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    s->pid = pid;
    for (int i = 0; i < 6000; i++) {
        FILE *f = fopen(log_path, "r");
        char line[1024];
        while (f && fgets(line, sizeof line, f)) {
            const char *p = strstr(line, "listening on http://");
            const char *c = p ? strrchr(p, ':') : NULL;
            if (c) s->port = atoi(c + 1);
        }
        if (f) fclose(f);
        if (s->port > 0) return 1;
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid) {
            s->pid = 0;
            return 0;
        }
        usleep(10000);
    }
    return 0;
}

/* SIGTERM and wait; the exit code (-1 if it did not exit normally within 30 s). */
static inline int hs_stop(hs_server *s) {
    if (s->pid <= 0) return -1;
    kill(s->pid, SIGTERM);
    for (int i = 0; i < 3000; i++) {
        int st;
        pid_t r = waitpid(s->pid, &st, WNOHANG);
        if (r == s->pid) {
            s->pid = 0;
            return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
        }
        usleep(10000);
    }
    kill(s->pid, SIGKILL);
    waitpid(s->pid, NULL, 0);
    s->pid = 0;
    return -1;
}

static inline int hc_connect(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct timeval tv = {120, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static inline int hc_send_all(int fd, const char *p, size_t n) {
    while (n) {
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
        if (k <= 0) return 0;
        p += k;
        n -= (size_t)k;
    }
    return 1;
}

/* Sends a request; extra_headers is "" or lines ending in \r\n. Returns the socket (the response is read with
 * hc_read_response), -1 on failure. */
static inline int hc_send(int port, const char *method, const char *path, const char *extra_headers, const char *body,
                          size_t n) {
    int fd = hc_connect(port);
    if (fd < 0) return -1;
    char head[4096];
    int hl = snprintf(head, sizeof head,
                      "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n%sContent-Type: application/json\r\n"
                      "Content-Length: %zu\r\n\r\n",
                      method, path, extra_headers ? extra_headers : "", body ? n : 0);
    if (!hc_send_all(fd, head, (size_t)hl) || (body && n && !hc_send_all(fd, body, n))) {
        close(fd);
        return -1;
    }
    return fd;
}

typedef struct {
    int status;
    char *head; /* status line and headers */
    char *body; /* decoded body, NUL-terminated */
    size_t n;
} hc_resp;

static inline void hc_free(hc_resp *r) {
    free(r->head);
    free(r->body);
    memset(r, 0, sizeof *r);
}

/* Reads the whole response (until the server closes) and decodes a chunked body. 1 on success. */
static inline int hc_read_response(int fd, hc_resp *r) {
    memset(r, 0, sizeof *r);
    size_t cap = 1 << 16, n = 0;
    char *raw = malloc(cap);
    for (;;) {
        if (n + 4096 > cap) raw = realloc(raw, cap *= 2);
        ssize_t k = recv(fd, raw + n, cap - n - 1, 0);
        if (k <= 0) break;
        n += (size_t)k;
    }
    close(fd);
    raw[n] = 0;
    char *sep = strstr(raw, "\r\n\r\n");
    if (!sep || sscanf(raw, "HTTP/1.%*d %d", &r->status) != 1) {
        free(raw);
        return 0;
    }
    size_t hl = (size_t)(sep - raw);
    r->head = strndup(raw, hl);
    const char *b = sep + 4;
    size_t bl = n - hl - 4;
    if (strcasestr(r->head, "transfer-encoding: chunked")) {
        r->body = malloc(bl + 1);
        size_t o = 0;
        while (bl > 0) {
            char *end = NULL;
            unsigned long len = strtoul(b, &end, 16);
            const char *crlf = strstr(b, "\r\n");
            if (!crlf || len == 0) break;
            b = crlf + 2;
            if (len > (unsigned long)(raw + n - b)) len = (unsigned long)(raw + n - b);
            memcpy(r->body + o, b, len);
            o += len;
            b += len + 2;
            if (b > raw + n) break;
            bl = (size_t)(raw + n - b);
        }
        r->body[o] = 0;
        r->n = o;
    } else {
        r->body = strndup(b, bl);
        r->n = bl;
    }
    free(raw);
    return 1;
}

static inline int hc_request(int port, const char *method, const char *path, const char *extra_headers,
                             const char *body, hc_resp *r) {
    int fd = hc_send(port, method, path, extra_headers, body, body ? strlen(body) : 0);
    if (fd < 0) {
        memset(r, 0, sizeof *r);
        return 0;
    }
    return hc_read_response(fd, r);
}

/* The value of header name in r->head ("" if absent), copied into out. */
static inline const char *hc_header(const hc_resp *r, const char *name, char *out, size_t cap) {
    out[0] = 0;
    char key[128];
    snprintf(key, sizeof key, "\r\n%s:", name);
    const char *p = r->head ? strcasestr(r->head, key) : NULL;
    if (!p) return out;
    p += strlen(key);
    while (*p == ' ') p++;
    size_t i = 0;
    while (p[i] && p[i] != '\r' && i + 1 < cap) out[i] = p[i], i++;
    out[i] = 0;
    return out;
}

#endif
