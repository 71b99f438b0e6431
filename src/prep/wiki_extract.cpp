// The extraction pipeline: a producer (the dump reader, or the index's stream ranges), converter
// threads, and the writer on the calling thread taking batches back in dump order. Queues are
// bounded, so memory does not grow with the dump.
#include "prep/wiki_extract.h"

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

#include <unistd.h>

#include "core/error.h"
#include "prep/progress.h"
#include "prep/wiki_dump.h"

namespace bert {
namespace fs = std::filesystem;

namespace {

constexpr const char* kManifest = "wiki.done";
constexpr size_t kBatchPages = 256;
constexpr size_t kBatchWikitextBytes = 8u << 20;
constexpr uint64_t kRangeBytes = 1u << 20;  // compressed bytes of a multistream job

struct Job {
  uint64_t seq = 0;
  std::vector<WikiPage> pages;          // pages read by the producer, or
  uint64_t range_begin = 0, range_end = 0;  // whole bz2 streams for the worker to read
};

struct Converted {
  std::string text;
  WikiExtractSummary counts;  // pages, articles, redirects, other_namespaces, empty_articles, wikitext_bytes
};

void add_counts(WikiExtractSummary& to, const WikiExtractSummary& from) {
  to.pages += from.pages;
  to.articles += from.articles;
  to.redirects += from.redirects;
  to.other_namespaces += from.other_namespaces;
  to.empty_articles += from.empty_articles;
  to.wikitext_bytes += from.wikitext_bytes;
}

void convert_page(const WikiPage& page, const WikitextOptions& options, Converted& out) {
  ++out.counts.pages;
  if (page.ns != "0") {
    ++out.counts.other_namespaces;
    return;
  }
  if (page.redirect) {
    ++out.counts.redirects;
    return;
  }
  out.counts.wikitext_bytes += page.text.size();
  const std::vector<std::string> paragraphs = wikitext_to_paragraphs(page.text, options);
  if (paragraphs.empty()) {
    ++out.counts.empty_articles;
    return;
  }
  ++out.counts.articles;
  for (const std::string& p : paragraphs) out.text.append(p).push_back('\n');
  out.text.push_back('\n');
}

// What identifies an extraction: the dumps (path, size, modification time) and the options that
// change the output.
std::string identity(const WikiExtractOptions& o) {
  std::ostringstream s;
  for (const std::string& dump : o.dumps) {
    const fs::path p = fs::absolute(dump);
    s << "dump " << p.string() << " " << fs::file_size(p) << " "
      << fs::last_write_time(p).time_since_epoch().count() << "\n";
  }
  s << "headings " << (o.text.keep_headings ? "keep" : "drop") << "\nshard_bytes " << o.shard_bytes << "\n";
  return s.str();
}

bool is_extraction_file(const fs::path& p) {
  const std::string name = p.filename().string();
  return name == kManifest || (name.starts_with("wiki_") && (name.ends_with(".txt") || name.ends_with(".txt.tmp")));
}

// A finished extraction with this identity: its summary, read back from the manifest.
std::optional<WikiExtractSummary> finished(const fs::path& dir, const std::string& id) {
  std::ifstream in(dir / kManifest);
  if (!in) return std::nullopt;
  std::stringstream whole;
  whole << in.rdbuf();
  const std::string text = whole.str();
  if (!text.starts_with(id)) return std::nullopt;
  WikiExtractSummary s;
  std::istringstream rest(text.substr(id.size()));
  std::string key;
  while (rest >> key) {
    if (key == "file") {
      std::string name;
      rest >> name;
      s.files.push_back((dir / name).string());
    } else if (key == "articles") {
      rest >> s.articles;
    } else if (key == "pages") {
      rest >> s.pages;
    } else if (key == "text_bytes") {
      rest >> s.text_bytes;
    }
  }
  for (const std::string& f : s.files) {
    if (!fs::exists(f)) return std::nullopt;
  }
  s.up_to_date = true;
  return s;
}

// Writes batches in order to wiki_NNNNN.txt files (each a .tmp until it is complete).
class ShardedTextWriter {
 public:
  ShardedTextWriter(fs::path dir, uint64_t shard_bytes) : dir_(std::move(dir)), shard_bytes_(shard_bytes) {}
  ~ShardedTextWriter() {
    if (file_ != nullptr) {
      std::fclose(file_);
      fs::remove(temp_path());
    }
  }
  ShardedTextWriter(const ShardedTextWriter&) = delete;
  ShardedTextWriter& operator=(const ShardedTextWriter&) = delete;

  void write(const std::string& text) {
    if (text.empty()) return;
    if (file_ == nullptr) {
      file_ = std::fopen(temp_path().c_str(), "wb");
      if (file_ == nullptr) fail(Code::io, "cannot create '", temp_path().string(), "': ", std::strerror(errno));
    }
    if (std::fwrite(text.data(), 1, text.size(), file_) != text.size()) {
      fail(Code::io, "cannot write '", temp_path().string(), "': ", std::strerror(errno));
    }
    in_shard_ += text.size();
    total_ += text.size();
    if (in_shard_ >= shard_bytes_) close_shard();
  }

