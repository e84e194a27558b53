/* Who sent a request and what it may do (docs/operations.md, "Teams and
 * quotas"). A principal is a unix user on the socket (SO_PEERCRED) or a
 * token's principal= on TCP; teams are named in avod's "teams" setting and
 * a unix user is in a team when it is in the unix group of that name;
 * admins are root, avod's own user, members of "admin-group" and tokens
 * marked admin. A job's owner, its team's members and admins may change
 * it (cancel, profile); reads are open to all unless read-access = team.
 * The rules are pure functions here so a unit test can hold them. */
#ifndef AVO_IDENT_H
#define AVO_IDENT_H

#include <stddef.h>

#include "avo_tokens.h"
#include "http.h"

#define AVO_IDENT_MAX_TEAMS 32

typedef struct {
    char name[AVO_PRINCIPAL_MAX + 1]; /* unix user name, token principal, "anonymous" for a bare token */
    char team[AVO_PRINCIPAL_MAX + 1]; /* "" = none */
    int admin;
    const char *via; /* "unix" or "token" */
} avo_principal;

typedef struct avo_ident avo_ident;

/* teams: "ml,infra" (may be empty); admin_group: a unix group or "";
 * read_access: "all" or "team". Returns 0 or a negative int with the
 * setting and the reason in err. */
int avo_ident_new(avo_ident **out, const char *teams, const char *admin_group, const char *read_access, char *err,
                  size_t errlen);
void avo_ident_free(avo_ident *id);

/* 0 when name is one of the configured teams; else -EINVAL and
 * "WHERE: unknown team 'x' (avod's teams: ...)" in err. */
int avo_ident_team_known(const avo_ident *id, const char *name, const char *where, char *err, size_t errlen);

/* Every team= of a token file must be one of the configured teams. */
int avo_ident_check_tokens(const avo_ident *id, const avo_token *tokens, int n, const char *path, char *err,
                           size_t errlen);

void avo_ident_resolve(const avo_ident *id, const avo_peer *peer, avo_principal *out);

/* May p change (cancel, profile) a job of owner/team (NULL or "" for a job
 * from before owners)? 1 with the rule that allowed it in rule ("owner",
 * "team", "admin", "unowned"), 0 with a message naming the rule in rule. */
int avo_ident_may_change(const avo_principal *p, const char *owner, const char *team, char *rule, size_t rulelen);
/* The same for reading under read-access (always 1 with "all"). */
int avo_ident_may_read(const avo_ident *id, const avo_principal *p, const char *owner, const char *team, char *rule,
                       size_t rulelen);
/* 1 when everyone may read everything (read-access = all). */
int avo_ident_read_all(const avo_ident *id);

#endif
