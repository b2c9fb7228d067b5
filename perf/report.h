/// @file report.h
/// Output of the perf tools: the nccl-tests preamble and table on stdout, and the optional JSON file (-J).
/// Only the global rank 0 creates a Report.
#pragma once

#include <string>
#include <vector>

#include "options.h"

namespace hoccl_perf {

/// Where one rank runs (printed under "# Using devices").
struct RankDesc {
  int rank;                     ///< global rank
  int pid;                      ///< process id
  std::string host;             ///< host name
  std::string transports = {};  ///< the transports to its peers, with their peer counts ("shm x1, ucx x6")
};

/// Results of one direction (out-of-place or in-place) of one table row.
struct Measure {
  double timeUs = 0;     ///< microseconds per operation, combined across ranks per -a
  double algBw = 0;      ///< GB/s
  double busBw = 0;      ///< GB/s
  long long wrong = 0;   ///< wrong elements summed over ranks (meaningful when checked)
  bool checked = false;  ///< false prints N/A (-c 0)
};

/// One table row.
struct Row {
  size_t bytes;       ///< the size column: larger of send and receive bytes
  size_t count;       ///< the count argument
  std::string type;   ///< type name
  std::string redop;  ///< op name or "none"
  int root;           ///< root or -1
  Measure oop;        ///< out-of-place
  Measure ip;         ///< in-place
};

/// Formats v right-aligned in `width` characters with as many decimals (2, 1 or 0) as fit.
std::string squeeze(double v, int width);
/// Formats a row exactly as nccl-tests prints it.
std::string formatRow(const Row& r);

/// Collects rows, prints them, and writes the summary and the JSON file.
class Report {
 public:
  /// A report for tool `tool` run with `opts` over `nranks` ranks.
  Report(std::string tool, const Options& opts, int nranks);
  /// Prints the version line, the parameters and one line per rank.
  void printPreamble(const std::vector<RankDesc>& ranks);
  /// Prints the three header lines of the table.
  void printHeader() const;
  /// Prints a row and keeps it for the average and the JSON file.
  void addRow(const Row& r);
  /// Prints the closing lines and writes the JSON file. Returns false when the bandwidth floor
  /// (NCCL_TESTS_MIN_BW) is missed or the JSON file cannot be written.
  bool finish(long long outOfBounds, long long wrong);

 private:
  double averageBusBw() const;
  bool writeJson(long long outOfBounds, long long wrong, double avgBw) const;

  std::string tool_;
  Options opts_;
  int nranks_;
  std::vector<RankDesc> ranks_;
  std::vector<Row> rows_;
};

}  // namespace hoccl_perf
