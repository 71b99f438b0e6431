// Checkpoint seals (see checkpoint_seal.h): written into the HDF5 file's userblock once HDF5 has
// closed it, before the atomic rename; read with plain POSIX calls, so nothing of HDF5 runs on an
// unchecked file.
#include "ckpt/checkpoint_seal.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/crc32c.h"
#include "core/error.h"

namespace bert {
namespace {

constexpr char kMagic[] = "bertengine checkpoint seal 1\n";
constexpr char kHdf5Signature[] = "\x89HDF\r\n\x1a\n";
constexpr char kHeaderCrcKey[] = "header_crc32c ";

class Fd {  // a read-only file descriptor, closed on scope exit
 public:
  explicit Fd(const std::string& path) : fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC)) {
    if (fd_ < 0) fail(Code::io, "cannot open checkpoint '", path, "': ", std::strerror(errno));
  }
  ~Fd() { ::close(fd_); }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// Reads exactly n bytes at offset (the caller knows the file is long enough).
void read_at(int fd, char* out, size_t n, uint64_t offset, const std::string& path) {
  size_t done = 0;
  while (done < n) {
    const ssize_t got = ::pread(fd, out + done, n - done, static_cast<off_t>(offset + done));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) fail(Code::io, "reading checkpoint '", path, "' failed: ", std::strerror(errno));
    if (got == 0) fail(Code::checkpoint, "checkpoint '", path, "' is corrupt: it ended while being read (truncated?)");
    done += static_cast<size_t>(got);
  }
}

// CRC-32C of the file's bytes [begin, end), read in 4 MiB pieces.
uint32_t crc32c_of_range(int fd, uint64_t begin, uint64_t end, const std::string& path) {
  uint32_t crc = 0;
  if (end <= begin) return crc;
  std::vector<char> buffer(std::min<uint64_t>(4 << 20, end - begin));
  for (uint64_t at = begin; at < end;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(buffer.size(), end - at));
    read_at(fd, buffer.data(), n, at, path);
    crc = crc32c_extend(crc, buffer.data(), n);
    at += n;
  }
  return crc;
}

std::string header_text(const nlohmann::json& fields) {
  std::string text = kMagic + fields.dump() + "\n";
  return text + kHeaderCrcKey + std::to_string(crc32c(text.data(), text.size())) + "\n";
}

// A decimal uint32 written by header_text: digits only, no sign, no leading zeros beyond "0".
std::optional<uint32_t> parse_u32(const std::string& s) {
  if (s.empty() || s.size() > 10 || (s.size() > 1 && s[0] == '0')) return std::nullopt;
  uint64_t v = 0;
  for (char ch : s) {
    if (ch < '0' || ch > '9') return std::nullopt;
    v = v * 10 + static_cast<uint64_t>(ch - '0');
  }
  if (v > UINT32_MAX) return std::nullopt;
  return static_cast<uint32_t>(v);
}

uint64_t unsigned_field(const nlohmann::json& fields, const char* key, const std::string& path) {
  const auto it = fields.find(key);
  if (it == fields.end() || !it->is_number_unsigned()) {
    fail(Code::checkpoint, "checkpoint '", path, "' is corrupt: its seal has no valid '", key, "'");
  }
  return it->get<uint64_t>();
}

std::string hex32(uint32_t v) {
  char text[11];
  std::snprintf(text, sizeof text, "0x%08x", v);
  return text;
}

}  // namespace

nlohmann::json seal_summary(const nlohmann::json& state) {
  nlohmann::json summary = nlohmann::json::object();
  if (!state.is_object()) return summary;
  for (const char* key : {"run_id", "written_ns", "global_step"}) {
    if (state.contains(key)) summary[key] = state[key];
  }
  return summary;
}

uint64_t seal_size(const nlohmann::json& summary) {
  // The largest values the fields can take, so that the size does not depend on them.
  const size_t text = header_text({{"crc32c", UINT32_MAX}, {"file_bytes", UINT64_MAX}, {"summary", summary},
                                   {"userblock", kMaxSealBytes}})
                          .size();
  uint64_t size = kMinSealBytes;
  while (size < text + 1) size *= 2;  // at least one NUL ends the text
  if (size > kMaxSealBytes) fail(Code::checkpoint, "checkpoint summary too long for a seal: ", summary.dump());
  return size;
}

