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
