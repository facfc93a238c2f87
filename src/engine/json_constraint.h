/* json_constraint.h — the inside of braid_json_constraint (a JSON Schema compiled to a node graph,
 * json_schema.c) and of braid_json_matcher (the byte-level pushdown matcher over it, json_match.c), shared
 * with the token layer (json_tokens.c). */
#ifndef BRAID_ENGINE_JSON_CONSTRAINT_H
#define BRAID_ENGINE_JSON_CONSTRAINT_H

#include <stddef.h>
#include <stdint.h>

#include "braid.h"

/* What a node accepts (one JSON value). */
enum {
    JK_NEVER,    /* nothing (a false schema; an anyOf branch that cannot match) */
    JK_ANY,      /* any JSON value: the first byte picks one of the built-in nodes below */
    JK_OBJECT,   /* properties in listed order, then additional ones if allowed */
    JK_ARRAY,
    JK_STRING,
    JK_NUMBER,
    JK_INTEGER,
    JK_LITERALS, /* one of a sorted set of exact byte strings (enum, const, true/false, null) */
    JK_ANYOF,    /* any of the alternatives (oneOf is treated as anyOf) */
};

/* Built-in nodes every constraint has, at these indices. */
enum { JN_NEVER = 0, JN_ANY, JN_ANYOBJ, JN_ANYARR, JN_STR, JN_NUM, JN_BOOL, JN_NULL, JN_BUILTIN };

typedef struct jprop {
    const char *key; /* the key as it is written: JSON-encoded, quotes included */
    uint32_t key_len;
    int32_t node;
    uint8_t required;
} jprop;

typedef struct jnode {
    uint8_t kind;
    /* JK_OBJECT */
    jprop *props;       /* [n_props] in the order the schema lists them */
    int32_t *by_key;    /* [n_props] indices into props sorted by key bytes (keys are matched as a range) */
    int32_t n_props;
    int32_t additional; /* node of additional properties, or -1: none */
    /* JK_ARRAY */
    int32_t *prefix; /* [n_prefix] prefixItems */
    int32_t n_prefix;
    int32_t items;   /* node of the items after the prefix, or -1: none */
    int32_t min_items, max_items; /* max -1: no limit */
    /* JK_STRING */
    int32_t min_len, max_len;     /* characters (code points; an escape is one); max -1: no limit */
    /* JK_LITERALS: sorted by bytes (a prefix before its extensions), no duplicates */
    const char **lit;
    uint32_t *lit_len;
    int32_t n_lit;
    /* JK_ANYOF */
    int32_t *alts;
    int32_t n_alts;
} jnode;

struct tpl_arena;

struct braid_json_constraint {
    jnode *nodes;
    int32_t n_nodes, cap_nodes;
    int32_t root;
    struct tpl_arena *arena; /* keys, literals and index arrays */
};

/* Matcher limits. Nesting deeper than JM_MAX_DEPTH values cannot be produced (a recursive schema is cut there);
 * more than JM_MAX_THREADS live alternatives at once are not tracked (the rest stay valid: what is produced
 * always matches, some rare documents of wide anyOf nests cannot be). */
#define JM_MAX_DEPTH 32
#define JM_MAX_THREADS 16
/* Whitespace between two tokens of the document: one space, or a newline and at most this many spaces or tabs
 * (enough for pretty printing several levels deep, too few to loop in). */
#define JM_MAX_WS 20
/* Numbers: at most this many integer and fraction digits, and exponent digits (a model cannot loop in a
 * number either). */
#define JM_MAX_DIGITS 16
#define JM_MAX_EXP_DIGITS 3

typedef struct jframe {
    int32_t node;
    int32_t i;      /* object: next property index; array: items so far; number: digits in this part */
    int32_t lo, hi; /* literal / key range into the sorted literals or keys */
    int32_t pos;    /* literal / key: bytes matched; string: characters so far */
    int32_t key;    /* object: the property whose value comes (-1: an additional one) */
    uint8_t phase;
    uint8_t ws;     /* whitespace bytes in the current run */
    uint8_t u8;     /* UTF-8 continuation bytes still due */
    uint8_t esc;    /* 0; 1 after a backslash; 2..5: 4..1 hex digits of \u still due */
    uint8_t u8lo, u8hi; /* range of the next continuation byte */
    uint8_t gen;    /* object key: an additional (any) key is still possible */
    uint8_t hexd;   /* \u escape: the first hex digit was d/D (a surrogate follows if the next is 8-f) */
} jframe;

typedef struct jthread {
    int32_t depth;
    jframe f[JM_MAX_DEPTH];
} jthread;

typedef struct jlist {
    int32_t n;
    jthread t[JM_MAX_THREADS];
} jlist;

struct braid_json_matcher {
    const braid_json_constraint *c;
    jlist cur;
    jlist *a; /* scratch for trial feeds */
    /* token layer (json_tokens.c): the first bytes the current state accepts, cached per state version */
    uint64_t version;
    uint64_t first_version;
    uint8_t first_ok[256];
    uint8_t *mask; /* [n_mask] allowed flags for a full mask */
    int32_t n_mask;
};

/* Feeds bytes to a copy of m's state in m's scratch; 1 if the document stays a valid prefix. On success the
 * new state is in *out (m's scratch list, valid until the next trial). */
int bd_jm_try(braid_json_matcher *m, const uint8_t *p, size_t n, jlist **out);
/* 1 if the state could end here (the document is complete). */
int bd_jm_list_complete(const braid_json_constraint *c, const jlist *l);
/* 1 if the document is complete and nothing but whitespace can follow. */
int bd_jm_closed(const braid_json_matcher *m);

#endif
