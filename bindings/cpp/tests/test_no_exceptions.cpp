// Tests of the C++ wrapper's try_* calls in a host built with -fno-exceptions (as many game
// engines are): every failure arrives as a result with the library's status and message, the
// buffers of resolve grow at their exact boundary, and taking the value of a failed result
// aborts rather than continuing with garbage.
//   test_no_exceptions FIXTURES_DIR WORK_DIR        closes with "N passed, N failed"
#include "assetpatch.hpp"
#include "fixtures.hpp"

#if ASSETPATCH_HPP_EXCEPTIONS
#error "build this test with -fno-exceptions"
#endif

#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

static int passed = 0, failed = 0;
static bool current_ok = true;

// Records a failed expectation and goes on (no exceptions to unwind with).
#define EXPECT(cond)                                                                  \
    do {                                                                              \
        if (!(cond)) {                                                                \
            std::cout << "  line " << __LINE__ << ": " #cond << "\n";                 \
            current_ok = false;                                                       \
        }                                                                             \
    } while (0)

template <class F> static void run(const char* name, F f) {
    current_ok = true;
    f();
    (current_ok ? passed : failed)++;
    std::cout << (current_ok ? "ok - " : "not ok - ") << name << "\n";
}

// Whether `f` run in a child process ends it with SIGABRT.
template <class F> static bool aborts(F f) {
    std::fflush(nullptr);
    const pid_t pid = fork();
    if (pid == 0) {
        f();
        _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT;
}

int main(int argc, char** argv) {
    if (argc != 3) { std::cerr << "usage: test_no_exceptions FIXTURES_DIR WORK_DIR\n"; return 2; }
    fixtures = argv[1];
    work = argv[2];
    const std::filesystem::path bundle = std::filesystem::path(fixtures) / "bundle";

    run("open_fails_with_status_and_message", [&] {
        const auto file = std::filesystem::path(work) / "a-file";
        std::ofstream(file) << "not a directory";
        auto r = assetpatch::client::try_open(file / "data", bundle);
        EXPECT(!r.ok() && !r);
        EXPECT(r.error().status() == ASSETPATCH_ERR_IO);
        EXPECT(std::string(r.error().name()) == "ASSETPATCH_ERR_IO");
        EXPECT(r.error().message().find("a-file") != std::string::npos);
    });
    run("failures_carry_status_name_and_message", [&] {
        auto c = assetpatch::client::try_open(fresh("b"), bundle);
        EXPECT(c.ok() && c.error().status() == 0);
        auto bad = c->try_resolve("../etc/passwd");
        EXPECT(bad.error().status() == ASSETPATCH_ERR_ARGUMENT);
        EXPECT(bad.error().message().find("invalid resource name") != std::string::npos);
        EXPECT(c->try_resolve("missing").error().status() == ASSETPATCH_ERR_NOT_FOUND);
        auto option = c->try_set("bogus", "1");
        EXPECT(option.error().status() == ASSETPATCH_ERR_ARGUMENT && option.error().message().find("bogus") != std::string::npos);
        EXPECT(c->try_update().error().status() == ASSETPATCH_ERR_STATE);  // no manifest_url yet
        EXPECT(c->try_resolve("missing").value_or("fallback") == "fallback");
        EXPECT(c->try_rollback().error().status() == ASSETPATCH_ERR_STATE);  // nothing to go back to
    });
    run("check_update_and_resolve", [&] {
        auto c = assetpatch::client::try_open(fresh("c"), bundle);
        EXPECT(c->try_set("manifest_url", url("v2")).ok() && c->try_set("variants", "@3x,@2x,").ok());
        auto avail = c->try_check();
        EXPECT(avail.ok() && *avail && (*avail)->version == 2 && (*avail)->download_bytes > 0);
        std::vector<assetpatch::phase> phases;
        auto installed = c->try_update([&](const assetpatch::progress& p) {
            if (phases.empty() || phases.back() != p.phase) phases.push_back(p.phase);
            return false;
        });
        EXPECT(installed.ok() && *installed);
        EXPECT(!phases.empty() && phases.front() == assetpatch::phase::check && phases.back() == assetpatch::phase::done);
        EXPECT(c->try_current_version().value_or(-1) == 2);
        auto path = c->try_resolve("sub/sample.png");
        EXPECT(path.ok() && slurp(*path) == slurp(std::filesystem::path(fixtures) / "assets-v2/sub/sample@3x.png"));
        auto again = c->try_check();
        EXPECT(again.ok() && !*again);
        auto notes = c->try_release_notes();
        EXPECT(notes.ok() && notes->find("Winter event") == 0);
        auto life = c->try_lifecycle();
        EXPECT(life.ok() && life->active_version == 2);
    });
    run("a_progress_callback_cancels", [&] {
        auto c = assetpatch::client::try_open(fresh("d"), bundle);
        c->try_set("manifest_url", url("v2"));
        auto r = c->try_update([](const assetpatch::progress& p) { return p.phase == assetpatch::phase::download; });
        EXPECT(r.error().status() == ASSETPATCH_ERR_CANCELLED);
        EXPECT(c->try_current_version().value_or(-1) == 0);
        EXPECT(c->try_update().value_or(false));  // the next attempt works
    });
    run("background_update_wait_and_move", [&] {
        auto opened = assetpatch::client::try_open(fresh("e"), bundle);
        assetpatch::client c = std::move(*opened);
        c.try_set("manifest_url", url("v1"));
        int calls = 0;
        EXPECT(c.try_start_update([&](const assetpatch::progress&) { calls++; return false; }).ok());
        assetpatch::client moved(std::move(c));
        auto r = moved.try_wait();
        EXPECT(r.ok() && *r && **r);
        EXPECT(calls > 0);
        auto gone = c.try_current_version();
        EXPECT(gone.error().status() == ASSETPATCH_ERR_STATE && gone.error().message() == "client was moved from");
        EXPECT(c.handle() == nullptr);
        EXPECT(moved.try_wait().error().status() == ASSETPATCH_ERR_STATE);  // no update started since
        // A background update's failure is the wait's, with its message.
        moved.try_set("manifest_url", url("missing"));
        EXPECT(moved.try_start_update().ok());
        auto failure = moved.try_wait();
        EXPECT(!failure.ok() && failure.error().status() == ASSETPATCH_ERR_IO);
        EXPECT(failure.error().message().find("missing") != std::string::npos);
    });
    run("resolve_grows_its_buffer_at_the_boundary", [&] {
        // The first buffer holds 256 bytes with the NUL: paths of 255, 256 and 257 bytes.
        for (std::size_t want : {255u, 256u, 257u}) {
            const std::string tail = "/readme.txt";
            const std::string base = work + "/long-";
            std::string dir = base + std::string(want - tail.size() - base.size(), 'b');
            std::filesystem::remove_all(dir);
            std::filesystem::create_directories(dir);
            std::filesystem::copy_file(bundle / "readme.txt", dir + tail);
            auto c = assetpatch::client::try_open(fresh("f"), std::filesystem::path(dir));
            auto path = c->try_resolve("readme.txt");
            EXPECT(path.ok() && path->string().size() == want && path->string() == dir + tail);
        }
    });
    run("a_plugin_through_try_load_plugin", [&] {
        auto c = assetpatch::client::try_open(fresh("plug"));
        c->try_set("manifest_url", url("plug"));
        c->try_set("allow_unsigned_plugins", "1");
        EXPECT(c->try_update().value_or(false));
        auto list = c->try_plugins();
        EXPECT(list.ok() && list->size() == 1);
        auto entry = c->try_load_plugin("fixture");
        EXPECT(entry.ok() && reinterpret_cast<int (*)()>(*entry)() == 42);
        EXPECT(c->try_load_plugin("fixture", "missing").error().status() == ASSETPATCH_ERR_NOT_FOUND);
    });
    run("taking_a_failed_value_aborts", [&] {
        auto c = assetpatch::client::try_open(fresh("g"), bundle);
        EXPECT(aborts([&] { (void)c->try_resolve("missing").value(); }));
        EXPECT(aborts([&] { c->try_update().value(); }));
        EXPECT(!aborts([&] { (void)c->try_resolve("readme.txt").value(); }));
    });

    std::cout << passed << " passed, " << failed << " failed\n";
    return failed ? 1 : 0;
}
