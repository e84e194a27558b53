/* The candidate policy (issue 21, point 4; docs/evaluation.md, "Policy"):
 * what a candidate may not contain, whatever it scores. Checked by the
 * worker on the source before it is compiled, on what the compile kept
 * (the assembler's input, the PTX nvcc emitted) and on the built object.
 * A broken rule is outcome `policy_violation` with the offending line;
 * a problem may relax a rule by name (avo_policy_rules.h). */
#ifndef AVO_POLICY_H
#define AVO_POLICY_H

#include <jansson.h>
#include <stddef.h>

#include "avo_policy_rules.h"

typedef struct {
    int rule;       /* enum avo_policy_rule */
    char file[64];  /* where: "cand.c", "cand.ptx", "cand.s", "object" */
    int line;       /* 1-based line in file; 0 when there is none */
    char text[400]; /* the offending line, trimmed (valid UTF-8) */
    char why[400];  /* what it does that the rule refuses */
} avo_policy_violation;

/* The first finding of each rule (found[r] says whether there is one), so
 * a relaxed rule does not hide another rule's finding. */
typedef struct {
    int found[AVO_POLICY_NRULES];
    avo_policy_violation v[AVO_POLICY_NRULES];
} avo_policy_findings;

/* The candidate's source (C or CUDA C++), named `name` in findings:
 * includes of host files, assembler inclusion directives, loader calls
 * and names, embedded images. Robust to comments, line splices, trigraphs
 * and digraphs, string joins and raw strings; lines are the file's own
 * (#line is not believed). Adds to f; returns 0 or a negative int. */
int avo_policy_scan_source(const char *src, size_t len, const char *name, int cuda, avo_policy_findings *f);

/* The assembler's input the compiler kept (.s): .incbin and .include
 * directives, however the source built them (macros). */
int avo_policy_scan_asm(const char *text, size_t len, const char *name, avo_policy_findings *f);

/* The PTX nvcc emitted (inline asm included): every instruction must be
 * one the toolkit documents (avo_policy_ptx_documented). */
int avo_policy_scan_ptx(const char *text, size_t len, const char *name, avo_policy_findings *f);

/* The built object (ELF): imported loaders, loader names among its
 * strings, ELF/cubin/fatbin images outside the sections nvcc puts the
 * candidate's own device code in. src (may be NULL), named srcname, is
 * searched for the line that names the symbol found, then asm_text (the
 * kept .s, may be NULL) when no token of the source spells it. -ENOEXEC for a file that is not a
 * 64-bit little-endian ELF. */
int avo_policy_scan_object(const char *path, const char *src, size_t srclen, const char *srcname, const char *asm_text,
                           size_t asm_len, avo_policy_findings *f);

/* The first finding whose rule is not in relax (a bit per rule), or NULL. */
const avo_policy_violation *avo_policy_first(const avo_policy_findings *f, unsigned relax);

/* Whether a PTX opcode (e.g. "cp.async.bulk.tensor.2d.shared::cluster")
 * is documented: one of its dotted prefixes is in the list generated at
 * build time from the toolkit (daemon/worker/gen_ptx_opcodes.sh). */
int avo_policy_ptx_documented(const char *opcode);
/* The PTX ISA version and toolkit the list was generated from ("" when the
 * build had no toolkit: then no PTX instruction is documented). */
const char *avo_policy_ptx_isa(void);
const char *avo_policy_ptx_toolkit(void);

/* One line of evidence for the result's detail. */
void avo_policy_detail(const avo_policy_violation *v, char *out, size_t outlen);
/* The result's "policy" object: the finding and the rules relaxed. */
json_t *avo_policy_json(const avo_policy_violation *v, unsigned relax);

#endif
