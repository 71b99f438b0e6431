// Loader benchmark: writes synthetic DLE shards of realistic shape (seq 128, 20 predictions,
// 90% full-length samples as create_pretraining_data makes them, Zipf-like token ids), warms
// the page cache, then measures in the same run (a) a plain HDF5 read of all datasets (the
// I/O + decompression floor, the peer) and (b) the shard data source delivering batches, in
// samples/s, with the peak RSS of each phase next to the size of one decoded shard.
//   bench_loader [--dir D] [--files N] [--samples S] [--batch B]
#include <hdf5.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "data/shard_reader.h"
#include "data/shard_source.h"

namespace {

constexpr int L = 128, P = 20, kVocab = 30522;
constexpr hsize_t kBlock = 4096;  // rows written and read per call

uint64_t splitmix(uint64_t& s) {
  uint64_t z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
double uniform(uint64_t& s) { return static_cast<double>(splitmix(s) >> 11) * (1.0 / 9007199254740992.0); }

// Peak resident memory (VmHWM) of this process in MiB.
double peak_rss_mib() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  }
  return 0;
}

void write_shard(const std::string& path, hsize_t n, bool gzip, uint64_t seed) {
  hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  struct Spec {
    const char* name;
    hid_t type;
    hsize_t width;
  };
  const Spec specs[] = {{"input_ids", H5T_STD_I32LE, L},     {"input_mask", H5T_STD_I8LE, L},
                        {"segment_ids", H5T_STD_I8LE, L},    {"masked_lm_positions", H5T_STD_I32LE, P},
                        {"masked_lm_ids", H5T_STD_I32LE, P}, {"next_sentence_labels", H5T_STD_I8LE, 1}};
  hid_t ds[6];
  for (int k = 0; k < 6; ++k) {
    const int rank = specs[k].width == 1 ? 1 : 2;
    const hsize_t dims[2] = {n, specs[k].width}, chunk[2] = {std::min<hsize_t>(n, kBlock), specs[k].width};
    hid_t space = H5Screate_simple(rank, dims, nullptr);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    if (gzip) {
      H5Pset_chunk(dcpl, rank, chunk);
      H5Pset_deflate(dcpl, 4);  // h5py's default gzip level, as DLE's writer uses
    }
    ds[k] = H5Dcreate2(f, specs[k].name, specs[k].type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    H5Pclose(dcpl);
    H5Sclose(space);
  }
  std::vector<int32_t> buf[6];
  for (hsize_t r0 = 0; r0 < n; r0 += kBlock) {
    const hsize_t rows = std::min(kBlock, n - r0);
    for (int k = 0; k < 6; ++k) buf[k].assign(rows * specs[k].width, 0);
    for (hsize_t r = 0; r < rows; ++r) {
      const int len = uniform(seed) < 0.9 ? L : 10 + static_cast<int>(uniform(seed) * (L - 10));
      int32_t* ids = &buf[0][r * L];
      for (int t = 0; t < len; ++t) {
        ids[t] = t == 0                           ? 101
                 : (t == len - 1 || t == len / 2) ? 102
                                                  : 999 + static_cast<int32_t>(29000 * std::pow(uniform(seed), 4));
        buf[1][r * L + t] = 1;
        buf[2][r * L + t] = t > len / 2;
      }
      const int preds = std::min(P, std::max(1, static_cast<int>(len * 0.15 + 0.5)));
      for (int p = 0; p < preds; ++p) {
        buf[3][r * P + p] = 1 + (p * (len - 2)) / preds;
        buf[4][r * P + p] = 999 + static_cast<int32_t>(29000 * uniform(seed));
      }
      buf[5][r] = uniform(seed) < 0.5;
    }
    for (int k = 0; k < 6; ++k) {
      const int rank = specs[k].width == 1 ? 1 : 2;
      const hsize_t start[2] = {r0, 0}, count[2] = {rows, specs[k].width};
      hid_t fs = H5Dget_space(ds[k]);
      H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, nullptr, count, nullptr);
      hid_t ms = H5Screate_simple(rank, count, nullptr);
      H5Dwrite(ds[k], H5T_NATIVE_INT32, ms, fs, H5P_DEFAULT, buf[k].data());
      H5Sclose(ms);
      H5Sclose(fs);
    }
  }
  for (hid_t d : ds) H5Dclose(d);
  H5Fclose(f);
}

void warm_page_cache(const std::vector<std::string>& files) {
  std::vector<char> buf(1 << 20);
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    while (in.read(buf.data(), static_cast<std::streamsize>(buf.size())) || in.gcount() > 0) {
    }
  }
}

