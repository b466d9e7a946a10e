//! Test files, read by build.zig. Each file plus tests/support/harness.c
//! becomes one executable. No globbing: add each file here.

/// Tests that link only the pure layers (common, symcache, format, python) and zstd.
/// They also run under qemu-aarch64 (`zig build test-aarch64`).
pub const pure = [_][]const u8{
    "tests/python/test_python_decode.c",
    "tests/common/test_alloc.c",
    "tests/common/test_buf.c",
    "tests/common/test_bytes.c",
    "tests/common/test_checksum.c",
    "tests/common/test_containers.c",
    "tests/common/test_cursor.c",
    "tests/common/test_error.c",
    "tests/common/test_opts.c",
    "tests/format/test_spool_reject.c",
    "tests/format/test_spool_robust.c",
    "tests/format/test_spool_roundtrip.c",
    "tests/format/test_spool_coverage.c",
    "tests/format/test_spool_damage.c",
    "tests/format/test_spool_source.c",
    "tests/format/test_spool_writer_faults.c",
    "tests/format/test_spool_tables.c",
    "tests/format/test_spool_flood.c",
    "tests/symcache/test_symcache.c",
};

/// Tests that link the whole library (and may use the OS).
pub const os = [_][]const u8{
    "tests/common/test_harness.c",
    "tests/record/test_record_parsers.c",
    "tests/record/test_kallsyms_cache.c",
    "tests/record/test_record_spawn.c",
    "tests/record/test_record_attach.c",
    "tests/record/test_record_errors.c",
    "tests/record/test_record_unpriv.c",
    "tests/record/test_record_load.c",
    "tests/record/test_record_crash.c",
    "tests/record/test_record_selfcontained.c",
    "tests/record/test_record_perfmap.c",
    "tests/record/test_record_output.c",
    "tests/record/test_record_limits.c",
    "tests/record/test_record_rotate.c",
    "tests/record/test_record_offcpu.c",
    "tests/python/test_python_live.c",
    "tests/python/test_python_share.c",
    "tests/python/test_python_shapes.c",
    "tests/python/test_python_lifecycle.c",
    "tests/python/test_python_pause.c",
    "tests/io/test_spool_file.c",
    "tests/unwind/test_unwind_hostile.c",
    "tests/unwind/test_unwind_real.c",
    "tests/unwind/test_unwind_self.c",
    "tests/unwind/test_unwind_oracle.c",
    "tests/symbolize/test_symbolize.c",
    "tests/symbolize/test_symbolize_hostile.c",
    "tests/symbolize/test_debuginfod.c",
    "tests/symbolize/test_symbolize_record.c",
    "tests/symbolize/test_symbolize_grab.c",
    "tests/symbolize/test_symbolize_stripped.c",
    "tests/symbolize/test_symbolize_ranges.c",
    "tests/symbolize/test_cache_trim.c",
    "tests/profile/test_profile.c",
    "tests/profile/test_push.c",
    "tests/profile/test_opts_api.c",
    "tests/profile/test_export.c",
    "tests/profile/test_ladder.c",
    "tests/profile/test_hostile.c",
    "tests/profile/test_report_cli.c",
    "tests/profile/test_report_memory.c",
    "tests/profile/test_offcpu.c",
    "tests/profile/test_syscap.c",
    "tests/reliability/test_rel_sigkill.c",
    "tests/reliability/test_rel_tail.c",
    "tests/reliability/test_rel_enospc.c",
    "tests/reliability/test_rel_target_kill.c",
    "tests/reliability/test_rel_alloc.c",
    "tests/reliability/test_rel_hostile.c",
    "tests/reliability/test_rel_hostile_files.c",
    "tests/reliability/test_rel_perms.c",
    "tests/reliability/test_rel_load.c",
    "tests/reliability/test_rel_soak.c",
    "tests/docs/test_docs.c",
};

/// Run by `zig build test-arm64-vm` inside the aarch64 guest, beside the
/// `os` tests not left out below.
pub const arm64_guest = [_][]const u8{
    "tests/arm64/test_arm64_guest.c",
};

/// Run on the host after the guest, on the spools the guest wrote.
pub const arm64_host = [_][]const u8{
    "tests/arm64/test_arm64_host.c",
};

