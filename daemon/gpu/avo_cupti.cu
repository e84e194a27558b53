/* C++ only because the CUPTI profiler host header includes <string>; the
 * code and its interface are plain C. */
#include "avo_cupti.h"

#include <errno.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>
#include <cupti_target.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_RANGES 64

/* CUPTI's parameter blocks: zeroed, with their size set (the ABI check). */
#define PARAMS(type, var)                                                                                              \
    type var;                                                                                                          \
    memset(&var, 0, sizeof var);                                                                                       \
    var.structSize = type##_STRUCT_SIZE

const char *const avo_cupti_default_metrics[] = {
    "gpu__time_duration.sum",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
    "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
    "sm__inst_executed_pipe_tensor_op_hmma.sum",
    "sm__inst_executed_pipe_tensor_op_gmma.sum",
    "smsp__inst_executed.sum",
    "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio",
    "smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio",
    "smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio",
    "smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio",
    "smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio",
    "smsp__average_warps_issue_stalled_wait_per_issue_active.ratio",
};
const int avo_cupti_default_nmetrics = (int)(sizeof avo_cupti_default_metrics / sizeof avo_cupti_default_metrics[0]);

struct avo_cupti {
    CUcontext ctx;
    CUpti_Profiler_Host_Object *host;
    CUpti_RangeProfiler_Object *rp;
    const char **metrics;
    int nmetrics;
    uint8_t *config;
    size_t config_size;
    size_t passes;
    int profiler_initialized;
    char chip[64];
    uint8_t *avail;
};

static int cupti_fail(CUptiResult r, const char *what, char *err, size_t errlen)
{
    const char *s = NULL;
    cuptiGetResultString(r, &s);
    snprintf(err, errlen, "%s: %s", what, s ? s : "CUPTI error");
    return r == CUPTI_ERROR_INSUFFICIENT_PRIVILEGES ? -1 : -5;
}

/* Whether the chip knows a metric: its base name (before the first '.')
 * must be among the host object's base metrics of some type. Checked by name
 * so that one unknown metric drops out alone instead of failing the set. */
static int metric_known(CUpti_Profiler_Host_Object *host, const char *name)
{
    size_t len = strcspn(name, ".");
    for (int t = 0; t < (int)CUPTI_METRIC_TYPE__COUNT; t++) {
        PARAMS(CUpti_Profiler_Host_GetBaseMetrics_Params, bm);
        bm.pHostObject = host;
        bm.metricType = (CUpti_MetricType)t;
        if (cuptiProfilerHostGetBaseMetrics(&bm) != CUPTI_SUCCESS)
            continue;
        for (size_t k = 0; k < bm.numMetrics; k++)
            if (strlen(bm.ppMetricNames[k]) == len && strncmp(bm.ppMetricNames[k], name, len) == 0)
                return 1;
    }
    return 0;
}

static void trace(const char *step)
{
    if (getenv("AVO_CUPTI_TRACE"))
        fprintf(stderr, "cupti: %s\n", step);
}

