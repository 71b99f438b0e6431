// Checkpoint file writing and reading with the HDF5 C API. A file is written by HDF5 to a
// temporary name, tensors straight from their views, then sealed, fsynced and renamed: a full
// disk gives a clean error and leaves no file behind.
#include "ckpt/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <thread>

#include "ckpt/checkpoint_seal.h"
#include "core/crc32c.h"
#include "core/error.h"
#include "core/hdf5_check.h"

namespace bert {
namespace {

namespace fs = std::filesystem;

void fsync_directory(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) fail(Code::io, "cannot open '", path, "' to fsync: ", std::strerror(errno));
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  if (rc != 0) fail(Code::io, "fsync of '", path, "' failed: ", std::strerror(err));
}

void write_string_attr(hid_t obj, const char* name, const std::string& value, const std::string& file) {
  Hdf5Id type(H5_CHECK(H5Tcopy(H5T_C_S1), Code::io, file), H5Tclose);
  H5_CHECK(H5Tset_size(type.get(), std::max<size_t>(value.size(), 1)), Code::io, file);
  Hdf5Id space(H5_CHECK(H5Screate(H5S_SCALAR), Code::io, file), H5Sclose);
  Hdf5Id attr(H5_CHECK(H5Acreate2(obj, name, type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT), Code::io, file),
              H5Aclose);
  H5_CHECK(H5Awrite(attr.get(), type.get(), value.empty() ? "" : value.c_str()), Code::io, file);
}

void write_int_attr(hid_t obj, const char* name, int64_t value, const std::string& file) {
  Hdf5Id space(H5_CHECK(H5Screate(H5S_SCALAR), Code::io, file), H5Sclose);
  Hdf5Id attr(H5_CHECK(H5Acreate2(obj, name, H5T_STD_I64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT), Code::io, file),
              H5Aclose);
  H5_CHECK(H5Awrite(attr.get(), H5T_NATIVE_INT64, &value), Code::io, file);
}

std::string read_string_attr(hid_t obj, const char* name, const std::string& file) {
  if (H5Aexists(obj, name) <= 0) fail(Code::checkpoint, "checkpoint '", file, "' has no attribute '", name, "'");
  Hdf5Id attr(H5_CHECK(H5Aopen(obj, name, H5P_DEFAULT), Code::checkpoint, file), H5Aclose);
  Hdf5Id type(H5_CHECK(H5Aget_type(attr.get()), Code::checkpoint, file), H5Tclose);
  if (H5Tget_class(type.get()) != H5T_STRING || H5Tis_variable_str(type.get()) > 0) {
    fail(Code::checkpoint, "checkpoint '", file, "' attribute '", name, "' is not a fixed-length string");
  }
  std::string value(H5Tget_size(type.get()), '\0');
  H5_CHECK(H5Aread(attr.get(), type.get(), value.data()), Code::checkpoint, file);
  value.resize(std::strlen(value.c_str()));
  return value;
}

int64_t read_int_attr(hid_t obj, const char* name, const std::string& file) {
  if (H5Aexists(obj, name) <= 0) fail(Code::checkpoint, "checkpoint '", file, "' has no attribute '", name, "'");
  Hdf5Id attr(H5_CHECK(H5Aopen(obj, name, H5P_DEFAULT), Code::checkpoint, file), H5Aclose);
  int64_t value = 0;
  H5_CHECK(H5Aread(attr.get(), H5T_NATIVE_INT64, &value), Code::checkpoint, file);
  return value;
}

// Metadata of format 3: a scalar fixed-length string dataset (no size limit, unlike an attribute).
void write_string_dataset(hid_t group, const char* name, const std::string& value, const std::string& file) {
  Hdf5Id type(H5_CHECK(H5Tcopy(H5T_C_S1), Code::io, file), H5Tclose);
  H5_CHECK(H5Tset_size(type.get(), std::max<size_t>(value.size(), 1)), Code::io, file);
  Hdf5Id space(H5_CHECK(H5Screate(H5S_SCALAR), Code::io, file), H5Sclose);
  Hdf5Id set(H5_CHECK(H5Dcreate2(group, name, type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                      Code::io, file),
             H5Dclose);
  H5_CHECK(H5Dwrite(set.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, value.empty() ? "" : value.c_str()),
           Code::io, file);
}

constexpr size_t kMaxMetadataBytes = size_t{1} << 30;

std::string read_string_dataset(hid_t file_id, const std::string& name, const std::string& file) {
  if (H5Lexists(file_id, "metadata", H5P_DEFAULT) <= 0 || H5Lexists(file_id, name.c_str(), H5P_DEFAULT) <= 0) {
    fail(Code::checkpoint, "checkpoint '", file, "' has no dataset '", name, "'");
  }
  Hdf5Id set(H5_CHECK(H5Dopen2(file_id, name.c_str(), H5P_DEFAULT), Code::checkpoint, file), H5Dclose);
  Hdf5Id type(H5_CHECK(H5Dget_type(set.get()), Code::checkpoint, file), H5Tclose);
  Hdf5Id space(H5_CHECK(H5Dget_space(set.get()), Code::checkpoint, file), H5Sclose);
  if (H5Tget_class(type.get()) != H5T_STRING || H5Tis_variable_str(type.get()) > 0 ||
      H5Sget_simple_extent_type(space.get()) != H5S_SCALAR || H5Tget_size(type.get()) > kMaxMetadataBytes) {
    fail(Code::checkpoint, "checkpoint '", file, "' dataset '", name, "' is not a scalar fixed-length string");
  }
  std::string value(H5Tget_size(type.get()), '\0');
  H5_CHECK(H5Dread(set.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, value.data()), Code::checkpoint, file);
  value.resize(std::strlen(value.c_str()));
  return value;
}

// A metadata text (config, state, index): a dataset under /metadata from format 3 on, an
// attribute of the root group before.
std::string read_metadata(hid_t file_id, int format_version, const char* name, const std::string& file) {
  if (format_version >= 3) return read_string_dataset(file_id, std::string("metadata/") + name, file);
  return read_string_attr(file_id, name, file);
}

// The format-3 checksum: CRC-32C over the metadata texts (each after its uint64 length), then
// every tensor's name, int64 shape and float32 bytes, in name order within each group.
uint32_t mix_text(uint32_t crc, const std::string& text) {
  const uint64_t size = text.size();
  crc = crc32c_extend(crc, &size, sizeof size);
  return crc32c_extend(crc, text.data(), text.size());
}

int64_t elems_of(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

uint64_t bytes_of(const TensorView& t) { return static_cast<uint64_t>(elems_of(t.shape)) * sizeof(float); }

// The checksum extended over a tensor whose values' own CRC-32C is `values_crc`.
uint32_t mix_tensor(uint32_t crc, const std::string& name, const TensorView& t, uint32_t values_crc) {
  crc = crc32c_extend(crc, name.data(), name.size());
  crc = crc32c_extend(crc, t.shape.data(), t.shape.size() * sizeof(int64_t));
  return crc32c_combine(crc, values_crc, bytes_of(t));
}

// Formats 1 and 2: FNV-1a 64 over the same bytes (format 1: no metadata).
uint64_t fnv1a_checksum(const std::vector<std::string>& metadata, const std::vector<const TensorViews*>& groups) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](const void* data, size_t n) {
    const unsigned char* p = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  };
  for (const std::string& text : metadata) {
    const uint64_t size = text.size();
    mix(&size, sizeof size);
    mix(text.data(), text.size());
  }
  for (const TensorViews* group : groups) {
    for (const auto& [name, t] : *group) {
      mix(name.data(), name.size());
      mix(t.shape.data(), t.shape.size() * sizeof(int64_t));
      mix(t.values, static_cast<size_t>(elems_of(t.shape)) * sizeof(float));
    }
  }
  return h;
}

// A contiguous float32 dataset written from the view's memory (no conversion, so HDF5 writes
// it straight from there, byte for byte). Returns the checksum extended over it; the values' CRC
// and where HDF5 put them go to `known` for the seal.
uint32_t write_tensor(hid_t group, const std::string& name, const TensorView& t, const std::string& file,
                      uint32_t crc, std::vector<KnownCrc>& known) {
  std::vector<hsize_t> dims(t.shape.begin(), t.shape.end());
  Hdf5Id space(H5_CHECK(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), Code::io, file),
               H5Sclose);
  Hdf5Id set(H5_CHECK(H5Dcreate2(group, name.c_str(), H5T_IEEE_F32LE, space.get(), H5P_DEFAULT, H5P_DEFAULT,
                                 H5P_DEFAULT),
                      Code::io, file),
             H5Dclose);
  H5_CHECK(H5Dwrite(set.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, t.values), Code::io, file);
  const uint32_t values_crc = crc32c(t.values, bytes_of(t));
  const haddr_t offset = H5Dget_offset(set.get());  // from the file's first byte, userblock included
  if (offset != HADDR_UNDEF && bytes_of(t) > 0) known.push_back({offset, bytes_of(t), values_crc});
  return mix_tensor(crc, name, t, values_crc);
}

