// Element-wise and row-wise F32 ops: add, silu_mul, rms_norm, softmax, rope.

// out[i] = a[i] + b[i]; one work-item per element.
kernel void add_f32(global const uchar* a, ulong a_off, global const uchar* b, ulong b_off,
                    global uchar* out, ulong out_off, int n) {
  const int i = get_global_id(0);
  if (i >= n) return;
  AT(float, out, out_off)[i] = AT_CONST(float, a, a_off)[i] + AT_CONST(float, b, b_off)[i];
}

// out[i] = silu(gate[i]) * up[i], silu(x) = x / (1 + e^-x).
kernel void silu_mul_f32(global const uchar* gate, ulong gate_off, global const uchar* up,
                         ulong up_off, global uchar* out, ulong out_off, int n) {
  const int i = get_global_id(0);
  if (i >= n) return;
  const float g = AT_CONST(float, gate, gate_off)[i];
  AT(float, out, out_off)[i] = g / (1.0f + exp(-g)) * AT_CONST(float, up, up_off)[i];
}

// One work-group per row of `dim`: y = x / sqrt(mean(x²) + eps) * weight. The sum of squares is
// accumulated per work-item in float and reduced in a tree (error ~ log2(n) roundings).
kernel void rms_norm_f32(global const uchar* x, ulong x_off, global const uchar* weight,
                         ulong weight_off, global uchar* y, ulong y_off, int dim, float eps,
                         local float* scratch) {
  const int row = get_group_id(0);
  const int lid = get_local_id(0);
  const int size = get_local_size(0);
  global const float* xr = AT_CONST(float, x, x_off) + (ulong)row * dim;
  global float* yr = AT(float, y, y_off) + (ulong)row * dim;
  global const float* w = AT_CONST(float, weight, weight_off);
  float sum = 0.0f;
  for (int i = lid; i < dim; i += size) sum += xr[i] * xr[i];
  sum = group_sum(sum, scratch);
  const float inverse = 1.0f / sqrt(sum / (float)dim + eps);
  // y may alias x: every work-item reads its own elements before writing them.
  for (int i = lid; i < dim; i += size) yr[i] = xr[i] * inverse * w[i];
}

// One work-group per row of n: y = exp(x - max) / sum.
kernel void softmax_f32(global const uchar* x, ulong x_off, global uchar* y, ulong y_off, int n,
                        local float* scratch) {
  const int row = get_group_id(0);
  const int lid = get_local_id(0);
  const int size = get_local_size(0);
  global const float* xr = AT_CONST(float, x, x_off) + (ulong)row * n;
  global float* yr = AT(float, y, y_off) + (ulong)row * n;
  float local_max = -INFINITY;
  for (int i = lid; i < n; i += size) local_max = fmax(local_max, xr[i]);
  const float row_max = group_max(local_max, scratch);
  float sum = 0.0f;
  for (int i = lid; i < n; i += size) sum += exp(xr[i] - row_max);
  sum = group_sum(sum, scratch);
  const float inverse = 1.0f / sum;
  for (int i = lid; i < n; i += size) yr[i] = exp(xr[i] - row_max) * inverse;
}

// Rotate-half RoPE. Work-item (i, head, token) rotates the pair (i, i + head_dim/2) of one head
// by positions[token] * inv_freq[i], the angle formed in float as the reference does.
kernel void rope_f32(global const uchar* x, ulong x_off, global const uchar* positions,
                     ulong positions_off, global const uchar* inv_freq, ulong inv_freq_off,
                     global uchar* out, ulong out_off, int n_heads, int head_dim, int n_tokens) {
  const int i = get_global_id(0);
  const int head = get_global_id(1);
  const int token = get_global_id(2);
  const int half_dim = head_dim / 2;
  if (i >= half_dim || head >= n_heads || token >= n_tokens) return;
  const ulong base = ((ulong)token * n_heads + head) * head_dim;
  global const float* xr = AT_CONST(float, x, x_off) + base;
  global float* outr = AT(float, out, out_off) + base;
  const float angle = (float)AT_CONST(int, positions, positions_off)[token] *
                      AT_CONST(float, inv_freq, inv_freq_off)[i];
  // sincos in float: |angle| reaches ~1e5 at long contexts; OpenCL's sin/cos are accurate to
  // 4 ulp over the whole range (no fast-math), like the C library the reference uses.
  float cosine;
  const float sine = sincos(angle, &cosine);
  const float a = xr[i];
  const float b = xr[i + half_dim];
  outr[i] = a * cosine - b * sine;
  outr[i + half_dim] = b * cosine + a * sine;
}
