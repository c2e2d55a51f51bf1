/* The tag table (tags.h) as data: each tag's shape, indexed by its low 7 bits. */
#include "tags.h"

/* Every byte 0x00-0x7f is named exactly once: the counts add up to 128 here, and an
 * overlap is a -Woverride-init warning (-Wextra) below. */
#define SRL_COUNT_TAG_(name, byte, kind) +1
#define SRL_COUNT_RANGE_(name, low, count, kind) +(count)
_Static_assert(0 SRL_TAGS(SRL_COUNT_TAG_) SRL_TAG_RANGES(SRL_COUNT_RANGE_) == 128,
               "SRL_TAGS and SRL_TAG_RANGES must name each of the 128 tag bytes once");

const uint32_t srl_tag_shapes[128] = {
#define SRL_TAG_SHAPE_(name, byte, kind) [byte] = SRL_SHAPE_##kind,
    SRL_TAGS(SRL_TAG_SHAPE_)
#define SRL_RANGE_SHAPE_(name, low, count, kind) [low ... low + count - 1] = SRL_SHAPE_##kind,
    SRL_TAG_RANGES(SRL_RANGE_SHAPE_)
};