/// `os` tests left out of the aarch64 guest, each for a tool the guest has
/// not: it has no C compiler (most tests build their targets with gcc at
/// run time), no pyenv CPythons (only Debian's python3.11), no Go, chromium,
/// debuginfod, curl, setpriv or zig. tests/arm64/test_arm64_guest.c covers
/// recording there with targets built ahead by zig cc. guest.sh prints
/// this list at the start of the guest run.
pub const arm64_vm_skip = [_][]const u8{
    "tests/record/test_record_parsers.c", // gcc (ladder target)
    "tests/record/test_record_errors.c", // pyenv 3.9; also expects no PMU, the guest has one
    "tests/record/test_record_spawn.c", // gcc, pyenv
    "tests/record/test_record_attach.c", // gcc
    "tests/record/test_record_unpriv.c", // gcc, setpriv
    "tests/record/test_record_crash.c", // gcc
    "tests/record/test_record_selfcontained.c", // gcc
    "tests/record/test_record_perfmap.c", // pyenv 3.12, gcc
    "tests/record/test_record_output.c", // gcc, setpriv
    "tests/record/test_record_limits.c", // gcc
    "tests/record/test_record_offcpu.c", // gcc
    "tests/record/test_record_rotate.c", // gcc (ladder target)
    "tests/record/test_record_load.c", // gcc, setpriv
    // Timed for native speed: 90% of Python reads ahead of the drain; under
    // TCG a read takes ~2 ms and 70% were. test_arm64_guest checks the share.
    "tests/python/test_python_share.c",
    // 999 Hz with bounds for native speed (nine in ten samples of each
    // shape whole), /bin/sh, pyenv; test_python_shapes covers Python
    // chains in the guest.
    "tests/python/test_python_lifecycle.c",
    // Timed for native speed (CPU seconds per child, a 20 s bound on a
    // waited target); test_python_shapes covers pausing in the guest.
    "tests/python/test_python_pause.c",
    "tests/unwind/test_unwind_hostile.c", // gcc
    "tests/unwind/test_unwind_real.c", // gcc
    "tests/unwind/test_unwind_oracle.c", // gcc
    "tests/symbolize/test_symbolize.c", // gcc
    "tests/symbolize/test_symbolize_hostile.c", // gcc (two of its tests build shared objects)
    "tests/symbolize/test_debuginfod.c", // gcc, a debuginfod server
    "tests/symbolize/test_symbolize_record.c", // gcc
    "tests/symbolize/test_symbolize_grab.c", // gcc
    "tests/symbolize/test_symbolize_stripped.c", // gcc
    "tests/symbolize/test_symbolize_ranges.c", // gcc
    "tests/profile/test_push.c", // curl, Go (pprof)
    "tests/profile/test_export.c", // Go (pprof), chromium
    "tests/profile/test_ladder.c", // Go (pprof)
    "tests/profile/test_report_cli.c", // cc for its workloads, Go (pprof), pyenv
    "tests/profile/test_report_memory.c", // reports millions of samples: slow under TCG
    "tests/profile/test_offcpu.c", // cc for its workload, Go (pprof)
    "tests/profile/test_syscap.c", // cc for its workloads and libsysprof-4, sysprof-cli
    "tests/reliability/test_rel_sigkill.c", // gcc
    "tests/reliability/test_rel_tail.c", // gcc (its targets), cc for report --follow
    "tests/reliability/test_rel_enospc.c", // gcc
    "tests/reliability/test_rel_target_kill.c", // gcc
    "tests/reliability/test_rel_hostile.c", // gcc
    "tests/reliability/test_rel_hostile_files.c", // gcc, setpriv, pyenv libpython
    "tests/reliability/test_rel_perms.c", // gcc, setpriv
    "tests/reliability/test_rel_load.c", // gcc
    "tests/reliability/test_rel_soak.c", // gcc
    "tests/docs/test_docs.c", // the how-tos build with zig and cc
};

/// Test support linked with the pure layers into the tests and fuzz
/// harnesses (never into the installed library).
pub const support = [_][]const u8{
    "tests/support/spool_copy.c",
    "tests/support/spool_peek.c",
};
