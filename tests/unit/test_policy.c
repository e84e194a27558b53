/* The candidate policy (daemon/worker/policy.h; docs/evaluation.md,
 * "Policy"): each rule found in a source however it is spelled (comments,
 * splices, trigraphs, digraphs, joined and raw strings, macros), honest
 * code left alone, the PTX list generated from the toolkit, the kept
 * assembler input, a built object, and problem.json's "policy.relax". */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "daemon/worker/policy.h"
#include "proto/avo_problem.h"

/* The rule found in src (-1 when clean) and, when there is one, its line. */
static int scan(const char *src, int cuda, int *line)
{
    avo_policy_findings f = {0};
    assert_int_equal(avo_policy_scan_source(src, strlen(src), cuda ? "cand.cu" : "cand.c", cuda, &f), 0);
    const avo_policy_violation *v = avo_policy_first(&f, 0);
    if (line)
        *line = v ? v->line : 0;
    return v ? v->rule : -1;
}

static void expect_rule(const char *src, int cuda, int rule, int line)
{
    int got_line = 0;
    const int got = scan(src, cuda, &got_line);
    if (got != rule || (line && got_line != line))
        fail_msg("%s\n -> rule %d line %d, expected rule %d line %d", src, got, got_line, rule, line);
}

static void test_file_inclusion(void **state)
{
    (void)state;
    const int R = AVO_POLICY_FILE_INCLUSION;
    expect_rule("#include <stdint.h>\n#include \"/etc/shadow\"\n", 0, R, 2);
    expect_rule("#include </etc/shadow>\n", 0, R, 1);
    expect_rule("#include \"../../etc/shadow\"\n", 0, R, 1);
    expect_rule("  #  include_next </etc/passwd>\n", 0, R, 1);
    /* a macro names the file */
    expect_rule("#define F \"/etc/shadow\"\n#include F\n", 0, R, 2);
    /* digraph and trigraph spellings of # */
    expect_rule("%:include </etc/shadow>\n", 0, R, 1);
    expect_rule("\?\?=include </etc/shadow>\n", 0, R, 1);
    /* a directive spliced over two lines: the line it starts on */
    expect_rule("int a;\n#inc\\\nlude </etc/shadow>\n", 0, R, 2);
    expect_rule("#embed <stdint.h>\n", 0, R, 1);
    expect_rule("#pragma GCC dependency \"/etc/shadow\"\n", 0, R, 1);
    expect_rule("_Pragma(\"GCC dependency \\\"/etc/shadow\\\"\")\n", 0, R, 1);
    expect_rule("#if __has_include(</etc/shadow>)\n#endif\n", 0, R, 1);
    /* .incbin: plain, split by a string join across lines, as escapes, in
     * a raw string, stringized from tokens, and .include */
    expect_rule("__asm__(\".incbin \\\"/etc/shadow\\\"\");\n", 0, R, 1);
    expect_rule("int x;\n__asm__(\".inc\"\n        \"bin \\\"/etc/shadow\\\"\");\n", 0, R, 2);
    expect_rule("__asm__(\"\\x2eincbin \\\"/etc/shadow\\\"\");\n", 0, R, 1);
    expect_rule("asm(R\"x(.incbin \"/etc/shadow\")x\");\n", 1, R, 1);
    expect_rule("#define S(x) #x\n__asm__(S(.incbin \"/etc/shadow\"));\n", 0, R, 2);
    expect_rule("__asm__(\".include \\\"/etc/shadow\\\"\");\n", 0, R, 1);
    /* #line does not move the line reported */
    expect_rule("#line 900 \"other.c\"\n#include </etc/shadow>\n", 0, R, 2);
}

