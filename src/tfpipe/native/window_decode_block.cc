// TfpipeDecodeCropResizeBlock: TfpipeDecodeCropResize (window_decode.cc) over a
// whole block of records in one kernel call, into one preallocated
// uint8 [n, H, W, C] output (or, with the write-out, the finished float32 / uint8 rows).
//
// Per sample the train path runs ~11 tf.data steps and allocates a tensor per
// image, then batch() copies the images into the batch; here a block of n
// encoded images (the strings parse_example gives a batch) becomes the batch
// directly: each row is DecodeCropResizeRow (window_decode.cc: header size,
// window, strict DCT-scaled decode into the thread's scratch, bilinear resize +
// flip) writing straight into its slice of the output. Rows run in parallel on
// the device's CPU worker threads through tensorflow::Shard, which honours a
// per-thread intra-op limit: inside tf.data that is
// `threading.max_intra_op_parallelism`, 1 by default, and then the rows run
// inline on the calling thread (parallelism comes from the map's
// num_parallel_calls); with 0 or the CPU count they spread over TF's intra-op
// pool. A row touches only its own input, draws, scratch and output slice, so
// its bytes do not depend on the thread count or on the other rows
// (tests/native/test_decode_block.py).
//
// The write-out (out_dtype float32 or ops given): each row is decoded into the
// thread's buffer and, while it is still in L2, goes through pixel.cc's PixelChain
// (the per-image code of TfpipePixelChain: the same function, so the same bytes)
// into its slice of the float32 / uint8 output: the batch stage's L3 + normalize
// for enabled rows, the plain rendering (normalize of the levels) for the others.
// The separate batch op, which read the whole uint8 batch back from memory, and
// the uint8 batch itself are gone (docs/performance.md, "Integrated, issue #12
// section 3").
//
// One bad row never fails the op: it gets status 1 (not a JPEG: tf.io.is_jpeg
// false; the caller decodes it another way) or 2 (what the per-sample op raises
// InvalidArgument for; message = that error's text) and zeros. Only malformed
// arguments fail it (and running out of memory).
//
// Built as part of the one translation unit (tfpipe.native.build); this name
// sorts after window_decode.cc, whose anonymous-namespace helpers it uses.

#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"
#include "tensorflow/core/util/work_sharder.h"

using namespace tensorflow;  // NOLINT(build/namespaces)

