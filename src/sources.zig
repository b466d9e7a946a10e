//! Source lists per layer, read by build.zig. No globbing: add each file here.
//! Pure layers (common, format, symcache) must build for any target.

pub const common = [_][]const u8{
    "src/common/error.c",
    "src/common/alloc.c",
    "src/common/cursor.c",
    "src/common/buf.c",
    "src/common/checksum.c",
};

pub const format = [_][]const u8{};

pub const symcache = [_][]const u8{};

pub const io = [_][]const u8{};

pub const record = [_][]const u8{};

pub const unwind = [_][]const u8{};

pub const symbolize = [_][]const u8{};

pub const profile = [_][]const u8{};
