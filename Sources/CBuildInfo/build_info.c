#include "CBuildInfo.h"

// The slot tools/package stamps: the marker, then the commit (NUL-terminated, at most 45 bytes). `volatile` keeps the
// compiler from folding reads of the zeros it was built with; `used` keeps the linker from dropping it.
__attribute__((used)) static volatile const char bledfu_commit_slot[64] = "@(#)bledfu-commit:";

enum { marker_length = 18 };

void bledfu_build_commit(char *buffer, size_t size) {
    if (size == 0) return;
    size_t i = 0;
    for (; i + 1 < size && marker_length + i < sizeof bledfu_commit_slot - 1; i++) {
        char c = bledfu_commit_slot[marker_length + i];
        if (c == 0) break;
        buffer[i] = c;
    }
    buffer[i] = 0;
}
