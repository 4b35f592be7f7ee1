// TfpipeTfrecordWalk: where the intact records of a damaged TFRecord file are.
//
// TFRecordDataset stops a file at its first bad frame. The pipeline reads each
// shard with it (fast, streaming) and, only when it stopped before the end of
// the file, calls this op from that offset: it walks the rest exactly as
// tfpipe.records.framing.walk (and so `tfpipe verify --salvage`) does --
//   * a frame whose length CRC fails, or whose length runs past the end, is
//     followed by a byte-by-byte scan for the next offset where a whole frame
//     (length, its CRC, data, data CRC) validates;
//   * a frame whose data CRC fails is skipped by its (CRC-checked) length;
//   * a partial header at the end is a truncation --
// and returns the runs of consecutive intact records as (start offset, count,
// index of the first), for TFRecordDataset(byte_offsets=start).take(count), plus
// one finding per damaged range. Offsets are plain-file bytes (uncompressed
// shards only). The rest of the file is read into memory once (this runs only
// for a damaged shard); lengths are bounded by the bytes that remain before
// anything is allocated for them.

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"
#include "tensorflow/core/platform/env.h"
#include "tensorflow/core/platform/file_system.h"

using namespace tensorflow;  // NOLINT(build/namespaces)

REGISTER_OP("TfpipeTfrecordWalk")
    .Input("path: string")
    .Input("offset: int64")
    .Input("index: int64")
    .Output("segment_starts: int64")
    .Output("segment_counts: int64")
    .Output("segment_indices: int64")
    .Output("finding_offsets: int64")
    .Output("finding_ends: int64")
    .Output("finding_records_lost: int64")
    .Output("finding_kinds: string")
    .Output("file_size: int64")
    .SetIsStateful()  // reads a file: never constant-folded or cached
    .SetShapeFn([](shape_inference::InferenceContext* c) {
      for (int i = 0; i < 7; ++i) c->set_output(i, c->Vector(c->UnknownDim()));
      c->set_output(7, c->Scalar());
      return absl::OkStatus();
    })
    .Doc(R"doc(
Walk a TFRecord file from `offset` (a frame start; `index` is its record
ordinal) to its end as tfpipe.records.framing.walk does: runs of intact records
(start, count, first index) and findings (offset, end, records lost or -1 when
unknowable, kind: corrupted-length | truncated | corrupted-data |
not-a-tfrecord).
)doc");

namespace {

uint32_t Crc32cTable[8][256];

void InitTable() {
  static bool done = [] {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
      Crc32cTable[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; ++i)
      for (int t = 1; t < 8; ++t)
        Crc32cTable[t][i] = (Crc32cTable[t - 1][i] >> 8) ^ Crc32cTable[0][Crc32cTable[t - 1][i] & 0xFF];
    return true;
  }();
  (void)done;
}

// CRC32C (Castagnoli), slicing by 8: exact integer arithmetic, host independent.
uint32_t Crc32c(const uint8_t* p, size_t n) {
  uint32_t c = 0xFFFFFFFFu;
  while (n >= 8) {
    uint32_t lo, hi;
    std::memcpy(&lo, p, 4);
    std::memcpy(&hi, p + 4, 4);
    lo ^= c;
    c = Crc32cTable[7][lo & 0xFF] ^ Crc32cTable[6][(lo >> 8) & 0xFF] ^
        Crc32cTable[5][(lo >> 16) & 0xFF] ^ Crc32cTable[4][lo >> 24] ^
        Crc32cTable[3][hi & 0xFF] ^ Crc32cTable[2][(hi >> 8) & 0xFF] ^
        Crc32cTable[1][(hi >> 16) & 0xFF] ^ Crc32cTable[0][hi >> 24];
    p += 8;
    n -= 8;
  }
  while (n--) c = (c >> 8) ^ Crc32cTable[0][(c ^ *p++) & 0xFF];
  return c ^ 0xFFFFFFFFu;
}

uint32_t Masked(const uint8_t* p, size_t n) {
  const uint32_t crc = Crc32c(p, n);
  return ((crc >> 15) | (crc << 17)) + 0xA282EAD8u;
}

uint64_t U64(const uint8_t* p) { uint64_t v; std::memcpy(&v, p, 8); return v; }  // little endian host
uint32_t U32(const uint8_t* p) { uint32_t v; std::memcpy(&v, p, 4); return v; }

constexpr uint64_t kHeader = 12, kOverhead = 16;

class Walker {
 public:
  Walker(const uint8_t* d, uint64_t base, uint64_t size) : d_(d), base_(base), size_(size) {}

  // Whole, valid frame at absolute offset q?
  bool FrameAt(uint64_t q) const {
    if (size_ - q < kOverhead) return false;
    const uint8_t* h = At(q);
    if (Masked(h, 8) != U32(h + 8)) return false;
    const uint64_t len = U64(h);
    if (len > size_ - q - kOverhead) return false;
    return Masked(h + kHeader, len) == U32(h + kHeader + len);
  }

