// The seal of a checkpoint file: an HDF5 userblock (the file's first 512 bytes, or a larger
// power of two) that HDF5 skips and that the engine checks before HDF5 parses anything, so that
// a flipped byte or a truncation anywhere in the file is a clean error naming the file instead
// of a crash inside libhdf5 (whose parser trusts the file: 1.10.8 segfaults on some corrupt
// object headers). The userblock holds text, then NUL bytes up to its end:
//   bertengine checkpoint seal 1\n
//   {"crc32c":C,"file_bytes":N,"summary":{...},"userblock":U}\n
//   header_crc32c H\n
// C: CRC-32C of bytes [U, N), everything HDF5 reads; N: the file's length; H: CRC-32C of the
// two lines above; summary: run_id, written_ns and global_step from the training state, so that
// a directory's checkpoints are told apart without reading whole files. Every byte of a sealed
// file is covered (the padding must stay zero). h5py and every HDF5 tool read the file as usual.
// A file that starts with HDF5's signature instead has no seal: written before seals existed,
// it is read as before, verified by its own checksum attribute once HDF5 has parsed it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace bert {

inline constexpr uint64_t kMinSealBytes = 512;
inline constexpr uint64_t kMaxSealBytes = 64 << 10;

struct CheckpointSeal {
  uint64_t userblock = 0;   // U: where HDF5's data starts
  uint64_t file_bytes = 0;  // N
  uint32_t crc32c = 0;      // C
  nlohmann::json summary = nlohmann::json::object();
};

// The run summary of a training state: its run_id, written_ns and global_step where present.
nlohmann::json seal_summary(const nlohmann::json& state);
// The userblock size a seal with this summary needs: the smallest power of two >= 512 holding it.
uint64_t seal_size(const nlohmann::json& summary);
// A range of the file whose CRC-32C the writer knows: a tensor HDF5 wrote straight from memory,
// checksummed there.
struct KnownCrc {
  uint64_t offset = 0, length = 0;
  uint32_t crc32c = 0;
};
// Seals the file open as `fd` (read and write; `path` names it in errors): the CRC-32C of its
// bytes from `userblock` to its end — the `known` ranges combined from their CRCs, the rest read
// back —, then the seal written into [0, userblock), which HDF5 left zero. A reader recomputes
// the CRC from the file's bytes, so a known CRC that did not match what HDF5 wrote would make the
// file fail verification, never pass it. Error(io) with the OS reason on a failed read or write.
void seal_file(int fd, uint64_t userblock, const nlohmann::json& summary, const std::string& path,
               std::vector<KnownCrc> known = {});
// Reads and checks the seal of the checkpoint at `path`: its header checksum and the file's
// length, and with `whole_file` the CRC-32C of all the data. Returns nullopt for a file without a
// seal (HDF5's signature at offset 0). Throws Error(checkpoint) "checkpoint 'P' is corrupt: ..."
// for anything else that does not check out, Error(io) if the file cannot be read.
std::optional<CheckpointSeal> read_seal(const std::string& path, bool whole_file);

}  // namespace bert
