//! Fuzz harness names, read by build.zig. Harness NAME is fuzz/NAME.c with one
//! LLVMFuzzerTestOneInput entry point; its seeds live in corpus/NAME/. The
//! harnesses of `names` link only the pure layers (plus tests/support).
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

/// Harnesses that link the whole library and libunwind: they use the OS
/// (files, /proc of their own process) and build only for the host.
pub const os_names = [_][]const u8{
    "unwind_oracle",
    "profile_export",
};