static void test_module_loading(void **state)
{
    (void)state;
    const int R = AVO_POLICY_MODULE_LOADING;
    expect_rule("#include <dlfcn.h>\nvoid *f(void) { return dlopen(\"x.so\", 2); }\n", 0, R, 2);
    expect_rule("int g(void *m, const void *b) { return cuModuleLoadData(m, b); }\n", 1, R, 1);
    expect_rule("int g(void *m, const void *b) { return cuModuleLoadDataEx(m, b, 0, 0, 0); }\n", 1, R, 1);
    expect_rule("int g(void *l, const void *b) { return cuLibraryLoadData(l, b, 0, 0, 0, 0, 0, 0); }\n", 1, R, 1);
    expect_rule("int g(void *l, const void *b) { return cudaLibraryLoadData(l, b, 0, 0, 0, 0, 0, 0); }\n", 1, R, 1);
    expect_rule("int g(void *m, const void *b) { return cuModuleLoadFatBinary(m, b); }\n", 1, R, 1);
    /* the name in a string, joined from pieces */
    expect_rule("void *h;\nvoid *f(void) { return dlsym(h, \"cuModule\" \"LoadData\"); }\n", 0, R, 2);
    /* a lookup by a name that is not a literal */
    expect_rule("char n[9];\nvoid *f(void *h) { return dlsym(h, n); }\n", 0, R, 2);
    expect_rule("void *p; int q;\nint f(const char *n) { return cudaGetDriverEntryPoint(n, &p, 0, &q); }\n", 1, R, 2);
    expect_rule("void *(*s)(void *, const char *) = dlsym;\n", 0, R, 1);
}

/* A raw string prefix without its '(' (the text ends, or the delimiter is
 * longer than 16): the scanner does not read past the text (it once copied a
 * negative length: heap corruption in the worker, from candidate text) and
 * the code after it is still scanned. */
static void test_malformed_raw_string(void **state)
{
    (void)state;
    const int R = AVO_POLICY_MODULE_LOADING;
    assert_int_equal(scan("R\"abcdefghijklmnopqrstuvwxyz(", 1, NULL), -1);
    assert_int_equal(scan("R\"", 1, NULL), -1);
    assert_int_equal(scan("int x = 1; R\"abc", 1, NULL), -1);
    expect_rule("const char *s = R\"abcdefghijklmnopqrstuvwxyz\";\nvoid *f(void) { return dlopen(\"x.so\", 2); }\n", 1,
                R, 2);
    expect_rule("#if 0\nR\"abc\n#endif\nvoid *f(void) { return dlopen(\"x.so\", 2); }\n", 1, R, 4);
    /* GNU C (gcc's default -std=gnu17) reads R"x(...)x" as a raw string; the
     * C scanner does not, so here it sees the dlopen below as part of a
     * string: names inside strings are findings too, so it is still
     * refused (and the object's imports would name it as well). */
    expect_rule("const char *s = R\"x(\")x\"; void *f(void) { return dlopen(\"x.so\", 2); } const char *t = \"\";\n", 0,
                R, 1);
}

static void test_embedded_binaries(void **state)
{
    (void)state;
    const int R = AVO_POLICY_EMBEDDED_BINARIES;
    expect_rule("const unsigned char img[] = {\n  0x7f, 0x45, 0x4c, 0x46, 2, 1};\n", 0, R, 2);
    expect_rule("const unsigned char img[] = {127, 69, 76, 70};\n", 0, R, 1);
    expect_rule("const char img[] = \"\\177ELF\\2\\1\";\n", 0, R, 1);
    expect_rule("const unsigned int fat[] = {0xBA55ED50u, 1};\n", 0, R, 1);
    expect_rule("const unsigned char fat[] = {0x50, 0xed, 0x55, 0xba};\n", 0, R, 1);
    expect_rule("const char img[] = {'\\x7f', 'E', 'L', 'F', 2};\n", 0, R, 1);
}

/* What honest kernels write is not refused: system headers, a driver entry
 * point fetched by a literal name (the seeds' TMA descriptors), the words
 * in comments and in other strings, a member called include. */
static void test_honest(void **state)
{
    (void)state;
    static const char *const honest[] = {
        "#include <stdint.h>\n#include \"cuda_runtime.h\"\n#include <cuda/barrier>\n",
        "/* we never dlopen or cuModuleLoadData here; .incbin is refused */\nint x;\n",
        "// #include </etc/shadow>\nint y;\n",
        "static const char *m = \"loads nothing\";\n",
        "void *p; int q;\nint f(void) { return cudaGetDriverEntryPointByVersion(\"cuTensorMapEncodeTiled\", &p, "
        "12000, 0, &q); }\n",
        "void *f(void *h) { return dlsym(h, \"avo_helper\"); }\n",
        "struct s { int include; };\nint g(struct s *p) { return p->include; }\n",
        "const int sizes[] = {0x7f, 0x45, 0x4c, 0x47};\nlong n = 1'000'000;\n",
        "asm volatile(\"wgmma.fence.sync.aligned;\\n\" ::: \"memory\");\n",
        "const char *r = R\"(/* not a comment */ \"quoted\" )\";\n",
        "#define CAT(a, b) a ## b\n#define CAT2(a, b) a %:%: b\nint CAT(x, y);\n",
    };
    for (size_t i = 0; i < sizeof honest / sizeof honest[0]; i++)
        expect_rule(honest[i], 1, -1, 0);
}

