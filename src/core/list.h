/* Intrusive doubly-linked circular list, embedded in its members. */
#ifndef UB_CORE_LIST_H
#define UB_CORE_LIST_H

#include <stdbool.h>

#include "core/compiler.h"

struct ub__list {
    struct ub__list *prev, *next;
};

static inline void ub__list_init(struct ub__list *l)
{
    l->prev = l->next = l;
}

static inline bool ub__list_empty(const struct ub__list *l)
{
    return l->next == l;
}

static inline void ub__list_insert_after(struct ub__list *at, struct ub__list *n)
{
    n->prev = at;
    n->next = at->next;
    at->next->prev = n;
    at->next = n;
}

static inline void ub__list_push_back(struct ub__list *l, struct ub__list *n)
{
    ub__list_insert_after(l->prev, n);
}

static inline void ub__list_push_front(struct ub__list *l, struct ub__list *n)
{
    ub__list_insert_after(l, n);
}

/* Unlinks n and leaves it self-linked, so removing twice is harmless. */
static inline void ub__list_remove(struct ub__list *n)
{
    n->prev->next = n->next;
    n->next->prev = n->prev;
    n->prev = n->next = n;
}

static inline struct ub__list *ub__list_pop_front(struct ub__list *l)
{
    if (ub__list_empty(l))
        return 0;
    struct ub__list *n = l->next;
    ub__list_remove(n);
    return n;
}

#define UB_LIST_FOR_EACH(it, head) for ((it) = (head)->next; (it) != (head); (it) = (it)->next)
/* Safe against removal of `it` inside the loop. */
#define UB_LIST_FOR_EACH_SAFE(it, tmp, head) \
    for ((it) = (head)->next, (tmp) = (it)->next; (it) != (head); (it) = (tmp), (tmp) = (it)->next)

#endif