void seal_file(int fd, uint64_t userblock, const nlohmann::json& summary, const std::string& path,
               std::vector<KnownCrc> known) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) fail(Code::io, "cannot stat '", path, "': ", std::strerror(errno));
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  BERT_CHECK(size >= userblock, Code::internal, "HDF5 file '", path, "' smaller than its userblock");
  std::sort(known.begin(), known.end(), [](const KnownCrc& a, const KnownCrc& b) { return a.offset < b.offset; });
  uint32_t crc = 0;
  uint64_t at = userblock;
  for (const KnownCrc& k : known) {
    BERT_CHECK(k.offset >= at && k.offset + k.length <= size, Code::internal, "checkpoint '", path,
               "': a known range [", k.offset, ", ", k.offset + k.length, ") overlaps another or the file's ends");
    crc = crc32c_combine(crc, crc32c_of_range(fd, at, k.offset, path), k.offset - at);
    crc = crc32c_combine(crc, k.crc32c, k.length);
    at = k.offset + k.length;
  }
  crc = crc32c_combine(crc, crc32c_of_range(fd, at, size, path), size - at);
  const nlohmann::json fields = {{"crc32c", crc},
                                 {"file_bytes", size},
                                 {"summary", summary},
                                 {"userblock", userblock}};
  std::string block = header_text(fields);
  BERT_CHECK(block.size() < userblock, Code::internal, "checkpoint seal does not fit its userblock");
  block.resize(userblock, '\0');
  for (size_t done = 0; done < block.size();) {
    const ssize_t n = ::pwrite(fd, block.data() + done, block.size() - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail(Code::io, "writing the seal of '", path, "' failed: ", std::strerror(n < 0 ? errno : ENOSPC));
    done += static_cast<size_t>(n);
  }
}

std::optional<CheckpointSeal> read_seal(const std::string& path, bool whole_file) {
  Fd fd(path);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) fail(Code::io, "cannot stat checkpoint '", path, "': ", std::strerror(errno));
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  const auto corrupt = [&](const auto&... why) { fail(Code::checkpoint, "checkpoint '", path, "' is corrupt: ", why...); };

  std::string head(std::min<uint64_t>(size, kMaxSealBytes), '\0');
  read_at(fd.get(), head.data(), head.size(), 0, path);
  if (head.compare(0, sizeof kHdf5Signature - 1, kHdf5Signature) == 0) return std::nullopt;
  if (size < kMinSealBytes) corrupt("it has only ", size, " bytes (truncated?)");
  if (head.compare(0, sizeof kMagic - 1, kMagic) != 0) {
    corrupt("it starts with neither its seal (\"bertengine checkpoint seal 1\") nor the HDF5 signature");
  }
  // The text: magic line, fields line, header_crc32c line, then NULs.
  const size_t text_end = head.find('\0');
  if (text_end == std::string::npos) corrupt("its seal is not terminated within ", head.size(), " bytes");
  const std::string text = head.substr(0, text_end);
  const size_t fields_end = text.find('\n', sizeof kMagic - 1);
  if (fields_end == std::string::npos || text.compare(fields_end + 1, sizeof kHeaderCrcKey - 1, kHeaderCrcKey) != 0 ||
      text.back() != '\n') {
    corrupt("its seal is malformed");
  }
  const size_t crc_at = fields_end + sizeof kHeaderCrcKey;  // after "\nheader_crc32c "
  const std::optional<uint32_t> header_crc = parse_u32(text.substr(crc_at, text.size() - 1 - crc_at));
  if (!header_crc) corrupt("its seal's header_crc32c is malformed");
  const uint32_t computed_header = crc32c(text.data(), fields_end + 1);
  if (*header_crc != computed_header) {
    corrupt("checksum mismatch in its seal (header CRC-32C stored ", hex32(*header_crc), ", computed ",
            hex32(computed_header), ")");
  }

  nlohmann::json fields = nlohmann::json::parse(text.substr(sizeof kMagic - 1, fields_end - (sizeof kMagic - 1)),
                                                nullptr, false);
  if (!fields.is_object()) corrupt("its seal's fields are not a JSON object");
  CheckpointSeal seal;
  seal.userblock = unsigned_field(fields, "userblock", path);
  seal.file_bytes = unsigned_field(fields, "file_bytes", path);
  const uint64_t crc = unsigned_field(fields, "crc32c", path);
  if (crc > UINT32_MAX) corrupt("its seal's crc32c ", crc, " is not a 32-bit value");
  seal.crc32c = static_cast<uint32_t>(crc);
  if (fields.contains("summary") && fields["summary"].is_object()) seal.summary = fields["summary"];
  if (seal.userblock < kMinSealBytes || seal.userblock > kMaxSealBytes || (seal.userblock & (seal.userblock - 1)) ||
      seal.userblock <= text_end || seal.userblock > seal.file_bytes) {
    corrupt("its seal gives an invalid userblock size ", seal.userblock);
  }
  if (size != seal.file_bytes) {
    corrupt("it has ", size, " bytes but was written with ", seal.file_bytes,
            size < seal.file_bytes ? " (truncated)" : " (bytes appended)");
  }
  if (head.find_first_not_of('\0', text_end) < seal.userblock) corrupt("its seal's padding is not zero");
  if (!whole_file) return seal;

  const uint32_t computed = crc32c_of_range(fd.get(), seal.userblock, size, path);
  if (computed != seal.crc32c) {
    corrupt("checksum mismatch (CRC-32C of its ", size - seal.userblock, " bytes of HDF5 data: stored ",
            hex32(seal.crc32c), ", computed ", hex32(computed), ")");
  }
  return seal;
}

}  // namespace bert
