// Checkpoint file writing and reading with the HDF5 C API. Files are assembled in memory and
// written with plain POSIX calls, so a full disk gives a clean error and no half-written file.
#include "ckpt/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>

#include "ckpt/checkpoint_seal.h"
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

void write_tensor(hid_t group, const std::string& name, const CheckpointTensor& t, const std::string& file) {
  std::vector<hsize_t> dims(t.shape.begin(), t.shape.end());
  Hdf5Id space(H5_CHECK(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), Code::io, file),
               H5Sclose);
  Hdf5Id set(H5_CHECK(H5Dcreate2(group, name.c_str(), H5T_IEEE_F32LE, space.get(), H5P_DEFAULT, H5P_DEFAULT,
                                 H5P_DEFAULT),
                      Code::io, file),
             H5Dclose);
  H5_CHECK(H5Dwrite(set.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, t.data.data()), Code::io, file);
}

struct GroupListing {
  std::vector<std::string> names;
};

herr_t collect_name(hid_t, const char* name, const H5L_info_t*, void* data) {
  static_cast<GroupListing*>(data)->names.emplace_back(name);
  return 0;
}

CheckpointTensor read_tensor(hid_t group, const std::string& name, const std::string& file) {
  Hdf5Id set(H5_CHECK(H5Dopen2(group, name.c_str(), H5P_DEFAULT), Code::checkpoint, file), H5Dclose);
  Hdf5Id type(H5_CHECK(H5Dget_type(set.get()), Code::checkpoint, file), H5Tclose);
  if (H5Tget_class(type.get()) != H5T_FLOAT) {
    fail(Code::checkpoint, "checkpoint '", file, "' tensor '", name, "' is not a floating-point dataset");
  }
  Hdf5Id space(H5_CHECK(H5Dget_space(set.get()), Code::checkpoint, file), H5Sclose);
  int ndim = H5_CHECK(H5Sget_simple_extent_ndims(space.get()), Code::checkpoint, file);
  std::vector<hsize_t> dims(ndim);
  H5_CHECK(H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr), Code::checkpoint, file);
  CheckpointTensor t;
  size_t n = 1;
  for (hsize_t d : dims) {
    t.shape.push_back(static_cast<int64_t>(d));
    n *= d;
  }
  t.data.resize(n);
  if (H5Dread(set.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, t.data.data()) < 0) {
    fail(Code::checkpoint, "checkpoint '", file, "' tensor '", name, "' cannot be read (truncated or corrupt file)");
  }
  return t;
}

// FNV-1a 64 over the metadata attributes as stored (each length-prefixed; empty for format 1,
// whose checksum covered tensors only), then every tensor's name, shape and bytes, in name order
// within each group.
uint64_t checksum(const CheckpointContents& c, const std::vector<std::string>& metadata) {
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
  for (const TensorMap* group : {&c.model, &c.exp_avg, &c.exp_avg_sq}) {
    for (const auto& [name, t] : *group) {
      mix(name.data(), name.size());
      mix(t.shape.data(), t.shape.size() * sizeof(int64_t));
      mix(t.data.data(), t.data.size() * sizeof(float));
    }
  }
  return h;
}

// Names of every tensor per group, written beside the checksum so a missing one is named.
nlohmann::json tensor_index(const CheckpointContents& c) {
  nlohmann::json index = nlohmann::json::object();
  const std::pair<const char*, const TensorMap*> groups[] = {
      {"model", &c.model}, {"exp_avg", &c.exp_avg}, {"exp_avg_sq", &c.exp_avg_sq}};
  for (const auto& [group, tensors] : groups) {
    nlohmann::json names = nlohmann::json::object();
    for (const auto& [name, t] : *tensors) names[name] = t.shape;
    index[group] = names;
  }
  return index;
}

void write_group(hid_t parent, const char* name, const TensorMap& tensors, const std::string& file) {
  Hdf5Id group(H5_CHECK(H5Gcreate2(parent, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), Code::io, file), H5Gclose);
  for (const auto& [tensor_name, tensor] : tensors) write_tensor(group.get(), tensor_name, tensor, file);
}

