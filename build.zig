//! Build for stackpulse (Zig 0.17.1). Every file list comes from
//! src/sources.zig, tests/tests.zig and fuzz/harnesses.zig; steps that need
//! the system clang (sanitize, coverage, fuzz) get the same lists through a
//! generated manifest read by .ci/clang-build.sh.
const std = @import("std");
const sources = @import("src/sources.zig");
const test_lists = @import("tests/tests.zig");
const fuzz_list = @import("fuzz/harnesses.zig");

const version: std.SemanticVersion = .{ .major = 0, .minor = 1, .patch = 0 };

/// Flags for every C file of the library, its tests, examples and harnesses.
const c_flags = [_][]const u8{
    "-std=c17",      "-Wall",        "-Wextra", "-Wpedantic",
    "-Wshadow",      "-Wconversion", "-Werror", "-fvisibility=hidden",
    "-D_GNU_SOURCE",
};

const pure_srcs = sources.common ++ sources.format ++ sources.symcache;
const os_srcs = sources.io ++ sources.record ++ sources.unwind ++ sources.symbolize ++ sources.profile;
const all_srcs = pure_srcs ++ os_srcs;
const examples: []const []const u8 = if (@hasDecl(sources, "examples")) &sources.examples else &.{};
const harnesses: []const []const u8 = &fuzz_list.names;
const full_harnesses: []const []const u8 = &fuzz_list.full_names;

const Ctx = struct {
    b: *std.Build,
    target: std.Build.ResolvedTarget,
    optimize: std.builtin.Optimize,
    debuginfod: bool,
};

