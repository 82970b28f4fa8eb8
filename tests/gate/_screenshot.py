"""Screenshots of an X display as PNG files, from ``xwd`` output, without image libraries."""

from __future__ import annotations

import struct
import subprocess
import zlib
from pathlib import Path

_HEADER_FIELDS = 25


def _shift(mask: int) -> tuple[int, int]:
    shift = (mask & -mask).bit_length() - 1
    return shift, (mask >> shift).bit_length()


def xwd_to_rgb(data: bytes) -> tuple[int, int, bytes]:
    """Decode a ZPixmap, TrueColor ``xwd`` dump to (width, height, RGB bytes)."""
    header = struct.unpack(f">{_HEADER_FIELDS}I", data[: _HEADER_FIELDS * 4])
    header_size, _version, pixmap_format, _depth, width, height = header[:6]
    byte_order, bits_per_pixel, bytes_per_line = header[7], header[11], header[12]
    red_mask, green_mask, blue_mask = header[14:17]
    ncolors = header[19]
    if pixmap_format != 2 or bits_per_pixel not in (24, 32):
        raise ValueError(f"unsupported xwd image: format {pixmap_format}, {bits_per_pixel} bpp")
    offset = header_size + ncolors * 12
    step = bits_per_pixel // 8
    endian = "little" if byte_order == 0 else "big"
    channels = [_shift(mask) for mask in (red_mask, green_mask, blue_mask)]
    rgb = bytearray()
    for y in range(height):
        row = data[offset + y * bytes_per_line : offset + y * bytes_per_line + width * step]
        for x in range(0, width * step, step):
            pixel = int.from_bytes(row[x : x + step], endian)
            for shift, bits in channels:
                value = (pixel >> shift) & ((1 << bits) - 1)
                rgb.append(value * 255 // ((1 << bits) - 1))
    return width, height, bytes(rgb)


def write_png(path: Path, width: int, height: int, rgb: bytes) -> None:
    """Write 8-bit RGB pixels as a PNG file."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return (
            struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
        )

    stride = width * 3
    raw = b"".join(b"\x00" + rgb[y * stride : (y + 1) * stride] for y in range(height))
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw, 6))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(png + chunk(b"IEND", b""))


def screenshot(display: str, path: Path) -> tuple[int, int, bytes]:
    """Capture the whole screen of ``display`` to ``path``; return its pixels."""
    dump = subprocess.run(
        ["xwd", "-root", "-silent", "-display", display], check=True, capture_output=True
    ).stdout
    width, height, rgb = xwd_to_rgb(dump)
    write_png(path, width, height, rgb)
    return width, height, rgb
