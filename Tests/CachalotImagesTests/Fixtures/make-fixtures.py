#!/usr/bin/env python3
"""Makes the committed image fixtures: the kinds our own encoders cannot write.

Run from this directory: python3 make-fixtures.py  (needs `pip install pillow pypng`).

PNGs are 8 x 6 pixels whose channels follow `value(x, y, channel)` below, the formula the tests
check them against. JPEGs are 32 x 24 pixels of 4 x 3 flat blocks of 8 x 8, colored by
`block(bx, by)`, so that they decode close to their colors.
"""

import png
from PIL import Image


def value(x, y, channel):
    """A channel of pixel (x, y): 0 red, 1 green, 2 blue, 3 alpha; at most 150."""
    return [x * 18, y * 25, 150 - x * 10 - y * 5, 30 + x * 10 + y * 5][channel]


def rows(channels, depth=8):
    scale = 257 if depth == 16 else 1
    offset = 100 if depth == 16 else 0  # below the high byte: 8-bit readers drop it
    return [[value(x, y, c) * scale + offset for x in range(8) for c in channels] for y in range(6)]


# Interlaced (Adam7) RGBA.
png.Writer(8, 6, alpha=True, greyscale=False, interlace=True).write(
    open("interlaced-rgba.png", "wb"), rows([0, 1, 2, 3]))