  // Closes the last shard; returns all files written.
  std::vector<std::string> finish() {
    close_shard();
    return files_;
  }

  // After a failure: removes every file written, so that no partial text looks finished (the
  // open one first: its name counts the finished ones).
  void discard() {
    if (file_ != nullptr) {
      std::fclose(file_);
      file_ = nullptr;
      fs::remove(temp_path());
    }
    for (const std::string& f : files_) fs::remove(f);
    files_.clear();
  }
  uint64_t bytes() const { return total_; }

 private:
  fs::path final_path() const {
    char name[32];
    std::snprintf(name, sizeof name, "wiki_%05zu.txt", files_.size());
    return dir_ / name;
  }
  fs::path temp_path() const { return fs::path(final_path().string() + ".tmp"); }

  void close_shard() {
    if (file_ == nullptr) return;
    const bool ok = std::fflush(file_) == 0 && ::fsync(::fileno(file_)) == 0;
    std::fclose(file_);
    file_ = nullptr;
    if (!ok) fail(Code::io, "cannot write '", temp_path().string(), "': ", std::strerror(errno));
    fs::rename(temp_path(), final_path());
    files_.push_back(final_path().string());
    in_shard_ = 0;
  }

  fs::path dir_;
  uint64_t shard_bytes_;
  FILE* file_ = nullptr;
  uint64_t in_shard_ = 0, total_ = 0;
  std::vector<std::string> files_;
};

// The shared state of producer, converters and writer.
class Pipeline {
 public:
  explicit Pipeline(int threads) : capacity_(static_cast<size_t>(2 * threads)), window_(static_cast<uint64_t>(4 * threads)) {}

  // Producer side. False when the pipeline stopped (an error elsewhere).
  bool push(Job job) {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return stopped_ || jobs_.size() < capacity_; });
    if (stopped_) return false;
    jobs_.push_back(std::move(job));
    ++produced_;
    changed_.notify_all();
    return true;
  }
  void close() {
    std::lock_guard lock(mutex_);
    closed_ = true;
    changed_.notify_all();
  }

  // Converter side: the next job, once its result would fit the writer's window.
  std::optional<Job> pop() {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] {
      return stopped_ || (closed_ && jobs_.empty()) || (!jobs_.empty() && jobs_.front().seq < next_write_ + window_);
    });
    if (stopped_ || jobs_.empty()) return std::nullopt;
    Job job = std::move(jobs_.front());
    jobs_.pop_front();
    changed_.notify_all();
    return job;
  }
  void done(uint64_t seq, Converted result) {
    std::lock_guard lock(mutex_);
    results_.emplace(seq, std::move(result));
    changed_.notify_all();
  }

  // Writer side: the next result in order, or nothing when all are written (or on a stop).
  std::optional<Converted> next() {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return stopped_ || results_.count(next_write_) || (closed_ && next_write_ == produced_); });
    if (stopped_ || !results_.count(next_write_)) return std::nullopt;
    Converted c = std::move(results_.at(next_write_));
    results_.erase(next_write_++);
    changed_.notify_all();
    return c;
  }

  // Any thread: records the first error and stops everyone.
  void stop(std::exception_ptr error) {
    std::lock_guard lock(mutex_);
    if (!error_) error_ = error;
    stopped_ = true;
    changed_.notify_all();
  }
  void rethrow() {
    std::lock_guard lock(mutex_);
    if (error_) std::rethrow_exception(error_);
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Job> jobs_;
  std::map<uint64_t, Converted> results_;
  size_t capacity_;
  uint64_t window_, produced_ = 0, next_write_ = 0;
  bool closed_ = false, stopped_ = false;
  std::exception_ptr error_;
};

// Reads the dumps page by page into batches (one reader; the converters work in parallel).
void produce_pages(const WikiExtractOptions& o, Pipeline& pipeline, Progress& progress) {
  uint64_t seq = 0;
  Job batch;
  size_t batch_bytes = 0;
  bool running = true;
  for (const std::string& dump : o.dumps) {
    uint64_t last_offset = 0;
    read_wiki_dump(dump, [&](WikiPage&& page) {
      if (!running) fail(Code::aborted, "stopped");
      batch_bytes += page.text.size();
      batch.pages.push_back(std::move(page));
      if (batch.pages.size() >= kBatchPages || batch_bytes >= kBatchWikitextBytes) {
        batch.seq = seq++;
        running = pipeline.push(std::move(batch));
        batch = Job{};
        batch_bytes = 0;
      }
    }, [&](uint64_t offset) {
      progress.add(offset - last_offset, 0);
      last_offset = offset;
    });
  }
  if (!batch.pages.empty() && running) {
    batch.seq = seq++;
    pipeline.push(std::move(batch));
  }
}

