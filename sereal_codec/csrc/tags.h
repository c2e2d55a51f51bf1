/* The Sereal tag table, once for the whole C core (sereal_codec/DESIGN.md, "C core:
 * one tag table"). Everything about a tag that is not one walker's own action comes from
 * here: its byte (the SRL_* constants), its kind (what it means, SrlKind) and its shape
 * (what follows the tag byte and how many items it holds, for the walkers that skip).
 *
 * A new tag is one line in SRL_TAGS (a synonym of an existing meaning: its kind, done;
 * a new meaning: a new kind in SRL_KINDS, and then every walker that switches on kinds
 * fails to compile until it says what the kind does: -Wswitch is an error below). A new
 * document type (compression) is one line in SRL_DOC_TYPES. sereal_codec/tags.py is
 * the Python side, held to these tables by tests/unit/sereal_codec/test_tag_table.py (which
 * parses this file), and the walkers by tests/unit/sereal_codec/test_walker_tags.py. */
#ifndef SRL_TAGS_H
#define SRL_TAGS_H

#include <stdint.h>

/* K(kind, payload, size, items, per): one per meaning a tag can have.
 *   payload: what follows the tag byte: NONE; VARINT (a number or an offset); FIXED
 *            (`size` bytes); LEN (a varint length, then that many bytes); INLINE (the
 *            low 5 bits of the tag are the length); COUNT (a varint count of items);
 *            NIBBLE (the low 4 bits of the tag are the count); PAD (not an item: skipped
 *            before any tag); BAD (not supported: UnknownTag).
 *   items:   items that follow the payload (a REFN's target, an object's class name and
 *            value, a regexp's pattern and flags), plus `per` x the count (COUNT,
 *            NIBBLE: 1 for arrays, 2 for hashes, key and value). */
#define SRL_KINDS(K)                                                                   \
    K(POS, NONE, 0, 0, 0)                /* POS_0..POS_15: 0..15 */                    \
    K(NEG, NONE, 0, 0, 0)                /* NEG_16..NEG_1: -16..-1 */                  \
    K(VARINT, VARINT, 0, 0, 0)           /* unsigned 64-bit */                         \
    K(ZIGZAG, VARINT, 0, 0, 0)           /* signed 64-bit */                           \
    K(FLOAT, FIXED, 4, 0, 0)             /* IEEE single, little-endian */              \
    K(DOUBLE, FIXED, 8, 0, 0)            /* IEEE double, little-endian */              \
    K(LONG_DOUBLE, FIXED, 16, 0, 0)      /* x86 80-bit in 16 bytes */                  \
    K(FLOAT_128, FIXED, 16, 0, 0)        /* IEEE quad */                               \
    K(UNDEF, NONE, 0, 0, 0)              /* None */                                    \
    K(TRUE, NONE, 0, 0, 0)                                                             \
    K(FALSE, NONE, 0, 0, 0)                                                            \
    K(BINARY, LEN, 0, 0, 0)              /* bytes, per the binary mode */              \
    K(STR_UTF8, LEN, 0, 0, 0)            /* UTF-8 text */                              \
    K(SHORT_BINARY, INLINE, 0, 0, 0)     /* BINARY of 0..31 bytes */                   \
    K(REFN, NONE, 0, 1, 0)               /* a reference to the next item */            \
    K(WEAKEN, NONE, 0, 1, 0)             /* the next item, weakened */                 \
    K(REFP, VARINT, 0, 0, 0)             /* a reference to a tracked item */           \
    K(ALIAS, VARINT, 0, 0, 0)            /* a tracked item itself */                   \
    K(COPY, VARINT, 0, 0, 0)             /* a string read earlier, again */            \
    K(ARRAY, COUNT, 0, 0, 1)                                                           \
    K(HASH, COUNT, 0, 0, 2)                                                            \
    K(ARRAYREF, NIBBLE, 0, 0, 1)         /* REFN ARRAY of 0..15 items */               \
    K(HASHREF, NIBBLE, 0, 0, 2)          /* REFN HASH of 0..15 pairs */                \
    K(OBJECT, NONE, 0, 2, 0)             /* class name, value */                       \
    K(OBJECTV, VARINT, 0, 1, 0)          /* offset of a class name, value */           \
    K(REGEXP, NONE, 0, 2, 0)             /* pattern, flags */                          \
    K(PAD, PAD, 0, 0, 0)                                                               \
    K(UNSUPPORTED, BAD, 0, 0, 0)         /* MANY, EXTEND, reserved: UnknownTag */

