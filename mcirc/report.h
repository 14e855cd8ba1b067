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
 *     if (mcir_compile(&o, &c, &d) == 0) mcir_report_write(&c, f, &d);
 */
#ifndef MCIR_REPORT_H
#define MCIR_REPORT_H

#include <stdio.h>

#include "mcirc/pipeline.h"

/* Writes the page; false (reported through d) only if out fails. A
 * missing `dot` is not an error: the page says the drawings are absent. */
bool mcir_report_write(const mcir_compilation *c, FILE *out, mcir_diag *d);

#endif /* MCIR_REPORT_H */
