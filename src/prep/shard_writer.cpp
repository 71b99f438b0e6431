// HDF5 shard writing with the C API; every call goes through H5_CHECK so a failure becomes a
// bert::Error naming the file and dataset.
#include "prep/shard_writer.h"

#include <hdf5.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <mutex>

#include "core/error.h"
#include "core/hdf5_check.h"

namespace bert {
namespace {

std::mutex hdf5_mutex;  // serialises HDF5 calls for builds of the library without thread safety

std::string where(const std::string& path, const char* dataset) { return path + "' dataset '" + dataset; }

template <typename T>
void write_2d(hid_t file, const std::string& path, const char* name, hid_t type, const std::vector<T>& data,
              hsize_t rows, hsize_t cols, int gzip_level) {
  const std::string at = where(path, name);
  hsize_t dims[2] = {rows, cols};
  const int rank = cols == 0 ? 1 : 2;
  Hdf5Id space(H5_CHECK(H5Screate_simple(rank, dims, nullptr), Code::io, at), H5Sclose);
  Hdf5Id plist(H5_CHECK(H5Pcreate(H5P_DATASET_CREATE), Code::io, at), H5Pclose);
  if (gzip_level > 0 && rows > 0) {
    const hsize_t row_bytes = sizeof(T) * std::max<hsize_t>(cols, 1);
    hsize_t chunk[2] = {std::clamp<hsize_t>((1u << 20) / row_bytes, 1, rows), cols};
    H5_CHECK(H5Pset_chunk(plist.get(), rank, chunk), Code::io, at);
    H5_CHECK(H5Pset_shuffle(plist.get()), Code::io, at);  // byte shuffle: smaller and faster to deflate
    H5_CHECK(H5Pset_deflate(plist.get(), static_cast<unsigned>(gzip_level)), Code::io, at);
  }
  Hdf5Id ds(H5_CHECK(H5Dcreate2(file, name, type, space.get(), H5P_DEFAULT, plist.get(), H5P_DEFAULT), Code::io, at),
            H5Dclose);
  if (rows > 0) {
    H5_CHECK(H5Dwrite(ds.get(), type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data.data()), Code::io, at);
  }
}

struct DleArrays {
  std::vector<int32_t> input_ids, positions, labels;           // [N, L], [N, P], [N, P]
  std::vector<int8_t> input_mask, segment_ids, next_sentence;  // [N, L], [N, L], [N]
};

DleArrays pack_dle(const InstanceBuffer& in, const std::vector<uint32_t>& order, const ShardWriteOptions& o) {
  const size_t n = order.size();
  const auto L = static_cast<size_t>(o.max_seq_length), P = static_cast<size_t>(o.max_predictions);
  DleArrays a;
  a.input_ids.assign(n * L, 0);
  a.positions.assign(n * P, 0);
  a.labels.assign(n * P, 0);
  a.input_mask.assign(n * L, 0);
  a.segment_ids.assign(n * L, 0);
  a.next_sentence.assign(n, 0);
  auto& [input_ids, positions, labels, input_mask, segment_ids, next_sentence] = a;
  for (size_t r = 0; r < n; ++r) {
    const size_t i = order[r];
    const uint64_t len = in.length(i), begin = in.token_offsets[i];
    for (uint64_t t = 0; t < len; ++t) {
      input_ids[r * L + t] = in.input_ids[begin + t];
      input_mask[r * L + t] = 1;
      segment_ids[r * L + t] = t >= in.segment_a_length[i] ? 1 : 0;
    }
    const uint64_t m0 = in.mask_offsets[i];
    for (uint64_t k = 0; k < in.masks(i); ++k) {
      positions[r * P + k] = in.positions[m0 + k];
      labels[r * P + k] = in.labels[m0 + k];
    }
    next_sentence[r] = static_cast<int8_t>(in.random_next[i]);
  }
  return a;
}

void write_dle(hid_t file, const std::string& path, const DleArrays& a, size_t n, const ShardWriteOptions& o) {
  const auto L = static_cast<hsize_t>(o.max_seq_length), P = static_cast<hsize_t>(o.max_predictions);
  write_2d(file, path, "input_ids", H5T_STD_I32LE, a.input_ids, n, L, o.gzip_level);
  write_2d(file, path, "input_mask", H5T_STD_I8LE, a.input_mask, n, L, o.gzip_level);
  write_2d(file, path, "segment_ids", H5T_STD_I8LE, a.segment_ids, n, L, o.gzip_level);
  write_2d(file, path, "masked_lm_positions", H5T_STD_I32LE, a.positions, n, P, o.gzip_level);
  write_2d(file, path, "masked_lm_ids", H5T_STD_I32LE, a.labels, n, P, o.gzip_level);
  write_2d(file, path, "next_sentence_labels", H5T_STD_I8LE, a.next_sentence, n, 0, o.gzip_level);
}

// One vlen dataset: row r holds values[offsets[r] .. offsets[r + 1]).
template <typename T>
void write_vlen(hid_t file, const std::string& path, const char* name, hid_t base, const std::vector<T>& values,
                const std::vector<uint64_t>& offsets) {
  const std::string at = where(path, name);
  const size_t n = offsets.size() - 1;
  std::vector<hvl_t> rows(n);
  for (size_t r = 0; r < n; ++r) {
    rows[r].len = offsets[r + 1] - offsets[r];
    rows[r].p = const_cast<T*>(values.data() + offsets[r]);
  }
  Hdf5Id type(H5_CHECK(H5Tvlen_create(base), Code::io, at), H5Tclose);
  hsize_t dims[1] = {n};
  Hdf5Id space(H5_CHECK(H5Screate_simple(1, dims, nullptr), Code::io, at), H5Sclose);
  Hdf5Id ds(H5_CHECK(H5Dcreate2(file, name, type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                     Code::io, at),
            H5Dclose);
  if (n > 0) H5_CHECK(H5Dwrite(ds.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, rows.data()), Code::io, at);
}

struct VlenArrays {
  std::vector<int16_t> ids, positions, labels;
  std::vector<int8_t> segments, next_sentence;
  std::vector<uint64_t> token_offsets{0}, mask_offsets{0};
};

VlenArrays pack_mlperf(const InstanceBuffer& in, const std::vector<uint32_t>& order) {
  VlenArrays a;
  auto& [ids, positions, labels, segments, next_sentence, token_offsets, mask_offsets] = a;
  for (uint32_t i : order) {
    const uint64_t begin = in.token_offsets[i];
    for (uint64_t t = 0; t < in.length(i); ++t) {
      ids.push_back(static_cast<int16_t>(in.input_ids[begin + t]));
      segments.push_back(t >= in.segment_a_length[i] ? 1 : 0);
    }
    token_offsets.push_back(ids.size());
    for (uint64_t k = in.mask_offsets[i]; k < in.mask_offsets[i + 1]; ++k) {
      positions.push_back(static_cast<int16_t>(in.positions[k]));
      labels.push_back(static_cast<int16_t>(in.labels[k]));
    }
    mask_offsets.push_back(positions.size());
    next_sentence.push_back(static_cast<int8_t>(in.random_next[i]));
  }
  return a;
}

void write_mlperf(hid_t file, const std::string& path, const VlenArrays& a) {
  write_vlen(file, path, "input_ids", H5T_STD_I16LE, a.ids, a.token_offsets);
  write_vlen(file, path, "segment_ids", H5T_STD_I8LE, a.segments, a.token_offsets);
  write_vlen(file, path, "masked_lm_positions", H5T_STD_I16LE, a.positions, a.mask_offsets);
  write_vlen(file, path, "masked_lm_ids", H5T_STD_I16LE, a.labels, a.mask_offsets);
  write_2d(file, path, "next_sentence_labels", H5T_STD_I8LE, a.next_sentence, a.next_sentence.size(), 0, 0);
}

}  // namespace

uint64_t write_shard(const std::string& path, const InstanceBuffer& instances, const std::vector<uint32_t>& order,
                     const ShardWriteOptions& options) {
  const std::string tmp = path + ".tmp";
  const bool dle = options.format == ShardOutputFormat::dle;
  DleArrays dle_arrays;
  VlenArrays vlen_arrays;
  if (dle) {
    dle_arrays = pack_dle(instances, order, options);
  } else {
    vlen_arrays = pack_mlperf(instances, order);
  }
  {
    std::lock_guard<std::mutex> lock(hdf5_mutex);
    Hdf5Silence silence;
    Hdf5Id file(H5_CHECK(H5Fcreate(tmp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), Code::io, tmp), H5Fclose);
    if (dle) {
      write_dle(file.get(), tmp, dle_arrays, order.size(), options);
    } else {
      write_mlperf(file.get(), tmp, vlen_arrays);
    }
    H5_CHECK(H5Fflush(file.get(), H5F_SCOPE_GLOBAL), Code::io, tmp);
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) fail(Code::io, "cannot rename '", tmp, "' to '", path, "': ", ec.message());
  return static_cast<uint64_t>(std::filesystem::file_size(path, ec));
}

}  // namespace bert