static int ptx_rule_line(const char *ptx, int *line)
{
    avo_policy_findings f = {0};
    assert_int_equal(avo_policy_scan_ptx(ptx, strlen(ptx), "cand.ptx", &f), 0);
    const avo_policy_violation *v = avo_policy_first(&f, 0);
    *line = v ? v->line : 0;
    return v ? v->rule : -1;
}

static void test_ptx(void **state)
{
    (void)state;
    if (!avo_policy_ptx_isa()[0])
        skip(); /* built without a toolkit: no instruction is documented */
    /* the generated list: documented instructions, by any dotted prefix */
    static const char *const documented[] = {
        "add.s32",
        "mov.u32",
        "call.uni",
        "call",
        "ret",
        "exit",
        "bra.uni",
        "setp.ne.b32",
        "ld.global.nc.L2::128B.v4.u32",
        "st.shared.v2.f32",
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes",
        "mbarrier.try_wait.parity.shared::cta.b64",
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16",
        "setmaxnreg.inc.sync.aligned.u32",
        "ldmatrix.sync.aligned.m8n8.x4.shared.b16",
        "fence.proxy.async.shared::cta",
        "shfl.sync.bfly.b32",
        "ldu.global.f32"};
    for (size_t i = 0; i < sizeof documented / sizeof documented[0]; i++)
        if (!avo_policy_ptx_documented(documented[i]))
            fail_msg("%s should be documented (PTX ISA %s)", documented[i], avo_policy_ptx_isa());
    static const char *const undocumented[] = {"cctl.ivall", "cctl",     "_ldsm",   "_warpsync",
                                               "foo.b32",    "cp.bogus", "mbarrier"};
    for (size_t i = 0; i < sizeof undocumented / sizeof undocumented[0]; i++)
        if (avo_policy_ptx_documented(undocumented[i]))
            fail_msg("%s should not be documented", undocumented[i]);

    /* statements: labels, guards, directives, blocks, comments, calls */
    int line = 0;
    const char *honest = ".version 9.0\n.target sm_90a\n.address_size 64\n"
                         ".func (.param .b32 r) f(.param .b32 a)\n{\n\tret;\n}\n"
                         ".visible .entry k(\n\t.param .u64 p\n)\n{\n\t.reg .b32 %r<4>;\n\t.reg .pred %p<2>;\n"
                         "$L__BB0_1:\n\t@%p1 bra $L__BB0_2;\n\t@!%p1 add.s32 %r1, %r2, 1;\n"
                         "\t// begin inline asm\n\t{ .reg .b32 t; mov.b32 t, %r1; }\n\t// end inline asm\n"
                         "\t/* cctl.ivall; in a comment */\n"
                         "\t{\n\t.param .b32 a0;\n\tst.param.b32 [a0], %r1;\n\t.param .b32 r0;\n"
                         "\tcall.uni (r0), f, (a0);\n\t}\n"
                         "$L__BB0_2:\n\tret;\n}\n"
                         /* what nvcc emits for indirect calls and device tables */
                         ".global .align 8 .u64 tbl[2] = {generic(f), generic(f)};\n"
                         ".visible .func g()\n{\n\t.reg .b64 %rd<2>;\n"
                         "\tprototype_0 : .callprototype ()_ (.param .b32 _);\n\tcall %rd1, (a0), prototype_0;\n"
                         "\t{ .reg .b32 lo, hi; mov.b64 {lo, hi}, %rd1;\n\tst.shared.v2.b32 [%rd1], {lo,\n\thi}; }\n"
                         "\tret;\n}\n";
    assert_int_equal(ptx_rule_line(honest, &line), -1);
    const char *hostile = ".version 9.0\n.target sm_90a\n.address_size 64\n.visible .entry k()\n{\n"
                          "\t// begin inline asm\n\tcctl.ivall;\n\t// end inline asm\n\tret;\n}\n";
    assert_int_equal(ptx_rule_line(hostile, &line), AVO_POLICY_PTX_INSTRUCTIONS);
    assert_int_equal(line, 7);
    /* after a vector operand that spans lines, lines still count */
    const char *after = ".visible .entry k()\n{\n\tmov.b64 {lo,\n\thi}, %rd1;\n\tcctl.ivall;\n}\n";
    assert_int_equal(ptx_rule_line(after, &line), AVO_POLICY_PTX_INSTRUCTIONS);
    assert_int_equal(line, 5);
    const char *guarded = ".visible .entry k()\n{\nL1: @%p1\n  _ldldu.global.b32 %r1, [%rd1];\n}\n";
    assert_int_equal(ptx_rule_line(guarded, &line), AVO_POLICY_PTX_INSTRUCTIONS);
    assert_int_equal(line, 4); /* the opcode's line, after the label and the guard */
}

