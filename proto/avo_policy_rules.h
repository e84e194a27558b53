/* The rules of the candidate policy (issue 21, point 4; docs/evaluation.md,
 * "Policy"): one table, so problem.json's parser, the worker's checks and
 * the messages never disagree on a name. A problem may relax a rule by
 * name ("policy": {"relax": {"NAME": "why"}}, docs/problems.md). */
#ifndef AVO_POLICY_RULES_H
#define AVO_POLICY_RULES_H

#include <string.h>

/* X(ENUM, "name", "what it refuses") */
#define AVO_POLICY_RULES(X)                                                                                            \
    X(AVO_POLICY_PTX_INSTRUCTIONS, "ptx_instructions",                                                                 \
      "PTX instructions the installed toolkit does not document (undocumented or reserved opcodes)")                   \
    X(AVO_POLICY_EMBEDDED_BINARIES, "embedded_binaries",                                                               \
      "an ELF, cubin or fatbin image embedded in the source or the object")                                            \
    X(AVO_POLICY_MODULE_LOADING, "module_loading",                                                                     \
      "loading code at run time (dlopen, cuModuleLoadData, cuLibraryLoadData, cudaLibraryLoadData, ...)")              \
    X(AVO_POLICY_FILE_INCLUSION, "file_inclusion",                                                                     \
      "including host files (.incbin, .include, #include of an absolute or parent path, #embed, computed includes)")

#define AVO_POLICY_ENUM_(e, name, what) e,
enum avo_policy_rule { AVO_POLICY_RULES(AVO_POLICY_ENUM_) AVO_POLICY_NRULES };
#undef AVO_POLICY_ENUM_

/* The rule's name, or NULL out of range. */
static inline const char *avo_policy_rules_name(int rule)
{
#define AVO_POLICY_NAME_(e, name, what) name,
    static const char *const names[] = {AVO_POLICY_RULES(AVO_POLICY_NAME_)};
#undef AVO_POLICY_NAME_
    return rule >= 0 && rule < AVO_POLICY_NRULES ? names[rule] : NULL;
}

/* What the rule refuses, in words, or NULL. */
static inline const char *avo_policy_rules_what(int rule)
{
#define AVO_POLICY_WHAT_(e, name, what) what,
    static const char *const what[] = {AVO_POLICY_RULES(AVO_POLICY_WHAT_)};
#undef AVO_POLICY_WHAT_
    return rule >= 0 && rule < AVO_POLICY_NRULES ? what[rule] : NULL;
}

/* The rule called name, or -1. */
static inline int avo_policy_rules_lookup(const char *name)
{
    for (int r = 0; r < AVO_POLICY_NRULES; r++)
        if (strcmp(avo_policy_rules_name(r), name) == 0)
            return r;
    return -1;
}

#endif
