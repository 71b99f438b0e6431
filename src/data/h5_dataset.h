// Thin helpers over the HDF5 C API for the shard readers: open a file read-only, describe a
// dataset (type class, element width, shape, chunking), and read bands of rows of fixed-width
// or variable-length integer datasets converted to int32. Failures name file and dataset.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/hdf5_check.h"
#include "data/h5_raw_vlen.h"

namespace bert {

// Opens an HDF5 file read-only; Error(io) naming the file when it is missing, not HDF5, or truncated.
Hdf5Id open_h5_file(const std::string& path);
bool h5_has_dataset(hid_t file, const std::string& key);

class H5Dataset {
 public:
  // Opens dataset `key` of `file` (whose path is `path`, for messages); Error(data) if missing.
  H5Dataset(hid_t file, const std::string& path, const std::string& key);

  const std::string& key() const { return key_; }
  H5T_class_t type_class() const { return class_; }       // H5T_INTEGER, H5T_VLEN, ...
  H5T_class_t base_class() const { return base_class_; }  // element class of a VLEN
  const std::vector<hsize_t>& dims() const { return dims_; }
  hsize_t chunk_rows() const { return chunk_rows_; }  // 0 when stored contiguously
  // "'input_ids' of 'f.h5'": for messages.
  std::string where() const;

  // Reads rows [begin, begin + count) of a rank-1 or rank-2 integer dataset as int32:
  // out is [count, width] with width = dims[1] (1 for rank 1).
  void read_int32(hsize_t begin, hsize_t count, std::vector<int32_t>& out) const;
  // Reads rows of a rank-1 VLEN-of-integer dataset as int32: values concatenated, row r has
  // lengths[r] values. Through RawVlenReader (every heap reference checked) where it supports
  // the dataset's storage, else through HDF5's conversion.
  void read_vlen_int32(hsize_t begin, hsize_t count, std::vector<int32_t>& values, std::vector<int64_t>& lengths) const;

 private:
  std::string path_, key_;
  Hdf5Id id_;
  H5T_class_t class_ = H5T_NO_CLASS, base_class_ = H5T_NO_CLASS;
  std::vector<hsize_t> dims_;
  hsize_t chunk_rows_ = 0;
  std::unique_ptr<RawVlenReader> raw_vlen_;  // VLEN datasets only
};

}  // namespace bert
