#ifndef CBUILDINFO_H
#define CBUILDINFO_H

// The commit `bledfu --version` names. tools/package (and anyone building a release) stamps it without touching
// the tree: `swift build -Xcc '-DBLEDFU_COMMIT="<hash>"'`; a build without it says "unknown commit". The value
// lives in a static inline function so that Swift's importer sees the define of the build that compiles it.
#ifndef BLEDFU_COMMIT
#define BLEDFU_COMMIT ""
#endif

static inline const char *bledfu_build_commit(void) { return BLEDFU_COMMIT; }

#endif