TensorMap read_group(hid_t parent, const char* name, const std::string& file) {
  Hdf5Id group(H5_CHECK(H5Gopen2(parent, name, H5P_DEFAULT), Code::checkpoint, file), H5Gclose);
  GroupListing listing;
  H5_CHECK(H5Literate(group.get(), H5_INDEX_NAME, H5_ITER_NATIVE, nullptr, collect_name, &listing), Code::checkpoint,
           file);
  TensorMap out;
  for (const std::string& n : listing.names) out[n] = read_tensor(group.get(), n, file);
  return out;
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace

void check_writable_dir(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) fail(Code::io, "directory '", dir, "' does not exist");
  if (::access(dir.c_str(), W_OK) != 0) fail(Code::io, "directory '", dir, "' is not writable: ", std::strerror(errno));
}

// Builds the whole HDF5 file in memory (HDF5's core driver, no backing store): nothing
// HDF5 does can then fail for lack of disk space and leave a half-closed file behind. Its first
// `userblock` bytes are zero, for the seal.
std::vector<char> hdf5_image(const CheckpointContents& c, const std::string& name, uint64_t userblock) {
  Hdf5Id fapl(H5_CHECK(H5Pcreate(H5P_FILE_ACCESS), Code::io, name), H5Pclose);
  H5_CHECK(H5Pset_fapl_core(fapl.get(), 64 << 20, 0), Code::io, name);
  Hdf5Id fcpl(H5_CHECK(H5Pcreate(H5P_FILE_CREATE), Code::io, name), H5Pclose);
  H5_CHECK(H5Pset_userblock(fcpl.get(), userblock), Code::io, name);
  Hdf5Id file(H5_CHECK(H5Fcreate(name.c_str(), H5F_ACC_TRUNC, fcpl.get(), fapl.get()), Code::io, name), H5Fclose);
  const std::string state = c.state.dump(), index = tensor_index(c).dump();
  write_int_attr(file.get(), "format_version", kCheckpointFormatVersion, name);
  write_string_attr(file.get(), "engine_version", BERT_VERSION_STRING, name);
  write_string_attr(file.get(), "config", c.config_json, name);
  write_string_attr(file.get(), "state", state, name);
  write_string_attr(file.get(), "index", index, name);
  const uint64_t sum = checksum(c, {BERT_VERSION_STRING, c.config_json, state, index});
  write_string_attr(file.get(), "checksum", std::to_string(sum), name);
  write_group(file.get(), "model", c.model, name);
  if (c.has_optimizer()) {
    Hdf5Id opt(H5_CHECK(H5Gcreate2(file.get(), "optimizer", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), Code::io, name),
               H5Gclose);
    write_group(opt.get(), "exp_avg", c.exp_avg, name);
    write_group(opt.get(), "exp_avg_sq", c.exp_avg_sq, name);
  }
  H5_CHECK(H5Fflush(file.get(), H5F_SCOPE_GLOBAL), Code::io, name);
  // The image HDF5 returns starts after the userblock.
  const ssize_t size = H5_CHECK(H5Fget_file_image(file.get(), nullptr, 0), Code::io, name);
  std::vector<char> image(userblock + static_cast<size_t>(size));
  H5_CHECK(H5Fget_file_image(file.get(), image.data() + userblock, static_cast<size_t>(size)), Code::io, name);
  return image;
}

// Writes bytes to a new file and fsyncs it; Error(io) with the OS reason on any failure.
void write_file_synced(const std::string& path, const std::vector<char>& bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail(Code::io, "cannot create '", path, "': ", std::strerror(errno));
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : ENOSPC;
      ::close(fd);
      fail(Code::io, "writing '", path, "' failed after ", done, " of ", bytes.size(), " bytes: ", std::strerror(err));
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    fail(Code::io, "fsync of '", path, "' failed: ", std::strerror(err));
  }
  if (::close(fd) != 0) fail(Code::io, "closing '", path, "' failed: ", std::strerror(errno));
}

