//! Fuzz harness names, read by build.zig. Harness NAME is fuzz/NAME.c with one
//! LLVMFuzzerTestOneInput entry point; its seeds live in corpus/NAME/. It links
//! only the pure layers.
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
