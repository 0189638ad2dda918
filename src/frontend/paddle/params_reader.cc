// Paddle tensor records (.pdiparams and the one-file-per-parameter form).
// Every length read from the file is checked against the bytes that remain
// before anything is allocated, so a truncated or garbage file fails with a
// message naming the record instead of crashing or allocating wildly.
#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <limits>
#include <system_error>
#include <thread>
#include <vector>

#include "core/error.h"
#include "framework.pb.h"
#include "frontend/paddle/program.h"
#include "frontend/paddle/reader_util.h"

namespace tiller::paddle {
namespace {

namespace pb = ::paddle::framework::proto;

// A record's data to read: `bytes` at file offset `offset` into `dst`
// (record `index`, parameter `name`, for messages).
struct DataRead {
  std::byte* dst;
  uint64_t offset;
  uint64_t bytes;
  size_t index;
  std::string name;
};

// The records' data of `path`, read by up to kReadThreads threads at once
// in pieces of at most kReadPiece bytes. A load's time is mostly the first
// touch of the fresh pages the data goes to (the kernel zeroing them and,
// on a VM, the host backing them), and threads take that in parallel:
// BERT-Base's predictor took 0.14-0.15 s to create with one thread
// reading (a 2-CPU Xeon VM; 1.1 s where the host had to back the pages
// first), 0.09-0.10 s with two.
constexpr int kReadThreads = 4;
constexpr uint64_t kReadPiece = uint64_t{8} << 20;
// Below this a load reads on the caller's thread alone.
constexpr uint64_t kParallelReadFrom = uint64_t{32} << 20;

void ReadInParallel(const std::string& path, const std::vector<DataRead>& reads) {
  struct Piece {
    const DataRead* read;
    uint64_t begin, bytes;  // within the record's data
  };
  std::vector<Piece> pieces;
  uint64_t total = 0;
  for (const DataRead& r : reads) {
    for (uint64_t at = 0; at < r.bytes; at += kReadPiece)
      pieces.push_back({&r, at, std::min(kReadPiece, r.bytes - at)});
    total += r.bytes;
  }
  if (pieces.empty()) return;
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) Fail(ErrorKind::kNotFound, "Paddle params file '{}' not found or not readable", path);
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::atomic<const Piece*> failure{nullptr};
  auto work = [&] {
    for (size_t i = next++; i < pieces.size() && !failed.load(); i = next++) {
      const Piece& p = pieces[i];
      uint64_t done = 0;
      while (done < p.bytes) {
        const ssize_t got = pread(fd, p.read->dst + p.begin + done, p.bytes - done,
                                  static_cast<off_t>(p.read->offset + p.begin + done));
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) break;  // an error, or the file ended early (it changed since)
        done += static_cast<uint64_t>(got);
      }
      if (done < p.bytes) {
        const Piece* none = nullptr;
        failure.compare_exchange_strong(none, &p);
        failed = true;
      }
    }
  };
  const unsigned cpus = std::max(1u, std::thread::hardware_concurrency());
  const int threads =
      total < kParallelReadFrom
          ? 1
          : static_cast<int>(std::min<uint64_t>({kReadThreads, cpus, pieces.size()}));
  std::vector<std::thread> helpers;
  for (int t = 1; t < threads; ++t) {
    try {
      helpers.emplace_back(work);
    } catch (const std::system_error&) {
      break;  // no thread to be had: the others (this one at least) read the rest
    }
  }
  work();
  for (std::thread& t : helpers) t.join();
  close(fd);
  if (const Piece* p = failure.load())
    Fail(ErrorKind::kDataLoss,
         "{}: read error in record {} ('{}') while reading its data (bytes {} to {} of the file)",
         path, p->read->index, p->read->name, p->read->offset + p->begin,
         p->read->offset + p->begin + p->bytes);
}

// A TensorDesc is a dtype and a few dims; anything larger is corruption.
constexpr uint64_t kMaxTensorDescBytes = 1 << 16;

