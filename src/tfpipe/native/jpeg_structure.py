"""The pure-TF twin of jpeg_strict.cc's `ScanJpegStructure` (graph ops only), and
the fallback's check for an end marker inside a scan.

`TfpipeDecodeJpegStrict` rejects a JPEG on (a) a damaged marker structure, found
by a walk over the marker segments and the entropy-coded data (no EOI: cut;
a restart marker where no restart interval was declared, or out of sequence;
a segment length past the end), and (b) a libjpeg warning while decoding
(premature end of data segment, bad Huffman code). Without the native library
(`TFPIPE_NATIVE=0`, not built) the pipeline decodes with TF's ops, which ignore
both; `structure` gives it (a) with the same rules, so the two paths skip the
same records.

Of (b), pure TF can see one case at a reasonable cost: an EOI marker inside the
scan (bit rot on a 0xFF byte). libjpeg stops at it and fills the rest with gray;
the walk ends there with bytes left over. For those files only,
`premature_end` decodes a second time with pseudo-random entropy data put in
the EOI's place: when the rows the decode needed end before the marker both
decodes are equal (the native op sees no warning either), otherwise they
differ. A scan cut and re-closed with EOI, or zeros mid-scan, look intact to a
marker walk; only a Huffman decode finds them (the native op, `tfpipe convert`,
`tfpipe verify --deep`): docs/pipeline.md "Bad records".
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import numpy as np
import tensorflow as tf

OK, RUNNING = 0, -1
# code -> message (the native op's wording); the byte offset is appended where one is given
PROBLEMS = {
    1: "no SOI marker at the start",
    2: "file ends without an EOI marker (truncated)",
    3: "file ends before the first scan (truncated)",
    4: "expected a marker at byte",
    5: "file ends inside a marker (truncated)",
    6: "restart marker outside entropy-coded data at byte",
    7: "file ends inside a segment header (truncated)",
    8: "segment length runs past the end of the file (truncated)",
    9: "file ends inside entropy-coded data without an EOI marker (truncated)",
    10: "restart marker inside entropy-coded data but no restart interval was declared, at byte",
    11: "restart marker out of sequence at byte",
}
_MESSAGES = [""] + [PROBLEMS[k] for k in range(1, len(PROBLEMS) + 1)]


def _search(sorted_pos: tf.Tensor, values: tf.Tensor) -> tf.Tensor:
    """int32 index of the first entry >= each value (ascending int32 [k], values [m])."""
    return tf.cast(tf.searchsorted(sorted_pos, values, side="left"), tf.int32)


class Frame(NamedTuple):
    """What the walk saw of the frame (int32 / bool scalars)."""

    scans: tf.Tensor   # SOS markers
    max_v: tf.Tensor   # the largest vertical sampling factor of the first SOF
    half_v: tf.Tensor  # a component sampled at half of max_v vertically (4:2:0, 4:4:0)


ROUNDS = 32  # pointer doublings at most (a walk of 2**32 segments)


def structure(encoded: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor, Frame]:
    """Walk one JPEG's markers as ScanJpegStructure does.

    Returns (code: int32, 0 = intact, else a key of PROBLEMS; at: int32 byte offset
    the problem names, or -1; eoi: int32 offset of the EOI marker that ended the
    walk (of the 0xFF bytes before it), -1 when it failed; frame: `Frame`).

    No loop: every place a marker can start (the last 0xFF of each run of 0xFF not
    followed by 0x00... at the top level even then) is a node whose successor --
    where the walk goes next, past the segment's length or, after SOS, past the
    entropy-coded data -- is computed for all nodes at once; the walk from SOI is
    then found by pointer doubling (a few rounds: log2 of its length), and the first node on it that
    fails or ends it (EOI) gives the result. ~100 small ops per image."""
    x = tf.cast(tf.io.decode_raw(encoded, tf.uint8), tf.int32)
    n = tf.size(x)
    end = tf.reshape(n, [1])
    nxt = tf.concat([x[1:], [-1]], 0)  # the byte after each one; -1 past the end
    is_ff = tf.equal(x, 0xFF)

    def positions(mask: tf.Tensor) -> tf.Tensor:  # ascending, + the sentinel n
        return tf.concat([tf.cast(tf.reshape(tf.where(mask), [-1]), tf.int32), end], 0)

    def at(i: tf.Tensor) -> tf.Tensor:  # x[i], clipped into the file (0 for b"")
        return tf.gather(tf.concat([x, [0]], 0), tf.clip_by_value(i, 0, n))

    last = tf.logical_and(is_ff, tf.not_equal(nxt, 0xFF))  # the last 0xFF of a run
    rst_byte = tf.logical_and(nxt >= 0xD0, nxt <= 0xD7)
    non_ff = positions(tf.logical_not(is_ff))
    nodes = positions(last)  # K nodes + the sentinel
    # in entropy-coded data 0x00 after 0xFF is stuffing and RSTn a restart marker;
    # any other marker (or the file's end) ends the scan
    ends = positions(last & tf.not_equal(nxt, 0) & ~rst_byte)
    rst_at = positions(last & rst_byte)
    rst_num = tf.gather(nxt, rst_at[:-1]) - 0xD0

    k_all = tf.size(nodes)
    c = nodes
    m = tf.gather(tf.concat([nxt, [-1]], 0), c)
    body = c + 2  # the length field
    length = at(body) * 256 + at(body + 1)
    after = body + length
    is_sos, is_eoi = tf.equal(m, 0xDA), tf.equal(m, 0xD9)
    e = tf.gather(ends, tf.minimum(_search(ends, after), tf.size(ends) - 1))
    has_e = e < n - 1
    target = tf.where(is_sos, e, after)  # where the walk goes next

    def hop(t: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        """(node index, code, at) of the walk arriving at byte t: a marker (a run of
        0xFF) must start there."""
        code = tf.where(t >= n, 2, tf.where(tf.not_equal(at(t), 0xFF), 4, RUNNING))
        return _search(nodes, t), code, tf.where(tf.equal(code, 4), t, -1)

    succ, next_code, next_at = hop(target)
    # each node's own verdict, in ScanJpegStructure's order (RUNNING: go on)
    cases = [
        (tf.equal(m, -1), 5, -1),
        (is_eoi, OK, -1),
        (tf.equal(m, 0x01) | ((m >= 0xD0) & (m <= 0xD7)), 6, c),
        (body + 2 > n, 7, -1),
        ((length < 2) | (after > n), 8, -1),
        (is_sos & ~has_e, 9, -1),
    ]
    code, where_at = next_code, next_at
    for cond, cc, aa in reversed(cases):  # the first case that holds wins
        code = tf.where(cond, cc, code)
        where_at = tf.where(cond, aa, where_at)
    sentinel = tf.equal(tf.range(k_all), k_all - 1)
    code = tf.where(sentinel, 5, code)
    stop = tf.not_equal(code, RUNNING)
    succ = tf.where(stop, tf.range(k_all), tf.minimum(succ, k_all - 1))

    first, start_code, start_at = hop(tf.reshape(tf.constant(2), [1]))
    first = tf.minimum(first, k_all - 1)
    # the walk: {succ^t(first)}, by doubling (a node's set grows by its 2**i-th successor)
    def double(on: tf.Tensor, power: tf.Tensor, _: tf.Tensor):
        reach = tf.gather(power, tf.reshape(tf.where(on), [-1]))
        grown = tf.tensor_scatter_nd_update(on, tf.reshape(reach, [-1, 1]),
                                            tf.ones_like(reach, tf.bool))
        return grown, tf.gather(power, power), tf.reduce_any(tf.not_equal(grown, on))

    on = tf.scatter_nd(tf.reshape(first, [1, 1]), [True], [k_all])
    # until a round adds nothing: then every node of the walk is in (log2 of its length)
    on, _, _ = tf.while_loop(lambda on, power, grew: grew, double,
                             (on, succ, tf.constant(True)), maximum_iterations=ROUNDS)

    scan = on & is_sos

    def restarts() -> tuple[tf.Tensor, tf.Tensor]:
        """The verdicts with the restart markers of each scan on the walk: allowed
        only after a DRI on the walk (its value: the last one before the scan),
        numbered 0, 1, ..., 7, 0, ... per scan."""
        is_dri = on & tf.equal(m, 0xDD) & (length >= 4)
        dri_at = positions(is_dri)
        dri_val = tf.concat([[0], tf.boolean_mask(at(body + 2) * 256 + at(body + 3), is_dri)],
                            0)
        ri = tf.gather(dri_val, _search(dri_at, c))  # 0 = none before this node
        r0, r1 = _search(rst_at, after), _search(rst_at, e)
        scan_ids = tf.reshape(tf.where(scan), [-1])
        scan_after = tf.concat([tf.gather(after, scan_ids), end], 0)
        scan_end = tf.gather(e, scan_ids)
        s_of = _search(scan_after, rst_at[:-1] + 1) - 1  # the scan each RST may lie in
        s_ok = s_of >= 0
        s_cl = tf.maximum(s_of, 0)
        inside = s_ok & (rst_at[:-1] < tf.gather(tf.concat([scan_end, [0]], 0), s_cl))
        scan_r0 = tf.concat([tf.gather(r0, scan_ids), [0]], 0)
        rank = tf.range(tf.size(rst_num)) - tf.gather(scan_r0, s_cl)
        wrong = inside & tf.not_equal(rst_num, rank % 8)
        big = tf.fill(tf.shape(rst_num), n + 1)
        segs = tf.where(inside, s_cl, tf.size(scan_ids))  # outside any scan: a spare segment
        first_rst = tf.math.unsorted_segment_min(tf.where(inside, rst_at[:-1], big), segs,
                                                 tf.size(scan_ids) + 1)[:-1]
        first_wrong = tf.math.unsorted_segment_min(tf.where(wrong, rst_at[:-1], big), segs,
                                                   tf.size(scan_ids) + 1)[:-1]
        rst_code = tf.where((r1 > r0) & tf.equal(ri, 0), 10, RUNNING)
        rst_where = tf.scatter_nd(tf.reshape(scan_ids, [-1, 1]), first_rst, [k_all])
        rst_code = tf.where(tf.equal(rst_code, RUNNING) & tf.scatter_nd(
            tf.reshape(scan_ids, [-1, 1]), first_wrong <= n, [k_all]), 11, rst_code)
        rst_where = tf.where(tf.equal(rst_code, 11), tf.scatter_nd(
            tf.reshape(scan_ids, [-1, 1]), first_wrong, [k_all]), rst_where)
        # a bad restart marker comes before the end of its scan (case 9)
        bad_rst = scan & tf.not_equal(rst_code, RUNNING) & tf.not_equal(code, 5)
        return tf.where(bad_rst, rst_code, code), tf.where(bad_rst, rst_where, where_at)

    # most files have no restart marker at all: then none of that runs
    code, where_at = tf.cond(tf.size(rst_num) > 0, restarts, lambda: (code, where_at))

    # the result: the first node on the walk that stops it
    fin = tf.cast(tf.argmax(tf.cast(on & tf.not_equal(code, RUNNING), tf.int32)), tf.int32)
    seen_scan = tf.reduce_any(scan & (tf.range(k_all) < fin))
    result = tf.gather(code, fin)
    result = tf.where(tf.equal(result, 2) & ~seen_scan, 3, result)
    result_at = tf.gather(where_at, fin)
    soi = (n >= 4) & tf.equal(at(0), 0xFF) & tf.equal(at(1), 0xD8)
    result, result_at = (tf.where(tf.equal(start_code[0], RUNNING), result, start_code[0]),
                         tf.where(tf.equal(start_code[0], RUNNING), result_at, start_at[0]))
    result, result_at = tf.where(soi, result, 1), tf.where(soi, result_at, -1)
    # where the EOI's run of 0xFF starts (fill bytes may precede the marker)
    c_fin = tf.gather(c, fin)
    k = _search(non_ff, tf.reshape(c_fin, [1]))[0] - 1
    run = tf.where(k >= 0, tf.gather(non_ff, tf.maximum(k, 0)) + 1, 0)

    # the frame: the first SOF on the walk (C0..CF but DHT C4, JPG C8, DAC CC)
    is_sof = on & (m >= 0xC0) & (m <= 0xCF) & tf.not_equal(m, 0xC4) & \
        tf.not_equal(m, 0xC8) & tf.not_equal(m, 0xCC) & (tf.range(k_all) < fin)
    sof = tf.where(tf.reduce_any(is_sof), tf.gather(body, tf.cast(tf.argmax(
        tf.cast(is_sof, tf.int32)), tf.int32)), -100)
    nf = tf.minimum(at(sof + 7), 4)
    v = tf.stack([at(sof + 9 + 3 * i) % 16 for i in range(4)])
    v = tf.where(tf.range(4) < nf, v, 0)
    max_v = tf.maximum(tf.reduce_max(v), 1)
    half_v = tf.reduce_any(tf.equal(v * 2, max_v) & (tf.range(4) < nf))
    frame = Frame(scans=tf.reduce_sum(tf.cast(scan & (tf.range(k_all) < fin), tf.int32)),
                  max_v=max_v, half_v=half_v)
    return result, result_at, tf.where(tf.equal(result, OK), run, -1), frame


def message(code: tf.Tensor, at: tf.Tensor) -> tf.Tensor:
    """'damaged JPEG: <problem>[ <byte>]' (scalar string) for `structure`'s code."""
    text = tf.gather(tf.constant(_MESSAGES), code)
    return tf.strings.join(["damaged JPEG: ", text,
                            tf.where(at >= 0, tf.strings.join([" ", tf.strings.as_string(at)]),
                                     "")])


