// TfpipeDecodeJpegStrict: TensorFlow's own JPEG decode (DecodeJpeg /
// DecodeAndCropJpeg), failing when libjpeg reports a warning.
//
// libjpeg treats damaged entropy-coded data as a *warning* ("Corrupt JPEG
// data: premature end of data segment", "N extraneous bytes before marker",
// bad Huffman codes): it fills what it could not decode with gray and returns
// success, and TF's ops never look at the warning count. This op calls the
// very function those ops call, `tensorflow::jpeg::Uncompress` from
// libtensorflow_cc (same flags: IFAST DCT, fancy upscaling, no truncation
// recovery), so its pixels are TF's pixels bit for bit, and turns a non-zero
// warning count into an InvalidArgument error.
//
// `Uncompress` is exported by libtensorflow_cc.so.2 (already loaded by the TF
// Python package) but not by libtensorflow_framework, which custom ops link
// against, so it is looked up once with dlopen(RTLD_NOLOAD) + dlsym; when that
// fails the op reports it (the Python side then falls back to TF's ops).
//
// What a crop sees: with a crop window libjpeg decodes the entropy data down to
// the window's last row and stops (what TF's DecodeAndCropJpeg does), so
// damage below the window is not seen by this decode. A separate structural
// scan of the whole file (ScanJpegStructure below, a few microseconds) runs in
// every call and catches what can be seen without Huffman decoding: a scan
// that ends without EOI (truncation), and a marker inside entropy-coded data
// that cannot be there (a restart marker where no restart interval was
// declared, or out of sequence).

#include <dlfcn.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>

#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"
#include "tensorflow/core/lib/jpeg/jpeg_mem.h"

using namespace tensorflow;  // NOLINT(build/namespaces)

REGISTER_OP("TfpipeDecodeJpegStrict")
    .Input("contents: string")
    .Input("crop_window: int32")
    .Input("target: int32")
    .Attr("channels: int = 0")
    .Attr("crop: bool = false")
    .Output("image: uint8")
    .SetShapeFn([](shape_inference::InferenceContext* c) {
      shape_inference::ShapeHandle unused;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 0, &unused));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(1), 1, &unused));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(2), 1, &unused));
      int channels;
      TF_RETURN_IF_ERROR(c->GetAttr("channels", &channels));
      c->set_output(0, c->MakeShape({c->UnknownDim(), c->UnknownDim(),
                                     channels > 0 ? c->MakeDim(channels)
                                                  : c->UnknownDim()}));
      return absl::OkStatus();
    })
    .Doc(R"doc(
tf.io.decode_jpeg (crop=false) or tf.io.decode_and_crop_jpeg (crop=true,
crop_window = [y, x, h, w]) with the same pixels, but an InvalidArgument error
when libjpeg reports a warning (corrupt entropy-coded data) or the file's
marker structure is damaged (no EOI, misplaced restart marker).
target = [out_h, out_w] (crop=true only; [0, 0] = off): decode at the largest
DCT reduction r in {8, 4, 2} with crop_h >= r * out_h and crop_w >= r * out_w
(else r = 1), the window given in full-size coordinates and mapped to the
scaled image's as [floor(y / r), ceil((y + h) / r)) x [floor(x / r),
ceil((x + w) / r)); = tf.io.decode_and_crop_jpeg(ratio=r) of that window.
)doc");

