//! Source lists per layer, read by build.zig. No globbing: add each file here.

/// The pure layers, lowest first: no syscalls and no OS headers, so they build
/// for any target. Each may include only itself and the layers before it.
/// build.zig passes this list to .ci/check-layers.py and, through its
/// manifest, to .ci/clang-build.sh: it is the only list of them.
pub const pure_layers = [_][]const u8{ "common", "symcache", "format", "python" };

/// The OS layers, in link order.
pub const os_layers = [_][]const u8{ "io", "record", "unwind", "symbolize", "profile" };

pub const common = [_][]const u8{
    "src/common/error.c",
    "src/common/alloc.c",
    "src/common/cursor.c",
    "src/common/buf.c",
    "src/common/checksum.c",
    "src/common/hash.c",
    "src/common/htab.c",
    "src/common/grow.c",
    "src/common/opts.c",
};

pub const format = [_][]const u8{
    "src/format/spool_writer.c",
    "src/format/spool_reader.c",
    "src/format/spool_records.c",
    "src/format/spool_api.c",
};

pub const symcache = [_][]const u8{
    "src/symcache/symcache.c",
};

pub const python = [_][]const u8{
    "src/python/layout.c",
    "src/python/memory.c",
    "src/python/cframe.c",
    "src/python/anchor.c",
    "src/python/code.c",
    "src/python/merge.c",
    "src/python/names.c",
};

pub const io = [_][]const u8{
    "src/io/file.c",
    "src/io/elf.c",
    "src/io/spool_file.c",
    "src/io/dynload.c",
    "src/io/vdso.c",
};

pub const record = [_][]const u8{
    "src/record/attach.c",
    "src/record/kallsyms.c",
    "src/record/kallsyms_cache.c",
    "src/record/perf_events.c",
    "src/record/proc_scan.c",
    "src/record/process_table.c",
    "src/record/recorder.c",
    "src/record/loop.c",
    "src/record/rotate.c",
    "src/record/event_set.c",
    "src/record/ring.c",
    "src/record/sample.c",
    "src/record/offcpu.c",
    "src/record/offcpu_unpriv.c",
    "src/record/target_mem.c",
    "src/record/kernel_symbols.c",
    "src/record/embed_symbols.c",
    "src/record/perfmap_names.c",
    "src/record/perfmap.c",
    "src/record/python_reader.c",
    "src/record/python_early.c",
    "src/record/python_frames.c",
    "src/record/pause.c",
};

pub const unwind = [_][]const u8{
    "src/unwind/binary.c",
    "src/unwind/space.c",
    "src/unwind/unwind.c",
};

pub const symbolize = [_][]const u8{
    "src/symbolize/strpool.c",
    "src/symbolize/demangle.c",
    "src/symbolize/rustv0.c",
    "src/symbolize/dbgfind.c",
    "src/symbolize/dbgcache.c",
    "src/symbolize/dbgmod.c",
    "src/symbolize/dbgrange.c",
    "src/symbolize/cacheio.c",
    "src/symbolize/cachetrim.c",
    "src/symbolize/symbolizer.c",
    "src/symbolize/embed.c",
};

pub const profile = [_][]const u8{
    "src/profile/profile.c",
    "src/profile/profile_counts.c",
    "src/profile/export.c",
    "src/profile/export_folded.c",
    "src/profile/export_svg.c",
    "src/profile/export_pprof.c",
    "src/profile/export_firefox.c",
    "src/profile/export_syscap.c",
    "src/profile/proto.c",
    "src/profile/proto_tables.c",
    "src/profile/export_otlp.c",
    "src/profile/push.c",
};

/// Example programs (examples/*.c), installed into zig-out/bin under their
/// basename; they link the static library.
pub const examples = [_][]const u8{
    "examples/demo_synthetic.c",
    "examples/record.c",
    "examples/report.c",
    "examples/attach_once.c",
};
