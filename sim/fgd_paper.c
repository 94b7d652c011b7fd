/* fgd_paper.c -- placeholder until the fgd-paper experiment lands. */
#include <stdio.h>
#include "sim/fgd_paper.h"

int sim_cmd_fgd_paper(int argc, char **argv) { (void)argc; (void)argv; fprintf(stderr, "fgd-paper: not built yet\n"); return 1; }
int sim_cmd_convert(int argc, char **argv) { (void)argc; (void)argv; fprintf(stderr, "convert: not built yet\n"); return 1; }
