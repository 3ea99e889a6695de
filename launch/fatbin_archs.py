#!/usr/bin/env python3
"""The GPU code an ELF program or library carries, read from its .nv_fatbin section.

Prints one line: "sm_80 sm_90 machine code; compute_90 PTX" (the architectures of its
cubins, then of its PTX), or exits 1 when there is no .nv_fatbin section. For machines
without cuobjdump (CUDA's redistributable images leave it out): launch/gpu_bundle.sh checks
with it that a bundle holds sm_90 machine code and PTX for newer GPUs.

The section is a run of fat binary containers, one per object file that had device code:
a 16-byte header (magic 0xBA55ED50, version 1, header size 16, then the size of what
follows as a 64-bit integer) and entries, each a header of at least 64 bytes (kind at
offset 0: 1 PTX, 2 or 0x10 ELF; its own size at offset 4; its payload's padded size at
offset 8; the architecture number at offset 28) followed by its payload.
"""
import struct
import sys

MAGIC = 0xBA55ED50
PTX, ELF, ELF_ALT = 0x01, 0x02, 0x10


def fatbin_section(data):
    """The bytes of the .nv_fatbin section of a little-endian ELF64 image, or None."""
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ValueError("not a little-endian 64-bit ELF file")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)

    def section(i):
        name, _, _, _, offset, size = struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize)
        return name, offset, size

    _, names_at, _ = section(shstrndx)
    for i in range(shnum):
        name, offset, size = section(i)
        end = data.index(b"\0", names_at + name)
        if data[names_at + name:end] == b".nv_fatbin":
            return data[offset:offset + size]
    return None


def entries(section):
    """(kind, arch) of every entry of every container in the section."""
    at = 0
    while at + 16 <= len(section):
        magic, _, header, size = struct.unpack_from("<IHHQ", section, at)
        if magic != MAGIC:  # containers are 8-byte aligned: skip the padding between them
            at += 8
            continue
        entry, end = at + header, at + header + size
        while entry + 64 <= end:
            kind, _, entry_size, padded = struct.unpack_from("<HHII", section, entry)
            arch, = struct.unpack_from("<I", section, entry + 28)
            if entry_size < 64:
                break
            yield kind, arch
            entry += entry_size + padded
        at = end


def describe(path):
    with open(path, "rb") as f:
        section = fatbin_section(f.read())
    if section is None:
        return None
    cubins = sorted({arch for kind, arch in entries(section) if kind in (ELF, ELF_ALT)})
    ptx = sorted({arch for kind, arch in entries(section) if kind == PTX})
    return "{} machine code; {} PTX".format(" ".join(f"sm_{a}" for a in cubins) or "no",
                                           " ".join(f"compute_{a}" for a in ptx) or "no")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: fatbin_archs.py PROGRAM")
    text = describe(sys.argv[1])
    if text is None:
        print(f"{sys.argv[1]}: no .nv_fatbin section (no GPU code)", file=sys.stderr)
        sys.exit(1)
    print(text)
