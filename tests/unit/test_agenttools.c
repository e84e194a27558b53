/* The agent's tools without I/O: the declarations the model sees, the
 * argument checks (errors the model can act on), the working copy's edits
 * and the problem as text. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "daemon/avod/agenttools.h"
#include "daemon/avod/llm.h"

static json_t *tool_named(json_t *tools, const char *name)
{
    size_t i;
    json_t *t;
    json_array_foreach(tools, i, t)
    {
        if (!strcmp(json_string_value(json_object_get(t, "name")), name))
            return t;
    }
    return NULL;
}

static void test_declarations(void **state)
{
    (void)state;
    json_t *tools = avo_agenttools_schema();
    assert_non_null(tools);
    static const char *const names[] = {"problem",          "lineage",        "read_candidate", "diff",
                                        "search_knowledge", "read_knowledge", "write_source",   "edit_source",
                                        "compile",          "disassemble",    "evaluate",       "profile",
                                        "microbenchmark",   "commit",         "give_up"};
    assert_int_equal(json_array_size(tools), sizeof names / sizeof names[0]);
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        json_t *t = tool_named(tools, names[i]);
        assert_non_null(t);
        assert_true(strlen(json_string_value(json_object_get(t, "description"))) > 20);
        json_t *s = json_object_get(t, "schema");
        assert_string_equal(json_string_value(json_object_get(s, "type")), "object");
        assert_true(json_is_false(json_object_get(s, "additionalProperties")));
        /* the same row names what runs it */
        assert_non_null(avo_agenttools_handler(names[i]));
    }
    assert_null(avo_agenttools_handler("rm_rf"));
    assert_null(avo_agenttools_handler(NULL));
    json_t *edit = json_object_get(tool_named(tools, "edit_source"), "schema");
    assert_int_equal(json_array_size(json_object_get(edit, "required")), 2);
    json_t *lang = json_object_get(
        json_object_get(json_object_get(tool_named(tools, "microbenchmark"), "schema"), "properties"), "language");
    assert_int_equal(json_array_size(json_object_get(lang, "enum")), 2);

    /* The declarations travel in both wire formats. */
    for (int kind = 0; kind < 2; kind++) {
        avo_llm_provider p;
        char err[256];
        json_t *cfg = json_pack("{s:s,s:s,s:s}", "name", "t", "kind", kind ? "anthropic" : "openai", "model", "m");
        assert_int_equal(avo_llm_provider_parse(cfg, &p, err, sizeof err), 0);
        json_decref(cfg);
        json_t *conv = json_pack("[{s:s,s:s}]", "role", "user", "text", "go");
        avo_llm_request r;
        assert_int_equal(avo_llm_request_build(&p, "k", conv, tools, &r, err, sizeof err), 0);
        assert_non_null(strstr(r.body, "edit_source"));
        assert_non_null(strstr(r.body, kind ? "input_schema" : "\"parameters\""));
        avo_llm_request_free(&r);
        json_decref(conv);
    }
    json_decref(tools);
}

static void want_check(const char *tool, const char *args_json, int want_rc, const char *needle)
{
    char err[1024] = "";
    json_t *args = args_json ? json_loads(args_json, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL) : NULL;
    int rc = avo_agenttools_check(tool, args, err, sizeof err);
    json_decref(args);
    if (rc != want_rc)
        fail_msg("%s %s: rc %d, wanted %d (%s)", tool, args_json ? args_json : "(none)", rc, want_rc, err);
    if (needle && !strstr(err, needle))
        fail_msg("%s %s: '%s' lacks '%s'", tool, args_json ? args_json : "(none)", err, needle);
}

