/* Principals, teams and the permission rules of the API (ident.h). */
#include "ident.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    char name[AVO_PRINCIPAL_MAX + 1];
    int has_gid; /* a unix group of that name exists: its members are in the team */
    gid_t gid;
} team;

struct avo_ident {
    team teams[AVO_IDENT_MAX_TEAMS];
    int nteams;
    int has_admin_gid;
    gid_t admin_gid;
    int read_team;
};

static int group_gid(const char *name, gid_t *gid)
{
    struct group gr, *res = NULL;
    char buf[16384];
    if (getgrnam_r(name, &gr, buf, sizeof buf, &res) != 0 || !res)
        return -ENOENT;
    *gid = gr.gr_gid;
    return 0;
}

int avo_ident_new(avo_ident **out, const char *teams, const char *admin_group, const char *read_access, char *err,
                  size_t errlen)
{
    avo_ident *id = calloc(1, sizeof *id);
    if (!id)
        return -ENOMEM;
    char list[1024], *save = NULL;
    snprintf(list, sizeof list, "%s", teams ? teams : "");
    for (char *w = strtok_r(list, ", \t", &save); w; w = strtok_r(NULL, ", \t", &save)) {
        if (!avo_tokens_principal_name_ok(w)) {
            snprintf(err, errlen, "teams: '%s' is not a team name (1 to %d characters A-Z a-z 0-9 . _ -)", w,
                     AVO_PRINCIPAL_MAX);
            goto fail;
        }
        for (int i = 0; i < id->nteams; i++)
            if (!strcmp(id->teams[i].name, w)) {
                snprintf(err, errlen, "teams: '%s' is named twice", w);
                goto fail;
            }
        if (id->nteams == AVO_IDENT_MAX_TEAMS) {
            snprintf(err, errlen, "teams: more than %d teams", AVO_IDENT_MAX_TEAMS);
            goto fail;
        }
        team *t = &id->teams[id->nteams++];
        snprintf(t->name, sizeof t->name, "%s", w);
        t->has_gid = group_gid(w, &t->gid) == 0;
    }
    if (admin_group && *admin_group) {
        if (group_gid(admin_group, &id->admin_gid) < 0) {
            snprintf(err, errlen, "admin-group: there is no unix group '%s'", admin_group);
            goto fail;
        }
        id->has_admin_gid = 1;
    }
    if (!read_access || !*read_access || !strcmp(read_access, "all"))
        id->read_team = 0;
    else if (!strcmp(read_access, "team"))
        id->read_team = 1;
    else {
        snprintf(err, errlen, "read-access: '%s' is not one of all, team", read_access);
        goto fail;
    }
    *out = id;
    return 0;
fail:
    free(id);
    return -EINVAL;
}

void avo_ident_free(avo_ident *id)
{
    free(id);
}

static const team *find_team(const avo_ident *id, const char *name)
{
    for (int i = 0; i < id->nteams; i++)
        if (!strcmp(id->teams[i].name, name))
            return &id->teams[i];
    return NULL;
}

int avo_ident_team_known(const avo_ident *id, const char *name, const char *where, char *err, size_t errlen)
{
    if (find_team(id, name))
        return 0;
    char known[512] = "";
    for (int k = 0; k < id->nteams; k++)
        snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", k ? ", " : "", id->teams[k].name);
    snprintf(err, errlen, "%s: unknown team '%s' (avod's teams: %s)", where, name,
             id->nteams ? known : "none; set teams = NAME,...");
    return -EINVAL;
}

int avo_ident_check_tokens(const avo_ident *id, const avo_token *tokens, int n, const char *path, char *err,
                           size_t errlen)
{
    for (int i = 0; i < n; i++) {
        char where[1200];
        snprintf(where, sizeof where, "token file %s line %d", path, tokens[i].line);
        if (tokens[i].team[0] && avo_ident_team_known(id, tokens[i].team, where, err, errlen) < 0)
            return -EINVAL;
    }
    return 0;
}

static int in_groups(const avo_peer *peer, gid_t g)
{
    if (peer->gid == g)
        return 1;
    for (int i = 0; i < peer->ngroups; i++)
        if (peer->groups[i] == g)
            return 1;
    return 0;
}

void avo_ident_resolve(const avo_ident *id, const avo_peer *peer, avo_principal *out)
{
    memset(out, 0, sizeof *out);
    if (peer->tcp) {
        out->via = "token";
        snprintf(out->name, sizeof out->name, "%s", peer->principal[0] ? peer->principal : "anonymous");
        snprintf(out->team, sizeof out->team, "%s", peer->team);
        out->admin = peer->admin;
        return;
    }
    out->via = "unix";
    if (!peer->have_cred) {
        /* Not expected on Linux; such a peer is nobody in particular. */
        snprintf(out->name, sizeof out->name, "unknown");
        return;
    }
    struct passwd pw, *res = NULL;
    char buf[16384];
    avo_peer fallback;
    if (getpwuid_r(peer->uid, &pw, buf, sizeof buf, &res) == 0 && res)
        snprintf(out->name, sizeof out->name, "%s", pw.pw_name);
    else
        snprintf(out->name, sizeof out->name, "uid-%u", (unsigned)peer->uid);
    if (peer->ngroups < 0) {
        /* The kernel did not hand over the groups (more than fit): the
         * group database's view of the user instead of the process's. */
        fallback = *peer;
        fallback.ngroups = AVO_PEER_MAX_GROUPS;
        if (!res || getgrouplist(pw.pw_name, peer->gid, fallback.groups, &fallback.ngroups) < 0)
            fallback.ngroups = 0;
        peer = &fallback;
    }
    /* The first configured team the user is in: the order of "teams" decides. */
    for (int i = 0; i < id->nteams; i++)
        if (id->teams[i].has_gid && in_groups(peer, id->teams[i].gid)) {
            snprintf(out->team, sizeof out->team, "%s", id->teams[i].name);
            break;
        }
    /* root and avod's own user could stop avod anyway */
    out->admin = peer->uid == 0 || peer->uid == geteuid() || (id->has_admin_gid && in_groups(peer, id->admin_gid));
}

static int may(const avo_principal *p, const char *owner, const char *team, const char *what, char *rule,
               size_t rulelen)
{
    if (p->admin) {
        snprintf(rule, rulelen, "admin");
        return 1;
    }
    if (!owner || !*owner) {
        snprintf(rule, rulelen, "unowned");
        return 1;
    }
    if (!strcmp(p->name, owner)) {
        snprintf(rule, rulelen, "owner");
        return 1;
    }
    if (p->team[0] && team && !strcmp(p->team, team)) {
        snprintf(rule, rulelen, "team");
        return 1;
    }
    snprintf(rule, rulelen,
             "%s a job is allowed to its owner (%s), members of its team (%s) and admins; you are %s "
             "(%s%s)",
             what, owner, team && *team ? team : "none", p->name, p->team[0] ? "team " : "no team", p->team);
    return 0;
}

int avo_ident_may_change(const avo_principal *p, const char *owner, const char *team, char *rule, size_t rulelen)
{
    return may(p, owner, team, "changing", rule, rulelen);
}

int avo_ident_may_read(const avo_ident *id, const avo_principal *p, const char *owner, const char *team, char *rule,
                       size_t rulelen)
{
    if (!id->read_team) {
        snprintf(rule, rulelen, "read-access=all");
        return 1;
    }
    return may(p, owner, team, "read-access=team: reading", rule, rulelen);
}

int avo_ident_read_all(const avo_ident *id)
{
    return !id->read_team;
}