struct GroupListing {
  std::vector<std::string> names;
};

herr_t collect_name(hid_t, const char* name, const H5L_info_t*, void* data) {
  static_cast<GroupListing*>(data)->names.emplace_back(name);
  return 0;
}

// The shape of a floating-point dataset of `group`.
std::vector<int64_t> dataset_shape(hid_t group, const std::string& name, const std::string& file) {
  Hdf5Id set(H5_CHECK(H5Dopen2(group, name.c_str(), H5P_DEFAULT), Code::checkpoint, file), H5Dclose);
  Hdf5Id type(H5_CHECK(H5Dget_type(set.get()), Code::checkpoint, file), H5Tclose);
  if (H5Tget_class(type.get()) != H5T_FLOAT) {
    fail(Code::checkpoint, "checkpoint '", file, "' tensor '", name, "' is not a floating-point dataset");
  }
  Hdf5Id space(H5_CHECK(H5Dget_space(set.get()), Code::checkpoint, file), H5Sclose);
  const int ndim = H5_CHECK(H5Sget_simple_extent_ndims(space.get()), Code::checkpoint, file);
  std::vector<hsize_t> dims(ndim);
  H5_CHECK(H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr), Code::checkpoint, file);
  return std::vector<int64_t>(dims.begin(), dims.end());
}

