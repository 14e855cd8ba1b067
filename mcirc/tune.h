/*
 * tune.h — the pipeline's tuning stage (mcirc/tune.c): tiles by
 * measurement. Not public.
 */
#ifndef MCIRC_TUNE_H
#define MCIRC_TUNE_H

#include "mcirc/pipeline.h"

/* After the memory plan: with o->tune, times the top candidates of every
 * tunable kernel and stores the winners in the tuning cache; otherwise
 * applies the cache's entries for this target and driver. Returns an
 * exit status (MCIR_EXIT_TOOLCHAIN: no GPU to time on, or the timer or
 * the cache failed). */
int mcirc_tune_stage(const mcir_options *o, mcir_compilation *c, mcir_diag *d);

#endif /* MCIRC_TUNE_H */
