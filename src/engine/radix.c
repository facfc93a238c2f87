/* radix.c — the prompt cache's radix tree over token ids (radix.h).
 *
 * A node is reached by its edge (a run of tokens, never empty except at the root); its children's edges start
 * with distinct tokens. n_keys counts the keys that end at the node or below it, so pruning after a removal
 * and "which keys share this prefix" need no search outside the subtree. */
#include "engine/radix.h"

#include <string.h>

#include "base/alloc.h"
#include "base/status.h"

typedef struct rx_node {
    braid_token *edge;
    int32_t n_edge;
    struct rx_node *parent;
    struct rx_node **kid;
    int32_t n_kid, cap_kid;
    int32_t end_id; /* id of the key ending here, or -1 */
    int32_t n_keys; /* keys ending here or below */
} rx_node;

struct bd_radix {
    rx_node root;
    int32_t n_nodes;
};

braid_status bd_radix_new(bd_radix **out) {
    *out = bd_calloc(1, sizeof **out);
    if (!*out) return bd_error(BRAID_E_NOMEM, "radix: out of memory");
    (*out)->root.end_id = -1;
    return BRAID_OK;
}

static void node_free(rx_node *x) {
    for (int32_t i = 0; i < x->n_kid; i++) {
        node_free(x->kid[i]);
        bd_free(x->kid[i]);
    }
    bd_free(x->kid);
    bd_free(x->edge);
}

void bd_radix_free(bd_radix *t) {
    if (!t) return;
    node_free(&t->root);
    bd_free(t);
}

static rx_node *child(const rx_node *x, braid_token tok) {
    for (int32_t i = 0; i < x->n_kid; i++)
        if (x->kid[i]->edge[0] == tok) return x->kid[i];
    return NULL;
}

/* Walks tok as far as it matches: *at is the deepest node entered whole, *d the tokens matched in all, *into
 * the child matched partly (NULL if the walk stopped at a node boundary) and *k the tokens matched of its edge. */
static void walk(const bd_radix *t, const braid_token *tok, int32_t n, rx_node **at, int32_t *d, rx_node **into,
                 int32_t *k) {
    rx_node *x = (rx_node *)&t->root;
    int32_t i = 0;
    *into = NULL;
    *k = 0;
    while (i < n) {
        rx_node *c = child(x, tok[i]);
        if (!c) break;
        int32_t j = 0;
        while (j < c->n_edge && i + j < n && c->edge[j] == tok[i + j]) j++;
        if (j < c->n_edge) {
            *into = c;
            *k = j;
            i += j;
            break;
        }
        x = c;
        i += j;
    }
    *at = x;
    *d = i;
}

static braid_status grow_kids(rx_node *x) {
    if (x->n_kid < x->cap_kid) return BRAID_OK;
    int32_t cap = x->cap_kid ? 2 * x->cap_kid : 2;
    rx_node **k = bd_realloc(x->kid, (size_t)cap * sizeof *k);
    if (!k) return bd_error(BRAID_E_NOMEM, "radix: out of memory");
    x->kid = k;
    x->cap_kid = cap;
    return BRAID_OK;
}

static rx_node *new_node(const braid_token *edge, int32_t n) {
    rx_node *x = bd_calloc(1, sizeof *x);
    if (!x) return NULL;
    x->end_id = -1;
    if (n > 0 && !(x->edge = bd_mallocn((size_t)n, sizeof *edge))) {
        bd_free(x);
        return NULL;
    }
    if (n > 0) memcpy(x->edge, edge, (size_t)n * sizeof *edge);
    x->n_edge = n;
    return x;
}

static void add_kid(rx_node *x, rx_node *c) {
    x->kid[x->n_kid++] = c;
    c->parent = x;
}

braid_status bd_radix_insert(bd_radix *t, const braid_token *tok, int32_t n, int32_t id) {
    if (n < 1 || !tok || id < 0) return bd_error(BRAID_E_INVALID, "radix: insert of %d tokens under id %d", n, id);
    rx_node *at, *into;
    int32_t d, k;
    walk(t, tok, n, &at, &d, &into, &k);
    if (!into && d == n && at->end_id >= 0)
        return bd_error(BRAID_E_INVALID, "radix: key of %d tokens already stored (id %d)", n, at->end_id);
    /* Allocate first: a middle node when the walk stopped inside an edge, a leaf when tokens remain. */
    rx_node *mid = NULL, *leaf = NULL;
    if (into) {
        if (!(mid = new_node(into->edge, k)) || grow_kids(mid) != BRAID_OK) goto nomem;
    }
    rx_node *parent = into ? mid : at;
    if (d < n) {
        if (!(leaf = new_node(tok + d, n - d))) goto nomem;
        if (!into && grow_kids(at) != BRAID_OK) goto nomem;
        if (into && mid->cap_kid < 2) {
            rx_node **kk = bd_realloc(mid->kid, 2 * sizeof *kk);
            if (!kk) goto nomem;
            mid->kid = kk;
            mid->cap_kid = 2;
        }
    }
    /* Link: nothing below fails. */
    if (into) {
        rx_node *p = into->parent;
        int32_t i = 0;
        while (p->kid[i] != into) i++;
        p->kid[i] = mid;
        mid->parent = p;
        mid->n_keys = into->n_keys;
        memmove(into->edge, into->edge + k, (size_t)(into->n_edge - k) * sizeof *into->edge);
        into->n_edge -= k;
        add_kid(mid, into);
        t->n_nodes++;
    }
    if (leaf) {
        leaf->end_id = id;
        add_kid(parent, leaf);
        t->n_nodes++;
    } else {
        parent->end_id = id;
    }
    for (rx_node *x = leaf ? leaf : parent; x; x = x->parent) x->n_keys++;
    return BRAID_OK;
nomem:
    if (mid) {
        bd_free(mid->kid);
        bd_free(mid->edge);
        bd_free(mid);
    }
    if (leaf) {
        bd_free(leaf->edge);
        bd_free(leaf);
    }
    return bd_error(BRAID_E_NOMEM, "radix: out of memory inserting %d tokens", n);
}