// Reads the whole float dataset `name` of `group` into `out`.
void read_values(hid_t group, const std::string& name, const std::string& file, float* out) {
  Hdf5Id set(H5_CHECK(H5Dopen2(group, name.c_str(), H5P_DEFAULT), Code::checkpoint, file), H5Dclose);
  if (H5Dread(set.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, out) < 0) {
    fail(Code::checkpoint, "checkpoint '", file, "' tensor '", name, "' cannot be read (truncated or corrupt file)");
  }
}

CheckpointTensor read_tensor(hid_t group, const std::string& name, const std::string& file) {
  CheckpointTensor t;
  t.shape = dataset_shape(group, name, file);
  t.data.resize(static_cast<size_t>(elems_of(t.shape)));
  read_values(group, name, file, t.data.data());
  return t;
}

// The model's tensors, then each optimizer slot's in name order: the order of the checksums.
std::vector<const TensorViews*> all_groups(const TensorViews& model, const std::map<std::string, TensorViews>& optimizer) {
  std::vector<const TensorViews*> groups = {&model};
  for (const auto& [slot, tensors] : optimizer) groups.push_back(&tensors);
  return groups;
}

// Names and shapes of every tensor per group ("model" and each optimizer slot), written beside
// the checksum so a missing one is named.
nlohmann::json tensor_index(const TensorViews& model, const std::map<std::string, TensorViews>& optimizer) {
  auto names_of = [](const TensorViews& tensors) {
    nlohmann::json names = nlohmann::json::object();
    for (const auto& [name, t] : tensors) names[name] = t.shape;
    return names;
  };
  nlohmann::json index = {{"model", names_of(model)}};
  for (const auto& [slot, tensors] : optimizer) index[slot] = names_of(tensors);
  return index;
}