pub fn build(b: *std.Build) void {
    var target = b.standardTargetOptions(.{});
    const host_arch = b.graph.host.result.cpu.arch;
    if (target.result.cpu.arch != host_arch and target.result.abi == .gnu and target.query.glibc_version == null) {
        // The multiarch libraries are Debian 12's, built against glibc 2.36.
        var q = target.query;
        q.glibc_version = .{ .major = 2, .minor = 36, .patch = 0 };
        target = b.resolveTargetQuery(q);
    }
    // A foreign -Dtarget runs only the pure tests, under qemu-user.
    const foreign = target.result.cpu.arch != host_arch;
    const run_wrap: []const []const u8 = if (foreign) &.{b.fmt("--wrap=qemu-{s}", .{@tagName(target.result.cpu.arch)})} else &.{};
    const ctx: Ctx = .{
        .b = b,
        .target = target,
        .optimize = b.standardOptimizeOption(.{}),
        .debuginfod = b.option(bool, "debuginfod", "Link libdebuginfod and define SP_HAVE_DEBUGINFOD=1") orelse false,
    };
    const fuzz_seconds = b.option([]const u8, "fuzz-seconds", "Seconds per libFuzzer harness in fuzz-smoke (default 20)") orelse "20";
    const afl_seconds = b.option([]const u8, "afl-seconds", "Seconds per AFL++ harness in fuzz-smoke (default 5)") orelse "5";

    const root = b.path("");
    const bin_dir: std.Build.LazyPath = .{ .relative = .{ .base = .install_bin } };
    const prefix_dir: std.Build.LazyPath = .{ .relative = .{ .base = .install_prefix } };

    // ---- libraries ----------------------------------------------------
    const static_lib = addLib(ctx, "stackpulse", .static, &all_srcs);
    const shared_lib = addLib(ctx, "stackpulse", .dynamic, &all_srcs);
    const pure_lib = addLib(ctx, "stackpulse-pure", .static, &pure_srcs);
    static_lib.installHeadersDirectory(b.path("include"), "", .{});
    b.installArtifact(static_lib);
    b.installArtifact(shared_lib);

    const pc = b.addWriteFiles().add("stackpulse.pc", b.fmt(
        \\prefix=${{pcfiledir}}/../..
        \\libdir=${{prefix}}/lib
        \\includedir=${{prefix}}/include
        \\
        \\Name: stackpulse
        \\Description: Linux sampling profiler library
        \\Version: {f}
        \\Libs: -L${{libdir}} -lstackpulse
        \\Libs.private: {s}
        \\Cflags: -I${{includedir}}
        \\
    , .{ version, std.mem.join(b.allocator, " ", systemLibFlags(ctx)) catch @panic("OOM") }));
    b.getInstallStep().dependOn(&b.addInstallFile(pc, "lib/pkgconfig/stackpulse.pc").step);

    // ---- examples -----------------------------------------------------
    const examples_step = b.step("examples", "Build examples/*.c into zig-out/bin");
    var example_installs: std.ArrayList(*std.Build.Step) = .empty;
    for (examples) |src| {
        const exe = addProgram(ctx, std.fs.path.stem(src), &.{src}, static_lib, true);
        const inst = b.addInstallArtifact(exe, .{});
        examples_step.dependOn(&inst.step);
        example_installs.append(b.allocator, &inst.step) catch @panic("OOM");
    }

    // ---- tests and corpus replays ---------------------------------------
    const check_step = b.step("check", "Compile library, tests, examples and fuzz harnesses without running");
    check_step.dependOn(&static_lib.step);
    check_step.dependOn(&shared_lib.step);
    check_step.dependOn(&pure_lib.step);

    var test_exes: std.ArrayList(*std.Build.Step.Compile) = .empty;
    for (test_lists.pure) |src|
        test_exes.append(b.allocator, addTest(ctx, src, pure_lib, false)) catch @panic("OOM");
    if (!foreign) for (test_lists.os) |src|
        test_exes.append(b.allocator, addTest(ctx, src, static_lib, true)) catch @panic("OOM");
    for (harnesses) |name|
        test_exes.append(b.allocator, addReplay(ctx, name, pure_lib, false)) catch @panic("OOM");
    if (!foreign) for (full_harnesses) |name|
        test_exes.append(b.allocator, addReplay(ctx, name, static_lib, true)) catch @panic("OOM");
    for (test_exes.items) |exe| check_step.dependOn(&exe.step);
    for (example_installs.items) |s| check_step.dependOn(s);

    const exports = exportsCheck(b, shared_lib);

    const run_tests = testRunner(b, root, bin_dir, run_wrap);
    for (test_exes.items) |exe| run_tests.addArtifactArg(exe);
    for (example_installs.items) |s| run_tests.step.dependOn(s);
    const test_step = b.step("test", "Run unit/integration tests, replay the fuzz corpus, check exports");
    test_step.dependOn(&exports.step);
    const link_check = b.addSystemCommand(&.{"bash"});
    link_check.addFileArg(b.path(".ci/check-link.sh"));
    link_check.addDirectoryArg(prefix_dir);
    link_check.has_side_effects = true;
    link_check.step.dependOn(b.getInstallStep());
    test_step.dependOn(&link_check.step);
    test_step.dependOn(&run_tests.step);

    // Valgrind cannot decode every instruction of -mcpu=native (AVX-512 in
    // zig's memset), so its binaries are built for the baseline CPU.
    const vg: Ctx = .{ .b = b, .target = b.resolveTargetQuery(.{ .cpu_model = .baseline }), .optimize = ctx.optimize, .debuginfod = ctx.debuginfod };
    const vg_pure = addLib(vg, "stackpulse-pure", .static, &pure_srcs);
    const vg_full = addLib(vg, "stackpulse", .static, &all_srcs);
    const valgrind = testRunner(b, root, bin_dir, &.{"--wrap=valgrind -q --leak-check=full --errors-for-leak-kinds=definite --error-exitcode=99"});
    for (test_lists.pure) |src| valgrind.addArtifactArg(addTest(vg, src, vg_pure, false));
    for (test_lists.os) |src| valgrind.addArtifactArg(addTest(vg, src, vg_full, true));
    for (harnesses) |name| valgrind.addArtifactArg(addReplay(vg, name, vg_pure, false));
    for (full_harnesses) |name| valgrind.addArtifactArg(addReplay(vg, name, vg_full, true));
    for (example_installs.items) |s| valgrind.step.dependOn(s);
    b.step("valgrind", "Run the test binaries under valgrind --leak-check=full").dependOn(&valgrind.step);

    // ---- demo -----------------------------------------------------------
    const demo = b.addSystemCommand(&.{"bash"});
    demo.addFileArg(b.path(".ci/demo.sh"));
    demo.addDirectoryArg(bin_dir);
    demo.has_side_effects = true;
    demo.stdio = .inherit;
    for (example_installs.items) |s| demo.step.dependOn(s);
    demo.step.dependOn(b.getInstallStep());
    b.step("demo", "Build and run the demo program").dependOn(&demo.step);

    // ---- clang-driven steps (sanitize, coverage, fuzz) -------------------
    const manifest = b.addWriteFiles().add("manifest.sh", manifestText(ctx));
    const clang_steps = [_]struct { name: []const u8, desc: []const u8, args: []const []const u8 }{
        .{ .name = "sanitize", .desc = "Build all tests with clang-14 ASan+UBSan and run them", .args = &.{"sanitize"} },
        .{ .name = "coverage", .desc = "Terminal line/branch coverage of the pure layers (clang-14)", .args = &.{"coverage"} },
        .{ .name = "coverage-html", .desc = "HTML coverage report into zig-out/coverage", .args = &.{"coverage-html"} },
        .{ .name = "fuzz", .desc = "Build libFuzzer (clang-14) and AFL++ (afl-clang-fast) binaries", .args = &.{"fuzz"} },
        .{ .name = "fuzz-smoke", .desc = "Run each fuzz harness briefly (libFuzzer and AFL++)", .args = &.{ "fuzz-smoke", fuzz_seconds, afl_seconds } },
    };
    for (clang_steps) |cs| {
        const run = b.addSystemCommand(&.{"bash"});
        run.setName(cs.name);
        run.addFileArg(b.path(".ci/clang-build.sh"));
        run.addFileArg(manifest);
        run.addDirectoryArg(root);
        run.addDirectoryArg(prefix_dir);
        run.addArgs(cs.args);
        run.has_side_effects = true;
        run.stdio = .inherit;
        b.step(cs.name, cs.desc).dependOn(&run.step);
    }

    // ---- cross builds ----------------------------------------------------
    const cross_step = b.step("cross", "Library for aarch64-linux-gnu and a static x86_64-linux-musl pure-layer build");
    const aarch64: Ctx = .{ .b = b, .target = b.resolveTargetQuery(.{ .cpu_arch = .aarch64, .os_tag = .linux, .abi = .gnu, .glibc_version = .{ .major = 2, .minor = 36, .patch = 0 } }), .optimize = ctx.optimize, .debuginfod = ctx.debuginfod };
    const musl: Ctx = .{ .b = b, .target = b.resolveTargetQuery(.{ .cpu_arch = .x86_64, .os_tag = .linux, .abi = .musl }), .optimize = ctx.optimize, .debuginfod = false };
    {
        const a_static = addLib(aarch64, "stackpulse", .static, &all_srcs);
        const a_shared = addLib(aarch64, "stackpulse", .dynamic, &all_srcs);
        const m_pure = addLib(musl, "stackpulse-pure", .static, &pure_srcs);
        const dirs = [_]struct { c: *std.Build.Step.Compile, dir: []const u8 }{
            .{ .c = a_static, .dir = "cross/aarch64-linux-gnu" },
            .{ .c = a_shared, .dir = "cross/aarch64-linux-gnu" },
            .{ .c = m_pure, .dir = "cross/x86_64-linux-musl" },
        };
        for (dirs) |d| {
            const inst = b.addInstallArtifact(d.c, .{ .dest_dir = .{ .override = .{ .custom = d.dir } } });
            cross_step.dependOn(&inst.step);
        }
        // Static musl executables of the pure tests prove the pure layers link
        // without glibc (against Debian's libzstd.a) and run.
        const musl_run = testRunner(b, root, bin_dir, &.{});
        musl_run.setName("run pure tests (x86_64-linux-musl, static)");
        for (test_lists.pure) |src| musl_run.addArtifactArg(addTest(musl, src, m_pure, false));
        cross_step.dependOn(&musl_run.step);
    }

    // ---- pure tests under qemu-aarch64 -----------------------------------
    {
        const a_pure = addLib(aarch64, "stackpulse-pure", .static, &pure_srcs);
        const run = testRunner(b, root, bin_dir, &.{"--wrap=qemu-aarch64"});
        run.setName("run pure tests (aarch64, qemu)");
        for (test_lists.pure) |src| run.addArtifactArg(addTest(aarch64, src, a_pure, false));
        for (harnesses) |name| run.addArtifactArg(addReplay(aarch64, name, a_pure, false));
        b.step("test-aarch64", "Build the pure tests for aarch64-linux-gnu and run them under qemu-aarch64").dependOn(&run.step);
    }

    // ---- format, lint, docs ---------------------------------------------
    const fmt = b.addSystemCommand(&.{ "bash", ".ci/clang-format.sh", "fix" });
    fmt.setCwd(root);
    fmt.addArgs(&fmt_dirs);
    fmt.has_side_effects = true;
    const zig_fmt = b.addFmt(.{ .paths = b.pathList(&zig_files) });
    const fmt_step = b.step("fmt", "Format C sources (clang-format) and build files (zig fmt)");
    fmt_step.dependOn(&fmt.step);
    fmt_step.dependOn(&zig_fmt.step);

    const fmt_check_step = b.step("fmt-check", "Fail if any C or Zig file is not formatted");
    for (fmtCheckSteps(b, root)) |st| fmt_check_step.dependOn(st);
    const lint_step = b.step("lint", "clang-tidy (warnings are errors) and the layering check");
    const lint_steps = lintSteps(b, root);
    for (lint_steps) |st| lint_step.dependOn(st);
    b.step("layers", "Only the layering check of lint").dependOn(lint_steps[0]);

    const doc = b.addSystemCommand(&.{ "bash", ".ci/doc.sh" });
    doc.setCwd(root);
    doc.addDirectoryArg(prefix_dir);
    doc.has_side_effects = true;
    b.step("doc", "API reference from include/stackpulse.h (Doxygen) into zig-out/doc").dependOn(&doc.step);

    // ci runs its parts one after another and stops at the first failure,
    // so timing-sensitive tests do not share the CPUs with clang-tidy.
    const ci = b.step("ci", "fmt-check, then lint, then test");
    const ci_fmt = fmtCheckSteps(b, root);
    const ci_lint = lintSteps(b, root);
    for (ci_lint) |l| for (ci_fmt) |f| l.dependOn(f);
    const ci_run = testRunner(b, root, bin_dir, run_wrap);
    for (test_exes.items) |exe| ci_run.addArtifactArg(exe);
    for (example_installs.items) |st| ci_run.step.dependOn(st);
    ci_run.step.dependOn(&exportsCheck(b, shared_lib).step);
    for (ci_lint) |l| ci_run.step.dependOn(l);
    ci.dependOn(&ci_run.step);
}