# Entropy-coded filler for `premature_end`: fixed pseudo-random bytes without 0xFF
# (so no marker), repeated as needed.
_PAD = np.random.default_rng(22).integers(0, 255, 4096, dtype=np.uint8).tobytes()


def rows_decoded(bottom: tf.Tensor, height: tf.Tensor, r: tf.Tensor, frame: Frame
                 ) -> tf.Tensor:
    """How many rows (of the image decoded at 1/r, `height` rows) to compare so that
    they show every iMCU row libjpeg entropy-decodes to output rows [0, bottom):
    all of them for a multi-scan file (progressive: every scan is read before
    any row is output); else the iMCU rows down to the one holding row bottom-1,
    and the next one too when fancy upsampling needs it as context and that row
    is in the iMCU row's last row group (jdmainct.c) -- less that next row's own
    last row, which depends on the iMCU row after it. Context rows: a component
    at half the vertical sampling, at full scale only (at 1/2 and below
    libjpeg-turbo decodes such a component with a larger IDCT instead of
    upsampling it, jdmaster.c; measured against the native op)."""
    imcu = frame.max_v * (8 // r)  # rows of the scaled image per iMCU row
    last = bottom - 1
    context = frame.half_v & tf.equal(r, 1)
    ahead = context & (last % imcu >= imcu - frame.max_v)
    end = tf.minimum((last // imcu + 1 + tf.cast(ahead, tf.int32)) * imcu, height)
    end = tf.where(context & (end < height), end - 1, end)
    return tf.where(frame.scans > 1, height, tf.maximum(end, bottom))


def premature_end(encoded: tf.Tensor, eoi: tf.Tensor,
                  decode: Callable[[tf.Tensor], tf.Tensor],
                  image: tf.Tensor | None = None) -> tf.Tensor:
    """Whether `decode(encoded)` (given as `image` when already computed) needed
    entropy data past the EOI marker at byte `eoi` (scalar bool): only asked when
    bytes follow that EOI (an EOI inside the scan, or data appended to an intact
    file). The file is decoded again with pseudo-random data in the marker's
    place: libjpeg fills what the marker cut off with gray, the second decode with
    other pixels; rows the decode did not need past the marker come out equal."""
    n = tf.strings.length(encoded)

    def check() -> tf.Tensor:
        reps = n // len(_PAD) + 1
        pad = tf.strings.reduce_join(tf.fill([reps], tf.constant(_PAD)))
        other = decode(tf.strings.join([tf.strings.substr(encoded, 0, eoi), pad, b"\xff\xd9"]))
        first = decode(encoded) if image is None else image
        # the same header, so the same shape
        return tf.logical_not(tf.reduce_all(tf.equal(other, first)))

    trailing = tf.logical_and(eoi >= 0, eoi + 2 < n)
    return tf.cond(trailing, check, lambda: tf.constant(False))