uint32_t write_group(hid_t parent, const std::string& name, const TensorViews& tensors, const std::string& file,
                     uint32_t crc, std::vector<KnownCrc>& known) {
  Hdf5Id group(H5_CHECK(H5Gcreate2(parent, name.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), Code::io, file),
               H5Gclose);
  for (const auto& [tensor_name, tensor] : tensors) {
    crc = write_tensor(group.get(), tensor_name, tensor, file, crc, known);
  }
  return crc;
}

// The names of the links in `group` (tensors, or the optimizer's slot groups), sorted.
std::vector<std::string> link_names(hid_t group, const std::string& file) {
  GroupListing listing;
  H5_CHECK(H5Literate(group, H5_INDEX_NAME, H5_ITER_NATIVE, nullptr, collect_name, &listing), Code::checkpoint, file);
  return listing.names;
}

TensorMap read_group(hid_t parent, const char* name, const std::string& file) {
  Hdf5Id group(H5_CHECK(H5Gopen2(parent, name, H5P_DEFAULT), Code::checkpoint, file), H5Gclose);
  TensorMap out;
  for (const std::string& n : link_names(group.get(), file)) out[n] = read_tensor(group.get(), n, file);
  return out;
}

// "(a, b)"
std::string join_names(const std::vector<std::string>& names) {
  std::string s = "(";
  for (size_t i = 0; i < names.size(); ++i) s += (i ? ", " : "") + names[i];
  return s + ")";
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// Writes the HDF5 file `tmp` (sec2 driver, userblock left zero for the seal): metadata datasets
// and attributes, then every tensor straight from its view, the checksum attribute last. Returns
// where the tensors' values are and their CRCs (the seal reads back only the rest).
std::vector<KnownCrc> write_hdf5(const std::string& tmp, const CheckpointSource& c, uint64_t userblock) {
  Hdf5Id fcpl(H5_CHECK(H5Pcreate(H5P_FILE_CREATE), Code::io, tmp), H5Pclose);
  H5_CHECK(H5Pset_userblock(fcpl.get(), userblock), Code::io, tmp);
  Hdf5Id file(H5_CHECK(H5Fcreate(tmp.c_str(), H5F_ACC_EXCL, fcpl.get(), H5P_DEFAULT), Code::io, tmp), H5Fclose);
  const std::string state = c.state.dump(), index = tensor_index(c.model, c.optimizer).dump();
  write_int_attr(file.get(), "format_version", kCheckpointFormatVersion, tmp);
  write_string_attr(file.get(), "engine_version", BERT_VERSION_STRING, tmp);
  {
    Hdf5Id meta(H5_CHECK(H5Gcreate2(file.get(), "metadata", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), Code::io, tmp),
                H5Gclose);
    write_string_dataset(meta.get(), "config", c.config_json, tmp);
    write_string_dataset(meta.get(), "state", state, tmp);
    write_string_dataset(meta.get(), "index", index, tmp);
  }
  uint32_t sum = 0;
  for (const std::string& text : {std::string(BERT_VERSION_STRING), c.config_json, state, index}) {
    sum = mix_text(sum, text);
  }
  std::vector<KnownCrc> known;
  sum = write_group(file.get(), "model", c.model, tmp, sum, known);
  if (!c.optimizer.empty()) {
    Hdf5Id opt(H5_CHECK(H5Gcreate2(file.get(), "optimizer", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), Code::io, tmp),
               H5Gclose);
    for (const auto& [slot, tensors] : c.optimizer) sum = write_group(opt.get(), slot, tensors, tmp, sum, known);
  }
  write_string_attr(file.get(), "checksum", std::to_string(sum), tmp);
  H5_CHECK(H5Fclose(file.release()), Code::io, tmp);
  return known;
}

// An upper bound of the file's size: the userblock, the tensors' bytes, the metadata texts
// (with the index, about 100 bytes per tensor) and HDF5's own metadata (under 1 KB per dataset).
uint64_t estimated_bytes(const CheckpointSource& c, uint64_t userblock) {
  uint64_t bytes = userblock + (uint64_t{1} << 20) + c.config_json.size() + 2 * c.state.dump().size();
  for (const TensorViews* group : all_groups(c.model, c.optimizer)) {
    for (const auto& [name, t] : *group) {
      bytes += static_cast<uint64_t>(elems_of(t.shape)) * sizeof(float) + 4096 + 2 * name.size();
    }
  }
  return bytes;
}

// Creates `path` with `bytes` allocated (posix_fallocate), then removes it: the space is free for
// the file HDF5 writes in its place. Error(io) naming the path and the OS reason.
void reserve_space(const std::string& path, uint64_t bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) fail(Code::io, "cannot create '", path, "': ", std::strerror(errno));
  const int rc = ::posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  ::close(fd);
  std::remove(path.c_str());
  if (rc != 0) fail(Code::io, "cannot write '", path, "': ", bytes, " bytes could not be allocated: ", std::strerror(rc));
}