void write_checkpoint(const std::string& path, const CheckpointContents& c) {
  const fs::path dir = fs::path(path).has_parent_path() ? fs::path(path).parent_path() : fs::path(".");
  try {
    check_writable_dir(dir.string());
  } catch (const Error& e) {
    fail(Code::io, "cannot write checkpoint '", path, "': ", e.what());
  }
  const nlohmann::json summary = seal_summary(c.state);
  const uint64_t userblock = seal_size(summary);
  std::vector<char> image;
  {
    Hdf5Silence silence;
    image = hdf5_image(c, path, userblock);
  }
  seal_image(image, userblock, summary);
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  try {
    write_file_synced(tmp, image);
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
      fail(Code::io, "cannot rename '", tmp, "' to '", path, "': ", std::strerror(errno));
    }
    fsync_directory(dir.string());
  } catch (...) {
    std::remove(tmp.c_str());
    throw;
  }
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

nlohmann::json read_checkpoint_summary(const std::string& path) {
  check_exists(path);
  if (std::optional<CheckpointSeal> seal = read_seal(path, false)) return seal->summary;
  Hdf5Silence silence;
  Hdf5Id file = open_hdf5(path);
  try {
    return nlohmann::json::parse(read_string_attr(file.get(), "state", path));
  } catch (const nlohmann::json::exception& e) {
    fail(Code::checkpoint, "checkpoint '", path, "' has a malformed 'state' attribute: ", e.what());
  }
}

CheckpointContents read_checkpoint(const std::string& path) {
  check_exists(path);
  CheckpointContents c;
  c.sealed = read_seal(path, true).has_value();  // nothing of HDF5 runs before this check
  Hdf5Silence silence;
  Hdf5Id file = open_hdf5(path);
  c.format_version = static_cast<int>(read_int_attr(file.get(), "format_version", path));
  if (c.format_version != kCheckpointFormatVersion && c.format_version != kTensorChecksumFormatVersion) {
    fail(Code::checkpoint, "checkpoint '", path, "' has format version ", c.format_version, "; this engine reads ",
         kTensorChecksumFormatVersion, " and ", kCheckpointFormatVersion);
  }
  c.engine_version = read_string_attr(file.get(), "engine_version", path);
  c.config_json = read_string_attr(file.get(), "config", path);
  const std::string state = read_string_attr(file.get(), "state", path);
  const std::string index_text = read_string_attr(file.get(), "index", path);
  const std::string stored_checksum = read_string_attr(file.get(), "checksum", path);
  std::vector<std::string> metadata;
  if (c.format_version != kTensorChecksumFormatVersion) metadata = {c.engine_version, c.config_json, state, index_text};
  try {
    c.state = nlohmann::json::parse(state);
  } catch (const nlohmann::json::exception& e) {
    fail(Code::checkpoint, "checkpoint '", path, "' has a malformed 'state' attribute: ", e.what());
  }
  if (H5Lexists(file.get(), "model", H5P_DEFAULT) <= 0) fail(Code::checkpoint, "checkpoint '", path, "' has no /model group");
  c.model = read_group(file.get(), "model", path);
  if (H5Lexists(file.get(), "optimizer", H5P_DEFAULT) > 0) {
    Hdf5Id opt(H5_CHECK(H5Gopen2(file.get(), "optimizer", H5P_DEFAULT), Code::checkpoint, path), H5Gclose);
    c.exp_avg = read_group(opt.get(), "exp_avg", path);
    c.exp_avg_sq = read_group(opt.get(), "exp_avg_sq", path);
  }
  nlohmann::json index;
  try {
    index = nlohmann::json::parse(index_text);
  } catch (const nlohmann::json::exception& e) {
    fail(Code::checkpoint, "checkpoint '", path, "' has a malformed 'index' attribute: ", e.what());
  }
  const nlohmann::json found = tensor_index(c);
  for (const char* group : {"model", "exp_avg", "exp_avg_sq"}) {
    const nlohmann::json listed = index.value(group, nlohmann::json::object());
    for (const auto& [name, shape] : listed.items()) {
      if (!found[group].contains(name)) {
        fail(Code::checkpoint, "checkpoint '", path, "' is missing ", group, " tensor '", name, "'");
      }
    }
  }
  const uint64_t computed = checksum(c, metadata);
  if (std::to_string(computed) != stored_checksum) {
    fail(Code::checkpoint, "checkpoint '", path, "' fails its checksum (stored ", stored_checksum, ", computed ",
         computed, "): its ", metadata.empty() ? "tensor data" : "tensor data or metadata (state, config)",
         " is corrupt or was edited");
  }
  return c;
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