class RecordReader {
 public:
  explicit RecordReader(const std::string& path) : path_(path), in_(path, std::ios::binary) {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) {
      Fail(ErrorKind::kInvalidArgument, "Paddle params '{}' is a directory, expected a file", path);
    }
    if (!in_) Fail(ErrorKind::kNotFound, "Paddle params file '{}' not found or not readable", path);
    size_ = std::filesystem::file_size(path, ec);
    if (ec) Fail(ErrorKind::kNotFound, "Paddle params file '{}': {}", path, ec.message());
  }

  uint64_t left() const { return size_ - pos_; }
  void Seek(uint64_t pos) {
    if (pos > size_)
      Fail(ErrorKind::kDataLoss, "{}: a record at byte {} is past the end ({} bytes)", path_, pos,
           size_);
    in_.seekg(static_cast<std::streamoff>(pos));
    pos_ = pos;
  }
  uint64_t pos() const { return pos_; }
  const std::string& path() const { return path_; }

  // Reads one record; `index` and `name` only label messages.
  // `count` is how many records the caller expects in all. With `later`,
  // the data is not read: its buffer is allocated, the read appended there
  // (ReadInParallel) and the data skipped.
  ParamTensor ReadRecord(size_t index, const std::string& name, size_t count,
                         std::vector<DataRead>* later = nullptr) {
    index_ = index;
    name_ = name;
    if (left() == 0) {
      Fail(ErrorKind::kDataLoss,
           "{}: truncated: record {} ('{}') needs at least 24 bytes, 0 left: the file ends after "
           "{} records but the program lists {} parameters",
           path_, index, name, index, count);
    }
    uint32_t version = Read<uint32_t>("record version");
    if (version != 0) Corrupt(fmt::format("unsupported record version {} (expected 0)", version));
    uint64_t lod_levels = Read<uint64_t>("LoD level count");
    // Each level needs at least its own 8-byte size field.
    if (lod_levels > left() / 8) {
      // A few levels cut off is truncation; an absurd count is garbage.
      if (lod_levels <= 64) Need(lod_levels * 8, "LoD levels");
      Corrupt(
          fmt::format("LoD level count {} does not fit in the {} bytes left", lod_levels, left()));
    }
    for (uint64_t level = 0; level < lod_levels; ++level) {
      uint64_t bytes = Read<uint64_t>("LoD level size");
      if (bytes % 8 != 0) Corrupt(fmt::format("LoD level size {} is not a multiple of 8", bytes));
      Skip(bytes, "LoD offsets");
    }
    uint32_t tensor_version = Read<uint32_t>("tensor version");
    if (tensor_version != 0) {
      Corrupt(fmt::format("unsupported tensor version {} (expected 0)", tensor_version));
    }
    int32_t desc_size = Read<int32_t>("TensorDesc size");
    if (desc_size <= 0 || static_cast<uint64_t>(desc_size) > kMaxTensorDescBytes) {
      Corrupt(fmt::format("TensorDesc size {} is not plausible", desc_size));
    }
    std::string desc_bytes = ReadBytes(static_cast<uint64_t>(desc_size), "TensorDesc");
    pb::VarType::TensorDesc desc;
    // ParsePartial + IsInitialized: the same check as ParseFromString
    // without protobuf logging to stderr.
    if (!desc.ParsePartialFromString(desc_bytes) || !desc.IsInitialized()) {
      Corrupt("TensorDesc does not parse");
    }

    ParamTensor t;
    if (!DTypeFromVarType(desc.data_type(), &t.dtype)) {
      Fail(ErrorKind::kUnimplemented, "{}: record {} ('{}'): element type {} is not supported",
           path_, index_, name_, VarTypeName(desc.data_type()));
    }
    const uint64_t elem = DTypeSize(t.dtype);
    // The element count is bounded while it is multiplied, so a corrupt dim
    // can neither overflow nor ask for a huge allocation (Need() below caps
    // the bytes by what the file still holds).
    const uint64_t max_elems = std::numeric_limits<uint64_t>::max() / 2 / elem;
    uint64_t numel = 1;
    bool overflow = false;
    for (int64_t d : desc.dims()) {
      if (d < 0) Corrupt(fmt::format("negative dim {} in a stored tensor", d));
      t.dims.push_back(d);
      uint64_t ud = static_cast<uint64_t>(d);
      if (ud != 0 && numel > max_elems / ud)
        overflow = true;
      else
        numel *= ud;
    }
    if (overflow) {
      Corrupt(fmt::format("element count of shape {} overflows", ShapeToString(t.dims)));
    }
    uint64_t bytes = numel * elem;
    Need(bytes, fmt::format("data of shape {} {}", ShapeToString(t.dims), DTypeName(t.dtype)));
    t.data = std::make_shared<AlignedBuffer>(bytes);
    if (bytes && later) {
      later->push_back({t.data->data(), pos_, bytes, index, name});
      Skip(bytes, "data");
    } else if (bytes) {
      ReadInto(t.data->data(), bytes, "data");
    }
    return t;
  }

 private:
  [[noreturn]] void Corrupt(const std::string& what) {
    Fail(ErrorKind::kDataLoss, "{}: corrupt record {} ('{}') at byte {}: {}", path_, index_, name_,
         pos_, what);
  }
  [[noreturn]] void Truncated(const std::string& needed, uint64_t have) {
    Fail(ErrorKind::kDataLoss, "{}: truncated: record {} ('{}') needs {}, {} left", path_, index_,
         name_, needed, have);
  }
  void Need(uint64_t n, const std::string& what) {
    if (n > left()) Truncated(fmt::format("{} bytes ({})", n, what), left());
  }
  template <typename T>
  T Read(const char* what) {
    Need(sizeof(T), what);
    T v{};
    ReadInto(&v, sizeof(T), what);  // the format is little-endian, as is every target
    return v;
  }
  std::string ReadBytes(uint64_t n, const char* what) {
    Need(n, what);
    std::string s(n, '\0');
    ReadInto(s.data(), n, what);
    return s;
  }
  void Skip(uint64_t n, const char* what) {
    Need(n, what);
    in_.seekg(static_cast<std::streamoff>(n), std::ios::cur);
    pos_ += n;
  }
  void ReadInto(void* dst, uint64_t n, const char* what) {
    in_.read(static_cast<char*>(dst), static_cast<std::streamsize>(n));
    if (static_cast<uint64_t>(in_.gcount()) != n) {
      Fail(ErrorKind::kDataLoss, "{}: read error in record {} ('{}') while reading its {}", path_,
           index_, name_, what);
    }
    pos_ += n;
  }

 private:
  std::string path_;
  std::ifstream in_;
  uint64_t size_ = 0;
  uint64_t pos_ = 0;
  size_t index_ = 0;
  std::string name_;
};

}  // namespace

