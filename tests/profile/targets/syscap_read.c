/* syscap_read: decodes a Sysprof capture with Sysprof's own libraries
 * (libsysprof-capture's reader, libsysprof-4's symbol resolvers and call
 * graph) and prints what they see, one line per item, for test_syscap.c.
 *
 *   syscap_read FILE
 *
 *   header START END CAPTURE_TIME
 *   process PID CMDLINE
 *   map PID START END FILE
 *   meta PID ID TEXT
 *   jitmap ADDRESS NAME
 *   file PATH BYTES
 *   sample TIME PID TID NADDRS<TAB>NAME<TAB>NAME...
 *   mark TIME PID DURATION GROUP<TAB>NAME<TAB>MESSAGE
 *   callgraph ok | empty | failed: WHY
 *   end FRAMES BYTES
 *
 * A sample's names are what Sysprof's call graph builds from its callchain
 * (sysprof-callgraph-profile.c of 3.46): leaf first, each address resolved
 * by the capture, kernel, ELF and JITMAP resolvers in that order in the
 * context of the last perf context marker, "- - kernel - -" where the chain
 * switches from kernel to user context, then the process root "[CMDLINE]".
 * A name carries "@TAG" when its resolver tagged it ("Kernel"); an address
 * no resolver names reads "?ADDRESS" (the call graph drops it). BYTES
 * counts the header and the frames read: the file's size when the reader
 * read it to the end. Exits 1 when a frame does not decode. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sysprof.h>

static void generated(GObject *obj, GAsyncResult *res, gpointer data)
{
	GError *err = NULL;
	const char **state = data;
	if (!sysprof_profile_generate_finish(SYSPROF_PROFILE(obj), res, &err)) {
		static char why[256];
		snprintf(why, sizeof(why), "failed: %s", err ? err->message : "?");
		*state = why;
		g_clear_error(&err);
	} else {
		*state = sysprof_callgraph_profile_is_empty(SYSPROF_CALLGRAPH_PROFILE(obj))
		                 ? "empty"
		                 : "ok";
	}
}

/* Runs the call graph the UI shows over the whole capture. */
static const char *callgraph(SysprofCaptureReader *reader)
{
	const char *state = NULL;
	SysprofProfile *prof = sysprof_callgraph_profile_new();
	sysprof_profile_set_reader(prof, reader);
	sysprof_profile_generate(prof, NULL, generated, &state);
	while (!state)
		g_main_context_iteration(NULL, TRUE);
	g_object_unref(prof);
	return state;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: syscap_read FILE\n");
		return 2;
	}
	SysprofCaptureReader *reader = sysprof_capture_reader_new(argv[1]);
	if (!reader) {
		perror(argv[1]);
		return 1;
	}
	printf("header %lld %lld %s\n", (long long)sysprof_capture_reader_get_start_time(reader),
	       (long long)sysprof_capture_reader_get_end_time(reader),
	       sysprof_capture_reader_get_time(reader));

	SysprofSymbolResolver *resolvers[4] = {
		sysprof_capture_symbol_resolver_new(),
		sysprof_kernel_symbol_resolver_new(),
		sysprof_elf_symbol_resolver_new(),
		sysprof_jitmap_symbol_resolver_new(),
	};
	for (int i = 0; i < 4; i++) {
		sysprof_capture_reader_reset(reader);
		sysprof_symbol_resolver_load(resolvers[i], reader);
	}
	sysprof_capture_reader_reset(reader);

	/* Process roots as the call graph names them: "[CMDLINE]", first wins. */
	GHashTable *cmdlines = g_hash_table_new_full(NULL, NULL, NULL, g_free);
	SysprofCaptureFrameType type;
	while (sysprof_capture_reader_peek_type(reader, &type)) {
		if (type != SYSPROF_CAPTURE_FRAME_PROCESS) {
			if (!sysprof_capture_reader_skip(reader))
				break;
			continue;
		}
		const SysprofCaptureProcess *pr = sysprof_capture_reader_read_process(reader);
		if (!pr)
			break;
		if (!g_hash_table_contains(cmdlines, GINT_TO_POINTER(pr->frame.pid)))
			g_hash_table_insert(cmdlines, GINT_TO_POINTER(pr->frame.pid),
			                    g_strdup_printf("[%s]", pr->cmdline));
	}
	sysprof_capture_reader_reset(reader);

	long frames = 0, bytes = (long)sizeof(SysprofCaptureFileHeader);
	int bad = 0;
	SysprofCaptureFrame fr;
	while (!bad && sysprof_capture_reader_peek_frame(reader, &fr)) {
		frames++;
		bytes += fr.len;
		switch (fr.type) {
		case SYSPROF_CAPTURE_FRAME_PROCESS: {
			const SysprofCaptureProcess *pr =
			        sysprof_capture_reader_read_process(reader);
			if (!pr) {
				bad = 1;
				break;
			}
			printf("process %d %s\n", pr->frame.pid, pr->cmdline);
			break;
		}
		case SYSPROF_CAPTURE_FRAME_MAP: {
			const SysprofCaptureMap *m = sysprof_capture_reader_read_map(reader);
			if (!m) {
				bad = 1;
				break;
			}
			printf("map %d %" PRIx64 " %" PRIx64 " %s\n", m->frame.pid, m->start,
			       m->end, m->filename);
			break;
		}
		case SYSPROF_CAPTURE_FRAME_METADATA: {
			const SysprofCaptureMetadata *md =
			        sysprof_capture_reader_read_metadata(reader);
			if (!md) {
				bad = 1;
				break;
			}
			printf("meta %d %s %s\n", md->frame.pid, md->id, md->metadata);
			break;
		}
		case SYSPROF_CAPTURE_FRAME_JITMAP: {
			const SysprofCaptureJitmap *jm = sysprof_capture_reader_read_jitmap(reader);
			if (!jm) {
				bad = 1;
				break;
			}
			SysprofCaptureJitmapIter it;
			SysprofCaptureAddress addr;
			const char *name;
			sysprof_capture_jitmap_iter_init(&it, jm);
			while (sysprof_capture_jitmap_iter_next(&it, &addr, &name))
				printf("jitmap %" PRIx64 " %s\n", addr, name);
			break;
		}
		case SYSPROF_CAPTURE_FRAME_FILE_CHUNK: {
			const SysprofCaptureFileChunk *fc =
			        sysprof_capture_reader_read_file(reader);
			if (!fc) {
				bad = 1;
				break;
			}
			printf("file %s %u%s\n", fc->path, (unsigned)fc->len,
			       fc->is_last ? " last" : "");
			break;
		}
		case SYSPROF_CAPTURE_FRAME_MARK: {
			const SysprofCaptureMark *mk = sysprof_capture_reader_read_mark(reader);
			if (!mk) {
				bad = 1;
				break;
			}
			char group[sizeof(mk->group) + 1];
			memcpy(group, mk->group, sizeof(mk->group));
			group[sizeof(mk->group)] = '\0';
			printf("mark %lld %d %lld %s\t%s\t%s\n", (long long)mk->frame.time,
			       mk->frame.pid, (long long)mk->duration, group, mk->name,
			       mk->message);
			break;
		}
		case SYSPROF_CAPTURE_FRAME_SAMPLE: {
			const SysprofCaptureSample *s = sysprof_capture_reader_read_sample(reader);
			if (!s) {
				bad = 1;
				break;
			}
			printf("sample %lld %d %d %u", (long long)s->frame.time, s->frame.pid,
			       s->tid, (unsigned)s->n_addrs);
			SysprofAddressContext last = SYSPROF_ADDRESS_CONTEXT_NONE;
			for (unsigned i = 0; i < s->n_addrs; i++) {
				SysprofAddress a = s->addrs[i];
				SysprofAddressContext ctx = SYSPROF_ADDRESS_CONTEXT_NONE;
				if (sysprof_address_is_context_switch(a, &ctx)) {
					if (last)
						printf("\t%s",
						       sysprof_address_context_to_string(last));
					last = ctx;
					continue;
				}
				if (last == SYSPROF_ADDRESS_CONTEXT_NONE)
					last = SYSPROF_ADDRESS_CONTEXT_USER;
				char *name = NULL;
				GQuark tag = 0;
				for (int r = 0; r < 4 && !name; r++)
					name = sysprof_symbol_resolver_resolve_with_context(
					        resolvers[r], (guint64)s->frame.time, s->frame.pid,
					        last, a, &tag);
				if (!name)
					printf("\t?%" PRIx64, a);
				else if (tag)
					printf("\t%s@%s", name, g_quark_to_string(tag));
				else
					printf("\t%s", name);
				g_free(name);
			}
			if (last && last != SYSPROF_ADDRESS_CONTEXT_USER)
				printf("\t%s", sysprof_address_context_to_string(last));
			const char *root =
			        g_hash_table_lookup(cmdlines, GINT_TO_POINTER(s->frame.pid));
			if (root)
				printf("\t%s\n", root);
			else
				printf("\t[Process %d]\n", s->frame.pid);
			break;
		}
		default:
			if (!sysprof_capture_reader_skip(reader))
				bad = 1;
			break;
		}
	}
	if (bad)
		printf("bad frame %ld of type %d\n", frames, (int)fr.type);
	else
		printf("callgraph %s\n", callgraph(reader));
	printf("end %ld %ld\n", frames, bytes);
	for (int i = 0; i < 4; i++)
		g_object_unref(resolvers[i]);
	g_hash_table_unref(cmdlines);
	sysprof_capture_reader_unref(reader);
	return bad;
}