/* The kind groups: kinds every walker decides alike (DESIGN.md, "C core: one tag
 * table"). Case labels for a switch on SrlKind (`SRL_CASE_NUMBER:`); -Wswitch still
 * checks that a switch names every kind, through its groups or one by one.
 *   STRING     the bytes are the item (a key, class name, regexp part, COPY target)
 *   WIDE_NUMBER a number with a payload (VARINT, ZIGZAG and the floats)
 *   NUMBER     WIDE_NUMBER and the small integers in the tag (POS, NEG)
 *   CONSTANT   undef, true, false: no payload, no Python object built
 *   CONTAINER  ARRAY / HASH with a varint count; CONTAINER_REF: the REFN ARRAY / REFN
 *              HASH of up to 15 in one byte (ARRAYREF / HASHREF)
 *   OBJECT     OBJECT and OBJECTV (and their FREEZE forms)
 *   ELSEWHERE  what depends on items elsewhere (tracked targets, blessing, cycles) or
 *              is rare, and what is no item: the fast walks (query, Variant) hand these
 *              to their full walker. */
#define SRL_CASE_STRING case SRL_K_SHORT_BINARY: case SRL_K_BINARY: case SRL_K_STR_UTF8
#define SRL_CASE_WIDE_NUMBER                                                           \
    case SRL_K_VARINT: case SRL_K_ZIGZAG: case SRL_K_FLOAT: case SRL_K_DOUBLE:         \
    case SRL_K_LONG_DOUBLE: case SRL_K_FLOAT_128
#define SRL_CASE_NUMBER case SRL_K_POS: case SRL_K_NEG: SRL_CASE_WIDE_NUMBER
#define SRL_CASE_CONSTANT case SRL_K_UNDEF: case SRL_K_TRUE: case SRL_K_FALSE
#define SRL_CASE_CONTAINER case SRL_K_ARRAY: case SRL_K_HASH
#define SRL_CASE_CONTAINER_REF case SRL_K_ARRAYREF: case SRL_K_HASHREF
#define SRL_CASE_OBJECT case SRL_K_OBJECT: case SRL_K_OBJECTV
#define SRL_CASE_ELSEWHERE                                                             \
    case SRL_K_REFP: case SRL_K_ALIAS: SRL_CASE_OBJECT: case SRL_K_WEAKEN:              \
    case SRL_K_REGEXP: case SRL_K_PAD: case SRL_K_UNSUPPORTED

/* X(NAME, byte, kind): the one-byte tags (low 7 bits; the high bit is SRL_TRACK). */
#define SRL_TAGS(X)                                                                    \
    X(VARINT, 0x20, VARINT)                                                            \
    X(ZIGZAG, 0x21, ZIGZAG)                                                            \
    X(FLOAT, 0x22, FLOAT)                                                              \
    X(DOUBLE, 0x23, DOUBLE)                                                            \
    X(LONG_DOUBLE, 0x24, LONG_DOUBLE)                                                  \
    X(UNDEF, 0x25, UNDEF)                                                              \
    X(BINARY, 0x26, BINARY)                                                            \
    X(STR_UTF8, 0x27, STR_UTF8)                                                        \
    X(REFN, 0x28, REFN)                                                                \
    X(REFP, 0x29, REFP)                                                                \
    X(HASH, 0x2a, HASH)                                                                \
    X(ARRAY, 0x2b, ARRAY)                                                              \
    X(OBJECT, 0x2c, OBJECT)                                                            \
    X(OBJECTV, 0x2d, OBJECTV)                                                          \
    X(ALIAS, 0x2e, ALIAS)                                                              \
    X(COPY, 0x2f, COPY)                                                                \
    X(WEAKEN, 0x30, WEAKEN)                                                            \
    X(REGEXP, 0x31, REGEXP)                                                            \
    X(OBJECT_FREEZE, 0x32, OBJECT)                                                     \
    X(OBJECTV_FREEZE, 0x33, OBJECTV)                                                   \
    X(NO, 0x34, FALSE)                                                                 \
    X(YES, 0x35, TRUE)                                                                 \
    X(RESERVED_0, 0x36, UNSUPPORTED)                                                   \
    X(RESERVED_1, 0x37, UNSUPPORTED)                                                   \
    X(FLOAT_128, 0x38, FLOAT_128)                                                      \
    X(CANONICAL_UNDEF, 0x39, UNDEF)                                                    \
    X(FALSE, 0x3a, FALSE)                                                              \
    X(TRUE, 0x3b, TRUE)                                                                \
    X(MANY, 0x3c, UNSUPPORTED)                                                         \
    X(PACKET_START, 0x3d, UNSUPPORTED)                                                 \
    X(EXTEND, 0x3e, UNSUPPORTED)                                                       \
    X(PAD, 0x3f, PAD)

/* R(NAME, low byte, count, kind): the tags whose low bits are a value or a length;
 * SRL_<NAME>_LOW is the first. */