fn exportsCheck(b: *std.Build, lib: *std.Build.Step.Compile) *std.Build.Step.Run {
    const run = b.addSystemCommand(&.{"bash"});
    run.setName("check exported symbols");
    run.addFileArg(b.path(".ci/check-exports.sh"));
    run.addArtifactArg(lib);
    run.has_side_effects = true;
    return run;
}

const zig_files = [_][]const u8{ "build.zig", "build.zig.zon", "src/sources.zig", "tests/tests.zig", "fuzz/harnesses.zig" };
const fmt_dirs = [_][]const u8{ "src", "include", "tests", "fuzz", "examples", "bench" };

/// clang-format --check over the C directories and zig fmt --check.
fn fmtCheckSteps(b: *std.Build, root: std.Build.LazyPath) [2]*std.Build.Step {
    const c = b.addSystemCommand(&.{ "bash", ".ci/clang-format.sh", "check" });
    c.setCwd(root);
    c.addArgs(&fmt_dirs);
    c.has_side_effects = true;
    const z = b.addFmt(.{ .paths = b.pathList(&zig_files), .check = true });
    return .{ &c.step, &z.step };
}

/// The layering check and clang-tidy over every listed C file.
fn lintSteps(b: *std.Build, root: std.Build.LazyPath) [2]*std.Build.Step {
    const layers = b.addSystemCommand(&.{ "python3", ".ci/check-layers.py" });
    layers.setCwd(root);
    layers.has_side_effects = true;
    const tidy = b.addSystemCommand(&.{ "bash", ".ci/clang-tidy.sh" });
    tidy.setCwd(root);
    tidy.addArgs(&all_srcs);
    tidy.addArgs(&test_lists.pure);
    tidy.addArgs(&test_lists.os);
    tidy.addArgs(examples);
    tidy.addArg("tests/support/harness.c");
    for (fuzz_list.names ++ fuzz_list.full_names) |name| tidy.addArg(b.fmt("fuzz/{s}.c", .{name}));
    if (harnesses.len > 0) tidy.addArgs(&.{ "fuzz/replay_main.c", "fuzz/afl_driver.c" });
    tidy.has_side_effects = true;
    return .{ &layers.step, &tidy.step };
}

