// A C target needs one source file; the stamp itself is CBuildInfo.h's static inline function.
#include "CBuildInfo.h"