static void test_asm(void **state)
{
    (void)state;
    const char *s = "\t.text\n\t.globl f\n# .incbin \"/etc/shadow\" in a comment\nf:\n\tret\n";
    avo_policy_findings f = {0};
    assert_int_equal(avo_policy_scan_asm(s, strlen(s), "cand.s", &f), 0);
    assert_null(avo_policy_first(&f, 0));
    const char *h = "\t.section .rodata\nx:\n\t.byte 1; .INCBIN \"/etc/hostname\"\n";
    assert_int_equal(avo_policy_scan_asm(h, strlen(h), "cand.s", &f), 0);
    const avo_policy_violation *v = avo_policy_first(&f, 0);
    assert_non_null(v);
    assert_int_equal(v->rule, AVO_POLICY_FILE_INCLUSION);
    assert_int_equal(v->line, 3);
    assert_string_equal(v->file, "cand.s");
}

/* An object built here with cc: its imports and its data. */
static int scan_built(const char *src, avo_policy_findings *f)
{
    char dir[] = "/tmp/avo-test-policy-XXXXXX", c[64], so[64], cmd[256];
    if (!mkdtemp(dir))
        return -errno;
    snprintf(c, sizeof c, "%s/x.c", dir);
    snprintf(so, sizeof so, "%s/x.so", dir);
    FILE *fp = fopen(c, "w");
    assert_non_null(fp);
    fputs(src, fp);
    fclose(fp);
    snprintf(cmd, sizeof cmd, "cc -O2 -shared -fPIC -o %s %s 2>/dev/null", so, c);
    int rc = system(cmd) == 0 ? avo_policy_scan_object(so, src, strlen(src), "cand.c", NULL, 0, f) : -ENOEXEC;
    unlink(c);
    unlink(so);
    rmdir(dir);
    return rc;
}

static void test_object(void **state)
{
    (void)state;
    avo_policy_findings f = {0};
    /* honest */
    assert_int_equal(scan_built("int k(float *x) { x[0] += 1; return 0; }\n", &f), 0);
    assert_null(avo_policy_first(&f, 0));
    /* dlopen pasted by a macro: the import, and no source line spells it */
    memset(&f, 0, sizeof f);
    assert_int_equal(scan_built("#include <dlfcn.h>\n#define C(a, b) a##b\n"
                                "void *k(void) { return C(dl, open)(\"x\", RTLD_NOW); }\n",
                                &f),
                     0);
    const avo_policy_violation *v = avo_policy_first(&f, 0);
    assert_non_null(v);
    assert_int_equal(v->rule, AVO_POLICY_MODULE_LOADING);
    assert_string_equal(v->file, "object");
    /* an ELF image in .rodata, its magic computed: found at its symbol,
     * on the line that declares it */
    memset(&f, 0, sizeof f);
    assert_int_equal(scan_built("#define B(x) ((unsigned char)((x) + 1))\n"
                                "const unsigned char img[32] = {B(0x7e), B(0x44), B(0x4b), B(0x45), 2};\n"
                                "int k(void) { return img[4]; }\n",
                                &f),
                     0);
    v = avo_policy_first(&f, 0);
    assert_non_null(v);
    assert_int_equal(v->rule, AVO_POLICY_EMBEDDED_BINARIES);
    assert_int_equal(v->line, 2);
    assert_non_null(strstr(v->why, "img"));
    /* relaxed, the finding stays but is not the verdict */
    assert_null(avo_policy_first(&f, 1u << AVO_POLICY_EMBEDDED_BINARIES));
    /* not an ELF */
    char path[] = "/tmp/avo-test-policy-notelf-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "hello", 5), 5);
    close(fd);
    assert_int_equal(avo_policy_scan_object(path, NULL, 0, "cand.c", NULL, 0, &f), -ENOEXEC);
    unlink(path);
}