/* Chip name and counter availability, then the host object for that chip. */
static int host_init(avo_cupti *p, int device, char *err, size_t errlen)
{
    CUptiResult r;
    PARAMS(CUpti_Profiler_Initialize_Params, ip);
    if ((r = (trace("cuptiProfilerInitialize"), cuptiProfilerInitialize(&ip))) != CUPTI_SUCCESS)
        return cupti_fail(r, "cuptiProfilerInitialize", err, errlen);
    p->profiler_initialized = 1;
    PARAMS(CUpti_Device_GetChipName_Params, cn);
    cn.deviceIndex = (size_t)device;
    if ((r = (trace("cuptiDeviceGetChipName"), cuptiDeviceGetChipName(&cn))) != CUPTI_SUCCESS)
        return cupti_fail(r, "cuptiDeviceGetChipName", err, errlen);
    snprintf(p->chip, sizeof p->chip, "%s", cn.pChipName);
    PARAMS(CUpti_Profiler_GetCounterAvailability_Params, ca);
    ca.ctx = p->ctx;
    if ((r = cuptiProfilerGetCounterAvailability(&ca)) != CUPTI_SUCCESS)
        return cupti_fail(r, "cuptiProfilerGetCounterAvailability", err, errlen);
    uint8_t *avail = (uint8_t *)malloc(ca.counterAvailabilityImageSize);
    if (!avail)
        return -ENOMEM;
    ca.pCounterAvailabilityImage = avail;
    if ((r = cuptiProfilerGetCounterAvailability(&ca)) != CUPTI_SUCCESS) {
        free(avail);
        return cupti_fail(r, "cuptiProfilerGetCounterAvailability", err, errlen);
    }
    PARAMS(CUpti_Profiler_Host_Initialize_Params, hi);
    hi.profilerType = CUPTI_PROFILER_TYPE_RANGE_PROFILER;
    hi.pChipName = p->chip;
    hi.pCounterAvailabilityImage = avail;
    r = (trace("cuptiProfilerHostInitialize"), cuptiProfilerHostInitialize(&hi));
    /* The host object keeps pointing into the availability image: it lives
     * as long as the profiler does. */
    p->avail = avail;
    if (r != CUPTI_SUCCESS)
        return cupti_fail(r, "cuptiProfilerHostInitialize", err, errlen);
    p->host = hi.pHostObject;
    return 0;
}

static int add_metrics(avo_cupti *p, const char *const *metrics, int nmetrics, json_t *unsupported, char *err,
                       size_t errlen)
{
    p->metrics = (const char **)calloc((size_t)nmetrics, sizeof *p->metrics);
    if (!p->metrics)
        return -ENOMEM;
    for (int i = 0; i < nmetrics; i++) {
        PARAMS(CUpti_Profiler_Host_ConfigAddMetrics_Params, am);
        const char *one[] = {metrics[i]};
        am.pHostObject = p->host;
        am.ppMetricNames = one;
        am.numMetrics = 1;
        trace(metrics[i]);
        if (!metric_known(p->host, metrics[i]) ||
            (trace("cuptiProfilerHostConfigAddMetrics"), cuptiProfilerHostConfigAddMetrics(&am)) != CUPTI_SUCCESS) {
            if (unsupported)
                json_array_append_new(unsupported, json_string(metrics[i]));
            continue;
        }
        p->metrics[p->nmetrics++] = metrics[i];
    }
    if (p->nmetrics == 0) {
        snprintf(err, errlen, "none of the %d metrics is known on chip %s", nmetrics, p->chip);
        return -EINVAL;
    }
    return 0;
}

static int build_config(avo_cupti *p, char *err, size_t errlen)
{
    CUptiResult r;
    PARAMS(CUpti_Profiler_Host_GetConfigImageSize_Params, cs);
    cs.pHostObject = p->host;
    if ((r = (trace("cuptiProfilerHostGetConfigImageSize"), cuptiProfilerHostGetConfigImageSize(&cs))) != CUPTI_SUCCESS)
        return cupti_fail(r, "cuptiProfilerHostGetConfigImageSize", err, errlen);
    p->config_size = cs.configImageSize;
    if (!(p->config = (uint8_t *)malloc(p->config_size)))
        return -ENOMEM;
    PARAMS(CUpti_Profiler_Host_GetConfigImage_Params, ci);
    ci.pHostObject = p->host;
    ci.configImageSize = p->config_size;
    ci.pConfigImage = p->config;
    if ((r = (trace("cuptiProfilerHostGetConfigImage"), cuptiProfilerHostGetConfigImage(&ci))) != CUPTI_SUCCESS)
        return cupti_fail(r, "cuptiProfilerHostGetConfigImage", err, errlen);
    PARAMS(CUpti_Profiler_Host_GetNumOfPasses_Params, np);
    np.configImageSize = p->config_size;
    np.pConfigImage = p->config;
    if (cuptiProfilerHostGetNumOfPasses(&np) == CUPTI_SUCCESS)
        p->passes = np.numOfPasses;
    PARAMS(CUpti_RangeProfiler_Enable_Params, en);
    en.ctx = p->ctx;
    if ((r = (trace("cuptiRangeProfilerEnable"), cuptiRangeProfilerEnable(&en))) != CUPTI_SUCCESS)
        return cupti_fail(r, "cuptiRangeProfilerEnable", err, errlen);
    p->rp = en.pRangeProfilerObject;
    return 0;
}