#define SRL_TAG_RANGES(R)                                                              \
    R(POS, 0x00, 16, POS)                                                              \
    R(NEG, 0x10, 16, NEG)                                                              \
    R(ARRAYREF, 0x40, 16, ARRAYREF)                                                    \
    R(HASHREF, 0x50, 16, HASHREF)                                                      \
    R(SHORT_BINARY, 0x60, 32, SHORT_BINARY)

/* D(NAME, type, min protocol): the document types of the header's version-type byte
 * (high nibble), how the body after the header is framed. sereal_codec/
 * compression.py opens them (the C core gets opened bodies); frames.c reads the size a
 * compressed body claims. */
#define SRL_DOC_TYPES(D)                                                               \
    D(RAW, 0, 1)         /* the body itself */                                         \
    D(SNAPPY, 1, 1)      /* protocol 1 only: the rest is one Snappy block */           \
    D(SNAPPY_INCR, 2, 1) /* <varint length><Snappy block> */                           \
    D(ZLIB, 3, 3)        /* <varint body length><varint length><zlib stream> */        \
    D(ZSTD, 4, 3)        /* <varint length><zstd frame> (Perl writes it at v3) */

#define SRL_MAGIC_V1 "=srl"     /* protocol 1 and 2 */
#define SRL_MAGIC_V3 "=\xf3rl"  /* protocol 3 and later */
#define SRL_PROTOCOL_MAX 5
#define SRL_HEADER_BIT_USER_META 0x01

typedef enum {
#define SRL_KIND_ENUM_(name, payload, size, items, per) SRL_K_##name,
    SRL_KINDS(SRL_KIND_ENUM_)
#undef SRL_KIND_ENUM_
} SrlKind;

enum {
    SRL_P_NONE, SRL_P_VARINT, SRL_P_FIXED, SRL_P_LEN, SRL_P_INLINE,
    SRL_P_COUNT, SRL_P_NIBBLE, SRL_P_PAD, SRL_P_BAD,
};

enum {
    SRL_TRACK = 0x80,
#define SRL_TAG_ENUM_(name, byte, kind) SRL_##name = byte,
    SRL_TAGS(SRL_TAG_ENUM_)
#undef SRL_TAG_ENUM_
#define SRL_RANGE_ENUM_(name, low, count, kind) SRL_##name##_LOW = low,
    SRL_TAG_RANGES(SRL_RANGE_ENUM_)
#undef SRL_RANGE_ENUM_
};

enum {
#define SRL_DOC_ENUM_(name, type, protocol) SRL_TYPE_##name = type,
    SRL_DOC_TYPES(SRL_DOC_ENUM_)
#undef SRL_DOC_ENUM_
};

/* A kind's shape packed in one int (bits: kind 0-7, payload 8-11, size 12-19, items
 * 20-21, per 22-23), so a tag's is one load from srl_tag_shapes. */
#define SRL_SHAPE_PACK_(kind, payload, size, items, per)                               \
    ((kind) | (payload) << 8 | (size) << 12 | (items) << 20 | (per) << 22)
enum {
#define SRL_SHAPE_ENUM_(name, payload, size, items, per)                               \
    SRL_SHAPE_##name = SRL_SHAPE_PACK_(SRL_K_##name, SRL_P_##payload, size, items, per),
    SRL_KINDS(SRL_SHAPE_ENUM_)
#undef SRL_SHAPE_ENUM_
};

/* Indexed by the tag's low 7 bits (tags.c). Hidden: read straight, not through the
 * shared object's symbol table, on every item that is dispatched by kind. */
extern const uint32_t srl_tag_shapes[128] __attribute__((visibility("hidden")));

static inline SrlKind
srl_tag_kind(uint8_t tag)
{
    return (SrlKind)(srl_tag_shapes[tag & 0x7f] & 0xff);
}

/* srl_shape_payload, _size, _items, _per: a shape's fields, as SRL_SHAPE_PACK_ packs them. */
#define SRL_SHAPE_FIELD_(name, shift, mask)                                            \
    static inline int srl_shape_##name(uint32_t shape) { return (int)(shape >> (shift) & (mask)); }
SRL_SHAPE_FIELD_(payload, 8, 0xf)
SRL_SHAPE_FIELD_(size, 12, 0xff)
SRL_SHAPE_FIELD_(items, 20, 3)
SRL_SHAPE_FIELD_(per, 22, 3)
#undef SRL_SHAPE_FIELD_

/* BINARY, STR_UTF8, SHORT_BINARY: what a hash key, class name, regexp part or COPY
 * target must be (F bit masked off by the caller). */
static inline int
srl_is_string_tag(uint8_t tag)
{
    int payload = srl_shape_payload(srl_tag_shapes[tag & 0x7f]);
    return payload == SRL_P_LEN || payload == SRL_P_INLINE;
}

/* A walker that switches on SrlKind without a default must name every kind: a new kind
 * is then a compile error in each walker that has not said what it does. */
#pragma GCC diagnostic error "-Wswitch"

#endif
