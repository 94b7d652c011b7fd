/* test_help.c -- the programs' --help texts: each flag described once. tessera-reserve's listed --client-cert and
 * --client-key twice (a copy of the kube client's lines next to the lines themselves); the client's TLS lines are
 * now one macro (kube/client.h KUBE_OPTIONS_TLS_HELP) that every program includes once. */
#include "harness.h"
#include "ext_proc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The flags that begin a line of bin --help ("  --flag ..."), each with how often; the first one listed twice into
 * dup ("" when none); false when the program could not be run or printed no flag. */
static bool help_flags_once(const char *bin, char *dup, size_t duplen, int *nflags) {
    char cmd[700];
    snprintf(cmd, sizeof cmd, "'%s' --help 2>/dev/null", bin);
    FILE *p = popen(cmd, "r");
    if (!p) return false;
    char line[512], seen[128][48];
    int n = 0;
    dup[0] = 0;
    while (fgets(line, sizeof line, p)) {
        if (strncmp(line, "  --", 4) != 0) continue;
        char flag[48];
        if (sscanf(line + 2, "%47[^ =\n]", flag) != 1) continue;
        for (int i = 0; i < n && !dup[0]; i++)
            if (!strcmp(seen[i], flag)) snprintf(dup, duplen, "%s", flag);
        if (n < 128) snprintf(seen[n++], sizeof seen[0], "%s", flag);
    }
    int rc = pclose(p);
    *nflags = n;
    return rc == 0 && n > 0;
}

TEST(help_describes_each_flag_once) {
    static const char *const progs[] = {"tessera-reserve", "tessera-extender", "tessera-node-agent"};
    for (size_t i = 0; i < sizeof progs / sizeof progs[0]; i++) {
        char bin[600], dup[48];
        int n = 0;
        CHECK_MSG(sibling_binary_path(progs[i], bin, sizeof bin), "%s is not built", progs[i]);
        CHECK_MSG(help_flags_once(bin, dup, sizeof dup, &n), "%s --help did not run or listed no flag", progs[i]);
        CHECK_MSG(!dup[0], "%s --help describes %s twice", progs[i], dup);
        CHECK_MSG(n >= 5, "%s --help: only %d flags found", progs[i], n);
    }
}
