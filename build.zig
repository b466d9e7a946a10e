//! Build for stackpulse (Zig 0.17.1). Every file list comes from
//! src/sources.zig, tests/tests.zig and fuzz/harnesses.zig; steps that need
//! the system clang (sanitize, coverage, fuzz) get the same lists through a
//! generated manifest read by .ci/clang-build.sh.
const std = @import("std");
const sources = @import("src/sources.zig");
const test_lists = @import("tests/tests.zig");
const fuzz_list = @import("fuzz/harnesses.zig");

const version: std.SemanticVersion = .{ .major = 0, .minor = 3, .patch = 0 };
/// 0.x policy (docs/abi.md): every 0.x minor may break, so the soname
/// carries major.minor while the major version is 0.
const soname = "libstackpulse.so.0.3";
const shared_file = "libstackpulse.so.0.3.0";

/// Flags for every C file of the library, its tests, examples and harnesses.
const c_flags = [_][]const u8{
    "-std=c17",      "-Wall",        "-Wextra", "-Wpedantic",
    "-Wshadow",      "-Wconversion", "-Werror", "-fvisibility=hidden",
    "-D_GNU_SOURCE",
};

const pure_srcs = layerSrcs(&sources.pure_layers);
const os_srcs = layerSrcs(&sources.os_layers);
const all_srcs = pure_srcs ++ os_srcs;
/// What the pure-layer tests and the fuzz harnesses link: the pure layers
/// plus test support (never installed).
const pure_test_srcs = pure_srcs ++ test_lists.support;
const examples: []const []const u8 = if (@hasDecl(sources, "examples")) &sources.examples else &.{};
const harnesses: []const []const u8 = &fuzz_list.names;
const os_harnesses: []const []const u8 = &fuzz_list.os_names;

fn layerSrcs(comptime layers: []const []const u8) []const []const u8 {
    comptime {
        var out: []const []const u8 = &.{};
        for (layers) |l| out = out ++ @field(sources, l);
        return out;
    }
}