/* problem.json's "policy": relaxations by name, each with its reason. */
static int load_with_policy(const char *policy, avo_problem *p, char *err, size_t errlen)
{
    size_t n = 0;
    FILE *fp = fopen("kernels/cpu/sgemm/problem.json", "r");
    assert_non_null(fp);
    char *text = calloc(1, 1 << 16);
    n = fread(text, 1, (1 << 16) - 1, fp);
    fclose(fp);
    text[n] = 0;
    char *end = strrchr(text, '}');
    assert_non_null(end);
    char *full = NULL;
    assert_true(asprintf(&full, "%.*s, \"policy\": %s}", (int)(end - text), text, policy) > 0);
    int rc = avo_problem_load_text(p, "kernels/cpu/sgemm", full, err, errlen);
    free(text);
    free(full);
    return rc;
}

static void test_problem_relax(void **state)
{
    (void)state;
    avo_problem p;
    char err[512];
    assert_int_equal(load_with_policy("{\"relax\": {\"module_loading\": \"the vendor library is the point\", "
                                      "\"ptx_instructions\": \"a study of reserved opcodes\"}}",
                                      &p, err, sizeof err),
                     0);
    assert_int_equal(p.policy_relax, (1u << AVO_POLICY_MODULE_LOADING) | (1u << AVO_POLICY_PTX_INSTRUCTIONS));
    avo_problem_free(&p);
    assert_int_equal(load_with_policy("{\"relax\": {\"module_loding\": \"typo\"}}", &p, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "policy.relax.module_loding: unknown rule 'module_loding' (ptx_instructions, "
                                "embedded_binaries, module_loading, file_inclusion)"));
    assert_int_equal(load_with_policy("{\"relax\": {\"file_inclusion\": \"\"}}", &p, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "policy.relax.file_inclusion: must be a non-empty string"));
    assert_int_equal(load_with_policy("{\"relax\": [\"file_inclusion\"]}", &p, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "policy.relax: must be an object"));
    assert_int_equal(load_with_policy("{\"allow\": {}}", &p, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "policy: unknown field 'allow'"));
}

static void test_detail(void **state)
{
    (void)state;
    avo_policy_findings f = {0};
    const char *src = "int a;\nvoid *f(void) { return dlopen(\"x\", 2); }\n";
    assert_int_equal(avo_policy_scan_source(src, strlen(src), "cand.c", 0, &f), 0);
    char d[1024];
    avo_policy_detail(avo_policy_first(&f, 0), d, sizeof d);
    assert_string_equal(d, "module_loading: cand.c line 2: `void *f(void) { return dlopen(\"x\", 2); }`: dlopen "
                           "loads code at run time");
    json_t *j = avo_policy_json(avo_policy_first(&f, 0), 1u << AVO_POLICY_FILE_INCLUSION);
    assert_string_equal(json_string_value(json_object_get(j, "rule")), "module_loading");
    assert_int_equal(json_integer_value(json_object_get(j, "line")), 2);
    assert_string_equal(json_string_value(json_array_get(json_object_get(j, "relaxed"), 0)), "file_inclusion");
    json_decref(j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_file_inclusion),
        cmocka_unit_test(test_module_loading),
        cmocka_unit_test(test_malformed_raw_string),
        cmocka_unit_test(test_embedded_binaries),
        cmocka_unit_test(test_honest),
        cmocka_unit_test(test_ptx),
        cmocka_unit_test(test_asm),
        cmocka_unit_test(test_object),
        cmocka_unit_test(test_problem_relax),
        cmocka_unit_test(test_detail),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
