/**
 * A minimal protocol-buffers writer: the wire types the TensorBoard messages use (varint, 64-bit,
 * length-delimited, 32-bit), field by field, into a growing byte buffer. Fields are written in the
 * order the caller gives; default values are the caller's to skip (proto3 omits them).
 */

const utf8 = new TextEncoder();

const enum Wire {
  Varint = 0,
  Fixed64 = 1,
  Bytes = 2,
  Fixed32 = 5,
}

/** Builds one message; `finish()` returns its bytes. */
export class ProtoWriter {
  private buf = new Uint8Array(64);
  private len = 0;

  private reserve(n: number): void {
    if (this.len + n <= this.buf.length) return;
    const next = new Uint8Array(Math.max(this.buf.length * 2, this.len + n));
    next.set(this.buf.subarray(0, this.len));
    this.buf = next;
  }

  /** A varint of a non-negative safe integer or bigint (int32/int64 fields, negative values excluded). */
  private varint(v: number | bigint): void {
    let x = BigInt(v);
    if (x < 0n) x &= 0xffffffffffffffffn; // two's complement, 10 bytes
    this.reserve(10);
    while (x >= 0x80n) {
      this.buf[this.len++] = Number(x & 0x7fn) | 0x80;
      x >>= 7n;
    }
    this.buf[this.len++] = Number(x);
  }

  private tag(field: number, wire: Wire): void {
    this.varint((field << 3) | wire);
  }

  /** An int32/int64/enum/bool field. */
  int(field: number, v: number | bigint | boolean): this {
    this.tag(field, Wire.Varint);
    this.varint(typeof v === 'boolean' ? Number(v) : v);
    return this;
  }

  /** A fixed-width field of `size` bytes, written by `put` (little-endian). */
  private fixed(field: number, wire: Wire, size: number, put: (view: DataView, at: number) => void): this {
    this.tag(field, wire);
    this.reserve(size);
    put(new DataView(this.buf.buffer, this.buf.byteOffset), this.len);
    this.len += size;
    return this;
  }

  /** A double field. */
  double(field: number, v: number): this {
    return this.fixed(field, Wire.Fixed64, 8, (view, at) => view.setFloat64(at, v, true));
  }

  /** A float field. */
  float(field: number, v: number): this {
    return this.fixed(field, Wire.Fixed32, 4, (view, at) => view.setFloat32(at, v, true));
  }

  /** A bytes field, or an embedded message given as its bytes. */
  bytes(field: number, v: Uint8Array): this {
    this.tag(field, Wire.Bytes);
    this.varint(v.length);
    this.reserve(v.length);
    this.buf.set(v, this.len);
    this.len += v.length;
    return this;
  }

  /** A string field (UTF-8). */
  string(field: number, v: string): this {
    return this.bytes(field, utf8.encode(v));
  }

  /** An embedded message built by `build`. */
  message(field: number, build: (w: ProtoWriter) => void): this {
    const w = new ProtoWriter();
    build(w);
    return this.bytes(field, w.finish());
  }

  /** A packed repeated double field. */
  packedDoubles(field: number, values: ArrayLike<number>): this {
    const bytes = new Uint8Array(values.length * 8), view = new DataView(bytes.buffer);
    for (let i = 0; i < values.length; i++) view.setFloat64(i * 8, values[i], true);
    return this.bytes(field, bytes);
  }

  /** The message's bytes. */
  finish(): Uint8Array {
    return this.buf.slice(0, this.len);
  }
}