const Ctx = struct {
    b: *std.Build,
    target: std.Build.ResolvedTarget,
    optimize: std.builtin.Optimize,
    debuginfod: bool,
    curl: bool = false,
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
        // Not standardOptimizeOption: a plain `zig build` installs an
        // optimized build that keeps its safety checks (ReleaseSafe).
        .optimize = b.option(std.builtin.Optimize, "optimize", "Optimize mode: ReleaseSafe (default), Debug, ReleaseFast or ReleaseSmall") orelse .safe,
        .debuginfod = b.option(bool, "debuginfod", "Define SP_HAVE_DEBUGINFOD=1: debuginfod queries over libdebuginfod (loaded when first used)") orelse true,
        .curl = b.option(bool, "curl", "Define SP_HAVE_CURL=1: stackpulse_push over libcurl (loaded when first used)") orelse true,
    };
    const fuzz_seconds = b.option([]const u8, "fuzz-seconds", "Seconds per libFuzzer harness in fuzz-smoke (default 20)") orelse "20";
    const afl_seconds = b.option([]const u8, "afl-seconds", "Seconds per AFL++ harness in fuzz-smoke (default 5)") orelse "5";

    const root = b.path("");
    const bin_dir: std.Build.LazyPath = .{ .relative = .{ .base = .install_bin } };
    const prefix_dir: std.Build.LazyPath = .{ .relative = .{ .base = .install_prefix } };

    // ---- libraries ----------------------------------------------------
    const static_lib = addLib(ctx, "stackpulse", .static, all_srcs);
    const shared_lib = addSharedLib(ctx);
    const pure_lib = addLib(ctx, "stackpulse-pure", .static, pure_test_srcs);
    // -Dlibdir: Debian's multiarch layout is `-Dlibdir=lib/x86_64-linux-gnu`
    // (zig's --prefix-lib-dir is not used: the .pc files must know it).
    const libdir = b.option([]const u8, "libdir", "Libraries and pkgconfig/ under the prefix (default lib; lib/<multiarch> for Debian)") orelse "lib";
    installLibrary(ctx, b.getInstallStep(), .{ .root = "", .libdir = libdir }, static_lib, shared_lib);

    // ---- examples -----------------------------------------------------
    const examples_step = b.step("examples", "Build examples/*.c into zig-out/bin");
    var example_installs: std.ArrayList(*std.Build.Step) = .empty;
    for (examples) |src| {
        const exe = addProgram(ctx, std.fs.path.stem(src), &.{src}, static_lib, .full);
        // Installed programs as a distribution builds them (PIE, build-id).
        exe.pie = true;
        exe.build_id = .sha1;
        const inst = b.addInstallArtifact(exe, .{});
        examples_step.dependOn(&inst.step);
        example_installs.append(b.allocator, &inst.step) catch @panic("OOM");
    }

    // ---- tests and corpus replays ---------------------------------------
    const check_step = b.step("check", "Compile library, tests, examples and fuzz harnesses without running");
    check_step.dependOn(&static_lib.step);
    check_step.dependOn(shared_lib.step);
    check_step.dependOn(&pure_lib.step);

    // -Dtests=a,b runs only the test binaries whose name contains a or b
    // (a developer's shortcut; CI runs them all).
    const only = b.option([]const u8, "tests", "Comma-separated substrings: run only the test binaries whose name contains one");
    var test_exes: std.ArrayList(*std.Build.Step.Compile) = .empty;
    for (test_lists.pure) |src|
        test_exes.append(b.allocator, addTest(ctx, src, pure_lib, .pure)) catch @panic("OOM");
    for (harnesses) |name|
        test_exes.append(b.allocator, addReplay(ctx, name, pure_lib, .pure)) catch @panic("OOM");
    const npure = test_exes.items.len;
    if (!foreign) for (test_lists.os) |src|
        test_exes.append(b.allocator, addTest(ctx, src, static_lib, .oracle)) catch @panic("OOM");
    if (!foreign) for (os_harnesses) |name|
        test_exes.append(b.allocator, addReplay(ctx, name, static_lib, .oracle)) catch @panic("OOM");
    for (test_exes.items) |exe| check_step.dependOn(&exe.step);
    for (example_installs.items) |s| check_step.dependOn(s);

    const exports = exportsCheck(b, shared_lib);

    const run_tests = testRunner(b, root, bin_dir, run_wrap);
    for (test_exes.items) |exe| if (selected(only, exe.name)) run_tests.addArtifactArg(exe);
    for (example_installs.items) |s| run_tests.step.dependOn(s);
    const test_step = b.step("test", "Run unit/integration tests, replay the fuzz corpus, check exports");
    test_step.dependOn(&exports.step);
    test_step.dependOn(&linkCheck(b, prefix_dir).step);
    const cxx_check = b.addSystemCommand(&.{"bash"});
    cxx_check.setName("check the header from C++");
    cxx_check.addFileArg(b.path(".ci/check-cxx.sh"));
    cxx_check.addDirectoryArg(prefix_dir);
    cxx_check.has_side_effects = true;
    cxx_check.step.dependOn(b.getInstallStep());
    test_step.dependOn(&cxx_check.step);
    test_step.dependOn(&run_tests.step);

    // The pure layers need no perf events, targets or network: a package
    // build chroot can run these (debian/rules does).
    const run_pure = testRunner(b, root, bin_dir, run_wrap);
    run_pure.setName("run pure tests");
    for (test_exes.items[0..npure]) |exe| run_pure.addArtifactArg(exe);
    b.step("test-pure", "Run the pure layers' tests and fuzz corpus replays (no perf events, no targets)").dependOn(&run_pure.step);

    // Valgrind cannot decode every instruction of -mcpu=native (AVX-512 in
    // zig's memset), so its binaries are built for the baseline CPU.
    const vg: Ctx = .{ .b = b, .target = b.resolveTargetQuery(.{ .cpu_model = .baseline }), .optimize = ctx.optimize, .debuginfod = ctx.debuginfod, .curl = ctx.curl };
    const vg_pure = addLib(vg, "stackpulse-pure", .static, pure_test_srcs);
    const vg_full = addLib(vg, "stackpulse", .static, all_srcs);
    const valgrind = testRunner(b, root, bin_dir, &.{"--wrap=valgrind -q --leak-check=full --errors-for-leak-kinds=definite --error-exitcode=99 --suppressions=tests/valgrind.supp"});
    for (test_lists.pure) |src| valgrind.addArtifactArg(addTest(vg, src, vg_pure, .pure));
    for (test_lists.os) |src| valgrind.addArtifactArg(addTest(vg, src, vg_full, .oracle));
    for (harnesses) |name| valgrind.addArtifactArg(addReplay(vg, name, vg_pure, .pure));
    for (os_harnesses) |name| valgrind.addArtifactArg(addReplay(vg, name, vg_full, .oracle));
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
        // The test trees link the installed lib/ for the docs check.
        run.step.dependOn(b.getInstallStep());
        b.step(cs.name, cs.desc).dependOn(&run.step);
    }

    // ---- cross builds ----------------------------------------------------
    const cross_step = b.step("cross", "Library for aarch64-linux-gnu and a static x86_64-linux-musl pure-layer build");
    const aarch64: Ctx = .{ .b = b, .target = b.resolveTargetQuery(.{ .cpu_arch = .aarch64, .os_tag = .linux, .abi = .gnu, .glibc_version = .{ .major = 2, .minor = 36, .patch = 0 } }), .optimize = ctx.optimize, .debuginfod = ctx.debuginfod, .curl = ctx.curl };
    const musl: Ctx = .{ .b = b, .target = b.resolveTargetQuery(.{ .cpu_arch = .x86_64, .os_tag = .linux, .abi = .musl }), .optimize = ctx.optimize, .debuginfod = false };
    {
        const a_static = addLib(aarch64, "stackpulse", .static, all_srcs);
        const a_shared = addSharedLib(aarch64);
        const m_pure = addLib(musl, "stackpulse-pure", .static, pure_srcs);
        const m_pure_test = addLib(musl, "stackpulse-pure", .static, pure_test_srcs);
        // zig-out/cross/aarch64-linux-gnu is a prefix like the native one;
        // docs/howto.md builds a program against it.
        const a_install = b.step("cross-install", "Only install the aarch64 library layout into zig-out/cross/aarch64-linux-gnu");
        installLibrary(aarch64, a_install, .{ .root = "cross/aarch64-linux-gnu", .libdir = "lib" }, a_static, a_shared);
        cross_step.dependOn(a_install);
        // The README's recipe for one's own aarch64 program, shared and static.
        const a_use = b.addSystemCommand(&.{ "bash", ".ci/cross-use.sh", b.graph.zig_exe });
        a_use.setName("build and run a program against the aarch64 prefix");
        a_use.setCwd(root);
        a_use.addDirectoryArg(prefix_dir.path(b, "cross/aarch64-linux-gnu"));
        a_use.has_side_effects = true;
        a_use.step.dependOn(a_install);
        cross_step.dependOn(&a_use.step);
        const m_inst = b.addInstallArtifact(m_pure, .{ .dest_dir = .{ .override = .{ .custom = "cross/x86_64-linux-musl/lib" } } });
        cross_step.dependOn(&m_inst.step);
        // Static musl executables of the pure tests prove the pure layers link
        // without glibc (against Debian's libzstd.a) and run.
        const musl_run = testRunner(b, root, bin_dir, &.{});
        musl_run.setName("run pure tests (x86_64-linux-musl, static)");
        for (test_lists.pure) |src| musl_run.addArtifactArg(addTest(musl, src, m_pure_test, .pure));
        cross_step.dependOn(&musl_run.step);
    }

    // ---- pure tests under qemu-aarch64 -----------------------------------
    {
        const a_pure = addLib(aarch64, "stackpulse-pure", .static, pure_test_srcs);
        const run = testRunner(b, root, bin_dir, &.{"--wrap=qemu-aarch64"});
        run.setName("run pure tests (aarch64, qemu)");
        for (test_lists.pure) |src| run.addArtifactArg(addTest(aarch64, src, a_pure, .pure));
        for (harnesses) |name| run.addArtifactArg(addReplay(aarch64, name, a_pure, .pure));
        b.step("test-aarch64", "Build the pure tests for aarch64-linux-gnu and run them under qemu-aarch64").dependOn(&run.step);
    }

    // ---- the aarch64 guest (qemu-system-aarch64, .ci/arm64-vm) ---------
    {
        const a_lib = addLib(aarch64, "stackpulse", .static, all_srcs);
        const a_examples = b.step("arm64-examples", "aarch64 record and report into zig-out/arm64/bin (for .ci/arm64-vm)");
        const vm = b.addSystemCommand(&.{"bash"});
        vm.setName("run tests in the aarch64 guest");
        vm.addFileArg(b.path(".ci/arm64-vm"));
        vm.addArgs(&.{ "run", "--no-build" });
        for (examples) |src| {
            const stem = std.fs.path.stem(src);
            if (!std.mem.eql(u8, stem, "record") and !std.mem.eql(u8, stem, "report")) continue;
            const exe = addProgram(aarch64, stem, &.{src}, a_lib, .full);
            a_examples.dependOn(&b.addInstallArtifact(exe, .{ .dest_dir = .{ .override = .{ .custom = "arm64/bin" } } }).step);
            vm.addPrefixedArtifactArg("--copy=", exe);
        }
        os_tests: for (test_lists.os ++ test_lists.arm64_guest) |src| {
            for (test_lists.arm64_vm_skip) |skip| if (std.mem.eql(u8, src, skip)) continue :os_tests;
            vm.addPrefixedArtifactArg("--copy=", addTest(aarch64, src, a_lib, .oracle));
        }
        // The workloads, built as users build aarch64 code with zig cc.
        const variants = [_]struct { name: []const u8, flags: []const []const u8 }{
            .{ .name = "tree-cfi", .flags = &.{ "-O2", "-g", "-fomit-frame-pointer" } },
            // -g0: zig cc writes .debug_frame by default. Leaf functions get a frame
            // record too: without CFI nothing tells whether a leaf still
            // holds its return address in x30.
            .{ .name = "tree-fp", .flags = &.{ "-O2", "-g0", "-fno-omit-frame-pointer", "-mno-omit-leaf-frame-pointer", "-fno-asynchronous-unwind-tables", "-fno-unwind-tables" } },
            .{ .name = "tree-pac", .flags = &.{ "-O2", "-g", "-fomit-frame-pointer", "-mbranch-protection=standard" } },
        };
        for (variants) |v| {
            const cc = b.addSystemCommand(&.{ b.graph.zig_exe, "cc", "-target", "aarch64-linux-gnu.2.36", "-pthread" });
            cc.addArgs(v.flags);
            cc.addFileArg(b.path("tests/arm64/targets/tree.c"));
            cc.addArg("-o");
            vm.addPrefixedFileArg("--copy=", cc.addOutputFileArg(v.name));
        }
        vm.addPrefixedFileArg("--copy=", b.path("tests/record/targets/pyladder.py"));
        vm.addPrefixedFileArg("--copy=", b.path("tests/run_tests.sh"));
        vm.addPrefixedFileArg("--copy=", b.path("tests/arm64/guest.sh"));
        const out_dir = vm.addPrefixedOutputDirectoryArg("--out=", "arm64-out");
        vm.addArgs(&.{ "--", "bash", "guest.sh" });
        // The tests left out, for guest.sh to name in the log.
        for (test_lists.arm64_vm_skip) |skip| vm.addArg(std.fs.path.stem(skip));
        vm.has_side_effects = true;
        vm.stdio = .inherit;
        // Then the guest's spools symbolize here, with no arm64 file.
        const host = b.addSystemCommand(&.{"env"});
        host.setName("check the guest's spools on the host");
        host.addPrefixedDirectoryArg("SP_ARM64_OUT=", out_dir);
        host.addArg("bash");
        host.addFileArg(b.path("tests/run_tests.sh"));
        host.addPrefixedDirectoryArg("--root=", root);
        host.addPrefixedDirectoryArg("--bin-dir=", bin_dir);
        for (test_lists.arm64_host) |src| host.addArtifactArg(addTest(ctx, src, static_lib, .oracle));
        host.has_side_effects = true;
        host.stdio = .inherit;
        host.step.dependOn(&vm.step);
        b.step("test-arm64-vm", "Build the OS-layer tests and examples for aarch64, run them in an aarch64 guest (qemu-system-aarch64), check its spools here").dependOn(&host.step);

        // bench/unwind_cost in the guest and here, on the same targets
        // built ahead by zig cc for each machine, for relative figures.
        const bench_step = b.step("bench-arm64-vm", "bench/unwind_cost in the aarch64 guest, then on this host, same targets and flags");
        const machines = [_]struct { c: Ctx, lib: *std.Build.Step.Compile, triple: []const u8, guest: bool }{
            .{ .c = aarch64, .lib = a_lib, .triple = "aarch64-linux-gnu.2.36", .guest = true },
            .{ .c = ctx, .lib = static_lib, .triple = "native", .guest = false },
        };
        var prev: ?*std.Build.Step = null;
        for (machines) |mc| {
            const uc = addProgram(mc.c, "unwind_cost", &.{"bench/unwind_cost.c"}, mc.lib, .full);
            uc.root_module.addIncludePath(b.path("tests/unwind"));
            const cfi = [_][]const u8{ "-O2", "-fomit-frame-pointer", "-fasynchronous-unwind-tables", "-Wno-unknown-attributes" };
            const so = b.addSystemCommand(&.{ b.graph.zig_exe, "cc", "-target", mc.triple, "-shared", "-fPIC", "-Wl,-soname,libsptarget.so" });
            so.addArgs(&cfi);
            so.addFileArg(b.path("tests/unwind/targets/lib.c"));
            so.addArg("-o");
            const so_file = so.addOutputFileArg("libsptarget.so");
            const tgt = b.addSystemCommand(&.{ b.graph.zig_exe, "cc", "-target", mc.triple, "-Wl,-rpath,$ORIGIN" });
            tgt.addArgs(&cfi);
            tgt.addFileArg(b.path("tests/unwind/targets/target.c"));
            tgt.addFileArg(so_file);
            tgt.addArg("-o");
            const tgt_file = tgt.addOutputFileArg("sptarget");
            const run = b.addSystemCommand(&.{"bash"});
            if (mc.guest) {
                run.setName("unwind_cost in the aarch64 guest");
                run.addFileArg(b.path(".ci/arm64-vm"));
                run.addArgs(&.{ "run", "--no-build" });
                run.addPrefixedArtifactArg("--copy=", uc);
                run.addPrefixedFileArg("--copy=", tgt_file);
                run.addPrefixedFileArg("--copy=", so_file);
                run.addArgs(&.{ "--", "env", "SP_UNWIND_TARGET_DIR=/work", "./unwind_cost", "/work", "10" });
            } else {
                run.setName("unwind_cost on this host");
                run.addArgs(&.{ "-c", "echo \"== x86_64 host\"; d=$(mktemp -d) && cp \"$1\" \"$2\" \"$d\" && SP_UNWIND_TARGET_DIR=$d \"$3\" . 10; rc=$?; rm -rf \"$d\"; exit $rc", "unwind_cost" });
                run.addFileArg(tgt_file);
                run.addFileArg(so_file);
                run.addArtifactArg(uc);
            }
            run.has_side_effects = true;
            run.stdio = .inherit;
            if (prev) |p| run.step.dependOn(p);
            prev = &run.step;
            bench_step.dependOn(&run.step);
        }
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
    const lint_step = b.step("lint", "clang-tidy (warnings are errors), the layering and public-entry checks");
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
    ci_run.step.dependOn(&linkCheck(b, prefix_dir).step);
    for (ci_lint) |l| ci_run.step.dependOn(l);
    ci_run.setEnvironmentVariable("SP_NO_SKIP", "1"); // CI installs every requirement
    ci_run.step.dependOn(&cxx_check.step);
    ci.dependOn(&ci_run.step);

    // ---- ABI -----------------------------------------------------------------
    // abi/stackpulse.abi is the committed baseline; an ABI change fails ci
    // until `zig build abi-update` regenerates it in the same commit.
    const abi_check = abiStep(b, shared_lib, "check");
    ci.dependOn(&abi_check.step);
    b.step("abi-check", "abidiff libstackpulse.so against abi/stackpulse.abi").dependOn(&abi_check.step);
    b.step("abi-update", "Regenerate abi/stackpulse.abi from libstackpulse.so (abidw)").dependOn(&abiStep(b, shared_lib, "update").step);
}