# 16-bit RGB, and 16-bit gray (gray is the red formula).
png.Writer(8, 6, greyscale=False, bitdepth=16).write(open("rgb16.png", "wb"), rows([0, 1, 2], 16))
png.Writer(8, 6, greyscale=True, bitdepth=16).write(open("gray16.png", "wb"), rows([0], 16))
# Gray with alpha (gray is red, alpha is alpha).
png.Writer(8, 6, greyscale=True, alpha=True).write(open("gray-alpha.png", "wb"), rows([0, 3]))
# Palette with transparency: index = x + 8 * y, palette entry i = pixel (i % 8, i // 8).
palette = [tuple(value(i % 8, i // 8, c) for c in range(4)) for i in range(48)]
png.Writer(8, 6, palette=palette, bitdepth=8).write(
    open("palette.png", "wb"), [[x + 8 * y for x in range(8)] for y in range(6)])
# 1-bit gray: x + y odd is white.
png.Writer(8, 6, greyscale=True, bitdepth=1).write(
    open("gray1.png", "wb"), [[(x + y) % 2 for x in range(8)] for y in range(6)])


def block(bx, by):
    return (bx * 60 + 20, by * 90 + 20, 200 - bx * 40)


def blocks(mode):
    image = Image.new("RGB", (32, 24))
    for by in range(3):
        for bx in range(4):
            image.paste(block(bx, by), (bx * 8, by * 8, bx * 8 + 8, by * 8 + 8))
    return image.convert(mode)


blocks("RGB").save("progressive.jpg", quality=95, progressive=True, subsampling=0)
blocks("L").save("gray.jpg", quality=95)
# CMYK, which the decoder refuses.
blocks("CMYK").save("cmyk.jpg", quality=95)


def textured():
    """128 x 96 pixels of gradients with a fine texture: AC coefficients in every block."""
    image = Image.new("RGB", (128, 96))
    image.putdata([
        ((x * 2 + (x * 7 + y * 13) % 17) % 256, (y * 2 + (x * 7 + y * 13) % 17) % 256, (x + y + 64) % 256)
        for y in range(96) for x in range(128)
    ])
    return image


# A progressive JPEG with restart markers inside its scans, chroma subsampled 2 x 2 (4:2:0), and
# the same picture as a baseline JPEG: the same quality and subsampling give the same
# coefficients, so both decode to the same pixels.
textured().save("progressive-restarts.jpg", quality=90, progressive=True, subsampling=2, restart_marker_blocks=3)
textured().save("baseline.jpg", quality=90, subsampling=2)


# WebP: the JPEG blocks, lossy; the PNG pattern with its alpha, lossless.
blocks("RGB").save("blocks.webp", quality=95)
pattern = Image.new("RGBA", (8, 6))
pattern.putdata([tuple(value(x, y, c) for c in range(4)) for y in range(6) for x in range(8)])
pattern.save("pattern-alpha.webp", lossless=True)
# AVIF: the JPEG blocks, at a high quality.
blocks("RGB").save("blocks.avif", quality=95)


def frame(index):
    """Frame `index` of the animations: the PNG pattern, opaque, shifted by 40 levels a frame."""
    image = Image.new("RGB", (8, 6))
    image.putdata([tuple((value(x, y, c) + 40 * index) % 256 for c in range(3)) for y in range(6) for x in range(8)])
    return image


# An animated WebP of three frames, lossless, shown 50, 100 and 200 ms, played twice.
frame(0).save("animated.webp", save_all=True, append_images=[frame(1), frame(2)], duration=[50, 100, 200],
              loop=2, lossless=True)


# GIFs are written here byte by byte, so that every field the decoder reads is the test's to set.
def lzw(indices, bits):
    """GIF's LZW of `indices` with a minimum code size of `bits`: a clear code before each code,
    so that every code has `bits` + 1 bits (valid, if not small)."""
    clear, end, size = 1 << bits, (1 << bits) + 1, bits + 1
    codes = []
    for index in indices:
        codes += [clear, index]
    codes.append(end)
    value, count, out = 0, 0, bytearray()
    for code in codes:
        value |= code << count
        count += size
        while count >= 8:
            out.append(value & 0xFF)
            value >>= 8
            count -= 8
    if count:
        out.append(value)
    blocks = bytearray([bits])
    for start in range(0, len(out), 255):
        chunk = out[start:start + 255]
        blocks += bytes([len(chunk)]) + chunk
    return bytes(blocks + b"\0")


def gif(width, height, palette, frames, loop=None):
    """A GIF89a with a global palette (up to 16 colors) and frames of (left, top, width, height,
    indices, disposal, transparent index or None, delay in hundredths, interlaced)."""
    palette = palette + [(0, 0, 0)] * (16 - len(palette))
    out = bytearray(b"GIF89a") + width.to_bytes(2, "little") + height.to_bytes(2, "little")
    out += bytes([0xF3, 0, 0]) + bytes(c for color in palette for c in color)
    if loop is not None:
        out += b"\x21\xFF\x0BNETSCAPE2.0\x03\x01" + loop.to_bytes(2, "little") + b"\0"
    for left, top, w, h, indices, disposal, transparent, delay, interlaced in frames:
        flags = (disposal << 2) | (1 if transparent is not None else 0)
        out += bytes([0x21, 0xF9, 4, flags]) + delay.to_bytes(2, "little") + bytes([transparent or 0, 0])
        out += b"\x2C" + b"".join(v.to_bytes(2, "little") for v in (left, top, w, h))
        if interlaced:
            rows = [y for start, step in ((0, 8), (4, 8), (2, 4), (1, 2)) for y in range(start, h, step)]
            indices = [indices[y * w + x] for y in rows for x in range(w)]
        out += bytes([0x40 if interlaced else 0]) + lzw(indices, 4)
    return bytes(out + b"\x3B")


# Colors: 0 red, 1 green, 2 blue, 3 white, 4 black. A still 8 x 6 GIF, interlaced, whose index is
# (x + y) % 4 with index 3 transparent.
colors = [(255, 0, 0), (0, 255, 0), (0, 0, 255), (255, 255, 255), (0, 0, 0)]
open("still-interlaced.gif", "wb").write(gif(8, 6, colors, [
    (0, 0, 8, 6, [(x + y) % 4 for y in range(6) for x in range(8)], 1, 3, 0, True)]))
# An animation on a 4 x 4 canvas, played for ever:
# 1. the whole canvas red, kept (disposal 1), 50 ms;
# 2. a green 2 x 2 at (1, 1), cleared to transparent after (disposal 2), delay 0 (shown 100 ms);
# 3. a blue 2 x 2 at (2, 2) whose top-left pixel is transparent, restored after (disposal 3), 200 ms;
# 4. a black 1 x 1 at (0, 0), 300 ms.
open("animated.gif", "wb").write(gif(4, 4, colors, [
    (0, 0, 4, 4, [0] * 16, 1, None, 5, False),
    (1, 1, 2, 2, [1] * 4, 2, None, 0, False),
    (2, 2, 2, 2, [3, 2, 2, 2], 3, 3, 20, False),
    (0, 0, 1, 1, [4], 1, None, 30, False),
], loop=0))
# A still 8 x 6 GIF, not interlaced, whose one frame of 5 x 4 at (5, 3) runs past the canvas's
# right and bottom edges (clipped), index (x + y) % 4 with index 3 transparent; the rest of the
# canvas is transparent.
open("clipped.gif", "wb").write(gif(8, 6, colors, [
    (5, 3, 5, 4, [(x + y) % 4 for y in range(4) for x in range(5)], 1, 3, 0, False)]))

# An animated WebP whose first frame does not cover its canvas: blocks.webp (32 x 24) at (4, 2),
# then at (0, 0); the canvas is 36 x 26 (needs webpmux, from Debian's `webp`).
import subprocess  # noqa: E402
subprocess.run(["webpmux", "-frame", "blocks.webp", "+100+4+2", "-frame", "blocks.webp", "+100+0+0",
                "-loop", "0", "-bgcolor", "0,0,0,0", "-o", "offset-frame.webp"], check=True)
