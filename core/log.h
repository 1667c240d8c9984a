// Minimal leveled logging to stderr. Binaries set the level from a flag or EDGELM_LOG.
#pragma once

#include <string>

#include "core/error.h"

namespace edgelm {

enum class LogLevel { Debug = 0, Info = 1, Warn = 2, Error = 3, Off = 4 };

// The current threshold; initialised from the environment variable EDGELM_LOG
// (debug|info|warn|error|off), default info.
LogLevel log_level();
void set_log_level(LogLevel level);
void log_message(LogLevel level, const std::string& message);

template <class... Args>
void log_debug(Args&&... args) {
  if (log_level() <= LogLevel::Debug) log_message(LogLevel::Debug, str_cat(args...));
}
template <class... Args>
void log_info(Args&&... args) {
  if (log_level() <= LogLevel::Info) log_message(LogLevel::Info, str_cat(args...));
}
template <class... Args>
void log_warn(Args&&... args) {
  if (log_level() <= LogLevel::Warn) log_message(LogLevel::Warn, str_cat(args...));
}

}  // namespace edgelm