// Seals `tmp` (its userblock) and fsyncs it. The data goes to the disk (fdatasync on a thread of
// its own) while the seal reads back what it does not know the CRC of (HDF5's own structures);
// the final fsync then writes little more than the seal. Error(io) on any failure.
void seal_and_sync(const std::string& tmp, uint64_t userblock, const nlohmann::json& summary,
                   std::vector<KnownCrc> known) {
  const int fd = ::open(tmp.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) fail(Code::io, "cannot open '", tmp, "': ", std::strerror(errno));
  int data_sync_error = 0;
  std::thread data_sync([&] { data_sync_error = ::fdatasync(fd) == 0 ? 0 : errno; });
  try {
    seal_file(fd, userblock, summary, tmp, std::move(known));
    data_sync.join();
    if (data_sync_error != 0) fail(Code::io, "fsync of '", tmp, "' failed: ", std::strerror(data_sync_error));
    if (::fsync(fd) != 0) fail(Code::io, "fsync of '", tmp, "' failed: ", std::strerror(errno));
  } catch (...) {
    if (data_sync.joinable()) data_sync.join();
    ::close(fd);
    throw;
  }
  if (::close(fd) != 0) fail(Code::io, "closing '", tmp, "' failed: ", std::strerror(errno));
}

}  // namespace

void check_writable_dir(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) fail(Code::io, "directory '", dir, "' does not exist");
  if (::access(dir.c_str(), W_OK) != 0) fail(Code::io, "directory '", dir, "' is not writable: ", std::strerror(errno));
}

void write_checkpoint(const std::string& path, const CheckpointSource& source) {
  const fs::path dir = fs::path(path).has_parent_path() ? fs::path(path).parent_path() : fs::path(".");
  try {
    check_writable_dir(dir.string());
  } catch (const Error& e) {
    fail(Code::io, "cannot write checkpoint '", path, "': ", e.what());
  }
  const nlohmann::json summary = seal_summary(source.state);
  const uint64_t userblock = seal_size(summary);
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  std::remove(tmp.c_str());  // left by an earlier process with this pid
  try {
    // HDF5 1.10 cannot recover from a failed write: the half-closed file crashes the process at
    // exit. So the space is reserved first, by plain POSIX calls that fail cleanly (full disk,
    // file size limit); HDF5 then writes where that space was, and the estimate leaves room.
    reserve_space(tmp, estimated_bytes(source, userblock));
    std::vector<KnownCrc> known;
    {
      Hdf5Silence silence;
      known = write_hdf5(tmp, source, userblock);
    }
    seal_and_sync(tmp, userblock, summary, std::move(known));
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
      fail(Code::io, "cannot rename '", tmp, "' to '", path, "': ", std::strerror(errno));
    }
    fsync_directory(dir.string());
  } catch (...) {
    std::remove(tmp.c_str());
    throw;
  }
}

