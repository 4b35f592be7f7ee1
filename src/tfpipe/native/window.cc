// TfpipeCropWindow: the random-resized-crop window from its draws, in one op.
//
// Reproduces tfpipe.augment.crop_window_from_draws (the pure-TF reference) bit
// for bit: the same float32 operations in the same order, round half to even
// (std::nearbyint in the default rounding mode = tf.round), truncating
// float->int32 casts that give INT32_MIN out of range like TF's cast on x86,
// and the ratio bounds as float32 (TF turns the Python floats in
// `in_ratio < r_lo`, `hf * r_hi`, `wf / r_lo` into float32 constants; the attr
// holds float32 too). Built with -ffp-contract=off, so no FMA changes a
// rounding. The pure-TF version is ~30 tiny ops on [attempts] tensors; in a
// tf.data map each costs a few microseconds, this is one.

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"

using namespace tensorflow;  // NOLINT(build/namespaces)

REGISTER_OP("TfpipeCropWindow")
    .Input("draws: float")
    .Input("height: int32")
    .Input("width: int32")
    .Attr("ratio: list(float)")
    .Output("window: int32")
    .SetShapeFn([](shape_inference::InferenceContext* c) {
      shape_inference::ShapeHandle draws, unused;
      shape_inference::DimensionHandle rows;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 2, &draws));
      TF_RETURN_IF_ERROR(c->WithValue(c->Dim(draws, 0), 4, &rows));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(1), 0, &unused));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(2), 0, &unused));
      c->set_output(0, c->Vector(4));
      return absl::OkStatus();
    })
    .Doc(R"doc(
Random-resized-crop window (offset_y, offset_x, crop_h, crop_w) from draws
[4, attempts] (area fraction, aspect, y and x offset fractions) and the image
size; ratio = (low, high). Bit-identical to
tfpipe.augment.crop_window_from_draws.
)doc");

namespace {

// tf.cast(float32 -> int32): truncation; NaN / out of range -> INT32_MIN (what
// cvttss2si, and so TF's CPU kernel, gives), without C++'s undefined behaviour.
inline int32_t TruncI32(float v) {
  if (!(v >= -2147483648.0f && v < 2147483648.0f)) return std::numeric_limits<int32_t>::min();
  return static_cast<int32_t>(v);
}

// tf.cast(tf.round(v), tf.int32)
inline int32_t RoundI32(float v) { return TruncI32(std::nearbyint(v)); }

// The window of `draws` [4, n] (row-major) for an h x w image: what the op
// returns (also used by TfpipeDecodeCropResize, window_decode.cc).
void RrcWindow(const float* d, int64_t n, int32_t h, int32_t w, float r_lo, float r_hi,
               int32_t out[4]) {
  const float* frac = d;           // row 0: area fraction
  const float* aspect = d + n;     // row 1: aspect (already exp'ed)
  const float* fy = d + 2 * n;     // rows 2, 3: offset fractions
  const float* fx = d + 3 * n;
  const float hf = static_cast<float>(h), wf = static_cast<float>(w);
  const float hw = hf * wf;  // `hf * wf * draws[0]` = (hf * wf) * draws[0]

  bool found = false;
  for (int64_t i = 0; i < n && !found; ++i) {
    const float area = hw * frac[i];
    const int32_t cw = RoundI32(std::sqrt(area * aspect[i]));
    const int32_t ch = RoundI32(std::sqrt(area / aspect[i]));
    if (cw > 0 && cw <= w && ch > 0 && ch <= h) {
      // offsets uniform over [0, h - ch]: min(int(u * float(h - ch + 1)), h - ch)
      const int32_t oy = TruncI32(fy[i] * static_cast<float>(h - ch + 1));
      const int32_t ox = TruncI32(fx[i] * static_cast<float>(w - cw + 1));
      out[0] = oy < h - ch ? oy : h - ch;
      out[1] = ox < w - cw ? ox : w - cw;
      out[2] = ch;
      out[3] = cw;
      found = true;
    }
  }
  if (!found) {
    // whole image clamped to the ratio range, centred
    const float in_ratio = wf / hf;
    int32_t fb_w = w, fb_h = h;
    if (in_ratio < r_lo) {
      fb_h = RoundI32(wf / r_lo);
    } else if (in_ratio > r_hi) {
      fb_w = RoundI32(hf * r_hi);
    }
    fb_w = fb_w < w ? fb_w : w;
    fb_h = fb_h < h ? fb_h : h;
    // (h - fb_h) // 2 in TF is a floor division; the difference is >= 0 unless
    // the rounding produced INT32_MIN, which cannot happen for h, w > 0.
    out[0] = static_cast<int32_t>((static_cast<int64_t>(h) - fb_h) / 2);
    out[1] = static_cast<int32_t>((static_cast<int64_t>(w) - fb_w) / 2);
    out[2] = fb_h;
    out[3] = fb_w;
  }
}

class CropWindowOp : public OpKernel {
 public:
  explicit CropWindowOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    std::vector<float> ratio;
    OP_REQUIRES_OK(ctx, ctx->GetAttr("ratio", &ratio));
    OP_REQUIRES(ctx, ratio.size() == 2,
                errors::InvalidArgument("ratio must be (low, high), got ", ratio.size(),
                                        " values"));
    OP_REQUIRES(ctx, ratio[0] > 0.0f && ratio[0] <= ratio[1],
                errors::InvalidArgument("ratio must satisfy 0 < low <= high, got (",
                                        ratio[0], ", ", ratio[1], ")"));
    r_lo_ = ratio[0];
    r_hi_ = ratio[1];
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& draws_t = ctx->input(0);
    const Tensor& h_t = ctx->input(1);
    const Tensor& w_t = ctx->input(2);
    OP_REQUIRES(ctx, draws_t.dims() == 2 && draws_t.dim_size(0) == 4 && draws_t.dim_size(1) > 0,
                errors::InvalidArgument("draws must be float32 [4, attempts] with attempts "
                                        ">= 1, got ", draws_t.shape().DebugString()));
    OP_REQUIRES(ctx, h_t.dims() == 0 && w_t.dims() == 0,
                errors::InvalidArgument("height and width must be int32 scalars, got ",
                                        h_t.shape().DebugString(), " and ",
                                        w_t.shape().DebugString()));
    const int32_t h = h_t.scalar<int32>()(), w = w_t.scalar<int32>()();
    OP_REQUIRES(ctx, h > 0 && w > 0,
                errors::InvalidArgument("image height and width must be > 0, got ", h,
                                        "x", w));
    int32_t out[4];
    RrcWindow(draws_t.flat<float>().data(), draws_t.dim_size(1), h, w, r_lo_, r_hi_, out);
    Tensor* window = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({4}), &window));
    auto v = window->vec<int32>();
    for (int k = 0; k < 4; ++k) v(k) = out[k];
  }

 private:
  float r_lo_ = 0.0f, r_hi_ = 0.0f;
};

}  // namespace

REGISTER_KERNEL_BUILDER(Name("TfpipeCropWindow").Device(DEVICE_CPU), CropWindowOp);
