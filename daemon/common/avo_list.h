/* avo_list: the one intrusive doubly linked list of the code base (issue 23):
 * a node lives inside the structure it links, so insertion and removal
 * allocate nothing and removal is O(1).
 *
 * A list is a sentinel: `avo_list head = AVO_LIST_INIT(head);` or
 * avo_list_init(&head) before first use. A node needs no initialisation:
 * a zeroed node is "not on a list", and avo_list_remove() puts it back in
 * that state, so removing a node twice (a close path that runs after an
 * error path) is harmless. glibc's <sys/queue.h> has neither idempotent
 * removal nor a FOREACH that survives removing the current element, which
 * the loop callbacks here need. */
#ifndef AVO_LIST_H
#define AVO_LIST_H

#include <stddef.h>

typedef struct avo_list {
    struct avo_list *prev, *next;
} avo_list;

#define AVO_LIST_INIT(name)                                                                                            \
    {                                                                                                                  \
        &(name), &(name)                                                                                               \
    }

/* The structure of type `type` whose member `member` is the node at ptr. */
#define avo_list_entry(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

/* Every node of head, in order; the body may remove the current node (and
 * only that one). pos is an avo_list *. */
#define avo_list_each(pos, head)                                                                                       \
    for (avo_list *pos = (head)->next, *pos##_next_ = pos->next; pos != (head);                                        \
         pos = pos##_next_, pos##_next_ = pos->next)

static inline void avo_list_init(avo_list *head)
{
    head->prev = head->next = head;
}

/* (A zeroed head, never initialised, also reads as empty: close paths may
 * run on a structure whose setup failed early.) */
static inline int avo_list_empty(const avo_list *head)
{
    return !head->next || head->next == head;
}

/* Whether the node is on some list. */
static inline int avo_list_linked(const avo_list *node)
{
    return node->next != NULL;
}

static inline void avo_list_insert_between(avo_list *node, avo_list *prev, avo_list *next)
{
    node->prev = prev;
    node->next = next;
    prev->next = node;
    next->prev = node;
}

/* At the front (a stack, or order does not matter). */
static inline void avo_list_push(avo_list *head, avo_list *node)
{
    avo_list_insert_between(node, head, head->next);
}

/* At the back (a FIFO queue). */
static inline void avo_list_append(avo_list *head, avo_list *node)
{
    avo_list_insert_between(node, head->prev, head);
}

/* Off its list; a no-op for a node on none. */
static inline void avo_list_remove(avo_list *node)
{
    if (!node->next)
        return;
    node->prev->next = node->next;
    node->next->prev = node->prev;
    node->prev = node->next = NULL;
}

/* The first node, or NULL for an empty list. */
static inline avo_list *avo_list_first(const avo_list *head)
{
    return avo_list_empty(head) ? NULL : head->next;
}

/* Every node of src moves to dst (which must be empty); src ends empty.
 * For "detach the list first": callbacks run on the detached copy may touch
 * src without seeing the nodes being drained. */
static inline void avo_list_take(avo_list *dst, avo_list *src)
{
    if (avo_list_empty(src)) {
        avo_list_init(dst);
        return;
    }
    dst->next = src->next;
    dst->prev = src->prev;
    dst->next->prev = dst;
    dst->prev->next = dst;
    avo_list_init(src);
}

#endif
