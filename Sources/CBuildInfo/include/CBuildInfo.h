#ifndef CBUILDINFO_H
#define CBUILDINFO_H

#include <stddef.h>

// The commit `bledfu --version` names. The build leaves a slot for it in the binary (build_info.c): the marker
// "@(#)bledfu-commit:" followed by 46 zero bytes. tools/package writes the commit into that slot of the copy it
// packages (`tools/package`, step 1), so a stamp never changes a compiler flag and never rebuilds anything; a build
// nobody stamped says "unknown commit".

/// Copies the stamped commit (empty when unstamped) into `buffer` as a C string of at most `size - 1` bytes.
void bledfu_build_commit(char *buffer, size_t size);

#endif