void write_checkpoint(const std::string& path, const CheckpointContents& c) {
  CheckpointSource source{c.config_json, c.state, tensor_views(c.model), {}};
  for (const auto& [slot, tensors] : c.optimizer) source.optimizer[slot] = tensor_views(tensors);
  write_checkpoint(path, source);
}

namespace {

void check_exists(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) fail(Code::io, "checkpoint '", path, "' does not exist");
}

Hdf5Id open_hdf5(const std::string& path) {
  Hdf5Id file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  if (file.get() < 0) fail(Code::checkpoint, "checkpoint '", path, "' is not a readable HDF5 file (truncated or corrupt?)");
  return file;
}

}  // namespace

namespace {

// A metadata text ("state", "config") of the file at `path`, parsed; the seal's header checked,
// not the whole file.
nlohmann::json read_metadata_json(const std::string& path, const char* name) {
  check_exists(path);
  read_seal(path, false);
  Hdf5Silence silence;
  Hdf5Id file = open_hdf5(path);
  const int format_version = static_cast<int>(read_int_attr(file.get(), "format_version", path));
  try {
    return nlohmann::json::parse(read_metadata(file.get(), format_version, name, path));
  } catch (const nlohmann::json::exception& e) {
    fail(Code::checkpoint, "checkpoint '", path, "' has a malformed '", name, "': ", e.what());
  }
}

}  // namespace

nlohmann::json read_checkpoint_summary(const std::string& path) {
  check_exists(path);
  if (std::optional<CheckpointSeal> seal = read_seal(path, false)) return seal->summary;
  return read_metadata_json(path, "state");
}

nlohmann::json read_checkpoint_config(const std::string& path) { return read_metadata_json(path, "config"); }

