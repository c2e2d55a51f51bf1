/* relocator._frames: the relocator's compiled intake (frames.c), bound to Python.
 *
 * The frame scanner cuts a stream of length-prefixed Sereal documents and checks each
 * one's header; relocator/wire.py holds the reference in Python, which this equals
 * (relocator/DESIGN.md). It reads headers with the codec's header-only readers. */
#include "frames.h"
#include "pymodule.h"

static PyMethodDef methods[] = {
    SRL_METHOD("scan_frames", srl_py_scan_frames,
        "scan_frames(buffer, max_frame_bytes) -> (consumed, data, heads, malformed,"
        " oversized, too_large, not_a_dict)\n\n"
        "The relocator's intake: complete length-prefixed frames, checked and grouped"
        " by header."),
    SRL_METHOD("event_verdicts", srl_py_event_verdicts,
        "event_verdicts(documents, max_bytes) -> bytes\n\n"
        "One code per event document, from its first bytes: 0 a hash, 1 too large, 2"
        " not a hash, 3 compressed, 4 unreadable."),
    SRL_METHOD("frame_positions", srl_py_frame_positions,
        "frame_positions(offsets, base) -> bytes\n\n"
        "base + each native uint32 of offsets, as native uint64."),
    SRL_METHODS_END,
};

SRL_SIMPLE_MODULE(_frames, "relocator._frames",
                  "The relocator's compiled frame scanner (see relocator/DESIGN.md).", methods)