static void test_checks(void **state)
{
    (void)state;
    want_check("problem", NULL, 0, NULL);
    want_check("problem", "{}", 0, NULL);
    want_check("edit_source", "{\"search\": \"a\", \"replace\": \"\"}", 0, NULL);
    want_check("commit", "{\"candidate\": 12, \"notes\": \"BN 256\"}", 0, NULL);
    want_check("microbenchmark", "{\"source\": \"int main(){}\", \"language\": \"cuda\"}", 0, NULL);

    want_check("rm_rf", "{}", -ENOENT, "there is no tool 'rm_rf'; the tools are: problem, lineage,");
    want_check("commit", "[1]", -EINVAL,
               "commit: the arguments must be a JSON object; arguments: candidate "
               "(integer, required), notes (string, required)");
    want_check("commit", "{\"candidate\": 3, \"notes\": \"x\", \"force\": true}", -EINVAL,
               "commit: unknown argument 'force'");
    want_check("edit_source", "{\"search\": \"a\"}", -EINVAL,
               "edit_source: missing argument 'replace' (string): its replacement");
    want_check("commit", "{\"candidate\": \"12\", \"notes\": \"x\"}", -EINVAL,
               "commit: 'candidate' must be an integer from 1 to");
    want_check("commit", "{\"candidate\": 1.5, \"notes\": \"x\"}", -EINVAL, "'candidate' must be an integer");
    want_check("lineage", "{\"limit\": 1000}", -EINVAL, "lineage: 'limit' must be an integer from 1 to 200");
    want_check("write_source", "{\"source\": 5}", -EINVAL, "write_source: 'source' must be a string");
    want_check("write_source", "{\"source\": \"\"}", -EINVAL, "'source' is 0 bytes; it must be 1 to 1048576");
    want_check("microbenchmark", "{\"source\": \"x\", \"language\": \"rust\"}", -EINVAL,
               "microbenchmark: 'language' must be one of c|cuda, not 'rust'");
    want_check("give_up", "{\"reason\": \"a\\u0000b\"}", -EINVAL, "give_up: 'reason' contains a NUL character");

    /* A huge argument is refused by size, not parsed into the workspace. */
    size_t n = AVO_AGENT_MAX_ARG + 1;
    char *big = malloc(n + 1);
    memset(big, 'x', n);
    big[n] = 0;
    json_t *args = json_pack("{s:s}", "source", big);
    char err[512];
    assert_int_equal(avo_agenttools_check("write_source", args, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "write_source: 'source' is 1048577 bytes; it must be 1 to 1048576"));
    json_decref(args);
    free(big);
}

static void test_working_copy(void **state)
{
    (void)state;
    avo_agenttools_ws w = {0};
    char msg[512];
    assert_int_equal(avo_agenttools_ws_edit(&w, "a", "b", msg, sizeof msg), -EINVAL);
    assert_non_null(strstr(msg, "no working copy yet"));
    assert_int_equal(
        avo_agenttools_ws_write(&w, "int f(void)\n{\n    return 1;\n}\n/* return 1; */\n", msg, sizeof msg), 0);
    assert_int_equal(w.version, 1);
    assert_string_equal(msg, "the working copy is now version 1 (5 lines, 46 bytes)");

    /* twice: refused, with where, and nothing changes */
    assert_int_equal(avo_agenttools_ws_edit(&w, "return 1;", "return 2;", msg, sizeof msg), -EEXIST);
    assert_non_null(strstr(msg, "occurs 2 times (lines 3 and 5)"));
    assert_int_equal(w.version, 1);
    /* absent: refused */
    assert_int_equal(avo_agenttools_ws_edit(&w, "return  1;", "return 2;", msg, sizeof msg), -ENOENT);
    assert_non_null(strstr(msg, "not in the working copy (version 1)"));
    assert_int_equal(avo_agenttools_ws_edit(&w, "", "x", msg, sizeof msg), -EINVAL);
    /* once, with context: done */
    assert_int_equal(avo_agenttools_ws_edit(&w, "    return 1;\n}", "    return 2;\n}", msg, sizeof msg), 0);
    assert_string_equal(msg, "edited at line 3; the working copy is now version 2 (5 lines)");
    assert_string_equal(w.src, "int f(void)\n{\n    return 2;\n}\n/* return 1; */\n");
    /* a deletion, and overlapping matches count as two */
    assert_int_equal(avo_agenttools_ws_edit(&w, "/* return 1; */\n", "", msg, sizeof msg), 0);
    assert_string_equal(w.src, "int f(void)\n{\n    return 2;\n}\n");
    assert_int_equal(avo_agenttools_ws_write(&w, "aaa", msg, sizeof msg), 0);
    assert_int_equal(avo_agenttools_ws_edit(&w, "aa", "b", msg, sizeof msg), -EEXIST);
    assert_int_equal(avo_agenttools_ws_write(&w, "", msg, sizeof msg), -EINVAL);
    assert_string_equal(w.src, "aaa");
    avo_agenttools_ws_free(&w);
    assert_null(w.src);
}

