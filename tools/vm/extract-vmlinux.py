#!/usr/bin/env python3
"""Writes the uncompressed kernel ELF found inside a bzImage (Debian's vmlinuz) to OUT.

QEMU boots that ELF directly through its PVH entry note, which saves the in-guest decompression (several seconds
under TCG). Usage: extract-vmlinux.py VMLINUZ OUT. Exit 1 when no compressed ELF payload is found.
"""
import lzma
import subprocess
import sys
import zlib


def candidates(image):
    """(offset, decompressor) for every compression magic in the image."""
    decoders = {
        b"\xfd7zXZ\x00": lambda blob: lzma.LZMADecompressor(format=lzma.FORMAT_XZ).decompress(blob),
        b"\x1f\x8b\x08": lambda blob: zlib.decompressobj(47).decompress(blob),
        b"\x28\xb5\x2f\xfd": lambda blob: subprocess.run(
            ["zstd", "-qdc"], input=blob, capture_output=True, check=False).stdout,
    }
    for magic, decode in decoders.items():
        at = image.find(magic)
        while at >= 0:
            yield at, decode
            at = image.find(magic, at + 1)


def main():
    source, target = sys.argv[1], sys.argv[2]
    with open(source, "rb") as handle:
        image = handle.read()
    for offset, decode in candidates(image):
        try:
            payload = decode(image[offset:])
        except (lzma.LZMAError, zlib.error, OSError, EOFError):
            continue
        if payload[:4] == b"\x7fELF":
            with open(target, "wb") as handle:
                handle.write(payload)
            return 0
    return 1


if __name__ == "__main__":
    sys.exit(main())
