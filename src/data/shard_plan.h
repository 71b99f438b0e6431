// Which shard files a rank reads in an epoch, following NVIDIA DLE's run_pretraining.py: the
// files sorted by name, shuffled with random.Random(seed + epoch) (bit-exact, see py_random.h),
// and rank r reading files[(f_id * world + r) % n] for f_id = 0, 1, ...
//
// Epoch length: a rank reads ceil(n / world) files per epoch (f_id < ceil(n / world)), so the
// ranks together read every file once; when world does not divide n, the last round wraps to
// the start of the shuffled list (a few files are read twice that epoch, as DistributedSampler
// pads). World > files: each rank reads one file per epoch, file (r % n) of the shuffled list;
// the k ranks sharing a file (r, r + n, r + 2n, ...) take disjoint strided parts of its sample
// order: rank r takes the samples at positions j with j % k == r / n.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace bert {

// The shards of a dataset: `path` is a directory (its regular, non-hidden files), a glob
// pattern (with * ? or [), or a single file. Sorted by name. Error(io) if the path does not
// exist, Error(data) if it names no files or is bert-prep's output folder (naming its train/ and
// eval/ folders, which hold the shards).
std::vector<std::string> list_shards(const std::string& path);

// Indices into the sorted file list, in this epoch's order (identity when !shuffle).
std::vector<uint32_t> epoch_file_order(uint32_t n_files, uint64_t seed, uint64_t epoch, bool shuffle);

struct ShardSlot {
  uint32_t file = 0;    // index into the sorted file list
  uint32_t stride = 1;  // this rank takes sample positions j with j % stride == offset
  uint32_t offset = 0;
};

uint64_t slots_per_epoch(uint32_t n_files, int world);
std::vector<ShardSlot> epoch_slots(uint32_t n_files, uint64_t seed, uint64_t epoch, int rank, int world, bool shuffle);

}  // namespace bert
