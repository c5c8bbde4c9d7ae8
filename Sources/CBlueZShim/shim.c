/* Declarations only: see include/CBlueZShim.h. SwiftPM needs one source file per C target. */
