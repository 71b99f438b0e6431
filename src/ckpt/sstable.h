// Reader of the sorted-string table that holds a TensorFlow checkpoint's .index file (TensorFlow's
// copy of LevelDB's table format): data blocks of prefix-compressed key/value entries with restart
// points, an index block of BlockHandles (varint offset and size), and a 48-byte footer ending in
// the magic 0xdb4775248b80fb57. Every block's trailer (type byte + masked CRC-32C) is verified;
// compressed blocks are refused (tensor bundles are written uncompressed).
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace bert {

// Every key/value pair in key order. Throws Error(checkpoint) naming the file and block at fault,
// Error(io) if the file cannot be read.
std::vector<std::pair<std::string, std::string>> read_sstable(const std::string& path);

}  // namespace bert