static void test_problem_text(void **state)
{
    (void)state;
    avo_problem p;
    char err[512];
    assert_int_equal(avo_problem_load(&p, "kernels/cpu/sgemm", err, sizeof err), 0);
    char *t = avo_agenttools_problem_text(&p);
    assert_non_null(t);
    assert_non_null(strstr(t, "Problem cpu/sgemm (cpu backend)."));
    assert_non_null(strstr(t, "    int sgemm(void *const *tensors, const int64_t *sizes);\n"));
    assert_non_null(strstr(t, "tensors[2] C: f32, output, shape [M, N]"));
    assert_non_null(strstr(t, "Score: GFLOP/s"));
    assert_non_null(strstr(t, "f32 rel_l2 <= "));
    assert_non_null(strstr(t, "Seed: seed.c.\n"));
    assert_non_null(strstr(t, "    ORDER in {0, 1}, default 0\n"));
    free(t);
    avo_problem_free(&p);

    assert_int_equal(avo_problem_load(&p, "kernels/gemm_bf16", err, sizeof err), 0);
    assert_int_equal(avo_problem_use_seed(&p, "sm90", err, sizeof err), 0);
    t = avo_agenttools_problem_text(&p);
    assert_non_null(strstr(t, "extern \"C\" int gemm_bf16(void *const *tensors, const int64_t *sizes, "
                              "cudaStream_t stream);"));
    assert_non_null(strstr(t, "    8192: M=8192 N=8192 K=8192\n"));
    assert_non_null(strstr(t, "Seed: seed_sm90.cu (the package's seed 'sm90')."));
    assert_non_null(strstr(t, "    CONSUMERS in {1, 2}, default 2\n"));
    assert_non_null(strstr(t, "    constraint: BM % (64 * CONSUMERS) == 0\n"));
    free(t);
    avo_problem_free(&p);
}

/* Shaped like cuobjdump -sass output (CUDA 12/13): a header per kernel,
 * instruction lines with their offset and encoding comments, encoding-only
 * continuation lines. */
static const char sass[] =
    "\n\tcode for sm_90a\n"
    "\t\tFunction : _Z8gemm_tmaPK13__nv_bfloat16\n"
    "\t.headerflags\t@\"EF_CUDA_TEXMODE_UNIFIED\"\n"
    "        /*0000*/                   LDC R1, c[0x0][0x28] ;                      /* 0x00000a00ff017b82 */\n"
    "                                                                                /* 0x000fe40000000800 */\n"
    "        /*0010*/                   USETMAXREG.DEALLOC.CTAPOOL 0x28 ;           /* 0x00000028000079c8 */\n"
    "        /*0020*/                   HGMMA.64x256x16.F32.BF16 R24, gdesc[UR4], RZ, !UPT ; /* 0x0 */\n"
    "        /*0030*/                   HGMMA.64x256x16.F32.BF16 R24, gdesc[UR8], R24 ;   /* 0x0 */\n"
    "        /*0040*/                   STL.64 [R1], R24 ;                           /* 0x0 */\n"
    "\t\t..........\n"
    "\t\tFunction : _Z5plainPf\n"
    "        /*0000*/                   LDL R2, [R1] ;                              /* 0x0 */\n"
    "        /*0010*/                   EXIT ;                                      /* 0x0 */\n";