namespace {

// The DCT reduction for a full-size window of crop_h x crop_w and an output of
// out_h x out_w: the largest r in {8, 4, 2} that keeps the decoded window at
// least the output on both sides (ceil(crop / r) >= crop / r >= out), else 1.
// Mirrored by tfpipe.pipeline._decode.dct_ratio (bit-identical, tested).
int DctRatio(int64_t crop_h, int64_t crop_w, int64_t out_h, int64_t out_w) {
  if (out_h <= 0 || out_w <= 0) return 1;
  for (int r : {8, 4, 2}) {
    if (crop_h >= r * out_h && crop_w >= r * out_w) return r;
  }
  return 1;
}

// Decode at 1/r (r > 1): the scaled image is ceil(dim / r) (libjpeg's
// jdiv_round_up) and the window covers the full-size one: floor of its start,
// ceil of its end. `flags` already holds the full-size window.
void ScaleCropFlags(int r, jpeg::UncompressFlags* flags) {
  const int64_t y0 = flags->crop_y / r, x0 = flags->crop_x / r;
  const int64_t y1 = (static_cast<int64_t>(flags->crop_y) + flags->crop_height + r - 1) / r;
  const int64_t x1 = (static_cast<int64_t>(flags->crop_x) + flags->crop_width + r - 1) / r;
  flags->ratio = r;
  flags->crop_y = static_cast<int>(y0);
  flags->crop_x = static_cast<int>(x0);
  flags->crop_height = static_cast<int>(y1 - y0);
  flags->crop_width = static_cast<int>(x1 - x0);
}

using UncompressFn = uint8_t* (*)(const void*, int, const jpeg::UncompressFlags&, int64_t*,
                                  std::function<uint8_t*(int, int, int)>);

// The mangled name of tensorflow::jpeg::Uncompress(const void*, int,
// const UncompressFlags&, int64_t*, std::function<uint8_t*(int, int, int)>).
constexpr char kUncompressSymbol[] =
    "_ZN10tensorflow4jpeg10UncompressEPKviRKNS0_15UncompressFlagsEPlSt8functionIFPhiiiEE";

UncompressFn LookupUncompress(std::string* why) {
  static std::once_flag once;
  static UncompressFn fn = nullptr;
  static std::string reason;
  std::call_once(once, [] {
    for (const char* lib : {"libtensorflow_cc.so.2", "libtensorflow_framework.so.2"}) {
      void* handle = dlopen(lib, RTLD_NOW | RTLD_NOLOAD);
      if (handle == nullptr) continue;
      fn = reinterpret_cast<UncompressFn>(dlsym(handle, kUncompressSymbol));
      if (fn != nullptr) return;
    }
    fn = reinterpret_cast<UncompressFn>(dlsym(RTLD_DEFAULT, kUncompressSymbol));
    if (fn == nullptr) reason = "tensorflow::jpeg::Uncompress not found in the loaded TF libraries";
  });
  if (fn == nullptr && why != nullptr) *why = reason;
  return fn;
}

// What the marker walk saw of the frame and its scans (ScanJpegStructure's
// optional output): enough to know the iMCU column width libjpeg-turbo aligns
// a crop to (CropAlign).
struct JpegFrame {
  int sof = -1;         // the SOFn marker's n (0 baseline, 1 extended, 2 progressive, ...); -1 none
  int frames = 0;       // SOF markers seen
  int precision = 0;    // sample bits
  int components = 0;   // Nf
  int max_h = 0;        // the largest horizontal sampling factor; 0 if any is not 1..4
  int scans = 0;        // SOS markers seen
  int first_scan_components = 0;  // Ns of the first SOS
};

// Walks the marker segments of a JPEG file and the entropy-coded data after
// each SOS. Returns "" when the structure is intact, else what is wrong.
// Only the structure is checked (no Huffman decoding), so it costs one pass
// over the bytes looking for 0xFF. `frame` (optional) receives the SOF / SOS
// facts the walk passes anyway.
std::string ScanJpegStructure(const uint8_t* d, size_t n, JpegFrame* frame = nullptr) {
  JpegFrame unused;
  JpegFrame& f = frame != nullptr ? *frame : unused;
  f = JpegFrame();
  if (n < 4 || d[0] != 0xFF || d[1] != 0xD8) return "no SOI marker at the start";
  size_t p = 2;
  int restart_interval = 0;
  bool seen_scan = false;
  while (true) {
    // Between segments: fill bytes 0xFF may precede a marker.
    if (p >= n) return seen_scan ? "file ends without an EOI marker (truncated)"
                                 : "file ends before the first scan (truncated)";
    if (d[p] != 0xFF) {
      return "expected a marker at byte " + std::to_string(p) + ", found 0x" +
             [](unsigned v) { char b[3]; snprintf(b, sizeof b, "%02x", v); return std::string(b); }(d[p]);
    }
    while (p < n && d[p] == 0xFF) ++p;
    if (p >= n) return "file ends inside a marker (truncated)";
    const uint8_t m = d[p++];
    if (m == 0xD9) return "";  // EOI: whatever follows is not image data
    if (m == 0x01 || (m >= 0xD0 && m <= 0xD7)) {
      return "restart marker 0xFF" +
             [](unsigned v) { char b[3]; snprintf(b, sizeof b, "%02X", v); return std::string(b); }(m) +
             " outside entropy-coded data at byte " + std::to_string(p - 2);
    }
    if (p + 2 > n) return "file ends inside a segment header (truncated)";
    const size_t len = (static_cast<size_t>(d[p]) << 8) | d[p + 1];
    if (len < 2 || p + len > n) return "segment length runs past the end of the file (truncated)";
    if (m == 0xDD && len >= 4) restart_interval = (d[p + 2] << 8) | d[p + 3];  // DRI
    // SOFn (C0..CF but DHT C4, JPG C8, DAC CC): P, Y, X, Nf, then Nf x (C, HV, Tq)
    if (m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC) {
      if (++f.frames == 1 && len >= 8) {
        f.sof = m - 0xC0;
        f.precision = d[p + 2];
        f.components = d[p + 7];
        f.max_h = 0;
        if (len >= 8 + 3 * static_cast<size_t>(f.components)) {
          for (int c = 0; c < f.components; ++c) {
            const int h = d[p + 8 + 3 * c + 1] >> 4;
            if (h < 1 || h > 4) { f.max_h = 0; break; }
            f.max_h = std::max(f.max_h, h);
          }
        }
      }
    }
    if (m == 0xDA && len >= 3 && ++f.scans == 1) f.first_scan_components = d[p + 2];
    p += len;
    if (m != 0xDA) continue;  // not SOS
    seen_scan = true;
    // Entropy-coded data: 0xFF is followed by 0x00 (stuffing), 0xFF (fill),
    // a restart marker RST0..7 in sequence (only with a restart interval),
    // or the marker that ends the scan.
    int next_rst = 0;
    while (true) {
      const void* ff = p < n ? memchr(d + p, 0xFF, n - p) : nullptr;
      if (ff == nullptr) return "file ends inside entropy-coded data without an EOI marker (truncated)";
      size_t q = static_cast<const uint8_t*>(ff) - d;
      size_t r = q + 1;
      while (r < n && d[r] == 0xFF) ++r;
      if (r >= n) return "file ends inside entropy-coded data (truncated)";
      const uint8_t b = d[r];
      if (b == 0x00) { p = r + 1; continue; }
      if (b >= 0xD0 && b <= 0xD7) {
        if (restart_interval == 0) {
          return "restart marker inside entropy-coded data at byte " + std::to_string(q) +
                 " but no restart interval was declared";
        }
        if (b - 0xD0 != next_rst) {
          return "restart marker RST" + std::to_string(b - 0xD0) + " at byte " +
                 std::to_string(q) + " out of sequence (expected RST" +
                 std::to_string(next_rst) + ")";
        }
        next_rst = (next_rst + 1) & 7;
        p = r + 1;
        continue;
      }
      p = q;  // a real marker: the scan ended; back to the segment walk
      break;
    }
  }
}

// The iMCU column width (in pixels of the 1/r-scaled image) that libjpeg-
// turbo's jpeg_crop_scanline moves a crop's left edge down to, or 0 where this
// code does not vouch for it. jdapistd.c: align = _min_DCT_scaled_size, times
// max_h_samp_factor unless comps_in_scan == 1 && num_components == 1; at
// scale 1/r (r in {1, 2, 4, 8}, TF's scale_num = 1, scale_denom = r)
// jdmaster.c's jpeg_core_output_dimensions sets _min_DCT_scaled_size = 8 / r.
// Vouched for only where the whole image is one scan read before the crop is
// set: baseline / extended sequential Huffman (SOF0 / SOF1), 8-bit, one frame,
// one SOS holding every component, 1 (gray) or 3 (YCbCr / RGB) components.
// Progressive, multi-scan, arithmetic, lossless, 12-bit, CMYK: 0.
int CropAlign(const JpegFrame& f, int r) {
  if (f.sof != 0 && f.sof != 1) return 0;
  if (f.frames != 1 || f.precision != 8 || f.scans != 1) return 0;
  if (f.components != 1 && f.components != 3) return 0;
  if (f.first_scan_components != f.components || f.max_h == 0) return 0;
  if (r != 1 && r != 2 && r != 4 && r != 8) return 0;
  return (8 / r) * (f.components == 1 ? 1 : f.max_h);
}

// Widens the (already 1/r-scaled) crop in `flags` to the left edge libjpeg
// would decode from anyway, x_a = floor(x / align) * align, keeping the right
// edge, and returns the shift x - x_a (0: flags unchanged). Given that
// request jpeg_crop_scanline keeps it as is and computes exactly the state it
// computes for the original one (first / last iMCU column, output_width,
// downsampled widths are functions of x_a and the right edge only), so the
// decoded columns are the same bytes; and as cinfo.output_width now equals
// the requested width, TF's UncompressLow decodes each row straight into the
// caller's buffer instead of into a temporary row it then memcpy's shifted.
// Not done where the widened window would be the whole width (scaled_w) and
// the original was not: jpeg_crop_scanline returns early for a full-width
// request, without its crop set-up, which is not provably the same state.
int64_t AlignCropLeft(int align, int64_t scaled_w, jpeg::UncompressFlags* flags) {
  if (align <= 0) return 0;
  const int64_t x = flags->crop_x, w = flags->crop_width;
  const int64_t xa = (x / align) * align;
  if (xa == x) return 0;
  if (xa == 0 && x + w == scaled_w) return 0;  // would be full width; the original was not
  flags->crop_x = static_cast<int>(xa);
  flags->crop_width = static_cast<int>(w + (x - xa));
  return x - xa;
}

class DecodeJpegStrictOp : public OpKernel {
 public:
  explicit DecodeJpegStrictOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("channels", &channels_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("crop", &crop_));
    OP_REQUIRES(ctx, channels_ == 0 || channels_ == 1 || channels_ == 3,
                errors::InvalidArgument("channels must be 0, 1 or 3, got ", channels_));
    std::string why;
    OP_REQUIRES(ctx, LookupUncompress(&why) != nullptr, errors::Unavailable(why));
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& contents = ctx->input(0);
    OP_REQUIRES(ctx, TensorShapeUtils::IsScalar(contents.shape()),
                errors::InvalidArgument("contents must be a scalar, got ",
                                        contents.shape().DebugString()));
    const tstring& input = contents.scalar<tstring>()();
    OP_REQUIRES(ctx, input.size() <= std::numeric_limits<int>::max(),
                errors::InvalidArgument("JPEG contents are too large (", input.size(),
                                        " bytes)"));
    // The flags TF's DecodeJpeg / DecodeAndCropJpeg use with their default attrs.
    jpeg::UncompressFlags flags;
    flags.components = channels_;
    flags.ratio = 1;
    flags.fancy_upscaling = true;
    flags.try_recover_truncated_jpeg = false;
    flags.min_acceptable_fraction = 1.0f;
    flags.dct_method = JDCT_IFAST;  // TF's default for dct_method=""
    if (crop_) {
      const Tensor& w = ctx->input(1);
      OP_REQUIRES(ctx, w.dims() == 1 && w.dim_size(0) == 4,
                  errors::InvalidArgument("crop_window must be int32 [4] (y, x, h, w), got ",
                                          w.shape().DebugString()));
      auto v = w.vec<int32>();
      flags.crop = true;
      flags.crop_y = v(0);
      flags.crop_x = v(1);
      flags.crop_height = v(2);
      flags.crop_width = v(3);
      const Tensor& t = ctx->input(2);
      OP_REQUIRES(ctx, t.dims() == 1 && t.dim_size(0) == 2,
                  errors::InvalidArgument("target must be int32 [2] (out_h, out_w), got ",
                                          t.shape().DebugString()));
      auto tv = t.vec<int32>();
      const int r = DctRatio(v(2), v(3), tv(0), tv(1));
      if (r > 1) ScaleCropFlags(r, &flags);
    }
    const std::string structure =
        ScanJpegStructure(reinterpret_cast<const uint8_t*>(input.data()), input.size());
    OP_REQUIRES(ctx, structure.empty(),
                errors::InvalidArgument("damaged JPEG: ", structure));
    Tensor* output = nullptr;
    int64_t nwarn = 0;
    UncompressFn uncompress = LookupUncompress(nullptr);
    uint8_t* buffer = uncompress(
        input.data(), static_cast<int>(input.size()), flags, &nwarn,
        [&](int width, int height, int channels) -> uint8_t* {
          Status s = ctx->allocate_output(0, TensorShape({height, width, channels}), &output);
          if (!s.ok()) {
            ctx->SetStatus(s);
            return nullptr;
          }
          return output->flat<uint8>().data();
        });
    OP_REQUIRES_OK(ctx, ctx->status());
    OP_REQUIRES(ctx, buffer != nullptr,
                errors::InvalidArgument("jpeg::Uncompress failed. Invalid JPEG data or crop "
                                        "window."));
    OP_REQUIRES(ctx, nwarn == 0,
                errors::InvalidArgument("damaged JPEG: libjpeg reported ", nwarn,
                                        " warning(s) (corrupt entropy-coded data, e.g. "
                                        "\"premature end of data segment\"); the decoded "
                                        "image would be partly gray"));
  }

 private:
  int channels_ = 0;
  bool crop_ = false;
};

}  // namespace

REGISTER_KERNEL_BUILDER(Name("TfpipeDecodeJpegStrict").Device(DEVICE_CPU), DecodeJpegStrictOp);
