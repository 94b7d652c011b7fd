/* main.c -- the tessera-sim command line: dispatches to the subcommands. */
#include <stdio.h>
#include <string.h>

#include "sim/demo.h"
#include "sim/fgd_paper.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: tessera-sim <command> [options]\n"
            "\n"
            "commands:\n"
            "  demo [--policy NAME]   place one pod of every request form on a built-in cluster\n"
            "                         (whole-GPU, MIG mixed, MIG single, time-sliced, MPS and\n"
            "                         CPU-only nodes) and explain each decision; policy default binpack\n"
            "  fgd-paper [options]    the FGD paper's experiment on the openb trace (--help for options)\n"
            "  convert openb [opts]   openb node and pod CSVs into cluster and trace JSON (--help)\n"
            "\n"
            "  -h, --help             this text\n");
}

int main(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "demo")) {
        const char *pol = "binpack";
        for (int i = 2; i < argc; i++) {
            if (!strcmp(argv[i], "--policy") && i + 1 < argc) pol = argv[++i];
            else if (!strncmp(argv[i], "--policy=", 9)) pol = argv[i] + 9;
            else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) { usage(stdout); return 0; }
            else {
                fprintf(stderr, "tessera-sim demo: unknown option \"%s\"\n", argv[i]);
                usage(stderr);
                return 2;
            }
        }
        return sim_demo_run(pol, stdout);
    }
    if (!strcmp(argv[1], "fgd-paper")) return sim_cmd_fgd_paper(argc - 1, argv + 1);
    if (!strcmp(argv[1], "convert")) return sim_cmd_convert(argc - 1, argv + 1);
    fprintf(stderr, "tessera-sim: unknown command \"%s\"\n", argv[1]);
    usage(stderr);
    return 2;
}