/// System libraries of the full library, as -l flags, for this target.
fn systemLibFlags(ctx: Ctx) []const []const u8 {
    const b = ctx.b;
    var list: std.ArrayList([]const u8) = .empty;
    for (systemLibs(ctx)) |name| list.append(b.allocator, b.fmt("-l{s}", .{name})) catch @panic("OOM");
    if (hasSystemLibstdcxx(ctx)) list.append(b.allocator, "-lstdc++") catch @panic("OOM");
    return list.items;
}

fn systemLibs(ctx: Ctx) []const []const u8 {
    const b = ctx.b;
    var list: std.ArrayList([]const u8) = .empty;
    list.appendSlice(b.allocator, &.{ "zstd", "elf", "dw", "unwind", "z" }) catch @panic("OOM");
    switch (ctx.target.result.cpu.arch) {
        .x86_64 => list.append(b.allocator, "unwind-x86_64") catch @panic("OOM"),
        .aarch64 => list.append(b.allocator, "unwind-aarch64") catch @panic("OOM"),
        else => {},
    }
    if (ctx.debuginfod) list.append(b.allocator, "debuginfod") catch @panic("OOM");
    return list.items;
}

/// A C module for this target: flags, include paths, and for foreign
/// targets Debian's multiarch headers and libraries.
fn cModule(ctx: Ctx) *std.Build.Module {
    const b = ctx.b;
    const m = b.createModule(.{ .target = ctx.target, .optimize = ctx.optimize, .link_libc = true });
    m.addIncludePath(b.path("include"));
    m.addIncludePath(b.path("src"));
    if (ctx.debuginfod) m.addCMacro("SP_HAVE_DEBUGINFOD", "1");
    if (hasSystemLibstdcxx(ctx)) m.addCMacro("SP_HAVE_CXA_DEMANGLE", "1");
    const t = ctx.target.result;
    const host = ctx.b.graph.host.result;
    if (t.cpu.arch == host.cpu.arch and t.abi == host.abi) return m;
    const triple = switch (t.cpu.arch) {
        .aarch64 => "aarch64-linux-gnu",
        else => "x86_64-linux-gnu",
    };
    // After zig's own libc headers, so only the library headers come from here.
    m.addAfterIncludePath(.{ .cwd_relative = b.fmt("/usr/include/{s}", .{triple}) });
    m.addAfterIncludePath(.{ .cwd_relative = "/usr/include" });
    m.addLibraryPath(.{ .cwd_relative = b.fmt("/usr/lib/{s}", .{triple}) });
    if (t.abi == .gnu) m.addRPathSpecial(b.fmt("/usr/lib/{s}", .{triple}));
    return m;
}