int avo_cupti_open(avo_cupti **out, CUcontext ctx, int device, const char *const *metrics, int nmetrics,
                   json_t **unsupported, char *err, size_t errlen)
{
    int rc;
    avo_cupti *p = (avo_cupti *)calloc(1, sizeof *p);
    if (!p)
        return -ENOMEM;
    p->ctx = ctx;
    if (unsupported)
        *unsupported = json_array();
    if ((rc = host_init(p, device, err, errlen)) < 0 ||
        (rc = add_metrics(p, metrics, nmetrics, unsupported ? *unsupported : NULL, err, errlen)) < 0 ||
        (rc = build_config(p, err, errlen)) < 0) {
        avo_cupti_close(p);
        if (unsupported) {
            json_decref(*unsupported);
            *unsupported = NULL;
        }
        return rc;
    }
    *out = p;
    return 0;
}

int avo_cupti_passes(const avo_cupti *p)
{
    return (int)p->passes;
}

/* Counter data image sized for the metric set, and the range configuration:
 * one range per kernel, each kernel replayed for as many passes as needed. */
static int configure(avo_cupti *p, uint8_t **data, size_t *size, char *err, size_t errlen)
{
    CUptiResult r;
    PARAMS(CUpti_RangeProfiler_GetCounterDataSize_Params, ds);
    ds.pRangeProfilerObject = p->rp;
    ds.pMetricNames = p->metrics;
    ds.numMetrics = (size_t)p->nmetrics;
    ds.maxNumOfRanges = MAX_RANGES;
    ds.maxNumRangeTreeNodes = MAX_RANGES;
    if ((r = (trace("cuptiRangeProfilerGetCounterDataSize"), cuptiRangeProfilerGetCounterDataSize(&ds))) !=
        CUPTI_SUCCESS)
        return cupti_fail(r, "cuptiRangeProfilerGetCounterDataSize", err, errlen);
    if (!(*data = (uint8_t *)malloc(ds.counterDataSize)))
        return -ENOMEM;
    *size = ds.counterDataSize;
    PARAMS(CUpti_RangeProfiler_CounterDataImage_Initialize_Params, di);
    di.pRangeProfilerObject = p->rp;
    di.counterDataSize = *size;
    di.pCounterData = *data;
    if ((r = (trace("cuptiRangeProfilerCounterDataImageInitialize"),
              cuptiRangeProfilerCounterDataImageInitialize(&di))) != CUPTI_SUCCESS)
        return cupti_fail(r, "cuptiRangeProfilerCounterDataImageInitialize", err, errlen);
    PARAMS(CUpti_RangeProfiler_SetConfig_Params, sc);
    sc.pRangeProfilerObject = p->rp;
    sc.configSize = p->config_size;
    sc.pConfig = p->config;
    sc.counterDataImageSize = *size;
    sc.pCounterDataImage = *data;
    sc.range = CUPTI_AutoRange;
    sc.replayMode = CUPTI_KernelReplay;
    sc.maxRangesPerPass = MAX_RANGES;
    sc.numNestingLevels = 1;
    sc.minNestingLevel = 1;
    sc.passIndex = 0;
    sc.targetNestingLevel = 1;
    if ((r = (trace("cuptiRangeProfilerSetConfig"), cuptiRangeProfilerSetConfig(&sc))) != CUPTI_SUCCESS)
        return cupti_fail(r, "cuptiRangeProfilerSetConfig", err, errlen);
    return 0;
}

