/// @file report.h
/// hoccl-paro's output: the mapper's answer for one strategy as text, JSON or a PNG picture, and the ranking.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "paro/layout.h"
#include "paro/plan.h"
#include "paro/strategy.h"

namespace hoccl::paro::tool {

/// Everything the tool was asked about.
struct Query {
  Layout layout;                            ///< ranks in groups
  Strategy strategy;                        ///< the strategy to show
  ModelSize size;                           ///< the model
  int microSteps = 1;                       ///< A
  double budget = 0;                        ///< memory budget per rank in bytes (0 = none)
  LinkModel links = LinkModel::defaults();  ///< latency and bandwidth per link class
};

/// "1.75 GiB", "512 B".
std::string bytesText(double bytes);
/// "12.3 ms", "4.56 s".
std::string secondsText(double seconds);

/// The shard map, memory, plan and predicted time of q.strategy as text.
std::string strategyText(const Query& q);
/// The ranking of all 27 strategies as text.
std::string rankingText(const Query& q);
/// The same as JSON (ranking included when rankAll).
nlohmann::json toJson(const Query& q, bool rankAll);
/// Draws the rank grid (groups x local index) coloured by shard for P, G and OS into a PNG with gnuplot.
/// Throws InvalidArgument when gnuplot is missing or fails.
void writePng(const Query& q, const std::string& path);

}  // namespace hoccl::paro::tool
