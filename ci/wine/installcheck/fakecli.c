/* A stand-in for the agent CLI under Wine (ci/wine/installcheck/run):
 * answers `--version` with a line and exit 0, anything else exit 2. */
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "--version") == 0) {
        puts("1.0.0 (remora install check stand-in)");
        return 0;
    }
    return 2;
}
