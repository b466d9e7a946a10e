/* Constants of spool format version 1, shared by the encoder and decoder.
 * docs/spool-format.md is the normative description; keep them in step. */
#ifndef SP_FORMAT_SPOOL_FORMAT_H
#define SP_FORMAT_SPOOL_FORMAT_H

#include <stdint.h>

#define SP_SPOOL_VERSION 1u

/* File header: magic[8], le16 version, le16 flags, le32 reserved. */
#define SP_FILE_MAGIC_BYTES                                                                        \
	{                                                                                          \
		0x89, 'S', 'P', 'L', '\r', '\n', 0x1a, '\n'                                        \
	}
#define SP_FILE_MAGIC_LEN  8u
#define SP_FILE_HEADER_LEN 16u

/* Chunk header, 32 bytes:
 *  0 le32 magic "SPCK"     4 u8 codec        5 u8 flags     6 le16 reserved
 *  8 le32 sequence        12 le32 stored_len 16 le32 raw_len
 * 20 le64 base_time_ns    28 le32 crc32c (header bytes 0..27, then payload) */
#define SP_CHUNK_MAGIC      0x4b435053u /* "SPCK" */
#define SP_CHUNK_HEADER_LEN 32u
#define SP_CHUNK_CRC_OFFSET 28u

/* Footer, 32 bytes, the last bytes of a complete file:
 *  0 le32 magic "SPEN"   4 le32 chunk_count   8 le64 sample_count
 * 16 le64 footer_offset 24 le32 reserved     28 le32 crc32c (bytes 0..27) */
#define SP_FOOTER_MAGIC 0x4e455053u /* "SPEN" */
#define SP_FOOTER_LEN   32u

enum sp_codec {
	SP_CODEC_NONE = 0,
	SP_CODEC_ZSTD = 1,
};

/* Limits. A reader rejects anything beyond them; the writer never produces it. */
#define SP_CHUNK_RAW_MAX       (8u << 20) /* Decompressed bytes per chunk. */
#define SP_CHUNK_BYTES_MAX     (4u << 20) /* Largest chunk_bytes a writer uses. */
#define SP_CHUNK_BYTES_DEFAULT (1u << 20)
#define SP_RAW_TOTAL_FLOOR     (16ull << 20) /* Decompressed total: max(floor, */
#define SP_RAW_TOTAL_RATIO     256u          /*   ratio x file size). */
#define SP_TABLE_BYTES_FLOOR   (32ull << 20) /* Reader table memory: max(floor, */
#define SP_TABLE_BYTES_RATIO   64u           /*   ratio x file size). */
#define SP_PATH_MAX            4096u         /* Module paths. */
#define SP_NAME_MAX            65536u        /* Every other string. */
#define SP_BUILD_ID_MAX        64u
#define SP_STACK_DEPTH_MAX     1024u
#define SP_TABLE_MAX           (1u << 28)   /* Entries of any one table. */
#define SP_SYMTAB_MAX          (256u << 20) /* One embedded symbol table. */
#define SP_SYMTAB_PART_MAX     (1u << 20)   /* Bytes per SYMTAB record. */
#define SP_STATS_MAX           256u         /* Distinct stats keys. */

/* Record types (varint). Unknown types are skipped by their length. */
enum sp_record_type {
	SP_REC_META = 1,
	SP_REC_PROCESS = 2,
	SP_REC_EXEC = 3,
	SP_REC_THREAD = 4,
	SP_REC_COMM = 5,
	SP_REC_EXIT = 6,
	SP_REC_FORK = 7,
	SP_REC_LOST = 8,
	SP_REC_MODULE = 9,
	SP_REC_MAPPING = 10,
	SP_REC_PYCODE = 11,
	SP_REC_FRAME = 12,
	SP_REC_STACK = 13,
	SP_REC_SAMPLES = 14, /* A block of samples, stored by column. */
	SP_REC_KSYM = 15,
	SP_REC_JITSYM = 16,
	SP_REC_SYMTAB = 17,
	SP_REC_STATS = 18,
	SP_REC_OFFCPU = 19, /* A block of off-CPU intervals, stored by column. */
	SP_REC_RTNAME = 20, /* A thread's name in its language runtime. */
};

/* RTNAME runtimes (a value a reader does not know is kept as its number). */
#define SP_RUNTIME_CPYTHON 1u /* threading.Thread.name */

/* Columns of a SAMPLES record, in order: time delta (signed), thread,
 * stack, weight, cpu. */
#define SP_SAMPLE_COLUMNS 5
/* Smallest encoding of one sample (one byte per column). */
#define SP_SAMPLE_MIN_BYTES 5

/* Columns of an OFFCPU record, in order: start time delta (signed), thread,
 * stack, duration, state (enum stackpulse_offcpu_state); then, optional
 * together (both or neither), merged (intervals folded into the row) and
 * merged_ns (their time). */
#define SP_OFFCPU_COLUMNS     5
#define SP_OFFCPU_ALL_COLUMNS 7
#define SP_OFFCPU_MIN_BYTES   5
#define SP_COLUMNS_MAX        7 /* Most columns of a block. */
/* Largest META off_cpu_method a reader knows (stackpulse_offcpu_method). */
#define SP_OFFCPU_METHOD_MAX 2u

/* Keys of STATS records (key/value varint pairs; unknown keys are kept). */
enum sp_stat_key {
	SP_STAT_TRUNCATED_STACKS = 1,
	SP_STAT_PYTHON_SAMPLES = 2,
	SP_STAT_UNWIND_ERRORS = 3,
	SP_STAT_EVENT = 4, /* stackpulse_event actually used. */
	SP_STAT_PYTHON_FRAMES = 5,
	SP_STAT_LOST = 6,              /* Samples lost; with a thread: that thread's. */
	SP_STAT_RING_BYTES = 7,        /* Data bytes of all perf rings. */
	SP_STAT_STACK_COPY = 8,        /* Stack copy bytes at the end. */
	SP_STAT_COPY_RESIZES = 9,      /* Re-opens with another copy size. */
	SP_STAT_OFFCPU_INTERVALS = 10, /* Off-CPU intervals written. */
	SP_STAT_OFFCPU_NO_STACK = 11,  /* Of them: without a stack. */
	SP_STAT_OFFCPU_DROPPED = 12,   /* Switch-ins without a switch-out. */
	SP_STAT_OFFCPU_MERGED = 13,    /* Intervals folded into a later row. */
	SP_STAT_FAILED_RECORDS = 14,   /* Records dropped after an error of their own. */
	SP_STAT_UNFOLLOWED = 15,       /* Processes given up after an error of their own. */
};

#endif
