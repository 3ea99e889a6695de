#!/usr/bin/env python3
"""Writes the first N images of Fashion-MNIST IDX files as a folder of PNG files, one
subfolder per label (ROOT/<label>/<index>.png, 8-bit grayscale, written with zlib and struct
only), and the same N images as IDX files in the order a folder import reads them (sorted by
label, then index), so both imports can be compared bit for bit.

usage: idx_to_png_folder.py IMAGES.gz LABELS.gz COUNT ROOT OUT_IMAGES.gz OUT_LABELS.gz
"""
import gzip
import struct
import sys
import zlib


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndims = data[3]
    dims = struct.unpack(">" + "I" * ndims, data[4:4 + 4 * ndims])
    return dims, data[4 + 4 * ndims:]


def png_chunk(kind, payload):
    return struct.pack(">I", len(payload)) + kind + payload + struct.pack(">I", zlib.crc32(kind + payload))


def gray_png(width, height, pixels):
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)  # 8-bit gray, no interlace
    rows = b"".join(b"\x00" + pixels[y * width:(y + 1) * width] for y in range(height))
    return (b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", header) + png_chunk(b"IDAT", zlib.compress(rows, 6)) +
            png_chunk(b"IEND", b""))


def write_idx(path, dims, payload):
    with gzip.open(path, "wb") as f:
        f.write(bytes([0, 0, 8, len(dims)]) + struct.pack(">" + "I" * len(dims), *dims) + payload)


def main():
    images_path, labels_path, count, root, out_images, out_labels = sys.argv[1:]
    count = int(count)
    (n, height, width), pixels = read_idx(images_path)
    _, labels = read_idx(labels_path)
    size = height * width
    import os
    for label in sorted(set(labels[:count])):
        os.makedirs(os.path.join(root, str(label)), exist_ok=True)
    for i in range(count):
        with open(os.path.join(root, str(labels[i]), "%05d.png" % i), "wb") as f:
            f.write(gray_png(width, height, pixels[i * size:(i + 1) * size]))
    order = sorted(range(count), key=lambda i: (str(labels[i]), "%05d.png" % i))
    write_idx(out_images, (count, height, width), b"".join(pixels[i * size:(i + 1) * size] for i in order))
    write_idx(out_labels, (count,), bytes(labels[i] for i in order))


if __name__ == "__main__":
    main()