// The peer: every dataset of every file read with H5Dread in blocks, nothing else.
void plain_hdf5_read(const std::vector<std::string>& files) {
  const char* names[] = {"input_ids",           "input_mask",    "segment_ids",
                         "masked_lm_positions", "masked_lm_ids", "next_sentence_labels"};
  std::vector<int32_t> buf;
  for (const auto& path : files) {
    hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    for (const char* name : names) {
      hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
      hid_t fs = H5Dget_space(d);
      hsize_t dims[2] = {0, 1};
      const int rank = H5Sget_simple_extent_dims(fs, dims, nullptr);
      for (hsize_t r0 = 0; r0 < dims[0]; r0 += kBlock) {
        const hsize_t start[2] = {r0, 0}, count[2] = {std::min(kBlock, dims[0] - r0), rank > 1 ? dims[1] : 1};
        buf.resize(count[0] * count[1]);
        H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, nullptr, count, nullptr);
        hid_t ms = H5Screate_simple(rank, count, nullptr);
        H5Dread(d, H5T_NATIVE_INT32, ms, fs, H5P_DEFAULT, buf.data());
        H5Sclose(ms);
      }
      H5Sclose(fs);
      H5Dclose(d);
    }
    H5Fclose(f);
  }
}

struct Measured {
  double samples = 0, seconds = 1, peak_mib = 0;
};

// Runs `work` (returning the samples it processed) in a forked child so each phase's peak RSS
// is its own, and reports samples, wall seconds and the child's peak RSS.
template <typename Work>
Measured in_child(Work work) {
  int fds[2];
  if (pipe(fds) != 0) return {};
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    const auto t0 = std::chrono::steady_clock::now();
    Measured m;
    m.samples = work();
    m.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    m.peak_mib = peak_rss_mib();
    const ssize_t written = write(fds[1], &m, sizeof(m));
    _exit(written == sizeof(m) ? 0 : 1);
  }
  close(fds[1]);
  Measured m;
  if (read(fds[0], &m, sizeof(m)) != sizeof(m)) m = Measured{};
  close(fds[0]);
  waitpid(pid, nullptr, 0);
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir = (std::filesystem::temp_directory_path() / "bert-bench-loader").string();
  int files = 4, batch = 64;
  hsize_t samples = 65536;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--dir")) dir = argv[i + 1];
    if (!std::strcmp(argv[i], "--files")) files = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--samples")) samples = std::strtoull(argv[i + 1], nullptr, 10);
    if (!std::strcmp(argv[i], "--batch")) batch = std::atoi(argv[i + 1]);
  }
  const double total = static_cast<double>(files) * static_cast<double>(samples);
  std::printf("loader benchmark: %d DLE shards x %llu samples, seq %d, %d predictions, batch %d, %u hardware threads\n",
              files, static_cast<unsigned long long>(samples), L, P, batch, std::thread::hardware_concurrency());
  std::printf("%-12s %9s %12s %16s %16s %9s %14s %14s\n", "layout", "file MiB", "decoded MiB", "hdf5 read /s",
              "loader /s", "ratio", "peak RSS read", "peak RSS load");
  for (bool gzip : {false, true}) {
    const std::string sub = dir + (gzip ? "/gzip" : "/contiguous");
    std::filesystem::remove_all(sub);
    std::filesystem::create_directories(sub);
    std::vector<std::string> paths;
    double file_mib = 0;
    for (int f = 0; f < files; ++f) {
      char name[64];
      std::snprintf(name, sizeof(name), "/part_%05d_of_%05d.hdf5", f, files);
      paths.push_back(sub + name);
      write_shard(paths.back(), samples, gzip, 1000003ull * static_cast<uint64_t>(f + 1));
      file_mib += static_cast<double>(std::filesystem::file_size(paths.back())) / (1 << 20);
    }
    const bert::ShardLimits limits{L, P, kVocab};
    const double decoded_mib =
        in_child([&] { return static_cast<double>(bert::read_shard(paths[0], limits).bytes()); }).samples / (1 << 20);
    warm_page_cache(paths);

    const Measured read = in_child([&] {
      plain_hdf5_read(paths);
      return total;
    });
    const Measured load = in_child([&] {
      bert::ShardSourceOptions o;
      o.path = sub;
      o.max_seq_length = L;
      o.max_predictions_per_seq = P;
      o.vocab_size = kVocab;
      o.seed = 42;
      auto source = bert::make_shard_source(o);
      bert::HostBatch b;
      const int64_t steps = static_cast<int64_t>(total) / batch;
      int64_t tokens = 0;
      for (int64_t s = 0; s < steps; ++s) {
        source->next(b, batch);
        tokens += b.real_tokens();
      }
      return tokens > 0 ? static_cast<double>(steps) * batch : 0.0;
    });
    const double read_rate = read.samples / read.seconds, read_peak = read.peak_mib;
    const double load_rate = load.samples / load.seconds, load_peak = load.peak_mib;
    std::printf("%-12s %9.1f %12.1f %16.0f %16.0f %9.2f %14.1f %14.1f\n", gzip ? "gzip-4" : "contiguous",
                file_mib / files, decoded_mib, read_rate, load_rate, load_rate / read_rate, read_peak, load_peak);
    std::filesystem::remove_all(sub);
  }
  std::printf(
      "(file/decoded MiB: per shard; loader = one epoch through make_shard_source: decode, validate, shuffle, "
      "batch; peak RSS in MiB of each phase, run in its own process)\n");
  return 0;
}
