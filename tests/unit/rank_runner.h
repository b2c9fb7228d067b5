/// @file rank_runner.h
/// Test helpers: run one function per rank in threads or in forked processes and collect each rank's error text.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace hoccl::test {

/// Runs fn(rank) for every rank in its own thread; returns the error text of each rank ("" = success).
std::vector<std::string> runThreads(int nranks, const std::function<void(int)>& fn);

/// Runs fn(rank) in a forked child per rank; returns each child's text ("" = success). Children that do not finish
/// within `limit` are killed. A child's text travels back through a pipe.
std::vector<std::string> runProcesses(int nranks, const std::function<std::string(int)>& fn,
                                      std::chrono::seconds limit = std::chrono::seconds(60));

/// "rank r: text" for the first rank with an error, "" when every rank succeeded.
std::string firstError(const std::vector<std::string>& errors);
/// Every rank's error, one line each ("" if none failed): for the message of a failed check.
std::string allErrors(const std::vector<std::string>& errors);

}  // namespace hoccl::test
