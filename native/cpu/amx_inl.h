// AMX tiles as the int8 (gemm_int8.cpp: tdpbusd) and bf16 (gemm.cpp: tdpbf16ps) kernels use them: a
// block of C of 16 or 32 rows (kRowTiles 1 or 2) by 32 columns in four 16 x 16 tiles of 32-bit sums
// (0-3: rows 0-15 / 16-31 by columns 0-15 / 16-31), fed per step by two A tiles (4, 5: 16 rows of 64
// bytes, the block's rows 0-15 and 16-31) and two B tiles (6, 7: 16 rows of 64 bytes, its columns
// 0-15 and 16-31, 64 bytes apart in each B row), each used twice; every load before the products.
// Tile state is per thread: amx_configure before a kernel's first tile instruction, _tile_release()
// after its last. (The attention core, attention.cpp, takes only amx_configure: its tiles are its own.)
// Dimension key: lda, ldb, ldo row strides in bytes of the A, B and output rows.
// Include inside the kernel namespace of a pass whose target has amx-tile and the product's unit.
#pragma once

// Every tile 16 rows of 64 bytes (palette 1).
inline void amx_configure() {
  struct {
    uint8_t palette = 1, start_row = 0;
    uint8_t reserved[14] = {};
    uint16_t bytes_per_row[16] = {};
    uint8_t rows[16] = {};
  } config;
  for (int t = 0; t < 8; ++t) config.bytes_per_row[t] = 64, config.rows[t] = 16;
  _tile_loadconfig(&config);
}

// A B operand's last rows % 16 rows (of `rows` in all, each 128 bytes: one 32-column panel) as a
// whole step: tail [16][128 bytes], zero rows after them (past the operand lie the next panel or the
// buffer's end). Nothing to do when rows is a multiple of 16.
inline void amx_b_tail(const void* b, int64_t rows, void* tail) {
  constexpr int64_t kRow = 128;
  const int64_t full = rows / 16 * 16, left = rows - full;
  if (left == 0) return;
  std::memcpy(tail, static_cast<const char*>(b) + full * kRow, left * kRow);
  std::memset(static_cast<char*>(tail) + left * kRow, 0, (16 - left) * kRow);
}

// out (32 or 16 rows of 32 sums, ldo apart) = Σ over steps s of A(s) B(s): the A rows at a_at(s)
// (lda apart; the second row tile 16 rows on), the B rows at b_at(s) (ldb apart). Product's upper()
// and lower() are the unit's tile products (tdpbusd, tdpbf16ps) into tiles 0, 1 from 4 and into 2, 3
// from 5, by 6 and 7 (the intrinsics take the tile numbers as literals).
template <int kRowTiles, class Product, class AAt, class BAt>
inline void amx_block_sums(int64_t steps, AAt&& a_at, int64_t lda, BAt&& b_at, int64_t ldb, void* out, int64_t ldo) {
  _tile_zero(0);
  _tile_zero(1);
  if constexpr (kRowTiles == 2) {
    _tile_zero(2);
    _tile_zero(3);
  }
  for (int64_t s = 0; s < steps; ++s) {
    const char* a = reinterpret_cast<const char*>(a_at(s));
    const char* b = reinterpret_cast<const char*>(b_at(s));
    _tile_loadd(4, a, lda);
    _tile_loadd(6, b, ldb);
    _tile_loadd(7, b + 64, ldb);
    if constexpr (kRowTiles == 2) _tile_loadd(5, a + 16 * lda, lda);
    Product::upper();
    if constexpr (kRowTiles == 2) Product::lower();
  }
  char* o = static_cast<char*>(out);
  _tile_stored(0, o, ldo);
  _tile_stored(1, o + 64, ldo);
  if constexpr (kRowTiles == 2) {
    _tile_stored(2, o + 16 * ldo, ldo);
    _tile_stored(3, o + 16 * ldo + 64, ldo);
  }
}