ParamMap ReadCombinedParams(const std::string& path, const std::vector<std::string>& names,
                            std::map<std::string, ParamSource::Record>* records) {
  RecordReader reader(path);
  ParamMap params;
  // The headers in order (each length checked against the file), then the
  // data in parallel.
  std::vector<DataRead> later;
  for (size_t i = 0; i < names.size(); ++i) {
    if (records) (*records)[names[i]] = {path, reader.pos(), i};
    params[names[i]] = reader.ReadRecord(i, names[i], names.size(), &later);
  }
  if (reader.left() != 0) {
    Fail(ErrorKind::kDataLoss,
         "{}: {} trailing bytes after the last of {} records (ends at byte {}): the file holds "
         "more parameters than the program lists, or the wrong params file was given",
         path, reader.left(), names.size(), reader.pos());
  }
  ReadInParallel(path, later);
  return params;
}

ParamMap ReadSeparateParams(const std::string& dir, const std::vector<std::string>& names,
                            std::map<std::string, ParamSource::Record>* records) {
  ParamMap params;
  for (size_t i = 0; i < names.size(); ++i) {
    std::string file = (std::filesystem::path(dir) / names[i]).string();
    if (records) (*records)[names[i]] = {file, 0, 0};
    RecordReader reader(file);
    params[names[i]] = reader.ReadRecord(0, names[i], 1);
    if (reader.left() != 0) {
      Fail(ErrorKind::kDataLoss, "{}: {} trailing bytes after the record of parameter '{}'", file,
           reader.left(), names[i]);
    }
  }
  return params;
}

