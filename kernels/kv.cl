// KV-cache writes: kv_append (rows at slots, converted to the cache dtype) and kv_compact
// (in-place gather of kept slots per kv head).

// Work-item (e, t): element e of token t's row [n_kv_heads * head_dim] goes to slot slots[t].
// Slots outside [0, capacity) were rejected by the host; the guard keeps them from writing.
kernel void kv_append(global const uchar* src, ulong src_off, global const uchar* slots,
                      ulong slots_off, global uchar* cache, ulong cache_off, int cache_dtype,
                      int row, int n_tokens, int capacity) {
  const int e = get_global_id(0);
  const int t = get_global_id(1);
  if (e >= row || t >= n_tokens) return;
  const int slot = AT_CONST(int, slots, slots_off)[t];
  if (slot < 0 || slot >= capacity) return;
  const float value = AT_CONST(float, src, src_off)[(ulong)t * row + e];
  const ulong index = (ulong)slot * row + e;
  if (cache_dtype == DT_F16) {
    vstore_half_rte(value, index, AT(half, cache, cache_off));
  } else {
    AT(float, cache, cache_off)[index] = value;
  }
}

// In place, per kv head g: row (j, g) = row (keep[g, j], g) for j < n_keep. keep rows are
// strictly increasing, so walking j upwards never overwrites a row before it is read — but only
// in order, so each work-item owns one word column (c) of one head and walks all j itself.
// Words are 4 bytes when rows and the tensor start allow it (kv_compact_u32), else bytes.
#define KV_COMPACT(name, type)                                                                  \
  kernel void name(global uchar* cache, ulong cache_off, global const uchar* keep,              \
                   ulong keep_off, int n_kv_heads, int row_words, int n_keep, int capacity) {   \
    const int c = get_global_id(0);                                                             \
    const int g = get_global_id(1);                                                             \
    if (c >= row_words || g >= n_kv_heads) return;                                              \
    global type* rows = AT(type, cache, cache_off);                                             \
    global const int* kept = AT_CONST(int, keep, keep_off) + (ulong)g * n_keep;                 \
    for (int j = 0; j < n_keep; ++j) {                                                          \
      const int from = kept[j];                                                                 \
      if (from < 0 || from >= capacity) return;                                                 \
      rows[((ulong)j * n_kv_heads + g) * row_words + c] =                                       \
          rows[((ulong)from * n_kv_heads + g) * row_words + c];                                 \
    }                                                                                           \
  }
KV_COMPACT(kv_compact_u32, uint)
KV_COMPACT(kv_compact_u8, uchar)
