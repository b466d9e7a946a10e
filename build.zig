const std = @import("std");
const sources = @import("src/sources.zig");

pub fn build(b: *std.Build) void {
    const target = b.standardTargetOptions(.{});
    const optimize = b.standardOptimizeOption(.{});
    const mod = b.createModule(.{ .target = target, .optimize = optimize, .link_libc = true });
    mod.addIncludePath(b.path("include"));
    mod.addCSourceFiles(.{ .files = &sources.common, .flags = &.{ "-std=c17", "-Wall", "-Wextra", "-Wpedantic", "-Wshadow", "-Wconversion", "-Werror", "-fvisibility=hidden" } });
    const lib = b.addLibrary(.{ .name = "stackpulse", .root_module = mod, .linkage = .static });
    b.installArtifact(lib);
}