// Splits the index's streams into jobs of about kRangeBytes.
void produce_ranges(const WikiExtractOptions& o, Pipeline& pipeline) {
  const std::vector<uint64_t> offsets = read_multistream_index(o.index, o.dumps.front());
  uint64_t seq = 0;
  size_t begin = 0;
  for (size_t i = 1; i < offsets.size(); ++i) {
    if (offsets[i] - offsets[begin] >= kRangeBytes || i + 1 == offsets.size()) {
      Job job;
      job.seq = seq++;
      job.range_begin = offsets[begin];
      job.range_end = offsets[i];
      if (!pipeline.push(std::move(job))) return;
      begin = i;
    }
  }
}

void convert_jobs(const WikiExtractOptions& o, Pipeline& pipeline, Progress& progress) {
  while (std::optional<Job> job = pipeline.pop()) {
    Converted out;
    if (job->range_end > job->range_begin) {
      read_wiki_stream_range(o.dumps.front(), job->range_begin, job->range_end,
                             [&](WikiPage&& page) { convert_page(page, o.text, out); });
      progress.add(job->range_end - job->range_begin, 0);
    } else {
      for (const WikiPage& page : job->pages) convert_page(page, o.text, out);
    }
    progress.add(0, out.counts.articles);
    pipeline.done(job->seq, std::move(out));
  }
}

void write_manifest(const fs::path& dir, const std::string& id, const WikiExtractSummary& s) {
  const fs::path temp = dir / (std::string(kManifest) + ".tmp");
  {
    std::ofstream out(temp, std::ios::trunc);
    out << id << "pages " << s.pages << "\narticles " << s.articles << "\ntext_bytes " << s.text_bytes << "\n";
    for (const std::string& f : s.files) out << "file " << fs::path(f).filename().string() << "\n";
    if (!out.flush()) fail(Code::io, "cannot write '", temp.string(), "'");
  }
  fs::rename(temp, dir / kManifest);
}

}  // namespace

bool unfinished_extraction(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec) || fs::exists(fs::path(dir) / kManifest)) return false;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    if (is_extraction_file(e.path())) return true;
  }
  return false;
}

WikiExtractSummary extract_wikipedia(const WikiExtractOptions& o) {
  if (o.dumps.empty()) fail(Code::invalid_argument, "no dump given");
  if (o.output_dir.empty()) fail(Code::invalid_argument, "no output directory given (--output)");
  if (!o.index.empty() && o.dumps.size() != 1) fail(Code::invalid_argument, "--index goes with exactly one dump");
  for (const std::string& dump : o.dumps) {
    if (!fs::is_regular_file(dump)) fail(Code::io, "cannot open '", dump, "': not a file");
  }
  const auto t0 = std::chrono::steady_clock::now();
  const fs::path dir(o.output_dir);
  fs::create_directories(dir);
  const std::string id = identity(o);
  if (std::optional<WikiExtractSummary> kept = finished(dir, id)) return *kept;

  WikiExtractSummary s;
  const bool has_manifest = fs::exists(dir / kManifest);
  if (has_manifest && !o.overwrite) {
    fail(Code::invalid_argument, "'", o.output_dir, "' holds an extraction of other dumps or options (", kManifest,
         "); pass --overwrite to replace it");
  }
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
    if (!is_extraction_file(e.path())) continue;
    if (!has_manifest && e.path().filename() != kManifest) ++s.removed_partial_files;
    fs::remove(e.path());
  }

  uint64_t total = 0;
  for (const std::string& dump : o.dumps) total += fs::file_size(dump);
  Progress progress("wiki " + fs::path(o.dumps.front()).filename().string(), total);
  Pipeline pipeline(o.threads);
  ShardedTextWriter writer(dir, o.shard_bytes);
  std::vector<std::thread> threads;
  auto guarded = [&](auto work) {
    return [&, work] {
      try {
        work();
      } catch (...) {
        pipeline.stop(std::current_exception());
      }
    };
  };
  threads.emplace_back(guarded([&] {
    if (o.index.empty()) {
      produce_pages(o, pipeline, progress);
    } else {
      produce_ranges(o, pipeline);
    }
    pipeline.close();
  }));
  for (int t = 0; t < o.threads; ++t) threads.emplace_back(guarded([&] { convert_jobs(o, pipeline, progress); }));
  try {
    while (std::optional<Converted> c = pipeline.next()) {
      writer.write(c->text);
      add_counts(s, c->counts);
    }
  } catch (...) {
    pipeline.stop(std::current_exception());
  }
  for (std::thread& t : threads) t.join();
  try {
    pipeline.rethrow();
  } catch (...) {
    writer.discard();
    throw;
  }

  s.files = writer.finish();
  s.text_bytes = writer.bytes();
  s.input_bytes = total;
  write_manifest(dir, id, s);
  progress.finish();
  s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return s;
}

}  // namespace bert