ParamSource::FileStamp ParamSource::Stamp(const std::string& file) {
  std::error_code ec;
  FileStamp st;
  st.size = std::filesystem::file_size(file, ec);
  if (ec) Fail(ErrorKind::kNotFound, "Paddle params file '{}': {}", file, ec.message());
  st.mtime = std::filesystem::last_write_time(file, ec).time_since_epoch().count();
  if (ec) Fail(ErrorKind::kNotFound, "Paddle params file '{}': {}", file, ec.message());
  return st;
}

ParamSource::ParamSource(const std::map<std::string, Record>& records, ParamMap& params) {
  for (const auto& [name, record] : records) {
    auto p = params.find(name);
    TILLER_CHECK(p != params.end(), "parameter '{}' has a record but was not loaded", name);
    if (!files_.count(record.file)) files_[record.file] = Stamp(record.file);
    Entry e;
    e.record = record;
    e.declared.dtype = p->second.dtype;
    e.declared.dims = p->second.dims;
    e.held = std::move(p->second.data);
    // Unique in the process: packed copies are found by it (AlignedBuffer::origin).
    e.origin = AlignedBuffer::NewOrigin();
    if (e.held) e.held->set_origin(e.origin);
    entries_.emplace(name, std::move(e));
  }
}

std::shared_ptr<AlignedBuffer> ParamSource::Get(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(name);
  TILLER_CHECK(it != entries_.end(), "parameter '{}' was not loaded", name);
  Entry& e = it->second;
  if (e.held) return e.held;
  if (auto alive = e.seen.lock()) return alive;
  const Record& r = e.record;
  // Why the file is read again, and what to do, for both refusals below.
  constexpr const char* kWhy =
      "parameter '{}' is read again to compile for new input shapes: a predictor keeps only the "
      "packed copies its kernels made; create the predictor again, or set "
      "TILLER_KEEP_LOADED_WEIGHTS=1 to keep the loaded bytes";
  std::error_code ec;
  if (!std::filesystem::exists(r.file, ec))
    Fail(ErrorKind::kNotFound, "{}: the params file is gone ({})", r.file,
         fmt::format(fmt::runtime(kWhy), name));
  const FileStamp now = Stamp(r.file), then = files_.at(r.file);
  if (now.size != then.size || now.mtime != then.mtime)
    Fail(ErrorKind::kDataLoss, "{}: the params file changed since the model was loaded ({})",
         r.file, fmt::format(fmt::runtime(kWhy), name));
  RecordReader reader(r.file);
  reader.Seek(r.offset);
  ParamTensor t = reader.ReadRecord(r.index, name, r.index + 1);
  if (t.dtype != e.declared.dtype || t.dims != e.declared.dims)
    Fail(ErrorKind::kDataLoss, "{}: record {} ('{}') reads back as {} {}, loaded as {} {}", r.file,
         r.index, name, DTypeName(t.dtype), ShapeToString(t.dims), DTypeName(e.declared.dtype),
         ShapeToString(e.declared.dims));
  t.data->set_origin(e.origin);
  e.seen = t.data;
  return t.data;
}

void ParamSource::LetGo() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [name, e] : entries_) {
    if (!e.held) continue;
    e.seen = e.held;
    e.held.reset();
  }
}

}  // namespace tiller::paddle
