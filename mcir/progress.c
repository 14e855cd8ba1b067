/*
 * progress.c — what a long stage shows while it runs (docs/cli.md,
 * "Progress"): one line on stderr, redrawn in place, where stderr is a
 * terminal; nothing at all where it is not (a log, a pipe, CI), so output
 * that is kept stays clean.
 *
 * Invariant: nothing is drawn before the stage has run MIN_SECONDS (short
 * stages never flicker); then a thread of its own redraws the line every
 * REDRAW_SECONDS, so the clock moves while one long step runs (an NVRTC
 * unit, a Graphviz layout); the line is erased when the stage ends, so
 * what follows starts on a clean line. Steps may come from several
 * threads at once.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mcir/mcir.h"

#define MIN_SECONDS 1.0
#define REDRAW_SECONDS 0.25

struct mcir_progress {
    pthread_mutex_t mu;
    pthread_cond_t wake;
    pthread_t ticker;
    char stage[32], what[64], detail[96];
    int64_t done, total;
    double t0;
    bool drawn, ending;
};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* MCIR_PROGRESS=0 silences it on a terminal too; =1 is for tests that
 * have no terminal. */
bool mcir_progress_wanted(void) {
    const char *e = getenv("MCIR_PROGRESS");
    if (e && *e) return strcmp(e, "0") != 0;
    return isatty(STDERR_FILENO);
}

/* Under p->mu. */
static void draw(mcir_progress *p) {
    double spent = now_s() - p->t0;
    if (spent < MIN_SECONDS) return;
    p->drawn = true;
    char count[64] = "";
    if (p->total > 0)
        snprintf(count, sizeof count, " %lld/%lld", (long long)p->done, (long long)p->total);
    else if (p->done > 0)
        snprintf(count, sizeof count, " %lld", (long long)p->done);
    fprintf(stderr, "\r  %-8s%s%s%s%s, %.0f s\033[K", p->stage, count, p->what[0] ? " " : "",
            p->what, p->detail, spent);
    fflush(stderr);
}

static void *tick(void *arg) {
    mcir_progress *p = arg;
    pthread_mutex_lock(&p->mu);
    while (!p->ending) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        long ns = until.tv_nsec + (long)(REDRAW_SECONDS * 1e9);
        until.tv_sec += ns / 1000000000L;
        until.tv_nsec = ns % 1000000000L;
        pthread_cond_timedwait(&p->wake, &p->mu, &until);
        if (!p->ending) draw(p);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

mcir_progress *mcir_progress_begin(const char *stage, const char *what, int64_t total) {
    if (!mcir_progress_wanted()) return NULL;
    mcir_progress *p = calloc(1, sizeof *p);
    MCIR_ASSERT(p != NULL);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    snprintf(p->stage, sizeof p->stage, "%s", stage);
    snprintf(p->what, sizeof p->what, "%s", what ? what : "");
    p->total = total;
    p->t0 = now_s();
    if (pthread_create(&p->ticker, NULL, tick, p) != 0) {   /* no thread: no line */
        pthread_cond_destroy(&p->wake);
        pthread_mutex_destroy(&p->mu);
        free(p);
        return NULL;
    }
    return p;
}

void mcir_progress_add(mcir_progress *p, int64_t n) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->done += n;
    pthread_mutex_unlock(&p->mu);
}

void mcir_progress_set(mcir_progress *p, int64_t done, const char *fmt, ...) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->done = done;
    p->detail[0] = 0;
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(p->detail, sizeof p->detail, fmt, ap);
        va_end(ap);
    }
    pthread_mutex_unlock(&p->mu);
}

void mcir_progress_end(mcir_progress *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->ending = true;
    pthread_cond_signal(&p->wake);
    pthread_mutex_unlock(&p->mu);
    pthread_join(p->ticker, NULL);
    if (p->drawn) {
        fputs("\r\033[K", stderr);
        fflush(stderr);
    }
    pthread_cond_destroy(&p->wake);
    pthread_mutex_destroy(&p->mu);
    free(p);
}