static int collect(avo_cupti *p, int (*fn)(void *arg), void *arg, char *err, size_t errlen)
{
    CUptiResult r;
    PARAMS(CUpti_RangeProfiler_Start_Params, st);
    st.pRangeProfilerObject = p->rp;
    if ((r = (trace("cuptiRangeProfilerStart"), cuptiRangeProfilerStart(&st))) != CUPTI_SUCCESS)
        return cupti_fail(r, "cuptiRangeProfilerStart", err, errlen);
    int frc = fn(arg);
    PARAMS(CUpti_RangeProfiler_Stop_Params, sp);
    sp.pRangeProfilerObject = p->rp;
    r = cuptiRangeProfilerStop(&sp);
    if (frc != 0) {
        snprintf(err, errlen, "the profiled launch failed (%d)", frc);
        return -EIO;
    }
    if (r != CUPTI_SUCCESS)
        return cupti_fail(r, "cuptiRangeProfilerStop", err, errlen);
    PARAMS(CUpti_RangeProfiler_DecodeData_Params, dd);
    dd.pRangeProfilerObject = p->rp;
    if ((r = (trace("cuptiRangeProfilerDecodeData"), cuptiRangeProfilerDecodeData(&dd))) != CUPTI_SUCCESS)
        return cupti_fail(r, "cuptiRangeProfilerDecodeData", err, errlen);
    if (dd.numOfRangeDropped)
        snprintf(err, errlen, "%zu kernel ranges dropped (more than %d launches)", dd.numOfRangeDropped, MAX_RANGES);
    return 0;
}

static json_t *evaluate(avo_cupti *p, const uint8_t *data, size_t size)
{
    PARAMS(CUpti_RangeProfiler_GetCounterDataInfo_Params, gi);
    gi.pCounterDataImage = data;
    gi.counterDataImageSize = size;
    if (cuptiRangeProfilerGetCounterDataInfo(&gi) != CUPTI_SUCCESS)
        return NULL;
    double *values = (double *)calloc((size_t)p->nmetrics, sizeof *values);
    json_t *out = json_array();
    for (size_t i = 0; values && i < gi.numTotalRanges; i++) {
        PARAMS(CUpti_Profiler_Host_GetRangeName_Params, rn);
        rn.pCounterDataImage = data;
        rn.counterDataImageSize = size;
        rn.rangeIndex = i;
        rn.delimiter = "/";
        cuptiProfilerHostGetRangeName(&rn);
        PARAMS(CUpti_Profiler_Host_EvaluateToGpuValues_Params, ev);
        ev.pHostObject = p->host;
        ev.pCounterDataImage = data;
        ev.counterDataImageSize = size;
        ev.rangeIndex = i;
        ev.ppMetricNames = p->metrics;
        ev.numMetrics = (size_t)p->nmetrics;
        ev.pMetricValues = values;
        json_t *m = json_object();
        if ((trace("cuptiProfilerHostEvaluateToGpuValues"), cuptiProfilerHostEvaluateToGpuValues(&ev)) == CUPTI_SUCCESS)
            for (int k = 0; k < p->nmetrics; k++)
                json_object_set_new(m, p->metrics[k], json_real(values[k]));
        json_array_append_new(out, json_pack("{s:s,s:o}", "range", rn.pRangeName ? rn.pRangeName : "?", "metrics", m));
        free((void *)rn.pRangeName);
    }
    free(values);
    return out;
}

int avo_cupti_profile(avo_cupti *p, int (*fn)(void *arg), void *arg, json_t **ranges, char *err, size_t errlen)
{
    uint8_t *data = NULL;
    size_t size = 0;
    int rc;
    *ranges = NULL;
    if ((rc = configure(p, &data, &size, err, errlen)) == 0 && (rc = collect(p, fn, arg, err, errlen)) == 0) {
        *ranges = evaluate(p, data, size);
        if (!*ranges) {
            snprintf(err, errlen, "cannot read the counter data");
            rc = -EIO;
        }
    }
    free(data);
    return rc;
}

void avo_cupti_close(avo_cupti *p)
{
    if (!p)
        return;
    if (p->rp) {
        PARAMS(CUpti_RangeProfiler_Disable_Params, d);
        d.pRangeProfilerObject = p->rp;
        cuptiRangeProfilerDisable(&d);
    }
    if (p->host) {
        PARAMS(CUpti_Profiler_Host_Deinitialize_Params, d);
        d.pHostObject = p->host;
        cuptiProfilerHostDeinitialize(&d);
    }
    if (p->profiler_initialized) {
        PARAMS(CUpti_Profiler_DeInitialize_Params, d);
        cuptiProfilerDeInitialize(&d);
    }
    free(p->config);
    free(p->metrics);
    free(p->avail);
    free(p);
}