fn abiStep(b: *std.Build, lib: SharedLib, mode: []const u8) *std.Build.Step.Run {
    const run = b.addSystemCommand(&.{ "bash", ".ci/abi.sh", mode });
    run.setName(b.fmt("abi {s}", .{mode}));
    run.setCwd(b.path(""));
    run.addFileArg(lib.bin);
    run.has_side_effects = true;
    return run;
}

/// Where one build of the library installs, relative to the install
/// prefix: `<root>/include`, `<root>/<libdir>` and `<root>/<libdir>/pkgconfig`.
const Layout = struct { root: []const u8, libdir: []const u8 };

/// The header, libstackpulse.a, libstackpulse.so with its soname and dev
/// links, stackpulse.pc (links the shared library) and stackpulse-static.pc
/// (names libstackpulse.a by path, since -lstackpulse picks the .so
/// wherever both are installed). The .pc files are relocatable: their
/// prefix is found from their own directory. System libraries come as
/// pkg-config modules; libcurl and libdebuginfod are none of them: push.c
/// and dbgfind.c load them at their first push or debuginfod query.
fn installLibrary(ctx: Ctx, step: *std.Build.Step, lay: Layout, static_lib: *std.Build.Step.Compile, shared_lib: SharedLib) void {
    const b = ctx.b;
    const lib_sub = if (lay.root.len == 0) lay.libdir else b.pathJoin(&.{ lay.root, lay.libdir });
    step.dependOn(installShared(b, shared_lib, .{ .custom = lib_sub }));
    // The archive's member names are zig cache paths that depend on the
    // checkout's directory: repack it by base names (reproducible builds).
    const repack = b.addSystemCommand(&.{ "python3", ".ci/repack-ar.py", b.graph.zig_exe });
    repack.setName(b.fmt("repack {s}/libstackpulse.a", .{lib_sub}));
    repack.setCwd(b.path(""));
    repack.addArtifactArg(static_lib);
    const archive = repack.addOutputFileArg("libstackpulse.a");
    step.dependOn(&b.addInstallFile(archive, b.fmt("{s}/libstackpulse.a", .{lib_sub})).step);
    step.dependOn(&b.addInstallDirectory(.{
        .source_dir = b.path("include"),
        .install_dir = .{ .custom = if (lay.root.len == 0) "include" else b.pathJoin(&.{ lay.root, "include" }) },
        .install_subdir = "",
    }).step);

    // From <prefix>/<root>/<libdir>/pkgconfig back up to <prefix>/<root>.
    var up: std.ArrayList(u8) = .empty;
    up.appendSlice(b.allocator, "${pcfiledir}/..") catch @panic("OOM");
    var it = std.mem.tokenizeScalar(u8, lay.libdir, '/');
    while (it.next()) |_| up.appendSlice(b.allocator, "/..") catch @panic("OOM");
    const requires = std.mem.join(b.allocator, " ", pkgModules(ctx, .full)) catch @panic("OOM");
    const pc_files = [_]struct { name: []const u8, desc: []const u8, libs: []const u8, requires: []const u8 }{
        .{ .name = "stackpulse", .desc = "", .libs = "-L${libdir} -lstackpulse", .requires = "Requires.private" },
        .{ .name = "stackpulse-static", .desc = " (static library)", .libs = "${libdir}/libstackpulse.a", .requires = "Requires" },
    };
    for (pc_files) |f| {
        const pc = b.addWriteFiles().add(b.fmt("{s}.pc", .{f.name}), b.fmt(
            \\prefix={s}
            \\libdir=${{prefix}}/{s}
            \\includedir=${{prefix}}/include
            \\
            \\Name: {s}
            \\Description: Linux sampling profiler library{s}
            \\Version: {f}
            \\{s}: {s}
            \\Libs: {s}
            \\Cflags: -I${{includedir}}
            \\
        , .{ up.items, lay.libdir, f.name, f.desc, version, f.requires, requires, f.libs }));
        step.dependOn(&b.addInstallFile(pc, b.fmt("{s}/pkgconfig/{s}.pc", .{ lib_sub, f.name })).step);
    }
}

