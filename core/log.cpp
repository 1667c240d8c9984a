#include "core/log.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace edgelm {
namespace {

LogLevel level_from_env() {
  const char* value = std::getenv("EDGELM_LOG");
  if (value == nullptr) return LogLevel::Info;
  if (std::strcmp(value, "debug") == 0) return LogLevel::Debug;
  if (std::strcmp(value, "warn") == 0) return LogLevel::Warn;
  if (std::strcmp(value, "error") == 0) return LogLevel::Error;
  if (std::strcmp(value, "off") == 0) return LogLevel::Off;
  return LogLevel::Info;
}

std::atomic<LogLevel>& level_storage() {
  static std::atomic<LogLevel> level{level_from_env()};
  return level;
}

}  // namespace

LogLevel log_level() {
  return level_storage().load(std::memory_order_relaxed);
}
void set_log_level(LogLevel level) {
  level_storage().store(level, std::memory_order_relaxed);
}

void log_message(LogLevel level, const std::string& message) {
  static const char* const kTags[] = {"debug", "info", "warn", "error", ""};
  std::fprintf(stderr, "[%s] %s\n", kTags[static_cast<int>(level)], message.c_str());
}

}  // namespace edgelm