static const char objdump_text[] = "\ncand.so:     file format elf64-x86-64\n\nDisassembly of section .text:\n\n"
                                   "0000000000001139 <sgemm>:\n"
                                   "    1139:\tpush   %rbp\n"
                                   "    113a:\tvfmadd231ps %ymm1,%ymm2,%ymm0\n"
                                   "    1140:\tret\n"
                                   "\n0000000000001150 <helper>:\n"
                                   "    1150:\tvfmadd231ps %ymm3,%ymm4,%ymm5\n"
                                   "    1156:\tret\n";

static void test_disasm_filter(void **state)
{
    (void)state;
    char *out = NULL, err[300];
    /* Matching lines, grouped by kernel, encodings cut off. */
    assert_int_equal(avo_agenttools_disasm_filter(sass, "HGMMA|LDL|STL", NULL, &out, err, sizeof err), 0);
    assert_non_null(strstr(out, "4 instructions match"));
    assert_non_null(strstr(out, "== _Z8gemm_tmaPK13__nv_bfloat16\n"));
    assert_non_null(strstr(out, "== _Z5plainPf\n"));
    assert_non_null(strstr(out, "HGMMA.64x256x16.F32.BF16 R24, gdesc[UR4], RZ, !UPT ;\n"));
    assert_null(strstr(out, "0x000"));
    assert_null(strstr(out, "USETMAXREG"));
    free(out);
    /* One kernel by a substring of its name. */
    assert_int_equal(avo_agenttools_disasm_filter(sass, "LDL|STL", "plain", &out, err, sizeof err), 0);
    assert_non_null(strstr(out, "1 instruction match"));
    assert_non_null(strstr(out, "LDL R2, [R1]"));
    assert_null(strstr(out, "STL.64"));
    free(out);
    /* No match says where it looked. */
    assert_int_equal(avo_agenttools_disasm_filter(sass, "IMMA", "gemm", &out, err, sizeof err), 0);
    assert_non_null(strstr(out, "no instruction matches /IMMA/ in _Z8gemm_tmaPK13__nv_bfloat16"));
    free(out);
    /* objdump's layout, C functions. */
    assert_int_equal(avo_agenttools_disasm_filter(objdump_text, "vfmadd", "sgemm", &out, err, sizeof err), 0);
    assert_non_null(strstr(out, "== sgemm\n"));
    assert_non_null(strstr(out, "113a:\tvfmadd231ps"));
    assert_null(strstr(out, "1150"));
    free(out);
    /* Errors the model can act on. */
    assert_int_equal(avo_agenttools_disasm_filter(sass, "HGMMA(", NULL, &out, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "not an extended regular expression"));
    assert_int_equal(avo_agenttools_disasm_filter(sass, "HGMMA", "flash", &out, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "no function name contains \"flash\" (2 functions"));
}

static void test_disasm_cap(void **state)
{
    (void)state;
    char *big = NULL, *out = NULL, err[300];
    size_t len = 0;
    FILE *f = open_memstream(&big, &len);
    fprintf(f, "0000000000001000 <k>:\n");
    for (int i = 0; i < AVO_AGENT_DISASM_LINES + 50; i++)
        fprintf(f, "    %x:\tnop\n", 0x1000 + i);
    fclose(f);
    assert_int_equal(avo_agenttools_disasm_filter(big, "nop", NULL, &out, err, sizeof err), 0);
    assert_non_null(strstr(out, "450 instructions match"));
    assert_non_null(strstr(out, "more lines not shown"));
    int lines = 0;
    for (const char *p = out; *p; p++)
        lines += *p == '\n';
    assert_true(lines <= AVO_AGENT_DISASM_LINES + 3);
    free(out);
    free(big);
}

