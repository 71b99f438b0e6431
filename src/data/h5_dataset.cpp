// HDF5 access for the shard readers. Reads are done in bands of rows; a chunked dataset gets
// a chunk cache large enough for one band so each compressed chunk is inflated once.
#include "data/h5_dataset.h"

#include <algorithm>
#include <filesystem>

namespace bert {
namespace {

// Frees the memory HDF5 allocated for variable-length elements, whatever happens after the read.
struct VlenReclaim {
  hid_t memtype, memspace;
  std::vector<hvl_t>& buffer;
  ~VlenReclaim() {
#if H5_VERSION_GE(1, 12, 0)
    H5Treclaim(memtype, memspace, H5P_DEFAULT, buffer.data());
#else
    H5Dvlen_reclaim(memtype, memspace, H5P_DEFAULT, buffer.data());
#endif
  }
};

}  // namespace

Hdf5Id open_h5_file(const std::string& path) {
  Hdf5Silence silence;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    fail(Code::io, "shard '", path, "' does not exist or is not a regular file");
  hid_t id = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (id < 0) {
    fail(Code::io, "cannot open shard '", path, "' as HDF5 (not an HDF5 file, truncated or corrupt; size ",
         std::filesystem::file_size(path, ec), " bytes)");
  }
  return Hdf5Id(id, H5Fclose);
}

bool h5_has_dataset(hid_t file, const std::string& key) {
  Hdf5Silence silence;
  if (H5Lexists(file, key.c_str(), H5P_DEFAULT) <= 0) return false;
  H5O_info_t info;
#if H5_VERSION_GE(1, 12, 0)
  if (H5Oget_info_by_name3(file, key.c_str(), &info, H5O_INFO_BASIC, H5P_DEFAULT) < 0) return false;
#else
  if (H5Oget_info_by_name2(file, key.c_str(), &info, H5O_INFO_BASIC, H5P_DEFAULT) < 0) return false;
#endif
  return info.type == H5O_TYPE_DATASET;
}

H5Dataset::H5Dataset(hid_t file, const std::string& path, const std::string& key) : path_(path), key_(key) {
  Hdf5Silence silence;
  if (!h5_has_dataset(file, key)) fail(Code::data, "shard '", path, "' has no dataset '", key, "'");
  const std::string w = where();
  id_ = Hdf5Id(H5_CHECK(H5Dopen2(file, key.c_str(), H5P_DEFAULT), Code::io, w), H5Dclose);

  Hdf5Id type(H5_CHECK(H5Dget_type(id_.get()), Code::io, w), H5Tclose);
  class_ = H5Tget_class(type.get());
  if (class_ == H5T_VLEN) {
    Hdf5Id base(H5_CHECK(H5Tget_super(type.get()), Code::io, w), H5Tclose);
    base_class_ = H5Tget_class(base.get());
  }

  Hdf5Id space(H5_CHECK(H5Dget_space(id_.get()), Code::io, w), H5Sclose);
  const int rank = H5_CHECK(H5Sget_simple_extent_ndims(space.get()), Code::io, w);
  dims_.assign(static_cast<size_t>(rank), 0);
  if (rank > 0) H5_CHECK(H5Sget_simple_extent_dims(space.get(), dims_.data(), nullptr), Code::io, w);

  Hdf5Id dcpl(H5_CHECK(H5Dget_create_plist(id_.get()), Code::io, w), H5Pclose);
  if (rank > 0 && H5Pget_layout(dcpl.get()) == H5D_CHUNKED) {
    std::vector<hsize_t> chunk(static_cast<size_t>(rank));
    H5_CHECK(H5Pget_chunk(dcpl.get(), rank, chunk.data()), Code::io, w);
    chunk_rows_ = chunk[0];
    // Re-open with a chunk cache holding two bands of chunks (the default is 1 MiB).
    const size_t row_bytes = H5Tget_size(type.get()) * (rank > 1 ? dims_[1] : 1);
    const size_t band_bytes = static_cast<size_t>(chunk_rows_) * row_bytes;
    if (2 * band_bytes > (size_t{1} << 20)) {
      Hdf5Id dapl(H5_CHECK(H5Pcreate(H5P_DATASET_ACCESS), Code::io, w), H5Pclose);
      H5_CHECK(H5Pset_chunk_cache(dapl.get(), 12421, 2 * band_bytes, 1.0), Code::io, w);
      id_ = Hdf5Id(H5_CHECK(H5Dopen2(file, key.c_str(), dapl.get()), Code::io, w), H5Dclose);
    }
  }
  if (class_ == H5T_VLEN) raw_vlen_ = std::make_unique<RawVlenReader>(file, id_.get(), path_, w);
}

std::string H5Dataset::where() const { return "dataset '" + key_ + "' of shard '" + path_ + "'"; }

void H5Dataset::read_int32(hsize_t begin, hsize_t count, std::vector<int32_t>& out) const {
  const hsize_t width = dims_.size() > 1 ? dims_[1] : 1;
  out.resize(static_cast<size_t>(count * width));
  if (count == 0 || width == 0) return;
  Hdf5Silence silence;
  const std::string w = where();
  Hdf5Id file_space(H5_CHECK(H5Dget_space(id_.get()), Code::io, w), H5Sclose);
  const hsize_t start[2] = {begin, 0}, extent[2] = {count, width};
  H5_CHECK(H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start, nullptr, extent, nullptr), Code::io, w);
  Hdf5Id mem_space(H5_CHECK(H5Screate_simple(static_cast<int>(dims_.size()), extent, nullptr), Code::io, w), H5Sclose);
  H5_CHECK(H5Dread(id_.get(), H5T_NATIVE_INT32, mem_space.get(), file_space.get(), H5P_DEFAULT, out.data()), Code::io,
           w);
}

void H5Dataset::read_vlen_int32(hsize_t begin, hsize_t count, std::vector<int32_t>& values,
                                std::vector<int64_t>& lengths) const {
  if (raw_vlen_ && raw_vlen_->supported()) {
    raw_vlen_->read(begin, count, values, lengths);
    return;
  }
  values.clear();
  lengths.assign(static_cast<size_t>(count), 0);
  if (count == 0) return;
  Hdf5Silence silence;
  const std::string w = where();
  Hdf5Id file_space(H5_CHECK(H5Dget_space(id_.get()), Code::io, w), H5Sclose);
  const hsize_t start[1] = {begin}, extent[1] = {count};
  H5_CHECK(H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start, nullptr, extent, nullptr), Code::io, w);
  Hdf5Id mem_space(H5_CHECK(H5Screate_simple(1, extent, nullptr), Code::io, w), H5Sclose);
  Hdf5Id mem_type(H5_CHECK(H5Tvlen_create(H5T_NATIVE_INT32), Code::io, w), H5Tclose);
  std::vector<hvl_t> buffer(static_cast<size_t>(count), hvl_t{0, nullptr});
  {
    VlenReclaim reclaim{mem_type.get(), mem_space.get(), buffer};
    H5_CHECK(H5Dread(id_.get(), mem_type.get(), mem_space.get(), file_space.get(), H5P_DEFAULT, buffer.data()),
             Code::io, w);
    size_t total = 0;
    for (const hvl_t& v : buffer) total += v.len;
    values.reserve(total);
    for (size_t r = 0; r < buffer.size(); ++r) {
      const int32_t* p = static_cast<const int32_t*>(buffer[r].p);
      values.insert(values.end(), p, p + buffer[r].len);
      lengths[r] = static_cast<int64_t>(buffer[r].len);
    }
  }
}

}  // namespace bert