namespace {

// How a group's tensors are read (into the contents' maps, or straight into flat buffers);
// returns views of what was read, for the index and checksum checks. `slot` is empty for the
// model's group, else the optimizer slot the group holds.
using GroupReader = std::function<TensorViews(hid_t parent, const std::string& slot)>;
// Checks the optimizer slots a file holds (sorted; empty for a weights-only file) before any is read.
using SlotCheck = std::function<void(const std::vector<std::string>& slots)>;

// Reads and verifies the file at `path`: seal, format, metadata, the tensors through the
// readers (the optimizer's slots once check_slots accepts them), the index and the checksum.
CheckpointContents read_verified(const std::string& path, const GroupReader& read_tensors, const SlotCheck& check_slots) {
  check_exists(path);
  CheckpointContents c;
  c.sealed = read_seal(path, true).has_value();  // nothing of HDF5 runs before this check
  Hdf5Silence silence;
  Hdf5Id file = open_hdf5(path);
  c.format_version = static_cast<int>(read_int_attr(file.get(), "format_version", path));
  if (c.format_version < kTensorChecksumFormatVersion || c.format_version > kCheckpointFormatVersion) {
    fail(Code::checkpoint, "checkpoint '", path, "' has format version ", c.format_version, "; this engine reads ",
         kTensorChecksumFormatVersion, " to ", kCheckpointFormatVersion);
  }
  c.engine_version = read_string_attr(file.get(), "engine_version", path);
  c.config_json = read_metadata(file.get(), c.format_version, "config", path);
  const std::string state = read_metadata(file.get(), c.format_version, "state", path);
  const std::string index_text = read_metadata(file.get(), c.format_version, "index", path);
  const std::string stored_checksum = read_string_attr(file.get(), "checksum", path);
  try {
    c.state = nlohmann::json::parse(state);
  } catch (const nlohmann::json::exception& e) {
    fail(Code::checkpoint, "checkpoint '", path, "' has a malformed 'state': ", e.what());
  }
  if (H5Lexists(file.get(), "model", H5P_DEFAULT) <= 0) fail(Code::checkpoint, "checkpoint '", path, "' has no /model group");
  const TensorViews model = read_tensors(file.get(), "");
  std::map<std::string, TensorViews> optimizer;
  if (H5Lexists(file.get(), "optimizer", H5P_DEFAULT) > 0) {
    Hdf5Id opt(H5_CHECK(H5Gopen2(file.get(), "optimizer", H5P_DEFAULT), Code::checkpoint, path), H5Gclose);
    const std::vector<std::string> slots = link_names(opt.get(), path);
    check_slots(slots);
    for (const std::string& slot : slots) optimizer[slot] = read_tensors(opt.get(), slot);
  } else {
    check_slots({});
  }
  nlohmann::json index;
  try {
    index = nlohmann::json::parse(index_text);
  } catch (const nlohmann::json::exception& e) {
    fail(Code::checkpoint, "checkpoint '", path, "' has a malformed 'index': ", e.what());
  }
  const nlohmann::json found = tensor_index(model, optimizer);
  const nlohmann::json listed_groups = index.is_object() ? index : nlohmann::json::object();
  for (const auto& [group, listed] : listed_groups.items()) {
    if (!listed.is_object()) continue;
    for (const auto& [name, shape] : listed.items()) {
      if (!found.contains(group) || !found[group].contains(name)) {
        fail(Code::checkpoint, "checkpoint '", path, "' is missing ", group, " tensor '", name, "'");
      }
    }
  }
  const std::vector<std::string> metadata = {c.engine_version, c.config_json, state, index_text};
  const std::vector<const TensorViews*> groups = all_groups(model, optimizer);
  std::string computed;
  if (c.format_version == kCheckpointFormatVersion) {
    uint32_t crc = 0;
    for (const std::string& text : metadata) crc = mix_text(crc, text);
    for (const TensorViews* group : groups) {
      for (const auto& [name, t] : *group) crc = mix_tensor(crc, name, t, crc32c(t.values, bytes_of(t)));
    }
    computed = std::to_string(crc);
  } else {
    const bool with_metadata = c.format_version == kAttributeMetadataFormatVersion;
    computed = std::to_string(fnv1a_checksum(with_metadata ? metadata : std::vector<std::string>{}, groups));
  }
  if (computed != stored_checksum) {
    fail(Code::checkpoint, "checkpoint '", path, "' fails its checksum (stored ", stored_checksum, ", computed ",
         computed, "): its ",
         c.format_version == kTensorChecksumFormatVersion ? "tensor data" : "tensor data or metadata (state, config)",
         " is corrupt or was edited");
  }
  return c;
}

// Every tensor of the group straight into `flat` (the table's layout), once its names and shapes
// are checked as load_tensors checks them: none missing, each shape the model's, none extra.
TensorViews read_group_into(hid_t parent, const std::string& name, const std::string& file, const std::string& what,
                            const ParamTable& table, float* flat) {
  Hdf5Id group(H5_CHECK(H5Gopen2(parent, name.c_str(), H5P_DEFAULT), Code::checkpoint, file), H5Gclose);
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const std::string& tensor : link_names(group.get(), file)) shapes[tensor] = dataset_shape(group.get(), tensor, file);
  for (const ParamEntry& e : table.entries) {
    if (!shapes.count(e.name)) fail(Code::checkpoint, "checkpoint '", file, "' is missing ", what, " tensor '", e.name, "'");
  }
  for (const ParamEntry& e : table.entries) {
    if (shapes.at(e.name) != e.shape) {
      fail(Code::checkpoint, "checkpoint '", file, "' ", what, " tensor '", e.name, "' has shape ",
           shape_string(shapes.at(e.name)), " but the model expects ", shape_string(e.shape));
    }
  }
  for (const auto& [tensor, shape] : shapes) {
    if (table.find(tensor) < 0) {
      fail(Code::checkpoint, "checkpoint '", file, "' has ", what, " tensor '", tensor, "' that the model does not have");
    }
  }
  for (const ParamEntry& e : table.entries) read_values(group.get(), e.name, file, flat + e.offset);
  return tensor_views(table, flat);
}

}  // namespace