static void test_profile_text(void **state)
{
    (void)state;
    json_t *gpu = json_loads(
        "{\"outcome\":\"ok\",\"configs\":["
        "{\"name\":\"1024\",\"median_s\":0.0001,\"counters\":{\"available\":true,\"passes\":28,"
        "\"source\":\"CUPTI range profiler, AutoRange + KernelReplay\",\"unsupported\":[],"
        "\"kernels\":[{\"range\":\"gemm_tma\",\"metrics\":{\"sm__throughput.avg.pct_of_peak_sustained_elapsed\":41.5}}]"
        "}},"
        "{\"name\":\"8192\",\"median_s\":0.0015,\"counters\":{\"available\":true,\"passes\":28,"
        "\"unsupported\":[\"smsp__foo\"],"
        "\"kernels\":[{\"range\":\"gemm_tma\",\"metrics\":{\"sm__throughput.avg.pct_of_peak_sustained_elapsed\":88.25,"
        "\"gpu__time_duration.sum\":1460000}}]}}]}",
        0, NULL);
    assert_non_null(gpu);
    char *out = NULL, err[300];
    /* Default: the longest configuration. */
    assert_int_equal(avo_agenttools_profile_text(gpu, 7, NULL, &out, err, sizeof err), 0);
    assert_non_null(strstr(out, "candidate 7, configuration 8192"));
    assert_non_null(strstr(out, "kernel 1: gemm_tma"));
    assert_non_null(strstr(out, "sm__throughput.avg.pct_of_peak_sustained_elapsed = 88.25"));
    assert_non_null(strstr(out, "not supported on this GPU: [\"smsp__foo\"]"));
    free(out);
    assert_int_equal(avo_agenttools_profile_text(gpu, 7, "1024", &out, err, sizeof err), 0);
    assert_non_null(strstr(out, "= 41.5"));
    free(out);
    assert_int_equal(avo_agenttools_profile_text(gpu, 7, "4096", &out, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "no configuration \"4096\" (it has: 1024, 8192)"));
    json_decref(gpu);
    /* A CPU without a PMU: no counters, and why. */
    json_t *cpu = json_loads("{\"outcome\":\"ok\",\"configs\":[{\"name\":\"256\",\"median_s\":0.01,\"counters\":null}],"
                             "\"counters\":{\"available\":false,\"reason\":\"perf_event_open(cycles): ENOENT\","
                             "\"events\":[\"task_clock\"]}}",
                             0, NULL);
    assert_int_equal(avo_agenttools_profile_text(cpu, 3, NULL, &out, err, sizeof err), 0);
    assert_non_null(strstr(out, "no hardware counters: perf_event_open(cycles): ENOENT"));
    assert_non_null(strstr(out, "events the worker reads: [\"task_clock\"]"));
    free(out);
    json_decref(cpu);
    /* A profile task's result: no times, so the last configuration by
     * default; the task clock still read where the PMU is not. */
    json_t *prof = json_loads("{\"outcome\":\"ok\",\"mode\":\"profile\",\"configs\":["
                              "{\"name\":\"128\",\"calls\":2,\"counters\":{\"available\":false,\"reason\":\"no "
                              "PMU\",\"task_clock_s\":0.001}},"
                              "{\"name\":\"512\",\"calls\":2,\"counters\":{\"available\":false,\"reason\":\"no "
                              "PMU\",\"task_clock_s\":0.25}}]}",
                              0, NULL);
    assert_int_equal(avo_agenttools_profile_text(prof, 5, NULL, &out, err, sizeof err), 0);
    assert_non_null(strstr(out, "candidate 5, configuration 512 (profile run, 2 checked calls)"));
    assert_non_null(strstr(out, "no hardware counters: no PMU"));
    assert_non_null(strstr(out, "task_clock_s = 0.25"));
    free(out);
    json_decref(prof);
    /* A candidate the profile run found wrong: the outcome, not counters. */
    json_t *bad = json_loads("{\"outcome\":\"wrong_result\",\"detail\":\"config 128, call 0: C[3] off\","
                             "\"configs\":[]}",
                             0, NULL);
    assert_int_equal(avo_agenttools_profile_text(bad, 9, NULL, &out, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "candidate 9 did not pass its checked calls (outcome wrong_result): config 128"));
    json_decref(bad);
}

