// Test fixtures for the shard readers and the shard data source: writing small shards with the
// HDF5 C API (DLE fixed-width, MLPerf variable-length, packed) in a temporary directory, with
// every dataset open to tampering (dtype, shape, values, missing keys) before it is written.
#pragma once

#include <hdf5.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace bert::testing {

// One sequence. Token 1 carries the sample's id so tests can follow samples through shuffles.
struct TestSample {
  std::vector<int32_t> ids, seg, pos, mids;
  int32_t nsl = 0;
};

inline TestSample make_sample(int32_t id, int len, int preds) {
  TestSample s;
  for (int t = 0; t < len; ++t) {
    s.ids.push_back(t == 0 ? 101 : t == 1 ? id : t == len - 1 ? 102 : 1000 + (id * 7 + t) % 2000);
    s.seg.push_back(t > len / 2 ? 1 : 0);
  }
  for (int p = 0; p < std::min(preds, len - 2); ++p) {  // positions 2, 3, ... inside the sequence
    s.pos.push_back(2 + p);
    s.mids.push_back(2000 + (id + p) % 3000);
  }
  s.nsl = id % 2;
  return s;
}

// Samples with ids first_id, first_id + 1, ...; lengths cycle through [min_len, max_len].
inline std::vector<TestSample> make_samples(int32_t first_id, int count, int min_len = 8, int max_len = 16,
                                            int preds = 3) {
  std::vector<TestSample> v;
  for (int i = 0; i < count; ++i) {
    const int len = min_len + (i * 5) % (max_len - min_len + 1);
    v.push_back(make_sample(first_id + i, len, preds));
  }
  return v;
}

struct TestDataset {
  bool vlen = false;
  hid_t file_type = H5T_STD_I32LE;         // element type (the base type for vlen)
  std::vector<hsize_t> dims;               // fixed: the shape; vlen: {rows}
  std::vector<int32_t> data;               // fixed: row-major values
  std::vector<std::vector<int32_t>> rows;  // vlen: one array per row
};

using TestShard = std::map<std::string, TestDataset>;

inline TestDataset fixed(hid_t type, std::vector<hsize_t> dims, std::vector<int32_t> data) {
  TestDataset d;
  d.file_type = type;
  d.dims = std::move(dims);
  d.data = std::move(data);
  return d;
}

inline TestDataset varlen(hid_t type, std::vector<std::vector<int32_t>> rows) {
  TestDataset d;
  d.vlen = true;
  d.file_type = type;
  d.dims = {rows.size()};
  d.rows = std::move(rows);
  return d;
}

inline TestShard dle_shard(const std::vector<TestSample>& samples, int L, int P) {
  const size_t N = samples.size();
  std::vector<int32_t> ids(N * L), mask(N * L), seg(N * L), pos(N * P), mids(N * P), nsl(N);
  for (size_t i = 0; i < N; ++i) {
    const TestSample& s = samples[i];
    for (size_t t = 0; t < s.ids.size(); ++t) {
      ids[i * L + t] = s.ids[t];
      mask[i * L + t] = 1;
      seg[i * L + t] = s.seg[t];
    }
    for (size_t p = 0; p < s.pos.size(); ++p) {
      pos[i * P + p] = s.pos[p];
      mids[i * P + p] = s.mids[p];
    }
    nsl[i] = s.nsl;
  }
  const hsize_t n = N, l = static_cast<hsize_t>(L), p = static_cast<hsize_t>(P);
  return TestShard{
      {"input_ids", fixed(H5T_STD_I32LE, {n, l}, ids)},      {"input_mask", fixed(H5T_STD_I8LE, {n, l}, mask)},
      {"segment_ids", fixed(H5T_STD_I8LE, {n, l}, seg)},     {"masked_lm_positions", fixed(H5T_STD_I32LE, {n, p}, pos)},
      {"masked_lm_ids", fixed(H5T_STD_I32LE, {n, p}, mids)}, {"next_sentence_labels", fixed(H5T_STD_I8LE, {n}, nsl)}};
}