/// .ci/check-link.sh over the installed prefix: links a C program with the
/// system cc through stackpulse.pc and stackpulse-static.pc, and runs both.
fn linkCheck(b: *std.Build, prefix_dir: std.Build.LazyPath) *std.Build.Step.Run {
    const run = b.addSystemCommand(&.{"bash"});
    run.setName("check linking");
    run.addFileArg(b.path(".ci/check-link.sh"));
    run.addDirectoryArg(prefix_dir);
    run.has_side_effects = true;
    run.step.dependOn(b.getInstallStep());
    return run;
}

fn exportsCheck(b: *std.Build, lib: SharedLib) *std.Build.Step.Run {
    const run = b.addSystemCommand(&.{"bash"});
    run.setName("check exported symbols");
    run.addFileArg(b.path(".ci/check-exports.sh"));
    run.addFileArg(lib.bin);
    run.addArg(soname);
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

/// The layering check, the public-entry check and clang-tidy over every
/// listed C file.
fn lintSteps(b: *std.Build, root: std.Build.LazyPath) [3]*std.Build.Step {
    const layers = b.addSystemCommand(&.{ "python3", ".ci/check-layers.py" });
    layers.setCwd(root);
    layers.addArgs(&sources.pure_layers);
    layers.has_side_effects = true;
    const api_entry = b.addSystemCommand(&.{ "python3", ".ci/check-api-entry.py" });
    api_entry.setCwd(root);
    api_entry.has_side_effects = true;
    const tidy = b.addSystemCommand(&.{ "bash", ".ci/clang-tidy.sh" });
    tidy.setCwd(root);
    // Every optional part is compiled in for tidy, so it checks that code too.
    tidy.addArgs(&.{ "-DSP_HAVE_DEBUGINFOD=1", "-DSP_HAVE_CURL=1" });
    tidy.addArgs(all_srcs);
    tidy.addArgs(&test_lists.pure);
    tidy.addArgs(&test_lists.os);
    tidy.addArgs(&test_lists.support);
    tidy.addArgs(&test_lists.arm64_guest);
    tidy.addArgs(&test_lists.arm64_host);
    tidy.addArgs(examples);
    tidy.addArgs(&.{ "tests/support/harness.c", "tests/unwind/libunwind_oracle.c" });
    for (harnesses) |name| tidy.addArg(b.fmt("fuzz/{s}.c", .{name}));
    for (os_harnesses) |name| tidy.addArg(b.fmt("fuzz/{s}.c", .{name}));
    if (harnesses.len > 0) tidy.addArgs(&.{ "fuzz/replay_main.c", "fuzz/afl_driver.c" });
    tidy.has_side_effects = true;
    return .{ &layers.step, &api_entry.step, &tidy.step };
}

/// What a program links besides the library: the pure layers need zstd; the
/// full library its system libraries; the unwinder's oracle (tests and the
/// unwind_oracle harness) also libunwind.
const Link = enum { pure, full, oracle };

/// One system library: its pkg-config module and its -l name.
const SysLib = struct { module: []const u8, lib: []const u8 };

fn systemLibs(ctx: Ctx, link: Link) []const SysLib {
    const b = ctx.b;
    var list: std.ArrayList(SysLib) = .empty;
    list.append(b.allocator, .{ .module = "libzstd", .lib = "zstd" }) catch @panic("OOM");
    if (link == .pure) return list.items;
    list.appendSlice(b.allocator, &.{
        .{ .module = "libelf", .lib = "elf" },
        .{ .module = "libdw", .lib = "dw" },
        .{ .module = "zlib", .lib = "z" },
    }) catch @panic("OOM");
    // libunwind-generic is the remote-unwinding API of the build's
    // architecture (libunwind-x86_64, libunwind-aarch64).
    if (link == .oracle) list.appendSlice(b.allocator, &.{
        .{ .module = "libunwind-generic", .lib = "unwind-generic" },
        .{ .module = "libunwind", .lib = "unwind" },
    }) catch @panic("OOM");
    return list.items;
}

/// The pkg-config modules behind systemLibs.
fn pkgModules(ctx: Ctx, link: Link) []const []const u8 {
    var list: std.ArrayList([]const u8) = .empty;
    for (systemLibs(ctx, link)) |l| list.append(ctx.b.allocator, l.module) catch @panic("OOM");
    return list.items;
}

/// `pkg-config --libs` of systemLibs, for .ci/clang-build.sh.
fn systemLibFlags(ctx: Ctx, link: Link) []const []const u8 {
    const b = ctx.b;
    var argv: std.ArrayList([]const u8) = .empty;
    argv.appendSlice(b.allocator, &.{ "pkg-config", "--libs" }) catch @panic("OOM");
    argv.appendSlice(b.allocator, pkgModules(ctx, link)) catch @panic("OOM");
    var list: std.ArrayList([]const u8) = .empty;
    var it = std.mem.tokenizeAny(u8, b.run(argv.items), " \t\r\n");
    while (it.next()) |flag| list.append(b.allocator, flag) catch @panic("OOM");
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
    if (ctx.curl) m.addCMacro("SP_HAVE_CURL", "1");
    if (isNative(ctx)) return m;
    const triple = switch (ctx.target.result.cpu.arch) {
        .aarch64 => "aarch64-linux-gnu",
        else => "x86_64-linux-gnu",
    };
    // After zig's own libc headers, so only the library headers come from here.
    m.addAfterIncludePath(.{ .cwd_relative = b.fmt("/usr/include/{s}", .{triple}) });
    m.addAfterIncludePath(.{ .cwd_relative = "/usr/include" });
    m.addLibraryPath(.{ .cwd_relative = b.fmt("/usr/lib/{s}", .{triple}) });
    if (ctx.target.result.abi == .gnu) m.addRPathSpecial(b.fmt("/usr/lib/{s}", .{triple}));
    return m;
}

/// The host's architecture and ABI: pkg-config describes its libraries.
fn isNative(ctx: Ctx) bool {
    const t = ctx.target.result;
    const host = ctx.b.graph.host.result;
    return t.cpu.arch == host.cpu.arch and t.abi == host.abi;
}

fn linkSystem(ctx: Ctx, m: *std.Build.Module, link: Link) void {
    const b = ctx.b;
    if (ctx.target.result.abi == .musl) {
        // Debian ships no musl zstd; its glibc-built libzstd.a links into a
        // static musl program (only the pure layers are built for musl).
        // Debian's libzstd.pc names a wrong libdir: ask the C compiler.
        m.addObjectFile(.{ .cwd_relative = ccFile(b, "libzstd.a", &libzstd_a_path) });
        return;
    }
    // The host's pkg-config knows only the host's libraries; a foreign
    // target finds them in its multiarch directory (cModule).
    for (systemLibs(ctx, link)) |l| {
        if (isNative(ctx)) {
            m.linkSystemLibrary(l.module, .{ .use_pkg_config = .force });
        } else {
            m.linkSystemLibrary(l.lib, .{ .use_pkg_config = .no });
        }
    }
}

var libzstd_a_path: ?[]const u8 = null;

/// Where the system C compiler finds library file @p name
/// (`cc -print-file-name`), asked once per build into @p cache.
fn ccFile(b: *std.Build, name: []const u8, cache: *?[]const u8) []const u8 {
    if (cache.* == null)
        cache.* = std.mem.trim(u8, b.run(&.{ "cc", b.fmt("-print-file-name={s}", .{name}) }), " \t\r\n");
    return cache.*.?;
}

/// The shared library, linked by `zig cc -shared` from the PIC objects of a
/// static build: zig's Compile step names the soname after the major version
/// only, and this one carries major.minor (docs/abi.md). src/stackpulse.map
/// gives every public symbol its version and keeps the rest local.
const SharedLib = struct {
    bin: std.Build.LazyPath,
    step: *std.Build.Step,
};

fn addSharedLib(ctx: Ctx) SharedLib {
    const b = ctx.b;
    const pic = addLib(ctx, "stackpulse-pic", .dynamic, all_srcs);
    const t = ctx.target.result;
    const triple = b.fmt("{t}-linux-{t}", .{ t.cpu.arch, t.abi });
    const run = b.addSystemCommand(&.{ b.graph.zig_exe, "cc", "-shared" });
    run.setName(b.fmt("link {s} ({s})", .{ shared_file, triple }));
    // Native: zig cc finds the host's libraries where the system does; a
    // foreign target takes them from its multiarch directory (cModule).
    if (!isNative(ctx)) run.addArgs(&.{ "-target", b.fmt("{s}.{f}", .{ triple, t.os.version_range.linux.glibc }), b.fmt("-L/usr/lib/{t}-linux-gnu", .{t.cpu.arch}) });
    // A build-id: debuggers, debuginfod and our own symbol cache key on it.
    run.addArgs(&.{ "-Wl,-soname," ++ soname, "-Wl,--no-undefined-version", "-Wl,-z,defs", "-Wl,--build-id=sha1" });
    run.addPrefixedFileArg("-Wl,--version-script,", b.path("src/stackpulse.map"));
    run.addArg("-Wl,--whole-archive");
    run.addArtifactArg(pic);
    run.addArg("-Wl,--no-whole-archive");
    for (systemLibs(ctx, .full)) |l| run.addArg(b.fmt("-l{s}", .{l.lib}));
    run.addArgs(&.{ "-lc", "-lm" });
    const bin = run.addPrefixedOutputFileArg("-o", shared_file);
    return .{ .bin = bin, .step = &run.step };
}

/// Installs @p lib as shared_file with the soname and development symlinks
/// (libstackpulse.so.0.3 and libstackpulse.so) beside it.
fn installShared(b: *std.Build, lib: SharedLib, dir: std.Build.InstallDir) *std.Build.Step {
    const file = b.addInstallFileWithDir(lib.bin, dir, shared_file);
    const links = b.addSystemCommand(&.{ "sh", "-c", "cd \"$0\" && ln -sf " ++ shared_file ++ " " ++ soname ++ " && ln -sf " ++ soname ++ " libstackpulse.so" });
    links.setName(b.fmt("symlink {s}", .{soname}));
    const dir_path: std.Build.LazyPath = switch (dir) {
        .custom => |sub| .{ .relative = .{ .base = .install_prefix, .sub_path = sub } },
        else => .{ .relative = .{ .base = .install_lib } },
    };
    links.addDirectoryArg(dir_path);
    links.has_side_effects = true;
    links.step.dependOn(&file.step);
    return &links.step;
}

/// c_flags plus "." as the debug info's compilation directory (the
/// checkout's path otherwise; the file names are relative to it), so the
/// libraries' bytes do not depend on where the tree is (.ci/repro.sh).
fn libFlags(b: *std.Build) []const []const u8 {
    return std.mem.concat(b.allocator, []const u8, &.{ &c_flags, &.{"-fdebug-compilation-dir=."} }) catch @panic("OOM");
}

fn addLib(ctx: Ctx, name: []const u8, linkage: std.builtin.LinkMode, srcs: []const []const u8) *std.Build.Step.Compile {
    const m = cModule(ctx);
    m.addCSourceFiles(.{ .files = srcs, .flags = libFlags(ctx.b) });
    // UB checks (kept in Debug and ReleaseSafe) trap instead of calling
    // zig's UBSan runtime, so the installed libraries link with any C
    // toolchain (full reports come from the clang-14 `sanitize` step).
    if (ctx.optimize == .debug or ctx.optimize == .safe) m.sanitize_c = .trap;
    // .dynamic asks for the PIC objects of the shared library, archived
    // (addSharedLib links them).
    if (linkage == .dynamic) m.pic = true;
    return ctx.b.addLibrary(.{ .name = name, .linkage = .static, .root_module = m });
}

/// An executable from C files plus a library (static: internal sp_* names
/// stay reachable for tests).
fn addProgram(ctx: Ctx, name: []const u8, srcs: []const []const u8, lib: *std.Build.Step.Compile, link: Link) *std.Build.Step.Compile {
    const m = cModule(ctx);
    m.addIncludePath(ctx.b.path("tests/support"));
    m.addCSourceFiles(.{ .files = srcs, .flags = &c_flags });
    m.linkLibrary(lib);
    linkSystem(ctx, m, link);
    if (ctx.target.result.abi == .musl) {
        return ctx.b.addExecutable(.{ .name = name, .root_module = m, .linkage = .static });
    }
    return ctx.b.addExecutable(.{ .name = name, .root_module = m });
}

/// True when @p name contains one of the comma-separated @p only (or no filter).
fn selected(only: ?[]const u8, name: []const u8) bool {
    const list = only orelse return true;
    var it = std.mem.tokenizeScalar(u8, list, ',');
    while (it.next()) |want| if (std.mem.indexOf(u8, name, want) != null) return true;
    return false;
}

/// "tests/format/test_spool.c" -> "format_test_spool".
fn testName(b: *std.Build, src: []const u8) []const u8 {
    const dir = std.fs.path.basename(std.fs.path.dirname(src) orelse ".");
    return b.fmt("{s}_{s}", .{ dir, std.fs.path.stem(src) });
}

fn addTest(ctx: Ctx, src: []const u8, lib: *std.Build.Step.Compile, link: Link) *std.Build.Step.Compile {
    return addProgram(ctx, testName(ctx.b, src), &.{ src, "tests/support/harness.c" }, lib, link);
}

/// The plain replay executable of fuzz harness @name over corpus/NAME:
/// pure harnesses link @p lib = the pure layers (.pure), OS harnesses the
/// whole library (.oracle).
fn addReplay(ctx: Ctx, name: []const u8, lib: *std.Build.Step.Compile, link: Link) *std.Build.Step.Compile {
    const b = ctx.b;
    const m = cModule(ctx);
    m.addIncludePath(b.path("tests/support"));
    m.addCSourceFiles(.{ .files = &.{b.fmt("fuzz/{s}.c", .{name})}, .flags = &c_flags });
    m.addCSourceFiles(.{ .files = &.{"fuzz/replay_main.c"}, .flags = &(c_flags ++ [_][]const u8{b.fmt("-DSP_FUZZ_NAME=\"{s}\"", .{name})}) });
    m.linkLibrary(lib);
    linkSystem(ctx, m, link);
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

/// Preprocessor defines of the optional features, for .ci/clang-build.sh.
fn spDefines(ctx: Ctx) []const []const u8 {
    const b = ctx.b;
    var list: std.ArrayList([]const u8) = .empty;
    if (ctx.debuginfod) list.append(b.allocator, "-DSP_HAVE_DEBUGINFOD=1") catch @panic("OOM");
    if (ctx.curl) list.append(b.allocator, "-DSP_HAVE_CURL=1") catch @panic("OOM");
    return list.items;
}

/// Bash arrays of every list, for .ci/clang-build.sh.
fn manifestText(ctx: Ctx) []const u8 {
    const b = ctx.b;
    const Entry = struct { key: []const u8, items: []const []const u8 };
    const entries = [_]Entry{
        .{ .key = "SP_PURE_LAYERS", .items = &sources.pure_layers },
        .{ .key = "SP_PURE_SRCS", .items = pure_srcs },
        .{ .key = "SP_OS_SRCS", .items = os_srcs },
        .{ .key = "SP_TEST_SUPPORT", .items = &test_lists.support },
        .{ .key = "SP_PURE_TESTS", .items = &test_lists.pure },
        .{ .key = "SP_OS_TESTS", .items = &test_lists.os },
        .{ .key = "SP_FUZZ", .items = harnesses },
        .{ .key = "SP_FUZZ_OS", .items = os_harnesses },
        .{ .key = "SP_EXAMPLES", .items = examples },
        .{ .key = "SP_CFLAGS", .items = &c_flags },
        .{ .key = "SP_PURE_LIBS", .items = systemLibFlags(ctx, .pure) },
        .{ .key = "SP_LIBS", .items = systemLibFlags(ctx, .full) },
        .{ .key = "SP_TEST_LIBS", .items = systemLibFlags(ctx, .oracle) },
        .{ .key = "SP_DEFINES", .items = spDefines(ctx) },
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
