//! Fuzz harness names, read by build.zig. Harness NAME is fuzz/NAME.c with one
//! LLVMFuzzerTestOneInput entry point; its seeds live in corpus/NAME/. Those in
//! `names` link only the pure layers; those in `full_names` link the whole
//! static library and its system libraries (libdw, zlib, ...).
pub const names = [_][]const u8{
    "spool_decode",
    "spool_roundtrip",
    "python_frames",
    "common_cursor",
    "symcache_decode",
    "symcache_roundtrip",
    "proc_text",
    "elf_notes",
};

/// Harnesses over code outside the pure layers (the exporters in src/profile).
pub const full_names = [_][]const u8{
    "profile_export",
};