fn linkSystem(ctx: Ctx, m: *std.Build.Module, full: bool) void {
    if (ctx.target.result.abi == .musl) {
        // Debian ships no musl zstd; its glibc-built libzstd.a links into a
        // static musl program (only the pure layers are built for musl).
        m.addObjectFile(.{ .cwd_relative = "/usr/lib/x86_64-linux-gnu/libzstd.a" });
        return;
    }
    const libs: []const []const u8 = if (full) systemLibs(ctx) else &.{"zstd"};
    for (libs) |name| m.linkSystemLibrary(name, .{ .use_pkg_config = .no });
    // C++ demangling: __cxa_demangle is a weak reference, satisfied by the
    // system libstdc++ where one is installed (not zig's libc++, whose
    // operator new/delete would leak into our exports).
    if (full and hasSystemLibstdcxx(ctx)) m.addObjectFile(.{ .cwd_relative = "/usr/lib/x86_64-linux-gnu/libstdc++.so.6" });
}

fn hasSystemLibstdcxx(ctx: Ctx) bool {
    const t = ctx.target.result;
    // Debian always has it: apt itself depends on libstdc++6.
    return t.cpu.arch == .x86_64 and t.abi == .gnu;
}

fn addLib(ctx: Ctx, name: []const u8, linkage: std.builtin.LinkMode, srcs: []const []const u8) *std.Build.Step.Compile {
    const m = cModule(ctx);
    m.addCSourceFiles(.{ .files = srcs, .flags = &c_flags });
    // UB checks trap instead of calling zig's UBSan runtime, so the
    // installed libraries link with any C toolchain (full reports come from
    // the clang-14 `sanitize` step).
    if (ctx.optimize == .debug) m.sanitize_c = .trap;
    if (linkage == .dynamic) {
        m.pic = true;
        linkSystem(ctx, m, true);
    }
    return ctx.b.addLibrary(.{
        .name = name,
        .linkage = linkage,
        .root_module = m,
        .version = if (linkage == .dynamic) version else null,
    });
}

