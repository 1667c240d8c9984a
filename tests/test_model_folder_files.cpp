// The small files of a Hugging Face model folder (config.json, generation_config.json,
// tokenizer.json, tokenizer_config.json, chat_template.jinja) are read only when they are regular
// files: a FIFO or a device in their place is refused at once with one line naming the file,
// instead of a read that waits for a writer (FIFO) or never ends (/dev/zero).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>

#include "core/error.h"
#include "models/chat.h"
#include "models/config.h"
#include "models/make_model.h"
#include "models/tokenizer.h"
#include "temp_dir.h"

namespace edgelm {
namespace {

namespace fs = std::filesystem;

// Replaces `path` with a FIFO. While it lives, a watchdog thread checks every 50 ms whether a
// reader has been waiting on the FIFO for 2 s (an open for writing succeeds only when a reader
// has it open) and then opens and closes the write end, so that a reader that blocks gets an
// end of file instead of hanging the test: the load then fails with some other message, or none,
// and the test fails instead of never ending.
class WatchedFifo {
 public:
  explicit WatchedFifo(const std::string& path) : path_(path) {
    fs::remove(path);
    if (::mkfifo(path.c_str(), 0600) != 0) throw std::runtime_error("mkfifo " + path);
    watchdog_ = std::thread([this] {
      const auto start = std::chrono::steady_clock::now();
      while (!done_) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        if (std::chrono::steady_clock::now() - start < std::chrono::seconds(2)) continue;
        const int fd = ::open(path_.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
        if (fd >= 0) {
          ::close(fd);
          unblocked_ = true;
        }
      }
    });
  }
  ~WatchedFifo() {
    done_ = true;
    watchdog_.join();
  }
  WatchedFifo(const WatchedFifo&) = delete;
  WatchedFifo& operator=(const WatchedFifo&) = delete;

  // Whether a reader blocked on the FIFO and the watchdog had to release it.
  bool unblocked() const { return unblocked_; }

 private:
  std::string path_;
  std::atomic<bool> done_{false};
  std::atomic<bool> unblocked_{false};
  std::thread watchdog_;
};

class ModelFolderFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    make_model({.preset = "tiny", .format = "hf", .out_dir = dir_.path().string()});
    testing::write_text(dir_.file("chat_template.jinja"), "{{ bos_token }}");
  }

  // Puts a FIFO at `name` and expects `load` to throw an edgelm::Error naming the file as not a
  // regular file, without blocking.
  void expect_refused(const std::string& name, const std::function<void()>& load) {
    SCOPED_TRACE(name);
    const std::string path = dir_.file(name);
    WatchedFifo fifo(path);
    try {
      load();
      ADD_FAILURE() << "a FIFO at " << name << " loaded";
    } catch (const Error& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find(path + ": not a regular file"), std::string::npos) << message;
      EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    }
    EXPECT_FALSE(fifo.unblocked()) << "the read of " << name << " waited for a writer";
  }

  testing::TempDir dir_{"edgelm_folder_files_"};
};

TEST_F(ModelFolderFiles, RegularFilesLoad) {
  EXPECT_NO_THROW(load_hf_config(dir_.path().string()));
  EXPECT_NO_THROW(Tokenizer::from_model_path(dir_.path().string()));
}

TEST_F(ModelFolderFiles, FifoConfigIsRefused) {
  expect_refused("config.json", [&] { load_hf_config(dir_.path().string()); });
}

TEST_F(ModelFolderFiles, FifoGenerationConfigIsRefused) {
  expect_refused("generation_config.json", [&] { load_hf_config(dir_.path().string()); });
}

TEST_F(ModelFolderFiles, FifoTokenizerIsRefused) {
  expect_refused("tokenizer.json", [&] { Tokenizer::from_model_path(dir_.path().string()); });
}

TEST_F(ModelFolderFiles, FifoTokenizerConfigIsRefused) {
  expect_refused("tokenizer_config.json",
                 [&] { ChatTemplate::from_model_path(dir_.path().string()); });
}

TEST_F(ModelFolderFiles, FifoChatTemplateIsRefused) {
  expect_refused("chat_template.jinja",
                 [&] { ChatTemplate::from_model_path(dir_.path().string()); });
}

// A device in a file's place (here /dev/zero through a symlink, which would read forever).
TEST_F(ModelFolderFiles, DeviceConfigIsRefused) {
  const std::string path = dir_.file("config.json");
  fs::remove(path);
  fs::create_symlink("/dev/zero", path);
  try {
    load_hf_config(dir_.path().string());
    ADD_FAILURE() << "/dev/zero as config.json loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path + ": not a regular file"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace edgelm
