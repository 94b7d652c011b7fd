/* fgd_paper.h -- `tessera-sim fgd-paper`: the FGD paper's experiment (sim-fgd-method.md
 * section 8) over policies x seeds x pod lists, on all cores, CSVs in the layout of the
 * authors' expected_results, plus an SVG chart. And `tessera-sim convert openb`. */
#ifndef SIM_FGD_PAPER_H
#define SIM_FGD_PAPER_H

int sim_cmd_fgd_paper(int argc, char **argv);   /* argv[0] = "fgd-paper"; exit status */
int sim_cmd_convert(int argc, char **argv);     /* argv[0] = "convert" */

#endif