/// An executable from C files plus a library (static: internal sp_* names
/// stay reachable for tests).
fn addProgram(ctx: Ctx, name: []const u8, srcs: []const []const u8, lib: *std.Build.Step.Compile, full: bool) *std.Build.Step.Compile {
    const m = cModule(ctx);
    m.addIncludePath(ctx.b.path("tests/support"));
    m.addCSourceFiles(.{ .files = srcs, .flags = &c_flags });
    m.linkLibrary(lib);
    linkSystem(ctx, m, full);
    if (ctx.target.result.abi == .musl) {
        return ctx.b.addExecutable(.{ .name = name, .root_module = m, .linkage = .static });
    }
    return ctx.b.addExecutable(.{ .name = name, .root_module = m });
}

/// "tests/format/test_spool.c" -> "format_test_spool".
fn testName(b: *std.Build, src: []const u8) []const u8 {
    const dir = std.fs.path.basename(std.fs.path.dirname(src) orelse ".");
    return b.fmt("{s}_{s}", .{ dir, std.fs.path.stem(src) });
}

fn addTest(ctx: Ctx, src: []const u8, lib: *std.Build.Step.Compile, full: bool) *std.Build.Step.Compile {
    return addProgram(ctx, testName(ctx.b, src), &.{ src, "tests/support/harness.c" }, lib, full);
}

/// The plain replay executable of fuzz harness @name over corpus/NAME; @full
/// links the whole library's system libraries too.
fn addReplay(ctx: Ctx, name: []const u8, lib: *std.Build.Step.Compile, full: bool) *std.Build.Step.Compile {
    const b = ctx.b;
    const m = cModule(ctx);
    m.addCSourceFiles(.{ .files = &.{b.fmt("fuzz/{s}.c", .{name})}, .flags = &c_flags });
    m.addCSourceFiles(.{ .files = &.{"fuzz/replay_main.c"}, .flags = &(c_flags ++ [_][]const u8{b.fmt("-DSP_FUZZ_NAME=\"{s}\"", .{name})}) });
    m.linkLibrary(lib);
    linkSystem(ctx, m, full);
    return b.addExecutable(.{ .name = b.fmt("replay_{s}", .{name}), .root_module = m });
}

/// tests/run_tests.sh with the repository root and zig-out/bin.
fn testRunner(b: *std.Build, root: std.Build.LazyPath, bin_dir: std.Build.LazyPath, extra: []const []const u8) *std.Build.Step.Run {
    const run = b.addSystemCommand(&.{"bash"});
    run.setName("run tests");
    run.addFileArg(b.path("tests/run_tests.sh"));
    run.addPrefixedDirectoryArg("--root=", root);
    run.addPrefixedDirectoryArg("--bin-dir=", bin_dir);
    run.addArgs(extra);
    run.has_side_effects = true;
    run.stdio = .inherit;
    return run;
}

/// Bash arrays of every list, for .ci/clang-build.sh.
fn manifestText(ctx: Ctx) []const u8 {
    const b = ctx.b;
    const Entry = struct { key: []const u8, items: []const []const u8 };
    const entries = [_]Entry{
        .{ .key = "SP_PURE_SRCS", .items = &pure_srcs },
        .{ .key = "SP_OS_SRCS", .items = &os_srcs },
        .{ .key = "SP_PURE_TESTS", .items = &test_lists.pure },
        .{ .key = "SP_OS_TESTS", .items = &test_lists.os },
        .{ .key = "SP_FUZZ", .items = harnesses },
        .{ .key = "SP_FUZZ_FULL", .items = full_harnesses },
        .{ .key = "SP_EXAMPLES", .items = examples },
        .{ .key = "SP_CFLAGS", .items = &c_flags },
        .{ .key = "SP_LIBS", .items = systemLibFlags(ctx) },
        .{ .key = "SP_DEFINES", .items = if (ctx.debuginfod) &.{ "-DSP_HAVE_DEBUGINFOD=1", "-DSP_HAVE_CXA_DEMANGLE=1" } else &.{"-DSP_HAVE_CXA_DEMANGLE=1"} },
    };
    var out: std.ArrayList(u8) = .empty;
    for (entries) |e| {
        out.appendSlice(b.allocator, e.key) catch @panic("OOM");
        out.appendSlice(b.allocator, "=(") catch @panic("OOM");
        for (e.items) |item| {
            out.appendSlice(b.allocator, b.fmt(" '{s}'", .{item})) catch @panic("OOM");
        }
        out.appendSlice(b.allocator, " )\n") catch @panic("OOM");
    }
    return out.items;
}