inline TestShard mlperf_shard(const std::vector<TestSample>& samples) {
  std::vector<std::vector<int32_t>> ids, seg, pos, mids;
  std::vector<int32_t> nsl;
  for (const TestSample& s : samples) {
    ids.push_back(s.ids);
    seg.push_back(s.seg);
    pos.push_back(s.pos);
    mids.push_back(s.mids);
    nsl.push_back(s.nsl);
  }
  return TestShard{{"input_ids", varlen(H5T_STD_I16LE, ids)},
                   {"segment_ids", varlen(H5T_STD_I8LE, seg)},
                   {"masked_lm_positions", varlen(H5T_STD_I16LE, pos)},
                   {"masked_lm_ids", varlen(H5T_STD_I16LE, mids)},
                   {"next_sentence_labels", fixed(H5T_STD_I8LE, {samples.size()}, nsl)}};
}

// Packs consecutive groups of `per_row` samples into rows (positions offset within the row).
inline TestShard packed_shard(const std::vector<TestSample>& samples, size_t per_row) {
  std::vector<std::vector<int32_t>> ids, seg, pos, mids, nsl, plen, pmlen;
  for (size_t i = 0; i < samples.size(); i += per_row) {
    ids.emplace_back();
    seg.emplace_back();
    pos.emplace_back();
    mids.emplace_back();
    nsl.emplace_back();
    plen.emplace_back();
    pmlen.emplace_back();
    int32_t offset = 0;
    for (size_t k = i; k < std::min(samples.size(), i + per_row); ++k) {
      const TestSample& s = samples[k];
      ids.back().insert(ids.back().end(), s.ids.begin(), s.ids.end());
      seg.back().insert(seg.back().end(), s.seg.begin(), s.seg.end());
      for (int32_t p : s.pos) pos.back().push_back(p + offset);
      mids.back().insert(mids.back().end(), s.mids.begin(), s.mids.end());
      nsl.back().push_back(s.nsl);
      plen.back().push_back(static_cast<int32_t>(s.ids.size()));
      pmlen.back().push_back(static_cast<int32_t>(s.pos.size()));
      offset += static_cast<int32_t>(s.ids.size());
    }
  }
  return TestShard{{"input_ids", varlen(H5T_STD_I16LE, ids)},
                   {"segment_ids", varlen(H5T_STD_I8LE, seg)},
                   {"masked_lm_positions", varlen(H5T_STD_I16LE, pos)},
                   {"masked_lm_ids", varlen(H5T_STD_I16LE, mids)},
                   {"next_sentence_labels", varlen(H5T_STD_I8LE, nsl)},
                   {"packed_input_len", varlen(H5T_STD_I16LE, plen)},
                   {"packed_masked_lm_len", varlen(H5T_STD_I16LE, pmlen)}};
}

inline void write_shard(const std::string& path, const TestShard& shard) {
  hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  for (const auto& [name, d] : shard) {
    hid_t space = H5Screate_simple(static_cast<int>(d.dims.size()), d.dims.data(), nullptr);
    if (!d.vlen) {
      hid_t ds = H5Dcreate2(f, name.c_str(), d.file_type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
      if (!d.data.empty()) H5Dwrite(ds, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, d.data.data());
      H5Dclose(ds);
    } else {
      hid_t ftype = H5Tvlen_create(d.file_type), mtype = H5Tvlen_create(H5T_NATIVE_INT32);
      std::vector<hvl_t> buf;
      for (const auto& r : d.rows) buf.push_back(hvl_t{r.size(), const_cast<int32_t*>(r.data())});
      hid_t ds = H5Dcreate2(f, name.c_str(), ftype, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
      if (!buf.empty()) H5Dwrite(ds, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data());
      H5Dclose(ds);
      H5Tclose(ftype);
      H5Tclose(mtype);
    }
    H5Sclose(space);
  }
  H5Fclose(f);
}

// A fresh directory under the system temp dir, removed with its contents at scope exit.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "bert-shards-XXXXXX").string();
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return (std::filesystem::path(path_) / name).string(); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace bert::testing
