"""A JPEG whose scan is damaged is skipped at conversion, with the reason (bug 7).

TF's decoders fill the damaged part with gray and only log libjpeg's warning;
before the fix such files passed `convert` (only a missing EOI was caught).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tfpipe.convert import convert
from tfpipe.errors import InputError


def _damaged(data: bytes) -> dict[str, bytes]:
    sos = data.index(b"\xff\xda")
    start = sos + 2 + int.from_bytes(data[sos + 2:sos + 4], "big")
    mid = (start + data.rindex(b"\xff\xd9")) // 2
    eoi_mid = bytearray(data)
    eoi_mid[mid:mid + 2] = b"\xff\xd9"  # "Corrupt JPEG data: premature end of data segment"
    zeros = bytearray(data)
    zeros[mid:mid + 512] = bytes(512)
    return {"eoi_mid.jpg": bytes(eoi_mid), "cut.jpg": data[:mid] + b"\xff\xd9",
            "zeros.jpg": bytes(zeros)}


def test_damaged_scans_are_skipped_with_reason(folder_copy: Path, tmp_path: Path) -> None:
    import tensorflow as tf

    cls = sorted(p for p in folder_copy.iterdir())[2]
    good = max(cls.glob("*.jpg"), key=lambda p: p.stat().st_size).read_bytes()
    bad = _damaged(good)
    for name, data in bad.items():
        tf.io.decode_jpeg(data)  # the premise: TF decodes it without an error
        (cls / name).write_bytes(data)
    m = convert(folder_copy, tmp_path / "out", workers=1)
    skipped = {s.input: s.reason for s in m.splits["train"].skipped}
    for name in bad:
        reason = skipped[f"{cls.name}/{name}"]
        assert reason.startswith("damaged JPEG scan"), reason
        assert "Corrupt JPEG data" in reason
    assert m.num_records["train"] == 32  # the 32 good images, none of the damaged
    with pytest.raises(InputError, match=f"{cls.name}/(eoi_mid|cut|zeros).jpg.*damaged JPEG"):
        convert(folder_copy, tmp_path / "raise", workers=2, on_error="raise")
