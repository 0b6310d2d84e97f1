/* A stand-in for the agent CLI under Wine (ci/wine/installcheck/run):
 * answers `--version` with a line and exit 0, anything else exit 2.
 * FAKECLI_MODE changes the `--version` answer, for `-probe-cli`:
 * `fail` exits 3; `hang` starts a copy of itself (`fakecli sleep`, the
 * grandchild a tree kill must reach) and then never exits. `sleep`
 * sleeps forever. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <windows.h>

static void start_sleeping_copy(void) {
    char self[MAX_PATH];
    char line[MAX_PATH + 16];
    STARTUPINFOA si;
    PROCESS_INFORMATION pi;
    DWORD n = GetModuleFileNameA(NULL, self, MAX_PATH);
    if (n == 0 || n >= MAX_PATH) exit(4);
    snprintf(line, sizeof line, "\"%s\" sleep", self);
    memset(&si, 0, sizeof si);
    si.cb = sizeof si;
    if (!CreateProcessA(self, line, NULL, NULL, FALSE, 0, NULL, NULL, &si, &pi)) exit(5);
    CloseHandle(pi.hThread);
    CloseHandle(pi.hProcess);
}

int main(int argc, char **argv) {
    const char *mode = getenv("FAKECLI_MODE");
    if (argc == 2 && strcmp(argv[1], "sleep") == 0) {
        Sleep(INFINITE);
    }
    if (argc == 2 && strcmp(argv[1], "--version") == 0) {
        if (mode && strcmp(mode, "fail") == 0) return 3;
        if (mode && strcmp(mode, "hang") == 0) {
            start_sleeping_copy();
            Sleep(INFINITE);
        }
        puts("1.0.0 (remora install check stand-in)");
        return 0;
    }
    return 2;
}
