/*
 * report.h — `mcirc --report FILE.html`: one self-contained HTML page of a
 * compilation (docs/report.md). The page holds the graph before and after
 * rewriting (drawn by Graphviz's `dot` when it is on the PATH, otherwise a
 * note says so), the trace as a filterable table whose rows highlight the
 * matched nodes, every kernel with its template, tiles, launch, audit and
 * modelled traffic, and the arena as a timeline. No network, no files
 * beside it: CSS, script, data and SVG are inline.
 *
 *     mcir_compilation c;             // compiled with o.keep_original
 *     if (mcir_compile(&o, &c, &d) == 0) mcir_report_write(&c, NULL, f, &d);
 *
 * Drawing is bounded: Graphviz gets draw_seconds in all (the drawings run
 * side by side); a graph after rewriting that does not lay out in half of
 * it is drawn kernel by kernel instead, and whatever is not done in time
 * is left out, the page saying what and why.
 */
#ifndef MCIR_REPORT_H
#define MCIR_REPORT_H

#include <stdio.h>

#include "mcirc/pipeline.h"

#define MCIR_REPORT_DRAW_SECONDS 8.0

typedef struct mcir_report_options {
    double draw_seconds;   /* Graphviz's time, all drawings together; <= 0: the default above */
} mcir_report_options;

/* Writes the page; false (reported through d) only if out fails. A
 * missing `dot` is not an error: the page says the drawings are absent.
 * opts may be NULL. */
bool mcir_report_write(const mcir_compilation *c, const mcir_report_options *opts, FILE *out,
                       mcir_diag *d);

#endif /* MCIR_REPORT_H */