REGISTER_OP("TfpipeDecodeCropResizeBlock")
    .Input("contents: string")
    .Input("draws: float")
    .Input("mode: int32")
    .Input("flip: bool")
    .Input("size: int32")
    .Input("params: float")
    .Input("apply: bool")
    .Input("enabled: bool")
    .Attr("ratio: list(float)")
    .Attr("channels: int = 3")
    .Attr("dct_scaling: bool = true")
    .Attr("crop_fraction: float = 0.875")
    .Attr("out_dtype: {uint8, float} = DT_UINT8")
    .Attr("ops: list(string) = []")
    .Attr("gated: list(bool) = []")
    .Attr("mean: list(float) = []")
    .Attr("std: list(float) = []")
    .Attr("aligned_crop: bool = true")
    .Attr("isa: {'native', 'baseline'} = 'native'")
    .Output("images: out_dtype")
    .Output("status: int32")
    .Output("message: string")
    .SetShapeFn([](shape_inference::InferenceContext* c) {
      shape_inference::ShapeHandle contents, draws, unused, hw, out;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 1, &contents));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(1), 3, &draws));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(2), 1, &unused));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(3), 1, &unused));
      shape_inference::DimensionHandle n = c->Dim(contents, 0);
      TF_RETURN_IF_ERROR(c->Merge(n, c->Dim(draws, 0), &n));
      TF_RETURN_IF_ERROR(c->Merge(n, c->Dim(c->input(2), 0), &n));
      TF_RETURN_IF_ERROR(c->Merge(n, c->Dim(c->input(3), 0), &n));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(5), 2, &unused));
      TF_RETURN_IF_ERROR(c->Merge(n, c->Dim(c->input(5), 0), &n));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(6), 2, &unused));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(7), 1, &unused));
      TF_RETURN_IF_ERROR(c->Merge(n, c->Dim(c->input(7), 0), &n));
      TF_RETURN_IF_ERROR(c->MakeShapeFromShapeTensor(4, &hw));
      TF_RETURN_IF_ERROR(c->WithRank(hw, 2, &hw));
      int channels;
      TF_RETURN_IF_ERROR(c->GetAttr("channels", &channels));
      TF_RETURN_IF_ERROR(c->Concatenate(c->Vector(n), hw, &out));
      TF_RETURN_IF_ERROR(c->Concatenate(out, c->Vector(channels), &out));
      c->set_output(0, out);
      c->set_output(1, c->Vector(n));
      c->set_output(2, c->Vector(n));
      return absl::OkStatus();
    })
    .Doc(R"doc(
A block of n encoded images -> uint8 [n, size[0], size[1], channels], status
int32 [n], message string [n]. Row i by mode[i]: 0 = the random-resized-crop
window of draws[i] ([4, attempts]), 1 = the whole image, 2 = the eval centre
crop (augment.center_crop_window with crop_fraction); strict decode of that
window (DCT-scaled towards size when dct_scaling), bilinear resize, mirrored
when flip[i]: row i equals TfpipeDecodeCropResize (modes 0, 1) and the eval
L1 (mode 2) of that image. status 0 = ok, 1 = not a JPEG (zeros), 2 = bad
JPEG (zeros; message = the per-sample op's error).

The write-out (what the batch stage would do next, per row, on the row while it
is in cache): with out_dtype float32, or with ops, row i is then, where
enabled[i], TfpipePixelChain(ops, gated, to_float = normalize = (out_dtype is
float32), mean, std) of that row with params[i] / apply[i] ([n, len(ops)]),
and elsewhere the plain rendering: TfpipePixelChain's normalize alone of the
uint8 row (float32) or the row itself (uint8). With neither (the default) the
rows are the uint8 images and params / apply / enabled are not read.
)doc");

namespace {

class DecodeCropResizeBlockOp : public OpKernel {
 public:
  explicit DecodeCropResizeBlockOp(OpKernelConstruction* ctx)
      : OpKernel(ctx), baseline_(IsaBaselineAttr(ctx)) {
    std::vector<float> ratio;
    OP_REQUIRES_OK(ctx, ctx->GetAttr("ratio", &ratio));
    OP_REQUIRES(ctx, ratio.size() == 2 && ratio[0] > 0.0f && ratio[0] <= ratio[1],
                errors::InvalidArgument("ratio must be (low, high) with 0 < low <= high"));
    spec_.r_lo = ratio[0];
    spec_.r_hi = ratio[1];
    OP_REQUIRES_OK(ctx, ctx->GetAttr("channels", &spec_.channels));
    OP_REQUIRES(ctx, spec_.channels == 1 || spec_.channels == 3,
                errors::InvalidArgument("channels must be 1 or 3, got ", spec_.channels));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("dct_scaling", &spec_.dct));
    spec_.aligned = AlignedCropAttr(ctx);  // window_decode.cc
    OP_REQUIRES_OK(ctx, ctx->GetAttr("crop_fraction", &spec_.crop_fraction));
    OP_REQUIRES(ctx, spec_.crop_fraction > 0.0f && spec_.crop_fraction <= 1.0f,
                errors::InvalidArgument("crop_fraction must be in (0, 1], got ",
                                        spec_.crop_fraction));
    std::string why;
    OP_REQUIRES(ctx, LookupUncompress(&why) != nullptr, errors::Unavailable(why));
    DataType out;
    OP_REQUIRES_OK(ctx, ctx->GetAttr("out_dtype", &out));
    float_out_ = out == DT_FLOAT;
    std::vector<std::string> ops;
    std::vector<bool> gated;
    std::vector<float> mean, std;
    OP_REQUIRES_OK(ctx, ctx->GetAttr("ops", &ops));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("gated", &gated));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("mean", &mean));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("std", &std));
    // the chain of an enabled row, and the plain rendering (normalize of levels)
    OP_REQUIRES_OK(ctx, chain_.Init(ops, gated, float_out_, float_out_, mean, std));
    OP_REQUIRES_OK(ctx, plain_.Init({}, {}, false, float_out_, mean, std));
    OP_REQUIRES_OK(ctx, chain_.Check(spec_.channels));
    write_out_ = float_out_ || !ops.empty();
    OP_REQUIRES(ctx, LookupGetImageInfo() != nullptr,
                errors::Unavailable("tensorflow::jpeg::GetImageInfo not found in the loaded "
                                    "TF libraries"));
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& contents = ctx->input(0);
    const Tensor& draws = ctx->input(1);
    const Tensor& mode = ctx->input(2);
    const Tensor& flip = ctx->input(3);
    const Tensor& size = ctx->input(4);
    const Tensor& params = ctx->input(5);
    const Tensor& apply = ctx->input(6);
    const Tensor& enabled = ctx->input(7);
    OP_REQUIRES(ctx, contents.dims() == 1,
                errors::InvalidArgument("contents must be a string vector [n], got ",
                                        contents.shape().DebugString()));
    const int64_t n = contents.dim_size(0);
    OP_REQUIRES(ctx, draws.dims() == 3 && draws.dim_size(0) == n && draws.dim_size(1) == 4,
                errors::InvalidArgument("draws must be float32 [n, 4, attempts] with n = ", n,
                                        " rows, got ", draws.shape().DebugString()));
    OP_REQUIRES(ctx, mode.dims() == 1 && mode.dim_size(0) == n,
                errors::InvalidArgument("mode must be int32 [n] with n = ", n, ", got ",
                                        mode.shape().DebugString()));
    OP_REQUIRES(ctx, flip.dims() == 1 && flip.dim_size(0) == n,
                errors::InvalidArgument("flip must be bool [n] with n = ", n, ", got ",
                                        flip.shape().DebugString()));
    OP_REQUIRES(ctx, size.dims() == 1 && size.NumElements() == 2,
                errors::InvalidArgument("size must be int32 [2] (height, width), got ",
                                        size.shape().DebugString()));
    const int64_t n_ops = chain_.n_ops();
    OP_REQUIRES(ctx, params.dims() == 2 && params.dim_size(0) == n &&
                         params.dim_size(1) == n_ops && apply.shape() == params.shape(),
                errors::InvalidArgument("params and apply must be [", n, ", ", n_ops,
                                        "], got ", params.shape().DebugString(), " and ",
                                        apply.shape().DebugString()));
    OP_REQUIRES(ctx, enabled.dims() == 1 && enabled.dim_size(0) == n,
                errors::InvalidArgument("enabled must be bool [n] with n = ", n, ", got ",
                                        enabled.shape().DebugString()));
    RowSpec spec = spec_;
    spec.out_h = size.vec<int32>()(0);
    spec.out_w = size.vec<int32>()(1);
    OP_REQUIRES(ctx, spec.out_h > 0 && spec.out_w > 0,
                errors::InvalidArgument("size must be positive, got ", spec.out_h, "x",
                                        spec.out_w));
    const int64_t attempts = draws.dim_size(2);
    auto modes = mode.vec<int32>();
    for (int64_t i = 0; i < n; ++i) {
      OP_REQUIRES(ctx, modes(i) >= kRowRrc && modes(i) <= kRowCenter,
                  errors::InvalidArgument("mode[", i, "] must be 0 (crop window), 1 (whole "
                                          "image) or 2 (centre crop), got ", modes(i)));
      OP_REQUIRES(ctx, modes(i) != kRowRrc || attempts > 0,
                  errors::InvalidArgument("draws has 0 attempts but mode[", i, "] is 0"));
    }

    Tensor* images = nullptr;
    Tensor* status = nullptr;
    Tensor* message = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(
                            0, TensorShape({n, spec.out_h, spec.out_w, spec.channels}), &images));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(1, TensorShape({n}), &status));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(2, TensorShape({n}), &message));
    if (n == 0) return;

    const auto in = contents.vec<tstring>();
    const auto flips = flip.vec<bool>();
    const float* draw_data = draws.flat<float>().data();
    uint8_t* out8 = float_out_ ? nullptr : images->flat<uint8>().data();
    float* outf = float_out_ ? images->flat<float>().data() : nullptr;
    const float* prm = params.flat<float>().data();
    const bool* app = apply.flat<bool>().data();
    const bool* on = enabled.flat<bool>().data();
    std::vector<float> ca, cb, pa, pb;  // the normalize constants of each chain
    chain_.Constants(spec.channels, &ca, &cb);
    plain_.Constants(spec.channels, &pa, &pb);
    int32_t* codes = status->vec<int32>().data();
    auto texts = message->vec<tstring>();
    const int64_t row_bytes = spec.out_h * spec.out_w * spec.channels;
    const int64_t draw_stride = 4 * attempts;

    // An error that is not the row's data (out of memory) fails the op; the
    // first one wins.
    std::mutex fatal_mu;
    Status fatal;
    const int64_t pixels = spec.out_h * spec.out_w;
    auto run = [&](int64_t begin, int64_t end) {
      IsaScope isa(baseline_);  // ops.cc: this Shard task's resize and chain loops
      // With a write-out each row is decoded into this thread's buffer (in L2) and
      // goes through the chain (pixel.cc's PixelChain, the batch op's per-image code)
      // into the output; without one, straight into the output.
      std::vector<uint8_t> decoded(write_out_ ? row_bytes : 0);
      Scratch chain_scratch, plain_scratch;
      bool chain_ready = false, plain_ready = false;
      auto zero = [&](int64_t i) {
        if (float_out_) {
          std::memset(outf + i * row_bytes, 0, row_bytes * sizeof(float));
        } else {
          std::memset(out8 + i * row_bytes, 0, row_bytes);
        }
      };
      for (int64_t i = begin; i < end; ++i) {
        uint8_t* row = write_out_ ? decoded.data() : out8 + i * row_bytes;
        const tstring& bytes = in(i);
        // tf.io.is_jpeg: the same test the per-sample path branches on
        if (bytes.size() < 3 || static_cast<uint8_t>(bytes[0]) != 0xFF ||
            static_cast<uint8_t>(bytes[1]) != 0xD8 || static_cast<uint8_t>(bytes[2]) != 0xFF) {
          zero(i);
          codes[i] = 1;
          continue;
        }
        const Status s = DecodeCropResizeRow(bytes, draw_data + i * draw_stride, attempts,
                                             static_cast<RowMode>(modes(i)), flips(i), spec,
                                             row);
        if (s.ok()) {
          codes[i] = 0;
          if (!write_out_) continue;
          const bool chained = on[i];
          if (!chained && !float_out_) {  // uint8 out, plain row: the row itself
            std::memcpy(out8 + i * row_bytes, row, row_bytes);
            continue;
          }
          const PixelChain& pc = chained ? chain_ : plain_;
          Scratch& sc = chained ? chain_scratch : plain_scratch;
          bool& ready = chained ? chain_ready : plain_ready;
          if (!ready) {
            pc.InitScratch(pixels, spec.channels, &sc);
            ready = true;
          }
          PixelIo io;  // one image: image 0 at this row's offsets
          io.n = pixels;
          io.c = spec.channels;
          io.prm = prm + i * n_ops;
          io.app = app + i * n_ops;
          io.in8 = row;
          io.inf = nullptr;
          io.outf = float_out_ ? outf + i * row_bytes : nullptr;
          io.out8 = float_out_ ? nullptr : out8 + i * row_bytes;
          io.na = chained ? ca.data() : pa.data();
          io.nb = chained ? cb.data() : pb.data();
          pc.Image(0, io, sc);
          continue;
        }
        zero(i);
        codes[i] = 2;
        texts(i) = std::string(s.message());
        if (!absl::IsInvalidArgument(s)) {
          std::lock_guard<std::mutex> lock(fatal_mu);
          if (fatal.ok()) fatal = s;
        }
      }
#if defined(__SSE2__)
      if (write_out_) _mm_sfence();  // the streaming stores are visible before the shard is done
#endif
    };
    // A row is a JPEG decode + resize: ~10^6-10^7 cycles, far above the pool's
    // per-task overhead. Shard (not ParallelFor) so a per-thread intra-op limit
    // (tf.data's threading.max_intra_op_parallelism) is honoured, as TF's own
    // kernels do.
    const int64_t cost = 1000 * (spec.out_h * spec.out_w + 1) + 1000000;
    auto* workers = ctx->device()->tensorflow_cpu_worker_threads();
    Shard(workers->num_threads, workers->workers, n, cost, run);
    OP_REQUIRES_OK(ctx, fatal);
  }

 private:
  const bool baseline_;
  RowSpec spec_;
  PixelChain chain_, plain_;
  bool float_out_ = false, write_out_ = false;
};

}  // namespace

REGISTER_KERNEL_BUILDER(Name("TfpipeDecodeCropResizeBlock").Device(DEVICE_CPU),
                        DecodeCropResizeBlockOp);