static void unlink_kid(rx_node *p, rx_node *c) {
    int32_t i = 0;
    while (p->kid[i] != c) i++;
    p->kid[i] = p->kid[--p->n_kid];
}

int bd_radix_remove(bd_radix *t, const braid_token *tok, int32_t n, int32_t id) {
    rx_node *at, *into;
    int32_t d, k;
    if (n < 1 || !tok) return 0;
    walk(t, tok, n, &at, &d, &into, &k);
    if (into || d != n || at->end_id != id || id < 0) return 0;
    at->end_id = -1;
    for (rx_node *x = at; x; x = x->parent) x->n_keys--;
    /* Prune: a node no key passes any more goes (its subtree is empty too). */
    rx_node *x = at;
    while (x != &t->root && x->n_keys == 0) {
        rx_node *p = x->parent;
        unlink_kid(p, x);
        node_free(x);
        bd_free(x);
        t->n_nodes--;
        x = p;
    }
    /* A node left with no key of its own and one child merges with it (if the memory for the joined edge is
     * there; otherwise the tree stays valid, only less compact). */
    if (x != &t->root && x->end_id < 0 && x->n_kid == 1) {
        rx_node *c = x->kid[0];
        braid_token *e = bd_realloc(x->edge, (size_t)(x->n_edge + c->n_edge) * sizeof *e);
        if (e) {
            memcpy(e + x->n_edge, c->edge, (size_t)c->n_edge * sizeof *e);
            x->edge = e;
            x->n_edge += c->n_edge;
            x->end_id = c->end_id;
            bd_free(x->kid);
            x->kid = c->kid;
            x->n_kid = c->n_kid;
            x->cap_kid = c->cap_kid;
            for (int32_t i = 0; i < x->n_kid; i++) x->kid[i]->parent = x;
            bd_free(c->edge);
            bd_free(c);
            t->n_nodes--;
        }
    }
    return 1;
}

static void collect(const rx_node *x, int32_t *ids, int32_t cap, int32_t *n) {
    if (x->end_id >= 0) {
        if (*n < cap) ids[*n] = x->end_id;
        (*n)++;
    }
    for (int32_t i = 0; i < x->n_kid; i++) collect(x->kid[i], ids, cap, n);
}

int32_t bd_radix_match(const bd_radix *t, const braid_token *tok, int32_t n, int32_t *ids, int32_t cap,
                       int32_t *n_ids) {
    rx_node *at, *into;
    int32_t d, k;
    *n_ids = 0;
    if (n < 1 || !tok) return 0;
    walk(t, tok, n, &at, &d, &into, &k);
    if (d == 0) return 0;
    collect(into ? into : at, ids, cap, n_ids);
    return d;
}

int32_t bd_radix_find(const bd_radix *t, const braid_token *tok, int32_t n) {
    rx_node *at, *into;
    int32_t d, k;
    if (n < 1 || !tok) return -1;
    walk(t, tok, n, &at, &d, &into, &k);
    return !into && d == n ? at->end_id : -1;
}

int32_t bd_radix_n_keys(const bd_radix *t) { return t->root.n_keys; }
int32_t bd_radix_n_nodes(const bd_radix *t) { return t->n_nodes; }

static braid_status check_node(const rx_node *x, int is_root, int32_t *nodes) {
    int32_t keys = x->end_id >= 0;
    if (!is_root && x->n_edge < 1) return bd_error(BRAID_E_INVALID, "radix: empty edge");
    if (!is_root && x->n_keys < 1) return bd_error(BRAID_E_INVALID, "radix: node without keys");
    for (int32_t i = 0; i < x->n_kid; i++) {
        if (x->kid[i]->parent != x) return bd_error(BRAID_E_INVALID, "radix: wrong parent link");
        for (int32_t j = 0; j < i; j++)
            if (x->kid[j]->edge[0] == x->kid[i]->edge[0])
                return bd_error(BRAID_E_INVALID, "radix: two children start with token %d", x->kid[i]->edge[0]);
        (*nodes)++;
        BD_TRY(check_node(x->kid[i], 0, nodes));
        keys += x->kid[i]->n_keys;
    }
    if (keys != x->n_keys) return bd_error(BRAID_E_INVALID, "radix: %d keys counted, %d recorded", keys, x->n_keys);
    return BRAID_OK;
}

braid_status bd_radix_check(const bd_radix *t) {
    int32_t nodes = 0;
    BD_TRY(check_node(&t->root, 1, &nodes));
    if (nodes != t->n_nodes) return bd_error(BRAID_E_INVALID, "radix: %d nodes, %d recorded", nodes, t->n_nodes);
    return BRAID_OK;
}
