// Variable-length read benchmark: writes one MLPerf-style int16 vlen dataset (ROWS sequences of
// 64..512 tokens, contiguous as h5py and bert-prep write it), then reads all of it in bands of
// 8192 rows, alternating (a) HDF5's own vlen conversion (H5Dread into hvl_t, the peer) and
// (b) RawVlenReader (bounds-checked heap parsing, what the shard readers use), and prints
// values/s of each and their ratio. A benchmark: it prints numbers, it asserts nothing.
//   bench_vlen_read [--rows N] [--file PATH] [--rounds R]
#include <hdf5.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "data/h5_raw_vlen.h"

namespace {

constexpr hsize_t kBand = 8192;

void write_file(const std::string& path, hsize_t rows) {
  std::mt19937 rng(7);
  std::vector<std::vector<int16_t>> seqs(rows);
  std::vector<hvl_t> desc(rows);
  for (hsize_t r = 0; r < rows; ++r) {
    seqs[r].resize(64 + rng() % 449);
    for (int16_t& v : seqs[r]) v = static_cast<int16_t>(rng() % 30522);
    desc[r] = hvl_t{seqs[r].size(), seqs[r].data()};
  }
  hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  hid_t type = H5Tvlen_create(H5T_STD_I16LE);
  hid_t space = H5Screate_simple(1, &rows, nullptr);
  hid_t ds = H5Dcreate2(file, "input_ids", type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  H5Dwrite(ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, desc.data());
  H5Dclose(ds);
  H5Sclose(space);
  H5Tclose(type);
  H5Fclose(file);
}

// HDF5's conversion of rows [begin, begin + count) into int32 values; returns the value count.
size_t read_hdf5(hid_t ds, hsize_t begin, hsize_t count, std::vector<int32_t>& values) {
  hid_t fspace = H5Dget_space(ds);
  H5Sselect_hyperslab(fspace, H5S_SELECT_SET, &begin, nullptr, &count, nullptr);
  hid_t mspace = H5Screate_simple(1, &count, nullptr);
  hid_t mtype = H5Tvlen_create(H5T_NATIVE_INT32);
  std::vector<hvl_t> buf(count);
  H5Dread(ds, mtype, mspace, fspace, H5P_DEFAULT, buf.data());
  values.clear();
  for (const hvl_t& v : buf) values.insert(values.end(), static_cast<int32_t*>(v.p), static_cast<int32_t*>(v.p) + v.len);
  H5Dvlen_reclaim(mtype, mspace, H5P_DEFAULT, buf.data());
  H5Tclose(mtype);
  H5Sclose(mspace);
  H5Sclose(fspace);
  return values.size();
}

}  // namespace

int main(int argc, char** argv) {
  hsize_t rows = 100000;
  int rounds = 3;
  std::string path = "/tmp/bench_vlen_read.h5";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--rows")) rows = std::strtoull(argv[i + 1], nullptr, 10);
    else if (!std::strcmp(argv[i], "--file")) path = argv[i + 1];
    else if (!std::strcmp(argv[i], "--rounds")) rounds = std::atoi(argv[i + 1]);
  }
  write_file(path, rows);
  hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  hid_t ds = H5Dopen2(file, "input_ids", H5P_DEFAULT);
  bert::RawVlenReader raw(file, ds, path, "input_ids");
  if (!raw.supported()) {
    std::fprintf(stderr, "RawVlenReader does not support %s\n", path.c_str());
    return 1;
  }
  std::vector<int32_t> values, raw_values;
  std::vector<int64_t> lengths;
  double hdf5_s = 0, raw_s = 0;
  size_t total = 0;
  for (int round = 0; round < rounds; ++round) {
    for (hsize_t b = 0; b < rows; b += kBand) {
      const hsize_t n = std::min(kBand, rows - b);
      auto t0 = std::chrono::steady_clock::now();
      total += read_hdf5(ds, b, n, values);
      auto t1 = std::chrono::steady_clock::now();
      raw.read(b, n, raw_values, lengths);
      auto t2 = std::chrono::steady_clock::now();
      hdf5_s += std::chrono::duration<double>(t1 - t0).count();
      raw_s += std::chrono::duration<double>(t2 - t1).count();
      if (raw_values != values) {
        std::fprintf(stderr, "rows from %llu: the two readers disagree\n", static_cast<unsigned long long>(b));
        return 1;
      }
    }
  }
  std::printf("%llu rows, %zu values per round, %d rounds (page cache warm after the first)\n",
              static_cast<unsigned long long>(rows), total / rounds, rounds);
  std::printf("HDF5 vlen conversion : %8.1f M values/s\n", total / hdf5_s / 1e6);
  std::printf("RawVlenReader        : %8.1f M values/s (%.2fx HDF5)\n", total / raw_s / 1e6, hdf5_s / raw_s);
  H5Dclose(ds);
  H5Fclose(file);
  std::remove(path.c_str());
  return 0;
}