/* The evaluate tool's answer (docs/evaluation.md, "Screening"): a
 * screened-out version says so, by how much, with the interval, that its
 * aggregate is partial and which configurations were not timed; a
 * survivor says it passed the screen. */
static void test_eval_text(void **state)
{
    (void)state;
    avo_commit_params cp = {.min_gain = 0.02, .confidence = 0.95};
    int failed = -1;
    json_t *r = json_loads(
        "{\"outcome\":\"ok\",\"aggregate\":3.5,\"unit\":\"GB/s\",\"screened_out\":true,"
        "\"detail\":\"screened out: 0.93 x the against's speed\","
        "\"screen\":{\"screened_out\":true,\"configs\":[\"a\",\"b\"],\"ratio\":0.93,\"ci\":[0.91,0.95]},"
        "\"paired\":{\"against\":4,\"ratio\":0.93,\"low\":0.915,\"ci\":[0.91,0.95],\"scope\":\"screen\","
        "\"screened_out\":true,\"configs\":[{\"config\":\"a\"},{\"config\":\"b\"}]},"
        "\"configs\":[{\"name\":\"a\",\"score\":4,\"median_s\":0.001},"
        "{\"name\":\"c\",\"score\":null,\"timed\":false},{\"name\":\"b\",\"score\":3,\"median_s\":0.002}]}",
        0, NULL);
    assert_non_null(r);
    char *out = avo_agenttools_eval_text(&cp, r, "done", 12, 5.0, 4, &failed);
    assert_non_null(out);
    assert_int_equal(failed, 0);
    assert_non_null(strstr(out, "candidate 12: outcome ok, screened out: aggregate 3.5 GB/s over the screen's 2 "
                                "configurations only (partial; the island's best is 5 over all of them)"));
    assert_non_null(strstr(out, "commit rule: candidate 12 was screened out: 7.0% slower than the island's best on "
                                "the screen's 2 configurations (95% interval -9.0% .. -5.0%)"));
    assert_non_null(strstr(out, "  c: not timed (screened out; its checked calls were correct)"));
    assert_non_null(strstr(out, "  b: 3, 0.002"));
    free(out);
    json_decref(r);
    /* a survivor: timed in full, judged on the full run */
    r = json_loads("{\"outcome\":\"ok\",\"aggregate\":6,\"unit\":\"GB/s\",\"screened_out\":false,"
                   "\"screen\":{\"screened_out\":false,\"ratio\":1.2},"
                   "\"paired\":{\"against\":4,\"ratio\":1.2,\"low\":1.1,\"ci\":[1.08,1.3]},\"configs\":[]}",
                   0, NULL);
    out = avo_agenttools_eval_text(&cp, r, "done", 13, 5.0, 4, &failed);
    assert_non_null(strstr(out, "aggregate 6 GB/s (the island's best is 5); it passed the screen and was timed on "
                                "every configuration"));
    assert_non_null(strstr(out, "commit rule: a significant paired gain; a commit would be accepted"));
    free(out);
    json_decref(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_declarations), cmocka_unit_test(test_checks),        cmocka_unit_test(test_working_copy),
        cmocka_unit_test(test_problem_text), cmocka_unit_test(test_disasm_filter), cmocka_unit_test(test_disasm_cap),
        cmocka_unit_test(test_profile_text), cmocka_unit_test(test_eval_text),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