  // First offset >= start (absolute) where a whole valid frame begins, or -1.
  // A candidate's length fits in the file, so header bytes 5..7 are zero
  // (files < 1 TiB); an all-zero header is never valid. Same rule as
  // framing.resync.
  int64_t Resync(uint64_t start) const {
    for (uint64_t q = start; q + kOverhead <= size_; ++q) {
      const uint8_t* h = At(q);
      if (h[5] | h[6] | h[7]) continue;
      bool all_zero = true;
      for (int k : {0, 1, 2, 3, 4, 8, 9, 10, 11}) all_zero &= h[k] == 0;
      if (all_zero) continue;
      if (FrameAt(q)) return static_cast<int64_t>(q);
    }
    return -1;
  }

  const uint8_t* At(uint64_t q) const { return d_ + (q - base_); }

 private:
  const uint8_t* d_;
  uint64_t base_, size_;
};

class TfrecordWalkOp : public OpKernel {
 public:
  explicit TfrecordWalkOp(OpKernelConstruction* ctx) : OpKernel(ctx) { InitTable(); }

  void Compute(OpKernelContext* ctx) override {
    const tstring& path = ctx->input(0).scalar<tstring>()();
    const int64_t offset = ctx->input(1).scalar<int64_t>()();
    int64_t index = ctx->input(2).scalar<int64_t>()();
    OP_REQUIRES(ctx, offset >= 0, errors::InvalidArgument("offset must be >= 0, got ", offset));
    Env* env = Env::Default();
    uint64_t size = 0;
    OP_REQUIRES_OK(ctx, env->GetFileSize(std::string(path), &size));
    std::vector<int64_t> s_start, s_count, s_index, f_off, f_end, f_lost;
    std::vector<std::string> f_kind;
    uint64_t p = static_cast<uint64_t>(offset);
    std::string buf;
    if (p < size) {
      std::unique_ptr<RandomAccessFile> file;
      OP_REQUIRES_OK(ctx, env->NewRandomAccessFile(std::string(path), &file));
      buf.resize(size - p);
      uint64_t got = 0;
      while (got < buf.size()) {
        absl::string_view piece;
        Status s = file->Read(p + got, buf.size() - got, &piece, &buf[got]);
        if (piece.data() != &buf[got] && !piece.empty()) std::memmove(&buf[got], piece.data(), piece.size());
        got += piece.size();
        if (!s.ok() || piece.empty()) {
          OP_REQUIRES(ctx, errors::IsOutOfRange(s) || s.ok(), s);
          break;
        }
      }
      size = p + got;  // what could be read
    }
    Walker w(reinterpret_cast<const uint8_t*>(buf.data()), static_cast<uint64_t>(offset), size);
    auto finding = [&](const char* kind, uint64_t at, uint64_t end, int64_t lost) {
      f_kind.emplace_back(kind);
      f_off.push_back(static_cast<int64_t>(at));
      f_end.push_back(static_cast<int64_t>(end));
      f_lost.push_back(lost);
    };
    bool in_run = false;
    while (p < size) {
      if (size - p < kHeader) {
        finding("truncated", p, size, 1);
        break;
      }
      const uint8_t* h = w.At(p);
      const uint64_t len = U64(h);
      if (Masked(h, 8) != U32(h + 8) || len > size - p - kOverhead) {
        const bool bad_crc = Masked(h, 8) != U32(h + 8);
        const int64_t q = w.Resync(p + 1);
        if (bad_crc && p == 0 && q < 0) {
          finding("not-a-tfrecord", 0, size, -1);
          break;
        }
        const uint64_t end = q < 0 ? size : static_cast<uint64_t>(q);
        // framing.walk: a length past the end with nothing after it loses that one record
        finding(bad_crc ? "corrupted-length" : "truncated", p, end,
                (!bad_crc && q < 0) ? 1 : -1);
        in_run = false;
        if (q < 0) break;
        p = static_cast<uint64_t>(q);
        continue;
      }
      if (Masked(h + kHeader, len) != U32(h + kHeader + len)) {
        finding("corrupted-data", p, p + len + kOverhead, 1);
        in_run = false;
      } else {
        if (!in_run) {
          s_start.push_back(static_cast<int64_t>(p));
          s_count.push_back(0);
          s_index.push_back(index);
          in_run = true;
        }
        ++s_count.back();
      }
      p += len + kOverhead;
      ++index;
    }
    auto emit = [&](int i, const std::vector<int64_t>& v) {
      Tensor* t = nullptr;
      OP_REQUIRES_OK(ctx, ctx->allocate_output(i, TensorShape({static_cast<int64_t>(v.size())}), &t));
      auto flat = t->vec<int64_t>();
      for (size_t k = 0; k < v.size(); ++k) flat(k) = v[k];
    };
    emit(0, s_start);
    emit(1, s_count);
    emit(2, s_index);
    emit(3, f_off);
    emit(4, f_end);
    emit(5, f_lost);
    Tensor* kinds = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(6, TensorShape({static_cast<int64_t>(f_kind.size())}), &kinds));
    for (size_t k = 0; k < f_kind.size(); ++k) kinds->vec<tstring>()(k) = f_kind[k];
    Tensor* fsize = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(7, TensorShape({}), &fsize));
    fsize->scalar<int64_t>()() = static_cast<int64_t>(size);
  }
};

}  // namespace

REGISTER_KERNEL_BUILDER(Name("TfpipeTfrecordWalk").Device(DEVICE_CPU), TfrecordWalkOp);