CheckpointContents read_checkpoint(const std::string& path) {
  TensorMap model;
  std::map<std::string, TensorMap> optimizer;
  const GroupReader into_maps = [&](hid_t parent, const std::string& slot) {
    TensorMap& tensors = slot.empty() ? model : optimizer[slot];
    tensors = read_group(parent, slot.empty() ? "model" : slot.c_str(), path);
    return tensor_views(tensors);
  };
  CheckpointContents c = read_verified(path, into_maps, [](const std::vector<std::string>&) {});
  c.model = std::move(model);
  c.optimizer = std::move(optimizer);
  return c;
}

CheckpointContents read_checkpoint_into(const std::string& path, const FlatTensors& into) {
  const GroupReader into_flat = [&](hid_t parent, const std::string& slot) {
    if (slot.empty()) return read_group_into(parent, "model", path, "model", *into.table, into.model);
    return read_group_into(parent, slot, path, "optimizer " + slot, *into.table, into.optimizer.at(slot));
  };
  const SlotCheck same_slots = [&](const std::vector<std::string>& slots) {
    if (slots.empty()) {
      fail(Code::checkpoint, "checkpoint '", path,
           "' holds weights only (no optimizer state): load it with bert_checkpoint_load_weights");
    }
    std::vector<std::string> wanted;
    for (const auto& [slot, buffer] : into.optimizer) wanted.push_back(slot);
    if (slots != wanted) {
      fail(Code::checkpoint, "checkpoint '", path, "' holds optimizer state ", join_names(slots),
           " but this optimizer keeps ", join_names(wanted),
           ": resume with the optimizer that wrote it, or start from its weights with train.init_checkpoint");
    }
  };
  return read_verified(path, into_flat, same_slots);
}

TensorViews tensor_views(const ParamTable& table, const float* flat) {
  TensorViews out;
  for (const ParamEntry& e : table.entries) out[e.name] = {e.shape, flat + e.offset};
  return out;
}

TensorViews tensor_views(const TensorMap& tensors) {
  TensorViews out;
  for (const auto& [name, t] : tensors) out[name] = {t.shape, t.data.data()};
  return out;
}

TensorMap tensors_of(const ParamTable& table, const float* flat) {
  TensorMap out;
  for (const ParamEntry& e : table.entries) {
    CheckpointTensor& t = out[e.name];
    t.shape = e.shape;
    t.data.assign(flat + e.offset, flat + e.offset + e.elems());
  }
  return out;
}

void load_tensors(const ParamTable& table, const TensorMap& tensors, const std::string& path, const std::string& what,
                  float* flat) {
  for (const ParamEntry& e : table.entries) {
    auto it = tensors.find(e.name);
    if (it == tensors.end()) fail(Code::checkpoint, "checkpoint '", path, "' is missing ", what, " tensor '", e.name, "'");
    if (it->second.shape != e.shape) {
      fail(Code::checkpoint, "checkpoint '", path, "' ", what, " tensor '", e.name, "' has shape ",
           shape_string(it->second.shape), " but the model expects ", shape_string(e.shape));
    }
  }
  for (const auto& [name, tensor] : tensors) {
    if (table.find(name) < 0) {
      fail(Code::checkpoint, "checkpoint '", path, "' has ", what, " tensor '", name, "' that the model does not have");
    }
  }
  for (const ParamEntry& e : table.entries) {
    const CheckpointTensor& t = tensors.at(e.name);
    std::copy(t.data.begin(), t.data.end(), flat + e.offset);
  }
}

}  // namespace bert
