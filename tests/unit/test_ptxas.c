/* The ptxas -v report parser, on output captured from nvcc 13.0. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "daemon/worker/ptxas.h"

static const char *const report =
    "ptxas info    : 0 bytes gmem\n"
    "ptxas info    : Compiling entry function '_Z1kPfi' for 'sm_90a'\n"
    "ptxas info    : Function properties for _Z1kPfi\n"
    "    256 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads\n"
    "ptxas info    : Used 168 registers, used 1 barriers, 256 bytes cumulative stack size, 4096 bytes smem, "
    "400 bytes cmem[0]\n"
    "ptxas info    : Compile time = 107.250 ms\n"
    "ptxas info    : Compiling entry function 'gemm_main' for 'sm_90a'\n"
    "ptxas info    : Function properties for gemm_main\n"
    "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
    "ptxas info    : Used 90 registers, used 2 barriers, 49152 bytes smem, 384 bytes cmem[0]\n";

static void test_two_kernels(void **state)
{
    (void)state;
    json_t *a = avo_ptxas_parse(report);
    assert_int_equal(json_array_size(a), 2);
    json_t *k = json_array_get(a, 0);
    assert_string_equal(json_string_value(json_object_get(k, "kernel")), "_Z1kPfi");
    assert_string_equal(json_string_value(json_object_get(k, "target")), "sm_90a");
    assert_int_equal(json_integer_value(json_object_get(k, "registers")), 168);
    assert_int_equal(json_integer_value(json_object_get(k, "barriers")), 1);
    assert_int_equal(json_integer_value(json_object_get(k, "stack_bytes")), 256);
    assert_int_equal(json_integer_value(json_object_get(k, "spill_store_bytes")), 8);
    assert_int_equal(json_integer_value(json_object_get(k, "spill_load_bytes")), 12);
    assert_int_equal(json_integer_value(json_object_get(k, "smem_bytes")), 4096);
    assert_int_equal(json_integer_value(json_object_get(k, "cmem_bytes")), 400);
    k = json_array_get(a, 1);
    assert_string_equal(json_string_value(json_object_get(k, "kernel")), "gemm_main");
    assert_int_equal(json_integer_value(json_object_get(k, "registers")), 90);
    assert_int_equal(json_integer_value(json_object_get(k, "smem_bytes")), 49152);
    assert_int_equal(json_integer_value(json_object_get(k, "spill_store_bytes")), 0);
    json_decref(a);
}

static void test_empty_and_garbage(void **state)
{
    (void)state;
    json_t *a = avo_ptxas_parse("");
    assert_int_equal(json_array_size(a), 0);
    json_decref(a);
    a = avo_ptxas_parse("error: something\nUsed 5 registers\n");
    assert_int_equal(json_array_size(a), 0); /* no kernel header: nothing attributed */
    json_decref(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_kernels),
        cmocka_unit_test(test_empty_and_garbage),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
